"""Nadaraya-Watson estimators with the bandwidth chosen from a grid by cross-validation.

They compose like :class:`~sklearn.linear_model.RidgeCV`: ``fit`` routes the metadata,
builds a grid search (:class:`_BandwidthGridSearch`) that holds the grid, the splitter,
the scorer and the metadata, hands it to the plain estimator's fit path, which calls its
``select`` with the training data (:class:`~sklearn_nw._base.Training`), then copies the
search's results onto the estimator.
"""

import re
import warnings
from inspect import signature
from numbers import Integral
from typing import ClassVar, NamedTuple

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    RegressorMixin,
    _fit_context,
    clone,
    is_classifier,
)
from sklearn.metrics import check_scoring, get_scorer, get_scorer_names
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _raise_for_params,
    _routing_enabled,
    process_routing,
)

from ._adaptive import KINDS, Adaptive
from ._classification import NadarayaWatsonClassifier
from ._docs import ATTRIBUTES, entries
from ._grids import (
    LeaveOneOutAdaptiveGrid,
    LeaveOneOutGrid,
    dense_leave_one_out_bytes,
    local_fit_row_bytes,
)
from ._local_poly import n_terms
from ._regression import NadarayaWatsonRegressor
from .bandwidth import AdaptiveBandwidth, search_reference

# Multiples of Scott's rule in the default grid.
_DEFAULT_GRID = (1 / 8, 8)
_DEFAULT_N_BANDWIDTHS = 25
# A default grid whose best point is at an end is extended past it by this many points, at
# most this many times (8 points of the default grid's ratio 2**(1/4) halve or double h
# twice: four extensions reach 1/2048 or 2048 times Scott's rule).
_EXTEND_BY = 8
_MAX_EXTENSIONS = 4
# degree="auto" tries local polynomials where their exact leave-one-out grid costs at most
# this much (n p)^2 per grid point: n=1,600, d=9 (p = 10) took 30 s a fit here, against a
# tenth of a second for degree 0.
_AUTO_MAX_WORK = 5e7


# The adaptive bandwidths' candidates: k nearest (units of sample weight) times scale c. A
# best point at an end of either goes on past it (k doubled, c halved or doubled), up to
# _MAX_EXTENSIONS times.
_ADAPTIVE_NEIGHBORS = (1, 2, 4, 8, 16, 32, 64)
_ADAPTIVE_SCALES = (0.25, 0.5, 1.0)
# bandwidth_kinds="auto" tries adaptive bandwidths (exact leave-one-out, dense (L, L)
# matrices of the L distinct inputs) up to this many distinct inputs; with local
# polynomials (degree="auto") only while (L p)^2 per candidate stays below this (1-D
# series, small tables: their candidates outnumber the fixed grid's).
_ADAPTIVE_AUTO_MAX_INPUTS = 4096
_ADAPTIVE_LOCAL_MAX_WORK = 5e6
FAMILIES = ("fixed", *KINDS)


def _accepts_sample_weight(scorer):
    """Whether a scorer takes ``sample_weight``, decided as GridSearchCV decides it."""
    accept = getattr(scorer, "_accept_sample_weight", None)  # scikit-learn's scorers
    if accept is not None:
        return accept()
    return "sample_weight" in signature(scorer).parameters


def _search_constraints(plain_class):
    """The plain estimator's parameter constraints, ``bandwidth`` replaced by the search's."""
    constraints = {k: v for k, v in plain_class._parameter_constraints.items()
                   if k not in ("bandwidth", "metric")}
    constraints.update({
        "bandwidths": [Interval(Integral, 1, None, closed="left"), "array-like", None],
        "cv": ["cv_object"],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "bandwidth_kinds": [StrOptions({"auto"}), list, tuple],
        "selection": [StrOptions({"one_se", "min"})],
    })
    if "degree" in constraints:  # the regressor: a degree, or the best by the search
        constraints["degree"] = [*constraints["degree"], StrOptions({"auto"})]
    return constraints


class _FamilySearch(NamedTuple):
    """The search of one degree and kind of bandwidth: its grid, scores and results, and
    the per-sample scores with their weights (None for a scorer of the leave-one-out
    predictions)."""

    scores: np.ndarray  # (G,)
    cv_results: dict
    grid: np.ndarray  # (G, d) bandwidths (for an adaptive kind, the base metric's)
    samples: object  # ((G, m), (m,)) or None
    adaptive: list  # (G,) the Adaptive of each point; None for fixed bandwidths


class GridSearchResult(NamedTuple):
    """What :meth:`_BandwidthGridSearch.select` found."""

    bandwidth: np.ndarray  # (d,) the best grid point (the first on ties), a row of grid
    grid: np.ndarray  # (G, d) the grid as bandwidth vectors
    cv_results: dict  # "mean_test_score", "rank_test_score", "bandwidth", GridSearchCV's
    best_index: int
    best_score: float
    degree: int = 0  # the local polynomials' degree of the best point
    adaptive: object = None  # the best point's Adaptive bandwidth, or None (fixed)


