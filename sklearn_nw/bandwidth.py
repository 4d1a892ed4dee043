"""Bandwidth selection: rules of thumb, checks of user-given bandwidths,
:class:`LeaveOneOutBandwidth`, the descent on the leave-one-out loss (whose objective and
helpers live in :mod:`sklearn_nw._loo_objective`), and :class:`AdaptiveBandwidth`, the
nearest-neighbor bandwidths (their maths in :mod:`sklearn_nw._adaptive`). The exact
leave-one-out grids of the CV estimators are :mod:`sklearn_nw._grids`'s.

Sample weights are *frequency* weights throughout: fitting with integer weights gives the
same bandwidth as repeating each row that many times, so the effective sample size is
``n = sum(w)``.
"""

import warnings
from numbers import Integral, Real
from typing import ClassVar, NamedTuple

import numpy as np
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from ._adaptive import KINDS, Adaptive, auto_scale, neighbors_held
from ._leave_one_out import UNITS, input_queries
from ._local_poly import bounded_keys
from ._loo_descent import EVAL_ROWS, FULL_BATCH_MAX, NEGLIGIBLE, descent
from ._loo_objective import (
    Objective,
    coordinate_sweep,
    has_gradient,
    parametrise,
    refine_without_gradient,
)
from ._losses import get_loss
from ._preconditions import check_two_inputs
from ._scale import (
    RULES_OF_THUMB,
    check_bandwidth,
    scott_bandwidth,
    silverman_bandwidth,
)
from ._selection import Choice, within_one_se
from .kernels import Gaussian

__all__ = [
    "RULES_OF_THUMB",
    "AdaptiveBandwidth",
    "LeaveOneOutBandwidth",
    "check_bandwidth",
    "scott_bandwidth",
    "silverman_bandwidth",
]


# -- every bandwidth as a strategy: select(training) -> Choice -----------------------------


class _GivenBandwidth:
    """A bandwidth given as a number or one per feature (per distance unit with
    ``metric="precomputed"``)."""

    def __init__(self, bandwidth):
        self.bandwidth = bandwidth

    def select(self, training):
        if training.categorical is not None:
            return Choice(training.categorical.check(self.bandwidth), training.degree,
                          shown=np.asarray(self.bandwidth, dtype=np.float64).copy())
        d = 1 if training.precomputed else training.n_features
        return Choice(check_bandwidth(self.bandwidth, d), training.degree)


class _RuleOfThumb:
    """A rule of thumb of :data:`RULES_OF_THUMB`, by name."""

    def __init__(self, rule):
        self.rule = rule

    def select(self, training):
        return Choice(training.rule_of_thumb(self.rule), training.degree)


def as_strategy(bandwidth, *, precomputed=False):
    """The strategy of an estimator's ``bandwidth`` parameter (a number or array, a rule
    of thumb's name, ``"loo"``, :class:`LeaveOneOutBandwidth`, :class:`AdaptiveBandwidth`):
    an object whose ``select(training)`` returns a :class:`~sklearn_nw._selection.Choice`.
    With ``precomputed`` (distances for X) only a number is one."""
    if precomputed and isinstance(bandwidth, (str, LeaveOneOutBandwidth)):
        raise ValueError(
            f"metric='precomputed' needs a numeric bandwidth, in the units of the "
            f"distances; got bandwidth={bandwidth!r} (rules of thumb and learned "
            "bandwidths need feature vectors)."
        )
    if isinstance(bandwidth, (LeaveOneOutBandwidth, AdaptiveBandwidth)):
        return clone(bandwidth)
    if isinstance(bandwidth, str) and bandwidth in RULES_OF_THUMB:
        return _RuleOfThumb(bandwidth)
    if isinstance(bandwidth, str):  # "loo"
        return LeaveOneOutBandwidth()
    return _GivenBandwidth(bandwidth)


# -- learned bandwidths: the leave-one-out objective and its optimizers --------------------


