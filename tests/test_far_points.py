"""Far points (issue 24, second round, item 7): training rows and queries so far from the
rest that squared distances or deviations overflow float64, or that the rest's differences
round away. Checked against oracles in exact rational arithmetic (``fractions.Fraction``),
which neither overflow nor round: the logits are exact, max-subtracted, then exponentiated.
"""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from sklearn_nw import (
    AdaptiveBandwidth,
    EmptyNeighborhoodWarning,
    LocalFitWarning,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw.bandwidth import scott_bandwidth, silverman_bandwidth


def _data(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 1))
    return X, np.sin(3 * X[:, 0])


def _far_row(X, at=1e160):
    X = X.copy()
    X[0, 0] = at
    return X


def _exact_std(x, w):
    """The weighted standard deviation (ddof=0) of the floats ``x``, exact but for the
    last rounding (the variance of a row at 1e160 is no float: its root is taken on a
    scaled copy)."""
    x, w = [Fraction(float(a)) for a in x], [Fraction(float(a)) for a in w]
    mean = sum(a * b for a, b in zip(x, w)) / sum(w)
    var = sum(b * (a - mean) ** 2 for a, b in zip(x, w)) / sum(w)
    e = max(0, var.numerator.bit_length() - var.denominator.bit_length()) // 2
    return math.ldexp(math.sqrt(var / 4**e), e)


def _exact_nw(q, x, y, widths, log_w=None):
    """Gaussian Nadaraya-Watson at the float ``q`` over floats ``x`` (1-D), each key with
    its own bandwidth (``widths``, floats) and log weight: logits ``-(q - x_i)^2 / (2
    h_i^2) + log_w_i`` in exact arithmetic, max-subtracted, then exponentiated."""
    log_w = np.zeros(len(x)) if log_w is None else log_w
    logits = [-(Fraction(float(q)) - Fraction(float(a))) ** 2 / (2 * Fraction(float(h)) ** 2)
              + Fraction(float(lw)) for a, h, lw in zip(x, widths, log_w)]
    top = max(logits)
    # exp(-800) is 0 in float64 (and a Fraction that far below would overflow float()).
    weights = np.array([math.exp(float(max(t - top, -800))) for t in logits])
    return float(weights @ y / weights.sum())


def _exact_kth(q, x, k):
    """The k-th smallest exact distance |q - x_i| (distinct points, unit weights)."""
    return sorted(abs(Fraction(float(q)) - Fraction(float(a))) for a in x)[k - 1]


def _no_runtime_warning(record):
    stray = [str(w.message) for w in record if issubclass(w.category, RuntimeWarning)]
    assert not stray, stray


# -- a. rules of thumb and default fits with a far training row ----------------------------


@pytest.mark.parametrize("at", [1e80, 1e160, -1e300])
def test_rules_of_thumb_with_a_far_training_row(at):
    X, _ = _data()
    X = np.hstack([_far_row(X, at), X])  # a far feature and an ordinary one
    w = np.random.default_rng(1).integers(1, 4, len(X)).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in the squares
        scott = scott_bandwidth(X, w)
        silverman = silverman_bandwidth(X, w)
    sigma = np.array([_exact_std(X[:, j], w) for j in range(2)])
    n = w.sum()
    assert_allclose(scott, sigma * n ** (-1 / 6), rtol=1e-12)
    assert_allclose(silverman, sigma * (n * 4 / 4) ** (-1 / 6), rtol=1e-12)


def test_default_cv_fit_with_a_far_training_row():
    X, y = _data()
    Xf = _far_row(X)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        reg = NadarayaWatsonRegressorCV().fit(Xf, y)
        prediction = reg.predict(X)
    _no_runtime_warning(record)
    assert np.all(np.isfinite(reg.bandwidth_))
    assert np.all(np.isfinite(prediction))
    # The far row is nobody's neighbor: the ordinary rows are still fitted.
    assert np.corrcoef(prediction[1:], y[1:])[0, 1] > 0.9


@pytest.mark.parametrize("degree", [0, 1])
def test_leave_one_out_fit_with_a_far_training_row(degree):
    X, y = _data()
    Xf = _far_row(X)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        reg = NadarayaWatsonRegressor(bandwidth="loo", degree=degree).fit(Xf, y)
        prediction = reg.predict(X)
    _no_runtime_warning(record)
    assert np.all(np.isfinite(reg.bandwidth_))
    assert np.all(np.isfinite(prediction))


