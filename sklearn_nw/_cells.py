"""A cell list: points binned into a regular grid of small cubes, for radius searches in
few dimensions. Numpy only.

Every point within ``radius`` of a query lies in the ``(2 r + 1)**d`` cells around the
query's own cell when cells have side ``radius / r``. Sorting the points by cell makes the
cells that differ only in the last coordinate one contiguous run, so a query's candidates
are ``(2 r + 1)**(d - 1)`` slices of the sorted points, found by binary search. Queries of
neighboring cells share their candidates: they are grouped into blocks, each a dense
(queries x candidates) problem for the attention engine, which zeroes the candidates
outside the kernel's support. Candidates cost about ``(2 r + 1)**d / (r**d * ball volume)``
times the points in reach (2x for d=2, r=2); unlike a tree there is no per-pair traversal.
Above three dimensions the cells bin the three coordinates of widest spread: a point in
reach is in reach in any three coordinates, so the candidates are still a superset, only a
less selective one.
"""

import itertools

import numpy as np

# Cells across the radius (r above): more means fewer wasted candidates but more slices.
_SUBDIVISIONS = {1: 4, 2: 2, 3: 2}
# Cells are numbered in int64: the grid's extent (with a margin) must stay below this.
_MAX_CELLS = 2**62
# Small blocks of queries (few queries or candidates) are merged up to this many pairs.
_BLOCK_PAIRS = 2**16


class CellList:
    """Points (n, d) binned into cubes of side ``radius / _SUBDIVISIONS[min(d, 3)]`` on the
    (at most three) coordinates of widest spread.

    Raises ``ValueError`` when the points span too many cells for int64 cell numbers (an
    extreme spread against the radius); a tree search suits such data better.
    """

    def __init__(self, points, radius):
        points = np.asarray(points, dtype=np.float64)
        d = points.shape[1]
        if d <= 3:
            self.axes = np.arange(d)
        else:
            spread = np.ptp(points, axis=0) if len(points) else np.zeros(d)
            self.axes = np.sort(np.argsort(-spread, kind="stable")[:3])  # (3,)
        self.reach = _SUBDIVISIONS[len(self.axes)]
        self.side = radius / self.reach
        with np.errstate(over="ignore", invalid="ignore"):
            # (<= 3, n): one contiguous row per binned coordinate, for fast reductions.
            cells = np.floor(np.ascontiguousarray(points[:, self.axes].T) / self.side)
        margin = self.reach
        low, high = cells.min(1) - margin, cells.max(1) + margin  # (<= 3,)
        extent = high - low + 1
        if not np.all(np.isfinite(extent)) or np.prod(extent.astype(np.float64)) >= _MAX_CELLS:
            raise ValueError(
                "The points span too many cells of the kernel's support for a cell list."
            )
        self.low, self.shape = low.astype(np.int64), tuple(extent.astype(np.int64))
        ids = np.ravel_multi_index(cells.astype(np.int64) - self.low[:, None], self.shape)
        # The points in cell order; the order within a cell does not matter.
        self.order = np.argsort(ids, kind="quicksort")  # (n,)
        self.sorted_ids = ids[self.order]  # (n,)
        self._steps = self._run_steps()

    def _query_cells(self, queries):
        """Cell coordinates (m, d) of queries, clipped so that their neighborhoods stay
        inside the grid (a clipped query is out of reach of every point anyway)."""
        with np.errstate(over="ignore", invalid="ignore"):
            cells = np.floor(np.asarray(queries, dtype=np.float64)[:, self.axes] / self.side)
        upper = np.asarray(self.shape) - 1 - self.reach
        cells = np.clip(np.nan_to_num(cells - self.low, nan=0.0), self.reach, upper)
        return cells.astype(np.int64)

    def _run_steps(self):
        """The flat cell number of each neighboring run's first cell, less the query
        cell's prefix (runs share all but the last coordinate); computed once."""
        last = self.shape[-1]
        prefix_shape = self.shape[:-1]
        strides = [int(np.prod(prefix_shape[k + 1:])) for k in range(len(prefix_shape))]
        return np.array([int(np.dot(o, strides)) * last for o in itertools.product(
            range(-self.reach, self.reach + 1), repeat=len(prefix_shape))])  # (runs,)

    def runs(self, queries):
        """Each query's candidates: ``(lo, hi)``, both (m, runs), the slices of the points
        in cell order that hold every point within the radius of it (empty slices
        included). One vectorized search for all queries, for queries with few points in
        reach, where :meth:`blocks` would spend more time per block than per pair."""
        ids = np.ravel_multi_index(self._query_cells(queries).T, self.shape)  # (m,)
        last = self.shape[-1]
        prefixes, lasts = np.divmod(ids, last)  # (m,)
        base = (prefixes * last)[:, None] + self._steps + lasts[:, None]  # (m, runs)
        lo = np.searchsorted(self.sorted_ids, base - self.reach, "left")
        hi = np.searchsorted(self.sorted_ids, base + self.reach, "right")
        return lo, hi

    def blocks(self, queries):
        """Yield ``(query_rows, runs)``: groups of query rows, and the ``(start, stop)``
        slices of the points in cell order (``order``) that hold every point within the
        radius of any of them (possibly none)."""
        cells = self._query_cells(queries)  # (m, d)
        ids = np.ravel_multi_index(cells.T, self.shape)  # (m,)
        by_cell = np.argsort(ids, kind="stable")  # (m,)
        cell_ids, starts = np.unique(ids[by_cell], return_index=True)
        ends = np.append(starts[1:], len(ids))
        last = self.shape[-1]
        prefixes, lasts = np.divmod(cell_ids, last)  # runs share all but the last coordinate
        steps = self._steps

        def slices(g, h):
            """Bounds in the sorted points of the runs around cells g..h (one prefix)."""
            base = prefixes[g] * last + steps  # (runs,)
            lo = np.searchsorted(self.sorted_ids, base + lasts[g] - self.reach, "left")
            hi = np.searchsorted(self.sorted_ids, base + lasts[h] + self.reach, "right")
            return lo, hi

        g = 0
        while g < len(cell_ids):
            # Extend the block along the last coordinate while the cells stay adjacent and
            # the block small.
            h = g
            while h + 1 < len(cell_ids) and prefixes[h + 1] == prefixes[g] and (
                    lasts[h + 1] - lasts[h] <= 2 * self.reach):
                lo, hi = slices(g, h + 1)
                if (ends[h + 1] - starts[g]) * int((hi - lo).sum()) > _BLOCK_PAIRS:
                    break
                h += 1
            lo, hi = slices(g, h)
            yield by_cell[starts[g]:ends[h]], [(a, b) for a, b in zip(lo, hi) if b > a]
            g = h + 1
