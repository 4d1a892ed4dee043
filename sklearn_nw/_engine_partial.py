"""Partial Nadaraya-Watson sums over one shard of the keys. Torch only (their
:class:`PartialSums` travel between processes as float64 numpy).

When the keys are split into shards (:mod:`sklearn_nw.dask`), shard s contributes to the
prediction at query q its normalizer and numerator

    D_s = sum_{j in s} w_j k(u_qj),    N_s = sum_{j in s} w_j k(u_qj) v_j,

and the prediction over every shard is ``sum_s N_s / sum_s D_s``. A shard reports them as
``out_s = N_s / D_s`` and ``log D_s``, so the merge (:mod:`sklearn_nw._shards`) weighs
each ``out_s`` by ``exp(log D_s - log D)`` with ``log D = logsumexp_s log D_s``: in log
space, as the single-machine engine, nothing underflows.

A query with no kernel weight on a shard (a compact kernel with no key in reach, or
weights that underflow) has ``log D_s = -inf`` there; the shard then reports its nearest
keys of positive weight instead: their squared distance (in the metric divided by its
largest bandwidth, the careful path's unit, which every shard shares), their log total
weight and their weighted mean value. When every shard is empty the merge keeps the
nearest of them, which is the single-machine fallback (the nearest key(s)).

``leave_out_equal`` leaves out, for each query, every key at the query's own location (the
leave-one-out of :mod:`sklearn_nw._leave_one_out`, where a point leaves with all the mass
at its input): the queries are then training inputs, and each shard drops the keys equal
to them, wherever they are.
"""

import math
from typing import NamedTuple

import torch

from ._engine import (
    N_TEMPORARIES,
    PoolingCall,
    exact_sq_dist,
    exp_,
    full_precision,
    run_chunks,
    transform,
)
from ._leave_one_out import nearest_keys
from ._workers import CACHE_BYTES, chunk_rows


class PartialSums(NamedTuple):
    """One shard's (or a union of shards') part of the predictions at some queries:
    tensors in the engine, float64 numpy arrays out of it (the merge of
    :mod:`sklearn_nw._shards`)."""

    out: object  # (n_q, t) N / D; where D = 0, the nearest keys' mean value
    log_den: object  # (n_q,) log D; -inf where no key gives kernel weight
    near: object  # (n_q,) where D = 0: squared distance to the nearest keys; else inf
    log_near_w: object  # (n_q,) where D = 0: log of the nearest keys' total weight


def empty_partial(n_q, t, dtype, device="cpu"):
    """The part of a shard with no key of positive weight: nothing, nowhere."""
    return PartialSums(torch.zeros(n_q, t, dtype=dtype, device=device),
                       torch.full((n_q,), -math.inf, dtype=dtype, device=device),
                       torch.full((n_q,), math.inf, dtype=dtype, device=device),
                       torch.full((n_q,), -math.inf, dtype=dtype, device=device))


