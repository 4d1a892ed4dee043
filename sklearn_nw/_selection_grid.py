"""The CV estimators' search: the bandwidth strategy that scores a grid of candidates.

:class:`BandwidthGridSearch` is a strategy of :mod:`sklearn_nw._selection`'s protocol,
``select(training) -> Choice``: its candidates come in families (each degree's fixed
bandwidths, then its adaptive ones), scored by exact leave-one-out
(:mod:`sklearn_nw._grids`) or by :class:`~sklearn.model_selection.GridSearchCV` with a
splitter, and chosen by the rules :mod:`sklearn_nw._selection` holds once.
"""

import re
import warnings
from inspect import signature

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from ._adaptive import KINDS, Adaptive
from ._grids import (
    LeaveOneOutAdaptiveGrid,
    LeaveOneOutGrid,
    dense_leave_one_out_bytes,
    local_fit_row_bytes,
)
from ._leave_one_out import distinct_inputs, distinct_rows
from ._local_poly import n_terms
from ._loo_descent import FULL_BATCH_MAX
from ._selection import (
    MAX_EXTENSIONS,
    Family,
    best_finite,
    candidate_params,
    choose,
    concatenate_results,
    default_multiples,
    local_anchor,
    rank_scores,
    search_choice,
    search_fixed,
)
from .bandwidth import AdaptiveBandwidth, LeaveOneOutBandwidth

# degree="auto" tries local polynomials where their exact leave-one-out grid costs at most
# this much (n p)^2 per grid point: n=1,600, d=9 (p = 10) took 30 s a fit here, against a
# tenth of a second for degree 0.
_AUTO_MAX_WORK = 5e7


# The adaptive bandwidths' candidates: k nearest (units of sample weight) times scale c. A
# best point at an end of either goes on past it (k doubled, c halved or doubled), up to
# MAX_EXTENSIONS times, while the family leads the families searched before it.
_ADAPTIVE_NEIGHBORS = (1, 2, 4, 8, 16, 32, 64)
_ADAPTIVE_SCALES = (0.25, 0.5, 1.0)
# bandwidth_kinds="auto" tries adaptive bandwidths (exact leave-one-out, dense (L, L)
# matrices of the L distinct inputs) up to this many distinct inputs; with local
# polynomials (degree="auto") only while (L p)^2 per candidate stays below this (1-D
# series, small tables: their candidates outnumber the fixed grid's).
_ADAPTIVE_AUTO_MAX_INPUTS = 4096
_ADAPTIVE_LOCAL_MAX_WORK = 5e6
# Above FULL_BATCH_MAX rows, the descent that centers the grid of categorical features
# runs full batch on this many of them (drawn at random, seed 0) instead of on
# minibatches of every row; the grid searches on from it on every row. Measured (ad hoc,
# fair's 6,366 rows, 5 shuffled folds at seed 1): test R^2 0.0701 against 0.0600, a
# fold's fit 3.28 s against 6.57 s; on its first 3,000 rows (full batch either way) a
# subsample gained nothing (0.0862 against 0.0875), so smaller sets keep every row.
_CENTER_ROWS = 2048
# The descent that centers the grid of categorical features stops when an iteration
# gains less than this relative: the grid's multiples search on from the center. Measured
# (bench_categorical's four tables, 5 seeds x 5 folds, against the descent's default
# 1e-8): fair 0.1525 -> 0.1584 R^2 and 1.99 -> 1.79 s a fold, grunfeld +0.0006, anes96
# -0.0002, modechoice -0.0019 (1e-2: fair 0.165, anes96 -0.0028).
_CENTER_TOL = 1e-3
FAMILIES = ("fixed", *KINDS)


def _accepts_sample_weight(scorer):
    """Whether a scorer takes ``sample_weight``, decided as GridSearchCV decides it."""
    accept = getattr(scorer, "_accept_sample_weight", None)  # scikit-learn's scorers
    if accept is not None:
        return accept()
    return "sample_weight" in signature(scorer).parameters