class _BandwidthGridSearch:
    """The CV estimators' bandwidth strategy: the best point of a grid, by exact
    leave-one-out (``cv=None``, :class:`~sklearn_nw._grids.LeaveOneOutGrid`) or by
    :class:`~sklearn.model_selection.GridSearchCV` with a splitter.

    ``select(training)`` returns a :class:`GridSearchResult` and keeps it as ``result_``.

    Parameters
    ----------
    bandwidths : int, array-like or None
        The grid, as the CV estimators take it.
    cv : cross-validation generator, int, iterable or None
    scorer : callable or None
        Scores the leave-one-out predictions or each split; None for the default
        leave-one-out score (the negative weighted loss, in the targets' unit).
    estimator : NadarayaWatsonRegressor or NadarayaWatsonClassifier
        The plain estimator GridSearchCV clones for each grid point and split.
    params : dict
        The fit's metadata as passed, ``sample_weight`` included when given.
    routed : Bunch or None
        scikit-learn's routing of ``params`` (None when routing is off).
    owner : str or None
        The estimator named in the warning about weights the scorer cannot take.
    degree : int or "auto"
        The local polynomials' degree, or ``"auto"`` to search 0, 1 and 2
        (:func:`_auto_degrees`).
    kinds : "auto" or tuple of str
        The kinds of bandwidth (``_check_kinds``).
    bounded : bool
        Local fits bounded by their targets' range, in the exact leave-one-out as in the
        fitted estimator.
    selection : {"one_se", "min"}
        The one-standard-error rule within and between the families, or the best
        candidate.
    """

    def __init__(self, bandwidths, *, cv=None, scorer=None, estimator=None, params=None,
                 routed=None, owner=None, degree=0, kinds=("fixed",), bounded=False,
                 selection="one_se"):
        self.bandwidths = bandwidths
        self.selection = selection
        self.degree = degree
        self.bounded = bounded
        self.kinds = kinds
        self.cv = cv
        self.scorer = scorer
        self.estimator = estimator
        self.params = {} if params is None else params
        self.routed = routed
        self.owner = owner
        self._shared = {}

    def select(self, training):
        """Score every candidate on ``training`` (a :class:`~sklearn_nw._base.Training`)
        and return the best as a :class:`GridSearchResult`.

        The candidates come in families, one per degree and kind of bandwidth (fixed,
        balloon, sample-point), searched one after the other, simplest first: each
        degree's fixed bandwidths, then its adaptive ones, then the next degree's. With
        ``selection="one_se"`` each family's choice is its smoothest candidate within one
        standard error of its best (:func:`_smoothest_within_one_se`), and a family is
        kept over the one kept before it only if its choice beats that one's by more than
        one standard error (:func:`_one_standard_error`); without per-sample scores (a
        scorer of the leave-one-out predictions, the classifier's default log-loss) the
        best candidate. With ``selection="min"`` the best candidate of all (the first on
        ties).

        A default grid (multiples of the reference bandwidth) whose best point is at one
        of its ends goes on past it, ``_EXTEND_BY`` points at a time at the grid's ratio,
        up to ``_MAX_EXTENSIONS`` times: the optimum can lie far from Scott's rule (a
        series with a short period, or no signal at all); so do the adaptive
        candidates' k and c.
        """
        degrees = (_auto_degrees(training.X.shape, self.estimator.n_neighbors,
                                 training.working_memory) if self.degree == "auto"
                   else [self.degree])
        self._shared = {}  # the adaptive grids' neighbors, found once for this fit
        self._caught = {}  # the candidate fits' warnings, emitted once each (_warn_once)
        kinds = self._kinds(training)
        families = [(degree, kind) for degree in degrees for kind in kinds
                    if not (degree and kind != "fixed" and self.kinds == "auto"
                            and (len(training.X) * n_terms(training.X.shape[1], degree)) ** 2
                            > _ADAPTIVE_LOCAL_MAX_WORK)]
        runs = [self._search(training, degree, kind) for degree, kind in families]
        scores = np.concatenate([run.scores for run in runs])
        grid = np.concatenate([run.grid for run in runs])
        cv_results = _concatenate([run.cv_results for run in runs])
        if self.degree == "auto":
            cv_results["degree"] = np.concatenate(
                [np.full(len(run.grid), degree) for run, (degree, _) in zip(runs, families)])
        adaptive = [a for run in runs for a in run.adaptive]
        if kinds != ("fixed",):
            cv_results["kind"] = np.array(["fixed" if a is None else a.kind for a in adaptive])
            for key, field in (("n_neighbors", "n_neighbors"), ("scale", "scale")):
                cv_results[key] = np.ma.masked_array(
                    [0 if a is None else getattr(a, field) for a in adaptive],
                    mask=[a is None for a in adaptive],
                    dtype=np.int64 if key == "n_neighbors" else np.float64)
        degree_of = np.concatenate(
            [np.full(len(run.grid), degree) for run, (degree, _) in zip(runs, families)])
        cv_results["param_bandwidth"], cv_results["params"] = candidate_params(
            grid, adaptive, degree_of if "degree" in self.estimator.get_params() else None)
        cv_results["rank_test_score"] = rank_scores(scores)
        self._warn_once()
        if not np.isfinite(scores).any():
            raise ValueError(
                f"Every candidate's score is non-finite ({len(scores)} candidates: NaN or "
                "infinite); there is none to choose. With a splitter their fits or scores "
                "failed on every split (see the warnings above), or the scoring returned "
                "NaN or infinity."
            )
        if self.selection == "min":
            best = int(np.argmax(_ranked(scores)))
            chosen = int(np.searchsorted(np.cumsum([len(run.grid) for run in runs]),
                                         best, side="right"))
        else:
            picks = [_smoothest_within_one_se(run) for run in runs]
            chosen = _one_standard_error(runs, picks)
            best = sum(len(run.grid) for run in runs[:chosen]) + picks[chosen]
        self.result_ = GridSearchResult(grid[best], grid, cv_results, best,
                                        float(cv_results["mean_test_score"][best]),
                                        families[chosen][0], adaptive[best])
        return self.result_

    def _kinds(self, training):
        """The kinds of bandwidth searched: as given, in the order of ``FAMILIES``; for
        ``"auto"`` all three with a default grid and exact leave-one-out up to
        ``_ADAPTIVE_AUTO_MAX_INPUTS`` distinct inputs whose dense matrices fit in
        ``working_memory``, else fixed bandwidths only."""
        if self.kinds != "auto":
            return tuple(kind for kind in FAMILIES if kind in self.kinds)
        n_inputs = len(np.unique(training.X, axis=0))
        if (self.cv is None and self._default_multiples() is not None
                and n_inputs <= _ADAPTIVE_AUTO_MAX_INPUTS
                and dense_leave_one_out_bytes(n_inputs) <= training.working_memory * 2**20
                and _max_neighbors(training) >= 2):
            return FAMILIES
        return ("fixed",)

    def _search(self, training, degree, kind):
        """Scores, results and grid of one family, the default grid extended past an end
        that holds its best point."""
        if kind != "fixed":
            return self._adaptive_search(training, degree, kind)
        multiples = self._default_multiples()
        grid = self._grid(training, multiples)
        scores, cv_results, samples = self._scores(grid, training, degree)
        for _ in range(_MAX_EXTENSIONS):
            # Failed candidates (non-finite scores) rank last: an end of them is no optimum.
            best = best_finite(scores)
            if (best is None or multiples is None or len(multiples) < 2
                    or 0 < best < len(grid) - 1):
                break
            # Only the new points are scored: every point's score is its own.
            ratio = multiples[1] / multiples[0]
            steps = ratio ** np.arange(1, _EXTEND_BY + 1)  # (E,)
            new = multiples[0] / steps[::-1] if best == 0 else multiples[-1] * steps
            new_scores, new_results, new_samples = self._scores(
                self._grid(training, new), training, degree)
            ordered = (lambda a, b: (b, a)) if best == 0 else (lambda a, b: (a, b))
            multiples = np.concatenate(ordered(multiples, new))
            scores = np.concatenate(ordered(scores, new_scores))
            cv_results = _concatenate(ordered(cv_results, new_results))
            if samples is not None:
                samples = (np.concatenate(ordered(samples[0], new_samples[0])), samples[1])
            grid = self._grid(training, multiples)
        return _FamilySearch(scores, cv_results, grid, samples, [None] * len(grid))

    def _adaptive_search(self, training, degree, kind):
        """Scores and results of the adaptive bandwidths of one kind: every k of
        ``_ADAPTIVE_NEIGHBORS`` (up to what the data hold) with every c of
        ``_ADAPTIVE_SCALES`` (for local polynomials c = 1), in the metric of the reference
        bandwidth; a best point at the largest k adds the next k (with every c), one at
        either end of c the next c (with the best k and its neighbors in k)."""
        base = search_reference(training.X, training.sample_weight)
        k_max = _max_neighbors(training)
        ks = [k for k in _ADAPTIVE_NEIGHBORS if k <= k_max] or [k_max]
        # Local polynomials: k alone sets the smoothing (as locfit's nearest-neighbor
        # fraction), at c = 1; their fits cost more per candidate.
        scales = list(_ADAPTIVE_SCALES) if not degree else [1.0]
        candidates, scores, cv_results, samples = [], np.empty(0), None, None
        new = [Adaptive(kind, k, c) for k in ks for c in scales]
        for _ in range(_MAX_EXTENSIONS + 1):
            new_scores, new_results, new_samples = self._scores(
                new, training, degree, base=base)
            candidates += new
            scores = np.concatenate([scores, new_scores])
            cv_results = (new_results if cv_results is None
                          else _concatenate([cv_results, new_results]))
            if new_samples is not None:
                samples = (new_samples if samples is None else
                           (np.concatenate([samples[0], new_samples[0]]), samples[1]))
            best = best_finite(scores)
            if best is None:  # every candidate failed: nothing to go on past
                break
            best = candidates[best]
            new = []
            if len(scales) > 1 and best.scale in (scales[0], scales[-1]):
                # A scale past the end, with the best k and the ks next to it (the
                # optimum in c moves little with k; every k would double the cost).
                c = best.scale / 2 if best.scale == scales[0] else best.scale * 2
                scales = [c, *scales] if c < scales[0] else [*scales, c]
                i = ks.index(best.n_neighbors)
                new += [Adaptive(kind, k, c) for k in ks[max(0, i - 1) : i + 2]]
            if best.n_neighbors == ks[-1] and 2 * ks[-1] <= k_max:
                ks.append(2 * ks[-1])
                new += [Adaptive(kind, ks[-1], c) for c in scales]
            new = [a for a in dict.fromkeys(new) if a not in candidates]
            if not new:
                break
        grid = np.repeat(base[None], len(candidates), axis=0)
        return _FamilySearch(scores, cv_results, grid, samples, candidates)

    def _scores(self, grid, training, degree, base=None):
        """Scores to rank the grid by, the results as reported, and the scores per sample
        with their weights (``(G, m)`` and ``(m,)``: each distinct input's negative
        leave-one-out loss, or each split's score; None for a scorer of the leave-one-out
        predictions), for the one-standard-error choice of a family. ``grid`` is an
        array of bandwidths, or with ``base`` (the metric) a list of Adaptive."""
        if self.cv is None:
            # Ranked in the pooled values' unit: squared errors in the targets' unit can
            # underflow or overflow (targets of 1e-200 or 1e250).
            # With n_neighbors, the scores of the deployed model: each point's k nearest
            # among the others.
            strategy = (LeaveOneOutGrid(grid, degree=degree, bounded=self.bounded,
                                        n_neighbors=self.estimator.n_neighbors)
                        if base is None
                        else LeaveOneOutAdaptiveGrid(grid, base, degree=degree,
                                                     shared=self._shared,
                                                     bounded=self.bounded))
            scores, reported, samples = self._leave_one_out_scores(strategy, training)
            return scores, {"mean_test_score": reported}, samples
        if base is not None:
            grid = [AdaptiveBandwidth(a.kind, n_neighbors=a.n_neighbors, scale=a.scale,
                                      base=base) for a in grid]
        cv_results = self._cross_validate(grid, training, degree)
        splits = np.column_stack([v for k, v in cv_results.items()
                                  if re.fullmatch(r"split\d+_test_score", k)])  # (G, k)
        return cv_results["mean_test_score"], cv_results, (splits, np.ones(splits.shape[1]))

    def _default_multiples(self):
        """The multiples of the reference bandwidth of a default grid; None for a given
        one."""
        if self.bandwidths is None or isinstance(self.bandwidths, Integral):
            n = _DEFAULT_N_BANDWIDTHS if self.bandwidths is None else self.bandwidths
            return np.geomspace(*_DEFAULT_GRID, n) if n > 1 else np.ones(1)
        return None

    def _grid(self, training, multiples):
        """The grid as an array (G, n_features) of bandwidth vectors: ``multiples`` of
        the reference bandwidth, or the given one."""
        d = training.X.shape[1]
        if multiples is not None:
            return multiples[:, None] * search_reference(training.X, training.sample_weight)
        grid = np.array(self.bandwidths, dtype=np.float64)  # a copy: never the user's array
        if grid.size == 0:
            raise ValueError("bandwidths must not be empty.")
        if grid.ndim == 1:
            grid = np.repeat(grid[:, None], d, axis=1)
        elif grid.ndim != 2 or grid.shape[1] != d:
            raise ValueError(
                "bandwidths must be a sequence of scalars or of per-feature vectors of length "
                f"n_features={d}; got an array of shape {grid.shape}."
            )
        if not np.all(np.isfinite(grid)) or np.any(grid <= 0):
            raise ValueError(f"bandwidths must be positive and finite; got {grid.tolist()}.")
        return grid

    def _leave_one_out_scores(self, strategy, training):
        """Exact leave-one-out scores of every grid point of ``strategy`` (a
        :class:`~sklearn_nw._grids.LeaveOneOutGrid`), in one pass over the data: to
        rank them, and as reported (the default loss in the targets' unit)."""
        loo = training.leave_one_out_set("cv=None")
        score = None
        if self.scorer is not None:
            scorer, score_params = self.scorer, self._score_params(training)

            def score(pooled):  # (L, t) at the distinct inputs
                predictions = _as_fitted(training, training.outputs(loo.expand(pooled)))
                return scorer(predictions, training.X, training.y, **score_params)

        strategy.score = score
        result = strategy.select(
            loo, training.kernel, loss=training.loss, dtype=training.dtype,
            device=training.device, working_memory=training.working_memory,
        )
        if self.scorer is None:
            # The classifier's candidates are all ranked by their log-loss, without
            # per-sample scores: its families are not held to one standard error. On
            # the benchmarks' classification sets (bench_accuracy) the one-standard-error
            # rule on per-sample log-loss kept fixed bandwidths where adaptive ones
            # classify better, and the accuracy (a step function of the bandwidth) chose
            # noisily between near-equal candidates.
            samples = (None if training.classes is not None
                       else (-result.location_loss, loo.weight))
            return result.scores, -training.loss_over_rows(result.loss, loo), samples
        return result.scores, result.scores, None

    def _score_params(self, training):
        """The metadata the scorer of the leave-one-out predictions gets: as routed, or
        without routing the sample weights when given and the scorer takes them (with
        GridSearchCV's warning when it does not)."""
        if self.routed is not None:
            return self.routed.scorer.score
        if "sample_weight" not in self.params:
            return {}
        if _accepts_sample_weight(self.scorer):
            return {"sample_weight": training.sample_weight}
        warnings.warn(
            f"The scoring {self.scorer} does not support sample_weight, which may lead to "
            f"statistically incorrect results when fitting {self.owner} with sample_weight.",
            UserWarning,
        )
        return {}

    def _cross_validate(self, grid, training, degree):
        """GridSearchCV's results over the grid (its ``params`` left out)."""
        estimator = self.estimator
        if degree:
            estimator = clone(estimator).set_params(degree=degree)
        # Each candidate's fit on each split warns on its own (a singular local fit at a
        # small bandwidth: dozens of warnings alike): kept here, emitted by select once
        # per message, its counts aside (_warn_once).
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            search = GridSearchCV(
                estimator, {"bandwidth": list(grid)}, cv=self.cv, scoring=self.scorer,
                refit=False,
            ).fit(training.X, training.y, **self._search_params(training))
        for caught_warning in caught:
            key = (caught_warning.category, re.sub(r"\d+", "#", str(caught_warning.message)))
            self._caught.setdefault(key, []).append(str(caught_warning.message))
        return {k: v for k, v in search.cv_results_.items() if k != "params"}

    def _warn_once(self):
        """Emit the warnings of the candidates' fits kept by :meth:`_cross_validate`:
        one per message (numbers aside), the first of its kind, with their count."""
        for (category, _), messages in self._caught.items():
            more = (f" ({len(messages)} such warnings from the candidates' fits on the "
                    "splits; this is the first.)" if len(messages) > 1 else "")
            warnings.warn(messages[0] + more, category, stacklevel=4)
        self._caught = {}

    def _search_params(self, training):
        """The metadata for GridSearchCV's fit: as passed to ``fit``, with the validated
        sample weights, and none when none were given (ones would make GridSearchCV send
        them to, or warn about, a scorer that takes no ``sample_weight``)."""
        params = dict(self.params)
        if "sample_weight" in params:
            params["sample_weight"] = training.sample_weight
        return params


