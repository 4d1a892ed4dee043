"""Local polynomials (``degree`` 1 or 2) on the route they fit on.

:class:`LocalPolynomialRoute` holds the route of the fit (dense, a search, adaptive) and
adds the local fit: the route's attention weighs a least-squares polynomial of the values
around each query (:mod:`sklearn_nw._local_poly`), whose intercept is the prediction and
whose equivalent kernel is the attention.
"""

import math

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import gen_batches

from ._engine import key_center
from ._local_poly import (
    beyond_spread,
    intercept_rows,
    leave_one_out_local_fits,
    linear_moments_at,
    linear_raw_columns,
    local_fit_many,
    local_fit_sparse,
    local_fit_with_variance,
    moved_sums_lose_digits,
    n_terms,
    slope_rows,
)
from ._routes import (
    GradientWeights,
    LeaveOneOutMoves,
    PooledValues,
    PooledWithVariance,
    PoolSettings,
    Route,
)
from ._uncertainty import dense_rows, padded_rows
from ._workers import PASS_BYTES, chunk_rows, serial_if_small


class LocalPolynomialRoute(Route):
    """Local polynomial fits on the attention of ``base``.

    Parameters
    ----------
    base : Route
        The route whose attention weighs the fits; this one has its name, index and kinds
        of attention.
    keys : FittedKeys
        The keys both routes are built for.
    degree : {1, 2}
    bounded : bool
        Fits kept within the range of the values carrying their weight
        (:func:`~sklearn_nw._local_poly.bound`).

    Attributes
    ----------
    center : ndarray of shape (r,)
        Where the designs' differences are taken from: the median of the keys of positive
        weight in the scaled metric (where the kernel's reach is about 1).
    centered_keys : ndarray of shape (n, r)
        The keys in the scaled metric, less ``center``, in the keys' dtype.
    """

    def __init__(self, base, keys, degree, bounded):
        super().__init__(keys)
        self.base, self.degree, self.bounded = base, degree, bounded
        self.name, self.index, self.key_bandwidth = base.name, base.index, base.key_bandwidth
        self.attention_is_sparse = base.attention_is_sparse
        self.leave_one_out_is_sparse = base.leave_one_out_is_sparse
        # Fits without each key from the keys in reach alone (leave_one_out_sparse_fits).
        # (Not on the k nearest keys: a key's removal brings in the next one.)
        self.leave_one_out_in_reach = (base.attention_is_sparse and not bounded
                                       and getattr(base, "adaptive", None) is None
                                       and not hasattr(base, "leave_one_out_held_fits"))
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = keys.scaled(keys.X)  # (n, r)
        # The polynomials' coordinates: the leading polynomial_columns (the continuous
        # features of embedded categorical ones; all by default).
        self.columns = slice(0, keys.polynomial_columns)
        scaled = scaled[:, self.columns]
        self.center = key_center(torch.from_numpy(scaled[keys.sample_weight > 0])).numpy()
        self.centered_keys = (scaled - self.center).astype(keys.dtype)

    def pool(self, keys, queries, settings):
        """Local fits on the base route's attention, in chunks of queries whose attention
        and designs fit in ``working_memory``; a query whose design is singular keeps its
        Nadaraya-Watson value and attention."""
        xs = self.centered_keys
        n_q, n = queries.shape[0], keys.X.shape[0]
        p = n_terms(xs.shape[1], self.degree)
        # Designs (n p), the fits' products and the bound's temporaries (n each).
        step = chunk_rows(n_q, n * (2 * p + 4) * keys.dtype.itemsize, settings.working_memory)
        with_attention = settings._replace(return_attention=True)
        outs, attentions, n_fallback, n_singular = [], [], 0, 0
        for rows in gen_batches(n_q, step):
            pooled = self.base.pool(keys, queries[rows], with_attention)
            with np.errstate(over="ignore", invalid="ignore"):
                qs = keys.scaled(queries[rows])[:, self.columns] - self.center  # (b, r)
            out, attention, singular = self._local_fit(
                keys, qs, pooled.out, pooled.attention, settings.device,
                need_kernel=settings.return_attention)
            outs.append(out)
            attentions.append(attention)
            n_fallback += pooled.n_fallback
            n_singular += singular
        attention = None
        if settings.return_attention:
            attention = (sp.vstack(attentions, format="csr") if sp.issparse(attentions[0])
                         else np.concatenate(attentions))
        return PooledValues(np.concatenate(outs), attention, n_fallback, n_singular)

    def pool_with_variance(self, keys, queries, variance, *, device="cpu",
                           working_memory=1024):
        """The fits at ``queries`` and ``sum_i l_i**2 s_i**2`` (n_q, t) of their
        equivalent kernels ``l`` for the keys' variances ``variance`` (n, t), from
        moments (:func:`~sklearn_nw._local_poly.local_fit_with_variance`), no kernel
        formed: a :class:`~sklearn_nw._routes.PooledWithVariance` in float64, or None
        for bounded fits (whose kernel depends on the values) and sparse attention (the
        attention path serves those calls)."""
        if self.bounded or self.attention_is_sparse:
            return None
        out, fit_variance, _, n_fallback, n_singular = self._fits_with_sums(
            keys, queries, device, working_memory, variance=variance)
        return PooledWithVariance(out, fit_variance, n_fallback, n_singular)

    def in_sample_with_leverage(self, keys, *, device="cpu", working_memory=1024):
        """The in-sample fits (n, t) of the keys and each key's weight in its own fit (n,),
        from moments as in :meth:`pool_with_variance` (None where it is)."""
        if self.bounded or self.attention_is_sparse:
            return None
        out, _, own_weight, _, _ = self._fits_with_sums(
            keys, keys.X, device, working_memory, own=np.arange(keys.X.shape[0]))
        return out, own_weight

    def leave_one_out_moves(self, keys, queries, *, device="cpu", working_memory=1024):
        """How the local-linear fits at ``queries`` move without each key, for the
        jackknife+: ``-l_j r_j / (1 - h_j)``
        (:func:`~sklearn_nw._local_poly.leave_one_out_local_fits`) from the moments of one
        pass of sums (no attention matrix) and, for the keys asked, their differences to
        the query. A :class:`~sklearn_nw._routes.LeaveOneOutMoves`, or None but for degree
        1, unbounded fits of one output on dense sums, and a decreasing kernel whose peaks
        :func:`profile_peaks` knows.

        With ``z_j = (1, u_j)`` (``u_j`` the key's scaled difference to the query, ``t_j``
        its norm), ``c`` and ``beta`` the intercept row and the coefficients, ``P =
        M^-1`` and ``A`` a bound on ``a_j / k~(t_j)`` (``k~ = k / k(0)``): ``|l_j| = a_j
        |c_0 + u_j . c_u| <= a_j (|c_0| + t_j |c_u|)``, ``h_j = a_j z_j^T P z_j <= a_j
        (P_00 + 2 t_j |P_0u| + t_j^2 lam)`` (``lam`` the largest eigenvalue of ``P_uu``)
        and ``|r_j| <= Y + t_j B`` (``Y`` the largest ``|v_j - f|``, ``B = |beta_u|``);
        with ``m_k`` the peaks of ``k~(t) t^k``, ``h_j <= H = A (P_00 m_0 + 2 |P_0u| m_1
        + lam m_2)`` and every move is at most ``A (|c_0| Y m_0 + (|c_0| B + |c_u| Y) m_1
        + |c_u| B m_2) / (1 - H)``; or, where smaller, the same with ``Y`` the distance
        of ``f`` from the values' Nadaraya-Watson mean ``g``, plus ``((|c_0| + |c_u| T) E
        + A Y_g (|c_0| m_0(T) + |c_u| m_1(T))) / (1 - H)`` for the values' own deviation
        from ``g`` (``E`` the largest ``a_j |v_j - g|``, measured in the pass of the
        moments; ``Y_g`` the largest ``|v_j - g|``; the peaks past ``T`` of
        :func:`profile_tail_peaks`). Queries with ``H`` of 1/2 or more, singular or far
        (their fits centered elsewhere, or moved sums losing digits) are left to the
        attention."""
        peaks = profile_peaks(keys.kernel)
        if (self.degree != 1 or self.bounded or peaks is None or keys.values.shape[1] != 1
                or not hasattr(self.base, "sums_of")):
            return None
        f64 = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), device=device)
        xs, v = f64(self.centered_keys), f64(keys.values[:, :1])  # (n, r), (n, 1)
        with np.errstate(over="ignore", invalid="ignore"):
            qs = f64(keys.scaled(queries)[:, self.columns] - self.center)  # (n_q, r)
        r = xs.shape[1]
        at_v = 1 + r + r * (r + 1) // 2  # the values' column of the raw moments
        sums, deviation = self.base.sums_of(
            keys, queries, linear_raw_columns(xs, v).cpu().numpy(), device=device,
            working_memory=working_memory, deviation_of=(at_v,))
        M, zv, ratio = linear_moments_at(f64(sums.out), qs, 1)  # (n_q, p, p), (n_q, p, 1)
        p = M.shape[1]
        eye = torch.eye(p, dtype=M.dtype, device=M.device)
        E = torch.zeros_like(M[:, 0])  # (n_q, p): the value at the query
        E[:, 0] = 1.0
        c, singular = intercept_rows(M, E, p - 1)  # (n_q, p)
        smallest = torch.linalg.eigvalsh(torch.where(singular[:, None, None], eye, M))[:, 0]
        rest = (singular | moved_sums_lose_digits(ratio, 0.0) | beyond_spread(M, p - 1)
                | ~(smallest > 0) | ~torch.isfinite(f64(sums.log_den)))
        inverse = torch.linalg.inv(torch.where(rest[:, None, None], eye, M))  # (n_q, p, p)
        beta = (inverse @ zv)[:, :, 0]  # (n_q, p)
        fits = (c * zv[:, :, 0]).sum(1)  # (n_q,)
        held = v[torch.as_tensor(keys.sample_weight > 0, device=device), 0]
        spread = torch.maximum(fits - held.min(), held.max() - fits)  # Y (n_q,)
        slope = beta[:, 1:].norm(dim=1)  # B (n_q,)
        largest = torch.exp(f64(np.max(keys.log_w) + np.log(keys.kernel([0.0])[0])
                                - sums.log_den))  # A (n_q,)
        lam = torch.linalg.eigvalsh(inverse[:, 1:, 1:])[:, -1]  # (n_q,)
        leverage = largest * (inverse[:, 0, 0] * peaks[0] + lam * peaks[2]
                              + 2 * inverse[:, 0, 1:].norm(dim=1) * peaks[1])  # H (n_q,)
        rest |= ~(leverage < 0.5)
        c0, cu = c[:, 0].abs(), c[:, 1:].norm(dim=1)  # (n_q,)
        room = 1 - leverage.clamp_max(0.5)
        bound = (largest * (c0 * spread * peaks[0] + (c0 * slope + cu * spread) * peaks[1]
                            + cu * slope * peaks[2]) / room)
        # Tighter, from the largest attention-weighted deviation E of the values from
        # their Nadaraya-Watson mean g (measured in the pass): r_j = (v_j - g) + (g - f)
        # - beta_u . u_j, and a_j |v_j - g| (|c_0| + |c_u| t_j) is at most (|c_0| + |c_u|
        # T) E for t_j <= T, A Y_g (|c_0| m_0(T) + |c_u| m_1(T)) beyond (the profile's
        # peaks past T, Y_g the largest |v_j - g|).
        reach, tail = profile_tail_peaks(keys.kernel)
        mean = f64(sums.out[:, at_v])  # g (n_q,)
        near = (c0 + cu * reach) * f64(deviation[:, 0])
        far = largest * torch.maximum(mean - held.min(), held.max() - mean) * (
            c0 * tail[0] + cu * tail[1])
        shift = (mean - fits).abs()  # |g - f|
        rest_of = largest * (c0 * shift * peaks[0] + (c0 * slope + cu * shift) * peaks[1]
                             + cu * slope * peaks[2])
        bound = torch.minimum(bound, (near + far + rest_of) / room)
        rest |= ~torch.isfinite(bound)
        as_numpy = lambda t: t.cpu().numpy()

        def moves(rows, columns):
            a = f64(self.base.attention_on(keys, queries[rows], columns, sums.log_den[rows],
                                           device=device, working_memory=working_memory))
            rows = torch.as_tensor(rows, device=device)
            columns = torch.as_tensor(columns, device=device)
            x = xs[columns] if columns.ndim == 2 else xs[columns][None]  # (b | 1, m, r)
            u = x - qs[rows][:, None]  # (b, m, r): z = (1, u)
            kernel = _linear_form(c[rows], u).mul_(a)  # (b, m)
            room = _quadratic_form(inverse[rows], u).mul_(a).neg_().add_(1)  # 1 - leverage
            residual = _linear_form(beta[rows], u).neg_().add_(v[columns, 0])  # (b, m)
            return as_numpy(kernel.mul_(residual).div_(room).neg_())[:, :, None]  # (b, m, 1)

        return LeaveOneOutMoves(as_numpy(fits)[:, None],
                                as_numpy(torch.where(rest, torch.inf, bound))[:, None],
                                as_numpy(rest), moves)

    def _fits_with_sums(self, keys, queries, device, working_memory, *, variance=None,
                        own=None):
        """The fits at ``queries`` on the base route's dense attention, in chunks, with
        the sums of their kernels that :func:`~sklearn_nw._local_poly.local_fit_with_variance`
        computes (None where not asked): fits (n_q, t), variances (n_q, t), own weights
        (n_q,) (float64), and the numbers of queries given their nearest keys and left
        at their Nadaraya-Watson value (singular), whose sums are their attention's."""
        xs = self.centered_keys
        n_q, n = queries.shape[0], keys.X.shape[0]
        p, t = n_terms(xs.shape[1], self.degree), keys.values.shape[1]
        # The attention, its square, and the moments' columns (at most n (p^2 + p + 1)).
        step = chunk_rows(n_q, n * (p * p + 2 * p + t + 4) * keys.dtype.itemsize,
                          working_memory)
        settings = PoolSettings(torch.device(device), True, "eager", working_memory)
        tensor = lambda a: None if a is None else keys.tensor(a, settings.device)
        as_numpy = lambda a: None if a is None else a.cpu().numpy().astype(np.float64)
        parts, n_fallback, n_singular = [], 0, 0
        workspace = (None if variance is None else
                     keys.tensor(np.empty(min(step, n_q) * n * t, keys.dtype), settings.device))
        for rows in gen_batches(n_q, step):
            with serial_if_small(n_q * n, settings.device):
                pooled = self.base.pool(keys, queries[rows], settings)
                with np.errstate(over="ignore", invalid="ignore"):
                    qs = keys.scaled(queries[rows])[:, self.columns] - self.center  # (b, r)
                fitted = local_fit_with_variance(
                    tensor(qs), tensor(xs), tensor(pooled.attention), tensor(keys.values),
                    self.degree, variance=tensor(variance), workspace=workspace,
                    own=None if own is None else torch.as_tensor(own[rows],
                                                                 device=settings.device))
            out, singular, fit_variance, own_weight = map(as_numpy, fitted)
            singular = singular.astype(bool)
            out[singular] = pooled.out[singular]
            parts.append((out, fit_variance, own_weight))
            n_fallback += pooled.n_fallback
            n_singular += int(singular.sum())
        joined = [None if part[0] is None else np.concatenate(part) for part in zip(*parts)]
        return (*joined, n_fallback, n_singular)

    def gradient_weights(self, keys, queries, settings):
        """The local slopes at ``queries`` (:func:`~sklearn_nw._local_poly.slope_rows`)
        on the base route's attention, in the inputs' coordinates; a query whose local
        design is singular gets the derivative of its Nadaraya-Watson fit, the value
        :meth:`pool` gives it. The slopes are the unbounded polynomial's (``bounded``
        shrinks values, not slopes)."""
        pooled = self.base.pool(keys, queries, settings._replace(return_attention=True))
        tensor = lambda a: torch.as_tensor(np.ascontiguousarray(a, dtype=np.float64),
                                           device=settings.device)
        with np.errstate(over="ignore", invalid="ignore"):
            qs = keys.scaled(queries)[:, self.columns] - self.center  # (b, r)
        slopes, singular = slope_rows(tensor(qs), tensor(self.centered_keys),
                                      tensor(dense_rows(pooled.attention)), self.degree)
        jacobian = tensor(keys.coordinate_jacobian()[:, self.columns])  # (d, r)
        weights = (slopes @ jacobian.T).cpu().numpy()  # (b, n, d)
        singular = singular.cpu().numpy()
        if singular.any():
            weights[singular] = self.base.gradient_weights(keys, queries[singular],
                                                           settings).weights
        return GradientWeights(weights, pooled.n_fallback, int(singular.sum()))

    def leave_one_out_attention(self, keys, settings, estimator_name):
        """The equivalent kernels (n, n) of local fits at the keys themselves on the base
        route's leave-one-out attention (a key's own location has no weight: the fit is
        exact leave-one-out), in chunks of rows. Bounded fits' kernels depend on the
        values (:func:`~sklearn_nw._local_poly.bound`): those of the keys' own."""
        attention, n_fallback, _ = self.base.leave_one_out_attention(keys, settings,
                                                                     estimator_name)
        xs = self.centered_keys
        n = xs.shape[0]
        p = n_terms(xs.shape[1], self.degree)
        step = chunk_rows(n, n * (2 * p + 4) * keys.dtype.itemsize, settings.working_memory)
        parts, n_singular = [], 0
        t = keys.values.shape[1]
        for rows in gen_batches(n, step):
            _, kernel, singular = self._local_fit(
                keys, xs[rows], np.zeros((rows.stop - rows.start, t)), attention[rows],
                settings.device)
            parts.append(kernel)
            n_singular += singular
        kernel = (sp.vstack(parts, format="csr") if sp.issparse(attention)
                  else np.concatenate(parts))
        return kernel, n_fallback, n_singular

    def leave_one_out_fits(self, keys, queries, settings):
        """The local fits at ``queries`` without each key, at this bandwidth
        (:func:`~sklearn_nw._local_poly.leave_one_out_local_fits`, bounded as these are):
        ``(fits, missing)``, numpy (n_q, n, t) and (n_q, n), in chunks within
        ``working_memory``. ``missing`` marks the fits not computed (singular designs),
        to be refitted."""
        adaptive = getattr(self.base, "adaptive", None)
        if adaptive is not None and adaptive.kind != "balloon":
            raise NotImplementedError(
                "Local fits without each key under a sample-point bandwidth: every key "
                "left out moves other keys' bandwidths, a design of its own per key.")
        xs = self.centered_keys
        n_q, n = queries.shape[0], keys.X.shape[0]
        p = n_terms(xs.shape[1], self.degree)
        t = keys.values.shape[1]
        step = chunk_rows(n_q, n * (4 * p + 3 * t + 6) * 8, settings.working_memory,
                          cap_bytes=PASS_BYTES)
        with_attention = settings._replace(return_attention=True)
        tensor = lambda a: keys.tensor(a, settings.device)
        fits, missing = [], []
        for rows in gen_batches(n_q, step):
            attention = self.base.pool(keys, queries[rows], with_attention).attention
            if sp.issparse(attention):
                attention = attention.toarray()
            with np.errstate(over="ignore", invalid="ignore"):
                qs = keys.scaled(queries[rows])[:, self.columns] - self.center  # (b, r)
            f, m = leave_one_out_local_fits(tensor(qs), tensor(xs), tensor(attention),
                                            tensor(keys.values), self.degree, self.bounded)
            f, m = f.cpu().numpy(), m.cpu().numpy()
            if adaptive is not None:
                # A balloon bandwidth widens without a row inside a query's d_k: those
                # fits from the wider attention.
                search = keys.search_space(queries[rows])[:, : self.base.r]
                for held, q, j, local, wide in self.base.wider_attentions(
                        keys, queries[rows], search, settings.device, columns="all"):
                    f_wide, m_wide = leave_one_out_local_fits(
                        tensor(qs[held]), tensor(xs), tensor(wide),
                        tensor(keys.values), self.degree, self.bounded)
                    f[q, j], m[q, j] = (f_wide.cpu().numpy()[local, j],
                                        m_wide.cpu().numpy()[local, j])
            fits.append(f)
            missing.append(m)
        return np.concatenate(fits), np.concatenate(missing)

    def leave_one_out_sparse_fits(self, keys, queries, values, settings):
        """The local fits at ``queries`` without each key in reach, where the base
        route's attention is sparse (a compact kernel) and the fits unbounded at a fixed
        bandwidth: every other key's fit is the query's own fit. ``(own, fits, held,
        missing, singular)``, numpy float64: each query's own fit of ``values`` (n, t)
        (b, t; 0 where ``singular``, its design not identified), the fits without each
        key in reach (b, e, t), those keys (b, e; -1 past a query's own count), which
        fits are not computed (b, e: refit them) and ``singular`` (b,). None for other
        routes (``leave_one_out_in_reach`` False)."""
        if not self.leave_one_out_in_reach:
            return None
        # Each query's keys in reach and their attention, padded (b, e): weight 0 at -1.
        held, weights = padded_rows(
            self.base.pool(keys, queries, settings._replace(return_attention=True)).attention)
        at = torch.as_tensor(np.maximum(held, 0), device=settings.device)  # (b, e)
        f64 = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64),
                                        device=settings.device)
        with np.errstate(over="ignore", invalid="ignore"):
            qs = keys.scaled(queries)[:, self.columns] - self.center  # (b, r)
        v = np.asarray(values, dtype=np.float64).reshape(keys.X.shape[0], -1)  # (n, t)
        fits, missing, own, singular = leave_one_out_local_fits(
            f64(qs), f64(self.centered_keys)[at], f64(weights), f64(v)[at], self.degree,
            return_own=True)
        missing = missing.cpu().numpy() & (held >= 0)
        return (own.cpu().numpy(), fits.cpu().numpy(), held, missing,
                singular.cpu().numpy())

    def _local_fit(self, keys, qs, pooled, attention, device, need_kernel=True):
        """The local fits of queries ``qs`` (b, r) on their attention (an ndarray or a CSR
        array) of the keys' values: outputs (b, t) and the equivalent kernel (same kind;
        None unless ``need_kernel``), the pooled values ``pooled`` and the attention on
        singular rows; and the number of those. Dense attention's fits come from its
        products with the keys' moments (:func:`~sklearn_nw._local_poly.local_fit_many`),
        its equivalent kernel from their intercept rows."""
        tensor = lambda a: keys.tensor(a, device)
        xs, values = self.centered_keys, keys.values
        if not sp.issparse(attention):
            fitted = local_fit_many(tensor(qs), tensor(xs), tensor(attention)[None],
                                    tensor(values), self.degree, self.bounded,
                                    return_kernel=need_kernel)
            out, singular = fitted[0][0].cpu().numpy(), fitted[1][0].cpu().numpy()
            out[singular] = pooled[singular]
            if not need_kernel:
                return out, None, int(singular.sum())
            kernel = fitted[2][0].cpu().numpy()
            kernel[singular] = attention[singular]
            return out, kernel, int(singular.sum())
        attention = sp.csr_array(attention)
        crow = torch.as_tensor(attention.indptr, dtype=torch.long, device=device)
        col = torch.as_tensor(attention.indices, dtype=torch.long, device=device)
        out, kernel, singular = local_fit_sparse(
            tensor(qs), tensor(xs), crow, col, tensor(attention.data), tensor(values),
            self.degree, self.bounded)
        singular = singular.cpu().numpy()
        kernel = kernel.cpu().numpy()
        entry_singular = np.repeat(singular, np.diff(attention.indptr))
        kernel[entry_singular] = attention.data[entry_singular]
        kernel = sp.csr_array((kernel, attention.indices, attention.indptr),
                              shape=attention.shape)
        out = out.cpu().numpy()
        out[singular] = pooled[singular]
        return out, kernel, int(singular.sum())