def test_adaptive_scott_base_with_a_far_training_row():
    X, y = _data()
    Xf = _far_row(X)
    bandwidth = AdaptiveBandwidth("balloon", n_neighbors=5, scale=1.5, base="scott")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        prediction = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(Xf, y).predict(X)
    _no_runtime_warning(record)
    # In one dimension the balloon's weights are those of the distances over the k-th
    # one, whatever the base bandwidth (whose tiny scaled distances would lose bits).
    expected = [_exact_nw(q, Xf[:, 0], y, np.full(len(y), 1.5 * _exact_kth(q, Xf[:, 0], 5)))
                for q in X[:, 0]]
    assert_allclose(prediction, expected, rtol=1e-9)


# -- b. adaptive bandwidths at a far query -------------------------------------------------


@pytest.mark.parametrize("algorithm", ["auto", "brute", "ball_tree"])
@pytest.mark.parametrize("degree", [0, 1])
def test_balloon_far_query_is_the_limit_of_the_exact_sum(algorithm, degree):
    # The balloon's bandwidth grows with the query's distance: far away every key is at
    # nearly the same scaled distance, and the weights tend to equal (the weighted mean),
    # with no underflow to warn about.
    X, y = _data()
    queries = np.array([[1e155], [1e200], [-1e300], [1e6]])
    reg = NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(n_neighbors=5, scale=1.5),
                                  degree=degree, algorithm=algorithm).fit(X, y)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        prediction = reg.predict(queries)
    _no_runtime_warning(record)
    expected = [_exact_nw(q, X[:, 0], y, np.full(len(y), 1.5 * _exact_kth(q, X[:, 0], 5)))
                for q in queries[:, 0]]
    if degree:
        # No unique local line that far in float64: the local-constant value, said so.
        assert any(issubclass(w.category, LocalFitWarning) for w in record)
        prediction, expected = prediction[:3], expected[:3]
    assert_allclose(prediction, expected, rtol=1e-9)


def test_sample_point_far_query_is_the_widest_key():
    # Each key keeps its own bandwidth: far away the widest key's weight dominates the
    # others' by more than float64 holds (they underflow: the documented warning).
    X, y = _data()
    reg = NadarayaWatsonRegressor(
        bandwidth=AdaptiveBandwidth("sample_point", n_neighbors=5, scale=1.5)).fit(X, y)
    key_h = np.array([1.5 * float(sorted(abs(Fraction(float(a)) - Fraction(float(b)))
                                         for b in X[:, 0] if b != a)[4]) for a in X[:, 0]])
    queries = np.array([[1e155], [-1e300]])
    with pytest.warns(EmptyNeighborhoodWarning) as record:
        prediction = reg.predict(queries)
    _no_runtime_warning(record)
    expected = [_exact_nw(q, X[:, 0], y, key_h, -np.log(key_h)) for q in queries[:, 0]]
    assert_allclose(prediction, expected, rtol=1e-9)
    assert_allclose(prediction, y[np.argmax(key_h)], rtol=1e-12)


# -- c. the message of a local fit with no unique solution -------------------------------


@pytest.mark.parametrize("case", ["far query", "one weighted point", "off a line"])
def test_singular_local_fit_warning_gives_the_true_reason(case):
    X, y = _data()
    Q, w = np.array([[1e20]]), None
    if case == "one weighted point":
        Q, w = np.array([[0.5]]), np.zeros(len(y))
        w[3] = 1.0
    elif case == "off a line":
        # Two features, every training point on the diagonal, the query off it.
        X = np.hstack([X, X])
        Q = np.array([[0.3, 0.6]])
    reg = NadarayaWatsonRegressor(bandwidth=0.5, degree=1).fit(X, y, sample_weight=w)
    reason = {"far query": "a query too far from them for the float type",
              "one weighted point": "fewer weighted points than the polynomial has terms",
              "off a line": "points on a line or plane the query is off"}[case]
    with pytest.warns(LocalFitWarning, match="no unique local fit") as record:
        reg.predict(Q)
    assert reason in str(record[0].message)


# -- d. a far training row on the fixed-bandwidth path ------------------------------------


