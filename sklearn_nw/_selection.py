"""How a bandwidth is chosen, once: the protocol every bandwidth specification follows
and the rules every search shares.

Every ``bandwidth`` (a number, an array, a rule of thumb, ``"loo"``,
:class:`~sklearn_nw.LeaveOneOutBandwidth`, :class:`~sklearn_nw.AdaptiveBandwidth`) and the
CV estimators' search, on one machine or sharded on Dask, resolves at fit to a strategy
with one method, ``select(training) -> Choice``: :class:`Training` is what the estimator
knows at fit, :class:`Choice` what the strategy chose.

The searches over a grid share what follows here: the default grid (multiples of the
reference bandwidth), its search (every fourth point first, then where the choice is
made) and extension past an end that holds the best point, the ranking of
the scores (non-finite ones last, as GridSearchCV ranks them), the one-standard-error rule
and the candidates' ``params``.
"""

import copy
from collections.abc import Callable
from numbers import Integral
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.neighbors import NearestNeighbors

from ._leave_one_out import distinct_inputs, leave_one_out_set
from ._scale import rule_of_thumb, weighted_std

# Multiples of the reference bandwidth (Scott's rule) in the default grid.
DEFAULT_GRID = (1 / 8, 8)
DEFAULT_N_BANDWIDTHS = 25
# A default grid whose best point is at an end is extended past it by this many points, at
# most this many times (8 points of the default grid's ratio 2**(1/4) halve or double h
# twice: four extensions reach 1/2048 or 2048 times Scott's rule).
EXTEND_BY = 8
MAX_EXTENSIONS = 4
# A local polynomial family's default grid placed around a best fixed bandwidth of
# Nadaraya-Watson below the default grid (local_anchor) spans half to this many times it.
ANCHORED_SPAN = 8.0
# A default grid is scored every this many points first, then between them where the
# choice is made (search_fixed): up from its best point as far as the first scored point
# more than SE_MARGIN standard errors short of it.
COARSE_STRIDE = 4
SE_MARGIN = 3.0


