"""The routes that restrict each query's attention to its candidates: those a tree or a
brute force search finds (:class:`RadiusRoute`, :class:`KNearestRoute`,
:class:`~sklearn_nw._search.TreeSearch`) and the stored precomputed distances
(:class:`PrecomputedRoute`). Their attention is CSR; the candidates are pooled in chunks of
queries (:func:`~sklearn_nw._routes.pool_candidates`).
"""

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import gen_batches

from ._routes import Route, numpy_attention, pool_candidates, pooled_values
from ._search import nearest_shares, tie_groups
from ._workers import chunk_rows, n_workers, on_workers


class _SearchedRoute(Route):
    """Candidates from a search index of the keys of positive weight.

    Parameters
    ----------
    keys : FittedKeys
    index : TreeSearch
        The keys of positive weight, ``index_rows``, in the search space.
    index_rows : ndarray of shape (n_indexed,)
    """

    def __init__(self, keys, index, index_rows):
        super().__init__(keys)
        self.index, self.index_rows = index, index_rows
        self.attention_is_sparse = True

    def pool(self, keys, queries, settings):
        search_queries = keys.search_space(queries)

        def candidates(rows):
            return self._candidates(keys, search_queries[rows])

        result = pool_candidates(keys, queries.shape[0], candidates, keys.search_scale,
                                 settings)
        return pooled_values(*result, queries.shape[0], keys.X.shape[0])

    def _candidates(self, keys, queries):
        """Distances, keys and counts per query (CSR layout) of the candidates of
        ``queries`` in the search space, and each pair's weight (None for unit weights)."""
        raise NotImplementedError


class RadiusRoute(_SearchedRoute):
    """The keys inside a compact kernel's support (a query with none in reach gets its
    nearest key(s), every tie)."""

    name = "radius"

    def __init__(self, keys, index, index_rows):
        super().__init__(keys, index, index_rows)
        self.unit_weights = bool(np.all(keys.sample_weight == 1.0))

    def _candidates(self, keys, queries):
        dist, ind = self.index.within(queries, keys.kernel.support * keys.search_scale)
        counts = np.array([len(i) for i in ind])
        unreached = np.flatnonzero(counts == 0)
        if len(unreached):
            # No key in reach: the nearest ones, every tie (the pooling keeps those at the
            # least distance and averages them, as the dense engine does).
            d1, _ = self.index.nearest(queries[unreached], 1)
            radii = d1[:, 0] * (1.0 + 1e-9) + np.finfo(np.float64).tiny
            d_l, i_l = self.index.within(queries[unreached], radii)
            for j, q in enumerate(unreached):
                dist[q], ind[q] = d_l[j], i_l[j]
                counts[q] = len(i_l[j])
        dist, ind = np.concatenate(dist), np.concatenate(ind)
        if len(self.index_rows) < keys.X.shape[0]:
            ind = self.index_rows[ind]
        return dist, ind, counts, None if self.unit_weights else keys.sample_weight[ind]


