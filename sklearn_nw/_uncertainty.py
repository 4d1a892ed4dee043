"""How sure a prediction is: the regressor's standard errors and jackknife+ intervals, in
numpy, from attention rows that the fitted route computes.

A fit is linear in the targets: ``f(x) = sum_i l_i(x) y_i`` with ``l(x)`` the attention
of ``x`` (degree 0, the sample weights included) or the equivalent kernel of its local
polynomial (degree 1 or 2). So, the targets independent with variances ``s_i^2``,

    Var f(x) = sum_i l_i(x)**2 s_i**2,

and :func:`residual_variance` estimates each ``s_i^2`` as nprobust does (Calonico,
Cattaneo and Farrell), from the residuals of the in-sample fit ``e_i = y_i - f(x_i)`` and
its self-weights ``L_ii = l_i(x_i)`` (``"hc0"`` to ``"hc3"``), or from the targets of each
point's nearest neighbors (``"nn"``, :func:`nearest_neighbor_variance`).

At a fixed bandwidth, the fit without row j at a query is its attention without key j,
renormalized: :func:`leave_one_out_fits` gives every one from one attention row, and
:func:`jackknife_plus` the intervals of Barber, Candes, Ramdas and Tibshirani (2021);
:func:`conformal_sets` the classifier's sets of Romano, Sesia and Candes (2020) (their
CV+ with one row per fold) for the scores of :func:`conformity_scores`.
"""

import math

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.neighbors import BallTree, KDTree

from ._workers import chunk_rows, on_workers

# Above this many coordinates a k-d tree prunes too little (as the routes' searches).
TREE_MAX_FEATURES = 15

RESIDUAL_VARIANCES = ("nn", "hc0", "hc1", "hc2", "hc3")
CONFORMITY_SCORES = ("lac", "aps")


def score_tolerance(dtype):
    """Conformity scores (in [0, 1]) closer than this are ties: 1e-8 (MAPIE's
    ``EPSILON``), or 100 epsilons of a fit computed in float32."""
    return max(1e-8, 100 * float(np.finfo(dtype).eps))


def dense_rows(attention):
    """Attention rows (dense or CSR) as a float64 ndarray."""
    if sp.issparse(attention):
        attention = attention.toarray()
    return np.asarray(attention, dtype=np.float64)


def squared_attention(attention):
    """The squared weights ``l_i(x)**2`` of attention rows, dense or CSR, in float64."""
    if sp.issparse(attention):
        attention = sp.csr_array(attention, dtype=np.float64)
        if not attention.has_canonical_format:  # (power sorts every row: only if needed)
            return attention.power(2)
        return sp.csr_array((attention.data**2, attention.indices, attention.indptr),
                            shape=attention.shape)
    return np.asarray(attention, dtype=np.float64) ** 2


def self_weights(attention, rows):
    """``L_ii``: the weight of each training row ``rows[k]`` in its own in-sample fit
    (row k of ``attention``)."""
    k = np.arange(len(rows))
    if sp.issparse(attention):
        return np.asarray(sp.csr_array(attention)[k, rows], dtype=np.float64).ravel()
    return np.asarray(attention[k, rows], dtype=np.float64)


def residual_variance(y, fitted, leverage, positive, *, method, n_params):
    """The variance ``s_i^2`` (n, t) of each target, nprobust's ``"hc0"`` to ``"hc3"``.

    Parameters
    ----------
    y, fitted : ndarray of shape (n, t)
        The targets and their in-sample fit.
    leverage : ndarray of shape (n,)
        ``L_ii``, each row's weight in its own fit.
    positive : ndarray of shape (n,) of bool
        The rows of positive sample weight (the others get no attention: 0 here).
    method : {"hc0", "hc1", "hc2", "hc3"}
        ``e**2``, ``n / (n - p) e**2``, ``e**2 / (1 - L_ii)``, ``e**2 / (1 - L_ii)**2``.
    n_params : int
        The ``p`` of ``"hc1"``: the parameters of a local fit (nprobust's ``p + 1`` for
        a local polynomial of degree p in one feature).

    Raises
    ------
    ValueError
        ``"hc1"`` with no more rows than ``n_params``; ``"hc2"`` or ``"hc3"`` where a
        row's fit is its own target (``L_ii = 1``, a point alone in its kernel's reach).
    """
    e2 = np.where(positive[:, None], (y - fitted) ** 2, 0.0)  # (n, t)
    n = int(positive.sum())
    if method == "hc0":
        return e2
    if method == "hc1":
        if n <= n_params:
            raise ValueError(
                f"residual_variance='hc1' scales by n / (n - p) with p={n_params} "
                f"parameters per local fit; it needs more than {n_params} training points "
                f"of positive weight, got {n}.")
        return e2 * (n / (n - n_params))
    room = 1.0 - leverage[positive]
    if np.any(room <= 0) or not np.all(np.isfinite(room)):
        raise ValueError(
            f"residual_variance={method!r} divides by 1 - L_ii, and "
            f"{int(np.sum(~(room > 0)))} training points have all the weight of their own "
            "in-sample fit (L_ii >= 1: no other point within the kernel's reach). Use a "
            "larger bandwidth, or residual_variance='nn', 'hc0' or 'hc1'.")
    power = 1 if method == "hc2" else 2
    out = np.zeros_like(e2)
    out[positive] = e2[positive] / room[:, None] ** power
    return out


