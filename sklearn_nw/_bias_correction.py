"""Conventional and robust bias-corrected confidence intervals for the regression function
(Calonico, Cattaneo and Farrell 2018), at each query from its attention rows, as nprobust's
``lprobust`` computes them in one feature.

At a query x, with the attention ``a`` of bandwidth h and ``c`` of the bias bandwidth b
(keys in units of h, ``u_i = (x_i - x) / h``), the local polynomial of degree p,

    G_p = sum_i a_i z_i z_i^T,   beta_p = G_p^-1 sum_i a_i z_i y_i,   z_i = phi_p(u_i),

estimates f(x) by ``beta_p[0]``; its leading bias is estimated from the degree q = p + 1
fit with the attention ``c``: ``gamma``, the coefficients of its degree-q monomials
``m_i``, so that the bias-corrected estimate is ``e_1^T G_p^-1 sum_i Q_i y_i`` with

    Q_i = a_i z_i - (sum_k a_k z_k m_k^T) [G_q^-1 c_i w_i]_(degree q rows),  w_i = phi_q(u_i).

Both estimates are linear in the targets, ``sum_i l_i y_i``; their variances are
``sum_i l_i^2 r_i^2``, the residuals ``r_i`` of the window's points (their weight positive
under either bandwidth) from the query's own local fits, of degree p for the conventional
interval and q for the robust one, scaled as nprobust's ``vce``; or, for ``"nn"``, from
each window point's nearest others in the window. The robust interval is centered at the
bias-corrected estimate and uses its variance: the bias estimate's own variance is in it.
"""

import numpy as np
import torch

from ._local_poly import design
from ._uncertainty import nearest_others


def _design(u, degree):
    """``phi(u)`` (..., terms) of differences ``u`` (..., r): the local polynomials' one
    layout (:func:`~sklearn_nw._local_poly.design`)."""
    return design(torch.from_numpy(np.ascontiguousarray(u)), degree).numpy()


def _window_residual_scale(method, n_window, n_params, leverage):
    """nprobust's factor on each residual (b, n): 1, ``sqrt(n / (n - d))``,
    ``1 / sqrt(1 - h_ii)`` or ``1 / (1 - h_ii)`` (``d`` the fit's parameters, ``n`` the
    window's points)."""
    if method == "hc0":
        return np.ones_like(leverage)
    if method == "hc1":
        scale = np.sqrt(n_window / np.maximum(n_window - n_params, 1))  # (b,)
        return np.broadcast_to(scale[:, None], leverage.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        room = 1.0 - leverage
        return room**-0.5 if method == "hc2" else 1.0 / room


def _window_neighbors_residuals(points, window, y, n_neighbors):
    """nprobust's ``"nn"`` residuals (b, n, t) within each query's window: for each
    window point, ``sqrt(J / (J + 1)) (y_i - mean of y_j)`` over its nearest other window
    points (:func:`~sklearn_nw._uncertainty.nearest_others`, found by a tree on
    ``points``); 0 outside the window."""
    b, n = window.shape
    out = np.zeros((b, n, y.shape[1]))
    for k in range(b):
        if window[k].sum() < 2:
            continue  # its design is singular: the query is refused
        neighbors = nearest_others(window[k], n_neighbors, points=points)
        count = np.diff(neighbors.indptr)[:, None].astype(np.float64)  # (n, 1)
        mean = (neighbors @ y) / np.maximum(count, 1.0)
        out[k] = np.where(window[k][:, None],
                          np.sqrt(count / (count + 1)) * (y - mean), 0.0)
    return out


def kernel_attention(u, kernel, log_w):
    """The attention (b, n) of queries on every key from their differences ``u`` (b, n, r)
    in the kernel's units: ``w_i k(|u_i|)`` normalized per query (max-subtracted in log
    space), float64. A query with no key in the kernel's reach gets a row of zeros: its
    local designs are singular, and the query is refused."""
    u2 = torch.from_numpy(np.einsum("bnr,bnr->bn", u, u))  # (b, n)
    logits = kernel.log_profile_sq(u2).numpy() + np.asarray(log_w, dtype=np.float64)
    top = logits.max(1, keepdims=True, initial=-np.inf)  # (b, 1)
    weights = np.exp(logits - np.where(np.isfinite(top), top, 0.0))
    total = weights.sum(1, keepdims=True)
    return weights / np.where(total > 0, total, 1.0)


def _in_windows(window, width, u, a, c, y, res_nn):
    """Each query's window columns (b, n) in order, padded to ``width`` with the first
    key out of the window (weight 0, residual 0): ``u, a, c, y, window, res_nn`` (None
    kept) as (b, width, ...)."""
    rows, cols = np.nonzero(window)
    place = np.cumsum(window, 1)[rows, cols] - 1
    index = np.zeros((len(window), width), dtype=np.int64)
    index[rows, place] = cols
    inside = np.zeros(index.shape, dtype=bool)
    inside[rows, place] = True

    def take(block):
        return np.take_along_axis(block, index.reshape(index.shape + (1,) * (block.ndim - 2)),
                                  1)

    a, c = (np.where(inside, take(weights), 0.0) for weights in (a, c))
    res_nn = None if res_nn is None else np.where(inside[:, :, None], take(res_nn), 0.0)
    return take(u), a, c, take(y), inside, res_nn


def _inverse(G):
    """The inverses (b, k, k) of moment matrices ``G`` (b, k, k), through their unit
    diagonal form ``S G S`` (``S = diag(G)^-1/2``: ``G^-1 = S (S G S)^-1 S``), and which
    are singular (b,): not finite, or a condition number of the unit form of 1e12 or more
    (the identity's inverse stands in for theirs). The columns of a design in units of h
    have different scales (a bandwidth far wider than a feature's spread makes its
    column, and more its square, tiny), which the unit form takes out: only a design
    with no information on a column is singular."""
    diag = np.diagonal(G, axis1=1, axis2=2)  # (b, k)
    s = 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0))  # (b, k)
    unit = G * s[:, :, None] * s[:, None, :]  # (b, k, k)
    finite = np.isfinite(unit).all((1, 2))
    unit = np.where(finite[:, None, None], unit, np.eye(G.shape[1]))
    singular = ~finite | ~(np.linalg.cond(unit) < 1e12)  # (b,)
    inverse = np.linalg.inv(np.where(singular[:, None, None], np.eye(G.shape[1]), unit))
    return inverse * s[:, :, None] * s[:, None, :], singular


