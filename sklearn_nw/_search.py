"""Searches of the training points: nearest and within-radius queries on scikit-learn's
trees, or exact distances to every point, as the routes' indexes and the leave-one-out
grids use them (numpy in and out)."""

import math

import numpy as np
import torch
from sklearn.neighbors import BallTree, KDTree
from sklearn.utils import gen_batches

from ._workers import chunk_rows, n_workers, on_workers

# Searches of fewer queries run in the calling thread (handing a few queries to threads
# costs more than it saves).
_PARALLEL_SEARCH_MIN = 256
# The trees' leaf size: scikit-learn's NearestNeighbors default.
_LEAF_SIZE = 30
# Bytes of a brute-force search's block of distances (queries x every point).
_BRUTE_BYTES = 2**26


# Distances from here on square to more than the largest float.
_SQRT_MAX = math.sqrt(np.finfo(np.float64).max)


def exact_distances(q, x):
    """Euclidean distances (b, n) of points ``q`` (b, r) to ``x`` (n, r), tensors, from
    exact differences. Distances whose squares overflow (a point near 1e155) are
    recomputed on the points divided by a power of two above their largest magnitude:
    exact, and those distances are large enough to keep their bits there (the others
    are not recomputed: their squares would underflow). inf is left only where the
    distance itself passes the largest float."""
    d = torch.cdist(q, x, compute_mode="donot_use_mm_for_euclid_dist")  # (b, n)
    if not q.numel() or not x.numel():
        return d
    # No square overflows below this bound on the coordinates' sums: no pass for inf.
    top = float(q.abs().max()) + float(x.abs().max())
    if top * top * q.shape[1] < torch.finfo(d.dtype).max / 2:
        return d
    far = torch.isinf(d).any(1)  # (b,)
    if bool(far.any()):
        qf = q[far]  # (f, r)
        _, e = math.frexp(float(max(qf.abs().max(), x.abs().max())))
        # 2**-e is exact (a subnormal at e = 1024); 2**e in two factors (2**1024 is not
        # a float): the product overflows to inf only where the distance does.
        down = 2.0 ** -e
        df = torch.cdist(qf * down, x * down, compute_mode="donot_use_mm_for_euclid_dist")
        df.mul_(2.0 ** (e - e // 2)).mul_(2.0 ** (e // 2))  # (f, n)
        d[far] = torch.where(torch.isinf(d[far]), df, d[far])
    return d


def paired_distances(q, x):
    """Euclidean distances between points ``q`` and ``x`` (numpy arrays broadcast against
    each other, the coordinates on the last axis), bit for bit as :func:`exact_distances`
    has them (each pair torch's ``cdist`` of its own: a sum of squares in another order
    differs in its last bits, which decides whether a key at exactly the bandwidth is in
    a compact kernel's support); those whose squares overflow (a point near 1e155) are
    recomputed on both points divided by a power of two above their largest magnitude;
    inf only where the distance itself passes the largest float."""
    q, x = np.broadcast_arrays(np.asarray(q, dtype=np.float64), np.asarray(x, dtype=np.float64))
    shape, r = q.shape[:-1], q.shape[-1]
    qt = torch.from_numpy(np.ascontiguousarray(q.reshape(-1, 1, r)))  # (N, 1, r)
    xt = torch.from_numpy(np.ascontiguousarray(x.reshape(-1, 1, r)))
    d = torch.cdist(qt, xt, compute_mode="donot_use_mm_for_euclid_dist")[:, 0, 0]  # (N,)
    far = torch.isinf(d)
    if bool(far.any()):
        qf, xf = qt[far], xt[far]  # (f, 1, r)
        top = torch.maximum(qf.abs().amax((1, 2)), xf.abs().amax((1, 2))).numpy()  # (f,)
        _, e = np.frexp(top)
        down = torch.from_numpy(np.ldexp(1.0, -e))[:, None, None]  # exact (subnormal at 1024)
        df = torch.cdist(qf * down, xf * down,
                         compute_mode="donot_use_mm_for_euclid_dist")[:, 0, 0].numpy()
        with np.errstate(over="ignore"):
            d[far] = torch.from_numpy(np.ldexp(df, e))
    return d.numpy().reshape(shape)


def tie_groups(dist, w):
    """Of lists of points sorted by distance (b, m) with weights ``w`` (b, m): each
    point's group of the points at its distance (a tie, or the point alone): its first
    place, the weight before it and its weight (``w`` itself for a point alone), and
    whether the point is alone, all (b, m)."""
    b, m = dist.shape
    at = np.broadcast_to(np.arange(m), (b, m))
    starts = np.ones((b, m), dtype=bool)
    starts[:, 1:] = dist[:, 1:] != dist[:, :-1]
    if starts.all():  # no tie
        return at, np.cumsum(w, axis=1) - w, w, starts
    ends = np.ones((b, m), dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, at, 0), axis=1)  # (b, m)
    last = np.minimum.accumulate(np.where(ends, at, m - 1)[:, ::-1], axis=1)[:, ::-1]
    cumulative = np.cumsum(w, axis=1)
    take = lambda a, where: np.take_along_axis(a, where, axis=1)
    before = take(cumulative, first) - take(w, first)  # (b, m)
    alone = starts & ends
    return first, before, np.where(alone, w, take(cumulative, last) - before), alone


def nearest_shares(dist, w, units, ties=None):
    """Each listed point's part (b, m) of the first ``units`` units of weight of lists
    sorted by distance (b, m), weights ``w`` (b, m), complete past the point completing
    them (:meth:`TreeSearch.nearest_holding`'s lists): all of its weight for a point
    nearer than that one; for the points as near as it (a tie), what is left of the
    units, shared in proportion to their weights; none beyond. Ties share whatever
    order a search meets them in: sample weights count as repeated rows (rows at one
    input, merged or not, hold the same) and a refit without a row holds what the fit
    without it holds. ``ties``: :func:`tie_groups` of the lists, where the caller has it."""
    if ties is None:
        if not (dist[:, 1:] == dist[:, :-1]).any():  # no tie
            return np.clip(units - (np.cumsum(w, axis=1) - w), 0.0, w)
        ties = tie_groups(dist, w)
    _, before, group, alone = ties
    if alone.all():
        return np.clip(units - before, 0.0, w)
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.clip((units - before) / group, 0.0, 1.0)  # (b, m)
    return np.where(alone, np.clip(units - before, 0.0, w),
                    w * np.where(group > 0, part, 0.0))


class TreeSearch:
    """Nearest and within-radius searches of points (n, d): scikit-learn's
    :class:`~sklearn.neighbors.KDTree` or :class:`~sklearn.neighbors.BallTree` queried
    directly, or exact distances to every point (``"brute"``, in blocks of queries).

    ``algorithm`` is resolved as :class:`~sklearn.neighbors.NearestNeighbors` resolves it
    (``"auto"``: brute force above 15 dimensions or for tiny data, else a k-d tree). The
    trees release the GIL: a search of ``_PARALLEL_SEARCH_MIN`` queries or more is cut
    into parts for the engine's workers (:func:`~sklearn_nw._workers.on_workers`).
    """

    def __init__(self, points, algorithm="auto"):
        n, d = points.shape
        if algorithm == "auto":
            algorithm = "brute" if d > 15 or 5 >= n // 2 else "kd_tree"
        self.algorithm = algorithm
        self.points = points
        if algorithm == "brute":
            self.tree = None
        else:
            Tree = KDTree if algorithm == "kd_tree" else BallTree
            self.tree = Tree(points, leaf_size=_LEAF_SIZE)

    @staticmethod
    def _in_parts(search, n_queries):
        """``search(start, stop)`` over slices of the queries: on the workers when there
        are enough of them, else at once; the results in order."""
        workers = n_workers("cpu")
        if n_queries < _PARALLEL_SEARCH_MIN or workers == 1:
            return [search(0, n_queries)]
        step = chunk_rows(n_queries, workers=workers)
        return on_workers(gen_batches(n_queries, step),
                          lambda rows, _: search(rows.start, rows.stop), "cpu")

    def nearest(self, queries, k, exact=False):
        """Distances and indices (m, k) of each query's k nearest points, nearest first;
        with ``exact``, the distances :func:`exact_distances` gives, bit for bit (a
        tree's own sum their squares in another order, in 3 features or more)."""
        if self.tree is None:
            return self._brute_nearest(queries, k)
        parts = self._in_parts(lambda a, b: self.tree.query(queries[a:b], k=k), len(queries))
        dist, ind = np.vstack([p[0] for p in parts]), np.vstack([p[1] for p in parts])
        # The trees square distances: past sqrt(largest float) (a query near 1e155) they
        # overflow, tie at inf and come back in no order; those queries are redone on the
        # overflow-safe exact distances.
        far = np.flatnonzero(np.isinf(dist).any(axis=1))
        if len(far):
            dist[far], ind[far] = self._brute_nearest(queries[far], k)
        if not exact:
            return dist, ind
        dist = paired_distances(queries[:, None, :], self.points[ind])  # (b, k)
        order = np.argsort(dist, axis=1, kind="stable")  # (re-ranked by them)
        return np.take_along_axis(dist, order, 1), np.take_along_axis(ind, order, 1)

    def nearest_holding(self, queries, weight, units, *, first, skip_zero=False, own=None,
                        ties=True, exact=False):
        """The nearest points of each query until their weights (``weight``, one per
        point: sample weights count as repeated rows) add up to ``units`` for every query,
        or all points: distances, indices, weights and cumulative weights, all (b, m).
        Starts from the ``first`` nearest and doubles (fractional weights need more).
        ``skip_zero``: points at distance 0 weigh nothing (the query's own location).
        ``own``: ``(point, weight)``, each query's own point (b,) (-1 for none) and the
        weight it keeps there (b,), in place of its own.

        With ``ties``, the lists go on to the last point as near as the one that completes
        ``units`` (:func:`nearest_shares` shares them out: ask ``first`` one more than
        the points that complete them, or a list that ends on that point is searched
        again). Without, the distances alone count. ``exact``: as :meth:`nearest`'s."""
        n = len(weight)
        m = first
        while True:
            dist, ind = self.nearest(queries, m, exact)  # (b, m)
            w = weight[ind]  # (b, m)
            if skip_zero:
                w = np.where(dist == 0, 0.0, w)
            if own is not None:
                w = np.where(ind == own[0][:, None], own[1][:, None], w)
            cumulative = np.cumsum(w, axis=1)  # (b, m)
            if m == n:
                return dist, ind, w, cumulative
            if np.all(cumulative[:, -1] >= units):
                if not ties:
                    return dist, ind, w, cumulative
                # A point beyond the list may tie with the one completing units unless
                # the list's last lies farther.
                completing = np.argmax(cumulative >= units, axis=1)  # (b,)
                reach = dist[np.arange(len(dist)), completing]  # (b,)
                if np.all(reach < dist[:, -1]):  # the lists to the widest tie's end
                    m = int((dist <= reach[:, None]).sum(1).max())
                    return dist[:, :m], ind[:, :m], w[:, :m], cumulative[:, :m]
            m = min(2 * m, n)

    def _brute_chunk(self):
        return max(1, _BRUTE_BYTES // (8 * len(self.points)))


    def distances(self, queries):
        """Exact distances (b, n) of queries to every point (:func:`exact_distances`)."""
        q, x = (torch.from_numpy(np.ascontiguousarray(a)) for a in (queries, self.points))
        return exact_distances(q, x).numpy()

    def _brute_nearest(self, queries, k):
        """:meth:`nearest` by brute force, in chunks of queries."""
        dist = np.empty((len(queries), k))
        ind = np.empty((len(queries), k), dtype=np.intp)
        for rows in gen_batches(len(queries), self._brute_chunk()):
            d = torch.from_numpy(self.distances(queries[rows]))  # (b, n)
            nearest = torch.topk(d, k, dim=1, largest=False, sorted=True)
            dist[rows], ind[rows] = nearest.values.numpy(), nearest.indices.numpy()
        return dist, ind

    def within(self, queries, radius):
        """Distances and indices (object arrays of m arrays) of the points within
        ``radius`` (a number, or one per query) of each query, in no particular order."""
        radii = np.full(len(queries), radius, dtype=np.float64)  # (m,)
        if self.tree is None:
            return self._brute_within(queries, radii)
        parts = self._in_parts(
            lambda a, b: self.tree.query_radius(queries[a:b], r=radii[a:b],
                                                return_distance=True), len(queries))
        dist = np.concatenate([p[1] for p in parts])
        ind = np.concatenate([p[0] for p in parts])
        # A tree squares distances: a radius past sqrt(largest float) finds nothing (every
        # distance in it may overflow); those queries are searched by exact distances.
        far = np.flatnonzero(radii > _SQRT_MAX / 2)
        if len(far):
            dist[far], ind[far] = self._brute_within(queries[far], radii[far])
        return dist, ind

    def _brute_within(self, queries, radii):
        """:meth:`within` by brute force, in chunks of queries."""
        dist, ind = np.empty(len(queries), dtype=object), np.empty(len(queries), dtype=object)
        for rows in gen_batches(len(queries), self._brute_chunk()):
            d = self.distances(queries[rows])  # (b, n)
            for j, (row, r) in enumerate(zip(d, radii[rows]), start=rows.start):
                ind[j] = np.flatnonzero(row <= r)
                dist[j] = row[ind[j]]
        return dist, ind
