"""Local polynomials (degree 1 and 2): against statsmodels, a slow weighted-least-squares
oracle, explicit leave-one-out refits, and on every route."""

import warnings

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from statsmodels.nonparametric.kernel_regression import KernelReg

from sklearn_nw import (
    EmptyNeighborhoodWarning,
    LeaveOneOutBandwidth,
    LocalFitWarning,
    NadarayaWatsonRegressor,
)
from sklearn_nw._engine_loo import loo_linear_grid_pool, loo_local_per_row
from sklearn_nw._leave_one_out import leave_one_out_set
from sklearn_nw._local_poly import held_range, intercept_rows
from sklearn_nw._loo_objective import Objective
from sklearn_nw.kernels import get_kernel

KERNELS = ["gaussian", "epanechnikov", "tricube", "exponential", "cosine", "tophat"]


def _data(n=120, d=2, seed=0, outputs=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    y = np.sin(2 * X[:, 0]) + X[:, -1] ** 2 + 0.1 * rng.standard_normal(n)
    if outputs > 1:
        y = np.column_stack([y, np.cos(X[:, 0]) - X[:, -1]])
    return X, y, rng


def _design(u, degree):
    columns = [np.ones((len(u), 1)), u]
    if degree == 2:
        columns += [u[:, [a]] * u[:, [b]] for a in range(u.shape[1])
                    for b in range(a, u.shape[1])]
    return np.hstack(columns)


def _oracle(X, y, Q, h, kernel, degree, sample_weight=None):
    """One weighted least-squares solve per query, weights from the kernel's profile."""
    k = get_kernel(kernel)
    w0 = np.ones(len(X)) if sample_weight is None else sample_weight
    Y = y.reshape(len(y), -1)
    out = []
    for q in Q:
        u = (X - q) / h
        w = k(np.linalg.norm(u, axis=1)) * w0
        Z = _design(X - q, degree)
        beta = np.linalg.solve(Z.T @ (w[:, None] * Z), Z.T @ (w[:, None] * Y))
        out.append(beta[0])
    out = np.array(out)
    return out if y.ndim == 2 else out[:, 0]


@pytest.mark.filterwarnings("ignore:After 0.17:FutureWarning")  # statsmodels RNG notice
@pytest.mark.parametrize("d", [1, 2, 3])
def test_local_linear_equals_statsmodels_ll(d):
    X, y, rng = _data(n=150, d=d)
    Q = rng.uniform(-1.2, 1.2, (40, d))  # some outside the data: extrapolation
    h = np.linspace(0.3, 0.5, d)
    ours = NadarayaWatsonRegressor(bandwidth=h, degree=1).fit(X, y).predict(Q)
    theirs, _ = KernelReg(y, X, var_type="c" * d, reg_type="ll", bw=h).fit(Q)
    assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("degree", [1, 2])
def test_against_a_weighted_least_squares_oracle(kernel, degree):
    X, y, rng = _data(n=200, d=2, outputs=2)
    w = rng.integers(1, 4, len(X)).astype(float)
    Q = rng.uniform(-0.8, 0.8, (25, 2))
    h = 0.9  # every query holds enough points in a compact kernel's support
    model = NadarayaWatsonRegressor(kernel, bandwidth=h, degree=degree)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LocalFitWarning)
        ours = model.fit(X, y, sample_weight=w).predict(Q)
    assert_allclose(ours, _oracle(X, y, Q, h, kernel, degree, w), rtol=1e-9, atol=1e-10)


def test_float32_is_close_to_float64():
    X, y, rng = _data(n=300, d=2)
    Q = rng.uniform(-1, 1, (50, 2))
    model = NadarayaWatsonRegressor(bandwidth=0.4, degree=2)
    p64 = model.fit(X, y).predict(Q)
    p32 = model.fit(X.astype(np.float32), y).predict(Q.astype(np.float32))
    assert_allclose(p32, p64, atol=1e-4)


def test_a_linear_trend_is_reproduced_exactly():
    # The point of degree 1: no bias on a linear function, at the boundary or beyond it
    # (Nadaraya-Watson flattens out towards the nearest targets).
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (100, 2))
    y = 3 * X[:, 0] - 2 * X[:, 1] + 1
    Q = np.array([[0.0, 0.0], [1.0, 1.0], [1.3, -0.2]])
    truth = 3 * Q[:, 0] - 2 * Q[:, 1] + 1
    linear = NadarayaWatsonRegressor(bandwidth=0.2, degree=1).fit(X, y).predict(Q)
    constant = NadarayaWatsonRegressor(bandwidth=0.2).fit(X, y).predict(Q)
    assert_allclose(linear, truth, atol=1e-9)
    assert np.max(np.abs(constant - truth)) > 0.2


