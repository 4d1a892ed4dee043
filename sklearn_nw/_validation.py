"""Parameter validation that every estimator shares, local and Dask: the constraint for
numbers, and the one table of the parameter combinations they refuse, each with its
message.

scikit-learn's ``_parameter_constraints`` check each parameter alone; the table holds
what only a pair of them rules out (an adaptive bandwidth with ``n_neighbors``, local
polynomials with precomputed distances, ...). Each estimator refuses them at the start of
``fit``, before any long work (a bandwidth search, an index, a cluster's pass over the
data), with :func:`check_combinations`.
"""

from collections.abc import Callable
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_array, check_consistent_length

from ._scale import RULES_OF_THUMB
from .bandwidth import AdaptiveBandwidth, LeaveOneOutBandwidth


class NumberInterval(Interval):
    """scikit-learn's :class:`~sklearn.utils._param_validation.Interval` for numbers
    proper: a boolean is no count of neighbors nor a width, and any real number (a
    ``Fraction``, which ``np.isnan`` refuses) is compared by its float value."""

    def is_satisfied_by(self, val):
        if isinstance(val, (bool, np.bool_)):
            return False
        if isinstance(val, Real) and not isinstance(val, (Integral, float, np.floating)):
            try:
                val = float(val)
            except (OverflowError, TypeError, ValueError):
                return False
        return super().is_satisfied_by(val)


class Conflict(NamedTuple):
    """A parameter value that a :class:`Refusal` names when it is present."""

    name: str  # how the message names it: a template on the parameters
    present: Callable  # parameters -> whether the estimator has it
    instead: str = ""  # what would work instead, where the message says


class Refusal(NamedTuple):
    """A parameter value that cannot go with some others, and what the error says."""

    scope: str  # the estimators and the step that check it (see check_combinations)
    applies: Callable  # parameters -> whether the refusing value is there
    conflicts: tuple  # of Conflict, named in this order
    # The error: a template on the parameters, with {refused} (the present conflicts'
    # names, joined by `join`) and {instead} (their alternatives, joined by " and ").
    message: str
    join: str = " or "


def check_groups(groups, X):
    """``groups`` given to ``fit``, validated against the training inputs ``X``: one label
    per row, 1-D, no NaN, sortable (numbers or strings). Returns each row's group as an
    integer code (n,), or None for None."""
    if groups is None:
        return None
    groups = check_array(groups, ensure_2d=False, dtype=None, input_name="groups")
    if groups.ndim != 1:
        raise ValueError(f"groups must be 1-D, one label per sample; got an array of "
                         f"shape {groups.shape}.")
    check_consistent_length(X, groups)
    try:
        _, code = np.unique(groups, return_inverse=True)
    except TypeError as error:  # labels of types that do not compare (None and str)
        raise TypeError(f"groups must be sortable labels (numbers or strings): {error}"
                        ) from None
    return code.reshape(-1)


def _serves_on_shards(bandwidth):
    """Whether ``sklearn_nw.dask`` computes this ``bandwidth``: a rule of thumb, ``"loo"``,
    a number, an array or a :class:`~sklearn_nw.LeaveOneOutBandwidth` (None: a search
    chooses it)."""
    if bandwidth is None:
        return True
    if isinstance(bandwidth, str):
        return bandwidth in (*RULES_OF_THUMB, "loo")
    return (isinstance(bandwidth, (Real, list, tuple, np.ndarray, LeaveOneOutBandwidth))
            and not isinstance(bandwidth, bool))


def _adaptive_kinds(kinds):
    return kinds != "auto" and any(kind != "fixed" for kind in kinds)


def _always(p):
    return True


