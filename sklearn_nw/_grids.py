"""Exact leave-one-out grids: every candidate bandwidth scored by its exact leave-one-out
loss (or a score of the leave-one-out predictions) on the distinct training inputs, the
strategies behind the CV estimators' ``cv=None``.

:class:`LeaveOneOutGrid` scores fixed bandwidths (Nadaraya-Watson in one pass over the
distance blocks, :func:`~sklearn_nw._engine_loo.loo_grid_pool`; local polynomials from
blocks of rows of the leave-one-out attention; with ``n_neighbors``, the k-nearest model
the estimator deploys, each input's k nearest others); :class:`LeaveOneOutAdaptiveGrid`
scores adaptive bandwidths. Both ``score(loo_set, kernel, *, loss, ...)`` a grid; the
search strategy (:mod:`sklearn_nw._selection_grid`) chooses from their scores.
"""

import math
from typing import NamedTuple

import numpy as np
import torch
from sklearn.utils import gen_batches

from ._adaptive import WINDOW_LOG_RATIO, LeaveOneOutNeighbors
from ._engine import key_center
from ._engine_candidates import candidate_pool
from ._engine_loo import loo_grid_pool, loo_linear_grid_pool, moment_passes
from ._leave_one_out import (
    input_queries,
    leave_group_out_,
    nearest_keys,
    other_keys,
    self_logits,
    set_self_,
    tie_exact_sq_dist,
)
from ._local_poly import (
    TargetRange,
    bounded_keys,
    local_fit_many,
    local_fit_sparse,
    n_terms,
)
from ._losses import get_loss
from ._preconditions import check_working_memory
from ._search import TreeSearch, nearest_shares
from ._workers import chunk_rows, n_workers, on_workers, serial_if_small

# MiB a worker's block of local fits takes at most, whatever working_memory allows, for a
# polynomial of _BLOCK_TERMS terms or more; fewer terms take up to _BLOCK_TERMS / p times
# as much, at most _BLOCK_MIB_MAX. A block's fixed cost (some fifty torch calls) weighs on
# small polynomials, whose blocks of 32 MiB held one row at 4,000 inputs: the default grid
# of 25 bandwidths (CV, degree fixed) at 4,000 x 3 took 11.4 s at degree 1 and 21.1 s at
# degree 2 with 32 MiB, 5.4 s and 10.4 s with 128 MiB; a local quadratic in 8 features
# (45 terms), compute-bound, took 7.7 s at 800 inputs with 32 MiB and 10.4 s with 128.
_BLOCK_MIB = 32
_BLOCK_MIB_MAX = 128
_BLOCK_TERMS = 24


class GridResult(NamedTuple):
    """What :meth:`LeaveOneOutGrid.score` found."""

    bandwidth: np.ndarray  # (d,) the best grid point (the first on ties)
    index: int  # its row in the grid
    scores: np.ndarray  # (G,) the score of each grid point, higher is better
    loss: np.ndarray  # (G,) weighted mean leave-one-out loss at the distinct inputs
    location_loss: object = None  # (G, L) the leave-one-out loss at each distinct input
    # (G, L) the log-loss's: the share of each distinct input's rows whose class the
    # leave-one-out probabilities predict (the first class of the largest); else None.
    location_accuracy: object = None


