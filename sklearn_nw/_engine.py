"""Nadaraya-Watson attention sums, chunked and in log space. Torch only.

Notation: ``q`` (n_q, d) queries, ``x`` (n, d) keys (the training inputs), ``v`` (n, t)
values, ``h`` (d,) bandwidths, ``log_w`` (n,) log sample weights. Inputs are centered on the
keys' mean and divided by ``h``; in those scaled coordinates the attention logit of key j
for query i is ``log k(u_ij**2) + log_w_j`` with ``u_ij = ||q_i - x_j||``, and the output is

    out_i = sum_j softmax_j(logit_ij) v_j.

Only ``(chunk, n)`` blocks of logits ever exist. A row whose logits all underflow (a query
far from every key, a tiny bandwidth) or whose kernel mass is zero (a compact kernel with no
key in reach) is recomputed on the *careful path*: exact differences instead of the
``|q|^2 + |x|^2 - 2 q.x`` expansion, a max-subtracted softmax, which is the
nearest-neighbor limit when everything else underflows, and, if no key has positive kernel
weight, the nearest key(s) as fallback.

Pooling over given candidates (inside a compact kernel's support, k-nearest or radius
lists in CSR layout, stored distances) lives in :mod:`sklearn_nw._engine_candidates`, the
leave-one-out sums in :mod:`sklearn_nw._engine_loo`.
"""

import contextlib
import math
import threading
from typing import NamedTuple

import torch

from ._leave_one_out import (
    nearest_keys,
    other_keys,
    self_logits,
    set_self_,
    tie_exact_sq_dist,
)
from ._workers import (
    CACHE_BYTES,
    chunk_rows,
    on_workers,
    reduce_in_order,
    serial_if_small,
    worth_sharing,
)

# (chunk, n) temporaries per query row, in units of n * itemsize: the logits block, one more
# for a kernel's out-of-place log-profile, one for the attention copy. Chunks are also
# capped to stay in cache (see sklearn_nw._workers.CACHE_BYTES). The (chunk, n) blocks are
# allocated once per call and reused: a fresh multi-MiB tensor per chunk can be handed back
# to the OS by malloc and faulted in again page by page (measured: 250,000 page faults and
# twice the time of a 20,000 x 20,000 predict, in some processes).
N_TEMPORARIES = 3


class PoolResult(NamedTuple):
    out: torch.Tensor  # (n_q, t)
    attention: object  # None, a dense (n_q, n) tensor, or CSR (crow, col, val) tensors
    n_fallback: int  # rows with no key inside the kernel's support


# The computations now inside full_precision, and the precision they found before.
_settings_lock = threading.Lock()
_settings = {"users": 0, "saved": None}


@contextlib.contextmanager
def full_precision():
    """Full-precision float32 matmuls: TF32 would turn distances into noise.

    The precision is one setting for the whole process, shared by every thread: the first
    computation in saves the user's value and sets ``"highest"``, the last one out
    restores it, so concurrent computations neither run under the user's setting nor
    leave theirs behind. A precision that is already ``"highest"`` is not touched.
    """
    with _settings_lock:
        if _settings["users"] == 0:
            previous = torch.get_float32_matmul_precision()
            if previous != "highest":
                torch.set_float32_matmul_precision("highest")
                _settings["saved"] = previous
        _settings["users"] += 1
    try:
        yield
    finally:
        with _settings_lock:
            _settings["users"] -= 1
            if _settings["users"] == 0 and _settings["saved"] is not None:
                torch.set_float32_matmul_precision(_settings["saved"])
                _settings["saved"] = None