def _exact_fixed_nw(Q, x, y, h, kernel):
    """Nadaraya-Watson of a fixed bandwidth in one dimension, exact squared scaled
    distances ``((q - x_i) / h)^2`` (Fractions); Gaussian logits max-subtracted exactly."""
    out = []
    for q in Q:
        u2 = [((Fraction(float(q)) - Fraction(float(a))) / Fraction(h)) ** 2 for a in x]
        if kernel == "gaussian":
            top = min(u2)
            k = np.array([math.exp(float(max(-(t - top) / 2, -800))) for t in u2])
        elif kernel == "epanechnikov":
            k = np.array([float(max(1 - t, 0)) for t in u2])
        else:  # exponential: exp(-u), the distance itself (within 800 of the nearest)
            u = [math.sqrt(float(min(t, Fraction(10**6)))) for t in u2]
            k = np.exp(-(np.array(u) - min(u)))
        out.append(float(k @ y / k.sum()))
    return np.array(out)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "exponential"])
@pytest.mark.parametrize("at", [1e80, -1e160])
def test_a_far_training_row_leaves_the_others_their_precision(kernel, at):
    # Centering the keys on their mean put them all near 3e78: every ordinary key then
    # had the same centered coordinate, and every ordinary query got the global mean.
    X, y = _data()
    Xf, yf = np.vstack([X, [[at]]]), np.r_[y, 5.0]
    queries = np.vstack([X, [[0.25], [0.5], [0.75]]])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        prediction = NadarayaWatsonRegressor(kernel, bandwidth=0.1).fit(Xf, yf).predict(
            queries)
    _no_runtime_warning(record)
    expected = _exact_fixed_nw(queries[:, 0], Xf[:, 0], yf, 0.1, kernel)
    assert_allclose(prediction, expected, rtol=1e-9)


def test_a_far_training_row_leaves_local_linear_fits_their_precision():
    X, y = _data()
    Xf, yf = np.vstack([X, [[1e80]]]), np.r_[y, 5.0]
    queries = np.array([[0.25], [0.5], [0.75]])
    prediction = NadarayaWatsonRegressor(bandwidth=0.1, degree=1).fit(Xf, yf).predict(queries)
    # Weighted least squares on the ordinary rows (the far one's weight is exp(-5e161)).
    expected = []
    for q in queries[:, 0]:
        sw = np.sqrt(np.exp(-0.5 * ((X[:, 0] - q) / 0.1) ** 2))
        design = np.column_stack([np.ones(len(y)), X[:, 0] - q])
        expected.append(np.linalg.lstsq(design * sw[:, None], y * sw, rcond=None)[0][0])
    assert_allclose(prediction, expected, rtol=1e-9)


@pytest.mark.parametrize("scale", [1.0, 1e155, 1e160, 1e300])
@pytest.mark.parametrize("d", [1, 3, 7])
def test_paired_distances_are_the_exact_distances(scale, d):
    # Bit for bit (a sum of squares in another order rounds otherwise from 3 features:
    # whether a key at exactly the bandwidth is in a compact kernel's support). Points
    # whose squares overflow (and a pair whose difference does: x = -q near 1e300) are
    # rescaled by a power of two, as the dense distances are.
    from sklearn_nw._search import exact_distances, paired_distances

    rng = np.random.default_rng(0)
    q, x = rng.normal(size=(6, d)) * scale, rng.normal(size=(8, d)) * scale
    x[0] = -q[0]
    expected = exact_distances(torch.as_tensor(q), torch.as_tensor(x)).numpy()
    got = paired_distances(q[:, None], x[None])  # (6, 8)
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
def test_a_trees_nearest_distances_are_the_exact_distances(algorithm):
    # The k-th neighbor distance of an adaptive bandwidth is the exact distance of that
    # key (a tree's own sums its squares in another order).
    from sklearn_nw._search import TreeSearch, exact_distances

    rng = np.random.default_rng(1)
    points, queries = rng.normal(size=(200, 4)), rng.normal(size=(30, 4))
    dist, ind = TreeSearch(points, algorithm).nearest(queries, 7, exact=True)
    exact = exact_distances(torch.as_tensor(queries), torch.as_tensor(points)).numpy()
    np.testing.assert_array_equal(dist, np.take_along_axis(exact, ind, 1))
    assert np.all(np.diff(dist, axis=1) >= 0)