@pytest.mark.parametrize("degree", [1, 2])
def test_the_attention_is_the_equivalent_kernel(degree):
    X, y, rng = _data(n=150, d=2)
    Q = np.vstack([rng.uniform(-1, 1, (10, 2)), [[1.0, 1.0], [-1.0, 0.9]]])
    model = NadarayaWatsonRegressor(bandwidth=0.3, degree=degree).fit(X, y)
    pred, attention = model.predict(Q, return_attention=True)
    assert_allclose(attention.sum(1), 1.0, atol=1e-10)
    assert_allclose(attention @ y, pred, atol=1e-10)
    assert (attention < 0).any()  # at the corners the kernel turns negative


def test_compact_kernels_give_a_sparse_equivalent_kernel():
    X, y, rng = _data(n=400, d=2)
    Q = rng.uniform(-0.9, 0.9, (20, 2))
    model = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.5, degree=1).fit(X, y)
    pred, attention = model.predict(Q, return_attention=True)
    assert hasattr(attention, "tocsr")
    assert_allclose(attention.sum(1), 1.0, atol=1e-10)
    assert_allclose(attention @ y, pred, atol=1e-10)


@pytest.mark.parametrize("degree", [1, 2])
def test_every_route_gives_the_same_fit(degree):
    X, y, rng = _data(n=6000, d=2)
    Q = rng.uniform(-1, 1, (50, 2))
    base = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.1, degree=degree,
                                   algorithm="brute").fit(X, y)
    expected = base.predict(Q)
    for algorithm in ["kd_tree", "ball_tree", "cell_list"]:
        model = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.1, degree=degree,
                                        algorithm=algorithm).fit(X, y)
        assert model.route_ != "dense"
        assert_allclose(model.predict(Q), expected, rtol=1e-12, atol=1e-12)
    everyone = NadarayaWatsonRegressor(bandwidth=0.3, degree=degree, n_neighbors=300,
                                       algorithm="kd_tree").fit(X[:300], y[:300])
    dense = NadarayaWatsonRegressor(bandwidth=0.3, degree=degree).fit(X[:300], y[:300])
    assert_allclose(everyone.predict(Q), dense.predict(Q), rtol=1e-12, atol=1e-12)


def test_singular_designs_fall_back_to_the_local_constant_value():
    X, y, rng = _data(n=200, d=2)
    far = np.array([[5.0, 5.0], [0.0, 0.0]])
    model = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.05, degree=1).fit(X, y)
    constant = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.05).fit(X, y)
    # Neither query has a point in reach (nearest-point fallback); both are singular.
    with pytest.warns(LocalFitWarning, match="singular local design"), \
            pytest.warns(EmptyNeighborhoodWarning, match="no training point inside"):
        pred, attention = model.predict(far, return_attention=True)
    with pytest.warns(EmptyNeighborhoodWarning, match="no training point inside"):
        expected, expected_attention = constant.predict(far, return_attention=True)
    assert np.all(np.isfinite(pred))
    assert_allclose(pred, expected, rtol=1e-12)
    assert_allclose(attention.toarray(), expected_attention.toarray(), rtol=1e-12)


def test_collinear_training_points_are_singular_for_a_plane():
    t = np.linspace(0, 1, 50)
    X = np.column_stack([t, 2 * t])  # a line in the plane
    y = np.sin(3 * t)
    Q = np.array([[0.5, 1.0], [0.2, 0.1]])
    # On the line the intercept is identified (the fit along it); off it, it is not.
    with pytest.warns(LocalFitWarning, match="1 of 2 queries"):
        pred = NadarayaWatsonRegressor(bandwidth=0.3, degree=1).fit(X, y).predict(Q)
    expected = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y).predict(Q)
    assert_allclose(pred[1], expected[1], rtol=1e-12)
    sw = np.exp(-0.25 * np.sum(((X - Q[0]) / 0.3) ** 2, axis=1))
    beta = np.linalg.lstsq(sw[:, None] * _design(X - Q[0], 1), sw * y, rcond=None)[0]
    assert_allclose(pred[0], beta[0], rtol=1e-9)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_leave_one_out_weights_equal_explicit_refits(kernel, dense):
    X, y, rng = _data(n=60, d=2)
    X[5] = X[6]  # a repeated input leaves with all its rows
    model = NadarayaWatsonRegressor(kernel, bandwidth=0.8, degree=1).fit(X, y)
    attention = dense(model.attention_weights_)
    assert_allclose(attention.sum(1), 1.0, atol=1e-10)
    for i in [0, 5, 6, 30]:
        keep = ~np.all(X == X[i], axis=1)
        refit = NadarayaWatsonRegressor(kernel, bandwidth=0.8, degree=1).fit(X[keep], y[keep])
        assert_allclose(attention[i] @ y, refit.predict(X[i:i + 1])[0], rtol=1e-10)
        assert np.all(attention[i, ~keep] == 0)