def exp_(logits, exact_zeros=True):
    """In-place ``exp`` of a block of logits, fast where most of them underflow.

    ``torch.exp`` takes a slow path for every input whose result underflows (several times
    slower on real attention blocks, where most logits are very negative), so logits are
    clamped at a floor whose exponential is still a normal number: about 4e-34 in float32
    and 1e-303 in float64, negligible against a row total of at least ``sqrt(tiny)``.
    ``exact_zeros`` then subtracts that value (with a margin) and clips at 0, so that
    logits of ``-inf`` give exactly 0 -- needed where the weights themselves are returned.
    """
    floor = math.log(torch.finfo(logits.dtype).tiny) + 10.0
    logits.clamp_(min=floor).exp_()
    if exact_zeros:
        logits.sub_(1.001 * math.exp(floor)).clamp_(min=0.0)
    return logits


def csr_parts(parts):
    """CSR parts ``(crow, col, val)`` of chunks of rows given as (entries per row, columns,
    values), in row order."""
    counts, cols, vals = zip(*parts)
    crow = torch.cat([counts[0].new_zeros(1), torch.cat(counts).cumsum(0)])  # (rows + 1,)
    return crow, torch.cat(cols), torch.cat(vals)


def exact_sq_dist(q, x, working_memory):
    """Squared distances ``||q_i - x_j||^2`` from explicit differences (no cancellation),
    summed feature by feature: one (b, n) temporary instead of the (b, n, d) differences."""
    n, d = x.shape
    if torch.is_grad_enabled() and (q.requires_grad or x.requires_grad):
        out = (q[:, None, 0] - x[None, :, 0]) ** 2  # (n_q, n)
        for j in range(1, d):
            out = out + (q[:, None, j] - x[None, :, j]) ** 2
        return out
    out = torch.empty(q.shape[0], n, dtype=q.dtype, device=q.device)  # (n_q, n)
    step = chunk_rows(q.shape[0], n * q.element_size(), working_memory)
    diff = out.new_empty(min(step, q.shape[0]), n)  # (b, n)
    for s in range(0, q.shape[0], step):
        block, qb = out[s : s + step], q[s : s + step]  # (b, n), (b, d)
        torch.sub(qb[:, :1], x[:, 0], out=block).square_()
        for j in range(1, d):
            block.add_(torch.sub(qb[:, j : j + 1], x[:, j], out=diff[: len(qb)]).square_())
    return out


def transform(x, center, h):
    """Scaled coordinates: ``(x - center) / h`` for bandwidths ``h`` (d,), or
    ``(x - center) @ h`` for a projection matrix ``h`` (d, r) (a learned metric)."""
    return (x - center) / h if h.ndim == 1 else (x - center) @ h


def augment_keys(xs):
    """The key side of :func:`augmented_sq_dist`: ``[x, 1, |x|^2]`` (n, d + 2) and the
    largest ``|x|^2``, computed once for every chunk of queries."""
    x2 = (xs * xs).sum(1, keepdim=True)  # (n, 1)
    return torch.cat([xs, torch.ones_like(x2), x2], dim=1), x2.detach().max()


def augmented_sq_dist(qs, xs, refine=False, out=None, keys=None):
    """``|q|^2 + |x|^2 - 2 q.x`` as one matrix product of augmented inputs, clipped at 0
    (written into ``out`` (b, n) when given; ``keys`` is :func:`augment_keys` of ``xs``
    when the caller has it).

    The expansion's absolute error is about ``eps * (|q|^2 + |x|^2)``: harmless for the
    Gaussian, but a kernel with a kink at 0 (through ``sqrt``) turns it into a relative
    error of ``sqrt(eps)`` when a query sits on a key. ``refine`` recomputes those
    near-coincident pairs from explicit differences.
    """
    q2 = (qs * qs).sum(1, keepdim=True)  # (b, 1)
    b, x2_max = augment_keys(xs) if keys is None else keys  # (n, d + 2), ()
    a = torch.cat([-2.0 * qs, q2, torch.ones_like(q2)], dim=1)  # (b, d + 2)
    d2 = torch.mm(a, b.T, out=out).clamp_(min=0.0)  # (b, n)
    if refine and d2.numel():
        noise = 64 * torch.finfo(d2.dtype).eps * (q2.detach().max() + x2_max)
        i, j = torch.nonzero(d2.detach() < noise, as_tuple=True)
        if len(i):
            exact = ((qs[i] - xs[j]) ** 2).sum(1)
            # In place into a given block; out of place otherwise, for autograd.
            d2 = d2.index_put_((i, j), exact) if out is not None else d2.index_put((i, j), exact)
    return d2