class Training(NamedTuple):
    """The training data as a bandwidth strategy sees it, built once at fit.

    The estimator hands it to a strategy's ``select``; the two functions are the
    estimator's own, passed as values, so a strategy never calls back into it.

    What a strategy asks of the data goes through the methods below (:meth:`spread`,
    :meth:`reference`, :meth:`learn_bandwidth`, :meth:`leave_one_out_scores`), which the
    Dask estimators' training set sharded over a cluster
    (:class:`~sklearn_nw._dask_loo.ShardedTraining`) answers too: the strategies run
    unchanged on either.
    """

    X: object  # (n, d) the training inputs, X_fit_ (distances with metric="precomputed")
    y: np.ndarray  # (n,) or (n, n_outputs) the targets as given: y_fit_, or class labels
    classes: object  # (c,) classes_ of a classifier; None for a regressor
    sample_weight: np.ndarray  # (n,)
    values: np.ndarray  # (n, t) the values attention pools (scaled targets, one-hot labels)
    kernel: object  # the resolved Kernel
    loss: object  # the loss of sklearn_nw._losses that leave-one-out minimizes
    device: str
    working_memory: float  # MiB, scikit-learn's working_memory at fit
    estimator_name: str  # named in errors
    # Pooled values (n, t) of the rows -> the estimator's outputs as the user sees them
    # (predictions shaped like y, or class probabilities).
    outputs: Callable
    # (a leave-one-out loss of a LeaveOneOutSet's values, that set) -> the loss of the
    # training rows in the targets' unit.
    loss_over_rows: Callable
    degree: int = 0  # the local polynomials' degree asked for (0: Nadaraya-Watson)
    bounded: bool = False  # local fits bounded by their targets' range (the regressor's)
    precomputed: bool = False  # X holds distances (metric="precomputed")
    # The categorical features (X holds their codes; leave-one-out computes on their
    # embedding, the bandwidths are one scale per feature); None without them.
    categorical: object = None
    raw_X: object = None  # the inputs as given, with categorical features (GridSearchCV's)
    # (n,) int: the group of each row, groups given to fit (leave-one-out leaves a row's
    # group with it); None without groups.
    groups: object = None

    @property
    def dtype(self):
        return self.X.dtype

    @property
    def n_features(self):
        return self.X.shape[1]

    def spread(self):
        """The features' weighted standard deviations (d,) and the total weight: what the
        rules of thumb take."""
        return weighted_std(self.X, self.sample_weight)

    def reference(self):
        """Scott's rule with ``n`` the number of distinct inputs of positive weight: the
        center of the leave-one-out searches' grids. Like leave-one-out itself (a point
        leaves with its copies), it is unchanged by scaling every weight or by repeating
        rows, which ``n = sum(w)`` is not."""
        n = len(distinct_inputs(self.X, self.sample_weight)[0])
        return self.rule_of_thumb("scott", n)

    def subsample(self, n_rows, above=None, seed=0):
        """These rows, or ``n_rows`` of them drawn without replacement (``seed``), in
        their order, where there are more than ``above`` (default ``n_rows``): the grid
        center's descent on large sets."""
        n = len(self.X)
        if n <= (n_rows if above is None else max(above, n_rows)):
            return self
        keep = np.sort(np.random.default_rng(seed).choice(n, n_rows, replace=False))
        return self._replace(
            X=self.X[keep], y=self.y[keep], sample_weight=self.sample_weight[keep],
            values=self.values[keep], raw_X=None,
            groups=None if self.groups is None else self.groups[keep])

    def locations(self):
        """The training inputs (n, d) where adaptive bandwidths measure distances: their
        continuous features (with categorical ones), else all of them."""
        if self.categorical is None:
            return self.X
        if not len(self.categorical.continuous):
            raise ValueError(
                "An adaptive bandwidth measures distances in the continuous features, and "
                "every feature is categorical here: use a fixed or learned bandwidth.")
        return self.X[:, self.categorical.continuous]

    def nearest_multiple(self, reference):
        """The multiple of ``reference`` (d,) at which a bandwidth reaches the median
        distinct input's nearest other one: how far below the default grid its probes
        go (:func:`search_fixed`). None for distances given (``metric="precomputed"``),
        categorical features, or fewer than two distinct inputs."""
        if self.precomputed or self.categorical is not None:
            return None
        return nearest_multiple(distinct_inputs(self.X, self.sample_weight)[0], reference)

    def rule_of_thumb(self, rule, n=None):
        """The bandwidths (d,) of a rule of thumb (``"scott"``, ``"silverman"``) for
        sample size ``n`` (default: the total weight); with categorical features, the
        rule over the continuous ones and Li and Racine's rate for the categories
        (:meth:`~sklearn_nw._categorical.CategoricalFeatures.reference`)."""
        sigma, weight = self.spread()
        return mixed_rule_of_thumb(rule, sigma, weight if n is None else n, self.categorical)

    def learn_bandwidth(self, learner):
        """The :class:`Choice` of ``learner`` (a :class:`~sklearn_nw.LeaveOneOutBandwidth`)
        on these rows' leave-one-out loss, reporting ``n_iter_`` and ``loss_curve_`` (the
        loss of the training rows, in the targets' unit)."""
        loo = self.leave_one_out_set("bandwidth='loo'", learner.leave_out)
        result = learner.learn(
            loo, self.kernel, loss=self.loss, h_start=self.reference(), dtype=self.dtype,
            device=self.device, working_memory=self.working_memory, degree=self.degree,
            bounded=self.bounded,
            categorical=self.categorical,
        )
        report = {"n_iter_": result.n_iter,
                  "loss_curve_": self.loss_over_rows(result.loss_curve, loo)}
        return Choice(result.bandwidth, self.degree, projection=result.projection,
                      report=report)

    def leave_one_out_scores(self, grid, scorer=None, score_params=None, *,
                             leave_out="row"):
        """Exact leave-one-out scores of every point of ``grid`` (a
        :class:`~sklearn_nw._grids.LeaveOneOutGrid` or its adaptive kind), in one pass
        over the data, leaving out the unit ``leave_out`` names: to rank them by, as
        reported (the default loss in the targets' unit, or ``scorer``'s score of the
        leave-one-out predictions) and per sample (``((G, L) scores, (L,) weights)`` of
        leave-one-out's keys; None without them). Ranked in the pooled values' unit:
        squared errors in the targets' unit can underflow or overflow (targets of
        1e-200 or 1e250)."""
        loo = self.leave_one_out_set("cv=None", leave_out)
        score = None
        if scorer is not None:

            def score(pooled):  # (L, t) at the keys
                predictions = _as_fitted(self, self.outputs(loo.expand(pooled)))
                return scorer(predictions, self.X, self.y, **score_params)

        grid.scorer = score
        if self.categorical is not None:  # the bandwidths of the embedded columns
            grid = copy.copy(grid)
            grid.grid = self.categorical.expand(grid.grid)
        result = grid.score(loo, self.kernel, loss=self.loss, dtype=self.dtype,
                            device=self.device, working_memory=self.working_memory)
        if scorer is not None:
            return result.scores, result.scores, None
        # The classifier's candidates are all ranked by their log-loss, without
        # per-sample scores: its families are not held to one standard error. On the
        # benchmarks' classification sets (bench_accuracy) the one-standard-error rule
        # on per-sample log-loss kept fixed bandwidths where adaptive ones classify
        # better, and the accuracy (a step function of the bandwidth) chose noisily
        # between near-equal candidates.
        samples = (None if self.classes is not None
                   else (-result.location_loss, loo.weight))
        return result.scores, -self.loss_over_rows(result.loss, loo), samples

    def leave_one_out_set(self, what, leave_out):
        """The training set as leave-one-out sees it, leaving out the unit ``leave_out``
        names, or each row's group with ``groups`` (:mod:`sklearn_nw._leave_one_out`);
        ``what`` names the search in its error."""
        loo = leave_one_out_set(self.X, self.values, self.sample_weight,
                                leave_out=leave_out, groups=self.groups,
                                estimator_name=f"{self.estimator_name} with {what}")
        if self.categorical is None:
            return loo
        # The keys, embedded; local polynomials in their continuous features.
        return loo._replace(X=self.categorical.embed(loo.X),
                            polynomial_columns=self.categorical.n_continuous)