class LeaveOneOutResult(NamedTuple):
    """What :meth:`LeaveOneOutBandwidth.learn` found."""

    bandwidth: np.ndarray  # (d,) per-feature bandwidth (effective, for the full form)
    projection: object  # None, or the learned (d, r) projection of the full form
    loss: float  # leave-one-out loss at the result, on the evaluation rows
    loss_curve: np.ndarray  # loss at each evaluation (L-BFGS) or minibatch step (Adam)
    n_iter: int  # optimizer iterations run
    grid: np.ndarray  # (G,) multipliers of the starting bandwidth tried first
    grid_loss: np.ndarray  # (G,) their leave-one-out losses


class _Start(NamedTuple):
    """Where the learned bandwidth's descent starts (:meth:`LeaveOneOutBandwidth._start`)."""

    grid: np.ndarray  # (G,) multipliers of the starting bandwidth tried first
    grid_loss: np.ndarray  # (G,) their leave-one-out losses
    h_best: np.ndarray  # (d,) the start: the grid's best point, swept per feature
    best_loss: float  # its loss
    h_reference: object  # (d,) the one-parameter reference per-feature ones must beat, or None
    other_starts: list  # further starts of the descent (local polynomials: the grid's best)


class LeaveOneOutBandwidth(BaseEstimator):
    r"""Bandwidth learned by gradient descent on the leave-one-out loss.

    Pass it (or the string ``"loo"`` for the defaults) as the ``bandwidth`` of a
    Nadaraya-Watson estimator. ``fit`` then minimizes the leave-one-out loss -- mean squared
    error for the regressor, log-loss for the classifier -- with torch autograd. The
    in-sample loss cannot be used: it is minimized by ``h -> 0``, where every point predicts
    itself. Each training row is left out of its own prediction with its whole sample
    weight, as scikit-learn's :class:`~sklearn.model_selection.LeaveOneOut` leaves it
    (``leave_out="row"``): other rows at the same input stay, so scaling all weights
    changes nothing, and on tables whose inputs repeat the rows observed at a query's
    input help predict it. Rows copied by resampling (a bootstrap drawn as rows) then see
    their copies and can pull the bandwidth toward 0: pass such copies as sample weights,
    or choose ``leave_out="input"``, which leaves out all the mass at a row's input. The
    targets' unit does not matter either (the regressor pools them
    scaled), so the learned bandwidth is the same for ``y`` and ``1e77 * y``. With the
    regressor's local polynomials (``degree`` 1 or 2) the loss is that of the local fits
    themselves (bounded ones with ``bounded=True``), full batch only: statsmodels'
    ``KernelReg(reg_type="ll", bw="cv_ls")`` objective for degree 1.

    Leave-one-out curves of real data are often multi-modal, so the descent starts from the
    best point of a coarse exact leave-one-out grid of multiples of Scott's rule, improved by
    one sweep over the features, each tried at a few multiples and at "ignored" (a huge
    bandwidth); the result is never worse than that starting point. For local polynomials
    the descent also starts from the grid's best point, the lower result kept: a feature
    the sweep ignores is still fitted linearly there, a plateau with no gradient back to a
    finite bandwidth. Full-batch L-BFGS
    (scipy's L-BFGS-B on the torch gradient) runs up to 4,096 samples (the Gaussian's
    gradient is written out by hand, other kernels use autograd); above, Adam on minibatches
    of queries, each against its nearest training points, with the grid, the sweep and the
    final comparison exact on 512 random queries.
    A kernel whose profile is piecewise constant (the top-hat, a step function) has no
    gradient in the bandwidth: it gets exact grids instead of the descent, the bandwidths
    multiplied in turn by factors closing in from 2 to 1.05 (all together, and for
    ``"diagonal"`` each alone); ``form="full"`` then raises.

    Read more in the :ref:`User Guide <ug_learned_bandwidth>`.

    Parameters
    ----------
    form : {"diagonal", "isotropic", "full"}, default="diagonal"
        ``"diagonal"``: one bandwidth per feature, so an irrelevant feature can get a
        bandwidth large enough to be ignored. ``"isotropic"``: one bandwidth for all
        features. ``"full"``: a learned linear metric, distances ``||(q - x) L||`` with a
        projection ``L`` of shape (n_features, n_components) (metric learning for kernel
        regression, Weinberger & Tesauro 2007).
    n_components : int, default=None
        Rank of the projection for ``form="full"`` (None: n_features).
    max_iter : int, default=100
        Maximum number of optimizer iterations (L-BFGS iterations, or minibatch steps).
    tol : float, default=1e-8
        L-BFGS stops when an iteration lowers the loss by less than ``tol`` times its
        starting value; minibatches stop when the mean loss of a window of steps improves on
        the previous window by less than ``tol`` relative.
    batch_size : int or "auto", default="auto"
        Queries per minibatch. ``"auto"`` runs full-batch L-BFGS up to 4096 samples and
        minibatches of 256 queries with Adam above.
    n_neighbors : int, "auto" or None, default="auto"
        Minibatch mode: each query attends to its ``n_neighbors`` nearest training points
        in the current metric (scikit-learn's KDTree, rebuilt every 10 steps) instead of
        all of them; ``"auto"`` is 256, None all points. The kernel weight beyond them is
        negligible at sensible bandwidths; the starting grid and the final comparisons
        use every point.
    learning_rate : float, default=0.05
        Adam step size on the log-bandwidths (minibatch mode).
    n_grid : int, default=7
        Points of the starting grid, multiples of Scott's rule from 1/8 to 8.
    selection : {"one_se", "min"}, default="one_se"
        How per-feature bandwidths (``form="diagonal"``, and the diagonal start of
        ``"full"``) compete with the one-parameter reference, Scott's rule times the best
        factor of a fine exact grid (with two or more features). ``"min"`` keeps whichever
        has the lower leave-one-out loss. ``"one_se"`` keeps the per-feature bandwidths only
        if they lower it by more than one standard error of the per-sample differences
        (Breiman's one-standard-error rule), and never when they fit every left-out point
        perfectly while the reference does not (separable classes: the loss then falls as
        bandwidths shrink without end).
        With d bandwidths tuned on few samples the leave-one-out loss is optimistic; the
        rule keeps small samples from fitting its noise, and on large ones, where a
        difference is significant, it changes nothing.
    leave_out : {"row", "input"}, default="row"
        The unit left out: a row with its whole weight, or every row at its input
        (integer weights then equal repeated rows). The same where no input repeats;
        see :ref:`the user guide <leave_out>`.
    random_state : int, RandomState instance or None, default=None
        Seeds the minibatches and the evaluation subset used above 4096 samples.
    verbose : int, default=0
        Show a progress bar with the current loss: tqdm when installed, else a line on
        stderr per iteration (also logged to the ``sklearn_nw.bandwidth`` logger).

    References
    ----------
    K.\  Q. Weinberger and G. Tesauro, "Metric learning for kernel regression", AISTATS 2007.

    Examples
    --------
    One bandwidth per feature, learned: the second feature, which the target does not
    depend on, is smoothed over far more widely than the first.

    >>> import numpy as np
    >>> from sklearn_nw import LeaveOneOutBandwidth, NadarayaWatsonRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 6, (200, 2))
    >>> y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=200)
    >>> reg = NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth()).fit(X, y)
    >>> reg.bandwidth_.round(2)
    array([0.25, 1.19])
    >>> len(reg.loss_curve_) > 0  # the leave-one-out loss along the descent
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        "form": [StrOptions({"diagonal", "isotropic", "full"})],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"}), None],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_grid": [Interval(Integral, 1, None, closed="left")],
        "selection": [StrOptions({"one_se", "min"})],
        "leave_out": [StrOptions(set(UNITS))],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, form="diagonal", *, n_components=None, max_iter=100, tol=1e-8,
                 batch_size="auto", n_neighbors="auto", learning_rate=0.05, n_grid=7,
                 selection="one_se", leave_out="row", random_state=None, verbose=0):
        self.form = form
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.batch_size = batch_size
        self.n_neighbors = n_neighbors
        self.learning_rate = learning_rate
        self.n_grid = n_grid
        self.selection = selection
        self.leave_out = leave_out
        self.random_state = random_state
        self.verbose = verbose

    def select(self, training):
        """The bandwidth strategy's choice (:mod:`sklearn_nw._selection`): the bandwidth
        learned on ``training`` (on one machine or sharded on a cluster), reporting
        ``n_iter_`` and ``loss_curve_`` (the loss of the training rows, in the targets'
        unit)."""
        return training.learn_bandwidth(self)

    def learn(self, loo, kernel, *, loss, h_start, dtype=np.float64, device="cpu",
              working_memory=1024, degree=0, bounded=False, categorical=None):
        """Learn the bandwidth on a training set as leave-one-out sees it.

        Parameters
        ----------
        loo : LeaveOneOutSet
            The distinct training inputs, their weights and values (targets, or class
            frequencies for ``loss="log_loss"``); see :mod:`sklearn_nw._leave_one_out`.
        kernel : Kernel
        loss : {"squared_error", "log_loss"} or a loss of :mod:`sklearn_nw._losses`
        h_start : ndarray (d,)
            Scott's rule, the center of the starting grid.
        dtype : numpy dtype
            The data's dtype: the inputs are rounded to it, then the descent runs in
            float64.
        device : str or torch.device
        working_memory : float
            MiB for chunked temporaries.
        degree : int, default=0
            The leave-one-out loss of Nadaraya-Watson (0) or of the regressor's local
            polynomials of that degree (1 or 2, full batch only).
        bounded : bool, default=False
            Local fits bounded by their targets' range, as the regressor's ``bounded``.
        categorical : CategoricalFeatures, default=None
            The categorical features (:mod:`sklearn_nw._categorical`): ``loo.X`` holds
            them embedded, each parameter of theirs (the odds of a category's weight,
            tried over its whole range by the start's coordinate sweep) spread over their
            embedded columns.

        Returns
        -------
        result : LeaveOneOutResult
        """
        self._validate_params()
        loss = get_loss(loss)
        device = torch.device(device)
        # The descent runs in float64 (float32 data too): line searches need the loss to
        # better than float32's 1e-7 (MPS has no float64).
        descent_dtype = torch.float32 if device.type == "mps" else torch.float64
        x, v, log_w, self_log_w = (
            torch.as_tensor(np.asarray(a, dtype=dtype), device=device).to(descent_dtype)
            for a in (loo.X, loo.values, loo.log_weight, loo.self_log_weight))
        group = None if loo.group is None else torch.as_tensor(loo.group, device=device)
        bounded = bounded_keys(bounded, loo.value_range, lambda a: torch.as_tensor(
            np.asarray(a, dtype=dtype), device=device).to(descent_dtype))
        n, d = x.shape
        w = log_w.exp()
        check_two_inputs(int((w > 0).sum()), n, "bandwidth='loo'")
        full_batch = (n <= FULL_BATCH_MAX) if self.batch_size == "auto" else self.batch_size >= n
        if group is not None and not full_batch and self.n_neighbors is not None:
            raise NotImplementedError(
                f"A learned bandwidth with groups (leave-one-group-out) descends against "
                f"every key: the minibatches' neighbor lists (n_neighbors="
                f"{self.n_neighbors!r}) can hold a query's group alone. Got {n} keys "
                f"(distinct rows of input, value, weight and group) with batch_size="
                f"{self.batch_size!r}: pass n_neighbors=None, or batch_size >= {n}.")
        if degree and not full_batch:
            raise ValueError(
                f"A learned bandwidth for local polynomials (degree={degree}) descends on "
                f"the full leave-one-out loss, up to {FULL_BATCH_MAX} leave-one-out keys "
                f"(distinct rows, or inputs with leave_out='input'; batch_size='auto' or "
                f">= their number); got {n} keys with batch_size={self.batch_size!r}. "
                f"Use NadarayaWatsonRegressorCV("
                f"degree={degree}) (an exact grid), or degree=0."
            )
        by_input = input_queries(loo) if full_batch and not degree else None
        queries = None
        if by_input is not None:
            # Sums over the distinct inputs instead of the distinct rows: the same loss.
            x, v, log_w, self_log_w, key, terms = by_input.tensors(
                lambda a: torch.as_tensor(np.asarray(a, dtype=dtype), device=device).to(
                    descent_dtype))
            queries = (key, terms)
        objective = Objective(x, v, log_w, self_log_w, kernel, loss, working_memory,
                              degree=degree, bounded=bounded, categorical=categorical,
                              polynomial_columns=loo.polynomial_columns,
                              group=group, queries=queries)
        return self.learn_on(objective, kernel, h_start=h_start, full_batch=full_batch)

    def learn_on(self, objective, kernel, *, h_start, full_batch=True):
        """:meth:`learn` on a leave-one-out objective: an
        :class:`~sklearn_nw._loo_objective.Objective`, or an object with its ``loss``,
        ``grid``, ``per_row``, ``log_w``, ``baseline`` and ``values_max_sq`` (the
        objective of keys sharded over a cluster, :mod:`sklearn_nw.dask`), full batch
        unless it also has the ``x`` of the minibatch descent's neighbor search."""
        self._validate_params()
        if getattr(objective, "expand", None) is not None and self.form == "full":
            raise ValueError(
                "LeaveOneOutBandwidth(form='full') learns a linear metric of numbers, not "
                "of categories: with categorical features use form='diagonal' or "
                "'isotropic'.")
        log_w = objective.log_w
        d = len(h_start)
        w = log_w.exp()
        if self.form == "full" and self.n_components is not None and self.n_components > d:
            raise ValueError(f"n_components={self.n_components} must be <= n_features={d}.")
        gradient = has_gradient(kernel)
        if self.form == "full" and not gradient:
            raise ValueError(
                f"LeaveOneOutBandwidth(form='full') learns a metric by gradient descent, "
                f"and the kernel {kernel!r} has no gradient in the distance (its profile "
                "is piecewise constant). Use form='diagonal' or 'isotropic' (learned on "
                "exact grids for such kernels), or a kernel with a slope such as "
                "'epanechnikov'."
            )
        rng = check_random_state(self.random_state)
        generator = torch.Generator(device=w.device).manual_seed(int(rng.randint(2**31 - 1)))
        positive = torch.nonzero(w > 0)[:, 0]
        if full_batch or len(positive) <= EVAL_ROWS:
            eval_rows = positive
        else:
            eval_rows = positive[torch.randperm(len(positive), generator=generator,
                                                device=w.device)[:EVAL_ROWS]]
        start = self._start(objective, h_start, eval_rows)
        if isinstance(start, LeaveOneOutResult):  # a flat loss: Scott's rule kept
            return start
        if not gradient:
            return self._refine(objective, start, eval_rows)
        return self._descend(objective, start,
                             descent(self, objective, positive, full_batch, generator),
                             eval_rows)

    def _start(self, objective, h_start, eval_rows):
        """1. The starting point: the best of a coarse exact leave-one-out grid, then (per
        feature) a coordinate sweep from it, with the one-parameter reference the
        per-feature bandwidths must beat. A :class:`LeaveOneOutResult` keeping Scott's rule
        when the loss does not depend on the bandwidth."""
        log_w = objective.log_w
        d = len(h_start)
        h_start = np.asarray(h_start, dtype=np.float64)
        if self.form == "isotropic":
            h_start = np.full(d, np.exp(np.log(h_start).mean()))
        grid = np.geomspace(1 / 8, 8, self.n_grid) if self.n_grid > 1 else np.ones(1)
        grid_loss = objective.grid(grid[:, None] * h_start, eval_rows)
        best = int(np.argmin(grid_loss))
        h_best = grid[best] * h_start
        # Flat: differences at rounding level, relative to the loss or to the targets' scale.
        rounding = 100 * torch.finfo(log_w.dtype).eps ** 2 * objective.values_max_sq
        if np.ptp(grid_loss) <= 1e-10 * abs(grid_loss).max() + rounding:
            warnings.warn(
                "The leave-one-out loss does not depend on the bandwidth (constant targets, "
                "identical inputs or too few samples); keeping Scott's rule.",
                ConvergenceWarning,
            )
            h_scott = h_start if self.n_grid > 1 else h_best
            # The loss of the bandwidth kept, not of the grid's (equal but for rounding).
            loss_scott = float(objective.grid(h_scott[None], eval_rows)[0])
            return LeaveOneOutResult(h_scott, None, loss_scott, np.array([loss_scott]), 1,
                                     grid, grid_loss)
        best_loss = float(grid_loss[best])
        h_reference = None
        if self.form != "isotropic" and d > 1:
            # The one-parameter reference the per-feature bandwidths must beat.
            fine = grid[best] * np.geomspace(1 / 2, 2, 17)
            fine_loss = objective.grid(fine[:, None] * h_start, eval_rows)
            h_reference = fine[int(np.argmin(fine_loss))] * h_start
        h_grid = h_best
        if self.form != "isotropic":
            h_best, best_loss = coordinate_sweep(objective, h_best, best_loss, eval_rows)
        # The descent starts from the sweep's result; for local polynomials also from the
        # grid's best point: a local polynomial still fits a feature the sweep "ignores"
        # (a huge bandwidth) linearly, a plateau with no gradient back to a finite
        # bandwidth that fits it better.
        other_starts = ([h_grid] if getattr(objective, "degree", 0)
                        and not np.array_equal(h_best, h_grid) else [])
        return _Start(grid, grid_loss, h_best, best_loss, h_reference, other_starts)

    def _refine(self, objective, start, eval_rows):
        """2'. A piecewise-constant profile (the top-hat, a step function) has no gradient
        in the bandwidth: refined on exact grids instead of descending."""
        log_w = objective.log_w
        h, curve = refine_without_gradient(objective, start.h_best, start.best_loss,
                                           eval_rows, per_feature=self.form == "diagonal")
        best_loss = float(curve[-1])
        h = torch.as_tensor(h, dtype=log_w.dtype, device=log_w.device)
        if start.h_reference is not None and self.form == "diagonal":
            h, best_loss = self._against_reference(objective, h, start.h_reference, eval_rows)
        curve = np.append(curve, best_loss)
        return LeaveOneOutResult(h.cpu().numpy().astype(np.float64), None, best_loss,
                                 curve, len(curve) - 1, start.grid, start.grid_loss)

    def _descend(self, objective, start, descend, eval_rows):
        """2. Gradient descent (``descend``) from the start; the full metric starts from
        the learned diagonal. 3. Never worse than the start: the grid's best point, or
        the learned diagonal."""
        log_w = objective.log_w
        forms = ["diagonal", "full"] if self.form == "full" else [self.form]
        metric = torch.as_tensor(start.h_best, dtype=log_w.dtype, device=log_w.device)
        best_loss = start.best_loss
        curves, n_iter = [], 0
        for form in forms:
            theta, to_metric = parametrise(form, metric, self.n_components)
            first = to_metric(theta).detach().clone()
            if form == "full":  # the diagonal result, as a (possibly low-rank) projection
                best_loss = objective.loss(first, eval_rows)
            curve, iterations = descend(theta, to_metric)
            curves.append(curve)
            n_iter += iterations
            candidate = to_metric(theta).detach()
            final = objective.loss(candidate, eval_rows)
            for other in start.other_starts if form != "full" else ():
                # Parameters relative to this start, and their own map to the metric.
                theta, to_other = parametrise(form, metric.new_tensor(other),
                                              self.n_components)
                curve, iterations = descend(theta, to_other)
                curves.append(curve)
                n_iter += iterations
                other_final = objective.loss(to_other(theta).detach(), eval_rows)
                if other_final < final or not np.isfinite(final):
                    candidate, final = to_other(theta).detach(), other_final
            if np.isfinite(final) and final <= best_loss:
                metric, best_loss = candidate, final
            else:
                metric = first
            if form == "diagonal" and start.h_reference is not None:
                metric, best_loss = self._against_reference(objective, metric,
                                                            start.h_reference, eval_rows)
        # The curve ends at the loss of the result, whichever start, descent or reference
        # it came from (the last evaluation need not be the best one).
        curve = np.append(np.concatenate(curves), best_loss)
        metric = metric.cpu().numpy().astype(np.float64)
        if metric.ndim == 1:
            return LeaveOneOutResult(metric, None, best_loss, curve, n_iter, start.grid,
                                     start.grid_loss)
        bandwidth = 1.0 / np.linalg.norm(metric, axis=1).clip(min=np.finfo(np.float64).tiny)
        return LeaveOneOutResult(bandwidth, metric, best_loss, curve, n_iter, start.grid,
                                 start.grid_loss)

    def _against_reference(self, objective, h, h_reference, rows):
        """Per-feature bandwidths ``h`` or the one-parameter reference, by ``selection``;
        returns the choice (as a tensor like ``h``) and its loss."""
        per_row = objective.per_row(torch.stack([h, h.new_tensor(h_reference)]), rows)
        w = objective.log_w[rows].double().exp()  # (m,)
        loss, loss_reference = (float(value) for value in (per_row @ w) / w.sum())
        if self.selection == "min":
            keep = loss <= loss_reference
        else:
            # The reference unless h beats it by more than one standard error of their
            # per-sample differences (the rule every search shares), or fits perfectly.
            scores = (-per_row.cpu().numpy(), w.cpu().numpy())  # ((2, m), (m,))
            perfect = NEGLIGIBLE * objective.baseline
            keep = (not within_one_se(scores, 0, 1)
                    and not (loss <= perfect < loss_reference))
        if keep:
            return h, loss
        return h.new_tensor(h_reference), loss_reference

class AdaptiveBandwidth(BaseEstimator):
    r"""Nearest-neighbor (adaptive) bandwidth: each query's own, or each training point's.

    Pass it as the ``bandwidth`` of a Nadaraya-Watson estimator. A single bandwidth
    cannot follow the density of the data: where points are sparse it averages too few,
    where they are dense too many. k nearest neighbors follow it by construction; these
    bandwidths do the same with any kernel. With ``d_k(z)`` the distance from ``z`` to
    the nearest training points holding ``n_neighbors`` units of sample weight
    (weights count as repeated rows), measured in the metric of ``base``:

    - ``kind="balloon"`` (R np's ``"generalized_nn"``): the query's bandwidth is
      :math:`h(q) = c\,d_k(q)`, and :math:`\alpha_i(q) \propto w_i\,k(u_i / h(q))`.
    - ``kind="sample_point"`` (np's ``"adaptive_nn"``): training point i carries
      :math:`h_i = c\,d_k(x_i)`, its distance to its k nearest *other* training points
      (the rows at its own location do not count), and
      :math:`\alpha_i(q) \propto w_i\,h_i^{-r}\,k(u_i / h_i)`, with r the number of
      coordinates (the normalization of a kernel density of width :math:`h_i`).

    where :math:`u_i = \lVert (q - x_i) / h_{base} \rVert` and c is ``scale``. With the
    top-hat kernel and ``scale`` just above 1 (``1 + 1e-9``: the k-th distance itself
    must not round out of the support) the balloon is exactly
    :class:`~sklearn.neighbors.KNeighborsRegressor` with ``weights="uniform"``, except that
    every training point tied at the k-th distance gets the same weight (scikit-learn's
    choice among ties depends on the order of the rows). A query whose ``d_k`` is 0
    (k units of weight at its very location) averages those points.

    Leave-one-out (``attention_weights_``, the CV estimators) is exact: as refitting
    without the point, whose own location then no longer counts towards ``d_k``, and
    whose neighbors' sample-point bandwidths are those they have without it.

    Read more in the :ref:`User Guide <ug_adaptive>`.

    Parameters
    ----------
    kind : {"balloon", "sample_point"}, default="balloon"
        Bandwidth per query, or per training point.
    n_neighbors : int, default=10
        k, in units of sample weight. Capped at what the training set holds, leave-one-out
        included: the weight left when the heaviest location (balloon), or the two
        heaviest (sample-point), are left out, rounded down, at least 1 (10 rows at
        distinct locations: 9 and 8). The k used is ``bandwidth_neighbors_``;
        leave-one-out keeps it.
    scale : float or "auto", default="auto"
        c, the bandwidth in units of the k-th neighbor distance. ``"auto"`` puts ``d_k``
        where the kernel's profile has fallen to 1% of its peak: its support for a compact
        kernel (c = 1: the k nearest and no farther), ``sqrt(2 ln 100)`` for the Gaussian
        (c about 0.33), ``ln 100`` for the exponential (c about 0.22). These were near the
        best leave-one-out error at k=10 on seven regression sets of 1 to 10 features;
        a compact kernel's error rises steeply below c = 1, the Gaussian's above 0.5.
    base : {"scott", "silverman", "loo"}, float, array-like of shape (n_features,) or LeaveOneOutBandwidth, default="scott"
        The metric distances are measured in, as the estimator's ``bandwidth`` takes it
        (a rule of thumb, given per-feature bandwidths or a learned bandwidth or metric).
        Only the ratios between features matter: ``d_k`` scales with the metric. Scott's
        rule weighs the features by their standard deviations.

    See Also
    --------
    sklearn.neighbors.KNeighborsRegressor : k nearest neighbors, the top-hat balloon.
    LeaveOneOutBandwidth : A global bandwidth learned by leave-one-out.

    References
    ----------
    - G.\  R. Terrell and D. W. Scott, "Variable kernel density estimation", *Annals of
      Statistics* 20(3), 1992 (balloon and sample-point estimators).
    - L.\  Breiman, W. Meisel and E. Purcell, "Variable kernel estimates of multivariate
      densities", *Technometrics* 19(2), 1977.
    - T.\  Hayfield and J. S. Racine, "Nonparametric econometrics: the np package",
      *Journal of Statistical Software* 27(5), 2008.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neighbors import KNeighborsRegressor
    >>> from sklearn_nw import AdaptiveBandwidth, NadarayaWatsonRegressor
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.uniform(size=(50, 2)), rng.normal(size=50)
    >>> knn = AdaptiveBandwidth(n_neighbors=5, scale=1 + 1e-9, base=1.0)
    >>> reg = NadarayaWatsonRegressor("tophat", bandwidth=knn).fit(X, y)
    >>> bool(np.allclose(reg.predict(X), KNeighborsRegressor(5).fit(X, y).predict(X)))
    True
    """  # noqa: E501 (a numpydoc type line is one line)

    _parameter_constraints: ClassVar[dict] = {
        "kind": [StrOptions(set(KINDS))],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "scale": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "base": [StrOptions(set(RULES_OF_THUMB) | {"loo"}), LeaveOneOutBandwidth,
                 Interval(Real, 0, None, closed="neither"), "array-like"],
    }

    def __init__(self, kind="balloon", *, n_neighbors=10, scale="auto", base="scott"):
        self.kind = kind
        self.n_neighbors = n_neighbors
        self.scale = scale
        self.base = base

    def resolve(self, X=None, sample_weight=None, kernel=None):
        """The validated parameters as the key set uses them.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), default=None
            The training inputs; with them ``n_neighbors`` is capped at what they hold
            (see ``n_neighbors``).
        sample_weight : ndarray of shape (n_samples,), default=None
            Their weights; None weighs every row 1.
        kernel : Kernel, default=None
            The estimator's kernel, which ``scale="auto"`` follows; None is the Gaussian.

        Returns
        -------
        adaptive : Adaptive
        """
        self._validate_params()
        k = int(self.n_neighbors)
        if X is not None:
            k = min(k, neighbors_held(X, sample_weight, self.kind))
        if isinstance(self.scale, str):  # "auto"
            c = auto_scale(Gaussian() if kernel is None else kernel)
        else:
            c = float(self.scale)
        return Adaptive(self.kind, k, c)

    def select(self, training):
        """The bandwidth strategy's choice (:mod:`sklearn_nw._selection`): this adaptive
        bandwidth resolved on ``training``, in the metric its ``base`` chooses."""
        adaptive = self.resolve(training.locations(), training.sample_weight, training.kernel)
        choice = as_strategy(self.base, precomputed=training.precomputed).select(training)
        return choice._replace(adaptive=adaptive)