def key_center(x, log_w=None):
    """Where keys are centered: the coordinate-wise median of those that carry weight (of
    all without ``log_w``). Translation changes no weight, and centered keys keep the
    expansion ``|q|^2 + |x|^2 - 2 q.x`` precise far from the origin. A median, not the
    mean: one far row (1e80) would drag the mean so far that every other key rounds to
    the same centered coordinate."""
    keys = x if log_w is None else x[torch.isfinite(log_w)]  # (m, d)
    if keys.shape[0] == 0:
        return x.new_zeros(x.shape[1])
    return keys.median(0).values  # (d,)


def values_and_ones_t(v):
    """(t + 1, n): the values and a ones column, transposed, so that one product gives the
    weighted sums and their normalizer (BLAS is much faster at ``v1t @ weights.T`` than at
    ``weights @ v1`` for few outputs)."""
    return torch.cat([v, v.new_ones(v.shape[0], 1)], dim=1).T.contiguous()


def fused_gaussian_keys(xs, log_w, c):
    """(n, r + 2) key side of the fused Gaussian-family logits:
    ``[2c q, -c |q|^2, 1] @ keys.T = -c |q - x|^2 + log_w - max(log_w) <= 0``, one matrix
    product with no max pass."""
    shift = log_w[torch.isfinite(log_w)].max()
    bias = -c * (xs * xs).sum(1) + (log_w - shift)  # (n,)
    return torch.cat([xs, xs.new_ones(xs.shape[0], 1), bias[:, None]], dim=1)


class KeyTensors(NamedTuple):
    """What every call with the same keys, values, bandwidths and kernel shares
    (:func:`prepare_keys`): computed once, e.g. at fit, and handed to each call."""

    center: torch.Tensor  # (d,) the mean of the keys that carry weight
    xs: torch.Tensor  # (n, r) scaled, centered keys
    log_w: torch.Tensor  # (n,) log weights (zeros for none)
    v1t: torch.Tensor  # (t + 1, n) values and a ones row
    b_fused: object  # (n, r + 2) fused Gaussian-family key side, or None


def prepare_keys(x, v, h, kernel, log_w=None, center=None):
    """The :class:`KeyTensors` of keys ``x`` (n, d), values ``v`` (n, t), bandwidths or
    projection ``h`` and log weights ``log_w`` (n,) under ``kernel``, centered on
    ``center`` (d,) (by default :func:`key_center`; the shards of one key set share
    theirs, so that their distances round alike)."""
    center = key_center(x, log_w) if center is None else center  # (d,)
    xs = transform(x, center, h)  # (n, r)
    log_w = x.new_zeros(x.shape[0]) if log_w is None else log_w  # (n,)
    c = kernel.quadratic_coef
    b_fused = None if c is None else fused_gaussian_keys(xs, log_w, c)  # (n, r + 2)
    return KeyTensors(center, xs, log_w, values_and_ones_t(v), b_fused)