def _auto_degrees(shape, n_neighbors=None, working_memory=None):
    """The degrees ``degree="auto"`` tries on data of ``shape`` (n, d): 0 and 1, and 2 up
    to two features (the quadratic design has 1 + d + d (d + 1) / 2 terms), each while
    the design has at most a tenth as many terms as there are samples, no more terms
    than ``n_neighbors`` (the k nearest, k units of weight, identify at most k), the
    exact leave-one-out fits cost at most ``_AUTO_MAX_WORK`` (n^2 p^2) per grid point
    and one row of them fits in ``working_memory`` MiB (:func:`local_fit_row_bytes`)."""
    n, d = shape
    return [p for p in (0, 1, 2)
            if p == 0 or (p < 2 or d <= 2) and 10 * n_terms(d, p) <= n
            and (n_neighbors is None or n_terms(d, p) <= n_neighbors)
            and (n * n_terms(d, p)) ** 2 <= _AUTO_MAX_WORK
            and (working_memory is None
                 or local_fit_row_bytes(n, d, p) <= working_memory * 2**20)]


def _max_neighbors(training):
    """The largest k an adaptive bandwidth's exact leave-one-out allows: k units of
    weight at other locations than any input and any neighbor of it left out."""
    _, inverse = np.unique(training.X, axis=0, return_inverse=True)
    weight = np.bincount(inverse.reshape(-1), weights=training.sample_weight)
    return max(1, int(np.floor(weight.sum() - 2 * weight.max() + 1e-9)))


