"""Adaptive (nearest-neighbor) bandwidths: the k-th neighbor distances and the exact
leave-one-out attention they give.

Two forms, both in the key set's metric (the per-feature bandwidths or the learned
projection: distances ``u = ||(q - x) / h||``), with ``d_k(z)`` the distance from ``z``
to the nearest training points holding ``k`` units of sample weight (weights count as
repeated rows; a point of weight 0 is no row):

- *balloon* (R np's ``"generalized_nn"``): a query's bandwidth is ``c d_k(q)``; the
  attention is ``w_i k(u_i / (c d_k(q)))``, normalised.
- *sample-point* (np's ``"adaptive_nn"``, Breiman, Meisel and Purcell): each key carries
  ``h_i = c d_k(x_i)``, its distance to the k-th nearest *other* training point (the rows
  at its own location do not count), and the attention is
  ``w_i h_i^(-r) k(u_i / h_i)``, normalised, with ``r`` the number of coordinates (the
  density normalisation of a kernel of width ``h_i``; the balloon's cancels).

With the top-hat kernel and ``c`` just above 1 the balloon attends to exactly the k
nearest training points, every one tied at the k-th distance included: k-nearest-neighbor
averaging.

Leave-one-out is exact, as refitting without the point: the left-out point's own
location does not count towards its ``d_k``, and a sample-point key whose k nearest
include the left-out location gets the bandwidth it would have without it (the distance
at which its neighbors, the left-out location included, hold ``k`` plus that location's
weight). A ``d_k`` of 0 (a query on ``k`` units of weight) attends to the keys at
distance 0 alone: the limit as the bandwidth shrinks.

Torch and numpy only; the searches are the key set's.
"""

import math
from typing import NamedTuple

import numpy as np
import torch

KINDS = ("balloon", "sample_point")
# Cumulative weights reach k when within this relative tolerance of it (fractional
# weights such as 0.1 do not sum to 1 exactly).
_UNIT_RTOL = 1e-9


class Adaptive(NamedTuple):
    """An adaptive bandwidth as the key set uses it."""

    kind: str  # one of KINDS
    n_neighbors: int  # k, in units of sample weight
    scale: float  # c


def kth_distances(index, weight, queries, k, *, leave_out_location=False):
    """Per query, the distance at which the nearest indexed points hold ``k`` units of
    weight.

    Parameters
    ----------
    index : TreeSearch
        The indexed points (of positive weight), in the space of ``queries``.
    weight : ndarray of shape (n_indexed,)
        Their sample weights.
    queries : ndarray of shape (b, r)
    k : int
    leave_out_location : bool
        Points at distance 0 from a query do not count (the query is a training point,
        left out with every row at its location).

    Returns
    -------
    ndarray of shape (b,)
    """
    n = len(weight)
    m = min(n, k + 1)
    while True:
        dist, ind = index.nearest(queries, m)  # (b, m)
        w = weight[ind]
        if leave_out_location:
            w = np.where(dist == 0, 0.0, w)
        cumulative = np.cumsum(w, axis=1)  # (b, m)
        reached = cumulative >= k * (1 - _UNIT_RTOL)
        if m == n or reached[:, -1].all():
            break
        m = min(2 * m, n)  # fractional weights: look further
    short = np.flatnonzero(~reached[:, -1])
    if len(short):
        where = " at other locations than each training point" if leave_out_location else ""
        raise ValueError(
            f"An adaptive bandwidth with n_neighbors={k} needs k units of sample weight"
            f"{where}; there are only {cumulative[short[0], -1]:g} (n_samples={n} with "
            "positive weight). Lower n_neighbors."
        )
    return dist[np.arange(len(dist)), np.argmax(reached, axis=1)]