def profile_tail_peaks(kernel):
    """``(T, (m_0(T), m_1(T)))``: ``m_k(T) = sup_{t > T} k(t) t^k / k(0)`` of a decreasing
    kernel past ``T``: its support (0 past it) for a compact kernel, three standard
    deviations for the Gaussian family ``exp(-c t^2)`` (whose ``k(t) t`` falls past
    its peak at ``1 / sqrt(2 c)``)."""
    if kernel.quadratic_coef is not None:
        c = kernel.quadratic_coef
        T = 3 / math.sqrt(2 * c)
        return T, (math.exp(-c * T * T), T * math.exp(-c * T * T))
    return kernel.support, (0.0, 0.0)


def profile_peaks(kernel):
    """``m_k = sup_t k(t) t^k / k(0)`` (k = 0, 1, 2) of a decreasing kernel: ``(k / (2 c
    e))^(k / 2)`` for the Gaussian family ``exp(-c t^2)``, at most ``support^k`` for a
    compact one; None for others."""
    if not kernel.decreasing:
        return None
    if kernel.quadratic_coef is not None:
        c = kernel.quadratic_coef
        return (1.0, math.sqrt(1 / (2 * c * math.e)), 1 / (c * math.e))
    if kernel.is_compact:
        return (1.0, kernel.support, kernel.support**2)
    return None