def bias_corrected_fits(u, a, c, y, degree, method, n_neighbors, points):
    """The conventional and bias-corrected estimates and their standard errors at a block
    of queries.

    Parameters
    ----------
    u : ndarray of shape (b, n, r)
        The keys' differences from each query, in units of the bandwidth h.
    a, c : ndarray of shape (b, n)
        The attention of bandwidth h and of the bias bandwidth b.
    y : ndarray of shape (n, t)
    degree : {0, 1}
        p; the bias is estimated by a fit of degree p + 1.
    method : {"nn", "hc0", "hc1", "hc2", "hc3"}
    n_neighbors : int
        nprobust's ``nnmatch``, for ``"nn"``.
    points : ndarray of shape (n, r)
        The keys in units of h, where ``"nn"`` finds neighbors.

    Returns
    -------
    tau_cl, tau_bc, se_cl, se_rb : ndarray of shape (b, t)
        NaN for a query whose local design is singular in its window.
    """
    window = (a > 0) | (c > 0)  # (b, n)
    res_nn = (_window_neighbors_residuals(points, window, y, n_neighbors)
              if method == "nn" else None)  # (b, n, t)
    y = np.broadcast_to(y, (len(a),) + y.shape)  # (b, n, t): each query's keys' targets
    width = int(window.sum(1).max(initial=0))
    if 2 * width < window.shape[1]:
        # A compact kernel: each query's window alone, padded to the widest (weight 0).
        u, a, c, y, window, res_nn = _in_windows(window, width, u, a, c, y, res_nn)
    zp = _design(u, degree)  # (b, n, P)
    zq = _design(u, degree + 1)  # (b, n, Q)
    P = zp.shape[2]
    # Batched products (BLAS) rather than einsums of three operands (unoptimized loops).
    azp, czq = a[:, :, None] * zp, c[:, :, None] * zq  # (b, n, P), (b, n, Q)
    Gp = azp.swapaxes(1, 2) @ zp  # (b, P, P)
    Gq = czq.swapaxes(1, 2) @ zq  # (b, Q, Q)
    (Gp_inv, singular_p), (Gq_inv, singular_q) = _inverse(Gp), _inverse(Gq)
    singular = singular_p | singular_q  # (b,)
    beta_p = Gp_inv @ (azp.swapaxes(1, 2) @ y)  # (b, P, t)
    beta_q = Gq_inv @ (czq.swapaxes(1, 2) @ y)  # (b, Q, t)
    # The q-fit's weights on the degree-q monomials, and the p-fit's moments of them.
    bias_rows = czq @ Gq_inv[:, P:, :].swapaxes(1, 2)  # (b, n, m)
    moments = azp.swapaxes(1, 2) @ zq[:, :, P:]  # (b, P, m)
    Q = azp - bias_rows @ moments.swapaxes(1, 2)  # (b, n, P)
    kernel_cl = (azp @ Gp_inv[:, 0, :, None])[:, :, 0]  # (b, n)
    kernel_bc = (Q @ Gp_inv[:, 0, :, None])[:, :, 0]  # (b, n)
    tau_cl = (kernel_cl[:, None, :] @ y)[:, 0]  # (b, t)
    tau_bc = (kernel_bc[:, None, :] @ y)[:, 0]
    if method == "nn":
        res_h = res_b = res_nn
    else:
        leverage = a * ((zp @ Gp_inv) * zp).sum(2)  # (b, n)
        n_window = window.sum(1)  # (b,)
        scale_h = _window_residual_scale(method, n_window, P, leverage)
        scale_b = _window_residual_scale(method, n_window, zq.shape[2], leverage)
        res_h = (y - zp @ beta_p) * scale_h[:, :, None]  # (b, n, t)
        res_b = (y - zq @ beta_q) * scale_b[:, :, None]
        res_h = np.where(window[:, :, None], res_h, 0.0)
        res_b = np.where(window[:, :, None], res_b, 0.0)
    se_cl = np.sqrt(((kernel_cl**2)[:, None, :] @ res_h**2)[:, 0])  # (b, t)
    se_rb = np.sqrt(((kernel_bc**2)[:, None, :] @ res_b**2)[:, 0])
    out = [tau_cl, tau_bc, se_cl, se_rb]
    for o in out:
        o[singular] = np.nan
    return out