def nearest_neighbor_variance(y, neighbors, positive):
    """nprobust's ``vce="nn"``: ``s_i^2 = J_i / (J_i + 1) (y_i - mean of y_j)**2`` over
    each row's nearest others.

    Parameters
    ----------
    y : ndarray of shape (n, t)
    neighbors : sparse array of shape (n, n)
        Row i's stored entries are its neighbors (:func:`nearest_others`).
    positive : ndarray of shape (n,) of bool
        The rows whose variance is estimated (0 for the others).
    """
    neighbors = sp.csr_array(neighbors, dtype=np.float64)
    count = np.diff(neighbors.indptr)[:, None].astype(np.float64)  # (n, 1)
    mean = (neighbors @ y) / np.maximum(count, 1.0)  # (n, t)
    out = count / (count + 1) * (y - mean) ** 2
    out[~positive] = 0.0
    return out


def nearest_others(positive, n_neighbors, *, points=None, distances=None,
                   working_memory=1024):
    """Each row's nearest other rows of positive weight: at least ``n_neighbors`` of
    them (at most all the others) and every one as near as the ``n_neighbors``-th (ties,
    and rows at the same input, all in); for the rows of positive weight only.

    Parameters
    ----------
    positive : ndarray of shape (n,) of bool
    n_neighbors : int
    points : ndarray of shape (n, r), default=None
        The rows in a Euclidean space, searched with a k-d or ball tree.
    distances : callable, default=None
        Else ``distances(rows)``: the (b, n) distances of the rows ``rows`` (a slice) to
        every row, searched by brute force in chunks within ``working_memory`` MiB.

    Returns
    -------
    csr_array of shape (n, n)
        Ones at each row's neighbors.
    """
    n = len(positive)
    rows = np.flatnonzero(positive)
    if len(rows) < 2:
        raise ValueError(
            "residual_variance='nn' compares each training point with its nearest others; "
            f"it needs at least 2 training points of positive weight, got {len(rows)}.")
    J = min(n_neighbors, len(rows) - 1)
    owners, found = [], []  # (row, its neighbors) in blocks
    if points is not None:
        Tree = KDTree if points.shape[1] <= TREE_MAX_FEATURES else BallTree
        tree = Tree(points[rows])
        # The (J + 1)-th nearest, the row itself (at 0) among them, is its J-th other;
        # the radius is widened by rounding, as the tree's two searches round apart.
        k = min(J + 2, len(rows))
        dist, ind = tree.query(points[rows], k=k)
        radius = dist[:, J] * (1 + 1e-12) + np.finfo(np.float64).tiny
        nearest = rows[ind[:, : J + 1]]  # (m, J + 1)
        itself = nearest == rows[:, None]
        # Where the next one lies beyond the radius and the row is among its J + 1
        # nearest, those are every row within the radius: the row and its J others.
        alone = itself.any(1) & (dist[:, J + 1] > radius if k > J + 1 else True)
        owners.append(np.repeat(rows[alone], J))
        found.append(nearest[alone][~itself[alone]])
        # The others (ties at the radius): every row within it, by a radius search.
        tied = rows[~alone]
        for i, near in zip(tied, tree.query_radius(points[tied], r=radius[~alone])
                           if len(tied) else ()):
            near = rows[near]
            near = near[near != i]
            owners.append(np.full(len(near), i))
            found.append(near)
    else:
        step = chunk_rows(len(rows), 8 * 4 * max(1, n), working_memory)  # 4 float64 blocks
        for start in range(0, len(rows), step):
            block = rows[start : start + step]
            d = np.array(distances(block), dtype=np.float64)  # (b, n)
            d[:, ~positive] = np.inf
            d[np.arange(len(block)), block] = np.inf
            reach = np.partition(d, J - 1, axis=1)[:, J - 1]  # (b,) the J-th nearest other
            at, near = np.nonzero(d <= reach[:, None])
            owners.append(block[at])
            found.append(near)
    owners, found = np.concatenate(owners), np.concatenate(found)
    return sp.csr_array((np.ones(len(found)), (owners, found)), shape=(n, n))


def _without_top(A, v):
    """Row sums (b,) and weighted sums (b, t) of attention rows ``A`` (b, n) without each
    row's largest weight, and where that weight is: summed over the others, not
    subtracted, so no cancellation when it holds nearly all the mass. ``A`` is written
    and restored."""
    rows = np.arange(A.shape[0])
    top = A.argmax(1)  # (b,)
    top_weight = A[rows, top]
    A[rows, top] = 0.0
    sums, weighted = A.sum(1), A @ v  # (b,), (b, t)
    A[rows, top] = top_weight
    return sums, weighted, top


