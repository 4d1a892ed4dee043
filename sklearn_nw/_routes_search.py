"""The routes that restrict each query's attention to its candidates: those a tree or a
brute force search finds (:class:`RadiusRoute`, :class:`KNearestRoute`,
:class:`~sklearn_nw._search.TreeSearch`) and the stored precomputed distances
(:class:`PrecomputedRoute`). Their attention is CSR; the candidates are pooled in chunks of
queries (:func:`~sklearn_nw._routes.pool_candidates`).
"""

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import gen_batches

from ._leave_one_out import distinct_inputs, keep_raw_ties
from ._routes import Route, numpy_attention, pool_candidates, pooled_values
from ._search import TreeSearch, nearest_shares, tie_groups
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
            return self._candidates(keys, search_queries[rows], queries[rows])

        result = pool_candidates(keys, queries.shape[0], candidates, keys.search_scale,
                                 settings)
        return pooled_values(*result, queries.shape[0], keys.X.shape[0])

    def _candidates(self, keys, queries, raw):
        """Distances, keys and counts per query (CSR layout) of the candidates of
        ``queries`` in the search space (``raw`` in the inputs'), and each pair's weight
        (None for unit weights)."""
        raise NotImplementedError


class RadiusRoute(_SearchedRoute):
    """The keys inside a compact kernel's support (a query with none in reach gets its
    nearest key(s), every tie)."""

    name = "radius"

    def __init__(self, keys, index, index_rows):
        super().__init__(keys, index, index_rows)
        self.unit_weights = bool(np.all(keys.sample_weight == 1.0))

    def _candidates(self, keys, queries, raw):
        dist, ind = self.index.within(queries, keys.kernel.support * keys.search_scale)
        counts = np.array([len(i) for i in ind])
        unreached = np.flatnonzero(counts == 0)
        if len(unreached):
            # No key in reach: the nearest ones, every tie of the raw differences (the
            # pooling keeps those at the least distance, given them all, and averages
            # them, as the dense engine does).
            d1, _ = self.index.nearest(queries[unreached], 1)
            radii = d1[:, 0] * (1.0 + 1e-9) + np.finfo(np.float64).tiny
            d_l, i_l = keep_raw_ties(raw[unreached],
                                     *self.index.within(queries[unreached], radii),
                                     keys.X[self.index_rows], keys.metric, keys.dtype)
            for j, q in enumerate(unreached):
                dist[q], ind[q] = d_l[j], i_l[j]
                counts[q] = len(i_l[j])
        dist, ind = np.concatenate(dist), np.concatenate(ind)
        if len(self.index_rows) < keys.X.shape[0]:
            ind = self.index_rows[ind]
        return dist, ind, counts, None if self.unit_weights else keys.sample_weight[ind]


# Of a projection of the points that tells distinct points apart (almost always).
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