def _smoothest_first(run):
    """A family's (:class:`_FamilySearch`) candidates, smoothest first (G,): by the
    geometric mean of a fixed bandwidth vector; by k c for an adaptive bandwidth (its
    bandwidth c d_k grows with both), ties going to the larger k."""
    if run.adaptive[0] is None:
        return np.argsort(-np.log(run.grid).mean(1), kind="stable")
    k = np.array([a.n_neighbors for a in run.adaptive], dtype=np.float64)
    c = np.array([a.scale for a in run.adaptive])
    return np.lexsort((-k, -k * c))


def _difference_within_one_se(samples, a, b):
    """Whether candidate ``b``'s per-sample scores fall short of ``a``'s by at most one
    standard error of their per-sample differences (weights count as repeated samples);
    ``samples`` is ``((G, m) scores, (m,) weights)``."""
    scores, w = samples
    gain = scores[a] - scores[b]  # (m,)
    mean = float(np.sum(w * gain) / np.sum(w))
    se = float(np.sqrt(np.sum(w * (gain - mean) ** 2) / np.sum(w) / np.sum(w)))
    return mean <= se


def _smoothest_within_one_se(run):
    """A family's choice (an index into its grid): its smoothest candidate
    (:func:`_smoothest_first`) whose score is within one standard error of the best one's
    (Breiman's rule: among candidates the data cannot tell apart, the one that varies
    least with the training sample); the best one without per-sample scores."""
    best = best_finite(run.scores)
    if best is None or run.samples is None:
        return best
    for g in _smoothest_first(run):
        if np.isfinite(run.scores[g]) and _difference_within_one_se(run.samples, best, int(g)):
            return int(g)
    return best


