"""The adaptive route: nearest-neighbor bandwidths (:mod:`sklearn_nw._adaptive`).

Each query's distance to its k-th nearest key comes from a tree or a brute force search
(:class:`~sklearn_nw._search.TreeSearch`); then every key of positive weight, the distances
divided by the query's bandwidth (balloon) or by each key's (sample-point). With
categorical features the neighbors, distances and bandwidths are the continuous
features'; the categories' Gaussian factor multiplies the weights, whatever the
bandwidth (:mod:`sklearn_nw._categorical`).
"""

import contextlib

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import gen_batches

from ._adaptive import LeaveOneOutNeighbors, kth_distances
from ._engine import exp_
from ._engine_candidates import dense_pool, dense_sums
from ._grids import categorical_logits
from ._routes import LeaveOneOutMoves, PooledWithVariance, Route, pooled_values, torch_dtype
from ._search import exact_distances, paired_distances
from ._uncertainty import (
    leave_one_out_own_fits,
    leave_one_out_sums,
    sum_of_largest,
    weight_unresolved,
)
from ._workers import chunk_rows


class AdaptiveRoute(Route):
    """Every key of positive weight under an adaptive bandwidth.

    Parameters
    ----------
    keys : FittedKeys
    adaptive : Adaptive
        The bandwidth's kind, k and c.
    index : TreeSearch
        The keys of positive weight, ``index_rows``, in the search space (its continuous
        coordinates, ``keys.continuous_coords``).
    index_rows : ndarray of shape (n_indexed,)
    """

    name = "adaptive"

    def __init__(self, keys, adaptive, index, index_rows):
        super().__init__(keys)
        self.adaptive, self.index, self.index_rows = adaptive, index, index_rows
        if keys.sample_weight.sum() < adaptive.n_neighbors * (1 - 1e-9):
            raise ValueError(
                f"An adaptive bandwidth with n_neighbors={adaptive.n_neighbors} needs k "
                f"units of sample weight; there are only {keys.sample_weight.sum():g} "
                f"(n_samples={keys.X.shape[0]}). Lower n_neighbors."
            )
        self.r = keys.continuous_coords
        self.keys_weight = keys.sample_weight[index_rows]  # (n',)
        # The keys of positive weight in the search space (their continuous coordinates).
        self.index_points = keys.search_space(keys.X[index_rows])[:, : self.r]
        # The keys' categorical coordinates in the kernel's unit (divided by their scales).
        self.categories = (None if self.r == keys.n_coords
                           else keys.scaled(keys.X[index_rows])[:, self.r:])
        if adaptive.kind == "sample_point":
            # Each key's distance to its k-th nearest at other locations, and bandwidth.
            self.key_distance = kth_distances(
                index, keys.sample_weight[index_rows], keys.search_space(keys.X)[:, :self.r],
                adaptive.n_neighbors, leave_out_location=True)  # (n,)
            self.key_bandwidth = adaptive.scale * self.key_distance
        # Whether leave_one_out_block_moves gives the moves: Nadaraya-Watson under a
        # sample-point bandwidth, keys of one weight, float64.
        self.leave_one_out_blocks = bool(
            adaptive.kind == "sample_point" and not keys.degree
            and np.ptp(self.keys_weight) == 0 and keys.dtype == np.float64)

    def pool(self, keys, queries, settings):
        """Each query against every key of positive weight, the distances divided by the
        query's bandwidth ``c d_k(q)`` (balloon) or each key's (sample-point, whose
        weights carry ``h_i^(-r)``), in chunks of queries within ``working_memory``."""
        outs, attentions, n_fallback = [], [], 0
        for rows, part in self._pool_chunks(keys, queries, settings.device,
                                            settings.working_memory,
                                            settings.return_attention):
            outs.append(part.out)
            n_fallback += part.n_fallback
            if settings.return_attention:
                # The keys of positive weight are the attention's columns.
                block = np.zeros((rows.stop - rows.start, keys.X.shape[0]), dtype=keys.dtype)
                block[:, self.index_rows] = part.attention.cpu().numpy()
                attentions.append(sp.csr_array(block) if keys.kernel.is_compact else block)
        attention = None
        if settings.return_attention:
            attention = (sp.vstack(attentions, format="csr") if keys.kernel.is_compact
                         else torch.from_numpy(np.concatenate(attentions)))
        n_q = queries.shape[0]
        return pooled_values(torch.cat(outs), attention, n_fallback, n_q, keys.X.shape[0])

    def pool_with_variance(self, keys, queries, variance, *, device="cpu",
                           working_memory=1024):
        """The predictions at ``queries`` (n_q, t) and ``sum_i l_i**2 s_i**2`` (n_q, t)
        for the targets' variances ``variance`` (n, t), ``l`` the attention: each chunk's
        attention squared (in float64) against the variances, no attention matrix
        formed. A :class:`~sklearn_nw._routes.PooledWithVariance`."""
        s2 = torch.as_tensor(np.asarray(variance, dtype=np.float64)[self.index_rows],
                             device=device)  # (n', t)
        outs, variances, n_fallback = [], [], 0
        for _, part in self._pool_chunks(keys, queries, device, working_memory, True):
            outs.append(part.out.cpu().numpy().astype(np.float64, copy=False))
            weights = part.attention.to(torch.float64)  # (b, n'), the engine's own or a copy
            variances.append((weights.mul_(weights) @ s2).cpu().numpy())
            n_fallback += part.n_fallback
        return PooledWithVariance(np.concatenate(outs), np.concatenate(variances), n_fallback)

    def in_sample_with_leverage(self, keys, *, device="cpu", working_memory=1024):
        """The in-sample fits (n, t) of the keys and each key's weight in its own fit (n,)
        (0 for the keys of weight 0, in no fit), from each chunk's attention, no
        attention matrix formed; float64 numpy."""
        n = keys.X.shape[0]
        place = np.full(n, -1)
        place[self.index_rows] = np.arange(len(self.index_rows))  # each key's column
        outs, leverage = [], np.zeros(n)
        for rows, part in self._pool_chunks(keys, keys.X, device, working_memory, True):
            outs.append(part.out.cpu().numpy().astype(np.float64, copy=False))
            own = place[rows]  # (b,)
            held = np.flatnonzero(own >= 0)
            leverage[rows.start + held] = part.attention[
                torch.as_tensor(held), torch.as_tensor(own[held])].double().cpu().numpy()
        return np.concatenate(outs), leverage

    def _pool_chunks(self, keys, queries, device, working_memory, return_attention):
        """The queries' pooling over the keys of positive weight in chunks within
        ``working_memory``: ``(rows, part)`` per chunk, ``rows`` a slice of the queries
        and ``part`` a :class:`~sklearn_nw._engine.PoolResult` (attention (b, n') on the
        keys of positive weight, if asked for)."""
        search_queries = keys.search_space(queries)[:, : self.r]
        h = (self._query_bandwidths(search_queries) if self.adaptive.kind == "balloon"
             else self._key_bandwidths())
        # Per query a row of distances, logits and weights (and of the attention, and
        # of the categories' distances and their sum with the others').
        row_bytes = len(self.index_rows) * keys.dtype.itemsize * (
            4 + return_attention + 2 * (self.categories is not None))
        n_q = queries.shape[0]
        values = keys.values[self.index_rows]
        for rows in gen_batches(n_q, chunk_rows(n_q, row_bytes, working_memory)):
            yield rows, self._pool_rows(keys, queries[rows], search_queries[rows],
                                        h[rows] if self.adaptive.kind == "balloon" else h,
                                        values, device, return_attention)

    def _query_bandwidths(self, search_queries, more=0.0):
        """The balloon's bandwidths ``c d_k(q)`` (b,) of queries in the search space (at
        least the smallest float: ``d_k = 0`` attends to distance 0 alone); with
        ``more``, those of a fit without a point of that weight within ``d_k(q)``."""
        d_k = kth_distances(self.index, self.keys_weight, search_queries,
                            self.adaptive.n_neighbors, more=more)
        return np.maximum(self.adaptive.scale * d_k, np.finfo(np.float64).tiny)

    def _key_bandwidths(self, more=0.0, columns=None):
        """The sample-point bandwidths ``h_i`` (n',) of the keys of positive weight
        (``columns`` of them), at least the smallest float; with ``more``, those each
        would have without a point of that weight at another location within its
        ``d_k``."""
        columns = slice(None) if columns is None else columns
        if not more:
            h = self.key_bandwidth[self.index_rows][columns]
        else:
            h = self.adaptive.scale * kth_distances(
                self.index, self.keys_weight, self.index_points[columns],
                self.adaptive.n_neighbors, leave_out_location=True, more=more)
        return np.maximum(h, np.finfo(np.float64).tiny)

    def _pool_rows(self, keys, queries, search_queries, h, values, device, return_attention):
        """:func:`~sklearn_nw._engine_candidates.dense_pool` of a block of queries over
        the keys of positive weight at the bandwidths ``h``: per query (b,) for the
        balloon, else per key (n')."""
        r = self.r
        weight = self.keys_weight
        dist = self.index.distances(search_queries)  # (b, n')
        with np.errstate(over="ignore"):  # h = tiny: d_k = 0, only distance 0 counts
            if self.adaptive.kind == "balloon":
                dist /= h[:, None]
            else:
                dist /= h
                # w_i h_i^(-r), relative to the smallest h (no overflow at many coordinates).
                weight = weight * (h.min() / h) ** r
        if r < keys.n_coords:  # with the categories' distances (in the kernel's unit)
            dist = np.hypot(dist, exact_distances(
                torch.as_tensor(keys.scaled(queries)[:, r:]),
                torch.as_tensor(self.categories)).numpy())
        tensor = lambda a: keys.tensor(a, device)
        return dense_pool(tensor(dist), tensor(values), keys.kernel, log_w=tensor(np.log(weight)),
                          return_attention=return_attention, exact_zeros=keys.exact_zeros)

    def leave_one_out_fits(self, keys, queries, settings, values=None):
        """The fits at ``queries`` without each training row, as refits without it at
        the same k, c and metric: ``(fits, missing)``, (b, n, t) float64 of ``values``
        (n, t) (the keys' own by default) and (b, n) bool where the weight left is below
        what the dtype resolves (NaN there: the caller refits those).

        Without row j (weight ``w_j``) the attention is renormalized without it, and a
        bandwidth whose k-th neighbor distance counts j moves out to where the others
        hold ``k`` units (:func:`~sklearn_nw._adaptive.kth_distances` with ``more=w_j``):

        - balloon: the query's own, if j lies within its ``d_k(q)``: the fits without the
          rows inside are the attention at the wider bandwidth without them, one pass per
          weight among them (one for unit weights);
        - sample-point: each key's whose ``d_k`` holds j at another location (``R_j``):
          with ``e_i`` the keys' weights at the query and ``e_i^+`` at their wider
          bandwidths, the fit is ``(N - e_j v_j + sum_{i in R_j} (e_i^+ - e_i) v_i) / (D -
          e_j + sum_{i in R_j} (e_i^+ - e_i))``, ``N, D`` the sums over every key.

        A row of weight 0 moves nothing: its columns hold the query's own fit."""
        n = keys.X.shape[0]
        v = np.asarray(keys.values if values is None else values,
                       dtype=np.float64).reshape(n, -1)  # (n, t)
        v_keys = v[self.index_rows]  # (n', t)
        search_queries = keys.search_space(queries)[:, : self.r]
        plans = None if self.adaptive.kind == "balloon" else self._held_wider_keys()
        fits = np.empty((len(queries), n, v.shape[1]))
        missing = np.zeros((len(queries), n), dtype=bool)
        zero = np.setdiff1d(np.arange(n), self.index_rows)  # rows of weight 0
        row_bytes = n * 8 * (8 + 3 * v.shape[1])
        for rows in gen_batches(len(queries), chunk_rows(len(queries), row_bytes,
                                                         settings.working_memory)):
            if plans is None:
                own, sums, others = self._balloon_without_each(
                    keys, queries[rows], search_queries[rows], v_keys, settings.device)
            else:
                own, sums, others = self._sample_point_without_each(
                    keys, queries[rows], search_queries[rows], v_keys, settings.device,
                    plans)
            lost = weight_unresolved(others, keys.dtype)  # (b, n')
            others[lost] = 1.0
            sums /= others[:, :, None]
            sums[lost] = np.nan
            if not len(zero):  # every row a key, in order
                fits[rows], missing[rows] = sums, lost
                continue
            block = fits[rows]  # (b, n, t), a view
            block[:, zero] = own[:, None, :]  # rows of weight 0: the query's own fit
            block[:, self.index_rows] = sums
            missing[rows][:, self.index_rows] = lost
        return fits, missing

    def leave_one_out_moves(self, keys, queries, *, device="cpu", working_memory=1024):
        """How the balloon's Nadaraya-Watson fits at ``queries`` move without each key, as
        refits without it (:meth:`leave_one_out_fits`), for the jackknife+ and the
        conformal sets: a :class:`~sklearn_nw._routes.LeaveOneOutMoves`, from two dense
        passes (at ``d_k(q)`` and at the wider ``d_k`` of a fit without a key within it)
        and no (b, n) matrix of fits.

        A key beyond ``d_k(q)`` leaves the bandwidth as it is and moves the fit by
        ``a_j (f - v_j) / (1 - a_j)``, at most ``A spread / (1 - A)`` with ``A`` the
        attention of a key at ``d_k(q)`` (a decreasing profile, the keys of one weight);
        each of the about k keys within it moves the fit to the wider attention's without
        it, computed here. Queries where ``A`` or a key's wider attention may reach 1/2,
        or without kernel mass, are left to the attention (``rest``). None for the
        sample-point bandwidth, local polynomials, other kernels, categorical features,
        keys of several weights and float32 fits."""
        weights = np.unique(self.keys_weight)
        if (self.adaptive.kind != "balloon" or keys.degree or not keys.kernel.decreasing
                or self.categories is not None or len(weights) != 1
                or keys.dtype != np.float64):
            return None
        search = keys.search_space(queries)[:, : self.r]  # (n_q, r)
        k, c = self.adaptive.n_neighbors, self.adaptive.scale
        tiny = np.finfo(np.float64).tiny
        d_k = kth_distances(self.index, self.keys_weight, search, k)  # (n_q,)
        h = np.maximum(c * d_k, tiny)
        wide = self._query_bandwidths(search, more=weights[0])  # (n_q,)
        v = keys.values[self.index_rows].astype(np.float64)  # (n', t)
        profile = lambda d, hh: np.exp(keys.kernel.log_profile_sq(
            torch.as_tensor((d / hh) ** 2)).numpy())
        n_q, t = len(queries), v.shape[1]
        fits, wide_fits = np.empty((n_q, t)), np.empty((n_q, t))
        den, wide_den = np.empty(n_q), np.empty(n_q)
        tensor = lambda a: torch.as_tensor(a, device=device)
        # The two passes, in chunks of queries (a row of distances and of weights each).
        row_bytes = 8 * 4 * len(self.index_rows)  # (as the predictions' chunks)
        for rows in gen_batches(n_q, chunk_rows(n_q, row_bytes, working_memory)):
            dist = tensor(self.index.distances(search[rows]))  # (b, n')
            for out, sums, bandwidth in ((fits, den, h), (wide_fits, wide_den, wide)):
                # The squared distances in units of h, then of the wider bandwidth, as
                # the predictions and refits have them (a key at exactly the bandwidth
                # is in a compact kernel's support: not one rounded past it).
                d2 = (dist / tensor(bandwidth[rows])[:, None]).square_()  # (b, n')
                _, d, f = dense_sums(d2, tensor(v), keys.kernel, exact_zeros=keys.exact_zeros)
                out[rows], sums[rows] = f.cpu().numpy(), d.cpu().numpy()
        floor = np.sqrt(tiny)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            largest = profile(d_k, h) / den  # (n_q,) a key at d_k(q), or beyond
        # The keys within d_k(q): their fits without them at the wider bandwidth.
        inside = self._inside(search, d_k)
        counts = [len(j) for j in inside]
        pair_query = np.repeat(np.arange(n_q), counts)  # (m,)
        pair_key = np.concatenate(list(inside)).astype(np.intp)  # (m,)
        d_pair = paired_distances(search[pair_query], self.index_points[pair_key])  # (m,)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            a = profile(d_pair, wide[pair_query]) / wide_den[pair_query]  # (m,)
        pair_moves = ((wide_fits[pair_query] - a[:, None] * v[pair_key]) / (1 - a[:, None])
                      - fits[pair_query])  # (m, t)
        rest = ~((den > floor) & (wide_den > floor) & (largest < 0.5))
        rest[pair_query[~(a < 0.5)]] = True
        spread = np.maximum(fits - v.min(0), v.max(0) - fits)  # (n_q, t)
        share = np.where(rest, 0.0, largest)[:, None]
        bound = np.where(rest[:, None], np.inf, share * spread / (1 - share))
        np.maximum.at(bound, pair_query, np.abs(pair_moves))
        # Each pair's place among a query's keys, to find the pairs among any keys asked.
        pairs = sp.csr_array((np.arange(1, len(pair_key) + 1), pair_key,
                              np.concatenate([[0], np.cumsum(counts)])),
                             shape=(n_q, len(self.index_rows)))
        column = np.full(keys.X.shape[0], -1)
        column[self.index_rows] = np.arange(len(self.index_rows))

        def moves(rows, columns):
            at = column[columns]  # (m,) or (b, m) among the keys of positive weight
            if at.ndim == 1:
                d = exact_distances(torch.as_tensor(search[rows]),
                                    torch.as_tensor(self.index_points[at])).numpy()  # (b, m)
            else:  # each query its own keys
                d = paired_distances(search[rows][:, None], self.index_points[at])
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                a = (profile(d, h[rows][:, None]) / den[rows][:, None])[:, :, None]
            v_at = v[at] if at.ndim == 2 else v[at][None]  # (b | 1, m, t)
            out = a * (fits[rows, None, :] - v_at) / (1 - a)  # (b, m, t)
            held = pairs[rows][np.arange(len(rows))[:, None], np.broadcast_to(
                at, out.shape[:2])].toarray()  # (b, m): 1 + the pair, 0 for none
            out[held > 0] = pair_moves[held[held > 0] - 1]
            return out

        return LeaveOneOutMoves(fits, bound, rest, moves)

    def leave_one_out_block_moves(self, keys, queries):
        """How the sample-point fits at a block of ``queries`` move without each key, as
        refits without it (:meth:`leave_one_out_fits`), for the jackknife+: a
        :class:`~sklearn_nw._routes.LeaveOneOutMoves` whose ``moves`` come from the
        block's own pass (it holds the changes ``e_i^+ - e_i`` of the keys' weights at
        their wider bandwidths, (b, m)), not from every fit without every key.

        Without key j the fit moves by ``(-a_j (v_j - f) + sum_{i in R_j} d_i (v_i - f))
        / (1 - a_j + sum_{i in R_j} d_i)``, ``a`` the attention, ``d = e^+ - e`` in its
        unit and ``R_j`` the keys whose ``d_k`` holds j (at most ``K`` of them): at most
        ``(max_j a_j |v_j - f| + the K largest |d_i| |v_i - f|) / (1 - T)``, ``T =
        max_j a_j +`` the K largest ``|d_i|``. Queries where ``T`` may reach 0.9 (the
        weight left ``1 - a_j + ...``, taken as it comes, would lose more than a digit
        to the cancellation), or without kernel mass, are left to
        :meth:`leave_one_out_fits` (``rest``). None for the balloon, local polynomials,
        keys of several weights and float32 fits (``leave_one_out_blocks``)."""
        if not self.leave_one_out_blocks:
            return None
        v = keys.values[self.index_rows].astype(np.float64)  # (n', t)
        search = keys.search_space(queries)[:, : self.r]  # (b, r)
        dist, categories, top, attention, total, empty = self._key_weights(keys, queries,
                                                                           search)
        attention /= total  # (b, n')
        fits = attention @ v  # (b, t)
        plans = self._held_wider_keys()  # one weight: at most one plan, every key removed
        if plans:
            _, columns, moved, wider = plans[0]
            change = self._wider_weights(keys, dist, categories, top, total, columns,
                                         wider)  # (b, m)
            every = len(columns) == attention.shape[1]
            change -= attention if every else attention[:, columns]
            most = int(np.diff(moved.indptr).max())  # the largest R_j
        else:  # no key's bandwidth moves without another
            columns, moved = np.zeros(0, np.intp), sp.csr_array((len(v), 0))
            change, most, every = np.zeros((len(queries), 0)), 0, False
        size = np.abs(change)  # (b, m)
        reach = attention.max(1) + sum_of_largest(size, most)  # (b,) T
        rest = empty | ~(reach < 0.9)
        bound = np.empty_like(fits)  # (b, t)
        for t in range(v.shape[1]):
            off = np.abs(v[:, t] - fits[:, t, None])  # (b, n')
            own = np.multiply(attention, off).max(1)  # (b,) max_j a_j |v_j - f|
            off = off if every else off[:, columns]
            with np.errstate(divide="ignore", invalid="ignore"):
                bound[:, t] = (own + sum_of_largest(np.multiply(size, off, out=off), most)) / (
                    1 - reach)
        bound[rest] = np.inf
        del size
        column = np.full(keys.X.shape[0], -1)
        column[self.index_rows] = np.arange(len(self.index_rows))
        v_moved = v[columns]  # (m, t)

        def moves(rows, keys_asked):
            if np.ndim(keys_asked) == 2:  # each query its own: the moves on their union
                held = np.zeros(len(column), dtype=bool)
                held[keys_asked] = True
                place = np.cumsum(held) - 1  # (n,) each key's place in the union
                return np.take_along_axis(moves(rows, np.flatnonzero(held)),
                                          place[keys_asked][:, :, None], 1)
            at = column[keys_asked]  # (m',) among the keys of positive weight
            d, a, f = change[rows], attention[rows][:, at], fits[rows]  # (b', m), (b', t)
            # sum_{i in R_j} d_i and sum_{i in R_j} d_i (v_i - f), in one product.
            pulls = np.concatenate([d] + [d * (v_moved[:, t] - f[:, t, None])
                                          for t in range(v.shape[1])])  # ((1 + t) b', m)
            sums = (moved[at] @ np.ascontiguousarray(pulls.T)).T  # ((1 + t) b', m')
            shift = sums[: len(rows)]  # (b', m')
            out = np.empty((len(rows), len(at), v.shape[1]))
            for t in range(v.shape[1]):
                pulled = sums[(1 + t) * len(rows) : (2 + t) * len(rows)]  # (b', m')
                out[:, :, t] = (pulled - a * (v[at, t] - f[:, t, None])) / (1 - a + shift)
            return out

        return LeaveOneOutMoves(fits, bound, rest, moves)

    def leave_one_out_own_fits(self, keys, settings, values=None):
        """Each training row's fit at its own input without it, as a refit without it
        (the diagonal of :meth:`leave_one_out_fits` at the training inputs, without its
        other entries): ``(fits, missing)``, (n, t) and (n,)."""
        n = keys.X.shape[0]
        v = np.asarray(keys.values if values is None else values,
                       dtype=np.float64).reshape(n, -1)  # (n, t)
        v_keys = v[self.index_rows]  # (n', t)
        fits = np.empty((n, v.shape[1]))
        missing = np.zeros(n, dtype=bool)
        # Rows of weight 0 move nothing: their in-sample fits.
        zero = np.setdiff1d(np.arange(n), self.index_rows)
        if len(zero):
            fits[zero] = self._pool_values(keys, keys.X[zero], v_keys, settings.device)
        dense = self._own_fits_dense(keys, v_keys, settings)
        if dense is not None:
            fits[self.index_rows] = dense
            return fits, missing
        plans = None if self.adaptive.kind == "balloon" else self._wider_keys()
        row_bytes = len(self.index_rows) * 8 * (8 + 3 * v.shape[1])
        for weight in np.unique(self.keys_weight):
            at = np.flatnonzero(self.keys_weight == weight)  # positions among the keys
            for part in gen_batches(len(at), chunk_rows(len(at), row_bytes,
                                                        settings.working_memory)):
                own = at[part]
                if plans is None:
                    f, m = self._balloon_own(keys, own, weight, v_keys, settings.device)
                else:
                    f, m = self._sample_point_own(keys, own, v_keys, settings.device, plans)
                fits[self.index_rows[own]], missing[self.index_rows[own]] = f, m
        return fits, missing

    def _own_fits_dense(self, keys, v_keys, settings):
        """The keys' fits of ``v_keys`` (n', t) without each, at their own inputs, from
        the exact leave-one-out of the keys on each other
        (:class:`~sklearn_nw._adaptive.LeaveOneOutNeighbors`: one pass over their dense
        distances, a row of no kernel mass attending to its nearest others as a refit
        does), where every key lies at an input of its own and their (n', n') matrices
        fit in ``working_memory``; else None (each key's own refit,
        :meth:`_sample_point_own` and :meth:`_balloon_own`)."""
        n_keys = len(self.index_rows)
        if (3 * n_keys * n_keys * 8 > settings.working_memory * 2**20
                or len(np.unique(keys.X[self.index_rows], axis=0)) < n_keys):
            return None
        device = settings.device
        points = torch.as_tensor(self.index_points, dtype=torch.float64,
                                 device=device)  # (n', r), as the CV grid's
        extra = (None if self.categories is None else
                 categorical_logits(keys.kernel, self.categories, device))
        neighbors = LeaveOneOutNeighbors.of_points(
            points, torch.as_tensor(self.keys_weight, dtype=torch.float64, device=device),
            self.adaptive.n_neighbors, extra=extra)
        neighbors.prepare()
        values = torch.as_tensor(v_keys, dtype=torch.float64, device=device)
        fits, _ = neighbors.attention(self.adaptive, keys.kernel, self.r, values=values)
        return fits.cpu().numpy()

    def _pool_values(self, keys, queries, v_keys, device):
        """The fits (b, t) of ``v_keys`` at ``queries``, at this route's bandwidths."""
        search_queries = keys.search_space(queries)[:, : self.r]
        h = (self._query_bandwidths(search_queries) if self.adaptive.kind == "balloon"
             else self._key_bandwidths())
        return self._pool_rows(keys, queries, search_queries, h, v_keys, device,
                               False).out.double().cpu().numpy()

    def _inside(self, search_queries, radius, exclude_zero=False):
        """The keys of positive weight (indices into ``index_rows``) within ``radius``
        (b,) of each query, as the searches measure the k-th neighbor distances (those at
        distance 0 left out with ``exclude_zero``): an object array of index arrays."""
        # A little wider, then exactly: the exact distances (those of the k-th neighbor
        # distances; a tree's own round otherwise in 3 features or more) against the
        # radius.
        _, ind = self.index.within(search_queries, radius * (1 + 1e-9))
        counts = np.array([len(j) for j in ind])
        found = np.concatenate([*ind, np.empty(0, dtype=np.intp)]).astype(np.intp)
        d = paired_distances(np.repeat(search_queries, counts, axis=0),
                             self.index_points[found])  # (m,)
        at = np.repeat(np.arange(len(ind)), counts)
        keep = (d <= radius[at]) & (d > 0) if exclude_zero else d <= radius[at]
        out = np.empty(len(ind), dtype=object)
        for i, part in enumerate(np.split(found[keep], np.cumsum(
                np.bincount(at[keep], minlength=len(ind)))[:-1])):
            out[i] = part
        return out

    def _balloon_without_each(self, keys, queries, search_queries, v_keys, device):
        """Each query's fit (b, t) and :func:`~sklearn_nw._uncertainty.leave_one_out_sums`
        over the keys of positive weight (b, n', t), (b, n'), the rows within its
        ``d_k(q)`` at the bandwidth they leave it."""
        h = self._query_bandwidths(search_queries)  # (b,)
        pooled = self._pool_rows(keys, queries, search_queries, h, v_keys, device, True)
        sums, others = leave_one_out_sums(pooled.attention.cpu().numpy(), v_keys)
        for _, q, j, local, attention in self.wider_attentions(keys, queries, search_queries,
                                                               device):
            wide_sums, wide_others = leave_one_out_sums(attention, v_keys)
            sums[q, j], others[q, j] = wide_sums[local, j], wide_others[local, j]
        return pooled.out.double().cpu().numpy(), sums, others

    def wider_attentions(self, keys, queries, search_queries, device, columns="keys"):
        """The balloon's attention without a row inside a query's ``d_k(q)``: per weight
        among those rows, ``(held, q, j, local, attention)``: the queries concerned (h,),
        the pairs' queries (m,) and rows (m,) (indices into the block and into the keys
        of positive weight, or into every key with ``columns="all"``), each pair's row
        ``local`` (m,) of ``attention``, dense (h, n') (or (h, n)), at the bandwidth the
        others hold k units at (each row's removal renormalizes it)."""
        d_k = kth_distances(self.index, self.keys_weight, search_queries,
                            self.adaptive.n_neighbors)  # (b,)
        inside = self._inside(search_queries, d_k)
        query = np.repeat(np.arange(len(queries)), [len(j) for j in inside])  # (m,)
        key = np.concatenate(list(inside)).astype(np.intp)  # (m,)
        for weight in np.unique(self.keys_weight[key]):
            at = self.keys_weight[key] == weight
            q, j = query[at], key[at]
            held, local = np.unique(q, return_inverse=True)  # the queries concerned
            wider = self._query_bandwidths(search_queries[held], more=weight)
            attention = self._pool_rows(keys, queries[held], search_queries[held], wider,
                                        keys.values[self.index_rows], device,
                                        True).attention.cpu().numpy()  # (h, n')
            if columns == "all":
                full = np.zeros((len(held), keys.X.shape[0]), dtype=attention.dtype)
                full[:, self.index_rows] = attention
                attention, j = full, self.index_rows[j]
            yield held, q, j, local, attention

    def _balloon_own(self, keys, own, weight, v_keys, device):
        """The fits (b, t) of keys ``own`` (b,) (positions among the keys of positive
        weight, all of ``weight``) at their own inputs without themselves, and which are
        missing (b,): their inputs' attention at the bandwidth they leave there (a query
        at a key counts it within its ``d_k``)."""
        queries = keys.X[self.index_rows[own]]
        search_queries = self.index_points[own]
        wider = self._query_bandwidths(search_queries, more=weight)
        without = self._pool_rows(keys, queries, search_queries, wider, v_keys, device, True)
        fits, missing = leave_one_out_own_fits(without.attention.cpu().numpy(), v_keys, own)
        return fits, missing

    @contextlib.contextmanager
    def leave_one_out_session(self):
        """Within it, the sample-point keys' bandwidths without each key
        (:meth:`_wider_keys`, the keys' alone) are found once for every chunk of queries
        whose fits without each row are asked for, and dropped after: the route stays as
        fitted."""
        if self.adaptive.kind == "balloon" or "_held_wider" in vars(self):
            yield
            return
        self._held_wider = self._wider_keys()
        try:
            yield
        finally:
            vars(self).pop("_held_wider", None)

    def _held_wider_keys(self):
        """:meth:`_wider_keys`, as held by :meth:`leave_one_out_session` if inside one."""
        held = vars(self).get("_held_wider")
        return self._wider_keys() if held is None else held

    def _wider_keys(self):
        """Per weight among the keys of positive weight, the sample-point bandwidths that
        move without a key of that weight: ``(removed, columns, moved, wider)``, the keys
        of that weight (r,), those whose ``d_k`` holds one of them at another location
        (m,), which of them each removal moves (CSR (r, m)) and their bandwidths without
        it (m,)."""
        inside = self._inside(self.index_points, self.key_distance[self.index_rows],
                              exclude_zero=True)
        counts = [len(j) for j in inside]
        m = len(inside)
        # holds[i, j] = 1: key i's d_k holds key j (its bandwidth counts j).
        holds = sp.csr_array((np.ones(sum(counts)), np.concatenate(list(inside)).astype(
            np.intp), np.concatenate([[0], np.cumsum(counts)])), shape=(m, m))
        plans = []
        for weight in np.unique(self.keys_weight):
            removed = np.flatnonzero(self.keys_weight == weight)
            moved = sp.csr_array(holds.T)[removed]  # (r, n')
            columns = np.unique(moved.indices)
            if not len(columns):
                continue
            plans.append((removed, columns, sp.csr_array(moved[:, columns]),
                          self._key_bandwidths(more=weight, columns=columns)))
        return plans

    def _key_weights(self, keys, queries, search_queries):
        """The sample-point keys' weights at a block of queries, relative to each
        query's largest: ``(dist, categories, top, e, total, empty)``, the distances (b,
        n') and categories' distances (or None) they come from, each query's largest
        logit (b, 1), the weights ``e`` (b, n'), their sums (b, 1) and which queries have
        no kernel mass (b,) (their sums 1)."""
        dist = self.index.distances(search_queries)  # (b, n')
        categories = None if self.r == keys.n_coords else exact_distances(
            torch.as_tensor(keys.scaled(queries)[:, self.r :]),
            torch.as_tensor(self.categories)).numpy()  # (b, n')
        h = self._key_bandwidths()
        logits = self._key_logits(keys, dist, categories, h, h)  # (b, n')
        top = logits.max(1, keepdims=True)  # (b, 1)
        empty = ~np.isfinite(top[:, 0])
        top[empty] = 0.0
        e = exp_(torch.from_numpy(logits).sub_(torch.from_numpy(top))).numpy()  # (b, n')
        total = e.sum(1, keepdims=True)  # (b, 1)
        total[empty] = 1.0
        return dist, categories, top, e, total, empty

    def _wider_weights(self, keys, dist, categories, top, total, columns, wider):
        """The keys' ``columns`` weights at their ``wider`` bandwidths (b, m), in the
        unit of :meth:`_key_weights`'s ``e / total``."""
        logits = self._key_logits(keys, dist[:, columns], None if categories is None
                                  else categories[:, columns], wider,
                                  self._key_bandwidths(), columns)
        return exp_(torch.from_numpy(logits).sub_(torch.from_numpy(top))).div_(
            torch.from_numpy(total)).numpy()

    def _wider_pair_weights(self, keys, dist, categories, top, total, columns, wider):
        """:meth:`_wider_weights` at pairs of a query and a key (p,): the keys
        ``columns`` (p,) at their ``wider`` bandwidths (p,), at the distances ``dist`` and
        ``categories`` (p,) of the pairs' queries, whose largest logits and sums are
        ``top`` and ``total`` (p,)."""
        logits = self._key_logits(keys, dist[None], None if categories is None
                                  else categories[None], wider, self._key_bandwidths(),
                                  columns)[0]  # (p,)
        return exp_(torch.from_numpy(logits).sub_(torch.from_numpy(top))).div_(
            torch.from_numpy(total)).numpy()

    def _sample_point_without_each(self, keys, queries, search_queries, v_keys, device,
                                   plans):
        """:meth:`_balloon_without_each` of the sample-point bandwidth: the sums without
        each key j, and with the keys whose bandwidth counts j (``plans``,
        :meth:`_wider_keys`) at the wider bandwidth they have without it, all over the
        query's total weight."""
        dist, categories, top, e, total, empty = self._key_weights(keys, queries,
                                                                   search_queries)
        attention = e / total  # (b, n')
        own = attention @ v_keys  # (b, t)
        if empty.any():  # no kernel mass: the route's fallback; every fit refitted
            own[empty] = self._pool_values(keys, queries[empty], v_keys, device)
        sums, others = leave_one_out_sums(attention, v_keys)  # (b, n', t), (b, n')
        for removed, columns, moved, wider in plans:
            change = np.ascontiguousarray((self._wider_weights(
                keys, dist, categories, top, total, columns, wider)
                - attention[:, columns]).T)  # (m, b)
            every = len(removed) == len(self.keys_weight)  # one weight: no gather
            at = slice(None) if every else removed
            others[:, at] += (moved @ change).T
            for t in range(v_keys.shape[1]):
                sums[:, at, t] += (moved @ (change * v_keys[columns, t : t + 1])).T
        others[empty] = 0.0
        return own, sums, others

    def _sample_point_own(self, keys, own, v_keys, device, plans):
        """:meth:`_balloon_own` of the sample-point bandwidth: the sums without each key
        at its own input, and with the keys whose bandwidth counts it at their wider
        ones."""
        queries = keys.X[self.index_rows[own]]
        dist, categories, top, e, total, empty = self._key_weights(
            keys, queries, self.index_points[own])
        attention = e / total  # (b, n')
        rows = np.arange(len(own))
        attention[rows, own] = 0.0
        others, sums = attention.sum(1), attention @ v_keys  # (b,), (b, t)
        for removed, columns, moved, wider in plans:
            position = np.searchsorted(removed, own)
            held = (position < len(removed)) & (removed[np.minimum(
                position, len(removed) - 1)] == own)  # the rows of this plan's weight
            if not held.any():
                continue
            mine = moved[position[held]]  # (h, m): the keys each row's removal moves
            # The changes at those pairs alone (each row's R_j, not every key).
            pair_row = np.repeat(np.flatnonzero(held), np.diff(mine.indptr))  # (p,)
            pair_key = columns[mine.indices]  # (p,)
            change = self._wider_pair_weights(
                keys, dist[pair_row, pair_key], None if categories is None
                else categories[pair_row, pair_key], top[pair_row, 0],
                total[pair_row, 0], pair_key, wider[mine.indices])
            change -= e[pair_row, pair_key] / total[pair_row, 0]  # (p,)
            others += np.bincount(pair_row, weights=change, minlength=len(own))
            for t in range(v_keys.shape[1]):
                sums[:, t] += np.bincount(pair_row, weights=change * v_keys[pair_key, t],
                                          minlength=len(own))
        lost = weight_unresolved(others, keys.dtype) | empty
        fits = sums / np.where(lost, 1.0, others)[:, None]
        fits[lost] = np.nan
        return fits, lost

    def _key_logits(self, keys, dist, categories, h, reference, columns=None):
        """The log weights (b, m) of the keys of positive weight (``columns`` of them,
        whose distances ``dist`` (b, m) and categories' distances ``categories`` (b, m)
        or None are given) under sample-point bandwidths ``h`` (m,): ``log w_i h_i^(-r)
        k(u_i / h_i)``, ``h`` relative to the smallest of ``reference``, as
        :meth:`_pool_rows` weighs them."""
        columns = slice(None) if columns is None else columns
        # In torch, in place where it can be: (b, m) passes are this route's cost.
        scaled = torch.from_numpy(np.ascontiguousarray(dist)) / torch.from_numpy(h)
        if categories is not None:
            scaled = torch.hypot(scaled, torch.from_numpy(np.ascontiguousarray(categories)))
        log_w = np.log(self.keys_weight[columns]) + self.r * np.log(reference.min() / h)
        logits = keys.kernel.log_profile_sq(scaled.square_())  # (b, m)
        return logits.add_(torch.from_numpy(log_w)).numpy()

    def key_scale(self, keys):
        """A sample-point key's distances are divided by its bandwidth (in the search
        space); a balloon's bandwidth moves with the query, whose derivative is not
        computed."""
        if self.adaptive.kind == "balloon":
            raise NotImplementedError(
                "Marginal effects differentiate the attention with the bandwidth held; a "
                "balloon bandwidth (AdaptiveBandwidth(kind='balloon')) moves with the query "
                "(its k-th neighbor distance). Use kind='sample_point', a fixed bandwidth, "
                "or degree=1 (the local slope).")
        h = np.maximum(self.key_bandwidth, np.finfo(np.float64).tiny)  # (n,)
        return keys.search_scale / h

    def _leave_one_out_inputs(self, keys, loo, values, settings):
        """Exact leave-one-out attention (G, G) of the distinct inputs under the adaptive
        bandwidth (:class:`~sklearn_nw._adaptive.LeaveOneOutNeighbors`): dense, CSR for
        compact kernels; refused above ``working_memory``."""
        working_memory, device = settings.working_memory, settings.device
        G = len(loo.weight)
        if 4 * G * G * 8 > working_memory * 2**20:
            raise ValueError(
                f"The leave-one-out attention of an adaptive bandwidth holds dense ({G}, "
                f"{G}) matrices, more than scikit-learn's working_memory of "
                f"{working_memory} MiB. Raise the limit with "
                "sklearn.config_context(working_memory=...)."
            )
        r = self.r
        points = torch.as_tensor(keys.search_space(loo.X)[:, :r], device=device)  # (G, r)
        D = exact_distances(points, points)  # (G, G)
        extra = (None if r == keys.n_coords else
                 categorical_logits(keys.kernel, keys.scaled(loo.X)[:, r:], device))
        neighbors = LeaveOneOutNeighbors(D, torch.as_tensor(loo.weight, device=device),
                                         self.adaptive.n_neighbors, extra=extra)
        attention, n_fallback = neighbors.attention(self.adaptive, keys.kernel, r)
        attention = attention.to(torch_dtype(keys.dtype))
        if keys.kernel.is_compact:
            return sp.csr_array(attention.cpu().numpy()), n_fallback
        return attention, n_fallback
