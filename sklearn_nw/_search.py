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

    def nearest(self, queries, k):
        """Distances and indices (m, k) of each query's k nearest points, nearest first."""
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
        return dist, ind

    def nearest_holding(self, queries, weight, units, *, first, skip_zero=False, own=None):
        """The nearest points of each query until their weights (``weight``, one per
        point: sample weights count as repeated rows) add up to ``units`` for every query,
        or all points: distances, indices, weights and cumulative weights, all (b, m).
        Starts from the ``first`` nearest and doubles (fractional weights need more).
        ``skip_zero``: points at distance 0 weigh nothing (the query's own location).
        ``own``: ``(point, weight)``, each query's own point (b,) (-1 for none) and the
        weight it keeps there (b,), in place of its own."""
        n = len(weight)
        m = first
        while True:
            dist, ind = self.nearest(queries, m)  # (b, m)
            w = weight[ind]  # (b, m)
            if skip_zero:
                w = np.where(dist == 0, 0.0, w)
            if own is not None:
                w = np.where(ind == own[0][:, None], own[1][:, None], w)
            cumulative = np.cumsum(w, axis=1)  # (b, m)
            if m == n or np.all(cumulative[:, -1] >= units):
                return dist, ind, w, cumulative
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