class PoolingCall:
    """Scaled keys, values and weights shared by every chunk of one call."""

    def __init__(self, x, v, h, kernel, log_w, self_log_w, working_memory, keys=None):
        keys = prepare_keys(x, v, h, kernel, log_w) if keys is None else keys
        self.center, self.xs, self.log_w, self.v1t, self.b_fused = keys
        self.x, self.h = x, h
        self._augmented = None
        self.kernel = kernel
        # log of the self weight left after removing one unit (leave-one-out), or None.
        self.self_log_w = self_log_w
        self.working_memory = working_memory

    @property
    def positive(self):
        """(n,) the keys that can receive attention (a pass over the keys: only the careful
        path and the compiled loop need it, not every small call)."""
        return torch.isfinite(self.log_w)

    def scale(self, q):
        return transform(q, self.center, self.h)

    def unit_sq_dist(self, q):
        """Squared distances (b, n) in the metric divided by its largest scale: the same
        order as the scaled distances, which overflow (to inf, or to NaN between infinite
        coordinates) at bandwidths near the smallest float."""
        # From the raw differences q - x: no center's rounding, so keys tied in distance
        # stay tied (the nearest-key fallback keeps them all), whatever the keys' center
        # (weighted or repeated rows, shards); a distance is 0 exactly at q = x.
        x = self.x
        n, d = x.shape
        out = torch.empty(q.shape[0], n, dtype=q.dtype, device=q.device)  # (b, n)
        step = chunk_rows(q.shape[0], n * d * q.element_size(), self.working_memory)
        for s in range(0, q.shape[0], step):
            out[s : s + step] = tie_exact_sq_dist(q[s : s + step], x, self.h)  # (c, n)
        return out

    def loo_adjust(self, logits, rows):
        """Give each query row its own key's leave-one-out weight (rows index the keys)."""
        if self.self_log_w is not None:
            set_self_(logits, rows, self_logits(self.kernel, self.self_log_w, rows))

    def fast_logits(self, qs, rows, out=None):
        """Logits of a chunk by matrix products; max-free for the Gaussian family (written
        into ``out`` (b, n) when given)."""
        c = self.kernel.quadratic_coef
        if c is not None:
            a = torch.cat([2.0 * c * qs, -c * (qs * qs).sum(1, keepdim=True),
                           qs.new_ones(qs.shape[0], 1)], dim=1)  # (b, d + 2)
            logits = torch.mm(a, self.b_fused.T, out=out)  # (b, n)
        else:
            if self._augmented is None:  # once per call (a worker may race: same value)
                self._augmented = augment_keys(self.xs)
            d2 = augmented_sq_dist(qs, self.xs, refine=True, keys=self._augmented)  # (b, n)
            logits = self.kernel.log_profile_sq(d2)  # (b, n)
            logits += self.log_w
        self.loo_adjust(logits, rows)
        return logits

    def careful_logits(self, q, rows):
        """Exact-distance logits of queries ``q`` (b, d), max-subtracted; rows with no
        kernel mass fall back to the nearest positive-weight key(s). Returns the logits
        and the number of such rows."""
        d2 = exact_sq_dist(self.scale(q), self.xs, self.working_memory)  # (b, n)
        # Overflowed distances: no kernel weight (the nearest keys are found below).
        d2 = torch.nan_to_num_(d2, nan=math.inf, posinf=math.inf)
        logits = self.kernel.log_profile_sq(d2) + self.log_w  # (b, n)
        self.loo_adjust(logits, rows)
        m = logits.amax(1, keepdim=True)  # (b, 1)
        empty = torch.isneginf(m[:, 0])  # (b,)
        n_empty = int(empty.sum())
        if n_empty:
            # Leave-one-out: the nearest other key(s).
            eligible = (self.positive if self.self_log_w is None
                        else other_keys(self.positive, rows[empty]))  # (n,) or (e, n)
            nearest, _ = nearest_keys(self.unit_sq_dist(q[empty]), eligible)  # (e, n)
            logits[empty] = torch.where(nearest, self.log_w, -math.inf)
            m = logits.amax(1, keepdim=True)
        return logits.sub_(m), n_empty

    def careful_sums(self, q, rows):
        """Weighted sums ``(b, t + 1)`` of the careful path for queries ``q`` (b, d), its
        weights and the number of rows that fell back to the nearest key(s)."""
        careful, n_empty = self.careful_logits(q, rows)
        careful = exp_(careful)  # (b, n)
        return (self.v1t @ careful.T).T, careful, n_empty