def mixed_rule_of_thumb(rule, sigma, n, categorical):
    """The parameters (d,) of a rule of thumb for features of spreads ``sigma`` (d,) and
    sample size ``n``: with ``categorical`` features (a
    :class:`~sklearn_nw._categorical.CategoricalFeatures`), the rule over the continuous
    ones and Li and Racine's rate for the categories."""
    if categorical is None:
        return rule_of_thumb(rule, sigma, n)
    h = np.ones(len(sigma))
    continuous = categorical.continuous
    if len(continuous):
        h[continuous] = rule_of_thumb(rule, sigma[continuous], n)
    return categorical.reference(h, n)


class Choice(NamedTuple):
    """What a strategy's ``select`` chose: the fit's bandwidth, and what it reports."""

    bandwidth: np.ndarray  # (d,) bandwidth_; for an adaptive one the metric of its distances
    degree: int  # the local polynomials' degree of the fit (chosen, or the one asked for)
    adaptive: object = None  # the Adaptive bandwidth (kind, k, scale), or None (fixed)
    projection: object = None  # (r, d) the learned full metric (projection_), or None
    # The strategy's fitted attributes by name: n_iter_ and loss_curve_ of a learned
    # bandwidth, cv_results_, best_index_, ... of a search; None for none.
    report: object = None
    # bandwidth_ as given or reported, where the scales differ (lambda at categorical
    # features); None: the categorical features' own conversion of ``bandwidth``.
    shown: object = None