def _one_standard_error(runs, picks=None):
    """Which of the families' searches ``runs`` (:class:`_FamilySearch`) to keep, each
    represented by its candidate ``picks`` (its best ones by default): the first (fixed
    bandwidths of the lowest degree), unless a later one's beats the one kept by more
    than one standard error of their per-sample differences (weights count as repeated
    samples); by the score when there are no per-sample scores (a scorer of the
    leave-one-out predictions, and the classifier's default log-loss). A family without
    a pick (None: none of its candidates has a finite score) is never kept; at least one
    must have one."""
    if picks is None:
        picks = [best_finite(run.scores) for run in runs]
    candidates = [d for d, pick in enumerate(picks) if pick is not None]
    chosen = candidates[0]
    for d in candidates[1:]:
        kept, other = runs[chosen], runs[d]
        if other.samples is None or kept.samples is None:
            if other.scores[picks[d]] > kept.scores[picks[chosen]]:
                chosen = d
            continue
        # Both families' per-sample scores side by side: row 0 the other's choice.
        pair = (np.stack([other.samples[0][picks[d]], kept.samples[0][picks[chosen]]]),
                kept.samples[1])
        if not _difference_within_one_se(pair, 0, 1):
            chosen = d
    return chosen


def _ranked(scores):
    """Scores as they rank (G,): a non-finite one (a failed fit or score: NaN, or
    infinite) below every finite one, as GridSearchCV ranks them."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.where(np.isfinite(scores), scores, -np.inf)


def best_finite(scores):
    """Index of the best finite score (the first on ties); None when none is finite."""
    ranked = _ranked(scores)
    return int(np.argmax(ranked)) if np.isfinite(ranked).any() else None


def rank_scores(scores):
    """``rank_test_score`` (G,): 1 for the best, ties in the grid's order; every
    non-finite score tied last, as GridSearchCV ranks them."""
    finite = np.isfinite(scores)
    rank = np.argsort(np.argsort(-_ranked(scores), kind="stable"), kind="stable") + 1
    rank[~finite] = finite.sum() + 1
    return rank


def candidate_params(grid, adaptive, degree):
    """GridSearchCV's ``param_bandwidth`` (a masked object array of the (d,) bandwidth
    vectors) and ``params`` (one dict per candidate, as ``best_params_``) of the
    candidates: ``grid`` (G, d), their Adaptive or None, their degree (G,) or None (the
    classifier)."""
    column = np.ma.MaskedArray(np.empty(len(grid), dtype=object), mask=False)
    params = []
    for g, (h, a) in enumerate(zip(grid, adaptive)):
        column[g] = h.copy()
        p = {"bandwidth": h.copy(), "kind": "fixed" if a is None else a.kind}
        if a is not None:
            p.update(n_neighbors=a.n_neighbors, scale=a.scale)
        if degree is not None:
            p["degree"] = int(degree[g])
        params.append(p)
    return column, params


def _concatenate(results):
    """cv_results dicts of the same keys, one after the other."""
    if len(results) == 1:
        return results[0]
    joined = {}
    for key, first in results[0].items():
        parts = [r[key] for r in results]
        joined[key] = (np.ma.concatenate(parts) if isinstance(first, np.ma.MaskedArray)
                       else np.concatenate(parts))
    return joined


def _as_fitted(training, outputs):
    """Leave-one-out outputs posing as a fitted estimator, for scikit-learn's scorers."""
    if training.classes is None:
        return _LeaveOneOutRegression(outputs)
    return _LeaveOneOutClassification(outputs, training.classes)


class _LeaveOneOutRegression(RegressorMixin, BaseEstimator):
    """Leave-one-out predictions posing as a fitted regressor, for scikit-learn's scorers."""

    def __init__(self, predictions):
        self.predictions = predictions

    def predict(self, X):
        return self.predictions

    def __sklearn_is_fitted__(self):
        return True


class _LeaveOneOutClassification(ClassifierMixin, BaseEstimator):
    """Leave-one-out probabilities posing as a fitted classifier, for scikit-learn's scorers."""

    def __init__(self, proba, classes):
        self.proba = proba
        self.classes = classes

    @property
    def classes_(self):
        return self.classes

    def predict_proba(self, X):
        # Pooled sums can round a probability to 1 + eps, which scikit-learn's
        # probabilistic scorers (log-loss, Brier) refuse.
        return np.clip(self.proba, 0.0, 1.0)

    def predict(self, X):
        return self.classes[np.argmax(self.proba, axis=1)]

    def __sklearn_is_fitted__(self):
        return True


# -- what the two CV estimators share: fit, metadata routing and the scorer ----------------