def weight_unresolved(others, dtype):
    """Where the other keys' weight is below what the attention's dtype resolves."""
    finfo = np.finfo(dtype if np.issubdtype(dtype, np.floating) else np.float64)
    return others <= finfo.tiny / finfo.eps


def leave_one_out_fits(attention, values):
    """The fit without each key at each query, from the queries' attention rows.

    ``f_{-j}(x) = (sum_i a_i v_i - a_j v_j) / (sum_i a_i - a_j)``: the attention without
    key j, renormalized, as a refit without row j at the same bandwidth has it (degree
    0). The largest weight of a row is left out by summing the others (no cancellation
    when it holds nearly all the mass).

    Parameters
    ----------
    attention : ndarray or CSR array of shape (b, n)
    values : ndarray of shape (n,) or (n, t)

    Returns
    -------
    fits : ndarray of shape (b, n) or (b, n, t)
        NaN where ``missing``.
    missing : ndarray of shape (b, n) of bool
        Where the other keys' weight is below what the attention's dtype resolves (the
        query's weight all on key j): a refit there falls back to the nearest other
        keys, which these rows do not hold.
    """
    fits, others = leave_one_out_sums(attention, values)  # (b, n, t), (b, n)
    missing = weight_unresolved(others, attention.dtype)  # (b, n)
    others[missing] = 1.0
    fits /= others[:, :, None]
    fits[missing] = np.nan
    return (fits[:, :, 0] if np.ndim(values) == 1 else fits), missing


def leave_one_out_sums(attention, values):
    """The sums of :func:`leave_one_out_fits` without each key: of the values ``sum_i a_i
    v_i - a_j v_j`` (b, n, t) and of the weights ``sum_i a_i - a_j`` (b, n), float64,
    ``values`` (n,) or (n, t); each row's largest weight left out by summing the others."""
    A = dense_rows(attention)  # (b, n)
    v = np.asarray(values, dtype=np.float64).reshape(A.shape[1], -1)  # (n, t)
    rows = np.arange(A.shape[0])
    rest, rest_v, top = _without_top(A, v)
    others = A.sum(1)[:, None] - A  # (b, n)
    others[rows, top] = rest
    sums = np.empty(A.shape + (v.shape[1],))  # (b, n, t)
    totals = A @ v  # (b, t)
    for c in range(v.shape[1]):  # one (b, n) pass at a time: no (b, n, t) temporaries
        out = np.multiply(A, v[:, c], out=sums[:, :, c])
        np.subtract(totals[:, c : c + 1], out, out=out)
        out[rows, top] = rest_v[:, c]
    return sums, others


def leave_one_out_own_fits(attention, values, own):
    """The fit without each query's own key ``own`` (b,) at that query: the diagonal of
    :func:`leave_one_out_fits` (a training point without itself), in one pass over the
    rows. Returns ``fits`` (b,) or (b, t) as ``values`` (NaN where missing) and
    ``missing`` (b,)."""
    dtype = attention.dtype
    v = np.asarray(values, dtype=np.float64).reshape(attention.shape[1], -1)  # (n, t)
    if sp.issparse(attention):  # the rows without their own key's entry
        A = sp.csr_array(attention, dtype=np.float64, copy=True)
        A.data[A.indices == np.repeat(own, np.diff(A.indptr))] = 0.0
        others, fits = A.sum(1), A @ v  # (b,), (b, t)
    else:
        A = dense_rows(attention)  # (b, n)
        rows = np.arange(A.shape[0])
        own_weight = A[rows, own]
        A[rows, own] = 0.0
        others, fits = A.sum(1), A @ v  # (b,), (b, t)
        A[rows, own] = own_weight
    missing = weight_unresolved(others, dtype)  # (b,)
    fits /= np.where(missing, 1.0, others)[:, None]
    fits[missing] = np.nan
    return (fits[:, 0] if np.ndim(values) == 1 else fits), missing


def jackknife_plus(fits, residuals, alphas):
    """Jackknife+ bounds from the leave-one-out fits at the queries.

    The lower bound is the ``floor(alpha (n + 1))``-th smallest of ``f_{-i}(x) - R_i``,
    the upper the ``ceil((1 - alpha) (n + 1))``-th smallest of ``f_{-i}(x) + R_i``
    (Barber et al. 2021), ``-inf`` and ``+inf`` where those ranks leave ``1..n``.

    Parameters
    ----------
    fits : ndarray of shape (b, n)
        ``f_{-i}(x)`` of each query and left-out row.
    residuals : ndarray of shape (n,)
        ``R_i = |y_i - f_{-i}(x_i)|``.
    alphas : ndarray of shape (n_levels,)
        One minus the confidence levels.

    Returns
    -------
    ndarray of shape (b, 2, n_levels)
    """
    b, n = fits.shape
    low, high = fits - residuals, fits + residuals  # (b, n)
    out = np.empty((b, 2, len(alphas)))
    for k, alpha in enumerate(alphas):
        # Rounded first: alpha (n + 1) computed as 2.9999999999999996 is rank 3.
        rank_low = math.floor(round(alpha * (n + 1), 9))
        rank_high = math.ceil(round((1 - alpha) * (n + 1), 9))
        # In place: a partition keeps every value, so the next level's ranks still hold.
        if rank_low < 1:
            out[:, 0, k] = -np.inf
        else:
            low.partition(rank_low - 1, axis=1)
            out[:, 0, k] = low[:, rank_low - 1]
        if rank_high > n:
            out[:, 1, k] = np.inf
        else:
            high.partition(rank_high - 1, axis=1)
            out[:, 1, k] = high[:, rank_high - 1]
    return out


