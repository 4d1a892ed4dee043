"""Local polynomial regression on top of the attention weights. Torch only.

For a query ``q`` with Nadaraya-Watson attention ``a_j`` (rows summing to 1) over keys
``x_j`` (scaled coordinates), degree ``p`` fits the kernel-weighted least squares

    beta(q) = argmin_beta  sum_j a_j (v_j - z_j . beta)**2,   z_j = phi(x_j - q),

with ``phi(u) = [1, u]`` (degree 1, local-linear) or ``[1, u, u_k u_l for k <= l]``
(degree 2, local-quadratic), and predicts the intercept ``beta_0(q)``. The prediction is
linear in the values: ``sum_j l_j v_j`` with the *equivalent kernel*

    l_j = a_j z_j . c,   c = M^-1 e_1,   M = sum_j a_j z_j z_j^T,

whose entries sum to 1 (``z_j . e_1 = 1``) and may be negative. Degree 0 is Nadaraya-Watson
itself (``M = 1``, ``l = a``). The weights being the attention of any route (dense, a
compact kernel's support, the k nearest, leave-one-out), so is the local fit.

A query whose local design is singular (fewer keys with weight than ``phi`` has terms, or
keys on a lower-dimensional set) has no unique fit: it is reported, and the caller keeps
its Nadaraya-Watson value. Singular means that the moment matrix, scaled to a unit
diagonal, has a smallest eigenvalue below ``sqrt(eps)`` times its largest: the solve there
would lose more than half the digits.

A local polynomial extrapolates: at a query beyond the data, or with a wide bandwidth near
its edge, the intercept can leave the range of every target that carries weight there (a
local-linear fit of a concave trend, at the largest input). A bounded fit (``bounded``,
:func:`bound`) cannot: its correction of the Nadaraya-Watson value ``m = a . v`` is
shrunk, ``m + lam (beta_0 - m)`` with the largest ``lam`` in [0, 1] that keeps each output
within [min, max] of the targets of the keys whose attention is at least ``RANGE_SHARE``
times the query's largest. With one ``lam`` per query (over all its outputs) the
prediction is still its equivalent kernel ``a + lam (l - a)`` times the values (a kernel
that now depends on them); the leave-one-out fits the CV estimators rank by are bounded
the same way, so their choice sees the rule.
"""

import torch

# Keys whose attention is below this share of a query's largest do not widen the range its
# fit is bounded to: for the Gaussian kernel, those whose squared scaled distance exceeds
# the nearest's by more than 2 ln(1000) = 13.8 (3.7 bandwidths from a query on a key). A
# far query's weight sits on its few nearest keys, whose targets then bound the fit; the
# range of every key with any weight (share 0) is, for the Gaussian, the whole training
# range, which left star98's outlying schools almost unbounded (bench_accuracy: R^2 0.716
# at shares 0 and 1e-8, 0.750-0.783 at 1e-4 to 1e-1; engel 0.840 at all of them; cancer
# 0.891-0.894).
RANGE_SHARE = 1e-3


