"""Exact leave-one-out grids: every candidate bandwidth scored by its exact leave-one-out
loss (or a score of the leave-one-out predictions) on the distinct training inputs, the
strategies behind the CV estimators' ``cv=None``.

:class:`LeaveOneOutGrid` scores fixed bandwidths (Nadaraya-Watson in one pass over the
distance blocks, :func:`~sklearn_nw._engine_loo.loo_grid_pool`; local polynomials from each
grid point's dense leave-one-out attention); :class:`LeaveOneOutAdaptiveGrid` scores
adaptive bandwidths. Both share ``select(loo_set, kernel, *, loss, ...)`` with
:class:`~sklearn_nw.LeaveOneOutBandwidth`.
"""

from typing import NamedTuple

import numpy as np
import torch
from sklearn.utils import gen_batches

from ._adaptive import LeaveOneOutNeighbors
from ._engine import chunk_rows, on_workers, serial_if_small
from ._engine_loo import loo_grid_pool
from ._local_poly import local_fit_many, n_terms
from ._losses import get_loss


class GridResult(NamedTuple):
    """What :meth:`LeaveOneOutGrid.select` found."""

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

    The strategy behind the CV estimators' ``cv=None``; it shares :meth:`select` with
    :class:`LeaveOneOutBandwidth`. Every grid point is scored in one pass over the
    distance blocks (the distances are computed once and shared by all bandwidths).

    Parameters
    ----------
    grid : ndarray of shape (G, d)
        Bandwidth vectors.
    score : callable, default=None
        ``score(pooled)`` of the leave-one-out predictions (L, t) at the distinct inputs,
        higher is better; None scores by the negative weighted mean loss.
    degree : int, default=0
        0: Nadaraya-Watson. 1 or 2: local polynomials of that degree, each grid point's
        leave-one-out fits weighted by the leave-one-out attention of the distinct inputs
        on each other (:class:`~sklearn_nw._adaptive.LeaveOneOutNeighbors`), a dense
        (L, L) matrix per grid point.
    bounded : bool, default=False
        Local fits kept within the range of the targets carrying their weight
        (:func:`~sklearn_nw._local_poly.bound`), as the regressor's ``bounded`` predicts;
        here the targets of a repeated input are their weighted mean.
    """

    def __init__(self, grid, score=None, degree=0, bounded=False):
        self.grid = grid
        self.score = score
        self.degree = degree
        self.bounded = bounded

    def select(self, loo, kernel, *, loss, h_start=None, dtype=np.float64, device="cpu",
               working_memory=1024):
        """Score every grid point on a training set as leave-one-out sees it.

        Parameters are those of :meth:`LeaveOneOutBandwidth.select` (``h_start`` is not
        used: the grid is given).

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
        mean_loss = ((per_location * weight).sum(1) / weight.sum()).cpu().numpy()  # (G,)
        if self.score is None:
            scores = -mean_loss
        else:
            scores = np.array([self.score(p) for p in pooled.cpu().numpy()], dtype=np.float64)
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
        if self.degree:
            return self._local_pool(loo, kernel, dtype, device, working_memory)
        torch_dtype = torch.float32 if dtype == np.float32 else torch.float64

        def tensor(a):
            return torch.as_tensor(np.asarray(a), dtype=torch_dtype, device=device)

        return loo_grid_pool(
            tensor(loo.X), tensor(loo.values), tensor(self.grid), kernel,
            tensor(loo.log_weight), tensor(loo.self_log_weight),
            working_memory=working_memory,
        ).double()

    def _local_pool(self, loo, kernel, dtype, device, working_memory):
        """Leave-one-out local polynomial fits (G, L, t) at the L distinct inputs: each
        grid point's leave-one-out attention of the inputs on each other
        (:meth:`~sklearn_nw._adaptive.LeaveOneOutNeighbors.fixed_attention`; the
        distances are shared by grid points that are multiples of the first), then the
        local fits, of several grid points at once (:func:`_local_fits`)."""
        _check_dense_leave_one_out(len(loo.weight), working_memory, "for local polynomials")
        grid = np.asarray(self.grid, dtype=np.float64)
        multiples = grid[:, 0] / grid[0, 0]  # (G,)
        proportional = np.allclose(grid, multiples[:, None] * grid[0], rtol=1e-12, atol=0)
        W = torch.as_tensor(loo.weight, device=device)

        def attentions():
            neighbors = _neighbors_of(loo.X / grid[0], W, device) if proportional else None
            for g, h in enumerate(grid):
                if proportional:
                    yield neighbors.fixed_attention(float(multiples[g]), kernel)[0]
                else:
                    yield _neighbors_of(loo.X / h, W, device).fixed_attention(1.0, kernel)[0]

        return _local_fits(attentions(), _centred(loo, grid[0], device), loo, self.degree,
                           working_memory, self.bounded)


def _check_dense_leave_one_out(L, working_memory, what):
    """Refuse the dense (L, L) matrices of an exact leave-one-out grid above
    ``working_memory``."""
    if 6 * L * L * 8 > working_memory * 2**20:
        raise ValueError(
            f"The leave-one-out grid {what} holds dense ({L}, {L}) matrices, more than "
            f"scikit-learn's working_memory of {working_memory} MiB. Raise the limit with "
            "sklearn.config_context(working_memory=...), or use cv=5."
        )


