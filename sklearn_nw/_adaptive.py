"""Adaptive (nearest-neighbor) bandwidths: the k-th neighbor distances and the exact
leave-one-out attention they give.

Two forms, both in the key set's metric (the per-feature bandwidths or the learned
projection: distances ``u = ||(q - x) / h||``), with ``d_k(z)`` the distance from ``z``
to the nearest training points holding ``k`` units of sample weight (weights count as
repeated rows; a point of weight 0 is no row):

- *balloon* (R np's ``"generalized_nn"``): a query's bandwidth is ``c d_k(q)``; the
  attention is ``w_i k(u_i / (c d_k(q)))``, normalized.
- *sample-point* (np's ``"adaptive_nn"``, Breiman, Meisel and Purcell): each key carries
  ``h_i = c d_k(x_i)``, its distance to the k-th nearest *other* training point (the rows
  at its own location do not count), and the attention is
  ``w_i h_i^(-r) k(u_i / h_i)``, normalized, with ``r`` the number of coordinates (the
  density normalization of a kernel of width ``h_i``; the balloon's cancels).

With the top-hat kernel and ``c`` just above 1 the balloon attends to exactly the k
nearest training points, every one tied at the k-th distance included: k-nearest-neighbor
averaging.

Leave-one-out is exact, as refitting without the point: the left-out point's own
location does not count towards its ``d_k``, and a sample-point key whose k nearest
include the left-out location gets the bandwidth it would have without it (the distance
at which its neighbors, the left-out location included, hold ``k`` plus that location's
weight). A ``d_k`` of 0 (a query on ``k`` units of weight) attends to the keys at
distance 0 alone: the limit as the bandwidth shrinks.

Torch and numpy only; the searches are the key set's, what leaving out means
:mod:`sklearn_nw._leave_one_out`'s.
"""

import contextlib
import math
import threading
from typing import NamedTuple

import numpy as np
import torch

from ._engine import values_and_ones_t
from ._leave_one_out import distinct_inputs, nearest_keys, other_keys, set_self_
from ._workers import CACHE_BYTES, chunk_rows, n_workers, on_workers

_LOG2_E = 1.0 / math.log(2.0)
# The pooled attention's weights as powers of 2 of logits in bits: a logit below -1022
# (a subnormal weight, whose exp2 and products run several times slower) counts as no
# weight (flushed by the CPU on x86, thresholded elsewhere), and a row whose weights sum
# to at most 2^_FAST_MIN_LOG2_SUM is computed as the softmax computes it: the weights
# dropped are then below 2^-122 of the sum each.
_FLUSH_BELOW = -1022.0
_FAST_MIN_LOG2_SUM = -900.0  # a logit in nats times this is the logit in bits
# Candidates of one kind and k whose scales halve pool their weights as the first one's
# weights squared (4^s times the logits for a scale 2^s times smaller): up to this power,
# each squaring doubling the weights' relative rounding error (16: some 4e-15).
_CHAIN_MAX_POWER = 16
# Keys whose logit lies more than this (nats) below a row's reference logit, a key that
# row weighs, are left out of its windowed sums: each weighs at most e^-70 = 4e-31 of
# that key, far below the float64 rounding of the sums. Shared by the fixed bandwidths'
# windows of one feature (sklearn_nw._grids) and the adaptive ones' (pooled).
WINDOW_LOG_RATIO = 70.0

KINDS = ("balloon", "sample_point")
# Cumulative weights reach k when within this relative tolerance of it (fractional
# weights such as 0.1 do not sum to 1 exactly).
_UNIT_RTOL = 1e-9
# scale="auto" puts the k-th neighbor distance where a kernel of unbounded support has
# fallen to this fraction of its peak. Measured (benchmark of issue 24, k=10, leave-one-out
# error on seven regression sets of 1 to 10 features): the Gaussian's best c lay between
# 0.3 and 0.5 on all but a flat 1-D case, the exponential's at or below 0.3, the compact
# kernels' at 1 (their support at d_k); this fraction gives 0.33, 0.22 and 1.
AUTO_SCALE_FALL = 0.01
# Beyond this radius a profile counts as never falling (a constant kernel).
_AUTO_SCALE_MAX_RADIUS = 1e6


def smallest_sorted(block, m):
    """The ``m`` smallest entries of each row of ``block`` (b, n) and their columns,
    ``(values, indices)`` (b, m) each, ascending (equal values in any order, as
    ``torch.topk`` has them). On the CPU numpy's introselect, then a sort of the ``m``:
    2.5 to 3 times faster than ``torch.topk`` (measured, one thread, (256, 4,000)
    float64: m = 131 3.7 ms against 11.1, m = 1,031 10.8 against 25.1); ``torch.topk``
    on other devices."""
    if block.device.type != "cpu":
        found = torch.topk(block, m, dim=1, largest=False, sorted=True)
        return found.values, found.indices
    a = block.numpy()
    m = min(m, a.shape[1])
    columns = (np.argpartition(a, m - 1, axis=1)[:, :m] if m < a.shape[1]
               else np.broadcast_to(np.arange(m), a.shape))  # (b, m) in no order
    values = np.take_along_axis(a, columns, 1)
    order = np.argsort(values, axis=1)
    return (torch.from_numpy(np.take_along_axis(values, order, 1)),
            torch.from_numpy(np.take_along_axis(columns, order, 1)))


class Adaptive(NamedTuple):
    """An adaptive bandwidth as the key set uses it."""

    kind: str  # one of KINDS
    n_neighbors: int  # k, in units of sample weight
    scale: float  # c


def auto_scale(kernel):
    """The scale c of ``AdaptiveBandwidth(scale="auto")``: 1 over the radius where the
    kernel's profile has fallen to :data:`AUTO_SCALE_FALL` of its peak, its support for
    a compact kernel (so ``c d_k`` reaches the k nearest and no farther); 1 for a profile
    that never falls that far (a constant one, which weighs every point alike).
    Gaussian: ``1 / sqrt(2 ln 100)``, about 0.33; exponential ``1 / ln 100``, 0.22."""
    if kernel.is_compact:
        return 1.0 / float(kernel.support)
    log_k = lambda r: float(kernel.log_profile_sq(torch.tensor([r * r], dtype=torch.float64))[0])
    log_fall = log_k(0.0) + math.log(AUTO_SCALE_FALL)
    low, high = 0.0, 1.0
    while log_k(high) > log_fall:  # profiles are non-increasing in the distance
        low, high = high, 2 * high
        if high > _AUTO_SCALE_MAX_RADIUS:
            return 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if log_k(middle) > log_fall else (low, middle)
    return 1.0 / high


