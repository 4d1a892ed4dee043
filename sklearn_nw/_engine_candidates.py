"""Pooling over given candidate keys. Torch only.

- :func:`support_pool`, :func:`support_pairs_pool`: a compact kernel's profile evaluated
  directly (no logarithms) on blocks of candidates shared by a group of queries, or on
  each query's own candidates;
- :func:`candidate_pool`: per-query candidate lists at given distances (a k-nearest or
  radius graph, stored distances), in CSR layout, with the nearest-key fallback;
- :func:`dense_pool`: every key at given scaled distances (the adaptive route).

Notation and the careful path as in :mod:`sklearn_nw._engine`.
"""

import math

import torch

from ._engine import (
    N_TEMPORARIES,
    PoolResult,
    augment_keys,
    augmented_sq_dist,
    csr_parts,
    exp_,
    full_precision,
    run_chunks,
)
from ._workers import CACHE_BYTES, chunk_rows, on_workers


def support_pool(qs, xs, weighted_t, kernel, *, return_attention=False, working_memory=1024,
                 augmented=None, squares=0, with_den=False):
    """Pooling of a block of queries over candidate keys for a compact kernel, with the
    profile evaluated directly: it is at most ``k(0) = 1`` and exactly 0 only outside the
    support, so log space buys nothing and costs two passes.

    Parameters
    ----------
    qs : Tensor (b, r)
        Scaled queries.
    xs : Tensor (m, r)
        Scaled candidate keys: every key inside a query's support must be among them.
    weighted_t : Tensor (t + 1, m)
        The candidates' sample-weighted values, and their weights in the last row.
    kernel : Kernel
        A compact kernel.
    augmented : tuple, optional
        :func:`augment_keys` of ``xs``, used above three coordinates: computed once by a
        caller that pools many calls over the same keys.
    squares : int
        The last ``squares`` rows of ``weighted_t`` hold values ``s_i`` times the squared
        sample weights, ``w_i**2 s_i``, which the squared kernel weights weigh: their
        sums over the squared total weight, ``sum_i a_i**2 s_i`` (``a`` the attention),
        follow the pooled values in ``out``.
    with_den : bool
        The total weight ``sum_i w_i k_i`` of each query follows in ``out``'s last column.

    Returns
    -------
    out : Tensor (b, t) (or (b, t + squares (+ 1)))
        NaN on rows with no key inside the support (``empty``).
    empty : Tensor (b,) of bool
    attention : CSR parts (crow, col, val) over the candidates, or None
    """
    b, m = qs.shape[0], xs.shape[0]
    t1 = weighted_t.shape[0] - squares  # the values and the weights
    out = qs.new_empty(b, weighted_t.shape[0] - 1 + with_den)  # (b, t + squares (+ 1))
    empty = torch.zeros(b, dtype=torch.bool, device=qs.device)  # (b,)
    parts = {}  # chunk start -> its attention
    # Each (chunk, m) block within the cache (see CACHE_BYTES).
    step = chunk_rows(b, m * qs.element_size() * N_TEMPORARIES, working_memory,
                      cap_bytes=N_TEMPORARIES * CACHE_BYTES)
    if augmented is None and qs.shape[1] > 3:
        augmented = augment_keys(xs)

    # blocks: two (chunk, m) blocks, allocated once per worker (see CACHE_BYTES): squared
    # distances turned into weights in place, and coordinate differences.
    def pool_chunk(s, blocks):
        q = qs[s : s + step]  # (c, r)
        c = q.shape[0]
        k, diff = blocks[0, :c], blocks[1, :c]  # (c, m) each
        if q.shape[1] <= 3:  # explicit differences: exact, and few passes
            torch.sub(q[:, :1], xs[:, 0], out=k).square_()
            for j in range(1, q.shape[1]):
                torch.sub(q[:, j : j + 1], xs[:, j], out=diff)
                k.addcmul_(diff, diff)
        else:
            augmented_sq_dist(q, xs, refine=True, out=k, keys=augmented)
        kernel.profile_sq_(k)  # (c, m) weights
        num_den = (weighted_t[:t1] @ k.T).T  # (c, t + 1)
        den = num_den[:, -1:]  # (c, 1)
        empty[s : s + step] = ~(den[:, 0] > 0)
        out[s : s + step, : t1 - 1] = num_den[:, :-1] / den
        if squares:  # sum_i (w_i k_i)^2 s_i / den^2
            out[s : s + step, t1 - 1 : t1 - 1 + squares] = (
                weighted_t[t1:] @ k.square().T).T / den.square()
        if with_den:
            out[s : s + step, -1] = den[:, 0]
        if return_attention:
            k.mul_(weighted_t[t1 - 1]).div_(torch.where(den > 0, den, 1.0))  # empty rows: 0
            nonzero = k != 0  # (c, m)
            parts[s] = (nonzero.sum(1), nonzero.nonzero()[:, 1], k[nonzero])

    with full_precision():
        run_chunks(pool_chunk, qs, step, m, blocks=2, needs_grad=False)
    return out, empty, csr_parts([parts[s] for s in sorted(parts)]) if return_attention else None