_FIT_DOC = """Choose the bandwidth from the grid, then store the training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets; for the classifier, class labels of shape (n_samples,), of any type
            ``numpy.unique`` can sort.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative frequency weights: an integer weight equals repeating the row.
            Without metadata routing they also go to the scorer when it takes
            ``sample_weight``; with routing, to the scorer and the splitter when they
            request them.
        **params : dict
            Metadata for the scorer and the splitter, e.g. ``groups`` for
            :class:`~sklearn.model_selection.GroupKFold`.

            Only available if ``enable_metadata_routing=True``, which can be set by using
            ``sklearn.set_config(enable_metadata_routing=True)``. See
            scikit-learn's `metadata routing user guide
            <https://scikit-learn.org/stable/metadata_routing.html>`_ for more details.

        Returns
        -------
        self : object
            The fitted estimator.

        Notes
        -----
        With ``cv=None`` the sample weights are frequency weights of the leave-one-out
        predictions and weigh the default score; with a splitter they weigh each split's
        fit, and its score when the scorer takes them. So the chosen bandwidth may differ
        between the two, as for :class:`~sklearn.linear_model.RidgeCV`.
        """

_ROUTING_DOC = """Get metadata routing of this object.

        See scikit-learn's `metadata routing user guide
        <https://scikit-learn.org/stable/metadata_routing.html>`_ on how the routing
        mechanism works.

        Returns
        -------
        routing : MetadataRouter
            A :class:`~sklearn.utils.metadata_routing.MetadataRouter` encapsulating
            routing information: this estimator's ``fit``, the scorer's ``score`` and the
            splitter's ``split``.
        """


def _fit_with_grid_search(estimator, X, y, sample_weight, params):
    """``fit`` of a CV estimator, as RidgeCV's: route the metadata, build the grid search,
    fit the plain estimator's way with it, then copy its results."""
    _raise_for_params(params, estimator, "fit")
    if sample_weight is not None:
        params = {**params, "sample_weight": sample_weight}
    routed = process_routing(estimator, "fit", **params) if _routing_enabled() else None
    # The plain estimator with every parameter the two share (the regressor's degree; its
    # degree is set for each candidate when the search chooses it).
    shared = (set(estimator._plain_class().get_params(deep=False))
              & set(estimator.get_params(deep=False)) - {"degree"})
    plain = estimator._plain_class(**{k: getattr(estimator, k) for k in sorted(shared)})
    degree = getattr(estimator, "degree", 0)
    kinds = _check_kinds(estimator)
    if _routing_enabled():
        plain.set_fit_request(sample_weight=True)
    search = _BandwidthGridSearch(
        estimator.bandwidths, cv=estimator.cv,
        # cv=None with the default scoring ranks by the weighted leave-one-out loss.
        scorer=(None if estimator.cv is None and estimator.scoring is None
                else _get_scorer(estimator)),
        estimator=plain, params=params, routed=routed,
        # Only named in a warning about sample weights.
        owner=None if sample_weight is None else str(estimator), degree=degree,
        kinds=kinds, bounded=bool(getattr(estimator, "bounded", False)),
        selection=estimator.selection,
    )
    estimator._fit(X, y, sample_weight, classifier=is_classifier(estimator), search=search,
                   degree=degree)
    result = search.result_
    if "degree" in estimator.get_params(deep=False):
        estimator.degree_ = result.degree
    estimator.cv_results_ = result.cv_results
    estimator.best_index_ = result.best_index
    estimator.best_score_ = result.best_score
    estimator.bandwidths_ = result.grid
    # As GridSearchCV's: the chosen candidate's entry of cv_results_["params"] (its
    # bandwidth the very array of bandwidth_, as before).
    estimator.best_params_ = {**result.cv_results["params"][result.best_index],
                              "bandwidth": result.bandwidth}
    return estimator


def _check_kinds(estimator):
    """``bandwidth_kinds`` as the search takes it ("auto", or a tuple of kinds), with the
    parameters adaptive bandwidths cannot go with refused."""
    kinds = estimator.bandwidth_kinds
    if kinds == "auto":
        return "auto" if estimator.n_neighbors is None else ("fixed",)
    if not kinds or any(kind not in FAMILIES for kind in kinds) or len(set(kinds)) < len(
            kinds):
        raise ValueError(
            f"bandwidth_kinds must be 'auto' or distinct kinds among {FAMILIES}; got "
            f"{kinds!r}."
        )
    if any(kind != "fixed" for kind in kinds):
        refused = [what for what, on in (
            (f"n_neighbors={estimator.n_neighbors!r}", estimator.n_neighbors is not None),
            ("compute='compiled'", estimator.compute == "compiled"),
            ("algorithm='cell_list'", estimator.algorithm == "cell_list")) if on]
        if refused:
            raise ValueError(
                f"bandwidth_kinds={kinds!r} searches adaptive bandwidths, which cannot be "
                f"used with {' or '.join(refused)}."
            )
    return tuple(kinds)


def _metadata_routing(estimator):
    """As RidgeCV's: to the estimator's own fit, the scorer's ``score`` and the splitter's
    ``split``."""
    return (
        MetadataRouter(owner=estimator)
        .add_self_request(estimator)
        .add(
            scorer=_get_scorer(estimator),
            method_mapping=MethodMapping().add(caller="fit", callee="score"),
        )
        .add(
            splitter=estimator.cv,
            method_mapping=MethodMapping().add(caller="fit", callee="split"),
        )
    )


def _get_scorer(estimator):
    """The scorer of ``scoring``.

    With routing on, the default scores (the weighted loss of the leave-one-out
    predictions, or the estimator's ``score`` on each split) use ``sample_weight``
    whenever it is given, so the default scorer requests it, as in RidgeCV.
    """
    if _routing_enabled() and estimator.scoring is None:
        return get_scorer(estimator._default_scoring).set_score_request(sample_weight=True)
    return check_scoring(estimator, scoring=estimator.scoring, allow_none=True)