# -- the grid of a search ------------------------------------------------------------------


def nearest_multiple(inputs, reference):
    """The median over the distinct ``inputs`` (L, d) of the distance to the nearest other
    one, in units of ``reference`` (d,); None for fewer than two."""
    if len(inputs) < 2:
        return None
    scaled = inputs / reference
    distance, _ = NearestNeighbors(n_neighbors=2).fit(scaled).kneighbors(scaled)
    return float(np.median(distance[:, 1]))


def default_multiples(bandwidths, anchor=None):
    """The multiples of the reference bandwidth of a default grid (``bandwidths`` None or
    an int, the CV estimators' parameter); None for a given grid.

    ``anchor``: a multiple the grid is placed around (a local polynomial family's grid,
    around the best fixed bandwidth of Nadaraya-Watson: see :func:`local_anchor`), at
    the default grid's ratio, from half of it up to the default grid's end (at least
    twice it), or, for an anchor below the default grid, up to ``ANCHORED_SPAN`` times
    it. For an anchor within the default grid's range the points are the default grid's
    from half the anchor on (its end kept: the one-standard-error rule's smoothest
    candidate of a family lies there); for one below it (a series whose period is
    short), four octaves of points instead of the default grid's six, each of which was
    a full pass of local fits at a bandwidth far above the anchor."""
    if bandwidths is None or isinstance(bandwidths, Integral):
        n = DEFAULT_N_BANDWIDTHS if bandwidths is None else bandwidths
        multiples = np.geomspace(*DEFAULT_GRID, n) if n > 1 else np.ones(1)
        if anchor is None or n < 2:
            return multiples
        ratio = multiples[1] / multiples[0]
        top = (ANCHORED_SPAN * anchor if anchor < multiples[0] * (1 - 1e-9)
               else max(multiples[-1], 2 * anchor))
        below, above = (int(round(np.log(x) / np.log(ratio))) for x in (2.0, top / anchor))
        return anchor * ratio ** np.arange(-below, above + 1, dtype=np.float64)
    return None


def local_anchor(family, reference):
    """The multiple of the reference bandwidth at the best candidate of a family of
    fixed bandwidths (Nadaraya-Watson's, searched first), around which the local
    polynomials' default grids are placed; None when it has no finite score.

    A local polynomial's bias is Nadaraya-Watson's less its design and boundary terms:
    its best bandwidth is rarely below Nadaraya-Watson's, and a grid there (and its
    extension past an end that holds its best point) finds it without the candidates
    of the default grid far from it, each a full pass of local fits (at small bandwidths
    in many features, most of them recomputed one by one, centered at their keys' mean).
    Measured (ad hoc, this machine, 5 outer folds of bench_accuracy's 14 data sets at
    seed 0, against the full default grid): every score the same; diabetes's five fits
    3.6-3.7 -> 1.0-1.1 s, star98's 2.2-2.7 -> 0.8 s (the tuned KNN's 2.0-2.6 s); the
    default regressor CV on bench_fit_time's sets with local polynomials: the same
    choices, co2 1.68 -> 1.20 s, the series of 1,000 points 0.76 -> 0.56 s.
    Ending the grid at 8 times the anchor within the default grid's range as well was
    faster still on 1,000 points in 2 features (0.48 -> 0.33 s) but moved the
    one-standard-error rule's choice, which takes the smoothest candidate within one
    standard error, with the grid's end (engel 0.843 -> 0.838, cancer 0.893 -> 0.892)."""
    best = best_finite(family.scores)
    return None if best is None else float(family.grid[best, 0] / reference[0])


