"""Bandwidth selection: rules of thumb and checks of user-given bandwidths.

Sample weights are *frequency* weights throughout: fitting with integer weights gives the
same bandwidth as repeating each row that many times, so the effective sample size is
``n = sum(w)``.
"""

import numpy as np

__all__ = ["scott_bandwidth", "silverman_bandwidth", "RULES_OF_THUMB", "check_bandwidth"]


def _weighted_std(X, sample_weight):
    """Per-feature standard deviation with frequency weights (ddof=0)."""
    w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    mean = np.average(X, axis=0, weights=w)
    var = np.average((X - mean) ** 2, axis=0, weights=w)
    return np.sqrt(var), float(w.sum())


def _scale_term(X, sample_weight):
    """The data-scale term sigma_j; a constant feature borrows the others' mean scale (or 1)."""
    sigma, n = _weighted_std(X, sample_weight)
    positive = sigma > 0
    fallback = sigma[positive].mean() if positive.any() else 1.0
    return np.where(positive, sigma, fallback), n


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
    D. W. Scott, *Multivariate Density Estimation*, Wiley, 1992.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_nw.bandwidth import scott_bandwidth
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> scott_bandwidth(X).round(4)
    array([0.8473])
    """
    sigma, n = _scale_term(X, sample_weight)
    d = sigma.shape[0]
    return sigma * n ** (-1.0 / (d + 4))


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
    B. W. Silverman, *Density Estimation for Statistics and Data Analysis*, Chapman & Hall,
    1986.
    """
    sigma, n = _scale_term(X, sample_weight)
    d = sigma.shape[0]
    return sigma * (n * (d + 2) / 4.0) ** (-1.0 / (d + 4))


RULES_OF_THUMB = {"scott": scott_bandwidth, "silverman": silverman_bandwidth}


def check_bandwidth(bandwidth, n_features):
    """Validate a numeric bandwidth and broadcast it to shape (n_features,)."""
    h = np.asarray(bandwidth, dtype=np.float64)
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