def run_chunks(pool_chunk, q, step, n, blocks, needs_grad, *, commit=None,
                max_workers=None):
    """Call ``pool_chunk(s, block)`` for the chunks of ``step`` rows of queries ``q``, with
    ``blocks`` (step, n) blocks like ``q`` per worker, one (blocks, step, n) tensor (None
    for ``blocks=0``); with ``commit``, ``commit(pool_chunk(s, block))`` in the order of
    the chunks (:func:`~sklearn_nw._workers.reduce_in_order`).

    With several torch threads, each pass over a cache-sized chunk would be a short OpenMP
    region ending in a barrier, a few thousand per call, each of which can wait out a
    scheduler time slice beside a busy process (see :mod:`sklearn_nw._workers`). So the
    chunks go to the workers (at most ``max_workers``) when there are at least two per
    worker; fewer run on the calling thread, as do chunks under autograd (``needs_grad``:
    the chunks write into shared outputs).
    """
    n_q = q.shape[0]
    starts = range(0, n_q, step)

    def new_block():
        return q.new_empty(blocks, min(step, n_q), n) if blocks else None

    if needs_grad or not worth_sharing(len(starts), q.device):
        block = new_block()
        # A call of few pairs on this thread alone: its team of threads would meet at a
        # barrier after every short pass (a learned bandwidth on 240 rows and 8 features
        # beside busy processes took 14 s with two threads, 1.5 s with one).
        with serial_if_small(n_q * n, q.device):
            for s in starts:
                part = pool_chunk(s, block)
                if commit is not None:
                    commit(part)
        return
    if commit is None:
        on_workers(starts, pool_chunk, q.device, init=new_block, max_workers=max_workers)
    else:
        reduce_in_order(starts, pool_chunk, commit, q.device, init=new_block,
                        max_workers=max_workers)


def attention_pool(q, x, v, h, kernel, *, log_w=None, self_log_w=None,
                   return_attention=False, exact_zeros=False, working_memory=1024,
                   keys=None):
    """Nadaraya-Watson pooling of values ``v`` at queries ``q`` with keys ``x``.

    Parameters
    ----------
    q : Tensor (n_q, d)
        Queries. When ``self_log_w`` is given, ``q`` must be ``x`` (leave-one-out).
    x : Tensor (n, d)
        Keys.
    v : Tensor (n, t)
        Values.
    h : Tensor (d,) or (d, r)
        Bandwidths, or a projection matrix: distances are then ``||(q - x) @ h||``.
    kernel : Kernel
        Provides ``log_profile_sq``, ``support`` and ``quadratic_coef``.
    log_w : Tensor (n,), optional
        Log sample weights (``-inf`` for zero weight).
    self_log_w : Tensor (n,), optional
        Leave-one-out: query i gives key i this log weight instead of ``log_w[i]``.
    return_attention : bool
        Also return the attention matrix: dense, or CSR parts for compact kernels.
    exact_zeros : bool
        Weights that underflow are exactly 0 (always so with ``return_attention``); else
        they may be as large as ``exp(log(tiny) + 10)``, negligible in a weighted mean but
        not a probability that must be 0 (see :func:`exp_`).
    working_memory : float
        MiB that the ``(chunk, n)`` temporaries may take.
    keys : KeyTensors, optional
        :func:`prepare_keys` of ``x, v, h, kernel, log_w``, computed once for many calls.
    """
    n_q, n = q.shape[0], x.shape[0]
    problem = PoolingCall(x, v, h, kernel, log_w, self_log_w, working_memory, keys)
    out = q.new_empty(n_q, v.shape[1])  # (n_q, t)
    sparse = return_attention and kernel.is_compact
    dense_att = q.new_empty(n_q, n) if return_attention and not sparse else None  # (n_q, n)
    tiny = math.sqrt(torch.finfo(q.dtype).tiny)
    # Each (chunk, n) block within the cache (see CACHE_BYTES).
    step = chunk_rows(n_q, n * q.element_size() * N_TEMPORARIES, working_memory,
                      cap_bytes=N_TEMPORARIES * CACHE_BYTES)
    parts = {}  # chunk start -> rows that fell back, and the chunk's sparse attention

    def pool_chunk(s, block):
        rows = torch.arange(s, min(s + step, n_q), device=q.device)  # (b,)
        qs = problem.scale(q[s : s + step])  # (b, d)
        out_block = None if block is None else block[0, : len(rows)]
        logits = problem.fast_logits(qs, rows, out=out_block)  # (b, n)
        if kernel.quadratic_coef is None:
            m = logits.amax(1, keepdim=True)  # (b, 1)
            redo = torch.isneginf(m[:, 0])  # (b,)
            logits.sub_(m.masked_fill_(redo[:, None], 0.0))
        weights = exp_(logits, exact_zeros=return_attention or exact_zeros)  # (b, n)
        num_den = (problem.v1t @ weights.T).T  # (b, t + 1)
        # Every logit is <= 0 (max-subtracted, or so by construction for the fused
        # Gaussian), so a row total above n is cancellation in |q|^2 + |x|^2 - 2 q.x.
        total = num_den[:, -1]  # (b,)
        # (b,) underflowed, empty, NaN or overflowed
        redo = ~((total > tiny) & (total <= 1.001 * n))
        n_empty = 0
        if bool(redo.any()):
            num_den[redo], careful, n_empty = problem.careful_sums(
                q[s : s + step][redo], rows[redo])
            weights[redo] = careful
        den = num_den[:, -1:]  # (b, 1)
        out[s : s + step] = num_den[:, :-1] / den
        sparse_part = None
        if return_attention:
            weights /= den
            if sparse:
                nonzero = weights != 0  # (b, n)
                sparse_part = (nonzero.sum(1), nonzero.nonzero()[:, 1], weights[nonzero])
            else:
                dense_att[s : s + step] = weights
        parts[s] = (n_empty, sparse_part)

    with full_precision():
        needs_grad = torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (q, x, v, h, log_w, self_log_w))
        run_chunks(pool_chunk, q, step, n, blocks=int(kernel.quadratic_coef is not None),
                    needs_grad=needs_grad)
    n_fallback = sum(n_empty for n_empty, _ in parts.values())
    sparse_parts = [parts[s][1] for s in sorted(parts)]
    return PoolResult(out, csr_parts(sparse_parts) if sparse else dense_att, n_fallback)