def _bounded_oracle(X, y, Q, h, kernel, degree, sample_weight):
    """The oracle's fits shrunk toward the Nadaraya-Watson value, one factor per query, to
    the range of the targets whose weight is at least 1/1000 of the query's largest."""
    fits = _oracle(X, y, Q, h, kernel, degree, sample_weight).reshape(len(Q), -1)
    Y = y.reshape(len(y), -1)
    k = get_kernel(kernel)
    out = []
    for q, fit in zip(Q, fits):
        a = k(np.linalg.norm((X - q) / h, axis=1)) * sample_weight
        a /= a.sum()
        held = a >= 1e-3 * a.max()
        m = a @ Y
        lo, hi = Y[held].min(0), Y[held].max(0)
        step = fit - m
        room = np.where(step > 0, hi - m, lo - m)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where(step != 0, room / step, 1.0)
        out.append(m + np.clip(lam, 0, 1).min() * step)
    out = np.array(out)
    return out if y.ndim == 2 else out[:, 0]


def test_held_range_is_the_smallest_and_largest_target_held():
    rng = np.random.default_rng(0)
    v = rng.integers(-3, 4, (40, 2)).astype(float)  # ties within each output
    held = rng.random((3, 5, 40)) < 0.2
    held[0, 0] = False  # no key held: the infinite ends
    held[1, 1] = False
    held[1, 1, 7] = True  # one key held
    lo, hi = held_range(torch.as_tensor(held), torch.as_tensor(v))
    expected_lo = np.where(held[..., None], v, np.inf).min(-2)
    expected_hi = np.where(held[..., None], v, -np.inf).max(-2)
    np.testing.assert_array_equal(lo.numpy(), expected_lo)
    np.testing.assert_array_equal(hi.numpy(), expected_hi)
    assert (lo[0, 0].numpy() == np.inf).all() and (hi[0, 0].numpy() == -np.inf).all()


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])  # dense, sparse
@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("outputs", [1, 2])
def test_bounded_fits_stay_in_the_range_of_the_targets_with_weight(kernel, degree, outputs):
    X, y, rng = _data(n=200, d=2, outputs=outputs)
    w = rng.integers(1, 4, len(X)).astype(float)
    # Inside, at the edge and beyond the data: some fits extrapolate past every target.
    Q = np.vstack([rng.uniform(-0.8, 0.8, (10, 2)),
                   [[1.0, 1.0], [1.2, -1.2], [-1.3, 0.0], [1.4, 0.0], [0.0, 1.4]]])
    h = 0.9
    bounded = NadarayaWatsonRegressor(kernel, bandwidth=h, degree=degree, bounded=True)
    pred, attention = bounded.fit(X, y, sample_weight=w).predict(Q, return_attention=True)
    assert_allclose(pred, _bounded_oracle(X, y, Q, h, kernel, degree, w), rtol=1e-9,
                    atol=1e-10)
    # Still a weighted sum of the targets, with weights summing to 1.
    assert_allclose(attention.sum(1), 1.0, atol=1e-10)
    assert_allclose(attention @ y, pred, atol=1e-10)
    free = NadarayaWatsonRegressor(kernel, bandwidth=h, degree=degree).fit(X, y, w).predict(Q)
    moved = np.any(np.abs(pred - free).reshape(len(Q), -1) > 1e-9, axis=1)
    assert moved.any() and not moved.all()  # only the fits that left the range moved


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_bounded_leave_one_out_weights_equal_explicit_refits(kernel, dense):
    X, y, rng = _data(n=60, d=2)
    X[5] = X[6]  # a repeated input leaves with all its rows
    model = NadarayaWatsonRegressor(kernel, bandwidth=2.0, degree=1, bounded=True).fit(X, y)
    attention = dense(model.attention_weights_)
    assert_allclose(attention.sum(1), 1.0, atol=1e-10)
    for i in [0, 5, 6, 30, int(np.argmax(np.abs(X).sum(1)))]:
        keep = ~np.all(X == X[i], axis=1)
        refit = NadarayaWatsonRegressor(kernel, bandwidth=2.0, degree=1, bounded=True)
        assert_allclose(attention[i] @ y, refit.fit(X[keep], y[keep]).predict(X[i:i + 1])[0],
                        rtol=1e-10)


@pytest.mark.parametrize("params, match", [
    ({"metric": "precomputed", "bandwidth": 1.0}, "precomputed"),
    ({"compute": "compiled"}, "compiled"),
    ({"bandwidth": LeaveOneOutBandwidth(batch_size=10)}, "full leave-one-out loss"),
])
def test_refused_combinations_name_the_problem(params, match):
    X, y, _ = _data(n=30, d=2)
    if params.get("metric") == "precomputed":
        X = np.linalg.norm(X[:, None] - X[None], axis=-1)
    with pytest.raises(ValueError, match=match):
        NadarayaWatsonRegressor(degree=1, **params).fit(X, y)


def test_degree_must_be_0_1_or_2():
    X, y, _ = _data(n=30, d=2)
    with pytest.raises(ValueError, match="degree"):
        NadarayaWatsonRegressor(degree=3).fit(X, y)


# Learned bandwidths: the descent on the local fits' own leave-one-out loss.


def _objective(X, y, sample_weight, kernel, degree, bounded=False):
    """The leave-one-out objective of a learned bandwidth, on the distinct inputs."""
    loo = leave_one_out_set(X, y.reshape(len(y), -1), sample_weight)

    def tensor(a):
        return torch.as_tensor(np.asarray(a), dtype=torch.float64)

    return loo, Objective(tensor(loo.X), tensor(loo.values), tensor(loo.log_weight),
                          tensor(loo.self_log_weight), get_kernel(kernel), "squared_error",
                          1024, degree=degree, bounded=bounded)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tricube"])