def support_pairs_pool(qs, keys, lo, hi, kernel, *, return_attention=False, squares=0,
                       with_den=False):
    """:func:`support_pool` over each query's own candidates instead of one block shared
    by a group of queries: for queries with few candidates, where a block per group would
    cost more in overhead than in arithmetic. Pairs are processed in cache-sized chunks.

    Parameters
    ----------
    qs : Tensor (b, r)
        Scaled queries.
    keys : Tensor (m, r + t + 1)
        Scaled keys, then their sample-weighted values, then their weights: one row per
        key, so that a candidate is one gather.
    lo, hi : Tensor (b, s) long
        The candidates of query i are the keys ``lo[i, j] <= k < hi[i, j]`` of its ``s``
        slices: every key inside its support must be among them.
    kernel : Kernel
        A compact kernel.
    squares : int
        As in :func:`support_pool`: the last ``squares`` columns of ``keys``.
    with_den : bool
        As in :func:`support_pool`.

    Returns
    -------
    out, empty, attention
        As in :func:`support_pool`; the attention's columns are keys.
    """
    b, r = qs.shape
    t1 = keys.shape[1] - r - squares  # the values and the weights
    out = qs.new_empty(b, t1 - 1 + squares + with_den)  # (b, t + squares (+ 1))
    empty = torch.zeros(b, dtype=torch.bool, device=qs.device)  # (b,)
    lengths = hi - lo  # (b, s)
    counts = lengths.sum(1)  # (b,)
    # Pairs per chunk: their temporaries (a gathered key row, the query's coordinates, a
    # weight, indices) stay in cache.
    budget = max(1, 2 * CACHE_BYTES // (qs.element_size() * (keys.shape[1] + r + 2) + 16))
    ends = torch.cumsum(counts, 0)  # (b,)
    total = int(ends[-1]) if b else 0
    ones = qs.new_ones(r)  # (r,) sums of squares as one matrix-vector product
    chunks = []  # (first query, queries) of each chunk
    s = 0
    while s < b:
        done = int(ends[s - 1]) if s else 0
        if total - done <= budget:  # the rest fits in one chunk (one-row calls)
            c = b - s
        else:
            c = max(1, int(torch.searchsorted(ends[s:], ends.new_tensor(done + budget),
                                              right=True)))
        chunks.append((s, c))
        s += c

    def pool_chunk(chunk, _):
        s, c = chunk
        done = int(ends[s - 1]) if s else 0
        run = lengths[s:s + c].reshape(-1)  # (c s,)
        per_query = counts[s:s + c]  # (c,)
        n_pairs = int(ends[s + c - 1]) - done
        # Each slice's keys, one slice after the other: lo + 0, 1, ..., length - 1.
        shift = lo[s:s + c].reshape(-1) - (torch.cumsum(run, 0) - run)  # (c s,)
        ind = torch.repeat_interleave(shift, run, output_size=n_pairs)
        ind += torch.arange(n_pairs, device=qs.device)  # (p,)
        gathered = keys[ind]  # (p, r + t + 1)
        diff = gathered[:, :r].sub_(torch.repeat_interleave(
            qs[s:s + c], per_query, dim=0, output_size=n_pairs))  # (p, r)
        k = kernel.profile_sq_(torch.mv(diff.square_(), ones))  # (p,) weights
        weighted = gathered[:, r:].mul_(k[:, None])  # (p, t + 1 (+ squares))
        if squares:  # the squares' columns weighed by k^2
            weighted[:, t1:].mul_(k[:, None])
        num_den = torch.segment_reduce(weighted, "sum", lengths=per_query,
                                       axis=0)  # (c, t + 1 (+ squares))
        den = num_den[:, t1 - 1 : t1]  # (c, 1)
        empty[s:s + c] = ~(den[:, 0] > 0)
        out[s:s + c, : t1 - 1] = num_den[:, : t1 - 1] / den
        if squares:
            out[s:s + c, t1 - 1 : t1 - 1 + squares] = num_den[:, t1:] / den.square()
        if with_den:
            out[s:s + c, -1] = den[:, 0]
        if not return_attention:
            return None
        share = weighted[:, t1 - 1] / torch.repeat_interleave(
            den[:, 0], per_query, output_size=n_pairs)  # (p,)
        share.nan_to_num_(0.0)  # a query with no kernel mass: 0 / 0
        if 2 * int(torch.count_nonzero(share)) >= n_pairs:
            # Mostly pairs of weight (a cell list in one feature): every pair, those of
            # no weight as stored zeros, which the attention's CSR array drops
            # (numpy_attention), cheaper than finding the others.
            return per_query, ind, share
        kept_pairs = torch.nonzero(share).squeeze(1)  # (nnz,) ascending
        row = torch.repeat_interleave(torch.arange(c, device=qs.device), per_query,
                                      output_size=n_pairs)[kept_pairs]  # (nnz,)
        return torch.bincount(row, minlength=c), ind[kept_pairs], share[kept_pairs]

    with full_precision():
        # The chunks on the workers (see sklearn_nw._workers), in order.
        parts = on_workers(chunks, pool_chunk, qs.device)
    return out, empty, csr_parts(parts) if return_attention else None


def candidate_pool(dist, indices, indptr, v, kernel, *, scale=1.0, log_w=None,
                   return_attention=False, exact_zeros=False):
    """Nadaraya-Watson pooling over given candidate keys (a k-nearest or radius graph).

    Query i attends only to keys ``indices[indptr[i]:indptr[i + 1]]``, at distances
    ``dist`` of the same layout (CSR) that are ``scale`` times the scaled distances. A
    query whose candidates all have zero kernel weight gets its nearest positive-weight
    candidate(s), as in :func:`attention_pool`, ranked by ``dist`` (the scaled distances
    overflow at bandwidths near the smallest float); every query needs at least one
    candidate of positive weight.

    Parameters
    ----------
    dist : Tensor (nnz,)
    indices : Tensor (nnz,) long
    indptr : Tensor (n_q + 1,) long
    v : Tensor (n, t)
    kernel : Kernel
    scale : float
        The scaled distances are ``dist / scale``.
    log_w : Tensor (nnz,), optional
        Log weight of each candidate pair (a key's sample weight, or a part of it).
    return_attention : bool
        Also return the attention as CSR parts ``(indptr, indices, values)``.
    exact_zeros : bool
        Weights outside the support are exactly 0 (class probabilities; always so with
        the attention).

    Returns
    -------
    PoolResult
    """
    d2 = (dist / scale) ** 2  # (nnz,) inf where it overflows: no kernel weight
    tiny = math.sqrt(torch.finfo(d2.dtype).tiny)
    logits = kernel.log_profile_sq(d2)  # (nnz,)
    if log_w is not None:
        # Shifted by the largest weight: every logit <= 0, so no max pass per row.
        logits += log_w - log_w[torch.isfinite(log_w)].max()
    weights = exp_(logits, exact_zeros=exact_zeros or return_attention)  # (nnz,)
    den = torch.segment_reduce(weights, "sum", offsets=indptr)  # (n_q,)
    num = torch.segment_reduce(weights[:, None] * v[indices], "sum", offsets=indptr, axis=0)
    redo = ~(den > tiny)  # (n_q,) rows that underflowed or have no kernel mass
    n_fallback = 0
    attention = None
    if return_attention:
        counts = indptr[1:] - indptr[:-1]
        attention = (indptr, indices, weights / torch.repeat_interleave(den, counts))
    if bool(redo.any()):
        rows = torch.nonzero(redo)[:, 0]  # (r,)
        starts, stops = indptr[rows], indptr[rows + 1]
        pick = torch.cat([torch.arange(a, b, device=d2.device)
                          for a, b in zip(starts.tolist(), stops.tolist())])  # (nnz_r,)
        sub_indptr = torch.cat([indptr.new_zeros(1), (stops - starts).cumsum(0)])
        sub = _candidate_pool_careful(d2[pick], dist[pick], indices[pick], sub_indptr, v,
                                      kernel, None if log_w is None else log_w[pick],
                                      return_attention)
        num[rows], den[rows] = sub.out, 1.0
        n_fallback = sub.n_fallback
        if return_attention:
            attention[2][pick] = sub.attention[2]
    return PoolResult(num / den[:, None], attention, n_fallback)


def dense_pool(dist, v, kernel, *, log_w=None, return_attention=False, exact_zeros=False):
    """Nadaraya-Watson pooling of every query over every key, at given scaled distances.

    :func:`candidate_pool` with every key a candidate of every query, as dense blocks:
    the adaptive bandwidths' route, whose scaled distances divide each query's (balloon)
    or each key's (sample-point) distances by its own bandwidth. A query whose weights
    all vanish gets its nearest positive-weight key(s), ranked by ``dist``.

    Parameters
    ----------
    dist : Tensor (n_q, n)
        Scaled distances (inf where they overflow: no kernel weight).
    v : Tensor (n, t)
    kernel : Kernel
    log_w : Tensor (n,), optional
        Log weight of each key.
    return_attention : bool
        Also return the attention, dense (n_q, n).
    exact_zeros : bool
        Weights outside the support are exactly 0 (always so with the attention).

    Returns
    -------
    PoolResult
    """
    weights, den, out = dense_sums(dist**2, v, kernel, log_w=log_w,
                                   exact_zeros=exact_zeros or return_attention)
    attention = weights / den[:, None] if return_attention else None  # (n_q, n)
    # Rows that underflowed or have no kernel mass: the careful path, as flat pairs.
    redo = torch.nonzero(~(den > math.sqrt(torch.finfo(dist.dtype).tiny)))[:, 0]  # (r,)
    if not len(redo):
        return PoolResult(out, attention, 0)
    r, n = len(redo), dist.shape[1]
    flat = dist[redo].ravel()  # (r n,)
    sub = _candidate_pool_careful(
        flat**2, flat, torch.arange(n, device=dist.device).repeat(r),
        torch.arange(0, (r + 1) * n, n, device=dist.device), v, kernel,
        None if log_w is None else log_w.repeat(r), return_attention)
    out[redo] = sub.out
    if return_attention:
        attention[redo] = sub.attention[2].reshape(r, n)
    return PoolResult(out, attention, sub.n_fallback)


def dense_sums(d2, v, kernel, *, log_w=None, exact_zeros=False):
    """The kernel weights (n_q, n) of :func:`dense_pool` at squared scaled distances
    ``d2``, relative to the largest key weight (``exp(log_w - max log_w)`` times the
    kernel's), their sums (n_q,) and the pooled values (n_q, t); rows of no kernel mass
    (sums not above ``sqrt(tiny)``) are left as they come (:func:`dense_pool` redoes
    them)."""
    logits = kernel.log_profile_sq(d2)  # (n_q, n)
    if log_w is not None:
        # Shifted by the largest weight: every logit <= 0, so no max pass per row.
        logits += log_w - log_w[torch.isfinite(log_w)].max()
    weights = exp_(logits, exact_zeros=exact_zeros)  # (n_q, n)
    den = weights.sum(1)  # (n_q,)
    return weights, den, (weights @ v) / den[:, None]  # (n_q, t)


def _candidate_pool_careful(d2, dist, indices, indptr, v, kernel, log_w, return_attention):
    """:func:`candidate_pool` with a max pass per row and the nearest-key fallback (by
    ``dist``)."""
    n_q = indptr.shape[0] - 1
    counts = indptr[1:] - indptr[:-1]  # (n_q,)
    row = torch.repeat_interleave(torch.arange(n_q, device=d2.device), counts)  # (nnz,)
    log_w = torch.zeros_like(d2) if log_w is None else log_w  # (nnz,)
    logits = kernel.log_profile_sq(d2) + log_w  # (nnz,)
    m = torch.full((n_q,), -math.inf, dtype=d2.dtype, device=d2.device)
    m = m.scatter_reduce(0, row, logits, reduce="amax")  # (n_q,)
    empty = torch.isneginf(m)  # (n_q,)
    n_empty = int(empty.sum())
    if n_empty:
        # Fallback: the nearest positive-weight candidate(s) of the empty rows.
        eligible = empty[row] & torch.isfinite(log_w)  # (nnz,)
        d2e = torch.where(eligible, dist, math.inf)
        nearest = torch.full((n_q,), math.inf, dtype=d2.dtype, device=d2.device)
        nearest = nearest.scatter_reduce(0, row, d2e, reduce="amin")  # (n_q,)
        chosen = eligible & (d2e == nearest[row])
        logits = torch.where(empty[row], torch.where(chosen, log_w, -math.inf), logits)
        m = torch.where(empty, 0.0, m)
    weights = exp_(logits - m[row])  # (nnz,)
    den = torch.zeros(n_q, dtype=d2.dtype, device=d2.device).index_add_(0, row, weights)
    num = torch.zeros(n_q, v.shape[1], dtype=d2.dtype, device=d2.device)
    num.index_add_(0, row, weights[:, None] * v[indices])  # (n_q, t)
    out = num / den[:, None]
    attention = (indptr, indices, weights / den[row]) if return_attention else None
    return PoolResult(out, attention, n_empty)