def n_terms(n_coords, degree):
    """Columns of ``phi`` for ``n_coords`` coordinates: 1, then d, then d (d + 1) / 2."""
    return 1 + (n_coords if degree >= 1 else 0) + (
        n_coords * (n_coords + 1) // 2 if degree >= 2 else 0)


def design(u, degree):
    """``phi(u)`` (..., p) of differences ``u`` (..., r)."""
    columns = [u.new_ones(u.shape[:-1] + (1,))]
    if degree >= 1:
        columns.append(u)
    if degree >= 2:
        first, second = torch.triu_indices(u.shape[-1], u.shape[-1], device=u.device)
        columns.append(u[..., first] * u[..., second])
    return torch.cat(columns, dim=-1)


def _intercept_rows(M):
    """``c = M^-1 e_1`` (b, p) of moment matrices ``M`` (b, p, p), and which are singular
    (b,) (there ``c`` is 0)."""
    diag = torch.diagonal(M, dim1=1, dim2=2)  # (b, p)
    # A unit diagonal: differences and their products have different scales. A constant
    # in the gradient: c = S (S M S)^-1 S e_1 = M^-1 e_1 for any fixed S, and the rsqrt's
    # own derivative overflows on a tiny diagonal (a far query at a small bandwidth).
    s = torch.where(diag > 0, diag, 1.0).rsqrt().detach()  # (b, p)
    unit = M * s[:, :, None] * s[:, None, :]  # (b, p, p)
    # Only compared: no gradient (eigenvectors) needed.
    eigenvalues = torch.linalg.eigvalsh(unit.detach())  # (b, p) ascending
    tol = torch.finfo(M.dtype).eps ** 0.5
    singular = ~(eigenvalues[:, 0] > tol * eigenvalues[:, -1]) | ~(diag > 0).all(1)
    e1 = torch.zeros_like(s)
    e1[:, 0] = s[:, 0]
    safe = torch.where(singular[:, None, None], torch.eye(M.shape[1], dtype=M.dtype,
                                                          device=M.device), unit)
    c = torch.linalg.solve(safe, e1) * s  # (b, p)
    return c.masked_fill_(singular[:, None], 0.0), singular


def local_fit_dense(qs, xs, attention, v, degree, bounded=False):
    """Local polynomial fits of a block of queries from their dense attention.

    Parameters
    ----------
    qs : Tensor (b, r)
        Scaled queries.
    xs : Tensor (n, r)
        Scaled keys, in the same coordinates.
    attention : Tensor (b, n)
        Nadaraya-Watson attention, rows summing to 1.
    v : Tensor (n, t)
    degree : {1, 2}
    bounded : bool, default=False
        Keep each fit within the range of the targets carrying its weight
        (:func:`bound`).

    Returns
    -------
    out : Tensor (b, t)
        The intercepts; 0 on singular rows.
    kernel : Tensor (b, n)
        The equivalent kernel; 0 on singular rows.
    singular : Tensor (b,) of bool
    """
    z = design(xs[None, :, :] - qs[:, None, :], degree)  # (b, n, p)
    az = attention[:, :, None] * z  # (b, n, p)
    M = az.transpose(1, 2) @ z  # (b, p, p)
    c, singular = _intercept_rows(M)  # (b, p)
    kernel = (az @ c[:, :, None])[:, :, 0]  # (b, n)
    if not bounded:
        return kernel @ v, kernel, singular
    out, kernel = bound(kernel @ v, kernel, attention, v)
    return out.masked_fill_(singular[:, None], 0.0), kernel.masked_fill_(
        singular[:, None], 0.0), singular


def local_fit_sparse(qs, xs, crow, col, val, v, degree, bounded=False):
    """:func:`local_fit_dense` from CSR attention ``(crow, col, val)`` over the keys; the
    equivalent kernel is returned as values in the same layout."""
    b = qs.shape[0]
    row = torch.repeat_interleave(torch.arange(b, device=qs.device), crow[1:] - crow[:-1])
    z = design(xs[col] - qs[row], degree)  # (nnz, p)
    az = val[:, None] * z  # (nnz, p)
    p = z.shape[1]
    M = qs.new_zeros(b, p, p).index_add_(0, row, az[:, :, None] * z[:, None, :])  # (b, p, p)
    c, singular = _intercept_rows(M)  # (b, p)
    kernel = (az * c[row]).sum(1)  # (nnz,)
    t = v.shape[1]
    out = qs.new_zeros(b, t).index_add_(0, row, kernel[:, None] * v[col])  # (b, t)
    if not bounded:
        return out, kernel, singular
    # The bound (as :func:`bound`, on the stored entries of each row).
    m = qs.new_zeros(b, t).index_add_(0, row, val[:, None] * v[col])  # (b, t)
    largest = qs.new_zeros(b).scatter_reduce_(0, row, val, "amax", include_self=False)
    held = (val >= RANGE_SHARE * largest[row])[:, None]  # (nnz, 1)
    rows = row[:, None].expand(-1, t)
    lo = qs.new_full((b, t), torch.inf).scatter_reduce_(
        0, rows, torch.where(held, v[col], torch.inf), "amin")
    hi = qs.new_full((b, t), -torch.inf).scatter_reduce_(
        0, rows, torch.where(held, v[col], -torch.inf), "amax")
    lam = _shrink(out, m, lo, hi).masked_fill_(singular[:, None], 0.0)  # (b, 1)
    # Singular rows stay 0 (their kernel and intercept): only a fit moves.
    kernel = torch.where(singular[row], 0.0, val + lam[row, 0] * (kernel - val))
    return torch.where(singular[:, None], 0.0, m + lam * (out - m)), kernel, singular


def local_fit_many(qs, xs, attentions, v, degree, bounded=False):
    """:func:`local_fit_dense` of the same queries under several attentions at once (a
    grid of bandwidths): the designs, and their outer products, are built once and every
    attention's moment matrices come from one batched product.

    Parameters
    ----------
    qs : Tensor (b, r)
    xs : Tensor (n, r)
    attentions : Tensor (G, b, n)
    v : Tensor (n, t)
    degree : {1, 2}
    bounded : bool, default=False
        As for :func:`local_fit_dense`.

    Returns
    -------
    out : Tensor (G, b, t)
        The intercepts; 0 on singular rows.
    singular : Tensor (G, b) of bool
    """
    G, b, n = attentions.shape
    z = design(xs[None, :, :] - qs[:, None, :], degree)  # (b, n, p)
    p = z.shape[2]
    outer = (z[:, :, :, None] * z[:, :, None, :]).reshape(b, n, p * p)  # (b, n, p p)
    by_query = attentions.transpose(0, 1)  # (b, G, n)
    M = torch.bmm(by_query, outer).reshape(b * G, p, p)  # (b G, p, p)
    c, singular = _intercept_rows(M)  # (b G, p)
    zc = torch.bmm(z, c.reshape(b, G, p).transpose(1, 2))  # (b, n, G)
    kernel = by_query * zc.transpose(1, 2)  # (b, G, n)
    out = torch.bmm(kernel, v[None].expand(b, n, v.shape[1]))  # (b, G, t)
    singular = singular.reshape(b, G)
    if bounded:
        out, _ = bound(out, None, by_query, v)
        out.masked_fill_(singular[:, :, None], 0.0)
    return out.transpose(0, 1), singular.T


def bound(out, kernel, attention, v):
    """Local fits kept within the range of the targets that carry their weight.

    Each query's correction of its Nadaraya-Watson value ``m = attention @ v`` is shrunk,
    ``m + lam (out - m)``, with the largest ``lam`` in [0, 1] that keeps every output
    within [min, max] of the targets of the keys whose attention is at least
    ``RANGE_SHARE`` times the query's largest (``lam = 0`` where ``m`` itself lies
    outside: it is a mean over every key).

    Parameters
    ----------
    out : Tensor (..., t)
        The local fits.
    kernel : Tensor (..., n) or None
        Their equivalent kernels.
    attention : Tensor (..., n)
        The Nadaraya-Watson attention, rows summing to 1.
    v : Tensor (n, t)

    Returns
    -------
    out : Tensor (..., t)
        The bounded fits.
    kernel : Tensor (..., n) or None
        Their equivalent kernels, ``attention + lam (kernel - attention)``.
    """
    m = attention @ v  # (..., t)
    held = attention >= RANGE_SHARE * attention.amax(-1, keepdim=True)  # (..., n)
    # One output at a time: a (..., n) temporary, as the attention.
    lo = torch.stack([torch.where(held, v[:, j], torch.inf).amin(-1)
                      for j in range(v.shape[1])], -1)  # (..., t)
    hi = torch.stack([torch.where(held, v[:, j], -torch.inf).amax(-1)
                      for j in range(v.shape[1])], -1)
    lam = _shrink(out, m, lo, hi)  # (..., 1)
    if kernel is not None:
        kernel = attention + lam * (kernel - attention)
    return m + lam * (out - m), kernel


def _shrink(out, m, lo, hi):
    """The largest ``lam`` (..., 1) in [0, 1] with ``m + lam (out - m)`` within [lo, hi]
    for every output (..., t); 1 without outputs."""
    step = out - m
    room = torch.where(step > 0, hi - m, lo - m)
    moves = step != 0
    lam = torch.where(moves, room / torch.where(moves, step, 1.0), 1.0).clamp(0.0, 1.0)
    return lam.amin(-1, keepdim=True) if lam.shape[-1] else lam.new_ones(lam.shape[:-1] + (1,))
