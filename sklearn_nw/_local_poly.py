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

A query whose intercept is not identified (fewer keys with weight than ``phi`` has
terms, or keys on a lower-dimensional set that the query is off, or a query too far for
the float type) has no unique fit: it is reported, and the caller keeps its
Nadaraya-Watson value. Where it is identified, a constant coordinate or keys on a line
through the query included, it is the minimum-norm fit's (:func:`intercept_rows`), in
coordinates centered at the query's weighted mean (:func:`_centered`).

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

import math
from typing import NamedTuple

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

# A local design is centered at its query while the query lies within this many weighted
# spreads of its keys' mean, else at the mean: beyond, 1 and x - q grow collinear (a
# condition number growing as its square, or fourth power for degree 2), which cost
# float32 the fit a few bandwidths outside the data. Leave-one-out fits at the training
# inputs are rarely beyond, and centered at their query share their designs.
ORIGIN_SPREADS = 4.0

# How far below the refit's threshold of a null space (intercept_rows) a fit without a key
# keeps its moment matrix's condition (its growth without the key estimated by the
# leverage, the rescaling to a unit diagonal aside) to be updated rather than refitted.
_CONDITION_MARGIN = 4.0


class TargetRange(NamedTuple):
    """Each key's smallest and largest target, where a key stands for rows of different
    targets (the distinct inputs of ``leave_out="input"``): a bounded fit given it as its
    ``bounded`` keeps within the range of the rows' targets, as a fit on the rows does,
    not of the keys' mean values ``v``. True as a ``bounded``."""

    low: torch.Tensor  # (n, t)
    high: torch.Tensor  # (n, t)

    def take(self, index):
        """The range of the keys ``index``."""
        return TargetRange(self.low[index], self.high[index])


def _target_range(bounded):
    """The :class:`TargetRange` a ``bounded`` gives, or None (``v``'s own)."""
    return bounded if isinstance(bounded, TargetRange) else None


def bounded_keys(bounded, value_range, tensor):
    """``bounded`` as the local fits take it: where the keys are means of rows of
    different targets (``value_range``, a leave-one-out set's: the distinct inputs of
    ``leave_out="input"``), the range of those targets, a :class:`TargetRange` of
    ``tensor`` of them, as a fit on the rows has it."""
    if not bounded or value_range is None:
        return bounded
    return TargetRange(*(tensor(a) for a in value_range))


