"""Marginal effects (``marginal_effects``) of the regressor: against statsmodels'
``KernelReg``, central finite differences of ``predict`` (and of its attention, for the
weights behind the standard errors), slow loops written here, and exact polynomials."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from sklearn_nw import (
    AdaptiveBandwidth,
    EmptyNeighborhoodWarning,
    LocalFitWarning,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw._keys import FittedKeys
from sklearn_nw.kernels import Gaussian

KernelReg = pytest.importorskip("statsmodels.nonparametric.kernel_regression").KernelReg


def _data(n=40, d=1, outputs=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(4 * X.sum(1))[:, None] + 0.3 * rng.normal(size=(n, outputs))
    Q = rng.uniform(0.05, 0.95, (5, d))
    return X, (y[:, 0] if outputs == 1 else y), Q, rng.uniform(0.2, 3.0, n)


def _central_differences(f, Q, step):
    """``(f(Q + s e_j) - f(Q - s e_j)) / 2s`` for each feature j: (n_q, ..., d)."""
    d = Q.shape[1]
    parts = [(f(Q + step * np.eye(d)[j]) - f(Q - step * np.eye(d)[j])) / (2 * step)
             for j in range(d)]
    return np.stack(parts, -1)


def _kernel_reg(X, y, h, reg_type):
    with warnings.catch_warnings():  # its default random state's FutureWarning
        warnings.simplefilter("ignore", FutureWarning)
        return KernelReg(y, X, var_type="c" * X.shape[1], reg_type=reg_type, bw=h)


# -- statsmodels ----------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3])
def test_local_linear_slopes_equal_statsmodels(d):
    X, y, Q, _ = _data(d=d)
    h = np.array([0.3, 0.4, 0.5][:d])
    mean, mfx = _kernel_reg(X, y, h, "ll").fit(Q)
    reg = NadarayaWatsonRegressor(bandwidth=h, degree=1).fit(X, y)
    np.testing.assert_allclose(reg.predict(Q), mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(reg.marginal_effects(Q), mfx, rtol=0, atol=1e-8)


def test_local_constant_derivative_equals_statsmodels_rescaled_in_one_feature():
    # statsmodels' "lc" effects use a kernel derivative twice the Gaussian's
    # (d_gaussian = 2 (X_i - x) K / h**2) and divide the derivative's sums by n, which
    # its ratio does not cancel: they are 2 / n times the derivative of its own fit
    # (which the finite differences of its mean confirm).
    X, y, Q, _ = _data(d=1)
    n = len(y)
    kr = _kernel_reg(X, y, [0.2], "lc")
    mean, mfx = kr.fit(Q)
    reg = NadarayaWatsonRegressor(bandwidth=0.2).fit(X, y)
    effects = reg.marginal_effects(Q)
    np.testing.assert_allclose(reg.predict(Q), mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(effects, mfx * n / 2, rtol=0, atol=1e-8)
    own = _central_differences(lambda q: kr.fit(q)[0], Q, 1e-6)
    np.testing.assert_allclose(effects, own, rtol=0, atol=1e-7)


def test_local_constant_derivative_equals_finite_differences_of_statsmodels_mean():
    # In several features statsmodels' "lc" effects are one number per query (a
    # product of every feature's kernel derivative): its mean is the oracle here.
    X, y, Q, _ = _data(d=2)
    h = np.array([0.25, 0.35])
    kr = _kernel_reg(X, y, h, "lc")
    reg = NadarayaWatsonRegressor(bandwidth=h).fit(X, y)
    own = _central_differences(lambda q: kr.fit(q)[0], Q, 1e-6)
    np.testing.assert_allclose(reg.marginal_effects(Q), own, rtol=0, atol=1e-7)


# -- finite differences on every route ------------------------------------------------------


@pytest.mark.parametrize("params", [
    {"bandwidth": 0.2},
    {"bandwidth": 0.3, "kernel": "exponential"},
    {"bandwidth": 0.3, "kernel": "epanechnikov"},
    {"bandwidth": 0.3, "kernel": "epanechnikov", "algorithm": "kd_tree"},
    {"bandwidth": 0.3, "kernel": "biweight", "algorithm": "cell_list"},
    {"bandwidth": 0.3, "n_neighbors": 12},
    {"bandwidth": AdaptiveBandwidth(n_neighbors=8, kind="sample_point")},
])
@pytest.mark.parametrize("weighted", [False, True])
def test_derivative_and_its_weights_equal_finite_differences(params, weighted, dense):
    X, y, Q, w = _data(d=2)
    reg = NadarayaWatsonRegressor(residual_variance="hc0", **params).fit(
        X, y, sample_weight=w if weighted else None)
    effects, std = reg.marginal_effects(Q, return_std=True)
    step = 1e-6
    np.testing.assert_allclose(effects, _central_differences(reg.predict, Q, step),
                               rtol=0, atol=1e-6)
    # The weights of the targets, as finite differences of the attention rows; the
    # variances hc0's: squared residuals of the in-sample fit.
    attention = lambda q: dense(reg.predict(q, return_attention=True)[1])
    W = _central_differences(attention, Q, step)  # (n_q, n, d)
    s2 = (y - reg.predict(X)) ** 2
    np.testing.assert_allclose(std, np.sqrt(np.einsum("qnd,n->qd", W**2, s2)),
                               rtol=1e-5, atol=1e-9)


def test_several_outputs_and_float32():
    X, y, Q, _ = _data(d=2, outputs=3)
    reg = NadarayaWatsonRegressor(bandwidth=0.25).fit(X, y)
    effects, std = reg.marginal_effects(Q, return_std=True)
    assert effects.shape == std.shape == (5, 3, 2)
    for t in range(3):
        one = NadarayaWatsonRegressor(bandwidth=0.25).fit(X, y[:, t])
        e, s = one.marginal_effects(Q, return_std=True)
        np.testing.assert_allclose(effects[:, t], e, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(std[:, t], s, rtol=1e-12, atol=1e-12)
    average, average_std = reg.marginal_effects(Q, average=True, return_std=True)
    assert average.shape == average_std.shape == (3, 2)
    single = NadarayaWatsonRegressor(bandwidth=0.25).fit(X.astype(np.float32), y[:, 0])
    assert single.marginal_effects(Q).dtype == np.float64
    np.testing.assert_allclose(single.marginal_effects(Q), effects[:, 0], rtol=1e-4,
                               atol=1e-4)


# -- slow loops: the weights by their formulas ----------------------------------------------


def _oracle_weights(q, X, h, w, degree):
    """The weights (n, d) of the targets in the effects at q, one point at a time: the
    derivative of the normalized Gaussian weights (degree 0), or the slope rows of the
    weighted least squares in ``x - q`` (degree 1)."""
    n, d = X.shape
    k = np.array([w[i] * math.exp(-0.5 * sum(((q[j] - X[i, j]) / h[j]) ** 2
                                              for j in range(d))) for i in range(n)])
    a = k / k.sum()
    if degree == 0:
        g = np.array([[-(q[j] - X[i, j]) / h[j] ** 2 for j in range(d)] for i in range(n)])
        return a[:, None] * (g - a @ g)
    Z = np.column_stack([np.ones(n), X - q])
    return (np.linalg.solve(Z.T @ (a[:, None] * Z), (Z * a[:, None]).T)[1:]).T


@pytest.mark.parametrize("degree", [0, 1])
def test_effects_standard_errors_and_averages_equal_the_oracle(degree):
    X, y, Q, w = _data(d=2)
    h = np.array([0.3, 0.4])
    reg = NadarayaWatsonRegressor(bandwidth=h, degree=degree, residual_variance="hc0")
    reg.fit(X, y, sample_weight=w)
    # hc0 by its definition: the squared residuals of the in-sample fit, whose equivalent
    # kernel is the weighted Gaussian's (degree 0) or the local-linear one (degree 1).
    L = np.array([_kernel_row(x, X, h, w, degree) for x in X])
    s2 = (y - L @ y) ** 2
    W = np.array([_oracle_weights(q, X, h, w, degree) for q in Q])  # (n_q, n, d)
    effects, std = reg.marginal_effects(Q, return_std=True)
    np.testing.assert_allclose(effects, np.einsum("qnd,n->qd", W, y), rtol=0, atol=1e-10)
    np.testing.assert_allclose(std, np.sqrt(np.einsum("qnd,n->qd", W**2, s2)), rtol=1e-10)
    mean, mean_std = reg.marginal_effects(Q, average=True, return_std=True)
    np.testing.assert_allclose(mean, effects.mean(0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(mean_std, np.sqrt((W.mean(0) ** 2).T @ s2), rtol=1e-10)


def _kernel_row(q, X, h, w, degree):
    n, d = X.shape
    k = np.array([w[i] * math.exp(-0.5 * sum(((q[j] - X[i, j]) / h[j]) ** 2
                                              for j in range(d))) for i in range(n)])
    a = k / k.sum()
    if degree == 0:
        return a
    Z = np.column_stack([np.ones(n), X - q])
    return np.linalg.solve(Z.T @ (a[:, None] * Z), (Z * a[:, None]).T)[0]


# -- exact polynomials ----------------------------------------------------------------------


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("bounded", [False, True])
def test_local_polynomials_recover_a_polynomials_gradient(degree, bounded):
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (60, 2))
    Q = rng.uniform(-0.8, 0.8, (6, 2))
    if degree == 1:
        y, gradient = 1.0 + 2.0 * X[:, 0] - 3.0 * X[:, 1], np.tile([2.0, -3.0], (6, 1))
    else:
        y = X[:, 0] ** 2 - X[:, 0] * X[:, 1] + 0.5 * X[:, 1]
        gradient = np.column_stack([2 * Q[:, 0] - Q[:, 1], 0.5 - Q[:, 0]])
    reg = NadarayaWatsonRegressor(bandwidth=[0.4, 0.6], degree=degree, bounded=bounded)
    np.testing.assert_allclose(reg.fit(X, y).marginal_effects(Q), gradient, rtol=0,
                               atol=1e-9)


# -- categorical features -------------------------------------------------------------------


@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("degree", [0, 1])
def test_categorical_effects_are_first_differences(ordered, degree):
    rng = np.random.default_rng(2)
    levels = ["a", "b", "c"]
    frame = pd.DataFrame({
        "x": rng.uniform(0, 1, 45),
        "g": pd.Categorical(rng.choice(levels, 45), categories=levels, ordered=ordered)})
    y = np.sin(3 * frame["x"].to_numpy()) + (frame["g"].cat.codes.to_numpy() == 2)
    reg = NadarayaWatsonRegressor(bandwidth=[0.2, 0.3], degree=degree,
                                  residual_variance="hc0").fit(frame, y)
    queries = pd.DataFrame({"x": [0.2, 0.5, 0.7],
                            "g": pd.Categorical(["a", "b", "c"], categories=levels,
                                                ordered=ordered)})
    # np's gradients of a factor: against the first level (unordered), the previous one
    # (ordered).
    base = queries.copy()
    base["g"] = pd.Categorical(["a", "a", "b"] if ordered else ["a", "a", "a"],
                               categories=levels, ordered=ordered)
    effects, std = reg.marginal_effects(queries, return_std=True)
    np.testing.assert_allclose(effects[:, 1], reg.predict(queries) - reg.predict(base),
                               rtol=0, atol=1e-12)
    assert effects[0, 1] == std[0, 1] == 0.0
    kernel = lambda q: reg.predict(q, return_attention=True)[1]
    s2 = (y - reg.predict(frame)) ** 2
    np.testing.assert_allclose(std[:, 1], np.sqrt((kernel(queries) - kernel(base)) ** 2 @ s2),
                               rtol=1e-10)
    if degree == 0:  # the continuous feature's own derivative, the categories held
        def predict(x):
            q = queries.copy()
            q["x"] = x[:, 0]
            return reg.predict(q)

        fd = _central_differences(predict, queries[["x"]].to_numpy(), 1e-6)[:, 0]
        np.testing.assert_allclose(effects[:, 0], fd, rtol=0, atol=1e-6)


# -- the CV regressor, what the method leaves alone, and bad input --------------------------


def test_the_cv_regressor_has_the_same_effects():
    X, y, Q, _ = _data(d=2)
    cv = NadarayaWatsonRegressorCV(bandwidths=5).fit(X, y)
    reg = NadarayaWatsonRegressor(bandwidth=cv.bandwidth_, degree=cv.degree_,
                                  bounded=cv.bounded).fit(X, y)
    for average in (False, True):
        for a, b in zip(cv.marginal_effects(Q, average=average, return_std=True),
                        reg.marginal_effects(Q, average=average, return_std=True)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_marginal_effects_change_nothing():
    X, y, Q, _ = _data(d=2)
    reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    before = dict(reg.__dict__)
    reg.marginal_effects(Q, return_std=True)
    assert reg.__dict__.keys() == before.keys()
    assert all(reg.__dict__[k] is v for k, v in before.items())


def test_a_query_out_of_reach_has_no_effect():
    X, y, _, _ = _data(d=1)
    reg = NadarayaWatsonRegressor(bandwidth=0.05, kernel="epanechnikov").fit(X, y)
    with pytest.warns(EmptyNeighborhoodWarning):
        effects = reg.marginal_effects([[5.0]])
    assert effects.tolist() == [[0.0]]


@pytest.mark.parametrize("params, fit_X, error, match", [
    ({"metric": "precomputed", "bandwidth": 0.3}, "distances", NotImplementedError,
     "precomputed"),
    ({"bandwidth": AdaptiveBandwidth(n_neighbors=5, kind="balloon")}, "X",
     NotImplementedError, "balloon"),
])
def test_unsupported_fits_are_refused(params, fit_X, error, match):
    X, y, Q, _ = _data(d=1)
    if fit_X == "distances":
        X, Q = np.abs(X - X.T), np.abs(Q - X.T)
    reg = NadarayaWatsonRegressor(**params).fit(X, y)
    with pytest.raises(error, match=match):
        reg.marginal_effects(Q)


def test_bad_input_is_refused():
    X, y, Q, _ = _data(d=2)
    with pytest.raises(NotFittedError):
        NadarayaWatsonRegressor().marginal_effects(Q)
    reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    with pytest.raises(TypeError, match="average must be True or False"):
        reg.marginal_effects(Q, average="yes")
    with pytest.raises(TypeError, match="return_std must be True or False"):
        reg.marginal_effects(Q, return_std=1)
    with pytest.raises(ValueError, match="2 features"):
        reg.marginal_effects(Q[:, :1])
    with pytest.raises(ValueError, match="NaN"):
        reg.marginal_effects(np.full((1, 2), np.nan))


@pytest.mark.parametrize("degree", [0, 1])
def test_a_projection_metric_is_differentiated_through(degree, dense):
    # A learned metric (LeaveOneOutBandwidth(form="full"), whose learning is too slow
    # for this file) is a projection in the fitted keys: given here.
    X, y, Q, w = _data(d=3)
    P = np.array([[2.0, 0.5], [-1.0, 1.5], [0.3, 2.5]])  # (d, r)
    keys = FittedKeys(X, w, y[:, None], P, Gaussian(), degree=degree)
    weights = keys.gradient_weights(Q).weights  # (n_q, n, d)
    if degree == 0:
        attention = lambda q: dense(keys.pool(q, return_attention=True).attention)
        np.testing.assert_allclose(weights, _central_differences(attention, Q, 1e-6),
                                   rtol=0, atol=1e-7)
        return
    for q, W in zip(Q, weights):  # the local-linear slope in the components, then in X
        U = (X - q) @ P
        a = w * np.exp(-0.5 * (U**2).sum(1))
        Z = np.column_stack([np.ones(len(X)), U])
        slopes = np.linalg.solve(Z.T @ (a[:, None] * Z), (Z * a[:, None]).T)[1:]  # (r, n)
        np.testing.assert_allclose(W, (P @ slopes).T, rtol=1e-8, atol=1e-10)


def test_a_singular_local_fit_gets_its_nadaraya_watson_derivative():
    X = np.array([[0.0], [0.1], [0.2], [2.0], [2.1]])
    y = np.array([0.0, 1.0, 0.5, 3.0, 2.0])
    kw = {"bandwidth": 0.5, "kernel": "epanechnikov"}
    local = NadarayaWatsonRegressor(degree=1, **kw).fit(X, y)
    constant = NadarayaWatsonRegressor(**kw).fit(X, y)
    Q = np.array([[0.1], [1.6]])  # the second reaches one training point only
    with pytest.warns(LocalFitWarning):
        effects = local.marginal_effects(Q)
    np.testing.assert_allclose(effects[1], constant.marginal_effects(Q[1:])[0], rtol=1e-12)
    a = 1 - ((X[:3, 0] - 0.1) / 0.5) ** 2  # the Epanechnikov weights in reach
    np.testing.assert_allclose(effects[0, 0], np.polyfit(X[:3, 0], y[:3], 1, w=np.sqrt(a))[0],
                               rtol=1e-9)
