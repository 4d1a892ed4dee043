"""Nadaraya-Watson attention sums, chunked and in log space. Torch only.

Notation: ``q`` (n_q, d) queries, ``x`` (n, d) keys (the training inputs), ``v`` (n, t)
values, ``h`` (d,) bandwidths, ``log_w`` (n,) log sample weights. Inputs are centred on the
keys' mean and divided by ``h``; in those scaled coordinates the attention logit of key j
for query i is ``log k(u_ij**2) + log_w_j`` with ``u_ij = ||q_i - x_j||``, and the output is

    out_i = sum_j softmax_j(logit_ij) v_j.

Only ``(chunk, n)`` blocks of logits ever exist. A row whose logits all underflow (a query
far from every key, a tiny bandwidth) or whose kernel mass is zero (a compact kernel with no
key in reach) is recomputed on the *careful path*: exact differences instead of the
``|q|^2 + |x|^2 - 2 q.x`` expansion, a max-subtracted softmax, which is the
nearest-neighbour limit when everything else underflows, and, if no key has positive kernel
weight, the nearest key(s) as fallback.

The same module holds the leave-one-out sums (the loss and its gradient for learning
bandwidths, a grid of bandwidths in one pass) and pooling over given neighbour lists (k
nearest, or inside a compact kernel's support), in CSR layout.
"""

import contextlib
import math
from typing import NamedTuple

import torch

# (chunk, n) temporaries per query row, in units of n * itemsize: the logits block, one more
# for a kernel's out-of-place log-profile, one for the attention copy.
_N_TEMPORARIES = 3
# Chunks are also capped to stay in cache: the passes over a (chunk, n) block are memory
# bound, and a block that fits in L2/L3 makes them several times faster.
_CACHE_BYTES = 4 * 2**20


class PoolResult(NamedTuple):
    out: torch.Tensor  # (n_q, t)
    attention: object  # None, a dense (n_q, n) tensor, or CSR (crow, col, val) tensors
    n_fallback: int  # rows with no key inside the kernel's support


def resolve_device(device):
    """Turn ``"cpu"``, ``"cuda[:i]"``, ``"mps"`` or ``"auto"`` into an available torch.device."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a valid torch device: {exc}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} was requested but CUDA is not available on this machine "
                "(torch.cuda.is_available() is False). Use device='cpu' or device='auto'."
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r} was requested but only {torch.cuda.device_count()} "
                "CUDA device(s) are present."
            )
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            f"device={device!r} was requested but MPS is not available on this machine "
            "(torch.backends.mps.is_available() is False). Use device='cpu' or device='auto'."
        )
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device={device!r} is not supported; use 'cpu', 'cuda', 'mps' or 'auto'.")
    return dev


@contextlib.contextmanager
def _compute_settings():
    """Full-precision float32 matmuls: TF32 would turn distances into noise."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


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


