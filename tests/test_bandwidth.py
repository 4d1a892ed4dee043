"""Rules of thumb against their hand formulas, frequency weights, check_bandwidth, the
cold start of a learned bandwidth, and learned bandwidths against a numpy leave-one-out."""

import functools
import math
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
from _oracle import PROFILES, nw_weights
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

from sklearn_nw import NadarayaWatsonClassifier, NadarayaWatsonRegressor
from sklearn_nw._leave_one_out import leave_one_out_set
from sklearn_nw._loo_objective import Objective
from sklearn_nw._losses import SQUARED_ERROR
from sklearn_nw.bandwidth import (
    RULES_OF_THUMB,
    LeaveOneOutBandwidth,
    check_bandwidth,
    scott_bandwidth,
    silverman_bandwidth,
)
from sklearn_nw.kernels import get_kernel


def weighted_sigma(X, w=None):
    """Per-feature weighted standard deviation (ddof=0) and n = sum of weights, by loops."""
    X = np.asarray(X, dtype=np.float64)
    n_samples, d = X.shape
    w = [1.0] * n_samples if w is None else [float(v) for v in w]
    total = sum(w)
    sigma = []
    for j in range(d):
        mean = sum(w[i] * X[i, j] for i in range(n_samples)) / total
        var = sum(w[i] * (X[i, j] - mean) ** 2 for i in range(n_samples)) / total
        sigma.append(math.sqrt(var))
    return np.array(sigma), total


def scott_by_hand(X, w=None):
    sigma, n = weighted_sigma(X, w)
    d = len(sigma)
    return sigma * n ** (-1.0 / (d + 4))


def silverman_by_hand(X, w=None):
    sigma, n = weighted_sigma(X, w)
    d = len(sigma)
    return sigma * (n * (d + 2) / 4.0) ** (-1.0 / (d + 4))