# Up to this many coordinates the forms of z = (1, u) go coordinate by coordinate over
# (b, m) blocks; past it, as batched products (whose (b, m, p) blocks of tiny inner
# dimensions cost several times more where p is small: measured, ad hoc).
_FORMS_BY_COORDINATE = 4


def _linear_form(w, u):
    """``z . w`` (b, m) of ``z = (1, u)``, ``u`` (b, m, r), for each query's ``w`` (b, p)."""
    if u.shape[2] > _FORMS_BY_COORDINATE:
        return (u @ w[:, 1:, None])[:, :, 0].add_(w[:, :1])
    out = torch.addcmul(w[:, :1], u[:, :, 0], w[:, 1, None])
    for k in range(1, u.shape[2]):
        out.addcmul_(u[:, :, k], w[:, k + 1, None])
    return out


def _quadratic_form(P, u):
    """``z^T P z`` (b, m) of ``z = (1, u)``, ``u`` (b, m, r), for each query's symmetric
    ``P`` (b, p, p): ``P_00 + 2 u . P_0u + u^T P_uu u``."""
    if u.shape[2] > _FORMS_BY_COORDINATE:
        return (P[:, :1, 0] + 2 * (u @ P[:, 1:, :1])[:, :, 0]
                + ((u @ P[:, 1:, 1:]) * u).sum(2))
    out = torch.addcmul(P[:, :1, 0], u[:, :, 0], P[:, 0, 1, None], value=2.0)
    for k in range(u.shape[2]):
        u_k = u[:, :, k]
        if k:
            out.addcmul_(u_k, P[:, 0, k + 1, None], value=2.0)
        out.addcmul_(u_k * u_k, P[:, k + 1, k + 1, None])
        for j in range(k + 1, u.shape[2]):
            out.addcmul_(u_k * u[:, :, j], P[:, k + 1, j + 1, None], value=2.0)
    return out