def bandwidth_grid(bandwidths, multiples, reference):
    """The grid as an array (G, d) of bandwidth vectors: ``multiples`` of ``reference``
    (d,), or, when ``multiples`` is None, the given ``bandwidths`` checked (scalars or
    per-feature vectors, positive and finite; a copy, never the user's array)."""
    d = len(reference)
    if multiples is not None:
        return multiples[:, None] * reference
    grid = np.array(bandwidths, dtype=np.float64)
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


class Family(NamedTuple):
    """The search of one family of candidates (a degree and a kind of bandwidth): its
    scores, results and grid, and the per-sample scores with their weights (None for a
    scorer without them)."""

    scores: np.ndarray  # (G,) higher is better
    cv_results: dict
    grid: np.ndarray  # (G, d) bandwidths (for an adaptive kind, the base metric's)
    samples: object  # ((G, m), (m,)) or None
    adaptive: list  # (G,) the Adaptive of each point; None for fixed bandwidths


def search_fixed(score, bandwidths, reference, nearest=None, anchor=None,
                 selection="one_se"):
    """A family of fixed bandwidths: the grid of ``bandwidths`` (default multiples of
    ``reference``, or as given), scored by ``score(grid) -> (scores (G,), cv_results,
    samples or None)``. A given grid is scored at every point; a default grid is
    searched, its candidates (in the order of their bandwidths) the points it scored.
    Every point's score is its own: the same as in a given grid.

    The search of a default grid, on the lattice of its points continued at its ratio:

    1. every ``COARSE_STRIDE``-th point of the grid and its ends are scored;
    2. a grid not placed around an ``anchor`` is probed below, every ``EXTEND_BY``
       points as far as ``nearest``, the multiple of ``reference`` at which a bandwidth
       reaches the typical nearest other input (None: not known); a grid placed around
       an ``anchor`` below the default grid (:func:`default_multiples`), at the default
       grid's end (an anchor is where Nadaraya-Watson's grid and its probes found their
       best point, below which a local polynomial's rarely lies: its grid's own
       extension goes on below when its lowest point is its best);
    3. then, until nothing is left to score, in one call each time: the points between
       the best point and the nearest scored ones on either side (at most
       ``COARSE_STRIDE - 1`` on each, the nearest: a probe's scored neighbors lie
       further, and the next call goes on where the best point moved); where none is left
       there and the best point is the lowest or the highest scored, ``EXTEND_BY``
       points past it (every ``COARSE_STRIDE``-th and the last), up to
       ``MAX_EXTENSIONS`` times on each side; where none is left to extend, with
       ``selection="one_se"`` (and per-sample scores), the points between the family's
       choice (its smoothest candidate within one standard error of the best) and the
       nearest scored one above it, and every point between the best and the first
       scored point above it that falls more than ``SE_MARGIN`` standard errors short
       of it (a candidate's standard error grows with its distance from the best: one
       far from it can be within one standard error where nearer ones are not). Each
       call costs some work of its own (the shared designs of its local fits, the
       distances of a dense pass): one call for each level of halving cost more than
       the points it saved.

    Each point costs a pass of leave-one-out fits. A score that varies smoothly between
    points ``COARSE_STRIDE`` apart has its best point and the one-standard-error choice
    where scoring every point would have put them. Measured (ad hoc, against scoring
    every point): the same choice on each of bench_fit_time's 18 data sets, with 16 to
    53 % fewer candidates in all (the adaptive ones unchanged; the series of 16,000
    points 36 -> 17, its fit 3.1 -> 1.7 s); on bench_accuracy's 14 data sets at seeds
    0-4, the same choice on 348 of the 350 outer folds (grunfeld, 176 training rows: a
    narrow peak of the local-linear loss between two points four apart, missed).

    Why the probes: the leave-one-out loss of a series with a short period has a local
    minimum near Scott's rule and its global one a few points wide far below, which no
    extension from the interior one reaches (measured: a seasonal series of 16,000
    points, test MSE 4.66 at the local minimum against 0.33 of a tuned KNN); a local
    polynomial's loss can have a local minimum near Nadaraya-Watson's bandwidth and its
    global one at a global polynomial (bench_accuracy's engel: a local-quadratic minimum
    at 0.84 times Scott's rule, the best at 2,048 times it). One probe above, not one
    every ``EXTEND_BY`` points: on a series each is a pass of local fits over nearly
    every pair of points (statsmodels' co2, degree 2: 0.135 s each against 0.045 s at
    the anchor, ad hoc).

    ``selection``: ``"one_se"`` or ``"min"`` (the best candidate), as the family's
    choice is made (:func:`choose`)."""
    multiples = default_multiples(bandwidths, anchor)
    if multiples is None or len(multiples) < 2:
        grid = bandwidth_grid(bandwidths, multiples, reference)
        scores, cv_results, samples = score(grid)
        return Family(scores, cv_results, grid, samples, [None] * len(grid))
    lattice = _Lattice(score, multiples, reference)
    last = len(multiples) - 1
    lattice.add(sorted({0, *range(last, -1, -COARSE_STRIDE)}))
    probes = []
    if nearest is not None and anchor is None:
        probes += [k for k in range(-EXTEND_BY, -EXTEND_BY * MAX_EXTENSIONS - 1, -EXTEND_BY)
                   if lattice.multiple(k) >= nearest]
    if anchor is not None and multiples[-1] < DEFAULT_GRID[1] * (1 - 1e-9):
        probes.append(last + int(round(np.log(DEFAULT_GRID[1] / multiples[-1])
                                       / np.log(lattice.ratio))))  # the default grid's end
    lattice.add(probes)
    extensions = {-1: 0, 1: 0}
    while True:
        order, family = lattice.family()
        best = best_finite(family.scores)
        if best is None:
            return family
        # Around the best point: as far as the coarse points' spacing (a probe's scored
        # neighbors lie further).
        wanted = [*_between(order, best, -1, COARSE_STRIDE - 1),
                  *_between(order, best, 1, COARSE_STRIDE - 1)]
        if wanted:
            lattice.add(wanted)
            continue
        side = -1 if best == 0 else 1 if best == len(order) - 1 else 0
        if side and extensions[side] < MAX_EXTENSIONS:
            # The best point at an end: EXTEND_BY more points past it, every
            # COARSE_STRIDE-th and the new end scored.
            extensions[side] += 1
            lattice.add([order[best] + side * j for j in
                         (*range(COARSE_STRIDE, EXTEND_BY, COARSE_STRIDE), EXTEND_BY)])
            continue
        if selection == "one_se" and family.samples is not None:
            wanted += _between(order, smoothest_within_one_se(family), 1)
            for above in range(best + 1, len(order)):
                wanted += _between(order, above - 1, 1)
                if not within_one_se(family.samples, best, above, SE_MARGIN):
                    break
        if not wanted:
            return family
        lattice.add(wanted)