class BandwidthGridSearch:
    """The CV estimators' bandwidth strategy: the best point of a grid, by exact
    leave-one-out (``cv=None``, :class:`~sklearn_nw._grids.LeaveOneOutGrid`) or by
    :class:`~sklearn.model_selection.GridSearchCV` with a splitter.

    ``select(training)`` returns a :class:`~sklearn_nw._selection.Choice` whose report
    holds the CV estimators' ``cv_results_``, ``best_index_``, ``best_score_``,
    ``bandwidths_``, ``best_params_`` (and the regressor's ``degree_``).

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
    leave_out : {"row", "input"}
        The unit the exact leave-one-out (``cv=None``) leaves out
        (:mod:`sklearn_nw._leave_one_out`).
    """

    def __init__(self, bandwidths, *, cv=None, scorer=None, estimator=None, params=None,
                 routed=None, owner=None, degree=0, kinds=("fixed",), bounded=False,
                 selection="one_se", leave_out="row"):
        self.bandwidths = bandwidths
        self.leave_out = leave_out
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
        and return the chosen one as a :class:`~sklearn_nw._selection.Choice`.

        The candidates come in families, one per degree and kind of bandwidth (fixed,
        balloon, sample-point), searched one after the other, simplest first: each
        degree's fixed bandwidths, then its adaptive ones, then the next degree's. With
        ``selection="one_se"`` each family's choice is its smoothest candidate within one
        standard error of its best
        (:func:`~sklearn_nw._selection.smoothest_within_one_se`), and a family is kept
        over the one kept before it only if its choice beats that one's by more than one
        standard error (:func:`~sklearn_nw._selection.one_standard_error`); without
        per-sample scores (a scorer of the leave-one-out predictions, the classifier's
        default log-loss) the
        best candidate. With ``selection="min"`` the best candidate of all (the first on
        ties).

        A default grid (multiples of the reference bandwidth) is searched rather than
        scored at every point (:func:`~sklearn_nw._selection.search_fixed`); one whose
        best point is at one of its ends goes on past it, ``EXTEND_BY`` points at a time
        at the grid's ratio, up to ``MAX_EXTENSIONS`` times: the optimum can lie far from
        Scott's rule (a series with a short period, or no signal at all); so do the
        adaptive candidates' k and c.
        """
        degrees = (_auto_degrees(training.X.shape, self.estimator.n_neighbors,
                                 training.working_memory) if self.degree == "auto"
                   else [self.degree])
        if training.categorical is not None and self.degree == "auto":
            # Local polynomials in the continuous features (np's rule): their count.
            n_continuous = training.categorical.n_continuous
            degrees = [0] if not n_continuous else _auto_degrees(
                (len(training.X), n_continuous), self.estimator.n_neighbors,
                training.working_memory)
        self._shared = {}  # the adaptive grids' neighbors, found once for this fit
        self._caught = {}  # the candidate fits' warnings, emitted once each (_warn_once)
        kinds = self._kinds(training)
        families = [(degree, kind) for degree in degrees for kind in kinds
                    if not (degree and kind != "fixed" and self.kinds == "auto"
                            and (len(training.X) * n_terms(training.X.shape[1], degree)) ** 2
                            > _ADAPTIVE_LOCAL_MAX_WORK)]
        runs = []
        anchor = None  # where Nadaraya-Watson's fixed bandwidths do best (local_anchor)
        for degree, kind in families:
            # The best score so far: an adaptive family goes on past its grid's edges
            # only while it beats it.
            leader = max((float(run.scores[i]) for run in runs
                          if (i := best_finite(run.scores)) is not None), default=None)
            runs.append(self._search(training, degree, kind, leader,
                                     anchor if degree else None))
            if (degree, kind) == (0, "fixed"):
                anchor = local_anchor(runs[-1], self._reference(training))
        grid = np.concatenate([run.grid for run in runs])
        cv_results = concatenate_results([run.cv_results for run in runs])
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
        with_degree = "degree" in self.estimator.get_params()
        # Reported as bandwidth_ is, lambda at the categorical features.
        shown = grid if training.categorical is None else training.categorical.public(grid)
        cv_results["param_bandwidth"], cv_results["params"] = candidate_params(
            shown, adaptive, degree_of if with_degree else None)
        cv_results["rank_test_score"] = rank_scores(
            np.concatenate([run.scores for run in runs]))
        self._warn_once()
        best, chosen = choose(runs, self.selection)
        return search_choice(grid, cv_results, best, families[chosen][0], adaptive[best],
                             with_degree=with_degree, shown=shown)

    def _kinds(self, training):
        """The kinds of bandwidth searched: as given, in the order of ``FAMILIES``; for
        ``"auto"`` all three with a default grid and exact leave-one-out up to
        ``_ADAPTIVE_AUTO_MAX_INPUTS`` distinct inputs whose dense matrices fit in
        ``working_memory``, else fixed bandwidths only."""
        if training.categorical is not None and not training.categorical.n_continuous:
            if self.kinds not in ("auto", ("fixed",)):
                training.locations()  # raises: no continuous feature to measure
            return ("fixed",)
        if self.cv is None and training.groups is not None:
            # Leave-one-group-out is exact for fixed bandwidths only (LeaveOneOutGrid).
            if self.kinds not in ("auto", ("fixed",)):
                raise NotImplementedError(
                    "Leave-one-group-out (groups given to fit with cv=None) of adaptive "
                    "bandwidths is not supported: their k nearest neighbors would have to "
                    "be found outside each query's group. Use bandwidth_kinds=['fixed'] "
                    "(or 'auto'), or a splitter such as cv=LeaveOneGroupOut().")
            return ("fixed",)
        if self.kinds != "auto":
            return tuple(kind for kind in FAMILIES if kind in self.kinds)
        n_keys = len(_adaptive_key_weights(training, self.leave_out))
        if (self.cv is None and default_multiples(self.bandwidths) is not None
                and n_keys <= _ADAPTIVE_AUTO_MAX_INPUTS
                and dense_leave_one_out_bytes(n_keys) <= training.working_memory * 2**20
                and _max_neighbors(training) >= 2):
            return FAMILIES
        return ("fixed",)

    def _search(self, training, degree, kind, leader=None, anchor=None):
        """Scores, results and grid of one family, the default grid extended past an end
        that holds its best point (an adaptive family's only while its best beats
        ``leader``, the best score of the families searched before it); a fixed family's
        default grid placed around ``anchor`` when given
        (:func:`~sklearn_nw._selection.default_multiples`)."""
        if kind != "fixed":
            return self._adaptive_search(training, degree, kind, leader)
        bandwidths = self.bandwidths
        if training.categorical is not None and default_multiples(bandwidths) is None:
            # Given as bandwidth_ is: lambda at the categorical features.
            bandwidths = np.array([training.categorical.check(row)
                                   for row in np.asarray(bandwidths, dtype=object)])
        reference = self._reference(training)
        return search_fixed(lambda grid: self._scores(grid, training, degree),
                            bandwidths, reference, training.nearest_multiple(reference),
                            anchor, self.selection)

    def _reference(self, training):
        """The center of the default grid: Scott's rule; with categorical features the
        learned per-feature bandwidths (the descent on the exact leave-one-out loss of
        Nadaraya-Watson), found once per fit. Multiples of a rule of thumb move every
        bandwidth and every lambda together, a family that cannot weigh a category
        against a distance (measured: bench_categorical)."""
        if training.categorical is None or default_multiples(self.bandwidths) is None:
            return training.reference()
        if "reference" not in self._shared:
            learner = LeaveOneOutBandwidth(leave_out=self.leave_out,
                                           tol=_CENTER_TOL)
            with warnings.catch_warnings():
                # A center for the grid, which searches on from it: a descent stopped at
                # max_iter is still one.
                warnings.simplefilter("ignore", ConvergenceWarning)
                center = training._replace(degree=0).subsample(_CENTER_ROWS,
                                                               above=FULL_BATCH_MAX)
                self._shared["reference"] = center.learn_bandwidth(learner).bandwidth
        return self._shared["reference"]

    def _adaptive_search(self, training, degree, kind, leader=None):
        """Scores and results of the adaptive bandwidths of one kind: every k of
        ``_ADAPTIVE_NEIGHBORS`` (up to what the data hold) with every c of
        ``_ADAPTIVE_SCALES`` (for local polynomials c = 1), in the metric of the reference
        bandwidth; a best point at the largest k adds the next k (with every c), one at
        either end of c the next c (with the best k and its neighbors in k), while the
        family's best beats ``leader`` (the best score of the families searched before
        it; None: always). Past the grid's edges an adaptive family tends to the fixed
        bandwidths (k large, c small: a smoothed density's bandwidth; a constant one as k
        nears n), which were scored first: a family they beat mostly walks on toward them,
        at the cost of its largest k (measured, ad hoc: bench_fit_time's smooth 1-D target
        on 4,000 points, 5.7 s a fit with the walk to k = 1,024, 1.0 s without it, the
        same choice), now and then overtaking them (bench_accuracy's randhie at seed 0:
        in 3 of 5 folds, R^2 0.042 -> 0.0375 over the folds; the mean difference to the
        tuned KNN over seeds 0-4 unchanged at +0.003)."""
        # The metric of the distances: with categorical features, the grid's center (the
        # learned smoothing of the categories is kept by every candidate).
        base = (training.reference() if training.categorical is None
                else self._reference(training))
        k_max = _max_neighbors(training)
        ks = [k for k in _ADAPTIVE_NEIGHBORS if k <= k_max] or [k_max]
        # Local polynomials: k alone sets the smoothing (as locfit's nearest-neighbor
        # fraction), at c = 1; their fits cost more per candidate.
        scales = list(_ADAPTIVE_SCALES) if not degree else [1.0]
        candidates, scores, cv_results, samples = [], np.empty(0), None, None
        new = [Adaptive(kind, k, c) for k in ks for c in scales]
        for _ in range(MAX_EXTENSIONS + 1):
            new_scores, new_results, new_samples = self._scores(
                new, training, degree, base=base)
            candidates += new
            scores = np.concatenate([scores, new_scores])
            cv_results = (new_results if cv_results is None
                          else concatenate_results([cv_results, new_results]))
            if new_samples is not None:
                samples = (new_samples if samples is None else
                           (np.concatenate([samples[0], new_samples[0]]), samples[1]))
            best = best_finite(scores)
            if best is None:  # every candidate failed: nothing to go on past
                break
            if leader is not None and not scores[best] > leader:
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
        return Family(scores, cv_results, grid, samples, candidates)

    def _scores(self, grid, training, degree, base=None):
        """Scores to rank the grid by, the results as reported, and the scores per sample
        with their weights (``(G, m)`` and ``(m,)``: each distinct input's negative
        leave-one-out loss, or each split's score; None for a scorer of the leave-one-out
        predictions), for the one-standard-error choice of a family. ``grid`` is an
        array of bandwidths, or with ``base`` (the metric) a list of Adaptive."""
        if self.cv is None:
            # With n_neighbors, the scores of the deployed model: each point's k nearest
            # among the others.
            points = (LeaveOneOutGrid(grid, degree=degree, bounded=self.bounded,
                                        n_neighbors=self.estimator.n_neighbors)
                        if base is None
                        else LeaveOneOutAdaptiveGrid(grid, base, degree=degree,
                                                     shared=self._shared,
                                                     bounded=self.bounded))
            scores, reported, samples = training.leave_one_out_scores(
                points, self.scorer,
                None if self.scorer is None else self._score_params(training),
                leave_out=self.leave_out)
            return scores, {"mean_test_score": reported}, samples
        if base is not None:
            grid = [AdaptiveBandwidth(a.kind, n_neighbors=a.n_neighbors, scale=a.scale,
                                      base=base) for a in grid]
        cv_results = self._cross_validate(grid, training, degree)
        splits = np.column_stack([v for k, v in cv_results.items()
                                  if re.fullmatch(r"split\d+_test_score", k)])  # (G, k)
        return cv_results["mean_test_score"], cv_results, (splits, np.ones(splits.shape[1]))

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
            X, grid = training.X, list(grid)
            if training.categorical is not None:
                # The candidates as the plain estimator takes them (lambda), on the inputs
                # as given (their categories learned on each split's training part).
                X, grid = training.raw_X, list(training.categorical.public(np.array(grid)))
            search = GridSearchCV(
                estimator, {"bandwidth": grid}, cv=self.cv, scoring=self.scorer,
                refit=False,
            ).fit(X, training.y, **self._search_params(training))
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


def _adaptive_key_weights(training, leave_out):
    """The weights of the keys an adaptive bandwidth's exact leave-one-out poses: every
    distinct row under ``leave_out="row"``, every distinct input under ``"input"``."""
    w = training.sample_weight
    if leave_out == "row":
        _, inverse = distinct_rows(training.X, training.values, w)
    else:
        _, inverse = distinct_inputs(training.X)
    return np.bincount(inverse, weights=w)


def _max_neighbors(training):
    """The largest k an adaptive bandwidth's exact leave-one-out allows: k units of
    weight at other locations than any input and any neighbor of it left out (under
    either ``leave_out``: a sample-point key's bandwidth never counts its own input)."""
    _, inverse = distinct_inputs(training.locations())
    weight = np.bincount(inverse, weights=training.sample_weight)
    return max(1, int(np.floor(weight.sum() - 2 * weight.max() + 1e-9)))
