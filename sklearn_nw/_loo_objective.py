"""The leave-one-out objective of :class:`~sklearn_nw.bandwidth.LeaveOneOutBandwidth` and
the pieces of its descent: the coordinate sweep of its start, the parametrisations of the
three forms, the neighbor search of minibatches, and progress by logging."""

import logging
import sys

import numpy as np
import torch
from sklearn.neighbors import KDTree

from ._engine import key_center, transform
from ._engine_loo import (
    SweepDistances,
    loo_grid_pool,
    loo_local_grid,
    loo_local_loss,
    loo_loss,
    loo_loss_neighbors,
)
from ._leave_one_out import QueryTerms
from ._local_poly import n_terms
from ._losses import get_loss

logger = logging.getLogger("sklearn_nw.bandwidth")

# The descent's parameters (log-bandwidths relative to its start, projection entries in
# units of the start's) are kept in [-LOG_LIMIT, LOG_LIMIT].
LOG_LIMIT = 50.0

# Per-feature multipliers tried by the coordinate sweep; the last one ignores the feature.
_SWEEP = (1 / 3, 3.0, 1e4)
# What the sweep tries for a categorical feature instead, whose parameter is the odds
# rho / (1 - rho) of the weight rho of another category: every rho from "own category
# only" to "ignore it", where the loss can be flat in the odds' logarithm (at both ends).
_ODDS_SWEEP = tuple(r / (1 - r) for r in (0.005, 0.03, 0.1, 0.25, 0.45, 0.65, 0.85, 0.97,
                                            0.9999))


def coordinate_sweep(objective, h, loss, rows, factors=_SWEEP):
    """One pass over the features, each bandwidth tried at a few multiples (and at
    "ignore this feature") with the others held, keeping every improvement.

    Gradient descent alone stays in the basin it starts in; leave-one-out curves of real
    data often have a better one where some features are ignored altogether, which
    starting from the isotropic grid does not reach. An objective that keeps the
    distances at ``h`` (:meth:`Objective.sweep_distances`) updates them one feature at a
    time: d passes over the (m, n) distances instead of d passes over all d features.
    """
    distances = getattr(objective, "sweep_distances", lambda h, rows: None)(h, rows)
    odds = getattr(objective, "odds", None)
    for j in range(len(h)):
        losses = None
        if odds is not None and odds[j]:  # a categorical feature: absolute odds
            candidates = np.repeat(h[None], len(_ODDS_SWEEP), axis=0)  # (S, d)
            candidates[:, j] = _ODDS_SWEEP
            losses = getattr(objective, "odds_losses", lambda *args: None)(j, candidates,
                                                                            rows)
        else:
            candidates = np.repeat(h[None], len(factors), axis=0)  # (S, d)
            candidates[:, j] *= factors
        if losses is None and distances is None:
            losses = objective.grid(candidates, rows)
        elif losses is None:
            losses = objective.mean_loss(
                objective.loss_function.per_row(distances.pool(j, factors).double(),
                                                objective.v[rows].double()), rows)
        k = int(np.argmin(losses))
        # A real improvement, not rounding: equivalent data (weights or repeated rows)
        # must take the same path.
        if losses[k] < loss * (1 - 1e-9):
            h, loss = candidates[k], float(losses[k])
            if distances is not None:
                distances.move(j, factors[k])
    return h, loss


# Multipliers of the derivative-free refinement, one pass of each, coarse to fine.
_REFINE = ((1 / 2, 2.0), (1 / 1.4, 1.4), (1 / 1.2, 1.2), (1 / 1.1, 1.1), (1 / 1.05, 1.05))


def has_gradient(kernel):
    """Whether the kernel's log-profile changes smoothly with the distance somewhere in
    its support, so that gradient descent can move the bandwidth: the top-hat and other
    step functions have a zero (or no) derivative wherever it exists."""
    u2 = torch.linspace(0.01, 0.99, 50, dtype=torch.float64).requires_grad_()
    with torch.enable_grad():
        log_k = kernel.log_profile_sq(u2)
    finite = torch.isfinite(log_k.detach())
    if not log_k.requires_grad or not bool(finite.any()):
        return False
    (grad,) = torch.autograd.grad(log_k[finite].sum(), u2, allow_unused=True)
    return grad is not None and bool((grad[finite] != 0).any())