def data(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) * rng.uniform(0.1, 5.0, size=d) + rng.normal(size=d)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_scott_formula(d):
    X = data(d=d, seed=d)
    assert_allclose(scott_bandwidth(X), scott_by_hand(X), rtol=1e-12)
    # and with numpy's own std (ddof=0)
    assert_allclose(scott_bandwidth(X), X.std(axis=0) * len(X) ** (-1 / (d + 4)), rtol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_silverman_formula(d):
    X = data(d=d, seed=10 + d)
    assert_allclose(silverman_bandwidth(X), silverman_by_hand(X), rtol=1e-12)


@pytest.mark.parametrize("rule, by_hand", [(scott_bandwidth, scott_by_hand),
                                           (silverman_bandwidth, silverman_by_hand)])
def test_weighted_formula(rule, by_hand):
    X = data(seed=20)
    w = np.random.default_rng(21).uniform(0.1, 3.0, size=len(X))
    assert_allclose(rule(X, w), by_hand(X, w), rtol=1e-12)


def test_hand_worked_numbers():
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    # sigma = sqrt(1.25) (ddof=0), n = 4, d = 1.
    assert scott_bandwidth(X)[0] == pytest.approx(math.sqrt(1.25) * 4 ** -0.2, rel=1e-14)
    assert scott_bandwidth(X)[0] == pytest.approx(0.847311, abs=1e-6)
    assert silverman_bandwidth(X)[0] == pytest.approx(math.sqrt(1.25) * 3 ** -0.2, rel=1e-14)
    # In one dimension Silverman's rule is (4/3)^(1/5) sigma n^(-1/5) ~ 1.06 sigma n^(-1/5).
    X = data(n=100, d=1, seed=1)
    ratio = silverman_bandwidth(X)[0] / (X.std() * 100 ** -0.2)
    assert ratio == pytest.approx((4 / 3) ** 0.2, rel=1e-12)
    assert ratio == pytest.approx(1.0592, abs=1e-4)


@pytest.mark.parametrize("rule", [scott_bandwidth, silverman_bandwidth])
def test_integer_weights_equal_repeated_rows(rule):
    X = data(n=15, d=2, seed=30)
    w = np.array([0, 1, 2, 3, 1, 1, 0, 4, 2, 1, 1, 5, 1, 2, 1])
    assert_allclose(rule(X, w), rule(np.repeat(X, w, axis=0)), rtol=1e-12)
    assert_allclose(rule(X, w.astype(float)), rule(np.repeat(X, w, axis=0)), rtol=1e-12)


@pytest.mark.parametrize("rule", [scott_bandwidth, silverman_bandwidth])
def test_weights_are_frequencies_not_probabilities(rule):
    # Doubling every weight is repeating every row twice: n doubles, sigma stays.
    X = data(n=20, d=2, seed=31)
    d = 2
    assert_allclose(rule(X, 2.0 * np.ones(20)), rule(X) * 2.0 ** (-1.0 / (d + 4)), rtol=1e-12)
    assert_allclose(rule(X, np.ones(20)), rule(X), rtol=1e-14)
    assert_allclose(rule(X, None), rule(X), rtol=1e-14)


@pytest.mark.parametrize("rule", [scott_bandwidth, silverman_bandwidth])
def test_equivariance(rule):
    X = data(n=25, d=3, seed=32)
    scale = np.array([2.0, 0.5, 10.0])
    assert_allclose(rule(X * scale), rule(X) * scale, rtol=1e-12)
    assert_allclose(rule(X + [100.0, -3.0, 7.0]), rule(X), rtol=1e-9)


def test_constant_feature_fallback_is_documented():
    for rule in (scott_bandwidth, silverman_bandwidth):
        doc = " ".join(rule.__doc__.split())
        assert "constant" in doc.lower()
    doc = " ".join(scott_bandwidth.__doc__.split())
    assert "A constant feature" in doc
    assert "mean scale of the other features, or 1 if all are constant" in doc


@pytest.mark.parametrize("value", [0.0, 4.2, 0.1, 1.0 / 3.0, 1e5 + 0.1])
@pytest.mark.parametrize("rule", [scott_bandwidth, silverman_bandwidth])
def test_constant_feature_fallback(rule, value):
    # A constant feature has sigma = 0 exactly (whatever the rounding of its mean) and takes
    # the mean scale of the other features.
    X = data(n=30, d=3, seed=33)
    X[:, 1] = value
    sigma, _ = weighted_sigma(X[:, [0, 2]])
    f = factor(rule, 30, 3)
    expected = np.array([sigma[0], (sigma[0] + sigma[1]) / 2.0, sigma[1]]) * f
    assert_allclose(rule(X), expected, rtol=1e-12)
    # With weights: constant over the rows of positive weight is constant.
    w = np.random.default_rng(36).integers(1, 4, size=30).astype(float)
    w[:3] = 0.0
    X[:3, 1] = value + 1.0
    sigma, n = weighted_sigma(X[:, [0, 2]], w)
    expected = np.array([sigma[0], (sigma[0] + sigma[1]) / 2.0, sigma[1]]) * factor(rule, n, 3)
    assert_allclose(rule(X, w), expected, rtol=1e-12)


def test_estimator_with_constant_feature_is_not_degenerate():
    rng = np.random.default_rng(37)
    X = np.column_stack([rng.normal(size=30), np.full(30, 0.1)])
    y = X[:, 0] ** 2
    reg = NadarayaWatsonRegressor(kernel="epanechnikov").fit(X, y)
    sigma, _ = weighted_sigma(X[:, :1])
    assert_allclose(
        reg.bandwidth_, sigma[0] * factor(scott_bandwidth, 30, 2) * np.ones(2), rtol=1e-12
    )
    # A query a little off the constant value still sees its neighbors.
    Q = np.column_stack([X[:5, 0], np.full(5, 0.1 + 1e-6)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg.predict(Q)


def factor(rule, n, d):
    """The (n, d) term multiplying sigma_j in each rule."""
    if rule is scott_bandwidth:
        return n ** (-1.0 / (d + 4))
    return (n * (d + 2) / 4.0) ** (-1.0 / (d + 4))


@pytest.mark.parametrize("rule", [scott_bandwidth, silverman_bandwidth])
def test_all_constant_features_fall_back_to_one(rule):
    assert_allclose(rule(np.full((12, 2), 3.0)), [factor(rule, 12, 2)] * 2, rtol=1e-14)
    # A single sample is constant too; with n = 1 and d = 2 both factors are 1.
    assert_allclose(rule(np.array([[1.0, 2.0]])), [1.0, 1.0], rtol=1e-14)
    # Positive weight on one row only: constant as far as the weights go, n = 3.
    Z = np.array([[0.0, 0.0], [1.0, 5.0]])
    assert_allclose(rule(Z, [0.0, 3.0]), [factor(rule, 3, 2)] * 2, rtol=1e-14)


@pytest.mark.parametrize("name, rule", sorted(RULES_OF_THUMB.items()))
@pytest.mark.parametrize("Estimator", [NadarayaWatsonRegressor, NadarayaWatsonClassifier])
def test_estimators_use_the_rule(name, rule, Estimator):
    X = data(n=30, d=2, seed=34)
    y = (X[:, 0] > X[:, 0].mean()).astype(int)
    w = np.random.default_rng(35).integers(1, 4, size=30).astype(float)
    by_hand = scott_by_hand if name == "scott" else silverman_by_hand
    est = Estimator(bandwidth=name).fit(X, y, sample_weight=w)
    assert_allclose(est.bandwidth_, by_hand(X, w), rtol=1e-12)
    assert est.bandwidth == name
    est = Estimator(bandwidth=name).fit(X, y)
    assert_allclose(est.bandwidth_, by_hand(X), rtol=1e-12)


# -- check_bandwidth -----------------------------------------------------------------------


def test_check_bandwidth_broadcasts_scalars():
    h = check_bandwidth(0.5, 3)
    assert h.dtype == np.float64
    assert_array_equal(h, [0.5, 0.5, 0.5])
    assert_array_equal(check_bandwidth(np.float32(2.0), 2), [2.0, 2.0])
    assert_array_equal(check_bandwidth(3, 1), [3.0])


def test_check_bandwidth_keeps_per_feature_values():
    h = check_bandwidth([1, 2.5], 2)
    assert h.dtype == np.float64
    assert_array_equal(h, [1.0, 2.5])


@pytest.mark.parametrize(
    "bandwidth, message",
    [
        ([1.0, 2.0, 3.0], r"one value per feature \(shape \(2,\)\); got shape \(3,\)"),
        ([1.0], r"one value per feature \(shape \(2,\)\); got shape \(1,\)"),
        ([[1.0, 2.0]], r"one value per feature \(shape \(2,\)\); got shape \(1, 2\)"),
        ([], r"got shape \(0,\)"),
        ([1.0, np.nan], r"bandwidth must be finite; got \[1.0, nan\]"),
        ([np.inf, 1.0], r"bandwidth must be finite"),
        (np.nan, r"bandwidth must be finite"),
        ([1.0, 0.0], r"bandwidth must be positive; got \[1.0, 0.0\]"),
        ([-1.0, 1.0], r"bandwidth must be positive"),
        (0.0, r"bandwidth must be positive"),
        (-2.0, r"bandwidth must be positive"),
    ],
)
def test_check_bandwidth_errors(bandwidth, message):
    with pytest.raises(ValueError, match=message):
        check_bandwidth(bandwidth, 2)


# -- learned bandwidths in a fresh process --------------------------------------------------


def test_learned_bandwidth_does_not_import_dynamo():
    # Constructing torch.optim.LBFGS imports torch._dynamo: about a second before the first
    # bandwidth="loo" fit of a process, paid once, which is all a short script sees.
    code = textwrap.dedent("""
        import sys
        import numpy as np
        from sklearn_nw import NadarayaWatsonClassifier, NadarayaWatsonRegressor
        from sklearn_nw.bandwidth import LeaveOneOutBandwidth

        rng = np.random.default_rng(0)
        X = rng.uniform(size=(60, 2))
        y = np.sin(6 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(60)
        NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
        NadarayaWatsonClassifier(kernel="epanechnikov",
                                 bandwidth=LeaveOneOutBandwidth("full")).fit(X, y > 1)
        assert "torch._dynamo" not in sys.modules
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


# -- the learned bandwidth against a numpy leave-one-out oracle ----------------------------
#
# Plain numpy: Gaussian weights of the other rows, refitted without each point (a weighted
# average, or weighted least squares for local polynomials), nothing shared with sklearn_nw.


def numpy_loo_loss(X, y, h, *, sample_weight=None, degree=0, classes=None):
    """Sample-weighted leave-one-out loss at bandwidths ``h`` (d,), inputs all distinct:
    the mean squared error of Nadaraya-Watson (``degree=0``) or of the intercepts of local
    polynomial weighted least squares fits, or with ``classes`` the log-loss of the
    weighted class frequencies."""
    X, h = np.asarray(X, dtype=np.float64), np.asarray(h, dtype=np.float64)
    n, d = X.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    U = X / h  # the data in units of the bandwidths: no overflow at any feature unit
    losses = np.empty(n)
    for i in range(n):
        others = np.arange(n) != i
        u = U[others] - U[i]  # (n - 1, d)
        k = w[others] * np.exp(-0.5 * (u**2).sum(1))  # (n - 1,)
        if classes is not None:
            p = k[y[others] == y[i]].sum() / k.sum()
            losses[i] = -np.log(max(p, np.finfo(np.float64).eps))
            continue
        columns = [np.ones(n - 1)]
        if degree >= 1:
            columns += list(u.T)
        if degree >= 2:
            columns += [u[:, a] * u[:, b] for a in range(d) for b in range(a, d)]
        Z = np.column_stack(columns)  # (n - 1, p)
        beta = np.linalg.solve(Z.T @ (k[:, None] * Z), Z.T @ (k * y[others]))
        losses[i] = (beta[0] - y[i]) ** 2
    return float(np.average(losses, weights=w))


def loo_problem(seed, n=40, d=2):
    """A curved trend of the first two features (any others irrelevant), noisy."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    return X, np.sin(4 * X[:, :2].sum(1)) + 0.5 * rng.standard_normal(n)


@pytest.mark.parametrize("scale", [1e-30, 1e30])
@pytest.mark.parametrize("case", ["degree 0", "degree 1", "classifier"])
def test_learned_bandwidth_does_not_depend_on_the_features_unit(case, scale):
    # The descent's parameters are relative to its start, so X * s descends as X does, to
    # bandwidth_ * s at the same leave-one-out loss; an absolute bound on log h kept
    # 1e-30 and 1e30 at their start, 2-12 times the loss.
    X, y = loo_problem(seed=1)
    if case == "classifier":
        y = (y > np.median(y)).astype(int)
        unit = NadarayaWatsonClassifier(bandwidth="loo").fit(X, y)
        scaled = NadarayaWatsonClassifier(bandwidth="loo").fit(X * scale, y)
        oracle = functools.partial(numpy_loo_loss, X, y, classes=[0, 1])
    else:
        degree = int(case[-1])
        unit = NadarayaWatsonRegressor(bandwidth="loo", degree=degree).fit(X, y)
        scaled = NadarayaWatsonRegressor(bandwidth="loo", degree=degree).fit(X * scale, y)
        oracle = functools.partial(numpy_loo_loss, X, y, degree=degree)
    loss = oracle(unit.bandwidth_)
    assert oracle(scaled.bandwidth_ / scale) == pytest.approx(loss, rel=1e-6)
    assert_allclose(scaled.bandwidth_ / scale, unit.bandwidth_, rtol=1e-5)
    assert scaled.loss_curve_[-1] == pytest.approx(loss, rel=1e-6)
    assert unit.loss_curve_[-1] == pytest.approx(loss, rel=1e-6)
    assert scaled.n_iter_ == unit.n_iter_ >= 1


@pytest.mark.parametrize("case, seed", [
    ("gaussian", 0),  # the one-parameter reference kept by the one-standard-error rule
    ("gaussian, selection='min'", 0),
    ("epanechnikov, selection='min'", 4),
    ("tophat", 0),  # exact grids, without gradient
    ("isotropic", 0),
    ("full", 0),
    ("classifier", 0),
    ("degree 1 with weights", 6),  # two starts, the first one's result kept
    ("degree 2 with weights", 6),
    ("minibatch", 0),
])
def test_last_loss_of_the_curve_is_the_loss_of_the_bandwidth(case, seed):
    # Whichever path chose the bandwidth returned (a descent, another start, the reference,
    # the start kept over the descent), the curve ends at its leave-one-out loss.
    X, y = loo_problem(seed, d=3 if "degree" in case else 2)
    w, degree, classes, kernel = None, 0, None, case.split(",")[0]
    form = kernel if kernel in ("isotropic", "full") else "diagonal"
    selector = LeaveOneOutBandwidth(form, selection="min" if "min" in case else "one_se")
    if case == "minibatch":  # every other row in each batch, each against all rows
        selector.set_params(batch_size=len(X) - 1, n_neighbors=None, max_iter=10)
    if "degree" in case:
        degree = int(case[7])
        w = np.random.default_rng(seed + 1).uniform(0.5, 3.0, size=len(X))
    kernel = kernel if kernel in ("epanechnikov", "tophat") else "gaussian"
    if case == "classifier":
        y, classes = (y > np.median(y)).astype(int), [0, 1]
        est = NadarayaWatsonClassifier(kernel, bandwidth=selector)
    else:
        est = NadarayaWatsonRegressor(kernel, bandwidth=selector, degree=degree)
    with warnings.catch_warnings():
        # Ten minibatch steps need not converge; the curve is what is checked.
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y, sample_weight=w)
    if kernel != "gaussian":  # the textbook profile, refitted without each point
        A = nw_weights(X, X, est.bandwidth_, PROFILES[kernel], leave_one_out=True)
        expected = np.mean((A @ y - y) ** 2)
    else:
        if case == "full":  # distances ||(q - x) L||: the oracle in projected coordinates
            X, h = X @ est.projection_, np.ones(est.projection_.shape[1])
        else:
            h = est.bandwidth_
        expected = numpy_loo_loss(X, y, h, sample_weight=w, degree=degree, classes=classes)
    assert est.loss_curve_[-1] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_coordinate_sweep_distances_are_the_refits(kernel):
    # The sweep keeps the distances at its bandwidths and updates them one feature at a
    # time (d passes over them, not d over all d features): after a move, the losses of
    # one feature's multiples are still those of refits without each point.
    X, y = loo_problem(5, n=30, d=3)
    w = np.random.default_rng(6).integers(1, 4, size=len(X)).astype(float)
    loo = leave_one_out_set(X, y[:, None], w)
    tensors = (torch.as_tensor(a, dtype=torch.float64)
               for a in (loo.X, loo.values, loo.log_weight, loo.self_log_weight))
    objective = Objective(*tensors, get_kernel(kernel), SQUARED_ERROR, 1024)
    rows = torch.arange(len(loo.X))
    h = np.array([0.8, 1.5, 2.0])
    distances = objective.sweep_distances(h, rows)
    distances.move(0, 1 / 3)
    factors = (1 / 3, 3.0, 1e4)
    pooled = distances.pool(1, factors)  # (3, m, 1)
    losses = objective.mean_loss(SQUARED_ERROR.per_row(pooled, objective.v[rows]), rows)
    for f, loss in zip(factors, losses):
        h_f = h * [1 / 3, f, 1.0]
        if kernel == "gaussian":
            expected = numpy_loo_loss(X, y, h_f, sample_weight=w)
        else:
            A = nw_weights(X, X, h_f, PROFILES[kernel], w, leave_one_out=True)
            expected = np.average((A @ y - y) ** 2, weights=w)
        assert loss == pytest.approx(expected, rel=1e-10)