def partial_pool(q, x, v, h, kernel, *, log_w, keys, leave_out_equal=False,
                 working_memory=1024, squared_values=None, deviation_of=(), key_classes=None):
    """The :class:`PartialSums` of keys ``x`` (n, d) with values ``v`` (n, t) and log
    weights ``log_w`` (n,) (at least one finite) at queries ``q`` (n_q, d), bandwidths or
    projection ``h``, in chunks of queries within ``working_memory`` MiB. ``keys`` is
    :func:`~sklearn_nw._engine.prepare_keys` of them, centered where every shard is.

    With ``squared_values`` (n, s), also the sums ``sum_j a_j**2 s_j`` (n_q, s) of the
    attention ``a`` squared, from the same weights (returned second; where a query has
    no kernel weight, 0). With ``deviation_of`` (indices of columns of ``v``), also
    ``max_j a_j |v_jc - out_c|`` (n_q, len(deviation_of)) of those columns, from the same
    weights (returned last; inf where the sums took the careful path): how far one key's
    removal can move a prediction, less its ``1 / (1 - a_j)``. With ``key_classes`` (n,)
    long instead, each key's class where ``v`` holds the classes' one-hot vectors, the
    same of every column (n_q, t), from each class's largest attention (one pass): a key
    of class c moves column c by ``a_j |1 - out_c|``, the others by ``a_j |out_k|``.
    """
    problem = PoolingCall(x, v, h, kernel, log_w, None, working_memory, keys)
    n_q, n = q.shape[0], x.shape[0]
    result = empty_partial(n_q, v.shape[1], q.dtype, q.device)
    quadratic = kernel.quadratic_coef is not None and not leave_out_equal
    # The fused Gaussian logits are relative to the shard's largest log weight, and at
    # most 0: no max pass (as in attention_pool).
    shift = float(problem.log_w[problem.positive].max()) if quadratic else 0.0
    tiny = math.sqrt(torch.finfo(q.dtype).tiny)
    squares = None
    if squared_values is not None:
        squares = (squared_values.T.contiguous(),  # (s, n)
                   q.new_zeros(n_q, squared_values.shape[1]))  # (n_q, s)
        # Squared weights keep their digits while the largest weight, at least total / n,
        # squared, stays above the smallest normal float over eps.
        tiny = max(tiny, n * math.sqrt(torch.finfo(q.dtype).tiny / torch.finfo(q.dtype).eps))
    n_deviations = v.shape[1] if key_classes is not None else len(deviation_of)
    deviation = (torch.full((n_q, n_deviations), math.inf, dtype=q.dtype, device=q.device)
                 if n_deviations else None)
    step = chunk_rows(n_q, n * q.element_size() * N_TEMPORARIES, working_memory)
    step = max(1, min(step, CACHE_BYTES // max(1, n * q.element_size())))

    def pool_chunk(s, block):
        qc = q[s : s + step]  # (b, d)
        if leave_out_equal:
            logits = _exact_logits(problem, qc, True)  # (b, n)
        else:
            logits = problem.fast_logits(problem.scale(qc), None,
                                         out=None if block is None else block[0, : len(qc)])
        m = logits.new_zeros(len(qc))  # (b,)
        if not quadratic:
            m = logits.amax(1)
            m.masked_fill_(~torch.isfinite(m), 0.0)
            logits.sub_(m[:, None])
        weights = exp_(logits, exact_zeros=False)  # (b, n)
        num_den = (problem.v1t @ weights.T).T  # (b, t + 1)
        total = num_den[:, -1]  # (b,)
        # Underflowed or empty; for the fused Gaussian also a total above n, the
        # expansion's cancellation far from the keys.
        redo = ~((total > tiny) & (total <= 1.001 * n))
        rows = torch.arange(s, s + len(qc), device=q.device)
        result.out[rows] = num_den[:, :-1] / total[:, None]
        result.log_den[rows] = torch.log(total) + m + shift
        if key_classes is not None:
            deviation[rows] = _class_deviations(weights, key_classes, total,
                                                result.out[rows])
        if deviation is not None:
            for i, c in enumerate(deviation_of):  # (one (b, n) temporary at a time)
                deviation[rows, i] = (problem.v1t[c][None, :] - result.out[rows, c, None]
                                      ).abs_().mul_(weights).amax(1) / total
            deviation[rows[redo]] = math.inf
        if squares is not None:
            squares[1][rows] = _squared_sums(squares[0], weights.square_(), total)
        if bool(redo.any()):
            _careful(problem, qc[redo], rows[redo], result, leave_out_equal, squares)

    with full_precision():
        run_chunks(pool_chunk, q, step, n, blocks=int(quadratic), needs_grad=False)
    extra = (() if squares is None else (squares[1],)) + (
        () if deviation is None else (deviation,))
    return (result, *extra) if extra else result


def _class_deviations(weights, key_classes, total, out):
    """``max_j a_j |v_jc - out_c|`` (b, t) of one-hot values (classes ``key_classes``
    (n,)) from the weights (b, n) whose sums are ``total`` (b,): each class's largest
    weight over the total, times ``|1 - out_c|`` for its own column, ``|out_k|`` for
    the others'."""
    b, t = out.shape
    largest = weights.new_zeros(b, t).scatter_reduce_(
        1, key_classes.expand(b, -1), weights, "amax").div_(total[:, None])  # (b, t)
    others = torch.stack([torch.cat([largest[:, :c], largest[:, c + 1:]], 1).amax(1)
                          for c in range(t)], 1)  # (b, t): the other classes' largest
    return torch.maximum(largest * (1 - out).abs(), others * out.abs())


def _squared_sums(s_t, squared_weights, total):
    """``sum_j a_j**2 s_j`` (b, s) of values ``s_t`` (s, n) from the squared weights (b,
    n) whose sums are ``total`` (b,); 0 where the total is 0."""
    sums = (s_t @ squared_weights.T).T  # (b, s)
    return torch.where(total[:, None] > 0, sums / (total * total)[:, None], 0.0)


def _careful(problem, q, rows, result, leave_out_equal, squares=None):
    """Queries ``q`` whose fast sums failed, from exact distances; those with no kernel
    weight get their nearest keys (:func:`_nearest`). Written into ``result`` at
    ``rows``, and the sums of :func:`partial_pool`'s ``squared_values`` into
    ``squares[1]`` (``squares[0]`` their values transposed)."""
    logits = _exact_logits(problem, q, leave_out_equal)  # (e, n)
    m = logits.amax(1)  # (e,)
    finite = torch.isfinite(m)
    weights = torch.exp(logits - torch.where(finite, m, 0.0)[:, None])  # (e, n)
    num_den = (problem.v1t @ weights.T).T  # (e, t + 1)
    result.out[rows] = num_den[:, :-1] / num_den[:, -1:]
    result.log_den[rows] = torch.where(finite, m + torch.log(num_den[:, -1]), -math.inf)
    if squares is not None:
        squares[1][rows] = _squared_sums(squares[0], weights.square_(),
                                         torch.where(finite, num_den[:, -1], 0.0))
    if not bool(finite.all()):
        _nearest(problem, q[~finite], result, rows[~finite], leave_out_equal)


def _exact_logits(problem, q, leave_out_equal):
    """Logits ``log k(u^2) + log w`` (b, n) of queries ``q`` from exact differences,
    absolute (not shifted); with ``leave_out_equal`` the keys at each query's location
    get none."""
    d2 = exact_sq_dist(problem.scale(q), problem.xs, problem.working_memory)  # (b, n)
    d2 = torch.nan_to_num_(d2, nan=math.inf, posinf=math.inf)
    logits = problem.kernel.log_profile_sq(d2) + problem.log_w  # (b, n)
    if leave_out_equal:
        logits.masked_fill_(problem.unit_sq_dist(q) == 0, -math.inf)
    return logits


def _nearest(problem, q, result, rows, leave_out_equal):
    """Write into ``result`` at ``rows`` the nearest keys of positive weight of queries
    ``q`` (e, d): their squared distance in the unit metric, log weight and mean value."""
    d2 = problem.unit_sq_dist(q)  # (e, n)
    eligible = problem.positive if not leave_out_equal else problem.positive & (d2 != 0)
    nearest, near = nearest_keys(d2, eligible)  # (e, n), (e,)
    # A shard with no eligible key at a finite distance reports none: the merge ranks
    # the shards' nearest keys by their distance.
    tied = nearest & torch.isfinite(near)[:, None]  # (e, n)
    log_w = torch.where(tied, problem.log_w, -math.inf)  # (e, n)
    log_total = torch.logsumexp(log_w, 1)  # (e,)
    weights = torch.exp(log_w - torch.where(torch.isfinite(log_total), log_total, 0.0)[:, None])
    result.out[rows] = (problem.v1t[:-1] @ weights.T).T
    result.near[rows] = near
    result.log_near_w[rows] = log_total


def partial_gradient(q, x, v, h, kernel, *, log_w, center, pooled, log_den, cotangent,
                     den_cotangent=None, leave_out_equal=False, working_memory=1024):
    """One shard's part of the gradient in ``h`` of ``sum_i cotangent_i . pooled_i``
    (plus ``sum_i den_cotangent_i log_den_i`` where given (n_q,)), the predictions
    ``pooled`` (n_q, t) at queries ``q`` (n_q, d) over every shard (their ``log_den``
    (n_q,) is the log normalizer over every shard).

    With ``alpha_ij = exp(logit_ij - log_den_i)`` the attention of this shard's key j, the
    derivative of ``pooled_i`` in ``logit_ij`` is ``alpha_ij (v_j - pooled_i)``, that of
    ``log_den_i`` is ``alpha_ij``; the gradients of the shards' logits, weighted so, add
    up to the full gradient. Returns a tensor like ``h``. Exact differences (no
    expansion): the gradient needs them.
    """
    h = h.detach().requires_grad_()
    grad = torch.zeros_like(h)
    n, d = x.shape
    step = chunk_rows(q.shape[0], n * q.element_size() * (d + 8), working_memory)
    with torch.enable_grad(), full_precision():
        for s in range(0, q.shape[0], step):
            rows = slice(s, s + step)
            qs = transform(q[rows], center, h)  # (b, r)
            xs = transform(x, center, h)  # (n, r)
            d2 = ((qs[:, None, :] - xs[None, :, :]) ** 2).sum(-1)  # (b, n)
            logits = kernel.log_profile_sq(d2) + log_w  # (b, n)
            if leave_out_equal:
                equal = (q[rows, None, :] == x[None, :, :]).all(-1)  # (b, n)
                logits = logits.masked_fill(equal, -math.inf)
            finite = torch.isfinite(logits).detach()
            with torch.no_grad():
                alpha = torch.exp(logits - log_den[rows, None]).nan_to_num_(0.0)  # (b, n)
                # (b, n) sum_t cotangent_it (v_jt - pooled_it)
                mixed = (cotangent[rows] @ v.T
                         - (cotangent[rows] * pooled[rows]).sum(1, keepdim=True))
                if den_cotangent is not None:
                    mixed += den_cotangent[rows, None]
                weight = alpha * mixed  # (b, n)
            part = (weight * torch.where(finite, logits, 0.0)).sum()
            (g,) = torch.autograd.grad(part, h)
            grad += g
    return grad