def refine_without_gradient(objective, h, loss, rows, per_feature):
    """Improve bandwidths ``h`` (d,) of leave-one-out loss ``loss`` on exact grids: each
    pass tries all bandwidths times two multipliers and, ``per_feature``, each bandwidth
    alone, keeping every real improvement; the multipliers close in from 2 to 1.05.
    Returns the bandwidths and the loss after each pass (the starting one first)."""
    curve = [loss]
    for factors in _REFINE:
        candidates = np.asarray(factors)[:, None] * h  # (2, d)
        losses = objective.grid(candidates, rows)
        k = int(np.argmin(losses))
        if losses[k] < loss * (1 - 1e-9):
            h, loss = candidates[k], float(losses[k])
        if per_feature and len(h) > 1:
            h, loss = coordinate_sweep(objective, h, loss, rows, factors)
        curve.append(loss)
    return h, np.asarray(curve)


def bounded_exp(theta):
    """Multipliers from log-multipliers, kept within exp(+-LOG_LIMIT) so never 0 or inf."""
    return theta.clamp(-LOG_LIMIT, LOG_LIMIT).exp()


def parametrise(form, h, n_components):
    """Unconstrained parameters, from bandwidths ``h`` (d,), and their map to the metric.

    The parameters are relative to ``h``: log-multipliers of it (0 at the start), or a
    projection in units of ``1 / min(h)``. Features scaled by any ``s`` then descend on the
    same parameters to bandwidths ``s`` times as large. Absolute log-bandwidths, bounded by
    ``LOG_LIMIT``, would hold features in units of 1e-22 (or 1e22) and beyond at the
    bound from the start, where the loss has no gradient.
    """
    h0 = h.detach().clone()  # (d,)
    if form == "diagonal":
        return torch.zeros_like(h0).requires_grad_(), lambda theta: bounded_exp(theta) * h0
    if form == "isotropic":  # h0 is isotropic: one multiplier for all features
        return h0.new_zeros(1).requires_grad_(), lambda theta: bounded_exp(theta) * h0
    # Full: the diagonal metric diag(1/h); low rank keeps the most relevant features, those
    # with the smallest bandwidths.
    keep = torch.argsort(h0)[: n_components or len(h0)].sort().values
    unit = h0.min()
    projection = torch.diag(unit / h0)[:, keep]  # (d, r), entries in (0, 1]
    return projection.requires_grad_(), lambda theta: theta / unit


class NeighborSearch:
    """k-nearest training points in the scaled metric, from scikit-learn's KDTree."""

    def __init__(self, x, metric):
        self.xs = transform(x, key_center(x), metric).cpu().numpy()  # (n, r)
        self.tree = KDTree(self.xs)

    def neighbors(self, rows, k):
        """Indices (m, k) of the k nearest keys of each row, the row itself among them."""
        rows_np = rows.cpu().numpy()
        idx = self.tree.query(self.xs[rows_np], k=k, return_distance=False)  # (m, k)
        missing = ~(idx == rows_np[:, None]).any(1)  # duplicates can crowd a row out
        idx[missing, -1] = rows_np[missing]
        return torch.as_tensor(idx, device=rows.device)