_SHARED_DOC = r"""
    Parameters
    ----------
    bandwidths : int, array-like of shape (n_bandwidths,) or (n_bandwidths, n_features), default=None
        The grid of fixed bandwidths: scalar bandwidths, or per-feature bandwidth vectors.
        An int ``m`` means ``m`` multiples of Scott's rule, geometrically spaced from 1/8
        to 8; None means 25. Such a default grid whose best point is at one of its ends
        goes on past it, 8 points at a time at the same ratio, up to 4 times (to 1/2048
        or 2048 times Scott's rule); a given grid is searched as it is.
    kernel : str, Kernel or callable, default="gaussian"
        As in the plain estimator.
    bandwidth_kinds : "auto" or list of {{"fixed", "balloon", "sample_point"}}, default="auto"
        The kinds of bandwidth searched: the fixed grid, and
        :class:`~sklearn_nw.AdaptiveBandwidth` of either kind, with k nearest neighbors
        (units of sample weight) 1, 2, 4, ..., 64 (up to what the data hold) and scale c
        1/4, 1/2, 1, all in the metric of Scott's rule; a best point at the largest k, or
        at either end of c, goes on past it (k doubled, c halved or doubled) up to 4
        times. The kinds are searched one after the other, fixed first, and chosen
        between as ``selection`` says. ``"auto"``: all three with ``cv=None``, the default grid and up to 4,096 distinct training
        inputs (the exact leave-one-out of adaptive bandwidths holds dense matrices of
        them) whose six dense (L, L) float64 matrices fit in scikit-learn's
        ``working_memory``, without ``n_neighbors``; otherwise fixed bandwidths only.
        Adaptive kinds asked for by name whose matrices do not fit raise a ValueError
        that says how much memory, or how few distinct inputs, would. Adaptive
        bandwidths count sample weights as repeated rows: unlike the fixed grid's scores,
        theirs change when every weight is scaled.
    cv : int, cross-validation generator or iterable, default=None
        None: exact leave-one-out for every grid point, in one pass over the distance
        blocks (the distances are computed once and shared by all bandwidths), with sample
        weights as frequency weights. Otherwise scikit-learn's splitters, through
        :class:`~sklearn.model_selection.GridSearchCV`.
    scoring : str or callable, default=None
        None: with ``cv=None`` {default_score} of the leave-one-out predictions; with a
        splitter the estimator's ``score``. A scorer name or callable is applied to the
        leave-one-out predictions (``cv=None``) or to each split.
    n_neighbors : int, default=None
        As in the plain estimator. The leave-one-out scores are those of the model
        ``predict`` uses: each training point is predicted from its nearest other inputs
        holding ``n_neighbors`` units of sample weight (the last one in part), as a refit
        without it would predict; points equally near are taken in the search's order,
        as in the plain estimator.
    algorithm : {{"auto", "brute", "kd_tree", "ball_tree", "cell_list"}}, default="auto"
        As in the plain estimator.
    compute : {{"auto", "eager", "compiled"}}, default="auto"
        As in the plain estimator.
    device : str, default="cpu"
        Torch device, as in the plain estimator.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
        The chosen bandwidth (a row of ``bandwidths_``); for an adaptive one, the metric
        its distances are measured in (Scott's rule).
    bandwidths_ : ndarray of shape (n_candidates, n_features)
        Every candidate's bandwidth vector (the rows of ``cv_results_["param_bandwidth"]``):
        the grid with the extensions of a default grid; for adaptive candidates their
        metric.
    best_score_ : float
        Score of the chosen candidate (always finite).
    best_index_ : int
        Its index in ``cv_results_``. With ``selection="one_se"`` the chosen candidate
        need not rank first in ``cv_results_["rank_test_score"]``.
    best_params_ : dict
        The chosen candidate, ``cv_results_["params"][best_index_]``: ``"bandwidth"`` and
        ``"kind"``, for an adaptive bandwidth ``"n_neighbors"`` and ``"scale"``, and for
        the regressor ``"degree"``.
    cv_results_ : dict of 1-D arrays and a list
        One entry per candidate, as :class:`~sklearn.model_selection.GridSearchCV`'s
        (``pandas.DataFrame(cv_results_)`` makes a table of them):

        - ``"param_bandwidth"``: masked object array of the bandwidth vectors, each of
          shape (n_features,) (a row of ``bandwidths_``).
        - ``"params"``: list of dicts, each candidate's parameters as ``best_params_``
          holds them. The plain estimator of candidate ``p`` has
          ``bandwidth=p["bandwidth"]`` (fixed), or
          ``bandwidth=AdaptiveBandwidth(p["kind"], n_neighbors=p["n_neighbors"],
          scale=p["scale"], base=p["bandwidth"])``, and ``degree=p["degree"]``.
        - ``"mean_test_score"``: the score; with ``cv=None`` and ``scoring=None`` the
          negative loss in the targets' unit, exact wherever float64 holds it (-inf
          where the regressor's mean squared error exceeds float64's range, -0.0 where it
          falls below its smallest number; the candidates are ranked on the scaled
          targets, so the ranking and the choice hold all the same).
        - ``"rank_test_score"``: 1 for the best score, ties in the candidates' order; a
          non-finite score (a candidate whose fits or scores failed) ranks last, tied
          with the others, as in GridSearchCV, and is never chosen (an error when every
          candidate has one).
        - ``"kind"``, ``"n_neighbors"`` and ``"scale"`` when adaptive bandwidths are
          searched (the latter two masked for fixed bandwidths), ``"degree"`` with
          ``degree="auto"``.
        - with a splitter, the per-split scores and timings of GridSearchCV. Warnings
          of the candidates' fits come once per message, with their count.
"""  # noqa: E501 (a numpydoc type line is one line)

_DEGREE_DOC = """    degree : {0, 1, 2} or "auto", default="auto"
        As in :class:`NadarayaWatsonRegressor`: the degree of the local polynomials. With
        ``cv=None`` each grid point is scored by exact leave-one-out local fits, computed
        in blocks of rows within scikit-learn's ``working_memory`` (a ValueError when one
        row of them does not fit). ``"auto"`` searches the grid for degrees 0 and 1, and
        2 up to two features, each while its design has at most a tenth as many terms as
        there are samples, no more terms than ``n_neighbors`` (k nearest identify at
        most k), (samples x terms)^2 stays below 5e7 (the exact leave-one-out fits' cost
        per grid point) and one row of its fits fits in ``working_memory``;
        ``cv_results_["degree"]`` lists each candidate's. Adaptive bandwidths are tried
        with local polynomials (``"auto"``) only while (samples x terms)^2 stays below
        5e6: their candidates outnumber the fixed grid's; a higher degree is kept as
        ``selection`` says.
    bounded : bool, default=True
        As in :class:`NadarayaWatsonRegressor` (whose default is False): each local fit
        kept within the range of the targets that carry its weight, in ``predict`` and
        in the leave-one-out fits that choose the degree and bandwidth. On by default:
        one query beyond the training inputs can cost an unbounded local-linear fit more
        squared error than all the others (an extreme income in statsmodels' engel data,
        whose food expenditure grows slower than linearly)."""

