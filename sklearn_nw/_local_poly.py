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
"""

import torch


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
    # A unit diagonal: differences and their products have different scales.
    s = torch.where(diag > 0, diag, 1.0).rsqrt()  # (b, p)
    unit = M * s[:, :, None] * s[:, None, :]  # (b, p, p)
    eigenvalues = torch.linalg.eigvalsh(unit)  # (b, p) ascending
    tol = torch.finfo(M.dtype).eps ** 0.5
    singular = ~(eigenvalues[:, 0] > tol * eigenvalues[:, -1]) | ~(diag > 0).all(1)
    e1 = torch.zeros_like(s)
    e1[:, 0] = s[:, 0]
    safe = torch.where(singular[:, None, None], torch.eye(M.shape[1], dtype=M.dtype,
                                                          device=M.device), unit)
    c = torch.linalg.solve(safe, e1) * s  # (b, p)
    return c.masked_fill_(singular[:, None], 0.0), singular


def local_fit_dense(qs, xs, attention, v, degree):
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
    return kernel @ v, kernel, singular


def local_fit_sparse(qs, xs, crow, col, val, v, degree):
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
    out = qs.new_zeros(b, v.shape[1]).index_add_(0, row, kernel[:, None] * v[col])  # (b, t)
    return out, kernel, singular


def local_fit_many(qs, xs, attentions, v, degree):
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
    return out.transpose(0, 1), singular.reshape(b, G).T