def n_terms(n_coords, degree):
    """Columns of ``phi`` for ``n_coords`` coordinates: 1, then d, then d (d + 1) / 2."""
    return 1 + (n_coords if degree >= 1 else 0) + (
        n_coords * (n_coords + 1) // 2 if degree >= 2 else 0)


def design(u, degree):
    """``phi(u)`` (..., p) of differences ``u`` (..., r): its quadratic terms
    ``u_f u_s``, f <= s, in the order of :func:`torch.triu_indices`, written a row of
    that triangle at a time (a gather of the pairs costs three to four times more)."""
    r = u.shape[-1]
    z = u.new_empty(u.shape[:-1] + (n_terms(r, degree),))  # (..., p)
    z[..., 0] = 1.0
    if degree >= 1:
        z[..., 1 : 1 + r] = u
    at = 1 + r
    for f in range(r if degree >= 2 else 0):
        z[..., at : at + r - f] = u[..., f : f + 1] * u[..., f:]
        at += r - f
    return z


def design_gradient(u, degree):
    """``d phi(u) / d u_k`` (..., r, p) of differences ``u`` (..., r): row k holds the
    derivative of every column of :func:`design` along coordinate k."""
    r = u.shape[-1]
    eye = torch.eye(r, dtype=u.dtype, device=u.device).expand(u.shape[:-1] + (r, r))
    columns = [u.new_zeros(u.shape[:-1] + (r, 1))]
    if degree >= 1:
        columns.append(eye)
    if degree >= 2:  # d (u_f u_s) / d u_k = [k = f] u_s + [k = s] u_f
        first, second = torch.triu_indices(r, r, device=u.device)
        columns.append(eye[..., first] * u[..., None, second]
                       + eye[..., second] * u[..., None, first])
    return torch.cat(columns, dim=-1)


def _centered(qs, xs, attention, *, return_unit=False):
    """The local designs' coordinates: the keys' differences ``z`` (b, n, r) from each
    query's origin (:func:`_origin`), in units of their weighted root-mean-square about
    the weighted mean (0 on keys without attention), and the query's own ``e`` (b, r) in
    the same units (and, with ``return_unit``, those units (b, r)).

    The intercept at the query is the fit's value there whatever the origin and units of
    the polynomial. Centered at the weighted mean, the design is as well conditioned as
    the keys allow (centered at a query beyond the data, ``1`` and ``x - q`` are nearly
    collinear, which cost float32 the fit), and keys without weight, however far, never
    overflow. Origin and units are held constant in the gradient: the intercept does not
    depend on them.
    """
    held = (attention > 0)[:, :, None]  # (b, n, 1)
    a = attention.detach()[:, :, None]  # (b, n, 1)
    keys = xs if xs.dim() == 3 else xs[None]  # (b, n, r) gathered per query, or (1, n, r)
    x = keys.detach()
    # Keys without attention count as 0: where every key and weight is finite, a product
    # with the mask gives what a selection gives, in a fifth of the time.
    finite = bool(torch.isfinite(x).all() and torch.isfinite(a).all())

    def on_held(values):
        return values * held if finite else torch.where(held, values, 0.0)

    mean = on_held(a * x).sum(1)  # (b, r)
    d = on_held(x - mean[:, None])  # (b, n, r)
    unit = _root_mean_square(d, a, d.abs().amax(1))  # (b, r)
    origin = _origin(qs, mean, unit)  # (b, r)
    z = on_held((keys - origin[:, None]) / unit[:, None])  # (b, n, r)
    return (z, (qs - origin) / unit) + ((unit,) if return_unit else ())


def _origin(qs, mean, unit):
    """The origin of each query's design (b, r): the query itself while it lies within
    ``ORIGIN_SPREADS`` weighted spreads ``unit`` of its keys' weighted ``mean`` in every
    coordinate (as :func:`local_fit_many` centers the leave-one-out fits, so that the two
    agree to rounding), else the mean (a query beyond its keys)."""
    outside = ((qs.detach() - mean).abs() > ORIGIN_SPREADS * unit).any(1, keepdim=True)
    return torch.where(outside, mean, qs.detach())  # (b, r)


def _root_mean_square(d, a, top):
    """``sqrt(sum_j a_j d_j**2)`` (b, r) through the largest ``|d_j|`` ``top`` (b, r), so
    that no square overflows; 1 where it is 0 (a coordinate constant over the keys with
    weight)."""
    top = torch.where(top > 0, top, 1.0)
    rms = top * (a * (d / top[..., None, :]) ** 2).sum(-2).sqrt()
    return torch.where(rms > 0, rms, 1.0)


def intercept_rows(M, E, n_coords):
    """``c`` (b, p) with ``c . sum_j a_j z_j v_j`` the fit's value at the query, from the
    moment matrices ``M`` (b, p, p) and the query's design ``E = phi(e)`` (b, p); and
    which rows have no unique value (b,) (``c`` is 0 there).

    The value ``E . beta`` is the same for every least-squares ``beta`` iff ``E`` is
    orthogonal to the null space of ``M``; then ``c`` is the minimum-norm solution of
    ``M c = E``. Numerically, the null space is spanned by the eigenvectors of ``M``
    (scaled to a unit diagonal) whose eigenvalues are at most ``sqrt(eps)`` times the
    largest (a solve across them would lose more than half the digits; the fit is the
    truncated minimum-norm one), and ``E`` must be orthogonal to it within
    ``sqrt(eps)``; ``E`` or ``M`` not finite (a query too far for the float type) have
    no value either. Differentiable: the null space is held constant, and ``c`` solves
    ``(M + N N^T) c = E - N N^T E`` (``N``: its basis), which is ``M`` itself on the rest.
    """
    b, p = E.shape
    diag = torch.diagonal(M, dim1=1, dim2=2)  # (b, p)
    # A unit diagonal: differences and their products have different scales. A constant
    # in the gradient: c = S (S M S)^+ S E for any fixed S, and the rsqrt's own
    # derivative overflows on a tiny diagonal.
    s = torch.where(diag > 0, diag, 1.0).rsqrt().detach()  # (b, p)
    unit = M * s[:, :, None] * s[:, None, :]  # (b, p, p)
    f = E * s  # (b, p)
    finite = torch.isfinite(unit.detach()).all(2).all(1) & torch.isfinite(f.detach()).all(1)
    eps = torch.finfo(M.dtype).eps
    # A query beyond 1/sqrt(eps) weighted spreads of its keys (|e|, in E's linear terms):
    # its distances to them, rounded, no longer resolve their differences (the attention
    # is rounding), and the extrapolation would keep less than half its digits.
    near = (E.detach()[:, 1 : 1 + n_coords].abs() <= eps**-0.5).all(1)
    eye = torch.eye(p, dtype=M.dtype, device=M.device)
    well = _well_conditioned(unit.detach(), finite & near, eps)  # (b,)
    if bool(well.all()):  # no null space anywhere: the solve alone
        return torch.linalg.solve(unit, f) * s, ~well
    # The solve alone where there is surely no null space; the null spaces of the rest.
    c = torch.linalg.solve(torch.where(well[:, None, None], unit, eye),
                           torch.where(well[:, None], f, 0.0))  # (b, p)
    rest = torch.nonzero(~well)[:, 0]  # (k,)
    c_rest, singular_rest = _null_space_solve(unit[rest], f[rest], finite[rest], near[rest],
                                              eps)
    c = c.index_put((rest,), c_rest)  # out of place: both in the gradient
    singular = torch.zeros_like(well).index_put_((rest,), singular_rest)
    return c * s, singular


def _well_conditioned(unit, candidate, eps):
    """Which moment matrices (b, p, p), of unit diagonal, surely have no numerical null
    space (:func:`intercept_rows`): of ``candidate`` rows, positive definite (a Cholesky
    factor ``L``) with ``p trace(unit^-1) = p |L^-1|_F^2`` below ``eps**-0.5``. Their
    largest eigenvalue is at most their trace ``p`` and their smallest at least
    ``1 / trace(unit^-1)``, so every eigenvalue is above ``sqrt(eps)`` times the
    largest. Cheaper than the eigenvalues, which the others still need."""
    b, p, _ = unit.shape
    eye = torch.eye(p, dtype=unit.dtype, device=unit.device)
    L, info = torch.linalg.cholesky_ex(torch.where(candidate[:, None, None], unit, eye))
    inverse = torch.linalg.solve_triangular(L, eye.expand(b, p, p), upper=False)
    spread = p * (inverse * inverse).sum((1, 2))  # (b,)
    return candidate & (info == 0) & (spread < eps**-0.5)


def _null_space_solve(unit, f, finite, near, eps):
    """:func:`intercept_rows`'s ``c`` (b, p) in the units of ``unit`` (b, p, p) and
    ``f`` (b, p), and which rows have no unique value, through the null space of each
    moment matrix (its eigenvectors)."""
    p = f.shape[1]
    eye = torch.eye(p, dtype=unit.dtype, device=unit.device)
    # Only the null space is needed, held constant: no eigenvector gradient.
    eigenvalues, V = torch.linalg.eigh(torch.where(finite[:, None, None], unit.detach(), eye))
    # Across eigenvalues below sqrt(eps) of the largest a solve loses more than half the
    # digits (leave-one-out scores moved in their sixth digit when every weight was
    # scaled): they are the numerical null space.
    null = eigenvalues <= eps**0.5 * eigenvalues[:, -1:]  # (b, p)
    N = V * null[:, None, :]  # (b, p, p): the null space's basis, other columns 0
    f_safe = torch.where(finite[:, None], f, 0.0)  # (b, p)
    along = (N.transpose(1, 2) @ f_safe.detach()[:, :, None])[:, :, 0]  # (b, p)
    singular = ~(finite & near) | (along.norm(dim=1) > eps**0.5 * f_safe.detach().norm(dim=1))
    projector = N @ N.transpose(1, 2)  # (b, p, p)
    A = torch.where(singular[:, None, None], eye, unit + projector)  # (b, p, p)
    rhs = f_safe - (projector @ f_safe[:, :, None])[:, :, 0]  # (b, p)
    return torch.linalg.solve(A, torch.where(singular[:, None], 0.0, rhs)), singular


def _no_value(kernel, singular):
    """``singular`` (b,) widened to rows whose equivalent kernel (b, n) is not finite (a
    fit beyond what the float type holds)."""
    return singular | ~torch.isfinite(kernel.detach()).all(1)


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
    bounded : bool or TargetRange, default=False
        Keep each fit within the range of the targets carrying its weight
        (:func:`bound`): the keys' ``v``, or a :class:`TargetRange`'s.

    Returns
    -------
    out : Tensor (b, t)
        The intercepts; 0 on singular rows.
    kernel : Tensor (b, n)
        The equivalent kernel; 0 on singular rows.
    singular : Tensor (b,) of bool
        The rows whose intercept is not identified (:func:`intercept_rows`).
    """
    u, e = _centered(qs, xs, attention)  # (b, n, r), (b, r)
    z = design(u, degree)  # (b, n, p)
    az = attention[:, :, None] * z  # (b, n, p)
    M = az.transpose(1, 2) @ z  # (b, p, p)
    c, singular = intercept_rows(M, design(e, degree), e.shape[1])  # (b, p)
    kernel = (az @ c[:, :, None])[:, :, 0]  # (b, n)
    singular = _no_value(kernel, singular)
    kernel = torch.where(singular[:, None], 0.0, kernel)
    if not bounded:
        return kernel @ v, kernel, singular
    out, kernel = bound(kernel @ v, kernel, attention, v,
                        value_range=_target_range(bounded))
    return out.masked_fill_(singular[:, None], 0.0), kernel.masked_fill_(
        singular[:, None], 0.0), singular


def slope_rows(qs, xs, attention, degree):
    """The local slopes of a block of queries: the weights ``S`` (b, n, r) with
    ``sum_j S_jk v_j`` the derivative of the local polynomial at the query along
    coordinate k (its linear coefficient ``beta_k`` for degree 1, statsmodels'
    ``KernelReg(reg_type="ll")`` marginal effects; the derivative of the quadratic at the
    query for degree 2), linear in the values as the intercept is:

        S_jk = a_j z_j . c_k,   M c_k = d phi(e) / d e_k,

    solved as :func:`intercept_rows` solves for the intercept (minimum norm, the same
    numerical null space); and the rows (b,) whose slopes or intercept are not identified
    (``S`` is 0 there). The coordinates are those of ``qs`` and ``xs``.
    """
    u, e, unit = _centered(qs, xs, attention, return_unit=True)  # (b, n, r), (b, r), (b, r)
    b, r = e.shape
    z = design(u, degree)  # (b, n, p)
    az = attention[:, :, None] * z  # (b, n, p)
    M = az.transpose(1, 2) @ z  # (b, p, p)
    p = M.shape[1]
    # phi(e) and its derivative along each coordinate: (b, r + 1, p).
    E = torch.cat([design(e, degree)[:, None], design_gradient(e, degree)], 1)
    c, singular = intercept_rows(M[:, None].expand(b, r + 1, p, p).reshape(-1, p, p),
                                 E.reshape(-1, p), r)  # (b (r + 1), p)
    singular = singular.reshape(b, r + 1).any(1)  # (b,)
    c = c.reshape(b, r + 1, p)[:, 1:]  # (b, r, p)
    slopes = (az @ c.transpose(1, 2)) / unit[:, None, :]  # (b, n, r) per unit of qs
    singular = _no_value(slopes.reshape(b, -1), singular)
    return torch.where(singular[:, None, None], 0.0, slopes), singular


def local_fit_sparse(qs, xs, crow, col, val, v, degree, bounded=False):
    """:func:`local_fit_dense` from CSR attention ``(crow, col, val)`` over the keys; the
    equivalent kernel is returned as values in the same layout."""
    b, r = qs.shape
    row = torch.repeat_interleave(torch.arange(b, device=qs.device), crow[1:] - crow[:-1])
    # As _centered, on the stored entries of each row.
    held = (val > 0)[:, None]  # (nnz, 1)
    a = val.detach()[:, None]  # (nnz, 1)
    x = xs.detach()[col]  # (nnz, r)
    mean = qs.new_zeros(b, r).index_add_(0, row, torch.where(held, a * x, 0.0))  # (b, r)
    d = torch.where(held, x - mean[row], 0.0)  # (nnz, r)
    top = qs.new_zeros(b, r).scatter_reduce_(0, row[:, None].expand(-1, r), d.abs(),
                                             "amax")  # (b, r)
    top = torch.where(top > 0, top, 1.0)
    unit = top * qs.new_zeros(b, r).index_add_(0, row, a * (d / top[row]) ** 2).sqrt()
    unit = torch.where(unit > 0, unit, 1.0)  # (b, r)
    origin = _origin(qs, mean, unit)  # (b, r)
    z = design(torch.where(held, (xs[col] - origin[row]) / unit[row], 0.0), degree)  # (nnz, p)
    az = val[:, None] * z  # (nnz, p)
    p = z.shape[1]
    M = qs.new_zeros(b, p, p).index_add_(0, row, az[:, :, None] * z[:, None, :])  # (b, p, p)
    c, singular = intercept_rows(M, design((qs - origin) / unit, degree), r)  # (b, p)
    kernel = (az * c[row]).sum(1)  # (nnz,)
    bad = qs.new_zeros(b).index_add_(0, row, (~torch.isfinite(kernel.detach())).to(qs.dtype))
    singular = singular | (bad > 0)
    kernel = torch.where(singular[row], 0.0, kernel)
    t = v.shape[1]
    out = qs.new_zeros(b, t).index_add_(0, row, kernel[:, None] * v[col])  # (b, t)
    if not bounded:
        return out, kernel, singular
    # The bound (as :func:`bound`, on the stored entries of each row).
    m = qs.new_zeros(b, t).index_add_(0, row, val[:, None] * v[col])  # (b, t)
    largest = qs.new_zeros(b).scatter_reduce_(0, row, val, "amax", include_self=False)
    held = (val >= RANGE_SHARE * largest[row])[:, None]  # (nnz, 1)
    rows = row[:, None].expand(-1, t)
    target_range = _target_range(bounded)
    low, high = (v, v) if target_range is None else target_range
    lo = qs.new_full((b, t), torch.inf).scatter_reduce_(
        0, rows, torch.where(held, low[col], torch.inf), "amin")
    hi = qs.new_full((b, t), -torch.inf).scatter_reduce_(
        0, rows, torch.where(held, high[col], -torch.inf), "amax")
    lam = _shrink(out, m, lo, hi).masked_fill_(singular[:, None], 0.0)  # (b, 1)
    # Singular rows stay 0 (their kernel and intercept): only a fit moves.
    kernel = torch.where(singular[row], 0.0, val + lam[row, 0] * (kernel - val))
    return torch.where(singular[:, None], 0.0, m + lam * (out - m)), kernel, singular


def _moment_columns(u, v, degree, workspace):
    """The columns (b, k, n), laid out as rows, whose attention-weighted sums are the
    moments of :func:`local_fit_many`: the distinct entries of ``z z^T`` (``entries``
    (p, p) indexes ``M``'s among them), then ``z v``, then a flag of the keys whose outer
    products overflow (their columns zeroed). ``u`` (b, n, r) are the keys' differences
    from the queries. Returns ``columns, entries, p, n_outer`` (the number of ``z z^T``
    columns) and ``overflow`` (b, n), or None where the bound shows no key can overflow.
    (Each column a row of n keys: written in one contiguous pass each, and summed by the
    product BLAS runs fastest, the columns times the attentions transposed.)

    The entries: with one coordinate the powers ``u^(k + l)``, k + l <= 2 p - 2; with
    more, the products ``z_k z_l``, k <= l, by rows of ``M``'s upper triangle, whose
    first row, ``1 z_l``, is the design ``z`` itself (its quadratic terms written first,
    as :func:`design` writes them)."""
    b, n, r = u.shape
    t = v.shape[1]
    p = n_terms(r, degree)
    if r == 1:
        n_outer = 2 * p - 1
        entries = torch.arange(p)[:, None] + torch.arange(p)  # (p, p): k + l
    else:
        upper = torch.triu_indices(p, p)  # (2, p (p + 1) / 2): row by row
        n_outer = upper.shape[1]
        entries = torch.empty(p, p, dtype=torch.long)
        entries[upper[0], upper[1]] = entries[upper[1], upper[0]] = torch.arange(n_outer)
    k = n_outer + p * t + 1
    columns = (workspace[: b * n * k].view(b, k, n)
               if workspace is not None and workspace.numel() >= b * n * k
               and workspace.dtype == u.dtype
               else u.new_empty(b, k, n))  # (b, n_outer + p t + 1, n)
    columns[:, 0].fill_(1.0)
    columns[:, 1 : 1 + r] = u.transpose(1, 2)
    if r == 1:
        for power in range(2, n_outer):
            torch.mul(columns[:, power - 1], u[:, :, 0], out=columns[:, power])
    else:
        if degree >= 2:  # the design's u_f u_s, f <= s
            first, second = torch.triu_indices(r, r)
            for term, (f, s) in enumerate(zip(first.tolist(), second.tolist())):
                torch.mul(columns[:, 1 + f], columns[:, 1 + s], out=columns[:, 1 + r + term])
        at = p  # row ``row`` of the upper triangle: z_row z_l, l >= row
        for row in range(1, p):
            torch.mul(columns[:, row : row + 1], columns[:, row:p],
                      out=columns[:, at : at + p - row])
            at += p - row
    z = columns[:, :p]  # (b, p, n)
    zv = columns[:, n_outer : n_outer + p * t].view(b, p, t, n)
    torch.mul(z[:, :, None, :], v.T[None, None], out=zv)
    # Keys whose outer products overflow: only possible where the largest difference's
    # 2p-th power does (checked on the bound first: the check is a pass over the block).
    largest = float(u.detach().abs().amax()) if u.numel() else 0.0
    overflow = None
    if not largest < (torch.finfo(u.dtype).max / (p * p)) ** (1 / (2 * degree)):
        overflow = ~torch.isfinite(columns[:, :n_outer]).all(1)  # (b, n)
        columns.masked_fill_(overflow[:, None, :], 0.0)
        columns[:, -1] = overflow.to(u.dtype)
    else:
        columns[:, -1].fill_(0.0)
    return columns, entries, p, n_outer, overflow


def local_fit_many(qs, xs, attentions, v, degree, bounded=False,
                   return_nadaraya_watson=False, workspace=None, return_kernel=False):
    """:func:`local_fit_dense` of the same queries under several attentions at once (a
    grid of bandwidths, at the training inputs themselves): the designs, centered at the
    queries, are built once, and every attention's moments come from one batched product
    with them: ``M = sum_j a_j z_j z_j^T``, ``sum_j a_j z_j v_j`` (so that the fit is
    ``c . sum_j a_j z_j v_j`` without forming the equivalent kernel) and the weight on
    keys that overflow. The linear and squared terms of ``M`` are each fit's weighted
    offset and spread about its query, which decide its origin (:func:`_origin`).

    A key whose outer products overflow (a point too far for the float type) is left out
    of the shared products, where an attention without weight on it would turn them into
    0 * inf; a fit that does weigh it has no value (``singular``).

    Parameters
    ----------
    qs : Tensor (b, r)
    xs : Tensor (n, r)
    attentions : Tensor (G, b, n)
    v : Tensor (n, t)
    degree : {1, 2}
    bounded : bool or TargetRange, default=False
        As for :func:`local_fit_dense`.
    return_nadaraya_watson : bool, default=False
        Also return the Nadaraya-Watson values ``a . v`` (G, b, t) (the moments' first).
    workspace : Tensor, optional
        A flat tensor the one-coordinate designs are written into when it is large
        enough (``b n (3 p + 1)`` entries do): kept by a caller that fits many blocks, it
        spares each block the page faults of fresh memory (a third of their time).
    return_kernel : bool, default=False
        Also return the equivalent kernels (G, b, n), ``a_j z_j . c`` with ``z_j`` the
        keys' designs about the query, as :func:`local_fit_dense` gives them (after it,
        before the Nadaraya-Watson values).

    Returns
    -------
    out : Tensor (G, b, t)
        The intercepts; 0 on singular rows.
    singular : Tensor (G, b) of bool
    kernel : Tensor (G, b, n)
        Only with ``return_kernel``; 0 on singular rows.
    nadaraya_watson : Tensor (G, b, t)
        Only with ``return_nadaraya_watson``.
    """
    G, b, n = attentions.shape
    by_query = attentions.transpose(0, 1)  # (b, G, n)
    M, zv_moments, c, out, singular, weighs_overflow = _intercepts(qs, xs, v, degree,
                                                                   by_query, workspace)
    kernel = None
    if return_kernel:  # a_j phi(x_j - q) . c (b, G, n)
        kernel = by_query * (design(xs[None, :, :] - qs[:, None, :], degree) @ c.transpose(
            1, 2)).transpose(1, 2)
        singular = singular | ~torch.isfinite(kernel.detach()).all(2)
        kernel = torch.where(singular[:, :, None], 0.0, kernel)
    out = torch.where(singular[:, :, None], 0.0, out)
    out, singular = out.transpose(0, 1), singular.T  # (G, b, t), (G, b)
    kernel = None if kernel is None else kernel.transpose(0, 1)  # (G, b, n)
    if not bool(weighs_overflow.any()):  # z_0 = 1: the first of sum_j a_j z_j v_j
        nadaraya_watson = zv_moments[:, :, 0].transpose(0, 1)  # (G, b, t)
    else:  # keys left out of the moments
        nadaraya_watson = attentions @ v  # (G, b, t)
    if bounded:  # on the attentions as laid out (a product with a transposed view copies)
        out, kernel = bound(out, kernel, attentions, v, nadaraya_watson,
                            value_range=_target_range(bounded))
        out.masked_fill_(singular[:, :, None], 0.0)
        if kernel is not None:
            kernel = kernel.masked_fill(singular[:, :, None], 0.0)
    # Fits whose query lies beyond one weighted spread of its keys' mean are centered at
    # the mean instead (_origin), as local_fit_dense centers them: recomputed one by one.
    outside = beyond_spread(M, xs.shape[1]).T.nonzero(as_tuple=True)  # over (G, b)
    if len(outside[0]):
        g, i = outside
        out_i, kernel_i, singular_i = local_fit_dense(qs[i], xs, attentions[g, i], v, degree,
                                                      bounded)
        out = out.index_put((g, i), out_i)
        singular = singular.index_put((g, i), singular_i)
        if kernel is not None:
            kernel = kernel.index_put((g, i), kernel_i)
    if return_kernel:
        return out, singular, kernel
    if not return_nadaraya_watson:
        return out, singular
    return out, singular, nadaraya_watson


def _intercepts(qs, xs, v, degree, by_query, workspace):
    """The moments (:func:`_moments`) of queries ``qs`` (b, r) under attentions
    ``by_query`` (b, G, n), the intercept rows ``c`` of their fits
    (:func:`intercept_rows`; 0 on singular rows), the fits ``c . sum_j a_j z_j v_j`` (b,
    G, t) (0 on singular rows, in the query-centered designs) and which are singular (b,
    G): ``M`` (b, G, p, p), ``sum_j a_j z_j v_j`` (b, G, p, t), ``c`` (b, G, p), the fits,
    ``singular``, and which fits weigh a key left out of the moments (b, G)
    (:func:`_moments`)."""
    b, G, _ = by_query.shape
    M, zv, weighs_overflow = _moments(qs, xs, v, degree, by_query, workspace)
    p = M.shape[2]
    E = M.new_zeros(b * G, p)  # (b G, p): phi(0), the value at the query
    E[:, 0] = 1.0
    c, singular = intercept_rows(M.reshape(b * G, p, p), E, xs.shape[1])  # (b G, p)
    singular = singular.reshape(b, G) | weighs_overflow
    c = torch.where(singular[:, :, None], 0.0, c.reshape(b, G, p))  # (b, G, p)
    out = (c[:, :, :, None] * zv).sum(2)  # (b, G, t)
    singular = singular | ~torch.isfinite(out.detach()).all(2)
    return M, zv, c, out, singular, weighs_overflow


def beyond_spread(M, r):
    """Whether each fit's query lies beyond ``ORIGIN_SPREADS`` weighted spreads of its
    keys' mean in some coordinate (...), from its moments ``M`` (..., p, p) about the
    query, whose linear and squared terms are the mean's offsets and the second moments;
    such fits center their designs at the mean (:func:`_origin`)."""
    with torch.no_grad():
        offset = M[..., 0, 1 : 1 + r] ** 2  # (..., r)
        second = torch.diagonal(M, dim1=-2, dim2=-1)[..., 1 : 1 + r]  # (..., r)
        return (offset > ORIGIN_SPREADS**2 * (second - offset)).any(-1)


def local_fit_with_variance(qs, xs, attention, v, degree, variance=None, own=None,
                            workspace=None):
    """Unbounded local fits of queries ``qs`` (b, r) on their dense attention (b, n), as
    :func:`local_fit_many` computes them, with two sums of their equivalent kernel ``l``
    (b, n) that need no ``l``: the variances ``sum_j l_j**2 s_j**2`` (b, t) of the keys'
    ``variance`` (n, t), and with ``own`` (b,) (the key each query is) the key's weight
    ``l_own`` in the fit (b,).

    ``l_j = a_j z_j . c`` (``c`` the fit's intercept row) makes the first ``c^T G c``
    with ``G = sum_j a_j**2 s_j**2 z_j z_j^T``, the moments of the squared attention
    times each output's variance, and the second ``a_own c_0`` (a query's own design is
    ``phi(0)``). Fits centered at their keys' mean (:func:`beyond_spread`) take their
    sums from their kernel (:func:`local_fit_dense`). Singular rows: fit 0 and the sums
    of their Nadaraya-Watson attention, the values their callers give them. The squared
    attention times the variances (b, t, n) is written into ``workspace`` when it is large
    enough (a caller that fits many blocks spares each the page faults of fresh memory).

    Returns
    -------
    out : Tensor (b, t)
    singular : Tensor (b,) of bool
    variance : Tensor (b, t) or None
    own_weight : Tensor (b,) or None
    """
    r = xs.shape[1]
    M, _, c, out, singular, _ = _intercepts(qs, xs, v, degree, attention[:, None, :], None)
    M, c, out, singular = M[:, 0], c[:, 0], out[:, 0], singular[:, 0]  # G = 1
    out = torch.where(singular[:, None], 0.0, out)
    fit_variance = own_weight = None
    if variance is not None:
        # Relative to each output's largest variance (float32 overflows at 3e38).
        unit = variance.amax(0).where(variance.amax(0) > 0, 1.0)  # (t,)
        shape = (qs.shape[0], variance.shape[1], xs.shape[0])
        squared = (workspace[: math.prod(shape)].view(shape)
                   if workspace is not None and workspace.numel() >= math.prod(shape)
                   else attention.new_empty(shape))  # (b, t, n): a_j**2 s_j**2
        torch.mul(attention[:, None, :], (variance / unit).T, out=squared)
        squared.mul_(attention[:, None, :])
        G = _moments(qs, xs, v[:, :1], degree, squared, None)[0]  # (b, t, p, p)
        fit_variance = torch.einsum("bp,btpq,bq->bt", c, G, c).clamp_min(0.0)
        fit_variance = torch.where(singular[:, None], squared.sum(2), fit_variance) * unit
    if own is not None:
        a_own = attention.gather(1, own[:, None])[:, 0]  # (b,)
        own_weight = torch.where(singular, a_own, a_own * c[:, 0])
    rows = beyond_spread(M, r).nonzero()[:, 0]
    if len(rows):
        out_i, kernel, singular_i = local_fit_dense(qs[rows], xs, attention[rows], v, degree)
        kernel = torch.where(singular_i[:, None], attention[rows], kernel)  # (k, n)
        out, singular = out.index_put((rows,), out_i), singular.index_put((rows,), singular_i)
        if variance is not None:
            fit_variance = fit_variance.index_put((rows,), kernel**2 @ variance)
        if own is not None:
            own_weight = own_weight.index_put((rows,), kernel.gather(1, own[rows, None])[:, 0])
    return out, singular, fit_variance, own_weight


# Up to this many attentions of the same queries, their moments are products of each with
# the keys' raw moments (degree 1, :func:`_linear_moments`) or designs (b, n, p); beyond,
# of all of them with the designs' outer products (b, n, p^2 + p t + 1), built once
# (:func:`_moment_columns`).
DIRECT_MOMENTS = 2


def _moments(qs, xs, v, degree, by_query, workspace):
    """The moments of :func:`local_fit_many` under attentions ``by_query`` (b, G, n):
    ``M`` (b, G, p, p), ``sum_j a_j z_j v_j`` (b, G, p, t) and whether a fit weighs a key
    whose outer products overflow (b, G) (left out of the sums)."""
    b, G, n = by_query.shape
    t = v.shape[1]
    n_outer = n_terms(xs.shape[1], degree) ** 2
    limit = (torch.finfo(xs.dtype).max / n_outer) ** (1 / (2 * degree))
    # No difference can overflow its outer products below this bound on them all.
    bound = float(xs.detach().abs().amax() + qs.detach().abs().amax()) if xs.numel() else 0.0
    if G <= DIRECT_MOMENTS and bound < limit / 2:
        no_overflow = torch.zeros(b, G, dtype=torch.bool, device=xs.device)
        if degree == 1:
            return (*_linear_moments(qs, xs, v, by_query), no_overflow)
        return (*_direct_moments(xs[None, :, :] - qs[:, None, :], v, degree, by_query),
                no_overflow)
    u = xs[None, :, :] - qs[:, None, :]  # (b, n, r)
    columns, entries, p, n_outer, _ = _moment_columns(u, v, degree, workspace)
    moments = torch.bmm(columns, by_query.transpose(1, 2)).transpose(1, 2)  # (b, G, k)
    M = moments[:, :, entries.to(u.device)]  # (b, G, p, p)
    zv = moments[:, :, n_outer : n_outer + p * t].reshape(b, G, p, t)
    return M, zv, moments[:, :, -1] > 0


def _direct_moments(u, v, degree, by_query):
    """``M`` (b, G, p, p) and ``sum_j a_j z_j v_j`` (b, G, p, t) of :func:`_moments`, each
    attention times the designs ``z = phi(u)`` (b, n, p) of the differences ``u``."""
    z = design(u, degree)  # (b, n, p)
    M, zv = [], []
    for g in range(by_query.shape[1]):
        az = by_query[:, g, :, None] * z  # (b, n, p)
        M.append(az.transpose(1, 2) @ z)  # (b, p, p)
        zv.append(az.transpose(1, 2) @ v)  # (b, p, t)
    return torch.stack(M, 1), torch.stack(zv, 1)


# The relative precision local-linear moments moved to their query must keep (about 9
# digits of float64, 4 of float32), else they are summed about the query.
MOVED_PRECISION = {torch.float64: 1e-9, torch.float32: 1e-4}


def moved_sums_lose_digits(ratio, error):
    """Whether local-linear moments moved from a center to their query
    (:func:`linear_moments_at`) keep less than ``MOVED_PRECISION``: ``ratio`` (...) is the
    largest raw second moment over the spread about the query, which multiplies the
    sums' relative ``error`` (...) (at least the float type's epsilon)."""
    eps = torch.finfo(ratio.dtype).eps
    return ratio * (eps + error) > MOVED_PRECISION.get(ratio.dtype, eps**0.5)


def linear_raw_columns(x, v):
    """The keys' raw moments ``[1, x, x_k x_l (k <= l), v, x v]`` (n, k) of coordinates
    ``x`` (n, r) (about some center) and values ``v`` (n, t), whose attention-weighted
    sums :func:`linear_moments_at` moves to each query."""
    n, r = x.shape
    first, second = torch.triu_indices(r, r, device=x.device)
    return torch.cat([torch.ones_like(x[:, :1]), x, x[:, first] * x[:, second], v,
                      (x[:, :, None] * v[:, None, :]).reshape(n, r * v.shape[1])], 1)


def linear_moments_at(sums, q, t):
    """The local-linear moments about each query from the weighted sums ``sums`` (..., k)
    of :func:`linear_raw_columns` (about the same center as ``q`` (..., r)):
    ``sum_j a_j (x_j - q)(x_j - q)^T = S2 - q S1^T - S1 q^T + S0 q q^T`` and so on.
    Returns ``M`` (..., 1 + r, 1 + r), ``sum_j a_j z_j v_j`` (..., 1 + r, t) and, per
    query (...), the largest ratio of a raw second moment to the spread about the query
    (inf where a spread is 0): the factor by which moving amplifies the sums' relative
    errors."""
    r = q.shape[-1]
    first, second = torch.triu_indices(r, r, device=q.device)
    u = len(first)
    s0, s1 = sums[..., :1], sums[..., 1 : 1 + r]  # (..., 1), (..., r)
    pair = torch.empty(r, r, dtype=torch.long, device=q.device)
    pair[first, second] = pair[second, first] = torch.arange(u, device=q.device)
    s2 = sums[..., 1 + r : 1 + r + u][..., pair]  # (..., r, r)
    t0 = sums[..., 1 + r + u : 1 + r + u + t]  # (..., t)
    t1 = sums[..., 1 + r + u + t :].reshape(*sums.shape[:-1], r, t)  # (..., r, t)
    m1 = s1 - s0 * q  # (..., r): sum_j a_j (x_j - q)
    m2 = (s2 - q[..., :, None] * s1[..., None, :] - s1[..., :, None] * q[..., None, :]
          + s0[..., None] * q[..., :, None] * q[..., None, :])  # (..., r, r)
    M = torch.cat([torch.cat([s0[..., None], m1[..., None, :]], -1),
                   torch.cat([m1[..., :, None], m2], -1)], -2)  # (..., 1 + r, 1 + r)
    zv = torch.cat([t0[..., None, :], t1 - q[..., :, None] * t0[..., None, :]], -2)
    with torch.no_grad():
        raw_second = torch.diagonal(s2, dim1=-2, dim2=-1)  # (..., r)
        spread = torch.diagonal(m2, dim1=-2, dim2=-1)  # (..., r)
        ratio = torch.where(spread > 0, raw_second / spread, torch.inf).amax(-1)
    return M, zv, ratio


def linear_fits_from_sums(sums, q, t, error=0.0):
    """Local-linear fits (..., t) at queries ``q`` (..., r) from their attention's sums
    ``sums`` (..., k) of :func:`linear_raw_columns` (about the queries' center), their
    Nadaraya-Watson values where the design is singular, as :func:`local_fit_many`
    computes them; and the fits (...) it would compute otherwise: sums of relative
    ``error`` (...) that lose digits once moved to the query
    (:func:`moved_sums_lose_digits`), a query beyond ``ORIGIN_SPREADS`` spreads of its
    keys' mean (whose design it centers at the mean). Differentiable in ``sums``."""
    M, zv, ratio = linear_moments_at(sums, q, t)  # (..., p, p), (..., p, t), (...)
    lost = moved_sums_lose_digits(ratio, error)
    p = M.shape[-1]
    # Lost rows' matrices can be rounding, not even semi-definite: not solved.
    eye = torch.eye(p, dtype=M.dtype, device=M.device)
    flat_M = torch.where(lost[..., None, None], eye, M).reshape(-1, p, p)
    E = torch.zeros_like(flat_M[:, 0])  # the value at the query
    E[:, 0] = 1.0
    c, singular = intercept_rows(flat_M, E, p - 1)
    c, singular = c.reshape(M.shape[:-1]), singular.reshape(M.shape[:-2])  # (..., p), (...)
    fit = (c[..., :, None] * zv).sum(-2)  # (..., t)
    singular = singular | ~torch.isfinite(fit.detach()).all(-1)
    outside = beyond_spread(M, p - 1)
    return torch.where(singular[..., None], zv[..., 0, :], fit), lost | outside


def _linear_moments(qs, xs, v, by_query):
    """:func:`_direct_moments` of degree 1 as one product of each attention with the keys'
    raw moments (:func:`linear_raw_columns`) about the queries' mean, moved to each query
    (:func:`linear_moments_at`). No (b, n, p) design is formed; the rows whose moved sums
    would lose digits (:func:`moved_sums_lose_digits`) are summed about their queries
    instead (:func:`_direct_moments`)."""
    center = qs.detach().mean(0)  # (r,)
    sums = by_query @ linear_raw_columns(xs - center, v)  # (b, G, k)
    M, zv, ratio = linear_moments_at(sums, (qs - center)[:, None, :], v.shape[1])
    lost = moved_sums_lose_digits(ratio, 0.0).any(1)  # (b,)
    if bool(lost.any()):
        rows = lost.nonzero()[:, 0]
        M_rows, zv_rows = _direct_moments(xs[None, :, :] - qs[rows, None, :], v, 1,
                                          by_query[rows])
        M, zv = M.index_put((rows,), M_rows), zv.index_put((rows,), zv_rows)
    return M, zv


def leave_one_out_local_fits(qs, xs, attention, v, degree, bounded=False, *,
                             return_own=False):
    """The local fits of queries without each key, all at once (Sherman-Morrison).

    Without key j the moment matrix loses ``a_j z_j z_j^T`` and the fit at the query
    moves by ``- l_j r_j / (1 - h_j)``, with ``l_j`` the equivalent kernel, ``r_j = v_j -
    z_j . beta`` the residual of key j from the query's own local polynomial and ``h_j =
    a_j z_j^T M^-1 z_j`` its leverage there; the attention's renormalization without j
    does not move a least-squares fit. A bounded fit (``bounded``) is bounded again
    without key j (:func:`bound`): its Nadaraya-Watson value and its range are those of
    the attention without j.

    Parameters
    ----------
    qs : Tensor (b, r)
    xs : Tensor (n, r) or (b, n, r)
        The keys, or each query's own n keys (gathered: a sparse route's keys in reach,
        padded with keys of no attention).
    attention : Tensor (b, n)
        Nadaraya-Watson attention, rows summing to 1.
    v : Tensor (n, t) or (b, n, t)
        The keys' values, gathered as ``xs`` is.
    degree : {1, 2}
    bounded : bool, default=False
        Not with gathered keys nor ``return_own``.
    return_own : bool, default=False
        Also return each query's own fit (b, t) and whether its design is singular (b,)
        (its own fit 0 there).

    Returns
    -------
    fits : Tensor (b, n, t)
        The fit at each query without each key; 0 where ``missing``.
    missing : Tensor (b, n) of bool
        Not computed here: the query's own fit is not identified, or its moment matrix
        is nearly singular (a minimum-norm fit, whose update is not this one), or it is
        without key j (``h_j`` within ``sqrt(eps)`` of 1).
    """
    gathered = xs.dim() == 3
    if bounded and (gathered or return_own):
        raise ValueError("Bounded fits without each key take every key (xs of (n, r)) "
                         "and give no own fit.")
    u, e = _centered(qs, xs, attention)  # (b, n, r), (b, r)
    z = design(u, degree)  # (b, n, p)
    az = attention[:, :, None] * z  # (b, n, p)
    M = az.transpose(1, 2) @ z  # (b, p, p)
    c, singular = intercept_rows(M, design(e, degree), e.shape[1])  # (b, p)
    eps = torch.finfo(M.dtype).eps
    p = M.shape[1]
    eye = torch.eye(p, dtype=M.dtype, device=M.device)
    diag = torch.diagonal(M, dim1=1, dim2=2)  # (b, p)
    s = torch.where(diag > 0, diag, 1.0).rsqrt()  # (b, p)
    unit = torch.where(singular[:, None, None], eye, M * s[:, :, None] * s[:, None, :])
    eigenvalues = torch.linalg.eigvalsh(unit)  # (b, p)
    singular = singular | (eigenvalues[:, 0] <= eps**0.5 * eigenvalues[:, -1])
    # M^-1 z_j through the unit-diagonal matrix: S (S M S)^-1 S z_j. Its inverse (it is
    # well conditioned, nearly singular ones are refitted): torch's batched solve of
    # several right-hand sides ran a hundred times slower (torch 2.13, CPU).
    inverse = torch.linalg.inv(torch.where(singular[:, None, None], eye, unit))  # (b, p, p)
    solved = inverse @ (z * s[:, None, :]).transpose(1, 2)  # (b, p, n)
    solved = solved * s[:, :, None]  # (b, p, n)
    values = v if gathered else v[None]  # (b, n, t) or (1, n, t)
    beta = solved @ (attention[:, :, None] * values)  # (b, p, t)
    residual = values - z @ beta  # (b, n, t)
    leverage = attention * (z * solved.transpose(1, 2)).sum(2)  # (b, n)
    kernel = (az @ c[:, :, None])[:, :, 0]  # (b, n)
    room = 1.0 - leverage  # (b, n)
    # Without key j the (unit-diagonal) moment matrix's condition grows by up to about
    # 1 / room: where it may pass the refit's threshold of a null space (sqrt(eps),
    # intercept_rows: a truncated minimum-norm fit there), or the update lose the digits
    # a refit keeps, the fit is refitted.
    condition = torch.where(singular, 1.0, eigenvalues[:, -1] / eigenvalues[:, 0])  # (b,)
    missing = singular[:, None] | ~(room > _CONDITION_MARGIN * eps**0.5 * condition[:, None])
    own = (kernel[:, None, :] @ v)[:, 0] if gathered else kernel @ v  # (b, t)
    fits = own[:, None, :] - kernel[:, :, None] * residual / torch.where(
        missing, 1.0, room)[:, :, None]  # (b, n, t)
    if bounded:
        fits, nadaraya_watson_missing = _bound_without_each(fits, attention, v)
        missing = missing | nadaraya_watson_missing
    missing = missing | ~torch.isfinite(fits).all(2)
    fits = torch.where(missing[:, :, None], 0.0, fits)
    if not return_own:
        return fits, missing
    return fits, missing, torch.where(singular[:, None], 0.0, own), singular


def _bound_without_each(fits, attention, v):
    """:func:`bound` of the fits without each key ``fits`` (b, n, t): the Nadaraya-Watson
    value without key j ``m_j`` and the range of the targets of the keys that keep a
    share ``RANGE_SHARE`` of the largest attention without j; and where ``m_j`` has no
    weight to stand on (b, n) (the query's weight all on key j)."""
    b, n = attention.shape
    rows = torch.arange(b, device=attention.device)
    top = attention.argmax(1)  # (b,)
    largest = attention[rows, top]  # (b,)
    rest = attention.clone()
    rest[rows, top] = 0.0
    second = rest.amax(1)  # (b,) the largest without the top key
    # m without j (b, n, t): the others' weighted mean; the top key's summed directly.
    total, pooled = attention.sum(1), attention @ v  # (b,), (b, t)
    others = total[:, None] - attention  # (b, n)
    others[rows, top] = rest.sum(1)
    others_v = pooled[:, None, :] - attention[:, :, None] * v[None]  # (b, n, t)
    others_v[rows, top] = rest @ v
    tiny = torch.finfo(attention.dtype)
    missing = others <= tiny.tiny / tiny.eps  # (b, n)
    m = others_v / torch.where(missing, 1.0, others)[:, :, None]  # (b, n, t)
    # The range without j, for j other than the top key: the held keys but j, whose
    # smallest and largest are the held keys' unless j is one of them (then the next).
    held = attention >= RANGE_SHARE * largest[:, None]  # (b, n)
    lo = torch.where(held[:, :, None], v[None], torch.inf)  # (b, n, t)
    hi = torch.where(held[:, :, None], v[None], -torch.inf)
    lo2, lo_at = lo.topk(2, dim=1, largest=False)  # (b, 2, t): n >= 2 keys
    hi2, hi_at = hi.topk(2, dim=1)
    keys = torch.arange(n, device=v.device)[None, :, None]  # (1, n, 1)
    lo_j = torch.where(keys == lo_at[:, :1], lo2[:, 1:], lo2[:, :1])  # (b, n, t)
    hi_j = torch.where(keys == hi_at[:, :1], hi2[:, 1:], hi2[:, :1])
    # Without the top key the largest attention is the second: more keys are held.
    held_top = (attention >= RANGE_SHARE * second[:, None]) & (keys[..., 0] != top[:, None])
    lo_j[rows, top] = torch.where(held_top[:, :, None], v[None], torch.inf).amin(1)
    hi_j[rows, top] = torch.where(held_top[:, :, None], v[None], -torch.inf).amax(1)
    lam = _shrink(fits, m, lo_j, hi_j)  # (b, n, 1)
    return m + lam * (fits - m), missing


def bound(out, kernel, attention, v, nadaraya_watson=None, value_range=None):
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
    nadaraya_watson : Tensor (..., t), optional
        ``m`` where the caller has it (the first of a local fit's moments).
    value_range : TargetRange, optional
        Each key's smallest and largest target, where its ``v`` is a mean of rows of
        different targets: the range is theirs.

    Returns
    -------
    out : Tensor (..., t)
        The bounded fits.
    kernel : Tensor (..., n) or None
        Their equivalent kernels, ``attention + lam (kernel - attention)``.
    """
    m = attention @ v if nadaraya_watson is None else nadaraya_watson  # (..., t)
    held = attention >= RANGE_SHARE * attention.amax(-1, keepdim=True)  # (..., n)
    lo, hi = held_range(held, *((v,) if value_range is None else value_range))  # (..., t)
    lam = _shrink(out, m, lo, hi)  # (..., 1)
    if kernel is not None:
        kernel = attention + lam * (kernel - attention)
    return m + lam * (out - m), kernel


def held_range(held, v, high=None):
    """The smallest and largest target of the held keys, ``(lo, hi)`` (..., t) each
    (``inf`` and ``-inf`` where none is held), from ``held`` (..., n) and ``v`` (n, t)
    (with ``high`` (n, t), each key's smallest target ``v`` and largest ``high``).

    One output at a time, by the keys' ranks in its values: the largest rank from the
    top (the smallest value) and from the bottom among the held keys, each the maximum
    of a product of the mask with integer ranks (a selection of the values by a mask
    costs about ten times as much per entry: measured, (29, 25, 800) blocks of a local
    fit's grid on one thread, 1.9 ms against 0.14 ms). Exact: the bounds are targets."""
    lo, hi = [], []
    for c, column in enumerate(v.T):
        ranked = _ranked(column)
        lo.append(_held_end(held, ranked, largest=False))
        hi.append(_held_end(held, ranked if high is None else _ranked(high[:, c]),
                            largest=True))
    return torch.stack(lo, -1), torch.stack(hi, -1)


def _ranked(column):
    """Each value's rank (n,) in ``column`` (n,) and the values in ascending order."""
    order = torch.argsort(column)
    rank = torch.empty(len(column), dtype=torch.int64, device=column.device)
    rank[order] = torch.arange(len(column), device=column.device)
    return rank, column[order]


def _held_end(held, ranked, largest):
    """The smallest (or ``largest``) of a column of ``_ranked`` over the held keys (...,
    n): ``inf`` (``-inf``) where none is held (:func:`held_range`)."""
    rank, ascending = ranked
    n = len(rank)
    rank_dtype = torch.int16 if n < 2**15 - 1 else torch.int32
    # 0: no key held (a row of NaN attention), read as the infinite ends.
    inf = ascending.new_full((1,), torch.inf)
    if largest:
        from_top = (held * (rank + 1).to(rank_dtype)).amax(-1).long()  # highest rank + 1
        return torch.cat([-inf, ascending])[from_top]
    from_bottom = (held * (n - rank).to(rank_dtype)).amax(-1).long()  # n - lowest rank
    return torch.cat([ascending, inf])[n - from_bottom]


def _shrink(out, m, lo, hi):
    """The largest ``lam`` (..., 1) in [0, 1] with ``m + lam (out - m)`` within [lo, hi]
    for every output (..., t); 1 without outputs."""
    step = out - m
    room = torch.where(step > 0, hi - m, lo - m)
    moves = step != 0
    lam = torch.where(moves, room / torch.where(moves, step, 1.0), 1.0).clamp(0.0, 1.0)
    return lam.amin(-1, keepdim=True) if lam.shape[-1] else lam.new_ones(lam.shape[:-1] + (1,))
