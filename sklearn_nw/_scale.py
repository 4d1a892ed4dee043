"""The data's scale, as the rules of thumb and the searches' reference bandwidth take it:
weighted standard deviations and the rule-of-thumb formulas on them (numpy only, so the
local estimators and the sharded ones share them)."""

import numpy as np


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