class _Lattice:
    """The points of a default grid scored so far, at positions k on its lattice: its
    ``multiples`` (F,) of ``reference`` for 0 <= k < F, continued below and above at
    their ratio. ``score(grid)`` as :func:`search_fixed` takes it."""

    def __init__(self, score, multiples, reference):
        self.score, self.multiples, self.reference = score, multiples, reference
        self.ratio = multiples[1] / multiples[0]
        self.points = {}  # k -> the Family of its one candidate

    def multiple(self, k):
        last = len(self.multiples) - 1
        if k < 0:
            return self.multiples[0] / self.ratio ** -k
        if k > last:
            return self.multiples[-1] * self.ratio ** (k - last)
        return self.multiples[k]

    def add(self, positions):
        """Score the ``positions`` not scored yet, in one call."""
        new = sorted(set(positions) - self.points.keys())
        if not new:
            return
        grid = bandwidth_grid(None, np.array([self.multiple(k) for k in new]),
                              self.reference)
        scores, cv_results, samples = self.score(grid)
        for i, k in enumerate(new):
            self.points[k] = Family(
                scores[i : i + 1], _take(cv_results, [i]), grid[i : i + 1],
                None if samples is None else (samples[0][i : i + 1], samples[1]), [None])

    def family(self):
        """The positions scored, ascending, and their candidates as one family."""
        order = sorted(self.points)
        return order, join_families([self.points[k] for k in order])