@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("bounded", [False, True])
@pytest.mark.parametrize("outputs", [1, 2])
def test_learned_bandwidth_loss_is_leave_one_out_of_explicit_refits(kernel, degree, bounded,
                                                                    outputs):
    X, y, rng = _data(n=50, d=2, outputs=outputs)
    X[5] = X[6]  # a repeated input leaves with all its rows
    if bounded:
        # Leave-one-out bounds by the weighted mean target of a repeated input (as the
        # CV estimators' grids do), a refit by each of its rows' targets.
        y[5] = y[6]
    w = rng.uniform(0.5, 2.0, len(X))
    h = np.array([0.6, 0.9])
    loo, objective = _objective(X, y, w, kernel, degree, bounded)
    per_location = objective.per_row(h[None], torch.arange(len(loo.X)))[0].numpy()
    expected = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalFitWarning)  # far left-out points
        for x, value in zip(loo.X, loo.values):
            keep = ~np.all(X == x, axis=1)
            refit = NadarayaWatsonRegressor(kernel, bandwidth=h, degree=degree,
                                            bounded=bounded)
            fitted = refit.fit(X[keep], y[keep], sample_weight=w[keep]).predict(x[None])
            expected.append(((fitted.reshape(-1) - value) ** 2).sum())
    assert_allclose(per_location, expected, rtol=1e-7, atol=1e-10)
    mean = objective.loss(torch.as_tensor(h), torch.arange(len(loo.X)))
    assert_allclose(mean, np.average(expected, weights=loo.weight), rtol=1e-7)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("degree, bounded", [(1, False), (2, False), (1, True)])
def test_learned_bandwidth_gradient_matches_finite_differences(kernel, degree, bounded):
    X, y, rng = _data(n=50, d=2)
    _, objective = _objective(X, y, np.ones(len(X)), kernel, degree, bounded)
    rows = torch.arange(len(X))
    log_h = torch.tensor(np.log([0.7, 0.9]), requires_grad=True)
    objective.loss(log_h.exp(), rows, backward=True)
    step = 1e-6
    for j in range(2):
        e = np.zeros(2)
        e[j] = step
        up, down = (objective.loss(torch.as_tensor(np.exp(log_h.detach().numpy() + s * e)),
                                   rows) for s in (1, -1))
        assert_allclose(log_h.grad[j].item(), (up - down) / (2 * step), rtol=1e-5)


def test_moment_passes_equal_the_general_path_far_from_the_center():
    # The Gaussian local-linear loss pools the keys' raw moments about the rows' center
    # and moves them to each row; on a long series with a narrow bandwidth the rows at
    # its ends lie ten thousand bandwidths from the center, where moved sums lose 8
    # digits (relative errors of 7e-5 here): those rows take the general path (each
    # design about its own query), and the losses, their grid and the gradient are the
    # general path's, up to the rounding of logits 1e4 bandwidths from the keys' center.
    rng = np.random.default_rng(3)
    x = np.arange(20_000.0)
    X = np.column_stack([x, rng.uniform(-1, 1, len(x))])
    y = np.sin(x / 7) + X[:, 1] + 0.1 * rng.standard_normal(len(x))
    w = rng.uniform(0.5, 2.0, len(x))
    _, objective = _objective(X, y, w, "gaussian", 1)
    rows = torch.arange(0, len(x), 199)  # from one end to the other
    hs = np.array([[1.0, 0.8], [1.5, 0.4]])
    general = torch.stack([loo_local_per_row(
        objective.x, objective.v, torch.as_tensor(h), objective.kernel, objective.log_w,
        objective.self_log_w, loss="squared_error", degree=1, rows=rows) for h in hs])
    assert_allclose(objective.per_row(hs, rows), general, rtol=1e-6, atol=1e-9)
    log_h = torch.tensor(np.log(hs[0]), requires_grad=True)
    value = objective.loss(log_h.exp(), rows, backward=True)
    assert_allclose(value, np.average(general[0], weights=w[rows]), rtol=1e-6)
    step = 1e-3
    for j in range(2):
        e = np.zeros(2)
        e[j] = step
        up, down = (objective.loss(torch.as_tensor(np.exp(np.log(hs[0]) + s * e)), rows)
                    for s in (1, -1))
        assert_allclose(log_h.grad[j].item(), (up - down) / (2 * step), rtol=1e-3)


