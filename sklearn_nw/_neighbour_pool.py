"""Attention restricted to some training points, for the estimators: those inside a
compact kernel's support (a cell list, or all points evaluated directly), the k nearest
(a tree), or each row's stored entries of precomputed distances.

:class:`NeighbourPoolMixin` holds these paths of :class:`~sklearn_nw._base.NadarayaWatsonBase`;
they read its fitted state (``X_fit_``, ``sample_weight_``, ``neighbors_``, ...) and return
:class:`~sklearn_nw._engine.PoolResult` objects.
"""

import contextlib

import numpy as np
import scipy.sparse as sp
import torch
from joblib import parallel_config
from sklearn import get_config
from sklearn.base import is_classifier
from sklearn.neighbors import BallTree, KDTree
from sklearn.utils import gen_batches

from ._cells import CellList
from ._engine import PoolResult, attention_pool, neighbour_pool, support_pool

# Queries are searched and pooled in chunks of this many.
_NEIGHBOUR_CHUNK = 512
# Calls with fewer queries search in the calling thread: the fitted search's joblib thread
# pool, set up for every search, costs about 14 ms (measured on 2 cores), far more than
# searching a few queries (a one-row predict on 10,000 points took 16 ms, 1.8 ms without).
_PARALLEL_SEARCH_MIN = 1024


def _search_threads(n_queries):
    """The joblib setting for a search of ``n_queries`` queries."""
    if n_queries >= _PARALLEL_SEARCH_MIN:
        return contextlib.nullcontext()
    return parallel_config(backend="sequential")


def _nearest_units(dist, ind, w, counts, k, first_row):
    """Per row (CSR layout), the nearest candidates holding ``k`` units of weight, the last
    one only in part; returns them padded to one width (weight 0 on padding) and counts."""
    b, width = len(counts), int(counts.max())
    padded = np.full((b, width), np.inf)
    padded_ind = np.zeros((b, width), dtype=ind.dtype)
    padded_w = np.zeros((b, width))
    column = np.arange(len(dist)) - np.repeat(np.cumsum(counts) - counts, counts)
    row = np.repeat(np.arange(b), counts)
    padded[row, column], padded_ind[row, column], padded_w[row, column] = dist, ind, w
    order = np.argsort(padded, axis=1, kind="stable")
    padded, padded_ind, padded_w = (np.take_along_axis(a, order, axis=1)
                                    for a in (padded, padded_ind, padded_w))
    cumulative = np.cumsum(padded_w, axis=1)
    short = np.flatnonzero(cumulative[:, -1] < k)
    if len(short):
        raise ValueError(
            f"n_neighbors={k} needs k units of sample weight among each row's stored "
            f"distances; row {first_row + int(short[0])} of the precomputed graph holds "
            f"{cumulative[short[0], -1]:g}. Store more neighbours per row or lower n_neighbors."
        )
    keep = np.clip(k - (cumulative - padded_w), 0.0, padded_w)  # (b, width)
    m = int(np.max(width - np.argmax(keep[:, ::-1] > 0, axis=1)))  # past the last kept
    padded, padded_ind, keep = padded[:, :m], padded_ind[:, :m], keep[:, :m]
    padded = np.where(np.isfinite(padded), padded, 0.0)  # padding: weight 0 at distance 0
    return padded, padded_ind, keep, np.full(b, m)