def _between(order, index, side, limit=None):
    """The positions between the scored ``order[index]`` and the nearest scored one on
    ``side`` (-1 below, +1 above), at most ``limit`` of them, the nearest; none at an
    end."""
    if not 0 <= index + side < len(order):
        return range(0)
    between = range(order[index] + side, order[index + side], side)
    return between if limit is None else between[:limit]


def join_families(families):
    """Families of one kind searched in parts, as one (their candidates in order)."""
    samples = [f.samples for f in families]
    return Family(
        np.concatenate([f.scores for f in families]),
        concatenate_results([f.cv_results for f in families]),
        np.concatenate([f.grid for f in families]),
        None if any(s is None for s in samples)
        else (np.concatenate([s[0] for s in samples]), samples[0][1]),
        [a for f in families for a in f.adaptive])


def _take(cv_results, index):
    """The candidates ``index`` (a slice, mask or indices) of a ``cv_results`` dict."""
    return {key: value[index] for key, value in cv_results.items()}


def concatenate_results(results):
    """cv_results dicts of the same keys, one after the other."""
    if len(results) == 1:
        return results[0]
    joined = {}
    for key, first in results[0].items():
        parts = [r[key] for r in results]
        joined[key] = (np.ma.concatenate(parts) if isinstance(first, np.ma.MaskedArray)
                       else np.concatenate(parts))
    return joined


# -- ranking and choosing ------------------------------------------------------------------