# Queries per call of the windows' moves at most (several calls for the workers to share).
_MAX_WINDOW_QUERIES = 1024


def window_batches(lo, hi, pairs, most=_MAX_WINDOW_QUERIES):
    """Runs of consecutive queries (slices) for the windows' moves: each run as long as
    its count of queries times the rows of its windows' union stays within ``pairs``
    (one query at least, ``most`` at most). ``lo``, ``hi`` (n_q, w): each query's ``w``
    windows as places ``[lo, hi)`` in an order of the rows; a run's union of window j
    runs from its smallest ``lo`` to its largest ``hi``."""
    n_q = len(lo)
    batches, start = [], 0
    while start < n_q:
        # A run of r queries holds r times the first's widest rows at least.
        first = max(1, int(np.max(hi[start] - lo[start], initial=0)))
        stop = min(n_q, start + most, start + max(1, pairs // first))
        union = (np.maximum.accumulate(hi[start:stop], 0)
                 - np.minimum.accumulate(lo[start:stop], 0)).sum(1)  # (r,) non-decreasing
        size = union * np.arange(1, stop - start + 1)  # (r,) moves of each run
        stop = start + max(1, int(np.searchsorted(size, pairs, side="right")))
        batches.append(slice(start, stop))
        start = stop
    return batches


def jackknife_plus_windows(fits, bound, residuals, alphas, moves_on, pairs=2**17,
                           device="cpu"):
    """Jackknife+ bounds (n_q, 2, n_levels) from the moves of the fits without each
    training row on the few rows that can decide a bound.

    Without row i the fit ``f`` at a query moves by ``delta_i``, at most ``D`` (``bound``).
    The lower bound is ``f`` plus the k-th smallest of ``c_i + delta_i``, ``c = -R``
    (:func:`jackknife_plus`): within ``D`` of ``c_(k)``, the k-th smallest ``c``, so
    every row with ``c_i < c_(k) - 2 D`` ranks below it and every row with ``c_i > c_(k)
    + 2 D`` above, and it is the ``(k - L)``-th smallest over the rows between (``L``
    those below), the only ones whose moves are computed. The upper bound likewise with
    ``c = R``. Queries go in chunks of similar ``D``, each of about ``pairs`` moves.

    Parameters
    ----------
    fits : ndarray of shape (n_q,)
    bound : ndarray of shape (n_q,)
        At least the largest move of each query's fit.
    residuals : ndarray of shape (n,) or RankedScores
        The leave-one-out residuals of the rows that rank (positive weight), or their
        :class:`RankedScores` (ranked once for several calls).
    alphas : ndarray of shape (n_levels,)
    moves_on : callable
        ``moves_on(rows, columns)``: the moves (b, m) of the fits at the queries
        ``rows`` (b,) without each of the ranking rows ``columns`` (m,).
    pairs : int, default=2**17
        Moves per call of ``moves_on`` (queries times the rows of their windows): many
        queries per call where the windows are narrow, few where they are wide.
    device : str or torch.device, default="cpu"
        Where ``moves_on`` computes: on the CPU the chunks go to the workers
        (:func:`~sklearn_nw._workers.on_workers`; each writes its own queries' bounds).

    Returns
    -------
    ndarray of shape (n_q, 2, n_levels)
    """
    ranked = RankedScores.of(residuals)
    n_q, n = len(fits), len(ranked.order)
    # Twice D, with room for the rounding of the fits, the moves and the residuals.
    reach = 2 * bound * (1 + 1e-6) + 1e-12 * (np.abs(fits).max() + ranked.sorted[1][-1])
    sides = []  # (side, level, rank, rows in the order of c, c ascending)
    # c = -R ascending is R's order reversed (tied rows take either order: the windows
    # hold every row of a value or none).
    for side, by_shift in ((0, ranked.order[::-1]), (1, ranked.order)):
        for level, alpha in enumerate(alphas):
            sides.append((side, level, _ranks(alpha, n)[side], by_shift,
                          ranked.sorted[side]))
    out = np.empty((n_q, 2, len(alphas)))
    order = np.argsort(reach)  # chunks of queries of similar reach
    # Each query's rows between, in that order (nested: a chunk's union is its last's).
    ranked = [(rank, c) for _, _, rank, _, c in sides if 1 <= rank <= n]
    lo = np.stack([np.searchsorted(c, c[rank - 1] - reach[order], side="left")
                   for rank, c in ranked], 1) if ranked else np.zeros((n_q, 0), np.int64)
    hi = np.stack([np.searchsorted(c, c[rank - 1] + reach[order], side="right")
                   for rank, c in ranked], 1) if ranked else np.zeros((n_q, 0), np.int64)
    batches = window_batches(lo, hi, pairs)

    def bounds(batch, _):
        rows = order[batch]
        r = reach[rows].max()
        windows, columns = [], []
        for side, level, rank, by_shift, c in sides:
            if not 1 <= rank <= n:  # too few rows for the level
                out[rows, side, level] = np.inf if side else -np.inf
                continue
            lo = np.searchsorted(c, c[rank - 1] - r, side="left")
            hi = np.searchsorted(c, c[rank - 1] + r, side="right")
            windows.append((side, level, rank - lo, c[lo:hi]))
            columns.append(by_shift[lo:hi])
        if not windows:
            return
        # The sides' and levels' windows overlap (both sides rank the same residuals):
        # each row's move computed once.
        asked, place = np.unique(np.concatenate(columns), return_inverse=True)
        moves = moves_on(rows, asked)  # (b, m)
        start = 0
        for side, level, k, c in windows:
            moved = c + moves[:, place[start : start + len(c)]]  # (b, m')
            start += len(c)
            out[rows, side, level] = fits[rows] + np.partition(moved, k - 1, axis=1)[:, k - 1]

    on_workers(batches, bounds, device)
    return out


def sum_of_largest(a, k):
    """Each row's sum of its ``k`` largest entries: (b,) of ``a`` (b, m), float64.

    numpy's partition, or torch's top-k where most entries are exact zeros (the keys no
    query's weight reaches): numpy's introselect slows down on so many equal values, the
    top-k does not (measured, one thread: 20 x 20,000 with 77 % zeros 6-10 ms against 1.1;
    20 x 5,000 with 90 % 1.3-1.7 against 0.4), while on rows of few zeros the partition is
    3 to 5 times faster (1,250 x 1,000: 3.2 ms against 12.9)."""
    b, m = a.shape
    if k <= 0:
        return np.zeros(b)
    if k >= m:
        return a.sum(1)
    if 2 * np.count_nonzero(a) < a.size:
        return torch.topk(torch.from_numpy(a), k, dim=1, sorted=False).values.sum(1).numpy()
    return np.partition(a, m - k, axis=1)[:, m - k :].sum(1)


def _ranks(alpha, n):
    """The 1-based ranks of jackknife+'s lower and upper bounds among n values."""
    # Rounded first: alpha (n + 1) computed as 2.9999999999999996 is rank 3.
    return (math.floor(round(alpha * (n + 1), 9)), math.ceil(round((1 - alpha) * (n + 1), 9)))


def padded_rows(attention):
    """The keys of positive weight of sparse attention rows (b, n) and their weights,
    ``(keys, weights)`` (b, e) with ``e`` the largest count (at least 1), padded with
    key -1 and weight 0 past a row's own count; float64 weights."""
    A = sp.csr_array(attention, dtype=np.float64)
    A.eliminate_zeros()
    counts = np.diff(A.indptr)  # (b,)
    b, e = len(counts), max(1, int(counts.max(initial=0)))
    filled = np.arange(e) < counts[:, None]  # (b, e): each row's first slots, row by row
    keys = np.full((b, e), -1)
    weights = np.zeros((b, e))
    keys[filled], weights[filled] = A.indices, A.data
    return keys, weights


def sparse_leave_one_out_fits(attention, values):
    """The fits without each key of positive attention, from CSR attention rows (b, n):
    :func:`leave_one_out_fits` at those keys alone. Every other key's fit is the
    query's own fit, which they do not hold.

    Returns ``fits`` (b, e) or (b, e, t) as ``values`` (n,) or (n, t) (NaN where
    missing), ``keys`` (b, e) (-1 past a row's own count), ``missing`` (b, e) and the
    queries' fits with every key, (b,) or (b, t).
    """
    keys, weights = padded_rows(attention)  # (b, e)
    b = len(keys)
    v = np.asarray(values, dtype=np.float64).reshape(attention.shape[1], -1)  # (n, t)
    weighted = np.concatenate([v, np.zeros((1, v.shape[1]))])[keys]  # key -1: value 0
    weighted *= weights[:, :, None]
    rows = np.arange(b)
    top = weights.argmax(1)
    top_weight, top_weighted = weights[rows, top], weighted[rows, top]
    weights[rows, top], weighted[rows, top] = 0.0, 0.0
    rest, rest_v = weights.sum(1), weighted.sum(1)  # without the largest weight
    weights[rows, top], weighted[rows, top] = top_weight, top_weighted
    sums, totals = rest + top_weight, rest_v + top_weighted  # (b,), (b, t)
    others = sums[:, None] - weights  # (b, e)
    others[rows, top] = rest
    fits = np.subtract(totals[:, None, :], weighted, out=weighted)  # (b, e, t)
    fits[rows, top] = rest_v
    missing = weight_unresolved(others, attention.dtype) & (keys >= 0)
    others[missing] = 1.0
    fits /= others[:, :, None]
    fits[missing] = np.nan
    own = totals / sums[:, None]
    if np.ndim(values) == 1:
        return fits[:, :, 0], keys, missing, own[:, 0]
    return fits, keys, missing, own


class RankedScores:
    """The training rows' conformity scores (n,), ranked once for the chunks of queries
    that share them (:func:`jackknife_plus_sparse`: the absolute residuals;
    :func:`conformal_sets_sparse`): ``order`` ascending (stable), each row's ``place``
    in it (n + 1: key -1's last, past every place), and per side (lower, upper)
    ``-+ s`` ascending (``sorted``) and in the rows' order (``signed``, n + 1: key -1's
    last, ``+inf``)."""

    def __init__(self, scores):
        n = len(scores)
        self.order = np.argsort(scores, kind="stable")
        self.place = np.empty(n + 1, dtype=np.int64)
        self.place[self.order] = np.arange(n)
        self.place[-1] = 2 * n
        # The upper bounds' order; the lower bounds' is its reverse: tied scores are
        # equal values, so which of them a held row takes changes nothing.
        ascending = scores[self.order]
        self.sorted = (-ascending[::-1], ascending)
        self.signed = (np.append(-scores, np.inf), np.append(scores, np.inf))

    @classmethod
    def of(cls, scores):
        """``scores`` ranked: as given where they already are."""
        return scores if isinstance(scores, cls) else cls(scores)


def jackknife_plus_sparse(own, fits, keys, residuals, alphas):
    """:func:`jackknife_plus` where each query's fit without a row is its own fit
    ``own`` (b,) but at a few rows: ``fits`` (b, e) without rows ``keys`` (b, e), indices
    into ``residuals`` (n,; or their :class:`RankedScores`), -1 past a query's own
    count.

    The k-th smallest of ``f_{-i}(x) -+ R_i`` is the k-th of two sorted lists, the rows
    held in ``fits`` (``B``) and the others (``A``), ``own -+ R_i`` in the order of the
    residuals (sorted once) with the held rows' places skipped: the smallest, over the
    number t of held values among the k, of ``max(A_(k - t), B_(t))``. ``A_(k - t)``
    falls and ``B_(t)`` rises with t: the smallest is at the first t where ``B_(t) >=
    A_(k - t)`` (``B_(t)``) or just before it (``A_(k - t + 1)``), found for every query
    at once by a binary search over t (``A_(i)`` by a batched search,
    ``torch.searchsorted``, in the held places). O(b e log e) once the residuals are
    ranked, instead of O(b n).
    """
    ranked = RankedScores.of(residuals)
    b, e = fits.shape
    n = len(ranked.order)
    padding = keys < 0  # (b, e)
    n_held = e - np.count_nonzero(padding, axis=1)  # (b,)
    out = np.empty((b, 2, len(alphas)))
    # The held rows' places in the residuals' ascending order, ascending, less the held
    # places before each: the others before each held place, non-decreasing (n past the
    # count). The lower side's are these reversed and mirrored (_kth_others).
    before = ranked.place[keys]  # (b, e)
    before.sort(1)
    before -= np.arange(e)
    np.minimum(before, n, out=before)
    before = torch.from_numpy(before)
    rows = np.arange(b)
    for side in (0, 1):
        held = ranked.signed[side][keys]  # (b, e): B_(t) at t - 1 once sorted
        held += fits
        held[padding] = np.inf  # past every value
        held.sort(1)

        def others(i, side=side):  # A_(i) (b,), each query's i (b,), 0 for -inf
            return _kth_others(i[:, None], own=own, sorted_r=ranked.sorted[side],
                               before=before, n_held=n_held if side == 0 else None)[:, 0]

        for a, alpha in enumerate(alphas):
            k = _ranks(alpha, n)[side]
            if k < 1 or k > n:
                out[:, side, a] = -np.inf if k < 1 else np.inf
                continue
            # t from what the others lack of k to the held values among the k; the
            # first where B_(t) >= A_(k - t) (B_(0) = -inf never is) in [lo, hi).
            first, last = np.maximum(n_held - (n - k), 0), np.minimum(n_held, k)  # (b,)
            lo, hi = first.copy(), last + 1
            while (lo < hi).any():  # every query at once (those found stay)
                mid = (lo + hi) // 2
                crossed = (np.where(mid > 0, held[rows, np.clip(mid - 1, 0, e - 1)], -np.inf)
                           >= others(np.maximum(k - mid, 0)))
                searching = lo < hi
                hi = np.where(searching & crossed, mid, hi)
                lo = np.where(searching & ~crossed, mid + 1, lo)
            # B_(t) at the first t crossed, A_(k - t + 1) just before it (each +inf
            # outside [first, last]).
            at_first = np.where(lo <= last, held[rows, np.clip(lo - 1, 0, e - 1)], np.inf)
            before_it = np.where(lo - 1 >= first, others(k - lo + 1), np.inf)
            out[:, side, a] = np.minimum(at_first, before_it)
    return out


def _kth_others(i, *, own, sorted_r, before, n_held=None):
    """``A_(i)`` (b, m) of :func:`jackknife_plus_sparse` for each of ``i`` ((m,) for
    every query, or (b, m) each its own): each query's ``i``-th smallest (1-based;
    -inf for 0) of ``own + sorted_r`` at the places no held row takes. ``before`` (b,
    e), a tensor: the others before each held place in the residuals' ascending order,
    non-decreasing. For the lower side (``n_held`` given) the order is the reverse:
    held place p is n - 1 - p, and the others before it ``n - n_held - before``, so the
    held places at or before ``i - 1`` others are the held count less those with
    ``before <= n - n_held - i``."""
    n = len(sorted_r)
    i = np.broadcast_to(i, (len(own), np.shape(i)[-1]))  # (b, m)
    if n_held is None:
        at = torch.searchsorted(before, torch.from_numpy(np.ascontiguousarray(i - 1)),
                                right=True).numpy()
    else:
        at = torch.searchsorted(before, torch.from_numpy(n - n_held[:, None] - i),
                                right=True).numpy()
        np.subtract(n_held[:, None], at, out=at)
    at += i - 1
    np.clip(at, 0, n - 1, out=at)
    kth = sorted_r[at]
    kth += own[:, None]
    kth[i < 1] = -np.inf
    return kth


def conformity_scores(proba, score, *, own_mass=1.0, classes=None, tie=0.0):
    """The conformity score of every class (..., c) under class probabilities ``proba``
    (..., c), or of the ``classes`` given (..., len(classes)): ``"lac"`` ``1 - p_k``;
    ``"aps"`` the mass of the classes more probable than k by more than ``tie`` (classes
    as probable as k, to the scores' tolerance, are not counted: probabilities equal in
    exact arithmetic, 1/2 and 1/2 of a top-hat kernel, round differently in the fits
    without each row and in a refit), plus ``own_mass`` times ``p_k`` (a number, or
    shares broadcast against ``proba[..., 0]``: random draws for randomized APS). With
    ``own_mass=0`` a class is scored by the mass before it, as MAPIE's
    ``include_last_label=True`` builds its sets: the most probable class scores 0."""
    classes = np.arange(proba.shape[-1]) if classes is None else np.asarray(classes)
    if score == "lac":
        return 1.0 - proba[..., classes]
    # Class by class over contiguous (...) blocks: no (..., c, c) comparison formed.
    by_class = np.ascontiguousarray(np.moveaxis(proba, -1, 0))  # (c, ...)
    out = np.empty((len(classes),) + by_class.shape[1:])
    for at, k in enumerate(classes):
        p_k = by_class[k]
        above = np.zeros_like(p_k)
        for j, p_j in enumerate(by_class):
            if j != k:
                above += np.where(p_j > p_k + tie, p_j, 0.0)
        out[at] = above + own_mass * p_k
    return np.moveaxis(out, 0, -1)


def conformity_score_bound(proba, bound, score, *, own_mass=1.0, tie=0.0):
    """How far the conformity score of each class (n_q, c) can move when the class
    probabilities ``proba`` (n_q, c) move by at most ``bound`` (n_q, c) each, summing to 1
    before and after: LAC's ``1 - p_k`` by ``D_k``; APS's (the classes more probable than
    k, and ``own_mass`` ``u`` of ``p_k``, a number or (n_q, 1)) by at most ``sum_{p_j >
    p_k} D_j + u D_k``, or ``sum_{p_j <= p_k, j != k} D_j + (1 - u) D_k`` (the mass
    above is 1 less the rest's), plus ``p_j + D_j`` for each class j whose order with k
    may change (``|p_j - p_k| <= D_j + D_k + tie``, ``tie`` as :func:`conformity_scores`
    takes it)."""
    if score == "lac":
        return bound
    p, D = proba, bound
    itself = np.eye(p.shape[1], dtype=bool)
    above = p[:, None, :] > p[:, :, None] + tie  # (q, c, c): class j above class k
    rest = ~above & ~itself  # the classes but k not above it
    swaps = np.abs(p[:, None, :] - p[:, :, None]) <= D[:, None, :] + D[:, :, None] + tie
    swaps &= ~itself
    return (np.minimum((above * D[:, None, :]).sum(2) + own_mass * D,
                       (rest * D[:, None, :]).sum(2) + (1 - own_mass) * D)
            + (swaps * (p + D)[:, None, :]).sum(2))


def conformal_sets_sparse(own_scores, scores, keys, training_scores, alphas, tolerance):
    """:func:`conformal_sets` where each query's fit without a row is its own fit but at
    a few rows: ``own_scores`` (b, c) its scores under its own fit, ``scores`` (b, e, c)
    under the fits without rows ``keys`` (b, e) (indices into ``training_scores`` (n,;
    or their :class:`RankedScores`), -1 past a query's own count). The rows below a
    score under the query's own fit are counted in the sorted training scores, those
    held replaced by their own."""
    ranked = RankedScores.of(training_scores)
    n = len(ranked.order)
    own_threshold = own_scores - tolerance  # (b, c)
    below = np.searchsorted(ranked.sorted[1], own_threshold, side="left")
    held_scores = ranked.signed[1][keys]  # (b, e): key -1's +inf
    below -= (held_scores[:, :, None] < own_threshold[:, None, :]).sum(1)
    below += (held_scores[:, :, None] < scores - tolerance).sum(1)  # (b, c)
    return np.stack([below < round((1 - alpha) * (n + 1), 9) for alpha in alphas], -1)


def conformal_sets_windows(scores, bound, training_scores, alphas, tolerance, moves_on,
                           pairs=2**17, device="cpu"):
    """:func:`conformal_sets` from each query's scores under its own fit (n_q, c) and the
    moves of those scores without each training row, computed only for the rows whose
    count they can change.

    Without row i the score of class k moves by at most ``D`` (``bound`` (n_q, c)): the
    training rows with ``s_i < S_k - D - tolerance`` count at every query, those with
    ``s_i >= S_k + D - tolerance`` at none, and only those between need their move, where
    they can carry the count across a level's threshold. Per class, each query's own
    window of the sorted training scores, the queries in runs of similar widths, each of
    about ``pairs`` moves (its queries times its widest).

    Parameters
    ----------
    scores : ndarray of shape (n_q, c)
    bound : ndarray of shape (n_q, c)
    training_scores : ndarray of shape (n,)
    alphas : ndarray of shape (n_levels,)
    tolerance : float
    moves_on : callable
        ``moves_on(rows, columns, k)``: the moves (b, m) of the scores of class ``k`` at
        the queries ``rows`` (b,) without each of the training rows ``columns`` (b, m),
        each query's own.
    pairs : int, default=2**17
        Moves per call of ``moves_on``, as in :func:`jackknife_plus_windows`.
    device : str or torch.device, default="cpu"
        Where ``moves_on`` computes: on the CPU the runs go to the workers.

    Returns
    -------
    ndarray of shape (n_q, c, n_levels) of bool
    """
    n_q, c = scores.shape
    n = len(training_scores)
    by_score = np.argsort(training_scores, kind="stable")
    sorted_scores = training_scores[by_score]  # (n,)
    reach = bound * (1 + 1e-6) + 1e-12  # (n_q, c): D, with room for rounding
    # Each query's rows between, per class: [lo, hi) in the sorted training scores.
    lo = np.searchsorted(sorted_scores, scores - reach - tolerance, side="left")  # (n_q, c)
    width = np.searchsorted(sorted_scores, scores + reach - tolerance, side="left") - lo
    counts = lo.copy()  # the rows below every move
    # A class whose count, between lo and lo + width, is on one side of every level's
    # threshold is decided: no move computed (lo stands for its count).
    thresholds = [round((1 - alpha) * (n + 1), 9) for alpha in alphas]
    open_ = np.zeros(lo.shape, dtype=bool)  # (n_q, c)
    for threshold in thresholds:
        open_ |= (lo < threshold) & (lo + width >= threshold)
    width[~open_] = 0
    tasks = []
    for k in range(c):
        order = np.argsort(width[:, k], kind="stable")  # queries of similar widths
        order = order[width[order, k] > 0]
        tasks += [(k, order[run]) for run in window_batches(
            np.zeros((len(order), 1), np.int64), width[order, k, None], pairs)]

    def count(task, _):
        k, rows = task
        step = np.arange(width[rows, k].max())  # (m,)
        within = step < width[rows, k, None]  # (b, m): each query's own window
        places = np.minimum(lo[rows, k, None] + step, n - 1)  # (b, m)
        moved = (scores[rows, k, None] + moves_on(rows, by_score[places], k)
                 - tolerance)  # (b, m)
        counts[rows, k] += ((sorted_scores[places] < moved) & within).sum(1)

    on_workers(tasks, count, device)
    return np.stack([counts < threshold for threshold in thresholds], -1)


def conformal_sets(scores, training_scores, alphas, tolerance):
    """Prediction sets from the scores of each class at each query under each
    leave-one-out fit: class k is in the set at level ``1 - alpha`` where fewer than
    ``(1 - alpha) (n + 1)`` training rows have a score (under their own leave-one-out
    fit) below its score under theirs by more than ``tolerance`` (scores equal up to
    rounding are ties: a class of probability 0 everywhere near, or of 1, has a score
    of exactly 0 or 1 only up to the rounding of its fit).

    Parameters
    ----------
    scores : ndarray of shape (b, n, c)
        ``S(x, k; f_{-i})``.
    training_scores : ndarray of shape (n,)
        ``S(x_i, y_i; f_{-i})``.
    alphas : ndarray of shape (n_levels,)
    tolerance : float

    Returns
    -------
    ndarray of shape (b, c, n_levels) of bool
    """
    n = len(training_scores)
    below = (training_scores[None, :, None] < scores - tolerance).sum(1)  # (b, c)
    return np.stack([below < round((1 - alpha) * (n + 1), 9) for alpha in alphas], -1)