def _neighbors_of(scaled, W, device, max_neighbors=1):
    """:class:`~sklearn_nw._adaptive.LeaveOneOutNeighbors` of the distinct inputs in the
    scaled coordinates (L, r)."""
    points = torch.as_tensor(scaled, device=device)
    D = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")
    return LeaveOneOutNeighbors(D, W, max_neighbors)


def _centred(loo, metric, device):
    """The distinct inputs divided by ``metric`` and centred (L, r): the coordinates of
    the local fits (whose intercepts do not depend on a scaling of each coordinate)."""
    scaled = torch.as_tensor(loo.X / metric, device=device)
    return scaled - scaled[torch.as_tensor(loo.weight > 0, device=device)].mean(0)


def _local_fits(attentions, coords, loo, degree, working_memory, bounded=False):
    """Leave-one-out predictions (G, L, t), float64, of the leave-one-out attentions
    (L, L) that ``attentions`` yields: Nadaraya-Watson for ``degree=0``, else local
    polynomial fits in ``coords`` (L, r), bounded or not, whose singular rows keep the
    Nadaraya-Watson value. The fits of several attentions share their designs
    (:func:`~sklearn_nw._local_poly.local_fit_many`)."""
    L, r = coords.shape
    values = torch.as_tensor(loo.values, dtype=torch.float64, device=coords.device)  # (L, t)
    p = n_terms(r, degree)
    group = max(1, int(working_memory * 2**20 // (4 * 8 * L * L)))  # attentions per batch
    # Query rows per fit: their designs' outer products (n p^2) and the group's rows (the
    # attention, the kernels and the bound's temporaries), for each of the workers at once;
    # at least two blocks per worker (of 32 rows or more) so that one stalled by another
    # process leaves its share to the others.
    n_workers = torch.get_num_threads() if coords.device.type == "cpu" else 1
    step = chunk_rows(L, 8 * L * (p * p + 2 * p + 4 * group), working_memory / n_workers)
    step = max(min(step, 32), min(step, -(-L // (2 * n_workers))))
    outs, batch = [], []

    def flush():
        attention = torch.stack(batch)  # (g, L, L)
        out = attention @ values  # (g, L, t)

        def fit(rows, _):  # the blocks' rows are disjoint: each writes its own
            local, singular = local_fit_many(coords[rows], coords, attention[:, rows],
                                             values, degree, bounded)
            out[:, rows] = torch.where(singular[:, :, None], out[:, rows], local)

        if degree:
            # On worker threads of one torch thread each (on_workers): the fits' many
            # short parallel operations stall whenever another process takes a core.
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
    score : callable, default=None
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

    def __init__(self, candidates, base, score=None, degree=0, shared=None, bounded=False):
        super().__init__(np.repeat(np.asarray(base, dtype=np.float64)[None], len(candidates),
                                   axis=0), score=score, degree=degree, bounded=bounded)
        self.candidates = candidates
        self.shared = {} if shared is None else shared

    def _neighbors(self, loo, device, max_neighbors):
        """The distinct inputs' neighbors in the key set's search space (the metric
        divided by its largest bandwidth), from ``shared`` when found there for at least
        ``max_neighbors``."""
        found = self.shared.get("neighbors")
        W = torch.as_tensor(loo.weight, device=device)
        if found is None:
            base = self.grid[0]
            found = (max_neighbors, _neighbors_of(loo.X / (base / base.max()), W, device,
                                                  max_neighbors))
        elif found[0] < max_neighbors:  # more neighbors: the same distances
            found = (max_neighbors, LeaveOneOutNeighbors(found[1].D, W, max_neighbors))
        self.shared["neighbors"] = found
        return found[1]

    def _pool(self, loo, kernel, dtype, device, working_memory):
        _check_dense_leave_one_out(len(loo.weight), working_memory, "of adaptive bandwidths")
        neighbors = self._neighbors(loo, device,
                                    max(c.n_neighbors for c in self.candidates))
        r = loo.X.shape[1]
        if not self.degree:
            # Each candidate's few (L, L) operations are short parallel regions, whose
            # barriers stall beside a busy process: the candidates go to worker threads
            # of one torch thread each instead (the neighbors found first, here), as
            # many as working_memory holds: the shared distances (2 L^2) and each one's
            # logits, attention and temporaries (4 L^2).
            neighbors.prepare()
            values = torch.as_tensor(loo.values, dtype=torch.float64, device=device)  # (L, t)
            L = len(loo.weight)
            fit = int((working_memory * 2**20 / (8 * L * L) - 2) // 4)
            return torch.stack(on_workers(
                self.candidates,
                lambda candidate, block: (neighbors.attention(candidate, kernel, r,
                                                              out=block)[0] @ values).cpu(),
                device, init=lambda: torch.empty(L, L, dtype=torch.float64, device=device),
                max_workers=max(1, fit)))  # (G, L, t)
        attentions = (neighbors.attention(candidate, kernel, r)[0]
                      for candidate in self.candidates)
        return _local_fits(attentions, _centred(loo, self.grid[0], device), loo, self.degree,
                           working_memory, self.bounded)