def ranked(scores):
    """Scores as they rank (G,): a non-finite one (a failed fit or score: NaN, or
    infinite) below every finite one, as GridSearchCV ranks them."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.where(np.isfinite(scores), scores, -np.inf)


def best_finite(scores):
    """Index of the best finite score (the first on ties); None when none is finite."""
    order = ranked(scores)
    return int(np.argmax(order)) if np.isfinite(order).any() else None


def rank_scores(scores):
    """``rank_test_score`` (G,): 1 for the best, ties in the grid's order; every
    non-finite score tied last, as GridSearchCV ranks them."""
    finite = np.isfinite(scores)
    rank = np.argsort(np.argsort(-ranked(scores), kind="stable"), kind="stable") + 1
    rank[~finite] = finite.sum() + 1
    return rank


def within_one_se(samples, a, b, factor=1.0):
    """Whether candidate ``b``'s per-sample scores fall short of ``a``'s by at most one
    standard error of their per-sample differences (weights count as repeated samples),
    or ``factor`` of them; ``samples`` is ``((G, m) scores, (m,) weights)``."""
    scores, w = samples
    gain = scores[a] - scores[b]  # (m,)
    mean = float(np.sum(w * gain) / np.sum(w))
    se = float(np.sqrt(np.sum(w * (gain - mean) ** 2) / np.sum(w) / np.sum(w)))
    return mean <= factor * se


def _smoothest_first(family):
    """A family's candidates, smoothest first (G,): by the geometric mean of a fixed
    bandwidth vector; by k c for an adaptive bandwidth (its bandwidth c d_k grows with
    both), ties going to the larger k."""
    if family.adaptive[0] is None:
        return np.argsort(-np.log(family.grid).mean(1), kind="stable")
    k = np.array([a.n_neighbors for a in family.adaptive], dtype=np.float64)
    c = np.array([a.scale for a in family.adaptive])
    return np.lexsort((-k, -k * c))


def smoothest_within_one_se(family):
    """A family's choice (an index into its grid): its smoothest candidate whose score is
    within one standard error of the best one's (Breiman's rule: among candidates the
    data cannot tell apart, the one that varies least with the training sample); the
    best one without per-sample scores."""
    best = best_finite(family.scores)
    if best is None or family.samples is None:
        return best
    for g in _smoothest_first(family):
        if np.isfinite(family.scores[g]) and within_one_se(family.samples, best, int(g)):
            return int(g)
    return best


def one_standard_error(families, picks=None):
    """Which of the ``families`` to keep, each represented by its candidate ``picks`` (by
    default its best finite one): the
    first (the simplest), unless a later one's beats the one kept by more than one
    standard error of their per-sample differences (weights count as repeated samples);
    by the score when there are no per-sample scores (a scorer of the leave-one-out
    predictions, and the classifier's default log-loss). A family without a pick (None:
    none of its candidates has a finite score) is never kept; at least one must have
    one."""
    if picks is None:
        picks = [best_finite(family.scores) for family in families]
    candidates = [d for d, pick in enumerate(picks) if pick is not None]
    chosen = candidates[0]
    for d in candidates[1:]:
        kept, other = families[chosen], families[d]
        if other.samples is None or kept.samples is None:
            if other.scores[picks[d]] > kept.scores[picks[chosen]]:
                chosen = d
            continue
        # Both families' per-sample scores side by side: row 0 the other's choice.
        pair = (np.stack([other.samples[0][picks[d]], kept.samples[0][picks[chosen]]]),
                kept.samples[1])
        if not within_one_se(pair, 0, 1):
            chosen = d
    return chosen


def choose(families, selection):
    """The chosen candidate of the ``families`` searched one after the other: its index
    among all their candidates, and the index of its family. ``"min"``: the best of all
    (the first on ties); ``"one_se"``: each family's :func:`smoothest_within_one_se`,
    one kept over another by :func:`one_standard_error`. Raises a ValueError when no
    candidate has a finite score."""
    scores = np.concatenate([family.scores for family in families])
    if not np.isfinite(scores).any():
        raise ValueError(
            f"Every candidate's score is non-finite ({len(scores)} candidates: NaN or "
            "infinite); there is none to choose. With a splitter their fits or scores "
            "failed on every split (see the warnings above), or the scoring returned "
            "NaN or infinity."
        )
    sizes = np.cumsum([len(family.grid) for family in families])
    if selection == "min":
        best = int(np.argmax(ranked(scores)))
        return best, int(np.searchsorted(sizes, best, side="right"))
    picks = [smoothest_within_one_se(family) for family in families]
    chosen = one_standard_error(families, picks)
    return int(sizes[chosen] - len(families[chosen].grid)) + picks[chosen], chosen


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


def search_choice(grid, cv_results, best, degree, adaptive=None, with_degree=True,
                  shown=None):
    """The :class:`Choice` of a search: candidate ``best`` of ``grid`` (G, d) with its
    ``cv_results`` (``params`` and ``rank_test_score`` among them), and the attributes a
    CV estimator reports, as GridSearchCV's (``best_params_`` is the chosen candidate's
    entry of ``params``, its bandwidth the very array of ``bandwidth_``); ``degree_``
    when ``with_degree`` (the regressor's). ``shown`` (G, d) is the grid as reported
    (lambda at categorical features; default ``grid``)."""
    bandwidth = grid[best]
    shown = grid if shown is None else shown
    report = {
        "cv_results_": cv_results,
        "best_index_": best,
        "best_score_": float(cv_results["mean_test_score"][best]),
        "bandwidths_": shown,
        "best_params_": {**cv_results["params"][best],
                         "bandwidth": bandwidth if shown is grid else shown[best]},
    }
    if with_degree:
        report["degree_"] = degree
    return Choice(bandwidth, degree, adaptive, report=report,
                  shown=None if shown is grid else report["best_params_"]["bandwidth"])


# -- leave-one-out predictions as scikit-learn's scorers take them --------------------------


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
    """Leave-one-out probabilities posing as a fitted classifier, for scikit-learn's
    scorers."""

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
