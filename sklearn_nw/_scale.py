"""The data's scale and the bandwidths read from it: weighted standard deviations, the
rule-of-thumb formulas on them (numpy only, so the local estimators and the sharded ones
share them), the public rules of thumb (:func:`scott_bandwidth`,
:func:`silverman_bandwidth`, re-exported by :mod:`sklearn_nw.bandwidth`), the searches'
reference bandwidth, and the check of a bandwidth given as numbers."""

from numbers import Real

import numpy as np

from ._leave_one_out import distinct_inputs


def weighted_std(X, sample_weight):
    """Per-feature standard deviation with frequency weights (ddof=0).

    Each feature is first divided by the power of two just above its largest magnitude:
    squared deviations of inputs far from 0 (1e160) would overflow, and a power of two
    divides exactly, so ordinary data get the same bits as without it.
    """
    w = (np.ones(X.shape[0]) if sample_weight is None
         else np.asarray(sample_weight, dtype=np.float64))
    X = np.asarray(X, dtype=np.float64)
    live = X[w > 0]  # (m, d)
    _, exponent = np.frexp(np.abs(live).max(axis=0))  # (d,) max |x_j| < 2**exponent
    X = np.ldexp(X, -exponent)  # (n, d) in (-1, 1)
    mean = np.average(X, axis=0, weights=w)
    var = np.average((X - mean) ** 2, axis=0, weights=w)
    # A constant feature is exactly 0, not the rounding error of its mean (~1e-16 |mean|).
    var[np.all(live == live[:1], axis=0)] = 0.0
    with np.errstate(over="ignore"):  # a spread near the largest float: inf, refused later
        return np.ldexp(np.sqrt(var), exponent), float(w.sum())


def scale_term(sigma):
    """The data-scale term of weighted standard deviations ``sigma`` (d,): a constant
    feature (``sigma_j = 0``) borrows the others' mean scale, or 1 if all are constant."""
    positive = sigma > 0
    fallback = sigma[positive].mean() if positive.any() else 1.0
    return np.where(positive, sigma, fallback)


def rule_of_thumb(rule, sigma, n):
    """The bandwidths (d,) of ``rule`` ("scott" or "silverman") from the weighted standard
    deviations ``sigma`` (d,) of the features and the total weight ``n``: what
    :func:`scott_bandwidth` and :func:`silverman_bandwidth` compute from data, for
    callers that have only these sums (:mod:`sklearn_nw.dask`)."""
    sigma = scale_term(np.asarray(sigma, dtype=np.float64))
    d = sigma.shape[0]
    if rule == "scott":
        return sigma * n ** (-1.0 / (d + 4))
    return sigma * (n * (d + 2) / 4.0) ** (-1.0 / (d + 4))


def scott_bandwidth(X, sample_weight=None):
    r"""Scott's rule of thumb, one bandwidth per feature.

    .. math:: h_j = \hat\sigma_j \, n^{-1/(d+4)}

    where :math:`\hat\sigma_j = \sqrt{\sum_i w_i (x_{ij} - \bar x_j)^2 / \sum_i w_i}` is the
    weighted standard deviation of feature j (the data-scale term), :math:`n = \sum_i w_i`
    and d the number of features. A constant feature (:math:`\hat\sigma_j = 0`) gets the
    mean scale of the other features, or 1 if all are constant.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    sample_weight : array-like of shape (n_samples,), default=None
        Frequency weights.

    Returns
    -------
    bandwidth : ndarray of shape (n_features,)

    References
    ----------
    D.\  W. Scott, *Multivariate Density Estimation*, Wiley, 1992.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_nw.bandwidth import scott_bandwidth
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> scott_bandwidth(X).round(4)
    array([0.8473])
    """
    return rule_of_thumb("scott", *weighted_std(X, sample_weight))


def silverman_bandwidth(X, sample_weight=None):
    r"""Silverman's rule of thumb, one bandwidth per feature.

    .. math:: h_j = \hat\sigma_j \left(\frac{n (d + 2)}{4}\right)^{-1/(d+4)}

    with the same weighted :math:`\hat\sigma_j`, :math:`n = \sum_i w_i` and constant-feature
    fallback as :func:`scott_bandwidth`. It is the normal-reference rule for a Gaussian kernel
    (in one dimension :math:`1.06\,\hat\sigma\,n^{-1/5}`).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    sample_weight : array-like of shape (n_samples,), default=None
        Frequency weights.

    Returns
    -------
    bandwidth : ndarray of shape (n_features,)

    References
    ----------
    B.\  W. Silverman, *Density Estimation for Statistics and Data Analysis*, Chapman & Hall,
    1986.
    """
    return rule_of_thumb("silverman", *weighted_std(X, sample_weight))


RULES_OF_THUMB = {"scott": scott_bandwidth, "silverman": silverman_bandwidth}


def search_reference(X, sample_weight):
    """Scott's rule with ``n`` the number of distinct inputs of positive weight: the
    center of the leave-one-out searches' grids (:class:`LeaveOneOutBandwidth`, the CV
    estimators' default grid). Like leave-one-out itself (a point leaves with its copies),
    it is unchanged by scaling every weight or by repeating rows, which ``n = sum(w)``
    is not."""
    w = np.asarray(sample_weight, dtype=np.float64)
    n = len(distinct_inputs(X, w)[0])
    return rule_of_thumb("scott", weighted_std(X, w)[0], n)


def check_bandwidth(bandwidth, n_features):
    """Validate a numeric bandwidth and broadcast it to shape (n_features,).

    Any real numbers are accepted (Python, numpy, ``fractions.Fraction``), as a scalar or
    one per feature. The result is always a new float64 array: a fitted model never shares
    the caller's buffer.
    """
    h = None
    try:
        values = np.asarray(bandwidth)
    except ValueError:  # ragged nested sequences
        values = np.empty(0, dtype=np.str_)
    if values.dtype.kind in "iuf":
        h = np.array(values, dtype=np.float64, copy=True)
    elif values.dtype.kind == "O" and all(
            isinstance(v, Real) and not isinstance(v, bool) for v in values.flat):
        try:  # float() of each: Fractions and other real numbers
            h = values.astype(np.float64)
        except (OverflowError, TypeError, ValueError):
            pass
    if h is None:  # strings, booleans, complex numbers, None, ...
        shown = bandwidth.tolist() if isinstance(bandwidth, np.ndarray) else bandwidth
        raise ValueError(
            f"bandwidth must be a real number or an array of real numbers; got {shown!r}."
        )
    if h.ndim == 0:
        h = np.full(n_features, float(h))
    elif h.ndim != 1 or h.shape[0] != n_features:
        raise ValueError(
            f"bandwidth must be a positive scalar or have one value per feature "
            f"(shape ({n_features},)); got shape {h.shape}."
        )
    if not np.all(np.isfinite(h)):
        raise ValueError(f"bandwidth must be finite; got {h.tolist()}.")
    if np.any(h <= 0):
        raise ValueError(f"bandwidth must be positive; got {h.tolist()}.")
    return h