def neighbors_held(X, sample_weight, kind):
    """The largest k an adaptive bandwidth of ``kind`` can use on these training rows,
    its exact leave-one-out included (at least 1): the units of weight left when the
    heaviest location is left out (balloon), or the two heaviest (sample-point: a key's
    own location does not count, nor the one left out).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,) or None
    kind : {"balloon", "sample_point"}

    Returns
    -------
    int
    """
    _, inverse = distinct_inputs(X)
    w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, np.float64)
    location_weight = np.sort(np.bincount(inverse, weights=w))[::-1]  # (L,)
    left_out = location_weight[: 2 if kind == "sample_point" else 1].sum()
    # Counted as the searches count units: within the rounding of fractional weights.
    return max(1, math.floor((w.sum() - left_out) / (1 - _UNIT_RTOL)))


def kth_distances(index, weight, queries, k, *, leave_out_location=False, more=0.0):
    """Per query, the distance at which the nearest indexed points hold ``k`` units of
    weight (``k`` and ``more``: where they would hold ``k`` without a point of weight
    ``more`` among them).

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
    more : float, default=0.0
        Units of weight beyond ``k`` (within the same tolerance of ``k`` alone).

    Returns
    -------
    ndarray of shape (b,)
    """
    n = len(weight)
    need = k * (1 - _UNIT_RTOL) + more
    # Exact distances: a k-th neighbor distance is that key's distance as the kernels
    # take it, bit for bit (a top-hat's k-th key lies on its support's edge at c = 1).
    dist, _, _, cumulative = index.nearest_holding(queries, weight, need,
                                                   first=min(n, k + 1 + math.ceil(more)),
                                                   skip_zero=leave_out_location, ties=False,
                                                   exact=True)
    reached = cumulative >= need  # (b, m)
    short = np.flatnonzero(~reached[:, -1])
    if len(short):
        where = " at other locations than each training point" if leave_out_location else ""
        without = f" without a point of weight {more:g}" if more else ""
        raise ValueError(
            f"An adaptive bandwidth with n_neighbors={k} needs k units of sample weight"
            f"{where}{without}; there are only {cumulative[short[0], -1] - more:g} "
            f"(n_samples={n} with positive weight). Lower n_neighbors."
        )
    return dist[np.arange(len(dist)), np.argmax(reached, axis=1)]


class _Plan(NamedTuple):
    """One attention as :meth:`LeaveOneOutNeighbors._block_into` computes it."""

    h: object  # (L,) the bandwidths: the query's (balloon) or the key's (sample point)
    sample_point: object  # (k, c, r), None for a balloon
    nats: object  # _LogitTerms in nats
    bits: object  # the same in bits where pooled as powers of 2, else None
    # (L,) bool: balloon rows of bandwidth 0 (their k-th neighbor at distance 0), which the
    # pass in bits skips and which attend to their nearest inputs; None for none
    redo: object = None
    # (L, t): those rows' pooled values, the same under every candidate (their nearest
    # inputs are the others at distance 0: LeaveOneOutNeighbors._with_redone)
    redone: object = None


class _Chain(NamedTuple):
    """Plans pooled together (:meth:`LeaveOneOutNeighbors._chains`): each one's weights
    the one before it's squared ``2 steps`` times."""

    members: list  # indices of the plans, largest scale first
    steps: list = None  # (per member) 0 for the first, else the squarings / 2
    weighted: object = None  # (t + 1, L) the values and ones times the keys' weights
    terms: list = None  # (per member) the logit terms relative to the keys' weights


class _LogitTerms(NamedTuple):
    """The parts of a leave-one-out attention's logits (see
    :meth:`LeaveOneOutNeighbors._attention`)."""

    per_row: bool  # balloon: a bandwidth per query row; sample point: per key column
    h_sq: object  # (L, 1) or (L,) squared bandwidths
    key_log_w: object  # (L,) each key's log weight (sample point: and its normalization)
    changed: object  # (rows, cols, logits) where leaving a row out changes a key's (sorted
    # by row); None
    factor: object  # the Gaussian family's factor on the squared distances; None
    self_log_ratio: object  # (L,) log(kept / weight) of a key's own copies; None
    in_nats: bool  # else in bits (log base 2)
    unit: float = 1.0  # the logits' unit in nats (the extra logits' factor)

    def in_bits(self):
        """The same terms in bits: logits whose powers of 2 are the weights."""
        def bits(t):
            return None if t is None else t * _LOG2_E

        changed = (None if self.changed is None
                   else (*self.changed[:2], bits(self.changed[2])))
        return self._replace(key_log_w=bits(self.key_log_w), changed=changed,
                             factor=bits(self.factor),
                             self_log_ratio=bits(self.self_log_ratio), in_nats=False,
                             unit=_LOG2_E)


# Every distance is its square's root (sqrt(fl(d * d)) == d in binary floating point)
# while the squares are neither subnormal nor overflow: distances from _SQRT_TINY (the
# root of the smallest normal float64) to _SQRT_HUGE (that of the largest, halved).
_SQRT_TINY = math.sqrt(torch.finfo(torch.float64).tiny)
_SQRT_HUGE = math.sqrt(torch.finfo(torch.float64).max / 2)


def _squarings(factor, next_factor):
    """s in 1, 2 where ``next_factor`` is exactly 4^s times ``factor`` (the Gaussian
    family's factors on the squared distances, per row or per key); else 0."""
    for steps in (1, 2):
        if torch.equal(next_factor, factor * 4**steps):
            return steps
    return 0


def _flushes_subnormals():
    """Whether this thread reads and writes subnormal floats as zero."""
    return bool(torch.tensor(5e-324, dtype=torch.float64).mul(1.0) == 0)


@contextlib.contextmanager
def _subnormals_as_zero():
    """Subnormal floats as zero on this thread where torch can set it (x86: they cost
    dozens of cycles an operation there), restored after. Yields whether they are."""
    if _flushes_subnormals():
        yield True
        return
    if not torch.set_flush_denormal(True):
        yield False
        return
    try:
        yield True
    finally:
        torch.set_flush_denormal(False)


def _pooled_weights(weighted, logits):
    """The sums (b, t + 1) of ``weighted`` (t + 1, w) times the weights ``2^logits``
    (b, w, bits; overwritten by the weights), each below the smallest normal float
    (a logit below -1022) counted as none: flushed by the CPU where it can (no pass over
    the logits), else thresholded first."""
    with _subnormals_as_zero() as flushing:
        if not flushing:
            torch.nn.functional.threshold_(logits, _FLUSH_BELOW, -math.inf)
        return torch.mm(weighted, logits.exp2_().T).T