def chunk_rows(n_rows, row_bytes, working_memory):
    """Rows per chunk so that ``rows * row_bytes`` fits in ``working_memory`` MiB (>= 1)."""
    return max(1, min(n_rows, int(working_memory * 2**20) // max(1, row_bytes)))


def exact_sq_dist(q, x, working_memory):
    """Squared distances ``||q_i - x_j||^2`` from explicit differences (no cancellation)."""
    n, d = x.shape
    out = torch.empty(q.shape[0], n, dtype=q.dtype, device=q.device)  # (n_q, n)
    step = chunk_rows(q.shape[0], n * d * q.element_size(), working_memory)
    for s in range(0, q.shape[0], step):
        diff = q[s : s + step, None, :] - x[None, :, :]  # (b, n, d)
        out[s : s + step] = torch.einsum("bnd,bnd->bn", diff, diff)
    return out


def transform(x, centre, h):
    """Scaled coordinates: ``(x - centre) / h`` for bandwidths ``h`` (d,), or
    ``(x - centre) @ h`` for a projection matrix ``h`` (d, r) (a learned metric)."""
    return (x - centre) / h if h.ndim == 1 else (x - centre) @ h


def _augmented_sq_dist(qs, xs, refine=False):
    """``|q|^2 + |x|^2 - 2 q.x`` as one matrix product of augmented inputs, clipped at 0.

    The expansion's absolute error is about ``eps * (|q|^2 + |x|^2)``: harmless for the
    Gaussian, but a kernel with a kink at 0 (through ``sqrt``) turns it into a relative
    error of ``sqrt(eps)`` when a query sits on a key. ``refine`` recomputes those
    near-coincident pairs from explicit differences.
    """
    q2 = (qs * qs).sum(1, keepdim=True)  # (b, 1)
    x2 = (xs * xs).sum(1, keepdim=True)  # (n, 1)
    a = torch.cat([-2.0 * qs, q2, torch.ones_like(q2)], dim=1)  # (b, d + 2)
    b = torch.cat([xs, torch.ones_like(x2), x2], dim=1)  # (n, d + 2)
    d2 = (a @ b.T).clamp_(min=0.0)  # (b, n)
    if refine and d2.numel():
        noise = 64 * torch.finfo(d2.dtype).eps * (q2.detach().max() + x2.detach().max())
        i, j = torch.nonzero(d2.detach() < noise, as_tuple=True)
        if len(i):
            d2 = d2.index_put((i, j), ((qs[i] - xs[j]) ** 2).sum(1))
    return d2


class _Problem:
    """Scaled keys, values and weights shared by every chunk of one call."""

    def __init__(self, x, v, h, kernel, log_w, self_log_w, working_memory):
        # Centre on the keys that carry weight: far zero-weight rows would cost precision.
        self.centre = x.mean(0) if log_w is None else x[torch.isfinite(log_w)].mean(0)  # (d,)
        self.h = h
        self.xs = transform(x, self.centre, h)  # (n, r)
        self.kernel = kernel
        n = x.shape[0]
        self.log_w = x.new_zeros(n) if log_w is None else log_w  # (n,)
        # log of the self weight left after removing one unit (leave-one-out), or None.
        self.self_log_w = self_log_w
        # (t + 1, n): values and a ones column, transposed: BLAS is much faster at
        # v1t @ weights.T than at weights @ v1 for few outputs.
        self.v1t = torch.cat([v, v.new_ones(n, 1)], dim=1).T.contiguous()
        self.working_memory = working_memory
        self.positive = torch.isfinite(self.log_w)  # (n,) keys that can receive attention
        c = kernel.quadratic_coef
        if c is not None:
            # Fused Gaussian logits: a @ b.T = -c |q - x|^2 + log_w - max(log_w) <= 0.
            shift = self.log_w[self.positive].max()
            bias = -c * (self.xs * self.xs).sum(1) + (self.log_w - shift)  # (n,)
            self.b_fused = torch.cat([self.xs, self.xs.new_ones(n, 1), bias[:, None]], dim=1)  # (n, d + 2)

    def scale(self, q):
        return transform(q, self.centre, self.h)

    def loo_adjust(self, logits, rows):
        """Give each query row its own key's leave-one-out weight (rows index the keys)."""
        if self.self_log_w is None:
            return
        r = torch.arange(len(rows), device=logits.device)
        # A zero-weight key's logit is already -inf; -inf - (-inf) would make it NaN.
        zero = torch.isneginf(self.log_w[rows])  # (b,)
        logits[r, rows] += torch.where(zero, 0.0, self.self_log_w[rows] - self.log_w[rows])

    def fast_logits(self, qs, rows):
        """Logits of a chunk by matrix products; max-free for the Gaussian family."""
        c = self.kernel.quadratic_coef
        if c is not None:
            a = torch.cat([2.0 * c * qs, -c * (qs * qs).sum(1, keepdim=True),
                           qs.new_ones(qs.shape[0], 1)], dim=1)  # (b, d + 2)
            logits = a @ self.b_fused.T  # (b, n)
        else:
            d2 = _augmented_sq_dist(qs, self.xs, refine=True)  # (b, n)
            logits = self.kernel.log_profile_sq(d2)  # (b, n)
            logits += self.log_w
        self.loo_adjust(logits, rows)
        return logits

    def careful_logits(self, qs, rows):
        """Exact-distance logits, max-subtracted; rows with no kernel mass fall back to the
        nearest positive-weight key(s). Returns the logits and the number of such rows."""
        d2 = exact_sq_dist(qs, self.xs, self.working_memory)  # (b, n)
        logits = self.kernel.log_profile_sq(d2) + self.log_w  # (b, n)
        self.loo_adjust(logits, rows)
        m = logits.amax(1, keepdim=True)  # (b, 1)
        empty = torch.isneginf(m[:, 0])  # (b,)
        if self.self_log_w is not None:
            d2[torch.arange(len(rows), device=d2.device), rows] = math.inf
        n_empty = int(empty.sum())
        if n_empty:
            d2e = d2[empty].masked_fill_(~self.positive, math.inf)  # (e, n)
            nearest = d2e == d2e.amin(1, keepdim=True)  # (e, n)
            logits[empty] = torch.where(nearest, self.log_w, -math.inf)
            m = logits.amax(1, keepdim=True)
        return logits.sub_(m), n_empty


def attention_pool(q, x, v, h, kernel, *, log_w=None, self_log_w=None,
                   return_attention=False, exact_zeros=False, working_memory=1024):
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
    """
    n_q, n = q.shape[0], x.shape[0]
    problem = _Problem(x, v, h, kernel, log_w, self_log_w, working_memory)
    out = q.new_empty(n_q, v.shape[1])  # (n_q, t)
    sparse = return_attention and kernel.is_compact
    dense_att = q.new_empty(n_q, n) if return_attention and not sparse else None  # (n_q, n)
    sparse_parts = []
    tiny = math.sqrt(torch.finfo(q.dtype).tiny)
    step = chunk_rows(n_q, n * q.element_size() * _N_TEMPORARIES, working_memory)
    step = max(1, min(step, _CACHE_BYTES // (n * q.element_size())))
    n_fallback = 0
    with _compute_settings():
        for s in range(0, n_q, step):
            rows = torch.arange(s, min(s + step, n_q), device=q.device)  # (b,)
            qs = problem.scale(q[s : s + step])  # (b, d)
            logits = problem.fast_logits(qs, rows)  # (b, n)
            if kernel.quadratic_coef is None:
                m = logits.amax(1, keepdim=True)  # (b, 1)
                redo = torch.isneginf(m[:, 0])  # (b,)
                logits.sub_(m.masked_fill_(redo[:, None], 0.0))
            weights = exp_(logits, exact_zeros=return_attention or exact_zeros)  # (b, n)
            num_den = (problem.v1t @ weights.T).T  # (b, t + 1)
            # Every logit is <= 0 (max-subtracted, or so by construction for the fused
            # Gaussian), so a row total above n is cancellation in |q|^2 + |x|^2 - 2 q.x.
            total = num_den[:, -1]  # (b,)
            redo = ~((total > tiny) & (total <= 1.001 * n))  # (b,) underflowed, empty, NaN or overflowed
            if bool(redo.any()):
                careful, n_empty = problem.careful_logits(qs[redo], rows[redo])
                n_fallback += n_empty
                careful = exp_(careful)  # (r, n)
                weights[redo] = careful
                num_den[redo] = (problem.v1t @ careful.T).T
            den = num_den[:, -1:]  # (b, 1)
            out[s : s + step] = num_den[:, :-1] / den
            if return_attention:
                weights /= den
                if sparse:
                    nonzero = weights != 0  # (b, n)
                    sparse_parts.append(
                        (nonzero.sum(1), nonzero.nonzero()[:, 1], weights[nonzero])
                    )
                else:
                    dense_att[s : s + step] = weights
    attention = dense_att
    if sparse:
        counts, cols, vals = zip(*sparse_parts)
        crow = torch.cat([counts[0].new_zeros(1), torch.cat(counts).cumsum(0)])  # (n_q + 1,)
        attention = (crow, torch.cat(cols), torch.cat(vals))
    return PoolResult(out, attention, n_fallback)


# -- leave-one-out sums --------------------------------------------------------------------
#
# Query i is training point i, which keeps ``self_log_w[i]`` (the log of its weight less one
# unit) on itself, so integer sample weights equal repeated rows.


def _loo_logits(qs, xs, kernel, log_w, self_log_w, rows, d2=None):
    """Leave-one-out logits of the key rows ``rows`` (b,) against all keys, differentiable.

    ``d2`` (b, n), the squared scaled distances, is computed from ``qs`` and ``xs`` unless
    given. Rows with zero kernel mass fall back to the nearest other positive-weight key(s),
    a constant in the parameters, as in :func:`attention_pool`."""
    if d2 is None:
        d2 = _augmented_sq_dist(qs, xs, refine=kernel.quadratic_coef is None)  # (b, n)
    r = torch.arange(len(rows), device=d2.device)  # (b,)
    logits = kernel.log_profile_sq(d2) + log_w  # (b, n)
    # A point's distance to itself is exactly 0 (the expansion leaves rounding noise).
    self_logits = kernel.log_profile_sq(d2.new_zeros(len(rows))) + self_log_w[rows]  # (b,)
    logits = logits.index_put((r, rows), self_logits)
    empty = torch.isneginf(logits.detach().amax(1))  # (b,)
    if bool(empty.any()):
        d2e = d2.detach()[empty].masked_fill(~torch.isfinite(log_w), math.inf)  # (e, n)
        d2e[torch.arange(d2e.shape[0], device=d2.device), rows[empty]] = math.inf
        fallback = torch.full_like(logits.detach(), -math.inf)  # (b, n)
        fallback[empty] = torch.where(d2e == d2e.amin(1, keepdim=True), log_w, -math.inf)
        logits = torch.where(empty[:, None], fallback, logits)
    return logits


def loo_loss(x, v, h, kernel, log_w, self_log_w, *, loss, rows=None, working_memory=1024,
             backward=False):
    """Sample-weighted mean leave-one-out loss, ``sum_i w_i l_i / sum_i w_i`` over ``rows``.

    Parameters
    ----------
    x : Tensor (n, d)
        Training inputs: the keys and, through ``rows``, the queries.
    v : Tensor (n, t)
        Targets for ``loss="squared_error"``; one-hot labels for ``loss="log_loss"``.
    h : Tensor (d,) or (d, r)
        Bandwidths or projection, possibly requiring grad.
    kernel : Kernel
    log_w, self_log_w : Tensor (n,)
        Log sample weights, and the log weight each point keeps on itself.
    loss : {"squared_error", "log_loss"}
    rows : Tensor (m,), optional
        Training rows used as queries (a minibatch); all rows when None.
    working_memory : float
        MiB for the ``(chunk, n)`` temporaries, which autograd keeps until each chunk's
        backward pass.
    backward : bool
        Back-propagate chunk by chunk, accumulating into ``h.grad``: memory stays bounded.

    Returns
    -------
    loss : float
    """
    n = x.shape[0]
    rows = torch.arange(n, device=x.device) if rows is None else rows
    w_rows = log_w[rows].exp()  # (m,)
    total = w_rows.sum()
    xs_graph = transform(x, x.mean(0), h)  # (n, r)
    # Chunks back-propagate into this detached copy; one final pass carries it to h.
    xs = xs_graph.detach().requires_grad_(backward)
    eps = torch.finfo(x.dtype).eps
    row_bytes = n * x.element_size() * 8
    step = min(chunk_rows(len(rows), row_bytes, working_memory),
               max(1, 4 * _CACHE_BYTES // row_bytes))
    value = 0.0
    if kernel.quadratic_coef is not None:
        weights = w_rows / total  # (m,)
        with _compute_settings(), torch.no_grad():
            value, grad = _gaussian_loo(xs.detach(), v, log_w, self_log_w, rows, weights,
                                        kernel.quadratic_coef, loss, step, backward)
        if backward:
            xs_graph.backward(grad)
        return value
    with _compute_settings(), torch.set_grad_enabled(backward):
        for s in range(0, len(rows), step):
            chunk = rows[s : s + step]  # (b,)
            logits = _loo_logits(xs[chunk], xs, kernel, log_w, self_log_w, chunk)  # (b, n)
            log_a = torch.log_softmax(logits, dim=1)  # (b, n)
            pooled = log_a.exp() @ v  # (b, t)
            if loss == "squared_error":
                per_row = ((pooled - v[chunk]) ** 2).sum(1)  # (b,)
            else:
                # Probability of the true class, clipped at eps as sklearn's log_loss does.
                p_true = (pooled * v[chunk]).sum(1)  # (b,)
                per_row = -torch.log(p_true.clamp(min=eps))
            part = (w_rows[s : s + step] * per_row).sum() / total
            if backward:
                part.backward()
            value += float(part.detach())
    if backward:
        xs_graph.backward(xs.grad)
    return value


def loo_loss_neighbours(x, v, h, kernel, log_w, self_log_w, *, loss, rows, neighbours,
                        backward=False):
    """:func:`loo_loss` with each query's keys restricted to candidate neighbours.

    ``neighbours`` (m, k) indexes the keys each query row of ``rows`` (m,) attends to (its
    k nearest, say); every row must be among its own candidates. Small (m, k) blocks, so
    plain autograd.
    """
    centre = x.mean(0)
    qs = transform(x[rows], centre, h)  # (m, r)
    ks = transform(x[neighbours], centre, h)  # (m, k, r)
    d2 = ((qs[:, None, :] - ks) ** 2).sum(-1)  # (m, k)
    is_self = neighbours == rows[:, None]  # (m, k)
    logits = torch.where(is_self, self_log_w[rows][:, None], log_w[neighbours])  # (m, k)
    logits = logits + kernel.log_profile_sq(torch.where(is_self, 0.0, d2))
    empty = torch.isneginf(logits.detach().amax(1))  # (m,)
    if bool(empty.any()):
        d2e = d2.detach().masked_fill(is_self | torch.isneginf(log_w[neighbours]), math.inf)
        nearest = torch.where(d2e == d2e.amin(1, keepdim=True), log_w[neighbours], -math.inf)
        logits = torch.where(empty[:, None], nearest, logits)
    with torch.set_grad_enabled(backward):
        pooled = (torch.softmax(logits, dim=1)[:, :, None] * v[neighbours]).sum(1)  # (m, t)
        target = v[rows]  # (m, t)
        if loss == "squared_error":
            per_row = ((pooled - target) ** 2).sum(1)  # (m,)
        else:
            p_true = (pooled * target).sum(1)  # (m,)
            per_row = -torch.log(p_true.clamp(min=torch.finfo(x.dtype).eps))
        w = log_w[rows].exp()  # (m,)
        value = (w * per_row).sum() / w.sum()
    if backward:
        value.backward()
    return float(value.detach())


def _gaussian_loo(xs, v, log_w, self_log_w, rows, weights, c, loss, step, need_grad,
                  pooled=None):
    """Leave-one-out loss of a Gaussian-family kernel and its gradient in the scaled
    coordinates ``xs`` (n, r), written out by hand: a few passes over each (b, n) block
    instead of the two dozen autograd makes.

    With logits ``S_ij = -c |q_i - x_j|^2 + log_w_j`` (the self entry ``self_log_w_i``),
    attention ``P = softmax(S)``, predictions ``p_i = sum_j P_ij v_j`` and
    ``g_i = dL/dp_i``, the softmax gives ``G_ij = dL/dS_ij = P_ij g_i . (v_j - p_i)``, and
    ``dS_ij/dq_i = -2c (q_i - x_j) = -dS_ij/dx_j`` off the diagonal (the self entry is a
    constant), so both gradients are matrix products of G. With ``loss=None`` it only writes
    the leave-one-out predictions into ``pooled`` (m, t).
    """
    n = xs.shape[0]
    eps = torch.finfo(xs.dtype).eps
    tiny = math.sqrt(torch.finfo(xs.dtype).tiny)
    x2 = (xs * xs).sum(1)  # (n,)
    # [2c q, -c |q|^2, 1] @ keys_t = -c |q - x|^2 + log_w - max(log_w) <= 0: logits that need
    # no max pass (rows that underflow are redone below). Skinny products are laid out as
    # (k, n) @ (n, b): several times faster in BLAS.
    shift = log_w[torch.isfinite(log_w)].max()
    keys_t = torch.cat([xs, xs.new_ones(n, 1), (log_w - shift - c * x2)[:, None]],
                       dim=1).T.contiguous()  # (r + 2, n)
    v1_t = torch.cat([v, v.new_ones(n, 1)], dim=1).T.contiguous()  # (t + 1, n)
    v_t = v.T.contiguous()  # (t, n)
    xs1 = torch.cat([xs, xs.new_ones(n, 1)], dim=1)  # (n, r + 1)
    xs1_t = xs1.T.contiguous()  # (r + 1, n)
    grad = torch.zeros_like(xs) if need_grad else None  # (n, r)
    value = 0.0
    for s in range(0, len(rows), step):
        chunk = rows[s : s + step]  # (b,)
        b = len(chunk)
        r = torch.arange(b, device=xs.device)
        qs1 = xs1[chunk]  # (b, r + 1)
        q2 = x2[chunk, None]  # (b, 1)
        logits = torch.cat([2.0 * c * qs1[:, :-1], -c * q2, qs1[:, -1:]], dim=1) @ keys_t
        logits[r, chunk] = self_log_w[chunk] - shift  # (b, n)
        e = exp_(logits, exact_zeros=False)  # (b, n)
        num_den = (v1_t @ e.T).T  # (b, t + 1)
        low = num_den[:, -1] < tiny  # (b,) every weight underflowed: redo max-subtracted
        if bool(low.any()):
            again = torch.cat([2.0 * c * qs1[low, :-1], -c * q2[low], qs1[low, -1:]], dim=1)
            again = again @ keys_t  # (l, n)
            again[torch.arange(len(again), device=xs.device), chunk[low]] = (
                self_log_w[chunk[low]] - shift
            )
            e[low] = exp_(again - again.amax(1, keepdim=True), exact_zeros=False)
            num_den[low] = (v1_t @ e[low].T).T
        z = num_den[:, -1:]  # (b, 1)
        pred = num_den[:, :-1] / z  # (b, t)
        if pooled is not None:
            pooled[s : s + step] = pred
        if loss is None:
            continue
        target = v[chunk]  # (b, t)
        w = weights[s : s + step, None]  # (b, 1)
        if loss == "squared_error":
            residual = pred - target  # (b, t)
            value += float((w * residual * residual).sum())
            g = 2.0 * w * residual  # (b, t)
        else:
            p_true = (pred * target).sum(1, keepdim=True)  # (b, 1)
            value += float(-(w * torch.log(p_true.clamp(min=eps))).sum())
            g = torch.where(p_true > eps, -w / p_true, 0.0) * target  # (b, t)
        if not need_grad:
            continue
        gz = g / z  # (b, t)
        gv = gz * v_t if v.shape[1] == 1 else gz @ v_t  # (b, n)
        G = e.mul_(gv.sub_((gz * pred).sum(1, keepdim=True)))  # (b, n) = dL/dS
        G[r, chunk] = 0.0
        gx = (xs1_t @ G.T).T  # (b, r + 1): G @ x and the row sums of G
        grad.index_add_(0, chunk, -2.0 * c * (gx[:, -1:] * qs1[:, :-1] - gx[:, :-1]))
        gq = (qs1.T @ G).T  # (n, r + 1): G.T @ q and the column sums of G
        grad += 2.0 * c * (gq[:, :-1] - gq[:, -1:] * xs)
    return value, grad


def loo_grid_pool(x, v, hs, kernel, log_w, self_log_w, *, rows=None, working_memory=1024):
    """Leave-one-out pooled values for a grid of bandwidth vectors, in one pass.

    The per-feature squared differences of each block of queries are computed once and
    shared by every grid point; when all grid points are multiples of the first, one
    block of scaled squared distances is shared instead. Gaussian-family kernels skip
    both: their logits are one small matrix product per grid point.

    Parameters
    ----------
    x : Tensor (n, d)
    v : Tensor (n, t)
    hs : Tensor (G, d)
        Bandwidth vectors.
    kernel, log_w, self_log_w
        As in :func:`loo_loss`.
    rows : Tensor (m,), optional
        Training rows to predict; all rows when None.

    Returns
    -------
    pooled : Tensor (G, m, t)
        ``pooled[g, i]``: the leave-one-out prediction of ``rows[i]`` with bandwidth ``hs[g]``.
    """
    n, d = x.shape
    rows_all = torch.arange(n, device=x.device) if rows is None else rows
    ratios = hs / hs[0]  # (G, d)
    isotropic = bool((ratios == ratios[:, :1]).all())
    xs = transform(x, x.mean(0), hs[0])  # (n, d)
    width = 1 if isotropic else d
    row_bytes = n * x.element_size() * (_N_TEMPORARIES + width)
    m = len(rows_all)
    step = min(chunk_rows(m, row_bytes, working_memory), max(1, 4 * _CACHE_BYTES // row_bytes))
    v1t = torch.cat([v, v.new_ones(n, 1)], dim=1).T.contiguous()  # (t + 1, n)
    pooled = x.new_empty(len(hs), m, v.shape[1])  # (G, m, t)
    if kernel.quadratic_coef is not None:
        # The fused Gaussian logits cost a (b, r + 1) @ (r + 1, n) product per grid point,
        # less than sharing explicit distances would.
        centre = x.mean(0)
        with _compute_settings():
            for g in range(len(hs)):
                _gaussian_loo(transform(x, centre, hs[g]), v, log_w, self_log_w, rows_all,
                              None, kernel.quadratic_coef, None, step, False, pooled[g])
        return pooled
    with _compute_settings():
        for s in range(0, m, step):
            rows = rows_all[s : s + step]  # (b,)
            if isotropic:
                d2_first = _augmented_sq_dist(xs[rows], xs, refine=True)  # (b, n)
            else:
                diff2 = (xs[rows, None, :] - xs[None, :, :]) ** 2  # (b, n, d)
            for g in range(len(hs)):
                if isotropic:
                    d2 = d2_first / ratios[g, 0] ** 2  # (b, n)
                else:
                    d2 = diff2 @ ratios[g] ** -2  # (b, n)
                logits = _loo_logits(None, None, kernel, log_w, self_log_w, rows, d2=d2)
                logits -= logits.amax(1, keepdim=True)
                num_den = (v1t @ exp_(logits).T).T  # (b, t + 1)
                pooled[g, s : s + step] = num_den[:, :-1] / num_den[:, -1:]
    return pooled


# -- neighbour-restricted sums ---------------------------------------------------------------


def neighbour_pool(d2, indices, indptr, v, kernel, *, log_w=None, return_attention=False):
    """Nadaraya-Watson pooling over given candidate keys (a k-nearest or radius graph).

    Query i attends only to keys ``indices[indptr[i]:indptr[i + 1]]``, at squared scaled
    distances ``d2`` of the same layout (CSR). A query whose candidates all have zero kernel
    weight gets its nearest positive-weight candidate(s), as in :func:`attention_pool`;
    every query needs at least one candidate of positive weight.

    Parameters
    ----------
    d2 : Tensor (nnz,)
    indices : Tensor (nnz,) long
    indptr : Tensor (n_q + 1,) long
    v : Tensor (n, t)
    kernel : Kernel
    log_w : Tensor (nnz,), optional
        Log weight of each candidate pair (a key's sample weight, or a part of it).
    return_attention : bool
        Also return the attention as CSR parts ``(indptr, indices, values)``.

    Returns
    -------
    PoolResult
    """
    tiny = math.sqrt(torch.finfo(d2.dtype).tiny)
    logits = kernel.log_profile_sq(d2)  # (nnz,)
    if log_w is not None:
        # Shifted by the largest weight: every logit <= 0, so no max pass per row.
        logits += log_w - log_w[torch.isfinite(log_w)].max()
    weights = exp_(logits, exact_zeros=return_attention)  # (nnz,)
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
        sub = _neighbour_pool_careful(d2[pick], indices[pick], sub_indptr, v, kernel,
                                      None if log_w is None else log_w[pick], return_attention)
        num[rows], den[rows] = sub.out, 1.0
        n_fallback = sub.n_fallback
        if return_attention:
            attention[2][pick] = sub.attention[2]
    return PoolResult(num / den[:, None], attention, n_fallback)


def _neighbour_pool_careful(d2, indices, indptr, v, kernel, log_w, return_attention):
    """:func:`neighbour_pool` with a max pass per row and the nearest-key fallback."""
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
        d2e = torch.where(eligible, d2, math.inf)
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
