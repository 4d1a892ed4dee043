"""NadarayaWatsonRegressor against a slow loop oracle and statsmodels; attention, numerics and
integration with scikit-learn's pipelines, searches, metadata routing and pickling."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import sklearn
import torch
from _oracle import COMPACT, PROFILES, nearest_index, nw_predict, nw_weights
from _state import assert_same_state, snapshot
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from statsmodels.nonparametric.kernel_regression import KernelReg

from sklearn_nw import EmptyNeighborhoodWarning, NadarayaWatsonRegressor
from sklearn_nw.kernels import SymmetricBeta

H = np.array([0.45, 0.6])  # big enough that every query below has training points in reach


def make_data(n=30, n_queries=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    Q = rng.uniform(0.1, 0.9, size=(n_queries, 2))
    Y = np.column_stack([np.sin(3.0 * X[:, 0]) + X[:, 1], X[:, 0] * X[:, 1] - 1.0])
    w = rng.uniform(0.5, 2.0, size=n)
    return X, Y, Q, w


# -- the loop oracle -----------------------------------------------------------------------


@pytest.mark.parametrize("kernel", sorted(PROFILES))
def test_matches_oracle_every_kernel(kernel):
    X, Y, Q, w = make_data()
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H).fit(X, Y, sample_weight=w)
    expected = nw_predict(Q, X, Y, H, PROFILES[kernel], sample_weight=w)
    got = reg.predict(Q)
    assert got.shape == (10, 2)
    assert got.dtype == np.float64
    assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tricube", "cosine", "laplacian"])
def test_matches_oracle_single_output_unit_weights(kernel):
    X, Y, Q, _ = make_data(seed=1)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H).fit(X, Y[:, 0])
    got = reg.predict(Q)
    assert got.shape == (10,)
    assert_allclose(got, nw_predict(Q, X, Y[:, 0], H, PROFILES[kernel]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel", sorted(PROFILES))
def test_matches_oracle_on_the_training_points(kernel):
    X, Y, _, w = make_data(seed=1)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H).fit(X, Y, sample_weight=w)
    assert_allclose(
        reg.predict(X), nw_predict(X, X, Y, H, PROFILES[kernel], w), rtol=1e-10, atol=1e-12
    )


def test_kinked_kernel_on_the_training_points_to_full_precision():
    # A query on a training point: the |q|^2 + |x|^2 - 2 q.x expansion alone would leave
    # u ~ sqrt(eps) instead of 0, and a kernel with a kink at 0 would show it.
    X, Y, _, _ = make_data(seed=1)
    reg = NadarayaWatsonRegressor(kernel="exponential", bandwidth=H).fit(X, Y)
    expected = nw_predict(X, X, Y, H, PROFILES["exponential"])
    assert_allclose(reg.predict(X), expected, rtol=1e-10, atol=1e-12)


def test_scalar_bandwidth_is_used_for_every_feature():
    X, Y, Q, w = make_data(seed=2)
    reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, Y, sample_weight=w)
    assert_array_equal(reg.bandwidth_, [0.3, 0.3])
    assert_allclose(reg.predict(Q), nw_predict(Q, X, Y, 0.3, PROFILES["gaussian"], w), rtol=1e-10)


def test_rule_of_thumb_bandwidth_is_used():
    X, Y, Q, w = make_data(seed=3)
    reg = NadarayaWatsonRegressor(kernel="exponential").fit(X, Y, sample_weight=w)
    # Scott's rule by hand: weighted std (ddof=0) times n^(-1/(d + 4)), n = sum of weights.
    mean = (w[:, None] * X).sum(0) / w.sum()
    sigma = np.sqrt((w[:, None] * (X - mean) ** 2).sum(0) / w.sum())
    h = sigma * w.sum() ** (-1.0 / 6.0)
    assert_allclose(reg.bandwidth_, h, rtol=1e-12)
    assert_allclose(reg.predict(Q), nw_predict(Q, X, Y, h, PROFILES["exponential"], w), rtol=1e-10)


@pytest.mark.parametrize("kernel", ["gaussian", "biweight"])
def test_many_small_chunks_match_oracle(kernel):
    # A tiny working memory forces one query row per chunk.
    X, Y, Q, w = make_data(seed=4)
    with sklearn.config_context(working_memory=1e-3):
        reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H)
        got = reg.fit(X, Y, sample_weight=w).predict(Q)
    assert_allclose(got, nw_predict(Q, X, Y, H, PROFILES[kernel], w), rtol=1e-10, atol=1e-12)


# -- statsmodels ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:After 0.17:FutureWarning")  # statsmodels RNG notice
@pytest.mark.parametrize("d, h", [(1, np.array([0.35])), (3, np.array([0.4, 0.7, 1.3]))])
def test_matches_statsmodels_kernelreg(d, h):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    Q = rng.normal(size=(15, d))
    expected = KernelReg(endog=y, exog=X, var_type="c" * d, reg_type="lc", bw=h).fit(Q)[0]
    got = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h).fit(X, y).predict(Q)
    assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


# -- attention -----------------------------------------------------------------------------


def test_return_attention_dense():
    X, Y, Q, w = make_data(seed=6)
    reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=H).fit(X, Y, sample_weight=w)
    y_pred, A = reg.predict(Q, return_attention=True)
    assert isinstance(A, np.ndarray)
    assert A.shape == (10, 30)
    assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12)
    assert_allclose(y_pred, A @ Y, rtol=1e-12, atol=1e-14)
    assert_allclose(A, nw_weights(Q, X, H, PROFILES["gaussian"], w), rtol=1e-10, atol=1e-14)
    assert_array_equal(reg.predict(Q), y_pred)


@pytest.mark.parametrize("kernel", sorted(COMPACT))
def test_return_attention_sparse_for_compact_kernels(kernel):
    X, Y, Q, w = make_data(seed=7)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H).fit(X, Y[:, 1], sample_weight=w)
    y_pred, A = reg.predict(Q, return_attention=True)
    assert sp.issparse(A) and A.format == "csr"
    assert A.shape == (10, 30)
    expected = nw_weights(Q, X, H, PROFILES[kernel], w)
    assert_allclose(A.toarray(), expected, rtol=1e-10, atol=1e-14)
    # Only the points inside the support are stored.
    assert A.nnz == np.count_nonzero(expected)
    assert_allclose(y_pred, A @ Y[:, 1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
def test_attention_weights_dense(kernel):
    X, Y, _, _ = make_data(seed=8)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H).fit(X, Y)
    A = reg.attention_weights_
    assert isinstance(A, np.ndarray)
    assert A.shape == (30, 30)
    assert np.all(np.diag(A) == 0.0)
    assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12)
    expected = nw_weights(X, X, H, PROFILES[kernel], leave_one_out=True)
    assert_allclose(A, expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("kernel", ["epanechnikov", "tophat", "tricube"])
def test_attention_weights_sparse(kernel):
    X, Y, _, _ = make_data(seed=9)
    h = 2.0 * H  # every leave-one-out row keeps points in reach
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, Y)
    A = reg.attention_weights_
    assert sp.issparse(A) and A.format == "csr"
    assert A.shape == (30, 30)
    assert np.all(A.diagonal() == 0.0)
    assert_allclose(np.asarray(A.sum(axis=1)).ravel(), 1.0, rtol=1e-12)
    expected = nw_weights(X, X, h, PROFILES[kernel], leave_one_out=True)
    assert_allclose(A.toarray(), expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_attention_weights_integer_sample_weights(kernel, dense):
    # A point is left out with all its weight and every copy of it (rows 12 and 13 repeat
    # rows 2 and 7). A zero weight point still has a well-defined leave-one-out row (the
    # others' weights).
    X, Y, _, _ = make_data(n=12, seed=10)
    X, Y = np.vstack([X, X[[2, 7]]]), np.concatenate([Y, Y[[2, 7]]])
    w = np.array([1, 0, 2, 3, 1, 0, 1, 4, 1, 2, 1, 1, 1, 2], dtype=float)
    h = 2.0 * H
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, Y, sample_weight=w)
    A = dense(reg.attention_weights_)
    assert np.all(np.isfinite(A))
    expected = nw_weights(X, X, h, PROFILES[kernel], sample_weight=w, leave_one_out=True)
    assert_allclose(A, expected, rtol=1e-10, atol=1e-14)
    assert np.all(np.diag(A) == 0.0)
    assert A[2, 12] == A[12, 2] == A[7, 13] == A[13, 7] == 0.0
    assert np.all(A[:, w == 0] == 0.0)
    # Scaling every weight changes nothing.
    scaled = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, Y, sample_weight=1.5 * w)
    assert_allclose(dense(scaled.attention_weights_), A, rtol=1e-12, atol=1e-15)


def test_attention_weights_equal_explicit_refits():
    X, Y, _, w = make_data(n=15, seed=11)
    w = np.round(w * 2)  # integers 1..4
    reg = NadarayaWatsonRegressor(bandwidth=H).fit(X, Y, sample_weight=w)
    loo = reg.attention_weights_ @ Y
    for i in range(15):
        keep = np.arange(15) != i  # all of the point's weight leaves
        refit = NadarayaWatsonRegressor(bandwidth=H).fit(X[keep], Y[keep], sample_weight=w[keep])
        assert_allclose(loo[i], refit.predict(X[i : i + 1])[0], rtol=1e-10, atol=1e-12)


def test_attention_weights_refused_beyond_working_memory():
    X, Y, _, _ = make_data(seed=12)
    reg = NadarayaWatsonRegressor(bandwidth=H).fit(X, Y)
    with (
        sklearn.config_context(working_memory=1e-3),
        pytest.raises(ValueError, match=r"dense \(30, 30\) matrix.*working_memory") as info,
    ):
        _ = reg.attention_weights_
    message = str(info.value)
    assert "return_attention=True" in message
    assert "config_context(working_memory" in message
    # A compact kernel gives a sparse matrix, computed in chunks, held to the limit by its
    # entries (30 x 30 of them here, 14 KiB).
    compact = NadarayaWatsonRegressor(kernel="biweight", bandwidth=2.0 * H).fit(X, Y)
    with sklearn.config_context(working_memory=0.02):
        A = compact.attention_weights_
    expected = nw_weights(X, X, 2.0 * H, PROFILES["biweight"], leave_one_out=True)
    assert_allclose(A.toarray(), expected, rtol=1e-10, atol=1e-14)


def test_attention_weights_not_available_before_fit():
    reg = NadarayaWatsonRegressor()
    with pytest.raises(NotFittedError):
        _ = reg.attention_weights_
    assert not hasattr(reg, "attention_weights_")


# -- numerics ------------------------------------------------------------------------------


FAR = np.array([[1e6, 1e6], [-1e6, 3e5], [2e5, -7e5]])


def test_far_query_gets_nearest_target_gaussian():
    rng = np.random.default_rng(13)
    X = rng.normal(size=(20, 2))
    y = rng.normal(size=20)
    reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=0.5).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y_pred, A = reg.predict(FAR, return_attention=True)
    nearest = [nearest_index(q, X) for q in FAR]
    assert np.all(np.isfinite(y_pred))
    assert_allclose(y_pred, y[nearest], rtol=1e-12)
    assert_allclose(A, np.eye(20)[nearest], atol=1e-12)


def test_far_query_exponential_kernel_is_finite_and_exact():
    # exp(-u) underflows for every key, but the weight ratios exp(u_k - u_j) do not vanish
    # (they tend to a softmax of the projections on the query's direction): the answer is
    # not the nearest neighbor but the max-shifted ratios, computed here directly.
    rng = np.random.default_rng(13)
    X = rng.normal(size=(20, 2))
    y = rng.normal(size=20)
    reg = NadarayaWatsonRegressor(kernel="exponential", bandwidth=0.5).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y_pred = reg.predict(FAR)
    for q, got in zip(FAR, y_pred):
        u = np.sqrt((((q - X) / 0.5) ** 2).sum(axis=1))
        a = np.exp(-(u - u.min()))
        assert got == pytest.approx((a / a.sum()) @ y, rel=1e-8)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential", "epanechnikov", "tophat"])
def test_tiny_bandwidth_is_nearest_neighbor(kernel):
    rng = np.random.default_rng(14)
    X = rng.normal(size=(25, 2))
    y = rng.normal(size=25)
    Q = rng.normal(size=(12, 2))
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=1e-12).fit(X, y)
    if kernel in COMPACT:
        with pytest.warns(EmptyNeighborhoodWarning, match="12 of 12 queries"):
            y_pred = reg.predict(Q)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y_pred = reg.predict(Q)
    assert_allclose(y_pred, y[[nearest_index(q, X) for q in Q]], rtol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "exponential", "tricube"])
def test_large_offset_gives_same_predictions(kernel):
    rng = np.random.default_rng(15)
    X = rng.normal(size=(40, 2))
    y = 2.0 + np.sin(X[:, 0])
    Q = rng.uniform(-1.0, 1.0, size=(10, 2))
    h = np.array([1.2, 1.5])
    centered = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, y).predict(Q)
    offset = np.array([1e5, -1e5])
    shifted = (
        NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X + offset, y).predict(Q + offset)
    )
    assert_allclose(shifted, centered, rtol=1e-9)
    assert_allclose(centered, nw_predict(Q, X, y, h, PROFILES[kernel]), rtol=1e-10)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "exponential", "cosine"])
def test_float32_close_to_float64(kernel):
    X, Y, Q, w = make_data(seed=16)
    Y = Y + 3.0
    reg64 = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H).fit(X, Y, sample_weight=w)
    reg32 = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H).fit(
        X.astype(np.float32), Y, sample_weight=w
    )
    assert reg32.X_fit_.dtype == np.float32
    got, A = reg32.predict(Q.astype(np.float32), return_attention=True)
    assert got.dtype == np.float64  # the targets' dtype
    assert A.dtype == np.float32
    assert_allclose(got, reg64.predict(Q), rtol=1e-4)
    # float64 queries against a float32 fit are computed in float32 too.
    _, A = reg32.predict(Q, return_attention=True)
    assert A.dtype == np.float32


def test_int_input_is_computed_in_float64():
    rng = np.random.default_rng(17)
    X = rng.integers(0, 10, size=(30, 2))
    y = rng.normal(size=30)
    Q = rng.integers(0, 10, size=(8, 2))
    reg = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=4.0).fit(X, y)
    assert reg.X_fit_.dtype == np.float64
    got = reg.predict(Q)
    assert got.dtype == np.float64
    expected = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=4.0).fit(
        X.astype(np.float64), y).predict(Q.astype(np.float64))
    assert_array_equal(got, expected)
    assert_allclose(got, nw_predict(Q, X, y, 4.0, PROFILES["epanechnikov"]), rtol=1e-10)


@pytest.mark.parametrize("kernel", ["epanechnikov", "tophat", "cosine"])
def test_query_outside_every_support_gets_nearest_target(kernel):
    rng = np.random.default_rng(18)
    X = rng.uniform(size=(20, 2))
    y = rng.normal(size=20)
    Q = np.array([[0.5, 0.5], [5.0, -3.0], [0.4, 0.6]])
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.5).fit(X, y)
    with pytest.warns(EmptyNeighborhoodWarning, match="1 of 3 queries.*nearest training point"):
        y_pred, A = reg.predict(Q, return_attention=True)
    assert np.all(np.isfinite(y_pred))
    assert y_pred[1] == pytest.approx(y[nearest_index(Q[1], X)], rel=1e-12)
    assert_allclose(A.toarray()[1], np.eye(20)[nearest_index(Q[1], X)])
    inside = Q[[0, 2]]
    assert_allclose(y_pred[[0, 2]], nw_predict(inside, X, y, 0.5, PROFILES[kernel]), rtol=1e-10)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential", "epanechnikov"])
def test_tiny_bandwidth_on_the_training_points_returns_their_targets(kernel):
    # Each query is its own nearest training point: |q|^2 + |x|^2 - 2 q.x is then pure
    # rounding noise of order eps (|x| / h)^2 ~ 1e8, which must not overflow into NaN.
    rng = np.random.default_rng(30)
    X = rng.normal(size=(20, 2))
    y = rng.normal(size=20)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=1e-12).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_allclose(reg.predict(X), y, rtol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "exponential"])
def test_far_zero_weight_rows_cost_no_precision(kernel):
    # Zero weight means the row is absent, however far away it lies.
    X, Y, Q, w = make_data(seed=31)
    far = np.vstack([X, [[1e15, -1e15], [3e12, 0.0]]])
    Y_far = np.vstack([Y, [[0.0, 0.0], [1.0, 1.0]]])
    w_far = np.append(w, [0.0, 0.0])
    h = np.array([0.1, 0.15])
    got = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(far, Y_far, sample_weight=w_far)
    expected = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, Y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        assert_allclose(got.predict(Q), expected.predict(Q), rtol=1e-9)


def test_zero_weight_points_are_ignored():
    X, Y, Q, w = make_data(seed=19)
    w[::3] = 0.0
    keep = w > 0
    got = NadarayaWatsonRegressor(kernel="triweight", bandwidth=H).fit(
        X, Y, sample_weight=w).predict(Q)
    expected = NadarayaWatsonRegressor(kernel="triweight", bandwidth=H).fit(
        X[keep], Y[keep], sample_weight=w[keep]).predict(Q)
    assert_allclose(got, expected, rtol=1e-12)
    assert_allclose(got, nw_predict(Q, X, Y, H, PROFILES["triweight"], w), rtol=1e-10)


# -- scikit-learn integration --------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn_nw.EmptyNeighborhoodWarning")
def test_grid_search_in_pipeline_picks_the_best_grid_point():
    rng = np.random.default_rng(20)
    X = rng.normal(size=(60, 2)) * [1.0, 10.0]
    y = np.sin(X[:, 0]) + 0.05 * X[:, 1] + 0.1 * rng.normal(size=60)
    bandwidths = [0.3, 1.0, "scott"]
    kernels = ["gaussian", "epanechnikov"]
    cv = KFold(n_splits=4, shuffle=True, random_state=0)
    scores = {}
    for bandwidth in bandwidths:
        for kernel in kernels:
            pipe = make_pipeline(
                StandardScaler(), NadarayaWatsonRegressor(kernel=kernel, bandwidth=bandwidth)
            )
            scores[bandwidth, kernel] = cross_val_score(pipe, X, y, cv=cv).mean()
    best = max(scores, key=scores.get)
    ranked = sorted(scores.values())
    assert ranked[-1] - ranked[-2] > 1e-6  # no near-tie to make the comparison fragile

    search = GridSearchCV(
        make_pipeline(StandardScaler(), NadarayaWatsonRegressor()),
        {"nadarayawatsonregressor__bandwidth": bandwidths,
         "nadarayawatsonregressor__kernel": kernels},
        cv=cv,
    ).fit(X, y)
    assert search.best_params_ == {"nadarayawatsonregressor__bandwidth": best[0],
                                   "nadarayawatsonregressor__kernel": best[1]}
    assert search.best_score_ == pytest.approx(scores[best], rel=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn_nw.EmptyNeighborhoodWarning")
def test_grid_search_over_kernel_parameter():
    rng = np.random.default_rng(21)
    X = rng.normal(size=(50, 2))
    y = np.sin(2.0 * X[:, 0]) + 0.1 * rng.normal(size=50)
    cv = KFold(n_splits=5, shuffle=True, random_state=1)
    scores = {
        power: cross_val_score(
            NadarayaWatsonRegressor(kernel=SymmetricBeta(power=power), bandwidth=1.5), X, y, cv=cv
        ).mean()
        for power in [1, 2, 3]
    }
    search = GridSearchCV(
        NadarayaWatsonRegressor(bandwidth=1.5),
        {"kernel": [SymmetricBeta()], "kernel__power": [1, 2, 3]},
        cv=cv,
    ).fit(X, y)
    assert list(search.cv_results_["param_kernel__power"]) == [1, 2, 3]
    assert_allclose(
        search.cv_results_["mean_test_score"], [scores[1], scores[2], scores[3]], rtol=1e-12
    )
    best = max(scores, key=scores.get)
    assert search.best_params_["kernel__power"] == best
    assert search.best_estimator_.kernel_.power == best
    assert isinstance(search.best_estimator_.kernel_, SymmetricBeta)


def test_dataframe_sets_feature_names():
    X, Y, Q, _ = make_data(seed=22)
    frame = pd.DataFrame(X, columns=["height", "width"])
    reg = NadarayaWatsonRegressor(bandwidth=H).fit(frame, Y[:, 0])
    assert_array_equal(reg.feature_names_in_, ["height", "width"])
    assert reg.n_features_in_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = reg.predict(pd.DataFrame(Q, columns=["height", "width"]))
    assert_allclose(got, nw_predict(Q, X, Y[:, 0], H, PROFILES["gaussian"]), rtol=1e-10)
    assert not hasattr(NadarayaWatsonRegressor().fit(X, Y), "feature_names_in_")


def _scaled_weighted_fit(X, y, Q, w):
    scaler = StandardScaler().fit(X)  # the weights go to the regressor only
    reg = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=1.5)
    return reg.fit(scaler.transform(X), y, sample_weight=w).predict(scaler.transform(Q))


def test_sample_weight_through_pipeline():
    X, Y, Q, w = make_data(seed=23)
    expected = _scaled_weighted_fit(X, Y, Q, w)
    pipe = make_pipeline(
        StandardScaler(), NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=1.5)
    )
    got = pipe.fit(X, Y, nadarayawatsonregressor__sample_weight=w).predict(Q)
    assert_allclose(got, expected, rtol=1e-12)
    assert not np.allclose(pipe.fit(X, Y).predict(Q), expected, rtol=1e-6)  # weights matter


def test_sample_weight_through_metadata_routing():
    X, Y, Q, w = make_data(seed=24)
    expected = _scaled_weighted_fit(X, Y, Q, w)
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = make_pipeline(
            StandardScaler().set_fit_request(sample_weight=False),
            NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=1.5).set_fit_request(
                sample_weight=True
            ),
        )
        got = pipe.fit(X, Y, sample_weight=w).predict(Q)
    assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "tricube", SymmetricBeta(power=2.5)])
def test_pickle_round_trip(kernel, dense):
    X, Y, Q, w = make_data(seed=25)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H).fit(X, Y, sample_weight=w)
    loaded = pickle.loads(pickle.dumps(reg))
    assert_array_equal(loaded.predict(Q), reg.predict(Q))
    assert_array_equal(dense(loaded.attention_weights_), dense(reg.attention_weights_))
    assert_array_equal(loaded.bandwidth_, reg.bandwidth_)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_user_arrays_not_modified(dtype):
    X, Y, Q, w = make_data(seed=26)
    X, Q = X.astype(dtype), Q.astype(dtype)
    copies = [a.copy() for a in (X, Y, Q, w)]
    reg = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=H).fit(X, Y, sample_weight=w)
    reg.predict(Q)
    reg.predict(Q, return_attention=True)
    _ = reg.attention_weights_
    for original, kept in zip((X, Y, Q, w), copies):
        assert_array_equal(original, kept)
        assert original.dtype == kept.dtype


def test_fitted_model_does_not_share_user_arrays():
    # Changing the user's arrays after fit must not change the model.
    X, Y, Q, w = make_data(seed=27)
    reg = NadarayaWatsonRegressor(bandwidth=H).fit(X, Y, sample_weight=w)
    before = reg.predict(Q)
    X[:] = 0.0
    Y[:] = 0.0
    w[:] = 1.0
    assert_array_equal(reg.predict(Q), before)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_predict_does_not_change_the_estimator(kernel):
    X, Y, Q, w = make_data(seed=28)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H).fit(X, Y, sample_weight=w)
    shallow, deep = snapshot(reg)
    reg.predict(Q)
    reg.predict(Q, return_attention=True)
    reg.score(Q, np.column_stack([Q[:, 0], Q[:, 1]]))
    _ = reg.attention_weights_
    assert_same_state(reg, shallow, deep)


def test_constructor_parameters_are_not_overwritten():
    X, Y, _, _ = make_data(seed=29)
    h = [0.5, 0.7]
    reg = NadarayaWatsonRegressor(kernel="quartic", bandwidth=h).fit(X, Y)
    assert reg.kernel == "quartic"
    assert reg.bandwidth is h and h == [0.5, 0.7]
    assert reg.device == "cpu"
    assert reg.device_ == "cpu"
    assert reg.bandwidth_.dtype == np.float64


# -- devices -------------------------------------------------------------------------------


def test_device_auto_resolves_to_an_available_device():
    X, Y, Q, w = make_data(seed=32)
    reg = NadarayaWatsonRegressor(bandwidth=H, device="auto").fit(X, Y, sample_weight=w)
    expected = (
        "cuda" if torch.cuda.is_available()
        else "mps" if torch.backends.mps.is_available()
        else "cpu"
    )
    assert reg.device_.split(":")[0] == expected
    assert reg.device == "auto"
    assert_allclose(reg.predict(Q), nw_predict(Q, X, Y, H, PROFILES["gaussian"], w), rtol=1e-10)


@pytest.mark.skipif(torch.cuda.is_available(), reason="simulates a model fitted on a GPU machine")
def test_model_fitted_on_a_missing_device_computes_on_cpu():
    X, Y, Q, w = make_data(seed=33)
    reg = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=H).fit(X, Y, sample_weight=w)
    expected = reg.predict(Q)
    state = reg.__getstate__()
    state["device_"] = "cuda"  # as pickled on a machine with a GPU
    loaded = NadarayaWatsonRegressor()
    loaded.__setstate__(state)
    with pytest.warns(UserWarning, match="fitted on device 'cuda', which is not available here"):
        got = loaded.predict(Q)
    assert_array_equal(got, expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "exponential"])
def test_cuda_matches_oracle(kernel, dense):
    X, Y, Q, w = make_data(seed=34)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=H, device="cuda").fit(
        X, Y, sample_weight=w
    )
    assert isinstance(reg.X_fit_, np.ndarray)
    y_pred, A = reg.predict(Q, return_attention=True)
    assert isinstance(y_pred, np.ndarray)
    assert_allclose(y_pred, nw_predict(Q, X, Y, H, PROFILES[kernel], w), rtol=1e-10, atol=1e-12)
    assert_allclose(dense(A), nw_weights(Q, X, H, PROFILES[kernel], w), rtol=1e-10, atol=1e-14)


# -- extremes a careless user reaches (issue: fifteen defects) ------------------------------


def _nearest_targets(Q, X, y):
    d2 = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return y[d2.argmin(1)]


@pytest.mark.parametrize("h", [1e-160, 1e-300, 5e-324])
@pytest.mark.parametrize("params", [
    {}, {"kernel": "exponential"}, {"compute": "compiled"}, {"n_neighbors": 3},
    {"kernel": "epanechnikov"}, {"kernel": "epanechnikov", "algorithm": "kd_tree"},
    {"kernel": "tophat", "n_neighbors": 5},
])
def test_tiny_bandwidths_reach_the_nearest_neighbor_limit(h, params):
    rng = np.random.default_rng(40)
    X, y, Q = rng.uniform(size=(40, 2)), rng.normal(size=40), rng.uniform(size=(7, 2))
    reg = NadarayaWatsonRegressor(bandwidth=h, **params).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        got = reg.predict(Q)
    assert_allclose(got, _nearest_targets(Q, X, y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("params", [{}, {"kernel": "epanechnikov"}, {"n_neighbors": 4}])
def test_tiny_bandwidths_classifier_takes_the_nearest_label(params):
    from sklearn_nw import NadarayaWatsonClassifier

    rng = np.random.default_rng(44)
    X, Q = rng.uniform(size=(40, 2)), rng.uniform(size=(7, 2))
    labels = rng.integers(0, 3, 40)
    clf = NadarayaWatsonClassifier(bandwidth=1e-300, **params).fit(X, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        proba = clf.predict_proba(Q)
    assert_array_equal(proba, np.eye(3)[_nearest_targets(Q, X, labels)])


def test_tiny_bandwidths_keep_ties_and_leave_one_out():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [3.0, 3.0]])
    y = np.array([0.0, 2.0, 6.0, 10.0])
    reg = NadarayaWatsonRegressor(bandwidth=1e-200).fit(X, y)
    # Every weight off a training point underflows: the documented warning, and the limit.
    with pytest.warns(EmptyNeighborhoodWarning, match="^1 of 2 queries .* underflow"):
        assert_allclose(reg.predict([[0.0, 0.0], [0.0, 0.1]]), [0.0, 0.0])
    # The origin is equally near [1, 0] and [-1, 0]: the limit averages them.
    with pytest.warns(EmptyNeighborhoodWarning, match="^4 of 4 queries .* underflow"):
        assert_allclose(reg.attention_weights_ @ y, [4.0, 0.0, 0.0, 2.0])


def test_float32_inputs_with_extreme_target_scales():
    rng = np.random.default_rng(41)
    X = rng.uniform(size=(50, 2))
    y = np.sin(4 * X[:, 0]) + 2.0
    Q = rng.uniform(size=(9, 2))
    reference = NadarayaWatsonRegressor(bandwidth=0.2).fit(X, y).predict(Q)
    for unit in (1e-50, 1e-200, 1e39, 1e300):
        reg = NadarayaWatsonRegressor(bandwidth=0.2).fit(X.astype(np.float32), unit * y)
        got = reg.predict(Q.astype(np.float32))
        assert got.dtype == np.float64
        assert_allclose(got / unit, reference, rtol=1e-5)
    # Far from its spread, a target's offset costs float32 nothing either.
    reg = NadarayaWatsonRegressor(bandwidth=0.2).fit(X.astype(np.float32), 1e9 + y)
    assert_allclose(reg.predict(Q) - 1e9, reference, rtol=1e-5)


def test_predict_refuses_a_dense_attention_beyond_working_memory():
    X, Y, Q, _ = make_data(seed=42)
    reg = NadarayaWatsonRegressor(bandwidth=H).fit(X, Y)
    with (
        sklearn.config_context(working_memory=1e-4),
        pytest.raises(
            ValueError, match=r"return_attention=True\) would be a dense \(10, 30\) matrix"
        ),
    ):
        reg.predict(Q, return_attention=True)
    with sklearn.config_context(working_memory=1e-4):
        reg.predict(Q)  # no attention asked for: computed in chunks as always
        compact = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=H).fit(X, Y)
        _, A = compact.predict(Q, return_attention=True)  # sparse: no guard
    assert sp.issparse(A)


def test_compact_attention_weights_come_from_the_neighbor_search(monkeypatch):
    rng = np.random.default_rng(43)
    X = rng.uniform(size=(20000, 2))
    y = X[:, 0]
    reg = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=0.01).fit(X, y)
    # No dense (chunk, n) block: the dense engine is never called.
    from sklearn_nw import _keys

    def no_dense(*args, **kwargs):
        raise AssertionError("attention_weights_ of a compact kernel went to the dense engine")

    monkeypatch.setattr(_keys, "attention_pool", no_dense)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        A = reg.attention_weights_
    assert sp.issparse(A) and A.shape == (20000, 20000)
    assert A.nnz < 20000 * 40
    rows = [0, 17, 999]
    expected = nw_weights(X[rows], X, np.array([0.01, 0.01]), PROFILES["epanechnikov"])
    own = np.zeros_like(expected)
    own[np.arange(3), rows] = 1.0  # the oracle's rows, with each point left out
    expected = expected * (1 - own)
    expected /= expected.sum(1, keepdims=True)
    assert_allclose(A[rows].toarray(), expected, rtol=1e-10, atol=1e-14)
    # A wide support would hold n^2 entries: refused before they are stored.
    wide = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=5.0).fit(X[:3000], y[:3000])
    with (
        sklearn.config_context(working_memory=16),
        pytest.raises(ValueError, match="attention_weights_ would store more than"),
    ):
        _ = wide.attention_weights_


def test_keys_tied_for_nearest_stay_tied_under_weights_or_repeated_rows():
    # A query outside every support, exactly halfway between two keys: both are its
    # nearest and it gets their mean, however the keys' center rounds (repeated rows move
    # it; hypothesis found this in test_properties).
    X = np.array([[0.0], [0.0], [-2.25], [0.0], [-1.0]])
    y = np.array([1.0, 1.0, 0.0, 1.0, 1.0])
    w = np.array([2, 1, 1, 1, 1])
    model = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth="scott")
    with pytest.warns(EmptyNeighborhoodWarning):
        weighted = model.fit(X, y, sample_weight=w).predict([[-1.625]])
    with pytest.warns(EmptyNeighborhoodWarning):
        repeated = model.fit(np.repeat(X, w, axis=0), np.repeat(y, w)).predict([[-1.625]])
    assert weighted[0] == repeated[0] == 0.5