@pytest.mark.filterwarnings("ignore:After 0.17:FutureWarning")  # statsmodels RNG notice
@pytest.mark.parametrize("d", [1, 2, 3])
def test_learned_local_linear_is_at_least_as_good_as_statsmodels_cv_ls(d):
    # 60 rows: statsmodels' cv_ls (Nelder-Mead over Python loops) took 18 s at 100 rows
    # in three features.
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, (60, d))
    y = np.sin(2 * X[:, 0]) + (X[:, 1] if d > 1 else 0) + 0.3 * rng.standard_normal(60)
    theirs = KernelReg(y, X, var_type="c" * d, reg_type="ll", bw="cv_ls")
    ours = NadarayaWatsonRegressor(degree=1, bandwidth="loo").fit(X, y)
    # The same objective: statsmodels' leave-one-out loss at a bandwidth is ours ...
    _, objective = _objective(X, y, np.ones(len(X)), "gaussian", 1)
    rows = torch.arange(len(X))
    assert_allclose(objective.loss(torch.as_tensor(theirs.bw), rows),
                    theirs.cv_loo(theirs.bw, theirs._est_loc_linear), rtol=1e-9)
    # ... and ours ends no higher on it than statsmodels' Nelder-Mead does.
    assert (theirs.cv_loo(ours.bandwidth_, theirs._est_loc_linear)
            <= theirs.cv_loo(theirs.bw, theirs._est_loc_linear) * (1 + 1e-6))


@pytest.mark.parametrize("degree", [1, 2])
def test_learned_local_bandwidth_weights_equal_repeated_rows(degree):
    # Leaving out inputs (a row with its copies), integer weights are repeated rows.
    X, y, rng = _data(n=40, d=2)
    counts = rng.integers(1, 3, len(X))
    loo = LeaveOneOutBandwidth(leave_out="input")
    weighted = NadarayaWatsonRegressor(degree=degree, bandwidth=loo).fit(
        X, y, sample_weight=counts)
    repeated = NadarayaWatsonRegressor(degree=degree, bandwidth=loo).fit(
        np.repeat(X, counts, axis=0), np.repeat(y, counts))
    assert_allclose(weighted.bandwidth_, repeated.bandwidth_, rtol=1e-6)
    assert_allclose(weighted.predict(X), repeated.predict(X), rtol=1e-6, atol=1e-9)


def test_learned_local_linear_follows_a_linear_feature_with_a_wide_bandwidth():
    # y is linear in the second feature: a local-linear fit needs no locality there, so
    # its learned bandwidth is far wider than the local-constant one, and it predicts
    # better out of sample.
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (300, 2))
    f = lambda X: np.sin(2 * X[:, 0]) + 2 * X[:, 1]
    y = f(X) + 0.2 * rng.standard_normal(300)
    Q = rng.uniform(-1.8, 1.8, (200, 2))
    constant = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    linear = NadarayaWatsonRegressor(degree=1, bandwidth="loo").fit(X, y)
    assert linear.bandwidth_[1] > 3 * constant.bandwidth_[1]
    error = [np.mean((m.predict(Q) - f(Q)) ** 2) for m in (constant, linear)]
    assert error[1] < 0.5 * error[0]


def test_the_local_fits_gradient_stays_finite_on_a_tiny_moment_diagonal():
    # A far query at a small bandwidth: its moments underflow towards 0, and the unit
    # diagonal scaling's own derivative (x^-3/2) would overflow into a NaN gradient.
    M = torch.tensor([[[1.0, 0.0], [0.0, 1e-250]]], dtype=torch.float64, requires_grad=True)
    c, singular = intercept_rows(M, torch.tensor([[1.0, 0.0]], dtype=torch.float64), 1)
    c.sum().backward()
    assert not singular.any() and torch.isfinite(M.grad).all()
    assert_allclose(c.detach().numpy(), [[1.0, 0.0]])


# -- Issue 24, second round: identified intercepts, far points, float32 (items 3, 7, 9) ----


def _wls_intercepts(X, y, Q, h, degree):
    """Gaussian-weighted least squares per query, float64, by numpy's minimum-norm
    ``lstsq`` on the sqrt(w)-scaled design centered at the query: its intercept."""
    out = []
    for q in Q:
        sw = np.exp(-0.25 * np.sum(((X - q) / h) ** 2, axis=1))  # sqrt of the weights
        Z = _design(X - q, degree)
        beta = np.linalg.lstsq(sw[:, None] * Z, sw * y, rcond=None)[0]
        out.append(beta[0])
    return np.array(out)