class _SharedInputs(NamedTuple):
    """The distinct inputs of a search's points where some points share one (repeated
    rows): k nearest of these, each holding its points' summed weight, hold what the
    points would (ties share in proportion to weight, so the points of one input hold
    its share in proportion to theirs), and lists of inputs stay short where a list of
    points would run through every copy tied at the k-th distance."""

    index: object  # TreeSearch of the distinct inputs
    weight: np.ndarray  # (U,) each input's summed weight
    indptr: np.ndarray  # (U + 1,) each input's points in ``points``
    points: np.ndarray  # (n,) the points, input by input
    point_weight: np.ndarray  # (n,) each point's weight
    input_of: np.ndarray  # (n,) each point's input

    @classmethod
    def of(cls, index, weight):
        """Those of the points of ``index`` (a TreeSearch), of weights ``weight``; None
        where no two points share an input. Points that share one share any function of
        the point computed row by row: where no two of a projection's values are equal
        (one sort), none repeats, and the rows are not sorted."""
        points = index.points
        projection = (points * (1.0 + np.arange(points.shape[1]) * _GOLDEN)).sum(1)
        projection.sort()
        if not (projection[1:] == projection[:-1]).any():
            return None
        inputs, inverse = distinct_inputs(points)
        if len(inputs) == len(index.points):
            return None
        counts = np.bincount(inverse, minlength=len(inputs))
        return cls(TreeSearch(inputs, index.algorithm),
                   np.bincount(inverse, weights=weight, minlength=len(inputs)),
                   np.concatenate([[0], np.cumsum(counts)]),
                   np.argsort(inverse, kind="stable"), weight, inverse)

    def candidates(self, queries, k):
        """Each query's points holding ``k`` units of weight (CSR layout: distances,
        points, counts per query and each pair's weight), from its nearest inputs."""
        dist, ind, w, _ = self.index.nearest_holding(queries, self.weight, k,
                                                     first=min(k + 1, len(self.weight)))
        share = nearest_shares(dist, w, k)  # (b, m): each input's part
        query, at = np.nonzero(share > 0)
        held, share, w = ind[query, at], share[query, at], w[query, at]  # (h,) each
        n_points = np.diff(self.indptr)[held]
        entry = np.repeat(np.arange(len(held)), n_points)  # (p,) each point's input entry
        place = np.arange(len(entry)) - np.repeat(np.cumsum(n_points) - n_points, n_points)
        points = self.points[self.indptr[held][entry] + place]  # (p,)
        pair_w = np.where((share == w)[entry], self.point_weight[points],
                          (share / w)[entry] * self.point_weight[points])
        counts = np.bincount(query, weights=n_points, minlength=len(queries)).astype(np.int64)
        return dist[query, at][entry], points, counts, pair_w


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
        self.inputs = _SharedInputs.of(index, keys.sample_weight[index_rows])

    def _candidates(self, keys, queries, raw):
        k = self.n_neighbors
        if self.inputs is not None:  # keys repeat an input: searched once per input
            dist, ind, counts, pair_w = self.inputs.candidates(queries, k)
            return dist, self.index_rows[ind], counts, pair_w
        dist, ind, w, _ = self.index.nearest_holding(
            queries, keys.sample_weight[self.index_rows], k,
            first=min(k + 1, len(self.index_rows)))
        pair_w = nearest_shares(dist, w, k)  # (b, m)
        counts = np.full(len(queries), dist.shape[1])
        return dist.ravel(), self.index_rows[ind].ravel(), counts, pair_w.ravel()

    def leave_one_out_held_fits(self, keys, queries, values, settings, rows=None):
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
        missing)``. With ``rows`` (b,) (training rows, one per query: its own), only the
        fit without that row where it is held (``e = 1``), where keys repeat inputs."""
        v = np.asarray(values, dtype=np.float64).reshape(len(values), -1)  # (n, t)
        search = keys.search_space(queries)
        # Chunks of queries on the workers, their lists' sums (about 2 k keys, t + 1
        # columns, a few arrays of them) within working_memory.
        step = chunk_rows(len(queries), 48 * (2 * self.n_neighbors + 2) * (v.shape[1] + 1),
                          settings.working_memory, workers=n_workers(settings.device))
        only = None
        if rows is not None and self.inputs is not None:  # each row's place among the keys
            only = np.minimum(np.searchsorted(self.index_rows, rows), len(self.index_rows) - 1)
            only[self.index_rows[only] != rows] = -1  # a row of no weight is no key
        parts = on_workers(
            gen_batches(len(queries), step),
            lambda chunk, _: self._held_fits(keys, search[chunk], v,
                                             None if only is None else only[chunk]),
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

    def _held_fits(self, keys, search, v, only=None):
        """:meth:`leave_one_out_held_fits` of queries ``search`` (b, r) in the search
        space, of values ``v`` (n, t) float64."""
        if self.inputs is not None:
            return self._held_fits_by_input(keys, search, v, only)
        k = self.n_neighbors
        weight = keys.sample_weight[self.index_rows]
        dist, ind, w, _ = self.index.nearest_holding(
            search, weight, k + weight.max(), first=min(k + 2, len(self.index_rows)))
        # Each key's tie (its first place, the weight nearer than it, its weight).
        ties = first, before, group, alone = tie_groups(dist, w)  # (b, m) each
        share = nearest_shares(dist, w, k, ties)  # (b, m): each key's part of the k units
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
        terms_of = np.concatenate([v, ones], axis=2) * (kernel * w)[:, :, None]  # (b, m, t + 1)
        terms = terms_of * inside[:, :, None]
        zero = np.zeros((b, 1, terms.shape[2]))
        nearer = np.concatenate([zero, np.cumsum(terms, axis=1)], axis=1)  # (b, m + 1, t + 1)
        farther = np.concatenate([np.cumsum(terms[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
        slots = np.arange(e)
        sums = nearer[:, slots] + farther[:, slots + 1]  # (b, e, t + 1)
        if alone.all():  # no tie: each key from the first not wholly inside on holds
            # what the slot's key frees, clip(k + w_s - B_i, 0, w_i), if after it.
            span = int((m - a).max(initial=0))
            at = a[:, None] + np.arange(span)  # (b, span)
            listed = at < m
            at = np.minimum(at, m - 1)
            take = lambda x: np.take_along_axis(x, at, axis=1)[:, None, :]  # (b, 1, span)
            freed = np.clip(k + w[:, :e, None] - take(before), 0.0, take(w))  # (b, e, span)
            freed *= listed[:, None, :] & (at[:, None, :] > slots[None, :, None])
            tail = np.concatenate([v, ones], axis=2)[np.arange(b)[:, None], at]
            sums += (freed * take(kernel)) @ tail  # (b, e, t + 1)
        else:
            held_slot = np.arange(e)[None, :] < counts[:, None]  # (b, e)
            slot_terms = terms_of[:, :e] * held_slot[:, :, None]
            _tail_of_ties(sums, k, w, terms_of, (first, before, group), a,
                          np.broadcast_to(slots, (b, e)), w[:, :e] * held_slot, slot_terms)
        lost = ~(sums[:, :, -1] > 0)  # no kernel weight left
        fits = sums[:, :, :-1] / np.where(lost, 1.0, sums[:, :, -1])[:, :, None]
        missing = lost
        held = np.where(np.arange(e)[None, :] < counts[:, None],
                        self.index_rows[ind[:, :e]], -1)  # (b, e)
        return own, fits, held, missing & (held >= 0)


    def _held_fits_by_input(self, keys, search, v, only=None):
        """:meth:`_held_fits` where keys repeat inputs: the lists are of the distinct
        inputs (:class:`_SharedInputs`), each holding its keys' summed weight and sums;
        a held key leaves its input with the others' weight and sums (a key alone at
        its input leaves nothing there). ``only`` (b,): each query's one key (its
        place among the keys) whose fit without it is wanted."""
        inputs, k = self.inputs, self.n_neighbors
        U = len(inputs.weight)
        dist, ind, w, _ = inputs.index.nearest_holding(
            search, inputs.weight, k + inputs.point_weight.max(), first=min(k + 2, U))
        ties = first, before, group, _ = tie_groups(dist, w)  # (b, m) each
        share = nearest_shares(dist, w, k, ties)  # (b, m): each input's part of the k units
        b, m = dist.shape
        with np.errstate(over="ignore"):
            u2 = torch.from_numpy(np.square(dist / keys.search_scale))
        log_k = keys.kernel.log_profile_sq(u2).numpy()  # (b, m)
        top = log_k.max(1, keepdims=True, initial=-np.inf)  # (b, 1)
        kernel = np.exp(log_k - np.where(np.isfinite(top), top, 0.0))  # (b, m)
        # Each input's weighted sums of the values and its weight (U, t + 1).
        point_v = v[self.index_rows]  # (n', t)
        point_terms = np.concatenate([point_v, np.ones((len(point_v), 1))], axis=1) * (
            inputs.point_weight[:, None])  # (n', t + 1)
        input_terms = np.stack([np.bincount(inputs.input_of, weights=column, minlength=U)
                                for column in point_terms.T], axis=1)  # (U, t + 1)
        terms_of = input_terms[ind] * kernel[:, :, None]  # (b, m, t + 1)
        with np.errstate(invalid="ignore"):  # NaN: no kernel weight
            part = share / w  # (b, m)
            own_sums = (part[:, None, :] @ terms_of)[:, 0]  # (b, t + 1)
            own = own_sums[:, :-1] / own_sums[:, -1:]  # (b, t)
        inside = before + group <= k  # (b, m)
        a = inside.sum(1)  # (b,)
        terms = terms_of * inside[:, :, None]
        zero = np.zeros((b, 1, terms.shape[2]))
        nearer = np.concatenate([zero, np.cumsum(terms, axis=1)], axis=1)  # (b, m + 1, t + 1)
        farther = np.concatenate([np.cumsum(terms[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
        if only is None:  # the held keys, input by input, each with its input's place
            query, at = np.nonzero(share > 0)  # (h,)
            n_points = np.diff(inputs.indptr)[ind[query, at]]
            counts = np.bincount(query, weights=n_points, minlength=b).astype(np.int64)
            entry = np.repeat(np.arange(len(query)), n_points)  # (p,)
            offset = (np.arange(len(entry))
                      - np.repeat(np.cumsum(n_points) - n_points, n_points))
            point = inputs.points[inputs.indptr[ind[query, at]][entry] + offset]  # (p,)
            slot = np.arange(len(entry)) - np.repeat(np.cumsum(counts) - counts, counts)
            rows, at = query[entry], at[entry]
        else:  # each query's own key, if its input is held
            found = ((ind == inputs.input_of[only][:, None]) & (share > 0)
                     & (only >= 0)[:, None])  # (b, m)
            rows = np.flatnonzero(found.any(1))
            at, point = found[rows].argmax(1), only[rows]
            slot, counts = np.zeros(len(rows), dtype=np.intp), np.ones(b, dtype=np.int64)
        e = max(1, int(counts.max(initial=0)))
        slot_at = np.zeros((b, e), dtype=np.intp)
        slot_w = np.zeros((b, e))
        held = np.full((b, e), -1)
        slot_at[rows, slot], slot_w[rows, slot] = at, inputs.point_weight[point]
        held[rows, slot] = self.index_rows[point]
        slot_terms = np.zeros((b, e, terms.shape[2]))
        slot_terms[rows, slot] = point_terms[point] * kernel[rows, at][:, None]
        # The inside inputs but the slot's, and what stays at the slot's input if inside
        # (nothing where the key is alone there).
        sums = (np.take_along_axis(nearer, slot_at[:, :, None], axis=1)
                + np.take_along_axis(farther, slot_at[:, :, None] + 1, axis=1))  # (b, e, t + 1)
        slot_input = np.take_along_axis(terms_of, slot_at[:, :, None], axis=1)
        alone_there = np.take_along_axis(w, slot_at, axis=1) == slot_w
        stays = np.take_along_axis(inside, slot_at, axis=1) & ~alone_there  # (b, e)
        sums += np.where(stays[:, :, None], slot_input - slot_terms, 0.0)
        _tail_of_ties(sums, k, w, terms_of, (first, before, group), a, slot_at, slot_w,
                      slot_terms)
        lost = ~(sums[:, :, -1] > 0)  # no kernel weight left
        fits = sums[:, :, :-1] / np.where(lost, 1.0, sums[:, :, -1])[:, :, None]
        return own, fits, held, lost & (held >= 0)

def _tail_of_ties(sums, k, w, terms, ties, a, slot_at, slot_w, slot_terms):
    """Where lists of the k nearest (b, m) hold ties (keys at one distance): add to
    ``sums`` (b, e, t + 1), the sums over the keys wholly inside the k units without each
    slot's part, what the ties from the first not wholly inside on (at ``a`` (b,)) hold
    without it. Without a slot (weight ``slot_w`` (b, e), sums ``slot_terms`` (b, e, t +
    1), of the key at ``slot_at`` (b, e)) a tie holds ``clip(k - B', 0, W')`` units, ``B'``
    the weight nearer than it and ``W'`` its own (the slot's taken out of whichever holds
    it), shared in proportion to its keys' weights ``w`` (b, m): its sums ``terms`` (b, m,
    t + 1) per unit of weight. ``ties``: ``(first, before, group)`` (b, m) of
    :func:`~sklearn_nw._search.tie_groups`."""
    first, before, group = ties
    b, m = w.shape
    starts = first == np.arange(m)  # (b, m): each tie's first key
    tie = np.cumsum(starts, axis=1) - 1  # (b, m): each key's tie
    n_ties = tie[:, -1] + 1  # (b,)
    row, column = np.nonzero(starts)  # (T,) each tie's list and first place
    place = tie[row, column]  # (T,) its place among the list's ties
    g = int(n_ties.max())
    tie_before, tie_weight = np.zeros((b, g)), np.zeros((b, g))
    tie_terms = np.zeros((b, g, terms.shape[2]))
    tie_before[row, place], tie_weight[row, place] = before[row, column], group[row, column]
    tie_terms[row, place] = np.add.reduceat(terms.reshape(b * m, -1), row * m + column,
                                            axis=0)  # (T, t + 1)
    first_tail = np.where(a < m, tie[np.arange(b), np.minimum(a, m - 1)], n_ties)  # (b,)
    span = int((n_ties - first_tail).max(initial=0))
    if not span:
        return
    at = first_tail[:, None] + np.arange(span)  # (b, span)
    listed = at < n_ties[:, None]
    at = np.minimum(at, g - 1)
    take = lambda x: np.take_along_axis(x, at, axis=1)  # (b, span)
    slot_tie = np.take_along_axis(tie, slot_at, axis=1)[:, :, None]  # (b, e, 1)
    slot_weight = slot_w[:, :, None]
    nearer_out = np.where(slot_tie < at[:, None, :], slot_weight, 0.0)  # (b, e, span)
    tie_out = np.where(slot_tie == at[:, None, :], slot_weight, 0.0)
    freed = np.clip(k + nearer_out - take(tie_before)[:, None, :], 0.0,
                    take(tie_weight)[:, None, :] - tie_out) * listed[:, None, :]
    weight_at = take(tie_weight)  # (b, span)
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = np.take_along_axis(tie_terms, at[:, :, None], axis=1) / np.where(
            weight_at > 0, weight_at, 1.0)[:, :, None]  # (b, span, t + 1)
    sums += freed @ unit
    # A slot in a tie of the tail (the first): that tie's sums per unit without it.
    qs, ss = np.nonzero(slot_tie[:, :, 0] == first_tail[:, None])
    if len(qs):
        less = weight_at[qs, 0] - slot_w[qs, ss]
        without = ((tie_terms[qs, first_tail[qs]] - slot_terms[qs, ss])
                   / np.where(less > 0, less, 1.0)[:, None])
        sums[qs, ss] += freed[qs, ss, 0][:, None] * (without - unit[qs, 0])


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