def fused_pool(q, x, v, h, kernel, *, policy, log_w=None, working_memory=1024, keys=None):
    """:func:`attention_pool` without attention or leave-one-out, the sums computed by
    the compiled fused loop of ``policy`` (a :class:`sklearn_nw._compiled.CompilePolicy`,
    which builds and keeps it; no ``(chunk, n)`` block is stored). Rows whose sums
    underflow are redone on the careful path, as there. ``keys`` is as in
    :func:`attention_pool`.

    Raises
    ------
    sklearn_nw._compiled.CompileError
        If torch.compile cannot build the loop here.
    """
    problem = PoolingCall(x, v, h, kernel, log_w, None, working_memory, keys)
    positive = problem.log_w[problem.positive]
    key_term = problem.log_w - positive.max()  # (n,) <= 0, -inf for zero weight
    if kernel.quadratic_coef is None:
        key_term = key_term.exp()
    qs = problem.scale(q)  # (n_q, r)
    with full_precision():
        num_den = policy.sums(qs, problem.xs, key_term, problem.v1t, kernel)  # (n_q, t + 1)
        total = num_den[:, -1]
        tiny = math.sqrt(torch.finfo(q.dtype).tiny)
        redo = torch.nonzero(~(total > tiny))[:, 0]  # underflowed, empty or NaN
        n_fallback = 0
        step = chunk_rows(len(redo), x.shape[0] * q.element_size() * (x.shape[1] + 2),
                          working_memory)
        for s in range(0, len(redo), step):
            rows = redo[s : s + step]
            num_den[rows], _, n_empty = problem.careful_sums(q[rows], rows)
            n_fallback += n_empty
    return PoolResult(num_den[:, :-1] / num_den[:, -1:], None, n_fallback)


# -- sums restricted to candidate keys --------------------------------------------------