class LeaveOneOutGrid:
    """Bandwidth chosen from a grid by its exact leave-one-out loss or score.

    The scores behind the CV estimators' ``cv=None``. Every grid point is scored in one
    pass over the distance blocks (the distances are computed once and shared by all
    bandwidths).

    Parameters
    ----------
    grid : ndarray of shape (G, d)
        Bandwidth vectors.
    scorer : callable, default=None
        ``scorer(pooled)`` of the leave-one-out predictions (L, t) at the distinct inputs,
        higher is better; None scores by the negative weighted mean loss.
    degree : int, default=0
        0: Nadaraya-Watson. 1 or 2: local polynomials of that degree, each grid point's
        leave-one-out fits weighted by the leave-one-out attention of the distinct inputs
        on each other, computed in blocks of rows (:meth:`_local_pool`).
    bounded : bool, default=False
        Local fits kept within the range of the targets carrying their weight
        (:func:`~sklearn_nw._local_poly.bound`), as the regressor's ``bounded`` predicts;
        here the targets of a repeated input are their weighted mean.
    n_neighbors : int, default=None
        The estimators' ``n_neighbors``: each left-out input attends to its nearest other
        inputs holding that many units of sample weight, as the refit without it predicts
        (:meth:`_nearest_pool`); None: to every other input.
    """

    def __init__(self, grid, scorer=None, degree=0, bounded=False, n_neighbors=None):
        self.grid = grid
        self.scorer = scorer
        self.degree = degree
        self.bounded = bounded
        self.n_neighbors = n_neighbors

    def score(self, loo, kernel, *, loss, dtype=np.float64, device="cpu",
              working_memory=1024):
        """Score every grid point on a training set as leave-one-out sees it.

        Parameters
        ----------
        loo : LeaveOneOutSet
            The distinct training inputs, their weights and values
            (:mod:`sklearn_nw._leave_one_out`).
        kernel : Kernel
        loss : {"squared_error", "log_loss"} or a loss of :mod:`sklearn_nw._losses`
        dtype : numpy dtype
            The data's dtype, in which the sums run.
        device : str or torch.device
        working_memory : float
            MiB for chunked temporaries.

        Returns
        -------
        result : GridResult
        """
        loss = get_loss(loss)
        device = torch.device(device)
        L = len(loo.weight)
        # Small grids run on this thread alone (torch's parallel regions cost more there).
        with serial_if_small(L * L, device):
            pooled = self._pool(loo, kernel, np.dtype(dtype), device,
                                working_memory)  # (G, L, t) at the L distinct inputs
        per_location = loss.per_row(pooled, pooled.new_tensor(loo.values))  # (G, L)
        weight = pooled.new_tensor(loo.weight)  # (L,)
        mean_loss = loss.weighted_mean(per_location, weight).cpu().numpy()  # (G,)
        if self.scorer is None:
            scores = -mean_loss
        else:
            scores = np.array([self.scorer(p) for p in pooled.cpu().numpy()],
                              dtype=np.float64)
        best = int(np.argmax(scores))
        accuracy = None
        if loss.name == "log_loss":
            hits = pooled.argmax(2, keepdim=True)  # (G, L, 1) the predicted classes
            accuracy = pooled.new_tensor(loo.values).expand_as(pooled).gather(2, hits)[..., 0]
            accuracy = accuracy.cpu().numpy()  # (G, L)
        return GridResult(np.asarray(self.grid, dtype=np.float64)[best], best, scores,
                          mean_loss, per_location.cpu().numpy(), accuracy)

    def _pool(self, loo, kernel, dtype, device, working_memory):
        """The leave-one-out predictions (G, L, t), float64, of every grid point at the L
        distinct inputs."""
        if self.n_neighbors is not None:
            if loo.group is not None:
                raise NotImplementedError(
                    "Leave-one-group-out (groups given to fit) of the k-nearest model "
                    f"(n_neighbors={self.n_neighbors}) is not supported: each query's "
                    "neighbors would have to be found outside its group. Use "
                    "n_neighbors=None, or a splitter such as cv=LeaveOneGroupOut().")
            return self._nearest_pool(loo, kernel, dtype, device, working_memory)
        if self.degree:
            return self._local_pool(loo, kernel, dtype, device, working_memory)
        torch_dtype = torch.float32 if dtype == np.float32 else torch.float64
        grid = np.asarray(self.grid, dtype=np.float64)
        # One feature in float64: the grid points whose windows hold few inputs
        # (a series' small bandwidths) attend to their windows alone.
        narrow = (np.zeros(len(grid), dtype=bool)
                  if dtype != np.float64 or loo.X.shape[1] != 1 or loo.group is not None
                  else _narrow_windows(loo, kernel, grid))

        def tensor(a):
            return torch.as_tensor(np.asarray(a), dtype=torch_dtype, device=device)

        out = torch.empty(len(grid), len(loo.weight), loo.values.shape[1],
                          dtype=torch.float64)
        if narrow.any():
            out[torch.as_tensor(narrow)] = self._window_pool(loo, kernel, device,
                                                             working_memory, grid[narrow])
        if not narrow.all():
            # Where inputs repeat under the row rule, the sums run over the distinct
            # inputs, the distinct rows their queries (the same predictions).
            by_input = input_queries(loo)
            if by_input is None:
                keys = (tensor(loo.X), tensor(loo.values), tensor(loo.log_weight),
                        tensor(loo.self_log_weight))
                rows = queries = None
            else:
                *keys, rows, queries = by_input.tensors(tensor)
            out[torch.as_tensor(~narrow)] = loo_grid_pool(
                keys[0], keys[1], tensor(grid[~narrow]), kernel, keys[2], keys[3],
                rows=rows, queries=queries, working_memory=working_memory,
                group=None if loo.group is None else torch.as_tensor(loo.group, device=device),
            ).double().cpu()
        return out

    def _local_pool(self, loo, kernel, dtype, device, working_memory, moments=True):
        """Leave-one-out local polynomial fits (G, L, t) at the L distinct inputs, in
        blocks of query rows and grid points on worker threads: each block's
        leave-one-out attention (:func:`_attention_rows`, from its distances to every
        input, shared by grid points that are multiples of the first), then its local
        fits. No (L, L) matrix is formed: a block holds what ``working_memory`` allows,
        at most :func:`_local_blocks`' cap per worker. Unbounded local-linear fits of a
        Gaussian-family kernel come from one pass of moments instead (``moments``,
        :meth:`_moment_pool`)."""
        grid = np.asarray(self.grid, dtype=np.float64)
        if moments and moment_passes(kernel, self.degree, self.bounded, grid[0]):
            return self._moment_pool(loo, kernel, dtype, device, working_memory)
        G, L = len(grid), len(loo.weight)
        # The columns in groups whose bandwidths are proportional over the grid: one
        # group when the grid points are multiples of the first; with categorical
        # features, the continuous features and each categorical one's columns.
        members, group_multiples = _proportional_columns(grid)  # [(c,)], (G, K)
        proportional = len(members) == 1
        multiples = group_multiples[:, 0]  # (G,) of the first group
        # One feature: each row attends to the sorted inputs within reach (a group's
        # keys need not be contiguous there: groups take the dense blocks).
        if (loo.X.shape[1] == 1 and loo.group is None
                and window_radius(kernel, 1.0, 0.0, 0.0) is not None):
            return self._window_pool(loo, kernel, device, working_memory)
        W = torch.as_tensor(loo.weight, device=device)  # (L,)
        self_log_w = torch.as_tensor(loo.self_log_weight, device=device)  # (L,)
        group = None if loo.group is None else torch.as_tensor(loo.group, device=device)
        values = torch.as_tensor(loo.values, dtype=torch.float64, device=device)  # (L, t)
        bounded = _bounded(loo, self.bounded, device)
        coords = _centered(loo, grid[0], device)  # (L, r)
        fit = _local_blocks(L, G, coords.shape[1], self.degree, working_memory,
                            n_workers(device), "for local polynomials")
        out = torch.empty(G, L, values.shape[1], dtype=torch.float64)

        # The inputs in the metric of the first grid point: a block's squared distances
        # per group of columns serve every grid point, as their sum with the group's
        # squared multiples.
        first = torch.as_tensor(loo.X / grid[0], device=device)  # (L, r)
        parts = [first[:, columns] for columns in members]
        inverse_sq = torch.as_tensor(group_multiples ** -2.0, device=device)  # (G, K)
        # The raw inputs and each grid point's metric: the fallback's ties (_attention_rows).
        raw_X, metrics = (torch.as_tensor(a, device=device) for a in (loo.X, grid))

        def run(block, _):  # the blocks are disjoint: each writes its own
            rows, grid_rows = block
            if proportional:
                D = _distances(first, rows)
                attention = _attention_rows(D * D, rows, W, self_log_w,
                                            multiples[grid_rows], kernel, group,
                                            raw=(raw_X, metrics[:1]))  # (g, b, L)
            else:
                D_sq = torch.stack([_distances(part, rows) ** 2 for part in parts])  # (K, b, L)
                each = torch.einsum("gk,kbl->bgl", inverse_sq[grid_rows], D_sq)  # (b, g, L)
                attention = _attention_rows(
                    each, rows, W, self_log_w, np.ones(each.shape[1]), kernel, group,
                    raw=(raw_X, metrics[grid_rows]))  # (g, b, L)
            nadaraya_watson = attention @ values  # (g, b, t)
            local, singular = local_fit_many(coords[rows], coords, attention, values,
                                             self.degree, bounded)  # (g, b, t)
            out[grid_rows, rows] = torch.where(singular[:, :, None], nadaraya_watson,
                                               local).cpu()

        on_workers([(rows, grid_rows) for rows in gen_batches(L, fit.rows)
                    for grid_rows in gen_batches(G, fit.grid_points)], run, device,
                   max_workers=fit.workers)
        return out

    def _moment_pool(self, loo, kernel, dtype, device, working_memory):
        """:meth:`_local_pool` of unbounded local-linear fits of a Gaussian-family kernel:
        the keys' raw moments pooled over the whole grid in one pass
        (:func:`~sklearn_nw._engine_loo.loo_linear_grid_pool`); the grid points of the
        fits it leaves out (moved sums losing digits, queries beyond their keys) from the
        blocks of attention."""
        tensor = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), device=device)
        out, redo = loo_linear_grid_pool(
            tensor(loo.X), tensor(loo.values), tensor(self.grid), kernel,
            tensor(loo.log_weight), tensor(loo.self_log_weight), working_memory=working_memory,
            polynomial_columns=loo.polynomial_columns,
            group=None if loo.group is None else torch.as_tensor(loo.group, device=device))
        out = out.cpu()
        again = redo.any(1).nonzero()[:, 0].cpu().numpy()  # grid points to redo
        if len(again):
            general = LeaveOneOutGrid(np.asarray(self.grid)[again], degree=self.degree,
                                      bounded=self.bounded)
            redone = general._local_pool(loo, kernel, dtype, device, working_memory,
                                         moments=False)  # (g, L, t)
            mask = redo[torch.as_tensor(again)].cpu()  # (g, L)
            out[torch.as_tensor(again)] = torch.where(mask[:, :, None], redone,
                                                      out[torch.as_tensor(again)])
        return out

    def _window_pool(self, loo, kernel, device, working_memory, grid=None):
        """:meth:`_local_pool` of one input feature (Nadaraya-Watson at degree 0), over
        ``grid`` (None: the whole grid): the inputs sorted, each block of query rows
        attends to the window of inputs within :func:`window_radius` of it
        (contiguous), in blocks of grid points of similar bandwidths (all those whose
        windows hold every input in one): O(L w) per grid point, w the window's inputs,
        instead of O(L^2)."""
        grid = np.asarray(self.grid if grid is None else grid, dtype=np.float64)[:, 0]  # (G,)
        G, L = len(grid), len(loo.weight)
        order, x, weight, nearest, spread = _sorted_inputs(loo)
        # The raw sorted inputs and the metric: the fallback's ties (_attention_rows).
        raw = (torch.as_tensor(x[:, None], device=device),
               torch.as_tensor(grid[:1, None], device=device))
        x, nearest = x / grid[0], nearest / grid[0]  # in units of the first grid point
        W = torch.as_tensor(weight, device=device)  # (L,)
        self_log_w = torch.as_tensor(loo.self_log_weight[order], device=device)  # (L,)
        values = torch.as_tensor(loo.values[order], dtype=torch.float64,
                                 device=device)  # (L, t)
        values_t = values.T.contiguous()  # (t, L)
        bounded = _bounded(loo, self.bounded, device)
        if isinstance(bounded, TargetRange):
            bounded = bounded.take(torch.as_tensor(order, device=device))
        coords = _centered(loo, grid[:1], device)[torch.as_tensor(order, device=device)]
        points = torch.as_tensor(x[:, None], device=device)  # (L, 1)
        multiples = grid / grid[0]  # (G,)
        out = torch.empty(G, L, values.shape[1], dtype=torch.float64)
        blocks = []
        groups = []
        for grid_rows in _similar_bandwidths(multiples):
            h = multiples[grid_rows].max()
            reach = window_radius(kernel, h, nearest, spread)  # (L,)
            # The widest window of one row sizes the blocks (a block of b rows spans
            # at most b more inputs).
            width = int((np.searchsorted(x, x + reach, "right")
                         - np.searchsorted(x, x - reach, "left")).max())
            if groups and groups[-1][2] >= L:
                # Windows of every input: one group, whose blocks share their designs.
                groups[-1] = (np.concatenate([groups[-1][0], grid_rows]), reach, width)
            else:
                groups.append((grid_rows, reach, width))
        for grid_rows, reach, width in groups:
            fit = _local_blocks(min(L, 2 * width), len(grid_rows), coords.shape[1],
                                self.degree, working_memory, n_workers(device),
                                "for local polynomials")
            for rows in gen_batches(L, _window_rows(fit, L, width, coords.shape[1],
                                                    self.degree, working_memory)):
                r = reach[rows].max()
                lo = int(np.searchsorted(x, x[rows.start] - r, "left"))
                hi = int(np.searchsorted(x, x[rows.stop - 1] + r, "right"))
                for part in gen_batches(len(grid_rows), fit.grid_points):
                    blocks.append((rows, grid_rows[part], lo, hi))
        order = torch.as_tensor(order)

        def run(block, workspace):  # the blocks are disjoint: each writes its own
            rows, grid_rows, lo, hi = block
            keys = slice(lo, hi)
            own = slice(rows.start - lo, rows.stop - lo)  # the rows among the keys
            D = _distances(points[keys], own)  # (b, w)
            attention = _attention_rows(D * D, own, W[keys], self_log_w[keys],
                                        multiples[grid_rows], kernel,
                                        raw=(raw[0][keys], raw[1]))  # (g, b, w)
            if not self.degree:
                # (values^T attention^T)^T: BLAS is much faster at it for few values
                fits = (values_t[:, keys] @ attention.transpose(1, 2)).transpose(1, 2)
                fits = fits.cpu()  # (g, b, t)
                out[torch.as_tensor(grid_rows)[:, None], order[rows][None, :]] = fits
                return
            local, singular, nadaraya_watson = local_fit_many(
                coords[rows], coords[keys], attention, values[keys], self.degree,
                bounded.take(keys) if isinstance(bounded, TargetRange) else bounded,
                return_nadaraya_watson=True, workspace=workspace)  # (g, b, t) each
            fits = torch.where(singular[:, :, None], nadaraya_watson, local).cpu()
            out[torch.as_tensor(grid_rows)[:, None], order[rows][None, :]] = fits

        # Each worker's designs in one workspace (3 p + 1 columns hold them).
        size = max((r.stop - r.start) * (hi - lo) for r, _, lo, hi in blocks) * (
            3 * (self.degree + 1) * values.shape[1] + 1)
        on_workers(blocks, run, device, max_workers=n_workers(device),
                   init=lambda: torch.empty(size, dtype=torch.float64, device=device))
        return out

    def _nearest_pool(self, loo, kernel, dtype, device, working_memory):
        """Leave-one-out predictions (G, L, t) of the k-nearest model (``n_neighbors``):
        each distinct input's nearest other inputs holding k units of weight, the last
        one in part, found as :meth:`~sklearn_nw._keys.FittedKeys.pool` finds a query's in
        the refit without it (:class:`~sklearn_nw._search.TreeSearch`, in the search space
        of the grid point's metric divided by its largest bandwidth; grid points of the
        same ratios share them), then each grid point's kernel over them
        (:func:`~sklearn_nw._engine_candidates.candidate_pool`) and, for local polynomials, the
        local fits on that attention, a singular one keeping its Nadaraya-Watson value."""
        grid = np.asarray(self.grid, dtype=np.float64)
        torch_dtype = torch.float32 if dtype == np.float32 else torch.float64
        L, k = len(loo.weight), self.n_neighbors

        def tensor(a):
            return torch.as_tensor(np.asarray(a), dtype=torch_dtype, device=device)

        # Where inputs repeat under the row rule (and no bound reads single targets), the
        # keys are the distinct inputs and each distinct row a query at its input, which
        # holds what stays there (its weight, the mean of its values) as an extra key:
        # ties share in proportion to weight, so an input holds what its rows would.
        by_input = (input_queries(loo) if not (self.degree and self.bounded) else None)
        keys = loo if by_input is None else by_input.keys
        positive = np.flatnonzero(keys.weight > 0)
        weight = keys.weight[positive]
        point = np.full(len(keys.weight), -1)
        point[positive] = np.arange(len(positive))
        if by_input is None:
            query_at, values = np.arange(L), tensor(loo.values)  # (L,), (L, t)
            own = ({"skip_zero": True} if loo.self_weight is None
                   else {"own": (point, loo.self_weight)})
        else:
            query_at = by_input.key  # (L,) each distinct row's input
            values = tensor(np.concatenate([keys.values, by_input.own_values]))  # (U + L, t)
            own = {"own": (point[query_at], np.exp(by_input.self_log_weight))}
        out = torch.empty(len(grid), L, values.shape[1], dtype=torch.float64)
        ratios = grid / grid.max(1, keepdims=True)  # (G, d)
        for ratio in np.unique(ratios, axis=0):
            search_space = keys.X / ratio  # (U, d)
            index = TreeSearch(search_space[positive])
            # A key keeps its self weight (none under leave_out="input": its own
            # location, at distance 0, weighs nothing): the others hold the rest of k.
            dist, ind, w, _ = index.nearest_holding(
                search_space[query_at], weight, k, first=min(k + 2, len(positive)), **own)
            keep = nearest_shares(dist, w, k)  # (L, m)
            m = dist.shape[1]
            indptr = torch.arange(0, L * m + 1, m, device=device)  # (L + 1,)
            col = positive[ind]  # (L, m)
            if by_input is not None:  # a query's own input: what stays there
                col = np.where(col == query_at[:, None], len(keys.weight) + np.arange(L)[:, None],
                               col)
            col = torch.as_tensor(col.ravel(), device=device)  # (L m,)
            with np.errstate(divide="ignore"):
                log_w = tensor(np.log(keep).ravel())  # (L m,)
            for g in np.flatnonzero((ratios == ratio).all(1)):
                part = candidate_pool(tensor(dist.ravel()), col, indptr, values, kernel,
                                      scale=float(grid[g].max()), log_w=log_w,
                                      return_attention=bool(self.degree))
                pooled = part.out  # (L, t)
                if self.degree:
                    xs = _centered(keys, grid[g], device).to(torch_dtype)  # (U, r)
                    xq = xs[torch.as_tensor(query_at, device=device)]  # (L, r)
                    xk = xs if by_input is None else torch.cat([xs, xq])
                    local, _, singular = local_fit_sparse(
                        xq, xk, indptr, col, part.attention[2], values, self.degree,
                        _bounded(keys, self.bounded, device, torch_dtype))  # (L, t)
                    pooled = torch.where(singular[:, None], pooled, local)
                out[g] = pooled.double().cpu()
        return out