# Checked in this order; the first refusal that applies and meets a conflict is raised.
REFUSED_COMBINATIONS = (
    # -- every local fit (_base) -------------------------------------------------------
    Refusal(
        "local", lambda p: isinstance(p["bandwidth"], AdaptiveBandwidth),
        (Conflict("n_neighbors={n_neighbors!r} (the bandwidth already follows the k "
                  "nearest)", lambda p: p["n_neighbors"] is not None),
         Conflict("metric='precomputed'", lambda p: p["metric"] == "precomputed"),
         Conflict("compute='compiled'", lambda p: p["compute"] == "compiled"),
         Conflict("algorithm='cell_list'", lambda p: p["algorithm"] == "cell_list")),
        "An AdaptiveBandwidth finds each query's nearest training points with a tree or a "
        "brute force search and sums over every training point; it cannot be used with "
        "{refused}.",
    ),
    Refusal(
        "local", lambda p: bool(p["degree"]),
        (Conflict("metric='precomputed' (no coordinates to fit a polynomial in)",
                  lambda p: p["metric"] == "precomputed",
                  "feature vectors instead of distances"),
         Conflict("compute='compiled' (the local fits need the attention, computed "
                  "eagerly)", lambda p: p["compute"] == "compiled",
                  "compute='auto' or 'eager'")),
        "degree={degree} fits local polynomials; it cannot be used with {refused}. Use "
        "degree=0, or {instead}.",
    ),
    Refusal(
        "local", lambda p: p["algorithm"] == "cell_list",
        (Conflict("n_neighbors", lambda p: p["n_neighbors"] is not None),),
        "algorithm='cell_list' searches the support of a compact kernel; it cannot find "
        "the k nearest points (n_neighbors). Use 'auto', 'kd_tree' or 'ball_tree'.",
    ),
    Refusal(
        "local", lambda p: p["compute"] == "compiled",
        (Conflict("n_neighbors={n_neighbors!r}", lambda p: p["n_neighbors"] is not None),
         Conflict("algorithm={algorithm!r}",
                  lambda p: p["algorithm"] not in ("auto", "brute")),
         Conflict("metric='precomputed'", lambda p: p["metric"] == "precomputed")),
        "compute='compiled' computes the dense sums over every training point; it cannot "
        "serve {refused}, which restrict attention to some of them. Use compute='auto' or "
        "'eager', or algorithm='brute' without n_neighbors.",
        join=" and ",
    ),
    # -- the local CV estimators' kinds of bandwidth (_cv) -----------------------------
    Refusal(
        "local search", lambda p: _adaptive_kinds(p["bandwidth_kinds"]),
        (Conflict("n_neighbors={n_neighbors!r}", lambda p: p["n_neighbors"] is not None),
         Conflict("compute='compiled'", lambda p: p["compute"] == "compiled"),
         Conflict("algorithm='cell_list'", lambda p: p["algorithm"] == "cell_list")),
        "bandwidth_kinds={bandwidth_kinds!r} searches adaptive bandwidths, which cannot "
        "be used with {refused}.",
    ),
    # -- every Dask fit (sklearn_nw.dask; its constraints already narrow algorithm,
    # compute and metric to what a shard computes) ---------------------------------------
    Refusal(
        "dask", _always,
        (Conflict("n_neighbors={n_neighbors!r}", lambda p: p["n_neighbors"] is not None),),
        "n_neighbors={n_neighbors!r} restricts attention to the k nearest training points, "
        "which needs a global top-k merge across shards; sklearn_nw.dask does not do it. "
        "Use n_neighbors=None, or the local estimator (to_local()).",
    ),
    Refusal(
        "dask", _always,
        (Conflict("degree={degree!r}", lambda p: p["degree"] not in (0, "auto")),
         Conflict("bandwidth={bandwidth!r}", lambda p: not _serves_on_shards(p["bandwidth"]))),
        "sklearn_nw.dask pools Nadaraya-Watson sums over shards of keys with a rule of "
        "thumb, a given or a learned bandwidth; it cannot use {refused}. Use the local "
        "estimator for those (to_local() gives it).",
        join=", ",
    ),
    # -- the Dask CV estimators' search (sklearn_nw.dask) ------------------------------
    Refusal(
        "dask search", _always,
        (Conflict("cv={cv!r}", lambda p: p["cv"] is not None),
         Conflict("scoring={scoring!r}", lambda p: p["scoring"] is not None),
         Conflict("bandwidth_kinds={bandwidth_kinds!r}",
                  lambda p: p["bandwidth_kinds"] != "auto"
                  and list(p["bandwidth_kinds"]) != ["fixed"]),
         Conflict("degree={degree!r}", lambda p: p["degree"] not in ("auto", 0)),
         # The classifier's leave-one-out log-loss has no per-sample scores: both rules
         # take the best grid point, locally as here.
         Conflict("selection='one_se' (the regressor's per-sample one-standard-error rule)",
                  lambda p: p["selection"] == "one_se" and not p["classifier"])),
        "sklearn_nw.dask's CV estimators choose a fixed bandwidth by the exact "
        "leave-one-out loss (Nadaraya-Watson, degree 0); they cannot use {refused}. Use "
        "the local estimator for the others.",
        join=", ",
    ),
)

SCOPES = ("local", "local search", "dask", "dask search")

# What an estimator without the parameter is taken to have: the CV estimators search
# their bandwidth (None) and have no metric; the classifiers fit degree 0.
_ABSENT = {"bandwidth": None, "metric": "euclidean", "degree": 0}


def check_combinations(estimator, scope, **params):
    """Refuse the parameter combinations of :data:`REFUSED_COMBINATIONS` that ``scope``
    checks.

    Parameters
    ----------
    estimator : estimator instance
        Its parameters (``get_params(deep=False)``) are checked.
    scope : {"local", "local search", "dask", "dask search"}
        Which refusals: those of every local fit, of the local CV estimators' kinds of
        bandwidth, of every Dask fit, of the Dask CV estimators' search.
    **params
        Values that replace the estimator's own (the degree ``fit`` is asked for).

    Raises
    ------
    ValueError
        The first refusal of ``scope`` whose parameter meets one of its conflicts, naming
        every conflict present.
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}; got {scope!r}.")
    params = {**_ABSENT, **estimator.get_params(deep=False),
              "classifier": is_classifier(estimator), **params}
    for refusal in REFUSED_COMBINATIONS:
        if refusal.scope != scope or not refusal.applies(params):
            continue
        present = [c for c in refusal.conflicts if c.present(params)]
        if present:
            raise ValueError(refusal.message.format(
                **params, refused=refusal.join.join(c.name.format(**params) for c in present),
                instead=" and ".join(c.instead for c in present if c.instead)))