class KNearestRoute(_SearchedRoute):
    """The nearest keys holding ``n_neighbors`` units of sample weight.

    Sample weights count as repeated rows: the k nearest of the repeated data are the
    nearest keys until their weights add up to k, the last one only in part; keys tied
    in distance with it share that part in proportion to their weights
    (:func:`~sklearn_nw._search.nearest_shares`).
    """

    name = "k_nearest"

    def __init__(self, keys, index, index_rows, n_neighbors):
        super().__init__(keys, index, index_rows)
        self.n_neighbors = n_neighbors

    def _candidates(self, keys, queries):
        k = self.n_neighbors
        dist, ind, w, _ = self.index.nearest_holding(
            queries, keys.sample_weight[self.index_rows], k,
            first=min(k + 1, len(self.index_rows)))
        pair_w = nearest_shares(dist, w, k)  # (b, m)
        counts = np.full(len(queries), dist.shape[1])
        return dist.ravel(), self.index_rows[ind].ravel(), counts, pair_w.ravel()

    def leave_one_out_held_fits(self, keys, queries, values, settings):
        """The fits of ``values`` (n, t) at ``queries`` without each key that holds part
        of their k units, as refits without it find them: float64 fits (b, e, t)
        without the keys ``held`` (b, e) (training rows, -1 past a query's count) and
        which of them have no kernel weight left (b, e: the caller refits those, whose
        fallback is the nearest other key). A key outside a query's k units moves
        nothing. Also each query's own fit (b, t) with every key (NaN where no key of
        the k units has kernel weight: the route's fallback).

        Without key j (weight ``w_j``) the nearest others holding k units are the
        query's nearest keys holding ``k + w_j``, j taken out: the keys at one distance
        (a tie) hold ``w_i`` times ``clip((k - B) / T, 0, 1)``, ``B`` the weight nearer
        than them and ``T`` theirs, j's taken out of whichever holds it
        (:func:`~sklearn_nw._search.nearest_shares`), so one search holding k plus the
        largest weight serves every j; each fit is a normalized sum over that list: the
        keys wholly inside, less j, from sums before and after it, and the few keys from
        the boundary on with what j frees (O(k) per query). Returns ``(own, fits, held,
        missing)``."""
        v = np.asarray(values, dtype=np.float64).reshape(len(values), -1)  # (n, t)
        search = keys.search_space(queries)
        # Chunks of queries on the workers, their lists' sums (about 2 k keys, t + 1
        # columns, a few arrays of them) within working_memory.
        step = chunk_rows(len(queries), 48 * (2 * self.n_neighbors + 2) * (v.shape[1] + 1),
                          settings.working_memory, workers=n_workers(settings.device))
        parts = on_workers(gen_batches(len(queries), step),
                           lambda rows, _: self._held_fits(keys, search[rows], v),
                           settings.device)
        e = max(part[1].shape[1] for part in parts)

        def padded(a, fill):
            return np.concatenate([np.pad(p, [(0, 0), (0, e - p.shape[1])]
                                          + [(0, 0)] * (p.ndim - 2), constant_values=fill)
                                   for p in a])

        return (np.concatenate([part[0] for part in parts]),
                padded([part[1] for part in parts], 0.0),
                padded([part[2] for part in parts], -1),
                padded([part[3] for part in parts], False))

    def _held_fits(self, keys, search, v):
        """:meth:`leave_one_out_held_fits` of queries ``search`` (b, r) in the search
        space, of values ``v`` (n, t) float64."""
        k = self.n_neighbors
        weight = keys.sample_weight[self.index_rows]
        dist, ind, w, _ = self.index.nearest_holding(
            search, weight, k + weight.max(), first=min(k + 2, len(self.index_rows)))
        # Each key's tie (its first place, the weight nearer than it, its weight).
        first, before, group, alone = tie_groups(dist, w)  # (b, m) each
        share = nearest_shares(dist, w, k)  # (b, m): each key's part of the k units
        counts = (share > 0).sum(1)  # (b,): the held keys, the first of each list
        b, m = dist.shape
        e = max(1, int(counts.max(initial=0)))
        with np.errstate(over="ignore"):
            u2 = torch.from_numpy(np.square(dist / keys.search_scale))
        log_k = keys.kernel.log_profile_sq(u2).numpy()  # (b, m)
        v = v[self.index_rows[ind]]  # (b, m, t): the listed keys' values
        # The kernel's weights relative to each list's largest (0 where it has none).
        top = log_k.max(1, keepdims=True, initial=-np.inf)  # (b, 1)
        kernel = np.exp(log_k - np.where(np.isfinite(top), top, 0.0))  # (b, m)
        ones = np.ones((b, m, 1))
        weighted = kernel * share  # (b, m)
        with np.errstate(invalid="ignore"):  # NaN: no kernel weight
            own = (weighted[:, None, :] @ v)[:, 0] / weighted.sum(1)[:, None]  # (b, t)
        # The keys wholly inside the k units (a prefix of a keys per list) keep their
        # weight without any other one: sums before and after each slot, of positive
        # terms (no difference of sums loses the digits of a key that weighs most).
        inside = before + group <= k  # (b, m)
        a = inside.sum(1)  # (b,)
        terms = np.concatenate([v, ones], axis=2) * (kernel * w * inside)[:, :, None]
        zero = np.zeros((b, 1, terms.shape[2]))
        nearer = np.concatenate([zero, np.cumsum(terms, axis=1)], axis=1)  # (b, m + 1, t + 1)
        farther = np.concatenate([np.cumsum(terms[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
        slots = np.arange(e)
        sums = nearer[:, slots] + farther[:, slots + 1]  # (b, e, t + 1)
        # The keys from the first not wholly inside on, the slot's key out: the weight
        # nearer than a key's tie loses the slot's if it lies nearer, the tie's own if
        # it holds it.
        span = int((m - a).max(initial=0))
        at = a[:, None] + np.arange(span)  # (b, span)
        listed = at < m
        at = np.minimum(at, m - 1)
        take = lambda x: np.take_along_axis(x, at, axis=1)[:, None, :]  # (b, 1, span)
        slot_w = w[:, :e, None]  # (b, e, 1)
        after = at[:, None, :] > slots[None, :, None]  # (b, e, span)
        if alone.all():  # no tie: a key after the slot's holds what it frees
            freed = np.clip(k + slot_w - take(before), 0.0, take(w)) * after
        else:  # a tie shares what is left of k, the slot's key out of it
            nearer_out = np.where(slots[None, :, None] < take(first), slot_w, 0.0)
            tie_out = np.where(first[:, :e, None] == take(first), slot_w, 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                part = np.clip((k - (take(before) - nearer_out)) / (take(group) - tie_out),
                               0.0, 1.0)
            freed = np.where(take(alone), np.clip(k + nearer_out - take(before), 0.0,
                                                  take(w)),
                             take(w) * np.where(np.isfinite(part), part, 0.0))
            freed *= after | ~take(alone)  # (a key of a tie before the slot's shares too)
            freed *= at[:, None, :] != slots[None, :, None]
        freed *= listed[:, None, :]
        tail = np.concatenate([v, ones], axis=2)[np.arange(b)[:, None], at]  # (b, span, t+1)
        sums += (freed * take(kernel)) @ tail
        lost = ~(sums[:, :, -1] > 0)  # no kernel weight left
        fits = sums[:, :, :-1] / np.where(lost, 1.0, sums[:, :, -1])[:, :, None]
        missing = lost
        held = np.where(np.arange(e)[None, :] < counts[:, None],
                        self.index_rows[ind[:, :e]], -1)  # (b, e)
        return own, fits, held, missing & (held >= 0)


class PrecomputedRoute(Route):
    """Each query row's stored distances (``metric="precomputed"``: the keys' X is the
    training distances), or the nearest of them holding ``n_neighbors`` units of weight.

    Parameters
    ----------
    keys : FittedKeys
    n_neighbors : int or None
    """

    name = "precomputed"

    def __init__(self, keys, n_neighbors):
        super().__init__(keys)
        self.n_neighbors = n_neighbors
        self.attention_is_sparse = self.leave_one_out_is_sparse = True

    def pool(self, keys, queries, settings):

        def candidates(rows):
            return self._stored_candidates(keys, queries, rows)

        result = pool_candidates(keys, queries.shape[0], candidates, keys.search_scale,
                                 settings)
        return pooled_values(*result, queries.shape[0], keys.X.shape[0])

    def gradient_weights(self, keys, queries, settings):
        raise NotImplementedError(
            "Marginal effects are derivatives with respect to the features; "
            "metric='precomputed' has distances, not features.")

    def leave_one_out_attention(self, keys, settings, estimator_name):
        """The stored entries of the training distances, each row left out with its own
        entry and its entries at distance 0."""
        n = keys.X.shape[0]
        if np.count_nonzero(keys.sample_weight) < 2:
            raise ValueError(
                "attention_weights_ needs n_samples >= 2 with positive weight for "
                f"leave-one-out; got n_samples={n}."
            )

        def candidates(rows):
            return self._stored_candidates(keys, keys.X, rows, leave_one_out=True)

        _, attention, n_fallback = pool_candidates(
            keys, n, candidates, keys.search_scale, settings,
            values=np.zeros((n, 0), dtype=keys.dtype))
        return numpy_attention(attention, n, n), n_fallback, 0

    def _stored_candidates(self, keys, X, rows, *, leave_one_out=False):
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
                    f"Row {first} of the precomputed distances stores no neighbor: every "
                    "query needs at least one stored distance."
                )
            dist, ind = block.data.astype(np.float64), block.indices
        w = keys.sample_weight[ind].copy()  # pair weights, same layout as dist
        if leave_one_out:
            # The point leaves with all the mass at its location: itself and every
            # training point at distance 0 from it.
            query = np.repeat(np.arange(rows.start, rows.start + len(counts)), counts)
            w[(ind == query) | (dist == 0)] = 0.0
        if self.n_neighbors is not None and not leave_one_out:
            dist, ind, w, counts = _nearest_units(dist, ind, w, counts, self.n_neighbors,
                                                  rows.start)
        return dist.ravel(), ind.ravel(), counts, w.ravel()


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
    order = np.lexsort((padded_ind, padded))  # ties in the training rows' order
    padded, padded_ind, padded_w = (np.take_along_axis(a, order, axis=1)
                                    for a in (padded, padded_ind, padded_w))
    cumulative = np.cumsum(padded_w, axis=1)
    short = np.flatnonzero(cumulative[:, -1] < k)
    if len(short):
        raise ValueError(
            f"n_neighbors={k} needs k units of sample weight among each row's stored "
            f"distances; row {first_row + int(short[0])} of the precomputed graph holds "
            f"{cumulative[short[0], -1]:g}. Store more neighbors per row or lower n_neighbors."
        )
    keep = nearest_shares(padded, padded_w, k)  # (b, width)
    m = int(np.max(width - np.argmax(keep[:, ::-1] > 0, axis=1)))  # past the last kept
    padded, padded_ind, keep = padded[:, :m], padded_ind[:, :m], keep[:, :m]
    padded = np.where(np.isfinite(padded), padded, 0.0)  # padding: weight 0 at distance 0
    return padded, padded_ind, keep, np.full(b, m)