class _Blocks(NamedTuple):
    """Query rows and grid points per block of the local fits, and the workers that
    compute blocks at once."""

    rows: int
    grid_points: int
    workers: int


def local_fit_row_bytes(L, n_coords, degree):
    """Bytes of the leave-one-out local fits of one query row under one grid point, over
    L inputs: its distances and attention, its designs, moment products, equivalent
    kernel and the bound's temporaries."""
    p = n_terms(n_coords, degree)
    return 8 * L * (3 * p + 2 * n_coords + 10)


def _block_bytes(n_coords, degree):
    """The most bytes a worker's block of local fits takes (see ``_BLOCK_MIB``)."""
    p = n_terms(n_coords, degree)
    return int(min(_BLOCK_MIB_MAX, _BLOCK_MIB * max(1.0, _BLOCK_TERMS / p)) * 2**20)


def _local_blocks(L, G, n_coords, degree, working_memory, workers, what):
    """:class:`_Blocks` of the leave-one-out local fits of G grid points at L inputs,
    ``workers`` blocks at once within ``working_memory`` MiB, each at most
    ``_BLOCK_MIB`` (more for polynomials of few terms): all grid points of a row when
    they fit, else fewer, and fewer workers when one row each does not fit; refused when
    one row of one grid point does not fit. Rows as
    :func:`~sklearn_nw._workers.chunk_rows` cuts them."""
    row = local_fit_row_bytes(L, n_coords, degree)
    total = working_memory * 2**20
    block = _block_bytes(n_coords, degree)
    check_working_memory(
        row, working_memory, f"The leave-one-out grid {what} computes blocks of rows of "
        f"({L}, {L}) matrices; one row takes {row / 2**20:.3g} MiB", instead=", or use cv=5")
    workers = int(max(1, min(workers, total // row)))
    grid_points = int(max(1, min(G, min(total / workers, block) // row)))
    rows = chunk_rows(L, row * grid_points, working_memory, workers=workers, cap_bytes=block)
    return _Blocks(rows, grid_points, workers)


# A block of a windowed pool (:meth:`LeaveOneOutGrid._window_pool`) holds at least this
# many (query, key, grid point) triples where memory allows: each block costs some fifty
# torch calls whatever its size, which on narrow windows (statsmodels' co2, 45 inputs)
# outweighed its work, and two workers contending for the interpreter ran slower than one.
# Measured, ad hoc (bench_fit_time's default fits, median of 4): 2^18 against 2^16, co2
# 0.54 s against 0.60 s, the series of 800 points 0.41 against 0.44, the others the same.
_WINDOW_BLOCK_MIN = 2**18


def _window_rows(fit, L, width, n_coords, degree, working_memory):
    """Query rows per block of a windowed pool: ``fit``'s (:func:`_local_blocks`, sized
    for rows of ``2 width`` keys), or more, up to ``_WINDOW_BLOCK_MIN`` triples over
    their span of keys (the rows and a window's ``width``), within a worker's block of
    memory (:func:`_block_bytes`, and its share of ``working_memory`` MiB)."""
    g = fit.grid_points
    # The least rows b with g b (b + width) >= _WINDOW_BLOCK_MIN.
    wanted = int(np.ceil((np.sqrt(width**2 + 4 * _WINDOW_BLOCK_MIN / g) - width) / 2))
    rows = min(L, max(fit.rows, wanted))
    cap = min(_block_bytes(n_coords, degree), working_memory * 2**20 / fit.workers)
    while rows > fit.rows and g * rows * local_fit_row_bytes(
            min(L, rows + width), n_coords, degree) > cap:
        rows = max(fit.rows, rows // 2)
    return rows


# Nadaraya-Watson grids of one feature take the windows from this many inputs times 4 on
# (on fewer the dense pass costs little).
_WINDOW_MIN = 256


def window_radius(kernel, h, nearest, spread):
    """Distances (in units of the grid's first bandwidth) beyond which a Gaussian-family
    or compact kernel at bandwidth ``h`` gives an input no weight that counts: the
    support (at least the ``nearest`` other input, the fallback's), or for the Gaussian
    family the distance whose logit lies ``WINDOW_LOG_RATIO`` below the nearest's,
    the inputs' log weights differing by at most ``spread``. None for other kernels
    (their tails have no such bound)."""
    if kernel.is_compact:
        return np.maximum(h * kernel.support, nearest) * (1 + 1e-9)
    if kernel.quadratic_coef is None:
        return None
    return np.sqrt(nearest**2 + h * h * (WINDOW_LOG_RATIO + spread)
                   / kernel.quadratic_coef) * (1 + 1e-9)


def _narrow_windows(loo, kernel, grid):
    """Which points of the ``grid`` (G, 1) of one feature have windows
    (:func:`window_radius`) of at most a quarter of the distinct inputs for every row:
    :meth:`LeaveOneOutGrid._window_pool` serves them for less than the dense pass."""
    if window_radius(kernel, 1.0, 0.0, 0.0) is None or len(loo.weight) < 4 * _WINDOW_MIN:
        return np.zeros(len(grid), dtype=bool)
    _, x, _, nearest, spread = _sorted_inputs(loo)
    narrow = np.zeros(len(grid), dtype=bool)
    for g, h in enumerate(grid[:, 0]):
        reach = window_radius(kernel, h, nearest, spread)  # (L,)
        width = (np.searchsorted(x, x + reach, "right")
                 - np.searchsorted(x, x - reach, "left")).max()
        narrow[g] = 4 * width <= len(x)
    return narrow


def _sorted_inputs(loo):
    """The distinct inputs of one feature sorted (:func:`window_radius`' terms): their
    order (L,), values (L,) and weights (L,), each one's distance to its nearest other of
    positive weight (L,), and the spread of the positive log weights."""
    order = np.argsort(loo.X[:, 0], kind="stable")  # (L,)
    x, weight = loo.X[order, 0], loo.weight[order]
    log_w = np.log(weight[weight > 0])
    return order, x, weight, _nearest_other(x, weight > 0), float(log_w.max() - log_w.min())


def _proportional_columns(grid):
    """The columns of a grid of bandwidth vectors (G, r) in groups whose bandwidths keep
    their ratios over the grid: the groups' columns [(c,)] and each grid point's multiple
    of the first's bandwidths in each group (G, K)."""
    ratios = grid / grid[0]  # (G, r)
    members, multiples = [], []
    for c in range(grid.shape[1]):
        for columns, multiple in zip(members, multiples):
            if np.allclose(ratios[:, c], multiple, rtol=1e-12, atol=0.0):
                columns.append(c)
                break
        else:
            members.append([c])
            multiples.append(ratios[:, c])
    return [np.array(columns) for columns in members], np.column_stack(multiples)


def _nearest_other(x, positive):
    """Distance (L,) of each sorted input ``x`` (L,) to its nearest other input of
    positive weight (inf where there is none)."""
    at = np.flatnonzero(positive)  # (P,) positions of the inputs of positive weight
    padded = np.concatenate([[-np.inf], x[at], [np.inf]])  # (P + 2,)
    i = np.arange(len(x))
    left = np.searchsorted(at, i, "left")  # the positive inputs before i: at[:left]
    right = np.searchsorted(at, i, "right")  # those after it: at[right:]
    return np.minimum(x - padded[left], padded[right + 1] - x)


def _similar_bandwidths(multiples):
    """The grid points (G,) in groups of bandwidths within a factor 2 of their group's
    largest, smallest first: each group's windows are its largest's."""
    order = np.argsort(multiples, kind="stable")
    groups, start = [], 0
    for k in range(1, len(order) + 1):
        if k == len(order) or multiples[order[k]] > 2 * multiples[order[start]]:
            groups.append(order[start:k])
            start = k
    return groups


def _distances(points, rows):
    """Distances (b, L) of the inputs ``points[rows]`` to every input, as
    :class:`~sklearn_nw._adaptive.LeaveOneOutNeighbors` is given them."""
    return torch.cdist(points[rows], points, compute_mode="donot_use_mm_for_euclid_dist")


def _attention_rows(D_sq, rows, W, self_log_w, h, kernel, group=None, raw=None):
    """Exact leave-one-out attention (g, b, L) of the keys ``rows`` (a slice of b) on
    every key, each keeping the log weight ``self_log_w`` (L,) on itself, under fixed
    bandwidths ``h`` (g,) in units of their distances, given squared ``D_sq`` (b, L), or
    (b, g, L) each grid point's own:
    :meth:`~sklearn_nw._adaptive.LeaveOneOutNeighbors.fixed_attention` on a block of
    rows. With ``group`` (L,) the keys' groups, a row's group leaves with it. A row of
    no kernel mass (a compact kernel) attends to its nearest other key(s) (of other
    groups), every tie, by weight: with ``raw`` ``(X, metrics)``, the keys' raw inputs
    (L, r) and each grid point's bandwidths (g, r) (one row where the grid points are
    multiples of one), the ties of their raw differences, as a refit's fallback has them
    (:func:`~sklearn_nw._leave_one_out.tie_exact_sq_dist`)."""
    h = torch.as_tensor(np.asarray(h, dtype=np.float64), dtype=D_sq.dtype,
                        device=D_sq.device)
    # Laid out query by query, (b, g, L) in memory: the local fits' batched products
    # take each query's attentions as one matrix.
    h_sq = (h * h)[None, :, None]  # (1, g, 1)
    per_point = D_sq.dim() == 3
    shared = D_sq if per_point else D_sq[:, None]  # (b, g or 1, L)
    if kernel.quadratic_coef is not None:  # the Gaussian family: one pass
        logits = shared * (-kernel.quadratic_coef / h_sq)  # (b, g, L)
    else:
        logits = kernel.log_profile_sq(shared / h_sq)  # (b, g, L)
    log_w = torch.log(W)  # (L,)
    if not bool((W == 1).all()):  # unit weights add log 1 = 0
        logits += log_w
    own = torch.arange(rows.start, rows.stop, device=D_sq.device)  # (b,) each row's own input
    if bool((W <= 0).any()):
        logits[:, :, W <= 0] = -math.inf
    set_self_(logits.transpose(0, 1), own, self_logits(kernel, self_log_w, own))
    leave_group_out_(logits.transpose(0, 1), group, own)
    attention = torch.softmax(logits, dim=2)  # (b, g, L); a row of no mass is NaN
    empty = torch.isnan(attention[:, :, 0]) | torch.isnan(attention[:, :, -1])  # (b, g)
    if bool(empty.any()):
        eligible = other_keys(W > 0, own, group)  # (b, L)
        distances = (D_sq.unbind(1) if per_point else [D_sq]) if raw is None else [
            tie_exact_sq_dist(raw[0][rows], raw[0], metric) for metric in raw[1]]
        fallback = torch.stack([
            torch.softmax(torch.where(nearest_keys(d_sq, eligible)[0], log_w, -math.inf),
                          dim=1)
            for d_sq in distances], 1)  # (b, g or 1, L)
        attention = torch.where(empty[:, :, None], fallback, attention)
    return attention.transpose(0, 1)  # (g, b, L)


def dense_leave_one_out_bytes(L):
    """Bytes of the dense (L, L) matrices of an adaptive exact leave-one-out grid over L
    distinct inputs, at most: the distances and their squares (the squares alone where
    the distances are their roots: ``LeaveOneOutNeighbors.of_points``), and a
    candidate's logits, attention and temporaries."""
    return 6 * L * L * 8


def _check_dense_leave_one_out(L, working_memory, what):
    """Refuse the dense (L, L) matrices of an exact leave-one-out grid above
    ``working_memory``."""
    need = dense_leave_one_out_bytes(L)
    check_working_memory(
        need, working_memory, f"The leave-one-out grid {what} holds dense ({L}, {L}) "
        "matrices", details=f": it needs at least {math.ceil(need / 2**20)} MiB, or at most "
        f"{math.isqrt(int(working_memory * 2**20) // (6 * 8))} distinct training inputs",
        instead=", or use cv=5")


def _neighbors_of(scaled, W, device, max_neighbors=1, self_weight=None, extra=None):
    """:class:`~sklearn_nw._adaptive.LeaveOneOutNeighbors` of leave-one-out's keys in the
    scaled coordinates (L, r), with the ``extra`` logits of every pair (L, L); with one
    coordinate, its windows (the keys sorted, as
    :func:`~sklearn_nw._leave_one_out.distinct_inputs` sorts them)."""
    points = torch.as_tensor(scaled, device=device)
    positions = points[:, 0] if points.shape[1] == 1 else None
    return LeaveOneOutNeighbors.of_points(points, W, max_neighbors, self_weight, extra,
                                          positions)


def categorical_logits(kernel, categories, device):
    """The logits (L, L) of the categorical features' Gaussian factor between inputs
    whose embedded categorical columns, divided by their scales, are ``categories``
    (L, e): ``-c ||e_i - e_j||**2``, ``c`` the kernel's quadratic coefficient
    (:mod:`sklearn_nw._categorical`)."""
    points = torch.as_tensor(categories, device=device)
    D = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")
    return D.square_().mul_(-kernel.quadratic_coef)


def _centered(loo, metric, device):
    """The distinct inputs divided by ``metric`` and centered (L, r) where the fitted
    estimator centers its keys (:func:`~sklearn_nw._engine.key_center`): the coordinates
    of the local fits (whose intercepts do not depend on a scaling of each coordinate)."""
    scaled = torch.as_tensor(loo.X / metric, device=device)[:, : loo.polynomial_columns]
    return scaled - key_center(scaled[torch.as_tensor(loo.weight > 0, device=device)])


def _bounded(loo, bounded, device, dtype=torch.float64):
    """``bounded`` for the local fits on ``loo``'s keys
    (:func:`~sklearn_nw._local_poly.bounded_keys`)."""
    return bounded_keys(bounded, loo.value_range,
                        lambda a: torch.as_tensor(a, dtype=dtype, device=device))


def _local_fits(attentions, coords, loo, degree, working_memory, bounded=False):
    """Leave-one-out predictions (G, L, t), float64, of the leave-one-out attentions
    (L, L) that ``attentions`` yields: Nadaraya-Watson for ``degree=0``, else local
    polynomial fits in ``coords`` (L, r), bounded or not, whose singular rows keep the
    Nadaraya-Watson value. The fits of several attentions share their designs
    (:func:`~sklearn_nw._local_poly.local_fit_many`)."""
    L, r = coords.shape
    values = torch.as_tensor(loo.values, dtype=torch.float64, device=coords.device)  # (L, t)
    bounded = _bounded(loo, bounded, coords.device)
    # Attentions per batch: as many as _BLOCK_MIB holds (the list and its stack), not
    # working_memory's worth (33 of (1000, 1000) at the default 1 GiB).
    group = max(1, int(min(working_memory, _BLOCK_MIB) * 2**20 // (2 * 8 * L * L)))
    # Query rows per fit: the group's local fits of a row (local_fit_row_bytes), for each
    # of the workers at once, at most _block_bytes each, at least two blocks per worker.
    workers = n_workers(coords.device)
    outs, batch = [], []

    def flush():
        attention = torch.stack(batch)  # (g, L, L)
        out = attention @ values  # (g, L, t)
        # Sized to the batch at hand: a full group's step cut small batches (a family's
        # 21 candidates) into blocks of a few rows, each paying the fits' fixed costs.
        step = chunk_rows(L, len(batch) * local_fit_row_bytes(L, r, degree), working_memory,
                          workers=workers, cap_bytes=_block_bytes(r, degree))

        def fit(rows, _):  # the blocks' rows are disjoint: each writes its own
            local, singular = local_fit_many(coords[rows], coords, attention[:, rows],
                                             values, degree, bounded)
            out[:, rows] = torch.where(singular[:, :, None], out[:, rows], local)

        if degree:
            # On the workers (see sklearn_nw._workers): the fits' many short parallel
            # operations stall whenever another process takes a core.
            on_workers(gen_batches(L, step), fit, coords.device)
        outs.append(out.cpu())
        batch.clear()

    for attention in attentions:
        if not degree:  # Nadaraya-Watson: nothing to share
            outs.append((attention @ values)[None].cpu())
            continue
        batch.append(attention)
        if len(batch) == group:
            flush()
    if batch:
        flush()
    return torch.cat(outs)


def _continuous_columns(loo):
    """The continuous coordinates of leave-one-out's keys, the leading columns: those
    the adaptive bandwidths measure and scale (all but categorical features')."""
    return loo.X.shape[1] if loo.polynomial_columns is None else loo.polynomial_columns


class LeaveOneOutAdaptiveGrid(LeaveOneOutGrid):
    """Adaptive bandwidths chosen from candidates by their exact leave-one-out loss or
    score: :class:`LeaveOneOutGrid` for :class:`AdaptiveBandwidth`.

    The distances between the distinct inputs and each one's nearest others are found
    once and shared by every candidate
    (:class:`~sklearn_nw._adaptive.LeaveOneOutNeighbors`): dense (L, L) matrices.

    Parameters
    ----------
    candidates : list of Adaptive
        Kind, k and c of each candidate.
    base : ndarray of shape (d,)
        The per-feature bandwidths distances are measured in (only their ratios matter).
    scorer : callable, default=None
        As for :class:`LeaveOneOutGrid`.
    degree : int, default=0
        As for :class:`LeaveOneOutGrid`: local fits with each candidate's leave-one-out
        attention as weights.
    shared : dict, default=None
        Where the neighbors found are kept for the next grids of the same training set
        and base (the extensions of a search, the other kind, other degrees).
    bounded : bool, default=False
        As for :class:`LeaveOneOutGrid`.
    """


    def __init__(self, candidates, base, scorer=None, degree=0, shared=None, bounded=False):
        super().__init__(np.repeat(np.asarray(base, dtype=np.float64)[None], len(candidates),
                                   axis=0), scorer=scorer, degree=degree, bounded=bounded)
        self.candidates = candidates
        self.shared = {} if shared is None else shared

    def _neighbors(self, loo, kernel, device, max_neighbors):
        """The distinct inputs' neighbors in the key set's search space (the metric
        divided by its largest bandwidth), from ``shared`` when found there for at least
        ``max_neighbors``. With categorical features, in the continuous ones (the
        leading ``loo.polynomial_columns``), the categories' factor as extra logits."""
        found = self.shared.get("neighbors")
        W = torch.as_tensor(loo.weight, device=device)
        kept = (None if loo.self_weight is None
                else torch.as_tensor(loo.self_weight, device=device))
        if found is None:
            base, r = self.grid[0], _continuous_columns(loo)
            extra = (None if r == loo.X.shape[1] else
                     categorical_logits(kernel, loo.X[:, r:] / base[r:], device))
            base = base[:r]
            found = (max_neighbors, _neighbors_of(loo.X[:, :r] / (base / base.max()), W,
                                                  device, max_neighbors, kept, extra))
        elif found[0] < max_neighbors:  # more neighbors: the same distances
            found = (max_neighbors, found[1].reach(max_neighbors))
        self.shared["neighbors"] = found
        return found[1]

    def _pool(self, loo, kernel, dtype, device, working_memory):
        if loo.group is not None:
            raise NotImplementedError(
                "Leave-one-group-out (groups given to fit) of adaptive bandwidths is not "
                "supported: their k nearest neighbors would have to be found outside each "
                "query's group. Use bandwidth_kinds=['fixed'], or a splitter such as "
                "cv=LeaveOneGroupOut().")
        _check_dense_leave_one_out(len(loo.weight), working_memory, "of adaptive bandwidths")
        neighbors = self._neighbors(loo, kernel, device,
                                    max(c.n_neighbors for c in self.candidates))
        r = _continuous_columns(loo)
        if not self.degree:
            # Blocks of rows on worker threads of one torch thread each (a few short
            # (L, L) operations per candidate are parallel regions whose barriers stall
            # beside a busy process), every candidate pooled on a block while it is in
            # cache: the (L, L) attention is never stored.
            neighbors.prepare()  # the neighbors found first, here
            values = torch.as_tensor(loo.values, dtype=torch.float64, device=device)  # (L, t)
            return neighbors.pooled(self.candidates, kernel, r, values).cpu()  # (G, L, t)
        attentions = (neighbors.attention(candidate, kernel, r)[0]
                      for candidate in self.candidates)
        return _local_fits(attentions, _centered(loo, self.grid[0], device), loo, self.degree,
                           working_memory, self.bounded)