class NeighbourPoolMixin:
    """The restricted pooling paths of the Nadaraya-Watson estimators."""

    def _support_pool(self, X, values, device, log_w, return_attention):
        """A compact kernel, weights evaluated directly: on a cell list, each block of
        queries against the training points of the cells around it; else all queries
        against all training points with weight. Queries with no training point in reach
        are redone on the log-space engine, for the nearest-point fallback."""
        tensor = self._tensor_maker(device)
        if isinstance(self.neighbors_, CellList):
            rows = self.neighbor_rows_[self.neighbors_.order]  # indexed points, in cell order

            def blocks(queries):
                return self.neighbors_.blocks(self._search_space(X))
        else:
            rows = np.flatnonzero(self.sample_weight_ > 0)

            def blocks(queries):
                return [(np.arange(len(queries)), [(0, len(rows))])]
        w = self.sample_weight_[rows]
        # Bandwidths near the smallest float overflow the scaled inputs: their queries find
        # no weight and go to the careful path below, which ranks distances without them.
        with np.errstate(over="ignore", invalid="ignore"):
            keys = self._scaled(self.X_fit_[rows])  # (n', r)
            # Centred on the keys (the weights are translation invariant): far from the
            # origin, |q|^2 + |x|^2 - 2 q.x above three dimensions would lose the distances'
            # precision.
            centre = keys.mean(0) if len(keys) else 0.0
            keys = keys - centre
            qs_all = self._scaled(X) - centre
        xs = tensor(keys)  # (n', r)
        wv1 = tensor(np.column_stack([w[:, None] * values[rows], w]))  # (n', t + 1)
        n_q, n_fit = X.shape[0], self.X_fit_.shape[0]
        out = np.empty((n_q, values.shape[1]), dtype=self.X_fit_.dtype)
        parts, lonely = [], []
        working_memory = get_config()["working_memory"]
        for queries, runs in blocks(qs_all):
            if not runs:
                lonely.append(queries)
                continue
            block_out, empty, attention = support_pool(
                tensor(qs_all[queries]), torch.cat([xs[a:b] for a, b in runs]),
                torch.cat([wv1[a:b] for a, b in runs]).T, self.kernel_,
                return_attention=return_attention, working_memory=working_memory,
            )
            out[queries] = block_out.cpu().numpy()
            lonely.append(queries[empty.cpu().numpy()])
            if return_attention:
                found = np.concatenate([np.arange(a, b) for a, b in runs])
                crow, col, val = (a.cpu().numpy() for a in attention)
                parts.append((np.repeat(queries, np.diff(crow)), rows[found[col]], val))
        lonely = np.concatenate(lonely)
        n_fallback = 0
        if len(lonely):
            result = attention_pool(
                tensor(X[lonely]), tensor(self.X_fit_), tensor(values),
                tensor(getattr(self, "projection_", self.bandwidth_)), self.kernel_,
                log_w=tensor(log_w), return_attention=return_attention,
                exact_zeros=is_classifier(self), working_memory=working_memory,
            )
            out[lonely] = result.out.cpu().numpy()
            n_fallback = result.n_fallback
            if return_attention:
                crow, col, val = (a.cpu().numpy() for a in result.attention)
                parts.append((np.repeat(lonely, np.diff(crow)), col, val))
        attention = None
        if return_attention:
            q_rows, cols, vals = (np.concatenate(p) for p in zip(*parts))
            attention = sp.csr_array((vals, (q_rows, cols)), shape=(n_q, n_fit))
        return PoolResult(torch.from_numpy(out), attention, n_fallback)

    def _neighbour_pool(self, X, values, device, log_w, return_attention, candidates,
                        scale):
        """Attention restricted to each query's candidates, in chunks of queries.

        ``candidates(rows)`` gives, for a slice of query rows, the distances (``scale``
        times the scaled ones), the training rows and the counts per query of their
        candidates (CSR layout), and the sample weight of each pair (None for unit
        weights).
        """
        tensor = self._tensor_maker(device)

        def index(a):
            return torch.as_tensor(a, dtype=torch.long, device=device)

        parts, offset = [], 0
        for rows in gen_batches(X.shape[0], _NEIGHBOUR_CHUNK):
            dist, ind, counts, pair_w = candidates(rows)
            indptr = np.concatenate([[0], np.cumsum(counts)])
            with np.errstate(divide="ignore"):
                pair_log_w = None if pair_w is None else tensor(np.log(pair_w))
            part = neighbour_pool(
                tensor(dist), index(ind), index(indptr), tensor(values), self.kernel_,
                scale=scale, log_w=pair_log_w, return_attention=return_attention,
            )
            parts.append((part, offset))
            offset += len(ind)
        out = torch.cat([p.out for p, _ in parts])
        attention = None
        if return_attention:
            indptr = torch.cat([parts[0][0].attention[0][:1]]
                               + [p.attention[0][1:] + o for p, o in parts])
            attention = (indptr, torch.cat([p.attention[1] for p, _ in parts]),
                         torch.cat([p.attention[2] for p, _ in parts]))
        return PoolResult(out, attention, sum(p.n_fallback for p, _ in parts))

    def _searched_candidates(self, X, rows):
        """Candidates from the fitted search: the k nearest, or those in a compact
        kernel's support (a query with none in reach gets its nearest point)."""
        queries = self._search_space(X[rows])
        with _search_threads(X.shape[0]):
            if self.n_neighbors is not None:
                dist, ind, pair_w = self._k_nearest_units(queries)
                counts = np.full(len(queries), dist.shape[1])
                return dist.ravel(), ind.ravel(), counts, pair_w.ravel()
            dist, ind = self.neighbors_.radius_neighbors(
                queries, radius=self.kernel_.support * self._search_scale(), sort_results=False
            )
        counts = np.array([len(i) for i in ind])
        lonely = np.flatnonzero(counts == 0)
        if len(lonely):
            # No point in reach: the nearest ones, every tie (the pooling keeps those at
            # the least distance and averages them, as the dense engine does).
            with _search_threads(len(lonely)):
                d1, _ = self.neighbors_.kneighbors(queries[lonely], n_neighbors=1)
            with _search_threads(1):  # one query at a time
                for j, q in enumerate(lonely):
                    radius = d1[j, 0] * (1.0 + 1e-9) + np.finfo(np.float64).tiny
                    dq, iq = self.neighbors_.radius_neighbors(queries[q : q + 1],
                                                              radius=radius)
                    dist[q], ind[q] = dq[0], iq[0]
                    counts[q] = len(iq[0])
        dist, ind = np.concatenate(dist), np.concatenate(ind)
        if len(self.neighbor_rows_) < self.X_fit_.shape[0]:
            ind = self.neighbor_rows_[ind]
        unit_weights = bool(np.all(self.sample_weight_ == 1.0))
        return dist, ind, counts, None if unit_weights else self.sample_weight_[ind]

    def _stored_candidates(self, X, rows, *, leave_one_out=False):
        """Candidates from a precomputed distance matrix: every stored entry of the rows
        (all of a dense one), or the nearest holding ``n_neighbors`` units of weight. For
        leave-one-out (X is the training graph) a row's own entry and its entries at
        distance 0 get no weight."""
        block = sp.csr_array(X[rows]) if sp.issparse(X) else None
        if block is None:
            n = X.shape[1]
            dist = np.asarray(X[rows], dtype=np.float64).ravel()  # (b n,)
            counts = np.full(len(dist) // n, n)
            ind = np.tile(np.arange(n), len(counts))  # (b n,)
        else:
            counts = np.diff(block.indptr)
            if np.any(counts == 0):
                first = rows.start + int(np.flatnonzero(counts == 0)[0])
                raise ValueError(
                    f"Row {first} of the precomputed distances stores no neighbour: every "
                    "query needs at least one stored distance."
                )
            dist, ind = block.data.astype(np.float64), block.indices
        w = self.sample_weight_[ind].copy()  # pair weights, same layout as dist
        if leave_one_out:
            # The point leaves with all the mass at its location: itself and every
            # training point at distance 0 from it.
            query = np.repeat(np.arange(rows.start, rows.start + len(counts)), counts)
            w[(ind == query) | (dist == 0)] = 0.0
        if self.n_neighbors is not None and not leave_one_out:
            dist, ind, w, counts = _nearest_units(dist, ind, w, counts, self.n_neighbors,
                                                  rows.start)
        return dist.ravel(), ind.ravel(), counts, w.ravel()

    def _leave_one_out_candidates(self, loo, working_memory):
        """Candidates for the leave-one-out attention of the distinct inputs of ``loo``
        (:mod:`sklearn_nw._leave_one_out`) under a compact kernel: the other inputs inside
        the support, found by a tree, or the nearest other one(s) where none is. Refuses,
        before storing them, more entries of the expanded (n, n) attention than
        ``working_memory`` MiB hold."""
        points = self._search_space(loo.X)  # (G, r)
        positive = np.flatnonzero(loo.weight > 0)
        Tree = KDTree if points.shape[1] <= 15 else BallTree
        tree = Tree(points[positive])
        rows_per_input = np.bincount(loo.inverse, minlength=len(loo.weight))  # (G,)
        budget = int(working_memory * 2**20) // (self.X_fit_.dtype.itemsize + 8)
        stored = 0

        def others(query_rows, radius):
            """Indexed inputs within ``radius`` (one per query) of each query, itself out."""
            ind, dist = tree.query_radius(points[query_rows], r=radius, return_distance=True)
            ind = [positive[i] for i in ind]
            keep = [i != q for i, q in zip(ind, query_rows)]
            return [d[k] for d, k in zip(dist, keep)], [i[k] for i, k in zip(ind, keep)]

        def candidates(rows):
            nonlocal stored
            query_rows = np.arange(rows.start, rows.stop)
            dist, ind = others(query_rows, self.kernel_.support * self._search_scale())
            lonely = np.flatnonzero([len(i) == 0 for i in ind])
            if len(lonely):
                # None in reach: the nearest other input(s), every tie.
                d, i = tree.query(points[query_rows[lonely]], k=min(2, len(positive)))
                itself = positive[i[:, 0]] == query_rows[lonely]
                d1 = np.where(itself, d[:, -1], d[:, 0])  # (l,)
                radius = d1 * (1.0 + 1e-9) + np.finfo(np.float64).tiny
                for j, dq, iq in zip(lonely, *others(query_rows[lonely], radius)):
                    dist[j], ind[j] = dq, iq
            stored += int(sum(rows_per_input[q] * rows_per_input[i].sum()
                              for q, i in zip(query_rows, ind)))
            if stored > budget:
                raise ValueError(
                    f"attention_weights_ would store more than {budget} nonzero weights "
                    f"(the support of {self.kernel_!r} holds many training points at "
                    f"bandwidth {self.bandwidth_.tolist()}), more than scikit-learn's "
                    f"working_memory of {working_memory} MiB. Raise the limit with "
                    "sklearn.config_context(working_memory=...) or use a smaller bandwidth."
                )
            counts = np.array([len(i) for i in ind])
            dist, ind = np.concatenate(dist), np.concatenate(ind)
            return dist, ind, counts, loo.weight[ind]

        return candidates

    def _k_nearest_units(self, queries):
        """The nearest training points holding ``n_neighbors`` units of sample weight.

        Sample weights count as repeated rows: the k nearest of the repeated data are the
        nearest points until their weights add up to k, the last one only in part. Returns
        distances, rows of ``X_fit_`` and the weight each pair keeps, all (b, m).
        """
        k, n_indexed = self.n_neighbors, len(self.neighbor_rows_)
        m = min(k, n_indexed)
        while True:
            dist, ind = self.neighbors_.kneighbors(queries, n_neighbors=m)  # (b, m)
            ind = self.neighbor_rows_[ind]
            w = self.sample_weight_[ind]  # (b, m)
            cumulative = np.cumsum(w, axis=1)
            if m == n_indexed or np.all(cumulative[:, -1] >= k):
                break
            m = min(2 * m, n_indexed)  # fractional weights: look further
        return dist, ind, np.clip(k - (cumulative - w), 0.0, w)