@pytest.mark.parametrize("degree", [1, 2])
def test_a_constant_column_keeps_the_local_fit(degree):
    X, y, rng = _data(n=300, d=1)
    X0 = np.column_stack([X, np.zeros(len(X))])  # the intercept is still identified
    Q = np.column_stack([rng.uniform(-1, 1, 30), np.zeros(30)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", LocalFitWarning)
        pred = NadarayaWatsonRegressor(bandwidth=[0.3, 1.0], degree=degree).fit(
            X0, y).predict(Q)
    assert_allclose(pred, _wls_intercepts(X0, y, Q, np.array([0.3, 1.0]), degree),
                    rtol=1e-9, atol=1e-12)


def test_a_rare_indicator_keeps_the_local_fit():
    from _oracle import PROFILES, adaptive_weights

    from sklearn_nw import AdaptiveBandwidth

    X, y, rng = _data(n=300, d=1)
    indicator = np.zeros(300)
    indicator[:3] = 1.0  # 3 ones in 300 rows: no weight near the others
    X1 = np.column_stack([X, indicator])
    Q = np.column_stack([rng.uniform(-1, 1, 40), np.zeros(40)])
    base = np.array([0.2, 0.03])
    with warnings.catch_warnings():
        warnings.simplefilter("error", LocalFitWarning)
        pred = NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(scale=1.0, base=base),
                                       degree=1).fit(X1, y).predict(Q)
    A = adaptive_weights(Q, X1, base, PROFILES["gaussian"], "balloon", 10, 1.0)
    expected = []
    for q, a in zip(Q, A):
        sw = np.sqrt(a)
        beta = np.linalg.lstsq(sw[:, None] * _design(X1 - q, 1), sw * y, rcond=None)[0]
        expected.append(beta[0])
    assert_allclose(pred, expected, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(("degree", "x0"), [(1, 1.5), (2, 1.2)])
def test_float32_fits_a_few_bandwidths_beyond_the_data(degree, x0):
    X = np.linspace(0, 1, 300)[:, None]
    y = np.sin(4 * X[:, 0]) + X[:, 0]
    expected = _wls_intercepts(X, y, np.array([[x0]]), 0.1, degree)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LocalFitWarning)
        pred = NadarayaWatsonRegressor(bandwidth=0.1, degree=degree).fit(
            X.astype(np.float32), y.astype(np.float32)).predict(np.array([[x0]], np.float32))
    # Extrapolated ~ 5 bandwidths: float32's rounding grows with the distance.
    assert_allclose(pred, expected, rtol=2e-3)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("x0", [1e80, 1e155, 1e200])
def test_a_far_query_gets_the_local_constant_value(degree, x0):
    X, y, _ = _data(n=100, d=1)
    model = NadarayaWatsonRegressor(bandwidth=0.1, degree=degree).fit(X, y)
    constant = NadarayaWatsonRegressor(bandwidth=0.1).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)  # from 1e155 on
        expected = constant.predict(np.array([[x0]]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = model.predict(np.array([[x0]]))
    assert any(issubclass(w.category, LocalFitWarning) for w in caught)
    assert np.isfinite(pred).all()
    assert_allclose(pred, expected, rtol=1e-12)


@pytest.mark.parametrize("degree", [1, 2])
def test_cv_local_fits_with_a_far_training_row(degree):
    from sklearn_nw import NadarayaWatsonRegressorCV

    X, y, _ = _data(n=100, d=1)
    X[0] = 1e80
    reg = NadarayaWatsonRegressorCV(bandwidths=[0.3, 0.6], degree=degree).fit(X, y)
    assert np.isfinite(reg.best_score_)


@pytest.mark.parametrize("kernel, bandwidths", [("gaussian", [0.04, 0.08, 0.5]),
                                                ("epanechnikov", [0.25, 0.6])])
@pytest.mark.parametrize("degree", [1, 2])
def test_one_feature_leave_one_out_grid_equals_explicit_refits(kernel, bandwidths, degree):
    # One feature: each input attends to a window of the sorted inputs (far narrower than
    # the data at the small bandwidths); repeated inputs and weights included.
    from sklearn_nw._grids import LeaveOneOutGrid

    X, y, rng = _data(n=60, d=1, seed=3)
    X = np.concatenate([X, X[:5]])
    y = np.concatenate([y, y[:5] + 0.1])
    w = rng.uniform(0.5, 2.0, len(X))
    loo = leave_one_out_set(X, y[:, None], w, leave_out="input")
    grid = np.array(bandwidths)[:, None]
    pooled = LeaveOneOutGrid(grid, degree=degree)._pool(
        loo, get_kernel(kernel), np.dtype(np.float64), torch.device("cpu"), 1024)
    for i, x in enumerate(loo.X[:, 0]):
        other = X[:, 0] != x
        expected = [_oracle(X[other], y[other], [[x]], h, kernel, degree, w[other])[0]
                    for h in bandwidths]
        assert_allclose(pooled[:, i, 0], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("leave_out, with_groups", [("input", False), ("row", False),
                                                    ("row", True)])
def test_leave_one_out_grid_of_moments_equals_its_attention_blocks(leave_out, with_groups):
    # Unbounded local-linear grids of a Gaussian kernel pool the raw moments in one pass;
    # the blocks of leave-one-out attention are the reference. Repeated inputs, weights,
    # groups, and a far input whose moved moments lose their digits (redone by the
    # blocks).
    from sklearn_nw._grids import LeaveOneOutGrid

    X, y, rng = _data(n=80, d=2, seed=4)
    X = np.concatenate([X, X[:6], [[40.0, -30.0]]])
    y = np.concatenate([y, y[:6] + 0.2, [1.0]])
    w = rng.uniform(0.5, 2.0, len(X))
    groups = np.arange(len(X)) // 3 if with_groups else None
    loo = leave_one_out_set(X, y[:, None], w, leave_out=leave_out, groups=groups)
    grid = np.array([[0.05, 0.08], [0.1, 0.16], [0.3, 0.48], [1.5, 2.4]])
    kernel, cpu = get_kernel("gaussian"), torch.device("cpu")
    search = LeaveOneOutGrid(grid, degree=1)
    moments = search._local_pool(loo, kernel, np.dtype(np.float64), cpu, 1024)
    blocks = search._local_pool(loo, kernel, np.dtype(np.float64), cpu, 1024, moments=False)
    _, redo = loo_linear_grid_pool(*(torch.as_tensor(a, dtype=torch.float64) for a in (
        loo.X, loo.values, grid)), kernel, torch.as_tensor(loo.log_weight),
        torch.as_tensor(loo.self_log_weight),
        group=None if loo.group is None else torch.as_tensor(loo.group))
    assert redo.any() and not redo.all()  # both paths at work
    assert_allclose(moments.numpy(), blocks.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("leave_out", ["input", "row"])
def test_one_feature_nadaraya_watson_grid_by_windows_equals_direct_sums(kernel, leave_out):
    # Degree 0 in one feature: grid points whose windows hold at most a quarter of the
    # inputs attend to their windows, the others take the dense pass; both against the
    # leave-one-out sums over every other input, from exact differences. Repeated
    # inputs (a row keeping its copies' weight under leave_out="row"), weights, a row of
    # weight 0, two outputs, and a bandwidth below the inputs' spacing (compact: rows of
    # no kernel mass attend to their nearest inputs).
    import sklearn_nw._grids as grids
    from sklearn_nw._grids import LeaveOneOutGrid

    rng = np.random.default_rng(5)
    X = np.sort(rng.uniform(0, 100, 1100))[:, None]
    X = np.concatenate([X, X[:40]])
    y = np.column_stack([np.sin(X[:, 0] / 7), np.cos(X[:, 0] / 3)]) + rng.normal(
        0, 0.1, (len(X), 2))
    w = rng.uniform(0.5, 2.0, len(X))
    w[7] = 0.0
    loo = leave_one_out_set(X, y, w, leave_out=leave_out)
    grid = np.array([0.02, 0.3, 0.6, 3.0, 30.0])[:, None]
    k = get_kernel(kernel)
    narrow = grids._narrow_windows(loo, k, grid)
    assert narrow[:3].all() and not narrow[-1]
    pooled = LeaveOneOutGrid(grid)._pool(loo, k, np.dtype(np.float64), torch.device("cpu"),
                                         1024).numpy()  # (G, L, t)
    x, W, V = loo.X[:, 0], loo.weight, loo.values
    kept = np.exp(loo.self_log_weight)  # the weight a key keeps on itself
    for g, h in enumerate(grid[:, 0]):
        u_sq = torch.as_tensor(((x[:, None] - x[None, :]) / h) ** 2)
        K = W * np.exp(k.log_profile_sq(u_sq).numpy())  # (L, L)
        np.fill_diagonal(K, kept * np.exp(float(k.log_profile_sq(torch.zeros(1))[0])))
        empty = K.sum(1) == 0
        if empty.any():  # the nearest other inputs of weight, every tie
            D = np.abs(x[:, None] - x[None, :])
            D[:, W <= 0] = np.inf
            np.fill_diagonal(D, np.inf)
            K[empty] = np.where(D[empty] == D[empty].min(1, keepdims=True), W, 0.0)
        expected = K @ V / K.sum(1, keepdims=True)
        assert_allclose(pooled[g], expected, rtol=1e-11, atol=1e-12, err_msg=f"h={h}")


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_local_grid_of_bandwidths_in_no_proportion_equals_each_bandwidth_alone(kernel):
    # A grid whose points are not multiples of one vector (the categorical features'
    # grids) shares each block's squared distances per group of columns whose bandwidths
    # keep their ratios (here columns 0 and 1, and 2 alone): each grid point as a grid of
    # its own (one bandwidth: multiples of itself) is the reference.
    from sklearn_nw._grids import LeaveOneOutGrid, _proportional_columns

    X, y, rng = _data(n=70, d=3, seed=6)
    w = rng.uniform(0.5, 2.0, len(X))
    loo = leave_one_out_set(X, y[:, None], w, leave_out="input")
    grid = np.array([[0.1, 0.2, 0.1], [0.3, 0.6, 0.5], [0.45, 0.9, 0.4], [0.6, 1.2, 1.1],
                     [0.9, 1.8, 0.7]])
    members, multiples = _proportional_columns(grid)
    assert [m.tolist() for m in members] == [[0, 1], [2]]
    # At the first grid point some inputs have no other within a compact kernel's reach
    # (they attend to their nearest inputs, in that grid point's metric).
    scaled = loo.X / grid[0]
    D = np.sqrt(((scaled[:, None] - scaled[None]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    assert (D.min(1) >= 1).any()
    k, cpu = get_kernel(kernel), torch.device("cpu")
    pooled = LeaveOneOutGrid(grid, degree=1)._local_pool(
        loo, k, np.dtype(np.float64), cpu, 1024, moments=False)
    for g, h in enumerate(grid):
        alone = LeaveOneOutGrid(h[None], degree=1)._local_pool(
            loo, k, np.dtype(np.float64), cpu, 1024, moments=False)
        # (Local fits at the smallest bandwidths amplify the distances' last bits.)
        assert_allclose(pooled[g], alone[0], rtol=1e-9, atol=1e-11)


def test_intercept_rows_skip_the_eigenvalues_only_where_there_is_no_null_space():
    # Moment matrices of every kind in one batch: well conditioned, rank deficient
    # (a repeated key), nearly so, and not finite. The Cholesky test that skips the
    # eigenvalues must never skip a matrix with a numerical null space, and the fits
    # (and their gradients) must be those of the null-space path on every row.
    from sklearn_nw._local_poly import _null_space_solve, _well_conditioned

    rng = np.random.default_rng(0)
    eps = torch.finfo(torch.float64).eps
    designs = []
    for k in range(40):
        Z = rng.normal(size=(6, 3))
        Z[:, 0] = 1.0
        if k % 4 == 1:
            Z[:, 2] = Z[:, 1]  # collinear: a null space
        elif k % 4 == 2:
            Z[:, 2] = Z[:, 1] + 10.0 ** -rng.uniform(3, 9) * rng.normal(size=6)
        designs.append(Z.T @ (rng.uniform(0.1, 1.0, 6)[:, None] * Z))
    M = torch.tensor(np.array(designs), requires_grad=True)
    E = np.column_stack([np.ones(40), rng.normal(size=(40, 2))])
    E[1::8, 2] = E[1::8, 1]  # a value along the collinear pair: the minimum-norm fit
    E = torch.tensor(E)
    with torch.no_grad():
        M_bad = M.detach().clone()
        M_bad[39, 0, 0] = np.inf
    unit = M.detach() / torch.sqrt(torch.diagonal(M.detach(), dim1=1, dim2=2)[:, :, None]
                                   * torch.diagonal(M.detach(), dim1=1, dim2=2)[:, None, :])
    well = _well_conditioned(unit, torch.ones(40, dtype=torch.bool), eps)
    eigenvalues = torch.linalg.eigvalsh(unit)
    ratio = eigenvalues[:, 0] / eigenvalues[:, -1]
    assert bool((ratio[well] > eps**0.5).all())  # never skips a null space
    assert 0 < int(well.sum()) < 40  # both paths taken here
    c, singular = intercept_rows(M, E, 2)
    s = torch.diagonal(M.detach(), dim1=1, dim2=2).rsqrt()
    expected, expected_singular = _null_space_solve(
        M * s[:, :, None] * s[:, None, :], E * s, torch.ones(40, dtype=torch.bool),
        torch.ones(40, dtype=torch.bool), eps)
    assert torch.equal(c, expected * s)
    assert torch.equal(singular, expected_singular)
    assert not bool(singular[1::8].any()) and bool(singular[5::8].all())
    (grad,) = torch.autograd.grad(c.sum(), M)
    (expected_grad,) = torch.autograd.grad((expected * s).sum(), M)
    assert_allclose(grad.numpy(), expected_grad.numpy(), rtol=1e-12, atol=1e-12)
    # A row that is not finite has no value, on either path.
    c_bad, singular_bad = intercept_rows(M_bad, E, 2)
    assert bool(singular_bad[39]) and float(c_bad[39].abs().sum()) == 0.0
    assert torch.equal(c_bad[:39], c[:39].detach())


def test_windowed_blocks_of_narrow_windows_hold_enough_work_within_memory():
    # A windowed pool's blocks (one feature) of narrow windows take more rows than the
    # memory-sized ones, up to the minimum of (query, key, grid point) triples; never
    # fewer rows than those, never more than a worker's block of memory or the inputs.
    import sklearn_nw._grids as grids

    for degree, width, g in [(1, 45, 4), (2, 82, 4), (0, 29, 1), (1, 400, 5)]:
        fit = grids._local_blocks(2 * width, g, 1, degree, 1024, 2, "for a test")
        rows = grids._window_rows(fit, 1780, width, 1, degree, 1024)
        assert rows >= fit.rows
        if fit.rows * (fit.rows + width) * fit.grid_points < grids._WINDOW_BLOCK_MIN:
            assert rows > fit.rows
            assert rows * (rows + width) * fit.grid_points >= grids._WINDOW_BLOCK_MIN
            assert (rows - 1) * (rows - 1 + width) * fit.grid_points < grids._WINDOW_BLOCK_MIN
        else:
            assert rows == fit.rows
    # Bounded by the memory a worker's block may take (4 MiB for two workers: the
    # 256 rows a window of 1 input wants would take 11 MB), and by the inputs.
    fit = grids._local_blocks(2, 1, 1, 2, 4, 2, "for a test")
    rows = grids._window_rows(fit, 100_000, 1, 1, 2, 4)
    assert fit.rows < rows < 256
    assert rows * grids.local_fit_row_bytes(rows + 1, 1, 2) <= 2 * 2**20
    assert grids._window_rows(fit, 7, 1, 1, 2, 1024) == 7