class Objective:
    """The leave-one-out loss of one training set, as a function of the metric: of
    Nadaraya-Watson (``degree=0``), or of local polynomials of ``degree``, bounded or not
    (full batch only: no neighbor lists).

    Its rows (``v`` their targets, ``log_w`` their weights, the ``rows`` of its methods)
    are its keys ``x``, or with ``queries`` a pair ``(key, terms)``: each row's key (m,)
    and its :class:`~sklearn_nw._leave_one_out.QueryTerms` (the distinct rows at shared
    inputs, :class:`~sklearn_nw._leave_one_out.InputQueries`; Nadaraya-Watson, no
    groups, full batch)."""

    def __init__(self, x, v, log_w, self_log_w, kernel, loss, working_memory, degree=0,
                 bounded=False, categorical=None, polynomial_columns=None, group=None,
                 queries=None):
        # The keys, as the engines take them.
        self.x, self.key_v, self.key_log_w, self.self_log_w = x, v, log_w, self_log_w
        self.key, self.terms = (None, None) if queries is None else queries
        # The rows: their targets and weights.
        self.v, self.log_w = (v, log_w) if queries is None else (self.terms.v,
                                                                  self.terms.log_w)
        # (n,) the keys' groups, each leaving with its query (leave-one-group-out); None.
        self.group = group
        # The categorical features (_categorical.CategoricalFeatures), x holding them
        # embedded; None.
        self.categorical = categorical
        # Bandwidths (..., d) -> those of x's columns (..., d_x): categorical features'
        # scales spread over their embedded columns.
        self.expand = None if categorical is None else categorical.expand
        # The leading columns of x the local polynomials are in (None: all).
        self.polynomial_columns = polynomial_columns
        # (d,) bool: the parameters that are the odds of a categorical feature's weight.
        self.odds = None if categorical is None else categorical.categorical
        self._codes = None  # the keys' category codes (n, d), found on first use
        self.kernel, self.working_memory = kernel, working_memory
        self.loss_function = get_loss(loss)
        self.degree, self.bounded = degree, bounded
        # The weighted variance of the targets (Gini impurity for one-hot labels).
        self.baseline = float(self.loss_function.spread(self.v, self.log_w.exp()))
        # The largest squared value norm: the scale of the loss's rounding.
        self.values_max_sq = float((self.v * self.v).sum(1).max())

    def _degree(self, n_coords):
        """The degree the local fits have in ``n_coords`` coordinates: 0 where fewer keys
        than the polynomial's terms are left to every query, whose designs are then all
        singular (their Nadaraya-Watson values: the same loss, without the solves)."""
        keys = int(torch.isfinite(self.key_log_w).sum()) - 1
        if self.polynomial_columns is not None:
            n_coords = self.polynomial_columns
        return self.degree if keys >= n_terms(n_coords, self.degree) else 0

    def metric(self, h):
        """The bandwidths of ``x``'s columns (..., d_x) for bandwidths ``h`` (..., d) (a
        projection of ``form="full"``, refused with ``expand``, as it is)."""
        return h if self.expand is None else self.expand(h)

    def _queries(self, rows):
        """The keys of ``rows`` (m,) and their query terms (None: the keys themselves)."""
        if self.key is None:
            return rows, None
        return self.key[rows], QueryTerms(*(None if part is None else part[rows]
                                            for part in self.terms))

    def loss(self, metric, rows, backward=False):
        metric = self.metric(metric)
        if self._degree(metric.shape[-1] if metric.ndim == 2 else len(metric)):
            return loo_local_loss(self.x, self.key_v, metric, self.kernel, self.key_log_w,
                                  self.self_log_w, loss=self.loss_function,
                                  degree=self.degree, bounded=self.bounded, rows=rows,
                                  working_memory=self.working_memory, backward=backward,
                                  polynomial_columns=self.polynomial_columns,
                                  group=self.group)
        keys, queries = self._queries(rows)
        return loo_loss(self.x, self.key_v, metric, self.kernel, self.key_log_w,
                        self.self_log_w, loss=self.loss_function, rows=keys,
                        working_memory=self.working_memory, backward=backward,
                        group=self.group, queries=queries)

    def loss_neighbors(self, metric, rows, neighbors, backward=False):
        if self.group is not None:  # LeaveOneOutBandwidth.learn refuses the minibatches
            raise NotImplementedError("leave-one-group-out against neighbor lists")
        return loo_loss_neighbors(self.x, self.key_v, self.metric(metric), self.kernel,
                                  self.key_log_w, self.self_log_w, loss=self.loss_function,
                                  rows=rows, neighbors=neighbors, backward=backward)

    def per_row(self, hs, rows):
        """Leave-one-out losses (G, m) of each of ``rows`` with bandwidth vectors ``hs``
        (G, d), in one pass, in float64."""
        x, v, log_w, self_log_w = self.x, self.key_v, self.key_log_w, self.self_log_w
        hs = self.metric(torch.as_tensor(hs, dtype=x.dtype, device=x.device))  # (G, d_x)
        if self._degree(hs.shape[1]):
            return loo_local_grid(
                x, v, hs, self.kernel, log_w, self_log_w, loss=self.loss_function,
                degree=self.degree, bounded=self.bounded, rows=rows,
                working_memory=self.working_memory,
                polynomial_columns=self.polynomial_columns,
                group=self.group).double()  # (G, m)
        keys, queries = self._queries(rows)
        pooled = loo_grid_pool(x, v, hs, self.kernel, log_w, self_log_w, rows=keys,
                               working_memory=self.working_memory, group=self.group,
                               queries=queries)  # (G, m, t)
        return self.loss_function.per_row(pooled.double(), self.v[rows].double())  # (G, m)

    def grid(self, hs, rows):
        """Leave-one-out losses (G,) of bandwidth vectors ``hs`` (G, d), in one pass."""
        return self.mean_loss(self.per_row(hs, rows), rows)

    def odds_losses(self, j, hs, rows):
        """The losses (S,) of ``hs`` (S, d), which differ only in the odds of categorical
        feature ``j``, from one pass (None where it does not apply: local fits).

        Feature j's factor depends on the categories of a query and a key alone, so the
        attention with the feature left out pools, per category of the keys, their
        values and weights (S_c, W_c); each candidate's prediction is then
        ``sum_c f(c_q, c) S_c / sum_c f(c_q, c) W_c``, ``f`` its factors
        (:meth:`~sklearn_nw._categorical.CategoricalFeatures.category_log_factors`):
        one pass for every candidate instead of one each."""
        categorical, x = self.categorical, self.x
        if categorical is None or self._degree(x.shape[1]):
            return None
        if self._codes is None:
            self._codes = torch.as_tensor(categorical.unembed(x.cpu().numpy()),
                                          device=x.device).long()
        k = int(np.flatnonzero(categorical.columns == j)[0])
        columns, codes = categorical.feature_columns(k), self._codes[:, j]  # (n,)
        n_categories = len(categorical.categories[k])
        base = x.clone()
        base[:, columns] = 0.0  # the feature left out: every key at the query's category
        values = torch.cat([self.key_v, torch.ones_like(self.key_v[:, :1])], 1)  # (n, t + 1)
        by_category = torch.nn.functional.one_hot(codes, n_categories).to(x.dtype)
        metric = self.metric(torch.as_tensor(hs[:1], dtype=x.dtype, device=x.device))
        keys, queries = self._queries(rows)
        if queries is not None:  # what a query keeps of its key, in its key's category
            shift = torch.cat([queries.own_shift, torch.zeros_like(queries.own_shift[:, :1])],
                              1)  # (m, t + 1): the kept weight is the query's own logit
            queries = queries._replace(own_shift=(
                by_category[keys][:, :, None] * shift[:, None, :]).reshape(len(keys), -1))
        pooled = loo_grid_pool(
            base, (by_category[:, :, None] * values[:, None, :]).reshape(len(x), -1),
            metric, self.kernel, self.key_log_w, self.self_log_w, rows=keys,
            working_memory=self.working_memory, group=self.group,
            queries=queries)[0]  # (m, c (t + 1))
        pooled = pooled.double().reshape(len(rows), n_categories, -1)  # (m, c, t + 1)
        factors = torch.as_tensor(categorical.category_log_factors(k, hs), device=x.device)
        factors = factors[:, codes[keys]].exp()  # (S, m, c): the query's category's rows
        sums = torch.einsum("smc,mcu->smu", factors, pooled)  # (S, m, t + 1)
        predictions = sums[..., :-1] / sums[..., -1:]
        if not bool(torch.isfinite(predictions).all()):
            return None  # a row without kernel mass: the full computation's fallback
        return self.mean_loss(self.loss_function.per_row(predictions,
                                                         self.v[rows].double()), rows)

    def mean_loss(self, per_row, rows):
        """Sample-weighted means (G,) of the losses (G, m) of ``rows``, as numpy."""
        w = self.log_w[rows].double().exp()  # (m,)
        return self.loss_function.weighted_mean(per_row, w).cpu().numpy()

    def sweep_distances(self, h, rows):
        """The distances of ``rows`` at bandwidths ``h`` (d,) for :func:`coordinate_sweep`
        (a :class:`~sklearn_nw._engine_loo.SweepDistances`); None where the losses are
        those of local fits, or the (m, n) distances would take more than half of
        ``working_memory``."""
        n = self.x.shape[0]
        if (self.expand is not None or self._degree(len(h)) or len(h) < 2
                or not SweepDistances.fits(len(rows), n, self.x.element_size(),
                                           self.working_memory)):
            return None
        h = torch.as_tensor(h, dtype=self.x.dtype, device=self.x.device)
        keys, queries = self._queries(rows)
        return SweepDistances(self.x, self.key_v, h, self.kernel, self.key_log_w,
                              self.self_log_w, keys, self.working_memory, group=self.group,
                              queries=queries)


class LogProgress:
    """Progress when tqdm is not installed: a line on stderr per update, and the same
    message logged at INFO (the stderr line is left out where that logging shows it)."""

    def __init__(self, total):
        self.total, self.n = total, 0

    def update(self, k):
        self.n += k

    def set_postfix(self, **kwargs):
        postfix = ", ".join(f"{name}={value}" for name, value in kwargs.items())
        message = f"leave-one-out bandwidth: iteration {self.n}/{self.total}, {postfix}"
        logger.info("%s", message)
        if not (logger.isEnabledFor(logging.INFO) and logger.hasHandlers()):
            sys.stderr.write(message + "\n")
            sys.stderr.flush()

    def close(self):
        pass