class LeaveOneOutNeighbors:
    """Each distinct training input's nearest other inputs, found once and shared by every
    adaptive bandwidth whose exact leave-one-out attention :meth:`attention` gives.

    Parameters
    ----------
    D : Tensor of shape (L, L)
        Distances between the distinct inputs, in the key set's metric (any constant
        multiple of it).
    W : Tensor of shape (L,)
        Their summed sample weights.
    max_neighbors : int
        The largest k to be asked for.
    """

    def __init__(self, D, W, max_neighbors):
        L = D.shape[0]
        self.D, self.W = D, W
        self.D_sq = D * D  # (L, L)
        self.zero_weight = (W <= 0) if bool((W <= 0).any()) else None
        others = D.clone()
        others.fill_diagonal_(math.inf)
        others[:, W <= 0] = math.inf  # a location of zero weight is no neighbor
        # Enough neighbors for k units and, for a sample-point key, k more than the
        # heaviest neighbor left out; all of them when fractional weights need more.
        m = min(L, max_neighbors + math.ceil(float(W.max())) + 1)
        while True:
            near = torch.topk(others, m, dim=1, largest=False, sorted=True)
            self.sorted_D, self.order = near.values, near.indices  # (L, m)
            weight = torch.where(torch.isinf(self.sorted_D), 0.0, W[self.order])  # (L, m)
            self.cumulative = torch.cumsum(weight, 1)  # (L, m)
            if m == L or bool((self.cumulative[:, -1] >= max_neighbors
                               + float(W.max())).all()):
                break
            m = min(L, 2 * m)

    def attention(self, adaptive, kernel, n_coords):
        """Exact leave-one-out attention (L, L) of the inputs on each other under
        ``adaptive`` (rows sum to 1, a location never attends to itself) and the number
        of rows with no kernel mass (a compact kernel), given their nearest other
        input(s) in the adaptive metric, every tie. ``n_coords`` is the ``r`` of the
        sample-point normalisation."""
        W = self.W
        k, c = adaptive.n_neighbors, adaptive.scale
        tiny = torch.finfo(self.D.dtype).tiny
        h = (c * self._kth(k)).clamp(min=tiny)  # (L,)
        log_w = torch.log(W)  # (L,)
        if adaptive.kind == "balloon":  # the query's bandwidth, per row
            h_sq = (h * h)[:, None]  # (L, 1)
            key_log_w = log_w
        else:  # the key's bandwidth, per column
            h_sq = h * h  # (L,)
            key_log_w = log_w - n_coords * torch.log(h)  # (L,)
        logits = torch.div(self.D_sq, h_sq)  # (L, L) squared ratios, then logits
        logits = kernel.log_profile_sq(logits)
        logits += key_log_w
        if adaptive.kind == "sample_point":
            rows, cols, h_left = self._left_out_bandwidths(h, k, c)
            logits[rows, cols] = (log_w[cols] - n_coords * torch.log(h_left)
                                  + kernel.log_profile_sq(self.D_sq[rows, cols]
                                                          / (h_left * h_left)))
        logits.fill_diagonal_(-math.inf)
        if self.zero_weight is not None:
            logits[:, self.zero_weight] = -math.inf
        attention = torch.softmax(logits, dim=1)  # (L, L); a row of no mass is NaN
        empty = torch.isnan(attention[:, 0]) | torch.isnan(attention[:, -1])  # (L,)
        n_fallback = int(empty.sum())
        if n_fallback:
            attention[empty] = self._nearest(torch.nonzero(empty)[:, 0], adaptive, h,
                                             n_coords, k, c)
        return attention, n_fallback

    def _nearest(self, rows, adaptive, h, n_coords, k, c):
        """Attention (e, L) of the rows with no kernel mass: their nearest other
        input(s) in the adaptive metric, every tie, weighted as the kernel weighs keys."""
        W, D = self.W, self.D
        log_w = torch.log(W)
        if adaptive.kind == "balloon":
            ratio = D[rows] / h[rows, None]  # (e, L)
            key_log_w = log_w.expand(len(rows), -1)
        else:
            H = h.expand(len(rows), -1).clone()  # (e, L)
            q, i, h_left = self._left_out_bandwidths(h, k, c)
            pick = torch.isin(q, rows)
            position = torch.searchsorted(rows, q[pick])
            H[position, i[pick]] = h_left[pick]
            ratio = D[rows] / H
            key_log_w = log_w - n_coords * torch.log(H)
        ratio[torch.arange(len(rows), device=rows.device), rows] = math.inf
        ratio[:, W <= 0] = math.inf
        nearest = ratio == ratio.min(1, keepdim=True).values  # (e, L)
        return torch.softmax(torch.where(nearest, key_log_w, -math.inf), dim=1)

    def _kth(self, k):
        """Each input's distance to the nearest other inputs holding k units (L,)."""
        need = k * (1 - _UNIT_RTOL)
        if bool((self.cumulative[:, -1] < need).any()):
            raise ValueError(
                f"An adaptive bandwidth with n_neighbors={k} needs k units of sample "
                "weight at other locations than each training point; there are only "
                f"{float(self.cumulative[:, -1].min()):g}. Lower n_neighbors."
            )
        column = (self.cumulative < need).sum(1)  # (L,)
        return self.sorted_D.gather(1, column[:, None])[:, 0]

    def _left_out_bandwidths(self, h, k, c):
        """The sample-point bandwidths that leaving an input out changes: for each key i
        and each input j among its k nearest, the distance at which i's neighbors (j
        included) hold ``k + W[j]``. Returns the pairs as (query rows j, key columns i)
        and those bandwidths."""
        L, m = self.sorted_D.shape
        d_k = self._kth(k)  # (L,)
        affected = self.sorted_D <= d_k[:, None]  # (L, m) [key i, its p-th neighbor j]
        target = (k + self.W[self.order]) * (1 - _UNIT_RTOL)  # (L, m)
        column = torch.searchsorted(self.cumulative.contiguous(), target.contiguous())
        if bool((column[affected] >= m).any()):
            raise ValueError(
                f"Leave-one-out of a sample-point bandwidth with n_neighbors={k} needs k "
                "units of sample weight at other locations than each training point and "
                "a neighbor left out. Lower n_neighbors."
            )
        h_left = c * self.sorted_D.gather(1, column.clamp(max=m - 1))  # (L, m)
        key, _ = torch.nonzero(affected, as_tuple=True)
        tiny = torch.finfo(self.D.dtype).tiny
        return self.order[affected], key, h_left[affected].clamp(min=tiny)