_SELECTION_DOC = """    selection : {"one_se", "min"}, default="one_se"
        How the candidate is chosen. ``"one_se"``: Breiman's one-standard-error rule
        wherever the scores come per sample (the leave-one-out loss of each distinct
        training input, the regressor's default score) or per split (a splitter). Within
        each family (a kind of bandwidth, and for the regressor a degree) the smoothest
        candidate (the largest bandwidth, or the largest k c of an adaptive one) whose
        score is within one standard error of the family's best, the others being the
        data's noise; and a family is kept over the simpler one kept before it only if
        its choice beats that one's by more than one standard error, as
        :class:`~sklearn_nw.LeaveOneOutBandwidth` keeps per-feature bandwidths. Without
        per-sample scores (the classifier's default leave-one-out log-loss, or a
        ``scoring`` of the leave-one-out predictions) the best candidate of all.
        ``"min"``: the best candidate of all (the first on ties), as GridSearchCV."""

# The plain estimators' fitted attributes that the CV estimators share.
_FITTED = entries(ATTRIBUTES, "bandwidth_kind_", "bandwidth_neighbors_", "bandwidth_scale_",
                 "key_bandwidths_", "kernel_", "device_", "X_fit_", "route_", "key_set_",
                  "sample_weight_", "attention_weights_", "n_features_in_",
                  "feature_names_in_")


class NadarayaWatsonRegressorCV(NadarayaWatsonRegressor):
    __doc__ = (
        """Nadaraya-Watson regression with the bandwidth chosen from a grid by cross-validation.

    Follows :class:`~sklearn.linear_model.RidgeCV`: ``cv=None`` is an exact, cheap
    leave-one-out; then it predicts like :class:`NadarayaWatsonRegressor` with
    ``bandwidth=bandwidth_``.
"""
        + _SHARED_DOC.format(
            default_score="the negative sample-weighted mean squared error").replace(
            "\n\n    Attributes\n", "\n" + _DEGREE_DOC + "\n" + _SELECTION_DOC
            + "\n\n    Attributes\n", 1)
        + """    degree_ : int
        The degree of the fit: ``degree``, or the one ``"auto"`` chose.
    y_fit_ : ndarray of shape (n_samples_fit,) or (n_samples_fit, n_outputs)
        Training targets, float64.
"""
        + _FITTED
        + """

    See Also
    --------
    NadarayaWatsonRegressor : With a fixed, rule-of-thumb or learned bandwidth.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_nw import NadarayaWatsonRegressorCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 6, (200, 1))
    >>> y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=200)
    >>> reg = NadarayaWatsonRegressorCV(bandwidths=[0.001, 0.3, 30.0]).fit(X, y)
    >>> reg.bandwidth_
    array([0.3])
"""
    )

    _plain_class = NadarayaWatsonRegressor
    _default_scoring = "r2"
    _parameter_constraints: ClassVar[dict] = _search_constraints(NadarayaWatsonRegressor)

    def __init__(self, bandwidths=None, kernel="gaussian", *, bandwidth_kinds="auto", cv=None,
                 scoring=None, n_neighbors=None, algorithm="auto", compute="auto",
                 device="cpu", degree="auto", bounded=True, selection="one_se"):
        self.bandwidths = bandwidths
        self.selection = selection
        self.bandwidth_kinds = bandwidth_kinds
        self.kernel = kernel
        self.cv = cv
        self.scoring = scoring
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.device = device
        self.degree = degree
        self.bounded = bounded

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, **params):
        return _fit_with_grid_search(self, X, y, sample_weight, params)

    fit.__doc__ = _FIT_DOC

    def get_metadata_routing(self):
        return _metadata_routing(self)

    get_metadata_routing.__doc__ = _ROUTING_DOC


class NadarayaWatsonClassifierCV(NadarayaWatsonClassifier):
    __doc__ = (
        """Nadaraya-Watson classification with the bandwidth chosen from a grid by
    cross-validation.

    ``cv=None`` is an exact, cheap leave-one-out; then it predicts like
    :class:`NadarayaWatsonClassifier` with ``bandwidth=bandwidth_``.
"""
        + _SHARED_DOC.format(
            default_score="the negative sample-weighted log-loss (over every kind of "
            "bandwidth: the classifier keeps the best candidate, not the simplest kind "
            "within one standard error)").replace(
            "\n\n    Attributes\n", "\n" + _SELECTION_DOC + "\n\n    Attributes\n", 1)
        + """    classes_ : ndarray of shape (n_classes,)
        The class labels.
    y_fit_ : ndarray of shape (n_samples_fit,)
        Training labels encoded as indices into ``classes_``.
"""
        + _FITTED
        + """

    See Also
    --------
    NadarayaWatsonClassifier : With a fixed, rule-of-thumb or learned bandwidth.
"""
    )

    _plain_class = NadarayaWatsonClassifier
    _default_scoring = "accuracy"
    _parameter_constraints: ClassVar[dict] = _search_constraints(NadarayaWatsonClassifier)

    def __init__(self, bandwidths=None, kernel="gaussian", *, bandwidth_kinds="auto", cv=None,
                 scoring=None, n_neighbors=None, algorithm="auto", compute="auto",
                 device="cpu", selection="one_se"):
        self.bandwidths = bandwidths
        self.selection = selection
        self.bandwidth_kinds = bandwidth_kinds
        self.kernel = kernel
        self.cv = cv
        self.scoring = scoring
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.device = device

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, **params):
        return _fit_with_grid_search(self, X, y, sample_weight, params)

    fit.__doc__ = _FIT_DOC

    def get_metadata_routing(self):
        return _metadata_routing(self)

    get_metadata_routing.__doc__ = _ROUTING_DOC