def _roots_exact(points):
    """Whether every distance between ``points`` (L, r), float64, is its square's root:
    every positive one at least ``_SQRT_TINY`` (each coordinate's positive differences
    are) and none beyond ``_SQRT_HUGE`` (the coordinates' ranges bound them)."""
    if points.dtype != torch.float64 or not bool(torch.isfinite(points).all()):
        return False
    span = points.amax(0) - points.amin(0)  # (r,)
    if float(torch.linalg.vector_norm(span)) >= _SQRT_HUGE:
        return False
    gaps = torch.diff(torch.sort(points, dim=0).values, dim=0)  # (L - 1, r)
    return not bool(((gaps > 0) & (gaps < _SQRT_TINY)).any())


class LeaveOneOutNeighbors:
    """The distinct training inputs as exact leave-one-out sees them, shared by every
    candidate bandwidth: their distances, and each one's nearest other inputs (found on
    first use), for the attention :meth:`attention` gives under an adaptive bandwidth or
    :meth:`fixed_attention` under a fixed one.

    Parameters
    ----------
    D : Tensor of shape (L, L) or None
        Distances between the distinct inputs, in the key set's metric (any constant
        multiple of it); None with ``squares``.
    W : Tensor of shape (L,)
        Their summed sample weights.
    max_neighbors : int
        The largest k to be asked for.
    self_weight : Tensor of shape (L,), default=None
        The weight a key keeps on itself when left out (``leave_out="row"``: its copies');
        None for none.
    extra : Tensor of shape (L, L), default=None
        Logits (nats) every pair adds whatever the bandwidth: the categorical features'
        ``-c ||e_i - e_j||**2`` of their Gaussian factor
        (:mod:`sklearn_nw._categorical`), ``D`` then the distances in the continuous
        features alone (those the neighbors and the bandwidths are measured in).
    positions : Tensor of shape (L,), default=None
        With one feature, the inputs' coordinate (``D[i, j] = |p_i - p_j|``), sorted:
        :meth:`pooled` sums each block of rows over the window of keys whose weight
        counts (:meth:`_windows`) instead of over every key. None: every key.
    squares : Tensor of shape (L, L), default=None
        The squared distances, without ``D``: each distance is its square's root, exactly
        where no positive square is subnormal and none overflows (:meth:`of_points`
        checks it). One (L, L) matrix instead of two.
    """

    def __init__(self, D, W, max_neighbors=1, self_weight=None, extra=None,
                 positions=None, squares=None):
        self.D, self.W, self.extra = D, W, extra
        if self_weight is not None and not bool((self_weight > 0).any()):
            self_weight = None
        self.self_weight = self_weight
        # The weight that leaves with a key's left-out row: all of it, or one row's.
        self.removed = W if self_weight is None else W - self_weight
        self.D_sq = D * D if squares is None else squares  # (L, L)
        self.finite_sq = bool(self.D_sq.max() < math.inf)  # (False for a NaN too)
        self.zero_weight = (W <= 0) if bool((W <= 0).any()) else None
        self.max_neighbors = max_neighbors
        # Keys at one input (the rows of leave_out="row"): a sample-point key's bandwidth
        # counts other locations only, as the fitted estimator's does.
        L = len(W)
        # (count_nonzero: a bool sum would be summed as int64, a copy of the matrix)
        self.repeated = int(torch.count_nonzero(self.D_sq == 0)) > L
        if positions is not None and not (extra is None and self.finite_sq
                                          and bool((positions[1:] >= positions[:-1]).all())):
            positions = None  # (windows of sorted finite coordinates only)
        self.positions = positions
        self._sorted = {}  # (other locations only, own copies counted) -> neighbors
        self._left_out = {}  # k -> the pairs a left-out input changes, for every scale c
        self._left_out_locks = {}  # k -> its lock
        self._spare = []  # workspaces of the calls before, for the next ones
        self._spare_lock = threading.Lock()

    @classmethod
    def of_points(cls, points, W, max_neighbors=1, self_weight=None, extra=None,
                  positions=None):
        """The neighbors of ``points`` (L, r): their distances computed here and, where
        every distance is its square's root (no positive one below ``_SQRT_TINY``, the
        coordinates' range below ``_SQRT_HUGE``), kept as squares alone: a second
        (L, L) matrix costs its fresh memory (half a second at L = 4,000 on a machine
        where first-touched pages are slow)."""
        D = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")
        if not _roots_exact(points):
            return cls(D, W, max_neighbors, self_weight, extra, positions)
        return cls(None, W, max_neighbors, self_weight, extra, positions,
                   squares=D.square_())

    def _distances(self, rows):
        """The distances (b, L) of the keys ``rows`` (a slice or indices) to every key."""
        return self.D[rows] if self.D is not None else self.D_sq[rows].sqrt()

    def reach(self, max_neighbors):
        """Make it serve ``n_neighbors`` up to ``max_neighbors``: the distances, the
        pairs a left-out input changes (per k: more neighbors change none of them) and
        neighbors found with room for it kept (a search extending k doubles it), the
        others found again."""
        if max_neighbors > self.max_neighbors:
            self.max_neighbors = max_neighbors
            self._sorted = {key: found for key, found in self._sorted.items()
                            if self._holds(found, max_neighbors)}
        return self

    def _holds(self, found, k):
        """Whether neighbors ``found`` (``_neighbors``' triple) serve ``k``: all of the
        keys, or enough weight in every row (see :meth:`_neighbors`)."""
        _, indices, cumulative = found
        return (indices.shape[1] == len(self.W)
                or bool((cumulative[:, -1] >= k + float(self.W.max())).all()))

    def prepare(self):
        """Find the nearest inputs now, for threads sharing this object to read."""
        self._neighbors()
        self._neighbors(other_locations=True)

    def _neighbors(self, other_locations=False):
        """Each key's nearest other keys (with ``other_locations``, at other inputs than
        its own), nearest first: distances, indices and the cumulative weight, (L, m)
        each, enough for ``max_neighbors`` units and, for a sample-point key, that many
        more than the heaviest neighbor left out (all of them when fractional weights
        need more)."""
        # A key's own copies (the weight it keeps on itself) lie at its own location:
        # they count for a balloon's query, not for a sample point's own bandwidth.
        keeps_self = self.self_weight is not None and not other_locations
        other_locations = other_locations and self.repeated
        if (other_locations, keeps_self) in self._sorted:
            return self._sorted[other_locations, keeps_self]
        # The order of the squared distances is the distances' (every distance is its
        # square's root, or the distances themselves are kept).
        D = self.D if self.D is not None else self.D_sq
        W, k = self.W, self.max_neighbors
        L = D.shape[0]
        no_weight = W <= 0
        # Room for twice k: a search extending k doubles it, and a wider top-k costs
        # little more than a narrow one (every distance is read either way).
        m = min(L, 2 * (k + math.ceil(float(W.max()))) + 1)
        # Cache-sized blocks of rows on the workers, each in its own workspace (a copy
        # of the whole matrix costs more in fresh pages than the top-k does).
        step = chunk_rows(L, L * D.element_size(), workers=n_workers(D.device),
                          cap_bytes=CACHE_BYTES)

        def nearest(a, workspace):
            b = min(a + step, L)
            # A distance that overflowed (a point at 1e160) is still a neighbor, ranked
            # after every finite one; an input itself and a location of zero weight are
            # none.
            others = torch.nan_to_num(D[a:b], posinf=torch.finfo(D.dtype).max,
                                      out=workspace[: b - a])
            # A key keeping weight on itself holds it at distance 0.
            set_self_(others, torch.arange(a, b, device=D.device),
                      0.0 if keeps_self else math.inf)
            if other_locations:
                others[D[a:b] == 0] = math.inf
            others[:, no_weight] = math.inf
            return smallest_sorted(others, m)

        while True:
            parts = on_workers(range(0, L, step), nearest, D.device,
                               init=lambda: D.new_empty((step, L)))
            values = torch.cat([part[0] for part in parts])  # (L, m)
            if D is self.D_sq:  # the distances: the squares' roots
                values = values.sqrt_()
            indices = torch.cat([part[1] for part in parts])  # (L, m)
            weight = torch.where(torch.isinf(values), 0.0, W[indices])  # (L, m)
            if keeps_self:
                own = indices == torch.arange(L, device=D.device)[:, None]  # (L, m)
                weight = torch.where(own, self.self_weight[:, None], weight)
            found = (values, indices, torch.cumsum(weight, 1))
            if self._holds(found, k):
                break
            m = min(L, 2 * m)
        self._sorted[other_locations, keeps_self] = found
        return found

    def attention(self, adaptive, kernel, n_coords, values=None):
        """Exact leave-one-out attention (L, L) of the inputs on each other under
        ``adaptive`` (rows sum to 1, a location never attends to itself) and the number
        of rows with no kernel mass (a compact kernel), given their nearest other
        input(s) in the adaptive metric, every tie. ``n_coords`` is the ``r`` of the
        sample-point normalization. With ``values`` (L, t), the attention's product
        with them (L, t) instead, a block of rows at a time: the (L, L) attention is
        never stored."""
        return self._attention(*self._bandwidths(adaptive, n_coords), kernel, values)

    def pooled(self, candidates, kernel, n_coords, values):
        """``attention(candidate, kernel, n_coords, values)[0]`` of every candidate (G,
        L, t), equal to it to rounding: the blocks of rows go to the workers and each
        block is pooled under every candidate while its distances are in cache (one block
        of them read once, not once per candidate). Candidates of one kind and k whose
        scales halve (:meth:`_chains`) take their weights from the largest scale's by
        squaring (:meth:`_chain_into`)."""
        plans = [self._plan(*self._bandwidths(candidate, n_coords), kernel, True)
                 for candidate in candidates]
        L, step = len(self.W), self._step()
        plans = self._with_redone(plans, values, step)
        with_ones = values_and_ones_t(values)  # (t + 1, L)
        out = values.new_empty((len(plans), L, values.shape[1]))
        chains = self._chains(candidates, plans, with_ones)
        everything = [slice(None)] * len(range(0, L, step))
        windows = [everything if self.positions is None
                   else self._windows(plan, kernel, step) for plan in plans]
        # A chain's window is its first member's (chains form only where every window
        # holds every key).
        windows = [windows[chain.members[0]] for chain in chains]

        def block(a, workspace):
            for chain, columns in zip(chains, windows):
                if len(chain.members) == 1:
                    i = chain.members[0]
                    self._block_into(plans[i], a, min(a + step, L), kernel, values,
                                     with_ones, out[i], workspace, columns[a // step])
                else:
                    self._chain_into(chain, plans, a, min(a + step, L), kernel, values, out,
                                     workspace, columns[a // step])

        # Each worker's logits in a workspace as wide as the widest window.
        width = max(len(range(L)[columns]) for chain in windows for columns in chain)
        with self._workspaces(step * width) as workspace:
            on_workers(range(0, L, step), block, self.D_sq.device, init=workspace)
        return out

    @contextlib.contextmanager
    def _workspaces(self, size):
        """Yields ``init`` for :func:`~sklearn_nw._workers.on_workers`: each worker's
        workspace of ``size`` elements (flat), taken from those of the calls before
        where one is large enough, and given back for the next calls after: a search
        pools its candidates in several calls, and fresh memory costs its page faults
        (measured ad hoc here: 0.03 to 0.5 s for 128 MB, from call to call)."""
        taken = []

        def init():
            with self._spare_lock:
                fits = [i for i, w in enumerate(self._spare) if w.numel() >= size]
                workspace = (self._spare.pop(fits[0]) if fits
                             else self.D_sq.new_empty(size))
                taken.append(workspace)
            return workspace

        try:
            yield init
        finally:
            with self._spare_lock:
                self._spare.extend(taken)

    def _chains(self, candidates, plans, with_ones):
        """The plans in :class:`_Chain` s: those of one kind and k pooled as powers of 2,
        largest scale first, each next one's factor on the squared distances 4^s times
        the one before it, exactly (its scale 2^s times smaller, s squarings of the
        weights), up to ``_CHAIN_MAX_POWER`` times the first one's; every other plan a
        chain of one. None with the categorical features' extra logits (the same
        whatever the scale), or key weights more than 2^-_FAST_MIN_LOG2_SUM apart; nor
        with the windows of one feature (a smaller scale's window is the narrower, where
        the first plan's costs more than squaring saves: measured, ad hoc, on 4,000
        points of a smooth 1-D target, 10 % slower)."""
        chains, groups = [], {}
        for i, (candidate, plan) in enumerate(zip(candidates, plans)):
            if plan.bits is None or self.extra is not None or self.positions is not None:
                chains.append(_Chain([i]))
            else:
                groups.setdefault((candidate.kind, candidate.n_neighbors), []).append(i)
        for members in groups.values():
            members.sort(key=lambda i: -candidates[i].scale)
            # Runs of (plan, its squarings / 2 from the one before it: 0 for the first).
            runs, power = [[(members[0], 0)]], 1
            for i in members[1:]:
                steps = _squarings(plans[runs[-1][-1][0]].bits.factor, plans[i].bits.factor)
                power *= 4**steps
                if steps and power <= _CHAIN_MAX_POWER:
                    runs[-1].append((i, steps))
                else:
                    runs.append([(i, 0)])
                    power = 1
            for run_steps in runs:
                run, steps = [i for i, _ in run_steps], [s for _, s in run_steps]
                if len(run) == 1:
                    chains.append(_Chain(run))
                    continue
                # Each key's weight in bits (its logit but for the kernel's part), from
                # the first plan: the rest differ by a constant (a sample point's r s).
                key_bits = plans[run[0]].bits.key_log_w
                finite = torch.isfinite(key_bits)
                scaled = torch.exp2(key_bits - key_bits[finite].max()) if bool(
                    finite.any()) else key_bits  # (L,) in [0, 1]
                if not bool(finite.any()) or float(
                        scaled[finite].min()) < 2.0**_FAST_MIN_LOG2_SUM:
                    chains.extend(_Chain([i]) for i in run)
                    continue
                chains.append(_Chain(run, steps, with_ones * scaled,
                                     [self._relative_terms(plans[i].bits) for i in run]))
        return chains

    @staticmethod
    def _relative_terms(bits):
        """Logit terms (bits) relative to each key's weight: no key term, and the pairs
        whose key's bandwidth a row changes as their logit less their key's term (-inf
        at a key of no weight)."""
        key_bits = bits.key_log_w
        changed = bits.changed
        if changed is not None:
            rows, cols, logits = changed
            relative = torch.where(torch.isfinite(key_bits[cols]), logits - key_bits[cols],
                                   -math.inf)
            changed = (rows, cols, relative)
        return bits._replace(key_log_w=torch.zeros_like(key_bits), changed=changed)

    def _chain_into(self, chain, plans, a, b, kernel, values, out, workspace, columns):
        """Rows a to b of the plans of ``chain`` (see :meth:`_block_into`), their weights
        relative to each key's (``chain.weighted``: the values and ones times the keys'
        weights, largest 1): the first plan's by its logits, each next one's the one
        before it squared ``2 s`` times, its own pairs (a row's own key, the keys whose
        bandwidth it changes) set again. Weights that squaring makes subnormal count as
        none (x86 flushes them to 0, as the first plan's are flushed); a block whose row
        sums fall below ``2^_FAST_MIN_LOG2_SUM`` is computed as the softmax computes it."""
        weighted = chain.weighted[:, columns]
        lo = columns.start or 0
        own = torch.arange(a, b, device=self.W.device) - lo
        for n, (i, steps, terms) in enumerate(zip(chain.members, chain.steps, chain.terms)):
            if not n:
                weights = self._block_logits(a, b, terms, kernel, columns, out=workspace)
                sums = _pooled_weights(weighted, weights)  # (b - a, t + 1)
            else:
                with _subnormals_as_zero():  # (products flushed as they underflow)
                    for _ in range(2 * steps):
                        weights.mul_(weights)
                # As the logits are made (_block_logits): the own key at distance 0,
                # then the pairs whose key's bandwidth the row changes (its own key's
                # too, where it keeps copies), then the share of its own key it keeps.
                set_self_(weights, own, 1.0)
                if terms.changed is not None:
                    rows, cols, relative = terms.changed  # sorted by row
                    pick = slice(*torch.searchsorted(rows, rows.new_tensor([a, b])).tolist())
                    weights[rows[pick] - a, cols[pick] - lo] = relative[pick].exp2()
                if terms.self_log_ratio is None:
                    set_self_(weights, own, 0.0)
                else:
                    diagonal = weights[torch.arange(b - a, device=own.device), own]
                    set_self_(weights, own, diagonal * terms.self_log_ratio[a:b].exp2())
                with _subnormals_as_zero():
                    sums = torch.mm(weighted, weights.T).T  # (b - a, t + 1)
            if self._from_sums(plans[i], sums, a, b, out[i]) is None:
                self._softmax_into(plans[i], a, b, kernel, values, out[i], columns)

    def _with_redone(self, plans, values, step):
        """``plans`` with the pooled values of their balloon rows of bandwidth 0, found
        once for all of them: such a row attends to the other inputs at distance 0
        whatever its k and c (:meth:`_nearest` at a bandwidth of ``tiny``)."""
        masks = [plan.redo for plan in plans if plan.redo is not None]
        if not masks:
            return plans
        rows = torch.nonzero(torch.stack(masks).any(0))[:, 0]
        h = self.D_sq.new_full((len(self.W),), torch.finfo(self.D_sq.dtype).tiny)
        redone = values.new_full((len(self.W), values.shape[1]), math.nan)
        for part in torch.split(rows, step):
            redone[part] = self._nearest(part, h, None) @ values
        return [plan if plan.redo is None else plan._replace(redone=redone)
                for plan in plans]

    def fixed_attention(self, h, kernel):
        """Exact leave-one-out attention (L, L) under one bandwidth ``h`` (in units of
        the distances ``D``), and the number of rows with no kernel mass."""
        return self._attention(self.D_sq.new_full((self.D_sq.shape[0],), h), None, kernel)

    def _bandwidths(self, adaptive, n_coords):
        """The bandwidths (L,) of ``adaptive`` (the query's for a balloon, the key's for
        a sample point) and the sample point's (k, c, r) (None for a balloon)."""
        k, c = adaptive.n_neighbors, adaptive.scale
        h = (c * self._kth(k, other_locations=adaptive.kind == "sample_point")).clamp(
            min=torch.finfo(self.D_sq.dtype).tiny)  # (L,)
        return h, None if adaptive.kind == "balloon" else (k, c, n_coords)

    def _step(self):
        """The rows of a block of :meth:`_attention`: two (b, L) temporaries of up to
        four times the cache each (a block's dozen torch calls cost more than its
        passes gain in cache: a pooled candidate at L = 4,000 took 20.7 ms in blocks of
        128 rows, 17.7 ms in blocks of 512)."""
        L = len(self.W)
        return chunk_rows(L, 2 * L * self.D_sq.element_size(), workers=n_workers(self.D_sq.device),
                          cap_bytes=8 * CACHE_BYTES)

    def _attention(self, h, sample_point, kernel, values=None):
        """The attention of query bandwidths ``h`` (L,) per row, or with ``sample_point``
        (k, c, r) key bandwidths per column, corrected where a left-out input changes
        them; with ``values``, its product with them (see :meth:`attention`). In blocks
        of rows on the workers (see :mod:`sklearn_nw._workers`): each row's operations are
        those of the whole matrix, as are its values."""
        D_sq = self.D_sq
        L = len(self.W)
        plan = self._plan(h, sample_point, kernel, values is not None)
        if values is not None:  # (L, t): each block's rows times the values
            result = D_sq.new_empty((L, values.shape[1]), dtype=values.dtype)
            with_ones = values_and_ones_t(values)  # (t + 1, L)
        else:
            result, with_ones = torch.empty_like(D_sq), None  # (L, L)
        step = self._step()
        plan = plan if values is None else self._with_redone([plan], values, step)[0]

        def block(a, workspace):
            return self._block_into(plan, a, min(a + step, L), kernel, values, with_ones,
                                    result, workspace)

        with self._workspaces(step * L) as workspace:
            n_fallback = sum(on_workers(range(0, L, step), block, D_sq.device,
                                        init=workspace if plan.bits is not None else None))
        return result, n_fallback

    def _plan(self, h, sample_point, kernel, pooling):
        """What :meth:`_block_into` needs of one attention: the bandwidths, the logits'
        terms in nats, and in bits where the weights can be pooled as powers of 2
        (``pooling``: a product with values; the Gaussian family, every logit finite or
        -inf), else None."""
        nats = self._logit_terms(h, sample_point, kernel)
        if not (pooling and nats.factor is not None and self.finite_sq
                and bool((nats.key_log_w < math.inf).all())):
            return _Plan(h, sample_point, nats, None)
        finite = torch.isfinite(nats.factor)  # (L, 1) per row, or (L,) per key
        if bool(finite.all()):
            return _Plan(h, sample_point, nats, nats.in_bits())
        if not nats.per_row:  # (a sample-point key's neighbors lie at other inputs)
            return _Plan(h, sample_point, nats, None)
        # Balloon rows of bandwidth 0 (a k-th neighbor at distance 0: repeated rows, or
        # inputs repeated in the continuous features) have every logit -inf, or NaN at
        # distance 0, which the logits in nats read as -inf: no kernel mass, they attend
        # to their nearest inputs. The pass in bits gives them factor 0; they are redone
        # after it (measured, ad hoc: fair's first 3,000 rows, where most rows repeat
        # their continuous features, one fold's default CV fit 3.65 s -> 2.70 s).
        factor = torch.where(finite, nats.factor, 0.0)
        return _Plan(h, sample_point, nats, nats._replace(factor=factor).in_bits(),
                     redo=~finite[:, 0])

    def _block_into(self, plan, a, b, kernel, values, with_ones, result, workspace,
                    columns=slice(None)):
        """Rows a to b of an attention (:meth:`_plan`) into ``result``: the attention,
        or its product with ``values`` (L, t); ``with_ones`` (t + 1, L) the values and a
        row of ones (:func:`~sklearn_nw._engine.values_and_ones_t`), ``workspace`` a
        buffer of (b - a) rows of the ``columns`` or more. With ``values``, ``columns``
        (a slice) holds every key of the rows' weight that counts (:meth:`_windows`):
        the sums run over those keys. Returns the number of rows with no kernel mass."""
        if plan.bits is not None:
            # Pooled Gaussian values: the weights as powers of 2 of the logits in bits
            # (torch's exp2 keeps its speed where weights underflow, where exp slows
            # ~15x), subnormal ones flushed to 0 (_pooled_weights), each row's sum by
            # the product with the column of ones.
            logits = self._block_logits(a, b, plan.bits, kernel, columns,
                                        out=workspace)
            sums = _pooled_weights(with_ones[:, columns], logits)  # (b, t + 1)
            done = self._from_sums(plan, sums, a, b, result)
            if done is not None:
                return done
        return self._softmax_into(plan, a, b, kernel, values, result, columns)

    @staticmethod
    def _from_sums(plan, sums, a, b, result):
        """Rows a to b of the pooled values from their weighted sums and normalizers
        ``sums`` (b - a, t + 1), with the rows of bandwidth 0 redone: the number of
        those. None, and nothing written, where a row's sum is at most
        ``2^_FAST_MIN_LOG2_SUM`` or not finite: a row of small weights (or whose sum
        overflowed) is computed as the softmax computes it, shifted by its largest
        logit."""
        if not bool(((sums[:, -1] > 2.0**_FAST_MIN_LOG2_SUM)
                     & torch.isfinite(sums).all(1)).all()):
            return None
        result[a:b] = sums[:, :-1] / sums[:, -1:]
        if plan.redo is None or not bool(plan.redo[a:b].any()):
            return 0
        rows = torch.nonzero(plan.redo[a:b])[:, 0] + a
        result[rows] = plan.redone[rows]
        return len(rows)

    def _softmax_into(self, plan, a, b, kernel, values, result, columns=slice(None)):
        """Rows a to b of an attention, or of its product with ``values``, by the
        softmax of the logits in nats (see :meth:`_block_into`)."""
        rows_attention = torch.softmax(self._block_logits(a, b, plan.nats, kernel, columns),
                                       dim=1)  # (b, w); a row of no mass is NaN
        empty = (torch.isnan(rows_attention[:, 0])
                 | torch.isnan(rows_attention[:, -1]))  # (b,)
        n_empty = int(empty.sum())
        if values is None:
            if n_empty:
                rows_attention[empty] = self._nearest(torch.nonzero(empty)[:, 0] + a,
                                                      plan.h, plan.sample_point)
            result[a:b] = rows_attention
            return n_empty
        result[a:b] = rows_attention @ values[columns]
        if n_empty:
            rows = torch.nonzero(empty)[:, 0] + a
            result[rows] = self._nearest(rows, plan.h, plan.sample_point) @ values
        return n_empty

    def _windows(self, plan, kernel, step):
        """The keys (a slice) whose weight counts in each block of ``step`` rows of
        ``plan``, the inputs of one feature sorted (``positions``): a compact kernel's
        within its support; a Gaussian-family kernel's where their logit can come
        within ``WINDOW_LOG_RATIO`` of the row's reference logit (its logit at the
        nearest key of positive weight on either side), with every pair whose key's
        bandwidth the row changes. Every key for other kernels."""
        p, W, L = self.positions, self.W, len(self.W)
        if kernel.quadratic_coef is None and not kernel.is_compact:
            return [slice(None)] * len(range(0, L, step))
        terms = plan.nats
        if kernel.is_compact:
            reach = kernel.support * plan.h  # (L,) a row's (balloon) or a key's
        else:
            reference = self._reference_logits(terms, kernel)  # (L,)
            floor = reference - WINDOW_LOG_RATIO  # (L,)
            if terms.per_row:  # below the heaviest key's logit at the row's bandwidth
                log_w_max = float(torch.log(W[W > 0]).max())
                # A row of no weight at its nearest keys (a bandwidth of 0) weighs
                # none at any key farther away: those at its own input are its window.
                reach = torch.where(floor > -math.inf, plan.h * torch.sqrt(
                    (log_w_max - floor) / kernel.quadratic_coef), 0.0)
        starts = torch.arange(0, L, step, device=W.device)  # (B,) each block's first row
        ends = (starts + step).clamp(max=L) - 1  # (B,) and last
        if terms.per_row:
            # The block's widest reach, around its first and last rows.
            padded = reach.new_zeros(len(starts) * step)
            padded[:L] = reach
            r = padded.view(-1, step).amax(1) * (1 + 1e-9)  # (B,)
            lo = torch.searchsorted(p, p[starts] - r)
            hi = torch.searchsorted(p, p[ends] + r, right=True)
        else:
            if not kernel.is_compact:  # a key's logit above its block's lowest floor
                padded = floor.new_full((len(starts) * step,), math.inf)
                padded[:L] = floor
                lowest = padded.view(-1, step).amin(1)  # (B,)
                reach = plan.h * torch.sqrt((terms.key_log_w - lowest[:, None]).clamp(
                    min=0.0) / kernel.quadratic_coef)  # (B, L)
                reach = reach.nan_to_num(nan=math.inf)
            reach = reach * (1 + 1e-9)
            reaching = ((p + reach >= p[starts, None])
                        & (p - reach <= p[ends, None]))  # (B, L)
            any_key = reaching.any(1)
            lo = torch.where(any_key, reaching.int().argmax(1), starts)
            hi = torch.where(any_key, L - reaching.flip(1).int().argmax(1), ends + 1)
        lo, hi = torch.minimum(lo, starts), torch.maximum(hi, ends + 1)  # the rows' keys
        if terms.changed is not None:  # the keys whose bandwidth a row changes
            pair_rows, pair_cols = terms.changed[:2]
            block = pair_rows // step
            lo = lo.scatter_reduce(0, block, pair_cols, "amin")
            hi = hi.scatter_reduce(0, block, pair_cols + 1, "amax")
        return [slice(int(a), int(b)) for a, b in zip(lo.tolist(), hi.tolist())]

    def _reference_logits(self, terms, kernel):
        """Each row's largest logit (nats) at its nearest key of positive weight on
        either side (itself excluded; -inf for none), as :meth:`_block_logits` gives it:
        a lower bound of the row's largest logit."""
        W, L = self.W, len(self.W)
        positive = torch.nonzero(W > 0)[:, 0]  # (P,) sorted
        rows = torch.arange(L, device=W.device)
        reference = W.new_full((L,), -math.inf)
        if not len(positive):
            return reference
        for side in (torch.searchsorted(positive, rows) - 1,  # (L,) the nearest before
                     torch.searchsorted(positive, rows, right=True)):  # and after
            inside = (side >= 0) & (side < len(positive))
            keys = positive[side.clamp(0, len(positive) - 1)]  # (L,)
            h_sq = terms.h_sq[:, 0] if terms.per_row else terms.h_sq[keys]
            logit = (kernel.log_profile_sq(self.D_sq[rows, keys] / h_sq)
                     + terms.key_log_w[keys])  # (L,)
            if terms.changed is not None:  # the pairs whose key's bandwidth changes
                pair_rows, pair_cols, pair_logits = terms.changed
                hit = pair_cols == keys[pair_rows]
                logit = logit.index_put((pair_rows[hit],), pair_logits[hit])
            logit = torch.where(inside, logit.nan_to_num(nan=-math.inf), -math.inf)
            reference = torch.maximum(reference, logit)
        return reference

    def _logit_terms(self, h, sample_point, kernel):
        """What the logits of :meth:`_attention` are made of (:class:`_LogitTerms`), in
        nats."""
        log_w = torch.log(self.W)  # (L,)
        if sample_point is None:
            h_sq, key_log_w, changed = (h * h)[:, None], log_w, None  # (L, 1)
        else:
            k, c, r = sample_point
            h_sq = h * h  # (L,)
            key_log_w = log_w - r * torch.log(h)  # (L,)
            rows, cols, h_left, pair_sq, pair_log_w = self._left_out_bandwidths(k, c)
            changed = (rows, cols, pair_log_w - r * torch.log(h_left)
                       + kernel.log_profile_sq(pair_sq / (h_left * h_left)))
            if self.extra is not None:
                changed = (rows, cols, changed[2] + self.extra[rows, cols])
        self_log_ratio = None
        if self.self_weight is not None:  # log(kept / W) (L,); 0/0 is a key of no weight
            # (-inf where a key keeps no weight: nan_to_num would make it the lowest
            # float, finite, on which a row of no other kernel mass would then attend.)
            self_log_ratio = torch.log(self.self_weight / self.W).nan_to_num_(
                nan=-math.inf, neginf=-math.inf)
        # The Gaussian family: one pass, the squared distances times a factor.
        factor = (None if kernel.quadratic_coef is None
                  else -kernel.quadratic_coef / h_sq)  # (L, 1) or (L,)
        return _LogitTerms(sample_point is None, h_sq, key_log_w, changed, factor,
                           self_log_ratio, in_nats=True)

    def _block_logits(self, a, b, terms, kernel, columns=slice(None), out=None):
        """The logits of rows a to b (in nats or in bits, as ``terms``) over the keys
        ``columns`` (a slice), in ``out`` (a buffer of at least that many elements)
        where given and the terms hold the Gaussian family's factor."""
        W = self.W
        lo = columns.start or 0
        keys = range(len(W))[columns]
        per_row = terms.per_row  # the query's bandwidth, else the keys'
        if terms.factor is not None:
            factor = terms.factor[a:b] if per_row else terms.factor[columns]
            if out is not None:
                out = out.view(-1)[: (b - a) * len(keys)].view(b - a, len(keys))
            # (b, w) in one pass
            logits = torch.addcmul(terms.key_log_w[columns], self.D_sq[a:b, columns],
                                   factor, out=out)
        else:
            logits = kernel.log_profile_sq(
                self.D_sq[a:b, columns]
                / (terms.h_sq[a:b] if per_row else terms.h_sq[columns]))  # (b, w)
            logits += terms.key_log_w[columns]
        if self.extra is not None:
            logits.add_(self.extra[a:b, columns], alpha=terms.unit)
        if terms.changed is not None:
            rows, cols, changed_logits = terms.changed  # sorted by row
            pick = slice(*torch.searchsorted(rows, rows.new_tensor([a, b])).tolist())
            logits[rows[pick] - a, cols[pick] - lo] = changed_logits[pick]
        if terms.in_nats:  # (bits: only where no logit can be NaN, see _attention)
            # An overflowed distance over an overflowed bandwidth (inf / inf) carries no
            # weight: a row left without any falls back to its nearest inputs. (Infinite
            # logits stay infinite: torch's default would make -inf the lowest float, and
            # a row of no mass a uniform one.)
            logits.nan_to_num_(nan=-math.inf, posinf=math.inf, neginf=-math.inf)
        own = torch.arange(a, b, device=W.device)
        if self.self_weight is None:
            set_self_(logits, own - lo, -math.inf)
        else:  # the key's own logit, with the weight it keeps instead of all of it
            set_self_(logits, own - lo, logits[torch.arange(b - a, device=W.device), own - lo]
                      + terms.self_log_ratio[a:b])
        if self.zero_weight is not None:
            logits[:, self.zero_weight[columns]] = -math.inf
        return logits

    def _nearest(self, rows, h, sample_point):
        """Attention (e, L) of the rows with no kernel mass: their nearest other
        input(s) in the adaptive metric, every tie, weighted as the kernel weighs keys."""
        W, D = self.W, self._distances(rows)  # (e, L)
        log_w = torch.log(W)
        if sample_point is None:
            ratio = D / h[rows, None]  # (e, L)
            key_log_w = log_w.expand(len(rows), -1)
        else:
            k, c, r = sample_point
            H = h.expand(len(rows), -1).clone()  # (e, L)
            q, i, h_left, _, _ = self._left_out_bandwidths(k, c)
            pick = torch.isin(q, rows)
            position = torch.searchsorted(rows, q[pick])
            H[position, i[pick]] = h_left[pick]
            ratio = D / H
            key_log_w = log_w - r * torch.log(H)
        eligible = other_keys(W > 0, rows)  # (e, L)
        if self.self_weight is not None:  # a key keeping weight on itself, at distance 0
            kept = self.self_weight[rows]  # (e,)
            set_self_(eligible, rows, kept > 0)
            own = torch.arange(len(rows), device=W.device)
            key_log_w = set_self_(key_log_w.clone(), rows,
                                  key_log_w[own, rows] + torch.log(kept / W[rows]))
        if self.extra is not None:  # weighed as the kernel weighs them: with the factor
            key_log_w = key_log_w + self.extra[rows]
        # inf / inf: both overflowed; ranked after every finite ratio, tied with each other.
        nearest, _ = nearest_keys(ratio.nan_to_num(nan=math.inf), eligible)
        return torch.softmax(torch.where(nearest, key_log_w, -math.inf), dim=1)  # (e, L)

    def _kth(self, k, other_locations=False):
        """Each key's distance to the nearest other keys (at other inputs, with
        ``other_locations``) holding k units (L,)."""
        sorted_D, _, cumulative = self._neighbors(other_locations)
        need = k * (1 - _UNIT_RTOL)
        if bool((cumulative[:, -1] < need).any()):
            raise ValueError(
                f"An adaptive bandwidth with n_neighbors={k} needs k units of sample "
                "weight at other locations than each training point; there are only "
                f"{float(cumulative[:, -1].min()):g}. Lower n_neighbors."
            )
        # The first column holding k units: cumulative weights rise along each row.
        column = torch.searchsorted(cumulative, cumulative.new_full((len(cumulative), 1),
                                                                    need))  # (L, 1)
        return sorted_D.gather(1, column)[:, 0]

    def _left_out_bandwidths(self, k, c):
        """The sample-point bandwidths that leaving an input out changes: for each key i
        and each input j among its k nearest, c times the distance at which i's
        neighbors (j included) hold ``k + W[j]``. Returns the pairs as (query rows j, key
        columns i), sorted by row, those bandwidths, the pairs' squared distances and
        their keys' log weights.
        The pairs and distances depend on k alone: found once per k, they serve every c
        (the candidates' scales)."""
        # Found once per k, however many worker threads ask for it at once.
        with self._left_out_locks.setdefault(k, threading.Lock()):
            if k not in self._left_out:
                self._left_out[k] = self._left_out_distances(k)
        rows, keys, d_left, pair_sq, key_log_w = self._left_out[k]
        return (rows, keys, (c * d_left).clamp(min=torch.finfo(self.D_sq.dtype).tiny), pair_sq,
                key_log_w)

    def _left_out_distances(self, k):
        """:meth:`_left_out_bandwidths` at c = 1, unclamped."""
        sorted_D, order, cumulative = self._neighbors(other_locations=True)
        L, m = sorted_D.shape
        d_k = self._kth(k, other_locations=True)  # (L,)
        # A key's neighbors up to d_k are the affected ones: its first columns.
        m_k = int(torch.searchsorted(sorted_D, d_k[:, None], right=True).max())
        affected = sorted_D[:, :m_k] <= d_k[:, None]  # (L, m_k) [key i, its p-th neighbor j]
        neighbor = order[:, :m_k]  # (L, m_k)
        target = (k + self.removed[neighbor]) * (1 - _UNIT_RTOL)  # (L, m_k)
        column = torch.searchsorted(cumulative, target)
        if bool((column[affected] >= m).any()):
            raise ValueError(
                f"Leave-one-out of a sample-point bandwidth with n_neighbors={k} needs k "
                "units of sample weight at other locations than each training point and "
                "a neighbor left out. Lower n_neighbors."
            )
        d_left = sorted_D.gather(1, column.clamp(max=m - 1))  # (L, m_k)
        key, _ = torch.nonzero(affected, as_tuple=True)
        rows = neighbor[affected]
        by_row = torch.argsort(rows, stable=True)  # each block of rows finds its pairs
        rows, key = rows[by_row], key[by_row]
        return (rows, key, d_left[affected][by_row], self.D_sq[rows, key],
                torch.log(self.W)[key])
