"""Standard errors (``predict(X, return_std=True)``) and jackknife+ intervals
(``predict_interval``) of the regressor, against slow loops written here: the weights of
each fit by hand, nprobust's target variances by their definitions, and the jackknife+
by n explicit refits."""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
import sklearn
from sklearn.model_selection import KFold
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_nw import (
    AdaptiveBandwidth,
    EmptyNeighborhoodWarning,
    LocalFitWarning,
    NadarayaWatsonClassifier,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)

VARIANCES = ("nn", "hc0", "hc1", "hc2", "hc3")


def _data(n=40, d=1, outputs=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(4 * X.sum(1))[:, None] + 0.3 * rng.normal(size=(n, outputs))
    Q = rng.uniform(-0.1, 1.1, (7, d))
    return X, (y[:, 0] if outputs == 1 else y), Q, rng.uniform(0.2, 3.0, n)


# -- the oracle: every weight and every variance by its definition, one point at a time -----


def _kernel(u, kernel):
    if kernel == "gaussian":
        return math.exp(-0.5 * u * u)
    return max(0.0, 0.75 * (1 - u * u))  # epanechnikov


def _weights(q, X, h, w, degree, kernel="gaussian", k=None):
    """The equivalent kernel l(q) (n,) of the fit at q: the normalized kernel weights
    (times the sample weights) for degree 0, else e1' (Z'AZ)^-1 Z'A of the weighted local
    polynomial."""
    n, d = X.shape
    dist = [math.sqrt(sum(((q[j] - X[i, j]) / h[j]) ** 2 for j in range(d))) for i in range(n)]
    a = np.array([w[i] * _kernel(dist[i], kernel) for i in range(n)])
    if k is not None:  # only the k nearest
        far = np.argsort(dist, kind="stable")[k:]
        a[far] = 0.0
    a = a / a.sum()
    if degree == 0:
        return a
    Z = np.column_stack([np.ones(n), X - q])
    M = Z.T @ (a[:, None] * Z)
    return np.linalg.solve(M, np.eye(d + 1)[0]) @ (Z * a[:, None]).T


def _oracle_std(X, y, Q, h, w, degree, variance, kernel="gaussian", J=3, k=None):
    n, d = X.shape
    y = y.reshape(n, -1)
    L = np.array([_weights(X[i], X, h, w, degree, kernel, k) for i in range(n)])
    e = y - L @ y
    if variance == "nn":
        s2 = np.empty_like(y)
        for i in range(n):
            dist = np.array([math.sqrt(sum(((X[m, j] - X[i, j]) / h[j]) ** 2
                                           for j in range(d))) for m in range(n)])
            others = [m for m in range(n) if m != i]
            reach = sorted(dist[others])[J - 1]
            near = [m for m in others if dist[m] <= reach]
            s2[i] = len(near) / (len(near) + 1) * (y[i] - y[near].mean(0)) ** 2
    else:
        p = 1 if degree == 0 else 1 + d
        lev = np.diag(L)[:, None]
        s2 = {"hc0": e**2, "hc1": n / (n - p) * e**2, "hc2": e**2 / (1 - lev),
              "hc3": e**2 / (1 - lev) ** 2}[variance]
    ell = np.array([_weights(q, X, h, w, degree, kernel, k) for q in Q])
    return np.sqrt(ell**2 @ s2)


@pytest.mark.parametrize("variance", VARIANCES)
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("d, outputs", [(1, 1), (2, 1), (2, 2)])
def test_std_equals_the_oracle(variance, degree, weighted, d, outputs):
    X, y, Q, w = _data(d=d, outputs=outputs)
    w = w if weighted else np.ones(len(X))
    h = np.full(d, 0.3)
    model = NadarayaWatsonRegressor(bandwidth=0.3, degree=degree, residual_variance=variance)
    model.fit(X, y, sample_weight=w if weighted else None)
    y_pred, y_std = model.predict(Q, return_std=True)
    expected = _oracle_std(X, y, Q, h, w, degree, variance)
    assert y_std.shape == y_pred.shape == np.shape(y[:7])
    np.testing.assert_allclose(y_std, expected.reshape(y_std.shape), rtol=1e-9)
    np.testing.assert_allclose(y_pred, model.predict(Q), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "cell_list"])
@pytest.mark.parametrize("variance", ["hc2", "nn"])
def test_std_on_a_compact_kernels_routes(algorithm, variance):
    X, y, Q, w = _data(n=60, d=2)
    model = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=0.4, algorithm=algorithm,
                                    residual_variance=variance).fit(X, y, sample_weight=w)
    assert model.route_ == {"brute": "dense", "kd_tree": "radius",
                            "cell_list": "cell_list"}[algorithm]
    expected = _oracle_std(X, y, Q[1:6], np.full(2, 0.4), w, 0, variance, "epanechnikov")
    np.testing.assert_allclose(model.predict(Q[1:6], return_std=True)[1], expected[:, 0],
                               rtol=1e-9)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "epanechnikov"])
@pytest.mark.parametrize("variance", ["nn", "hc2"])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-4)])
def test_dense_std_from_sums_equals_its_attentions(kernel, variance, dtype, rtol):
    # Without return_attention the dense route sums the squared weights without an
    # attention matrix (k**2 under the weights w**2); with it, the standard error is
    # assembled from the attention. A zero-weight row, two outputs, and for the compact
    # kernel a query beyond every support (the nearest-key fallback, whose weights are
    # not the kernel's: that call takes the attention path).
    X, y, Q, w = _data(n=80, d=2, outputs=2)
    w[:5] = 0.0
    Q = np.vstack([Q, [[3.0, 3.0]]])
    model = NadarayaWatsonRegressor(kernel, bandwidth=0.3, residual_variance=variance)
    model.fit(X.astype(dtype), y, sample_weight=w)
    assert model.route_ == "dense"
    keys, ones = model.key_set_, np.ones((80, 2))
    assert keys.pool_with_variance(Q[:-1].astype(dtype), ones) is not None  # the sums
    assert (keys.pool_with_variance(Q.astype(dtype), ones) is None) == (kernel == "epanechnikov")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        y_pred, y_std = model.predict(Q.astype(dtype), return_std=True)
        pred_att, std_att, _ = model.predict(Q.astype(dtype), return_std=True,
                                             return_attention=True)
    np.testing.assert_allclose(y_std, std_att, rtol=rtol)
    np.testing.assert_allclose(y_pred, pred_att, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("n, d, bandwidth", [(80, 2, 0.3), (3000, 1, 0.9)])
@pytest.mark.parametrize("variance", ["nn", "hc2"])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-4)])
def test_cell_list_std_from_sums_equals_its_attentions(n, d, bandwidth, variance, dtype,
                                                       rtol):
    # The cell list sums the squared weights beside the values (k**2 under the weights
    # w**2), each query over its own candidates (few) or blocks of them (thousands, the
    # wide bandwidth); a query beyond every support takes its nearest keys' attention.
    # With return_attention the standard error is assembled from the attention. Rows of
    # zero weight, two outputs.
    X, y, Q, w = _data(n=n, d=d, outputs=2)
    w[:5] = 0.0
    Q = np.vstack([Q, np.full((1, d), 5.0)])
    model = NadarayaWatsonRegressor("epanechnikov", bandwidth=bandwidth,
                                    algorithm="cell_list", residual_variance=variance)
    model.fit(X.astype(dtype), y, sample_weight=w)
    assert model.route_ == "cell_list"
    assert model.key_set_.pool_with_variance(Q.astype(dtype), np.ones((n, 2))) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        y_pred, y_std = model.predict(Q.astype(dtype), return_std=True)
        pred_att, std_att, _ = model.predict(Q.astype(dtype), return_std=True,
                                             return_attention=True)
    assert np.all(y_std > 0)
    np.testing.assert_allclose(y_std, std_att, rtol=rtol)
    np.testing.assert_allclose(y_pred, pred_att, rtol=rtol, atol=1e-12)
    if dtype == np.float32 and variance == "hc2":  # squares of 1e30 overflow float32
        model.fit(X.astype(dtype), y * 1e30, sample_weight=w)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            y_std = model.predict(Q.astype(dtype), return_std=True)[1]
            std_att = model.predict(Q.astype(dtype), return_std=True,
                                    return_attention=True)[1]
        assert np.all(np.isfinite(y_std))
        np.testing.assert_allclose(y_std, std_att, rtol=rtol)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 0.0), (np.float32, 1e-6)])
def test_cell_list_in_sample_sums_equal_its_attention(dtype, rtol):
    # The in-sample fits and each row's weight in its own (the hc variances' leverages,
    # and the fits without each row) from the cell list's sums with each point's total
    # weight: the predictions at the training inputs and the attention's diagonal.
    # Repeated inputs, rows of zero weight, one of them beyond every key's reach.
    X, y, _, w = _data(n=300, d=2)
    X[:10] = X[10:20]
    w[:3] = 0.0
    X[0] = 5.0
    model = NadarayaWatsonRegressor("tricube", bandwidth=0.15, algorithm="cell_list")
    model.fit(X.astype(dtype), y, sample_weight=w)
    fitted, leverage = model.key_set_.in_sample_with_leverage()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        y_pred, attention = model.predict(X.astype(dtype), return_attention=True)
    np.testing.assert_array_equal(model._outputs(fitted), y_pred)
    np.testing.assert_allclose(leverage, attention.diagonal(), rtol=rtol, atol=0)
    assert leverage[0] == 0.0 and np.all(leverage[w > 0] > 0)


def test_dense_std_from_sums_of_float32_with_huge_targets():
    # The squared targets of 1e30 overflow float32: the sums take the variances relative
    # to their largest.
    X, y, Q, _ = _data(n=80, d=2)
    model = NadarayaWatsonRegressor(bandwidth=0.3, residual_variance="hc2")
    model.fit(X.astype(np.float32), y * 1e30)
    y_std = model.predict(Q.astype(np.float32), return_std=True)[1]
    std_att = model.predict(Q.astype(np.float32), return_std=True, return_attention=True)[1]
    assert np.all(np.isfinite(y_std))
    np.testing.assert_allclose(y_std, std_att, rtol=1e-4)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("variance", ["nn", "hc2", "hc3"])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-9), (np.float32, 1e-3)])
def test_local_std_from_moments_equals_its_equivalent_kernels(degree, variance, dtype,
                                                              rtol):
    # Without return_attention a local polynomial's standard error is c^T G c from the
    # moments of the squared attention (no equivalent kernel formed), and hc's leverages
    # a_ii c_0; with it, from the kernel. Zero-weight rows, two outputs, a query far
    # beyond the keys (its fit centered at the keys' mean, from its kernel) and, in one
    # feature, a query whose design is singular (its weight on one key: the
    # Nadaraya-Watson value and variance).
    X, y, Q, w = _data(n=80, d=2, outputs=2)
    w[:5] = 0.0
    Q = np.vstack([Q, [[6.0, -5.0]]])
    model = NadarayaWatsonRegressor(bandwidth=0.3, degree=degree, residual_variance=variance)
    model.fit(X.astype(dtype), y, sample_weight=w)
    assert model.route_ == "dense"
    assert model.key_set_.pool_with_variance(Q.astype(dtype), np.ones((80, 2))) is not None
    y_pred, y_std = model.predict(Q.astype(dtype), return_std=True)
    pred_att, std_att, _ = model.predict(Q.astype(dtype), return_std=True,
                                         return_attention=True)
    np.testing.assert_allclose(y_std, std_att, rtol=rtol)
    np.testing.assert_allclose(y_pred, pred_att, rtol=rtol, atol=1e-9)

    X1 = np.array([[0.0], [0.1], [0.2], [5.0], [5.1]])
    model = NadarayaWatsonRegressor(  # hc2, hc3 divide by 1 - L_ii = 0 here
        bandwidth=0.05, degree=degree, residual_variance=variance if variance == "nn" else "hc0",
    ).fit(X1, [0, 1, 0, 2, 3])
    n_singular = f"{degree} of 3 queries"  # [2.5] (and [5.05] for 3 terms on 2 keys)
    with pytest.warns(LocalFitWarning, match=n_singular):
        y_pred, y_std = model.predict([[0.1], [2.5], [5.05]], return_std=True)
    with pytest.warns(LocalFitWarning, match=n_singular):
        pred_att, std_att, _ = model.predict([[0.1], [2.5], [5.05]], return_std=True,
                                             return_attention=True)
    np.testing.assert_allclose(y_std, std_att, rtol=1e-9)
    np.testing.assert_allclose(y_pred, pred_att, rtol=1e-9)


def test_bounded_local_std_takes_the_equivalent_kernel():
    # A bounded fit's kernel depends on the values: no moments path, the same answer.
    X, y, Q, _ = _data(n=60, d=2)
    model = NadarayaWatsonRegressor(bandwidth=0.3, degree=1, bounded=True).fit(X, y)
    assert model.key_set_.pool_with_variance(Q, np.ones((60, 1))) is None
    assert model.key_set_.in_sample_with_leverage() is None
    assert np.all(np.isfinite(model.predict(Q, return_std=True)[1]))


@pytest.mark.parametrize("J", [1, 3, 6])
def test_nn_variance_counts_every_tie_and_repeated_input(J):
    # On a grid, rows share inputs and many others lie at the J-th distance: all of them
    # are neighbors (nprobust's rule), as the oracle counts them one pair at a time.
    rng = np.random.default_rng(1)
    X = rng.integers(0, 4, (60, 2)).astype(float)
    y = np.sin(X.sum(1)) + 0.3 * rng.normal(size=60)
    Q = rng.uniform(0, 3, (7, 2))
    w = np.ones(60)
    model = NadarayaWatsonRegressor(bandwidth=0.7, residual_variance="nn",
                                    residual_neighbors=J).fit(X, y)
    expected = _oracle_std(X, y, Q, np.full(2, 0.7), w, 0, "nn", J=J)
    np.testing.assert_allclose(model.predict(Q, return_std=True)[1], expected[:, 0],
                               rtol=1e-9)


def test_std_on_the_k_nearest_route():
    X, y, Q, w = _data(n=50, d=2)
    model = NadarayaWatsonRegressor(bandwidth=0.3, n_neighbors=8,
                                    residual_variance="hc3").fit(X, y)
    assert model.route_ == "k_nearest"
    expected = _oracle_std(X, y, Q, np.full(2, 0.3), np.ones(50), 0, "hc3", k=8)
    np.testing.assert_allclose(model.predict(Q, return_std=True)[1], expected[:, 0],
                               rtol=1e-9)


@pytest.mark.parametrize("kind", ["balloon", "sample_point"])
@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("variance", ["hc2", "nn"])
def test_std_with_an_adaptive_bandwidth_is_its_attentions(kind, degree, variance):
    # The adaptive route's attention is tested elsewhere; here the standard error is
    # assembled from it by hand: in-sample residuals and self-weights (hc2) or the
    # nearest others' targets (nn), then sum l^2 s^2. Degree 0 sums each chunk's
    # attention on the route (no attention matrix); chunks of a few rows, a row of
    # weight 0 (no variance, in no fit) and two features must not change it.
    d = 2 if degree == 0 else 1
    X, y, Q, w = _data(n=50, d=d)
    w[3] = 0.0
    model = NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(kind, n_neighbors=10),
                                    degree=degree, residual_variance=variance)
    model.fit(X, y, sample_weight=w)
    fitted, L = model.predict(X, return_attention=True)
    if variance == "hc2":
        s2 = (y - fitted) ** 2 / (1 - np.diag(L))
    else:  # in the kernel's metric: the inputs over the bandwidth's scale
        u = X / model.bandwidth_
        dist = np.sqrt(((u[:, None] - u[None]) ** 2).sum(-1))
        dist[:, w == 0] = np.inf
        np.fill_diagonal(dist, np.inf)
        reach = np.sort(dist, 1)[:, 2]
        near = dist <= reach[:, None]
        count = near.sum(1)
        s2 = count / (count + 1) * (y - (near @ y) / count) ** 2
    s2[w == 0] = 0.0
    y_pred, A = model.predict(Q, return_attention=True)
    expected = np.sqrt(A**2 @ s2)
    for memory in (None, 0.002):
        with sklearn.config_context(working_memory=memory or 1024):
            got = model.predict(Q, return_std=True)
        np.testing.assert_allclose(got[1], expected, rtol=1e-9)
        np.testing.assert_allclose(got[0], y_pred, rtol=1e-12, atol=1e-14)


def test_std_of_precomputed_distances_equals_the_features():
    X, y, Q, w = _data(n=40, d=2)
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    DQ = np.sqrt(((Q[:, None] - X[None]) ** 2).sum(-1))
    for variance in ("nn", "hc1"):
        features = NadarayaWatsonRegressor(bandwidth=0.3, residual_variance=variance)
        distances = NadarayaWatsonRegressor(bandwidth=0.3, metric="precomputed",
                                            residual_variance=variance)
        np.testing.assert_allclose(
            distances.fit(D, y, sample_weight=w).predict(DQ, return_std=True)[1],
            features.fit(X, y, sample_weight=w).predict(Q, return_std=True)[1], rtol=1e-9)


def test_std_in_float32_agrees_with_float64():
    X, y, Q, _ = _data(n=60, d=2)
    for degree in (0, 1):
        model = NadarayaWatsonRegressor(bandwidth=0.3, degree=degree, residual_variance="hc2")
        s64 = model.fit(X, y).predict(Q, return_std=True)[1]
        s32 = model.fit(X.astype(np.float32), y).predict(Q.astype(np.float32),
                                                          return_std=True)[1]
        assert s32.dtype == np.float64
        np.testing.assert_allclose(s32, s64, rtol=2e-4)


def test_std_with_attention_and_in_chunks():
    import sklearn

    X, y, Q, w = _data(n=200, d=2)
    model = NadarayaWatsonRegressor(bandwidth=0.2, residual_variance="hc3").fit(X, y, w)
    y_pred, y_std, attention = model.predict(Q, return_attention=True, return_std=True)
    np.testing.assert_allclose(attention, model.predict(Q, return_attention=True)[1],
                               rtol=1e-12, atol=1e-15)
    # Chunks of a few rows (working_memory in MiB) give the same numbers.
    with sklearn.config_context(working_memory=0.01):
        small = model.predict(Q, return_std=True)
    np.testing.assert_allclose(small[1], y_std, rtol=1e-12)
    np.testing.assert_allclose(small[0], y_pred, rtol=1e-12)


@pytest.mark.parametrize("params", [
    {"kernel": "epanechnikov", "algorithm": "cell_list"},
    {"kernel": "epanechnikov", "algorithm": "kd_tree", "degree": 1},
    {"kernel": "tricube", "algorithm": "ball_tree"}], ids=["cell_list", "kd_local", "ball"])
def test_sparse_intervals_and_sets_in_chunks_of_a_few_queries(params):
    # Sparse attention rows in chunks of queries sized by the most keys a row held (the
    # first as dense rows): the same bounds and sets as in one chunk.
    import sklearn

    from sklearn_nw import NadarayaWatsonClassifier

    X, y, Q, w = _data(n=300, d=2)
    model = NadarayaWatsonRegressor(bandwidth=0.3, **params).fit(X, y, w)
    labels = (y > np.median(y)).astype(int)
    classifier = NadarayaWatsonClassifier(
        bandwidth=0.3, **{k: v for k, v in params.items() if k != "degree"}).fit(X, labels, w)
    whole = model.predict_interval(Q, confidence_level=[0.5, 0.9])
    sets = classifier.predict_set(Q, confidence_level=[0.5, 0.9])
    with sklearn.config_context(working_memory=0.01):  # MiB: a few rows per chunk
        chunked = model.predict_interval(Q, confidence_level=[0.5, 0.9])
        chunked_sets = classifier.predict_set(Q, confidence_level=[0.5, 0.9])
    np.testing.assert_allclose(chunked[0], whole[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(chunked[1], whole[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(chunked_sets[1], sets[1])


def test_the_cv_regressor_has_the_same_std():
    X, y, Q, _ = _data(n=60, d=1)
    cv = NadarayaWatsonRegressorCV(degree=0, residual_variance="hc1").fit(X, y)
    plain = NadarayaWatsonRegressor(bandwidth=cv.bandwidth_, residual_variance="hc1").fit(X, y)
    np.testing.assert_allclose(cv.predict(Q, return_std=True)[1],
                               plain.predict(Q, return_std=True)[1], rtol=1e-12)


def test_predict_changes_nothing():
    X, y, Q, _ = _data(n=30)
    model = NadarayaWatsonRegressor(bandwidth=0.3, residual_variance="hc2").fit(X, y)
    before = dict(vars(model))
    model.predict(Q, return_std=True)
    model.predict_interval(Q, confidence_level=[0.8, 0.9])
    assert vars(model).keys() == before.keys()
    assert all(vars(model)[k] is v for k, v in before.items())


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [{"residual_variance": "hc4"},
                                    {"residual_neighbors": 0},
                                    {"residual_neighbors": 2.5}])
def test_bad_parameters(params):
    X, y, _, _ = _data(n=20)
    with pytest.raises(InvalidParameterError, match="residual_"):
        NadarayaWatsonRegressor(**params).fit(X, y)


@pytest.mark.parametrize("variance", ["hc2", "hc3"])
def test_leverage_one_is_refused(variance):
    X = np.array([[0.0], [0.1], [0.2], [5.0]])
    model = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=0.5,
                                    residual_variance=variance).fit(X, [0.0, 1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match=r"1 - L_ii.*1 training points"):
        model.predict([[0.1]], return_std=True)


def test_hc1_needs_more_points_than_parameters():
    model = NadarayaWatsonRegressor(bandwidth=1.0, degree=1, residual_variance="hc1")
    model.fit([[0.0], [1.0]], [0.0, 1.0])
    with pytest.raises(ValueError, match="more than 2 training points"):
        model.predict([[0.5]], return_std=True)


def test_nn_needs_two_points():
    model = NadarayaWatsonRegressor(bandwidth=1.0).fit([[0.0], [1.0]], [0.0, 1.0],
                                                       sample_weight=[1.0, 0.0])
    with pytest.raises(ValueError, match="at least 2 training points"):
        model.predict([[0.5]], return_std=True)


# -- jackknife+ against n explicit refits ---------------------------------------------------


def _decimal(level):
    """A confidence level as the decimal it is written as (0.8 is 4/5, not the binary
    float nearest it): ``alpha (n + 1)`` an integer ranks as that integer."""
    return Fraction(repr(float(level)))


def _rank_low(level, n):
    return math.floor((1 - _decimal(level)) * (n + 1))


def _rank_high(level, n):
    return math.ceil(_decimal(level) * (n + 1))


def _oracle_jackknife_plus(make, X, y, Q, w, levels):
    """Jackknife+ by its definition: n refits, the k-th smallest (1-based) bounds (CV+
    with one row held out per split)."""
    n = len(y)
    splits = [(np.arange(n) != i, [i]) for i in np.flatnonzero(w > 0)]
    return _oracle_cv_plus(make, X, y, Q, w, levels, splits)


def _intervals_against_refits(make, X, y, Q, w, levels, tolerance):
    """``make()``'s jackknife+ intervals at Q, checked against n explicit refits (and
    its predictions against predict); a query beyond a compact kernel's reach warns."""
    model = make().fit(X, y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        y_pred, intervals = model.predict_interval(Q, confidence_level=levels)
        np.testing.assert_allclose(y_pred, model.predict(Q), rtol=1e-12)
        expected = _oracle_jackknife_plus(make, X, y, Q, w, levels)
    np.testing.assert_allclose(intervals, expected, rtol=tolerance, atol=tolerance)
    return intervals


@pytest.mark.parametrize("kind", [None, "sample_point"])
def test_jackknife_plus_ranks_a_decimal_level_as_written(kind):
    # 29 rows: alpha (n + 1) is 6 at level 0.8 and 3 at 0.9, integers as the levels are
    # written (the binary floats nearest them give 5.99... and 2.99...): the bounds are
    # the 6th and 3rd smallest (the 24th and 27th for the upper bounds), as refits give.
    X, y, Q, _ = _data(n=29, d=2)
    w = np.ones(29)
    bandwidth = 0.3 if kind is None else AdaptiveBandwidth(kind, n_neighbors=6,
                                                           base=np.full(2, 0.3))
    _intervals_against_refits(lambda: NadarayaWatsonRegressor(bandwidth=bandwidth), X, y, Q,
                              w, [0.8, 0.9], 1e-10)


@pytest.mark.parametrize("kernel, bandwidth, algorithm", [
    ("gaussian", 0.2, "auto"), ("epanechnikov", 0.25, "brute"),
    ("epanechnikov", 0.25, "kd_tree"), ("epanechnikov", 0.25, "cell_list"),
    # So small that points and queries have a lone neighbor, or none: refits fall back.
    ("epanechnikov", 0.04, "brute"),
])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_jackknife_plus_equals_explicit_refits(kernel, bandwidth, algorithm, d, weighted):
    X, y, Q, w = _data(n=30, d=d)
    if weighted:
        w[[3, 7]] = 0.0  # rows without weight are not training rows
    else:
        w = np.ones(len(y))
    levels = [0.5, 0.8, 0.9]

    def make():
        return NadarayaWatsonRegressor(kernel=kernel, bandwidth=bandwidth, algorithm=algorithm)

    intervals = _intervals_against_refits(make, X, y, Q, w, levels, tolerance=1e-8)
    assert intervals.shape == (len(Q), 2, 3)


def test_jackknife_plus_of_a_query_far_beyond_every_key_warns_nothing():
    # A Gaussian query 60 bandwidths from every key: its sums' logarithm near -1800, the
    # bound on its largest weight overflows (to the attention path), silently; the bounds
    # are the refits'.
    X, y, _, w = _data(n=30, d=1)
    Q = np.array([[0.5], [3.5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _intervals_against_refits(lambda: NadarayaWatsonRegressor(bandwidth=0.05), X, y, Q,
                                  w, [0.8, 0.9], 1e-8)


def _nearest_data(weights, seed=0):
    """Data for the k nearest keys: 40 rows in 2 features and 6 copies of the first rows
    (same targets: which copy a search takes among tied ones changes nothing; each copy
    stays when the other leaves), weights of ``weights`` kind, and a query out of a
    compact kernel's reach (the route's and the refits' nearest-key fallback)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(4 * X.sum(1)) + 0.3 * rng.normal(size=40)
    X, y = np.vstack([X, X[:6]]), np.concatenate([y, y[:6]])
    w = {"unit": np.ones(46), "integer": rng.integers(1, 4, 46).astype(float),
         "fractional": rng.uniform(0.3, 2.5, 46)}[weights]
    if weights == "fractional":
        w[[4, 11]] = 0.0  # rows without weight are not training rows
    Q = np.vstack([rng.uniform(0, 1, (7, 2)), [[3.0, 3.0]]])
    return X, y, w, Q


@pytest.mark.parametrize("kernel, bandwidth", [("gaussian", 0.3), ("epanechnikov", 0.25)])
@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
@pytest.mark.parametrize("k", [1, 5])
@pytest.mark.parametrize("weights", ["unit", "integer", "fractional"])
def test_jackknife_plus_on_the_k_nearest_equals_explicit_refits(kernel, bandwidth,
                                                                 algorithm, k, weights):
    # Without one of its k nearest keys a query's fit takes the next key(s) in, as a
    # refit's k nearest of the others do (in units of sample weight: the keys after the
    # one that leaves hold what it held); the training rows' residuals likewise.
    X, y, w, Q = _nearest_data(weights)
    # (Not 0.8: 0.2 (n + 1) is 9 for the 44 rows of fractional weight, which the oracle's
    # exact arithmetic on the float 0.8 puts just below.)
    levels = [0.5, 0.75, 0.9]

    def make():
        return NadarayaWatsonRegressor(kernel=kernel, bandwidth=bandwidth, n_neighbors=k,
                                       algorithm=algorithm)

    intervals = _intervals_against_refits(make, X, y, Q, w, levels, tolerance=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        refits = [make().fit(np.delete(X, i, 0), np.delete(y, i),
                             sample_weight=np.delete(w, i)).predict(X[i : i + 1])[0]
                  for i in range(len(y))]
        stored = make().set_params(store_loo=True).fit(X, y, sample_weight=w)
        np.testing.assert_allclose(stored.predict_interval(Q, levels)[1], intervals,
                                   rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stored.loo_prediction_[w > 0], np.array(refits)[w > 0],
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel, degree", [
    ("gaussian", 0), ("laplacian", 0), ("epanechnikov", 0), ("gaussian", 1),
    ("epanechnikov", 1),
])
@pytest.mark.parametrize("weighted", [False, True])
def test_jackknife_plus_by_windows_equals_explicit_refits(kernel, degree, weighted):
    # The dense route's bounds from the sums (local linear: their moments) and the moves
    # on the keys that can decide them (queries whose bound holds), the other queries'
    # from their attention rows (far queries lean on a few keys); levels whose ranks
    # leave 1..n give infinite bounds.
    X, y, Q, w = _data(n=200, d=2)
    # Far enough that a key may hold half the weight, within a compact kernel's reach.
    far = {"gaussian": [2.5, -1.5], "laplacian": [4.0, -3.0], "epanechnikov": [1.3, -0.3]}[kernel]
    Q = np.vstack([Q, [far, [0.5, 0.5]]])
    if weighted:
        w[[3, 7]] = 0.0
    else:
        w = np.ones(len(y))
    levels = [0.5, 0.9, 0.999]

    def make():
        return NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.6, degree=degree,
                                       algorithm="brute")

    model = make().fit(X, y, sample_weight=w)
    residuals = np.abs(y - model._fits_without_each_row(y))
    _, _, rest = model._jackknife_plus_by_windows(Q, w > 0, residuals, 1 - np.array(levels))
    assert 0 < rest.sum() < len(Q)  # both paths serve some queries
    y_pred, intervals = model.predict_interval(Q, confidence_level=levels)
    np.testing.assert_allclose(y_pred, model.predict(Q), rtol=1e-12)
    assert np.isinf(intervals[:, :, 2]).all()  # 0.001 * 201 < 1
    expected = _oracle_jackknife_plus(make, X, y, Q, w, levels)
    np.testing.assert_allclose(intervals, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tricube", "laplacian"])
@pytest.mark.parametrize("degree, d", [(0, 2), (1, 2), (1, 6)])
def test_leave_one_out_moves_are_the_fits_without_each_key_within_their_bound(kernel,
                                                                                degree, d):
    # The moves of the windows' jackknife+ against the fits without each key of the
    # attention path, for every key, and the bound that decides which keys are computed
    # (local linear: its forms coordinate by coordinate in 2 features, as batched
    # products in 6).
    X, y, Q, w = _data(n=150 if d == 2 else 1000, d=d, seed=1)
    Q = np.vstack([Q, np.random.default_rng(2).uniform(0, 1, (20, d))])
    model = NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.5 if d == 2 else 2.0,
                                    degree=degree, algorithm="brute").fit(X, y, sample_weight=w)
    moves = model.key_set_.leave_one_out_moves(Q)
    if moves is None:  # the laplacian's peaks for local fits are not known
        assert kernel == "laplacian" and degree == 1
        return
    served = np.flatnonzero(~moves.rest)
    assert len(served) >= 5
    every = moves.moves(served, np.arange(len(y)))[:, :, 0]  # (b, n), the values' unit
    scale = model._scaling[1]
    expected = model._leave_one_out_fits(Q[served], model.predict(Q[served], True)[1], y)
    np.testing.assert_allclose(model._outputs(moves.fits[served])[:, None] + every * scale,
                               expected, rtol=1e-10, atol=1e-10)
    assert np.all(np.abs(every) <= moves.bound[served])
    # Each query's own keys (the sets' windows): the same moves.
    own = np.random.default_rng(3).integers(0, len(y), (len(served), 9))  # (b, 9)
    np.testing.assert_allclose(moves.moves(served, own)[:, :, 0],
                               np.take_along_axis(every, own, 1), rtol=1e-13, atol=1e-15)


def test_local_linear_moves_stay_within_their_bound():
    # The dense local-linear moves' bound (Gaussian weights; a compact kernel's local
    # fits take the keys in reach) from the largest weighted deviation of the values
    # from their Nadaraya-Watson mean, measured in the pass of the moments: steep
    # slopes, far targets, queries beyond the data and near training points, random
    # bandwidths.
    checked = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        X = rng.uniform(-1, 1, (80, 2))
        y = (rng.uniform(-20, 20) * X[:, 0]
             + rng.normal(size=80) * rng.choice([0.01, 1.0]))
        far = rng.choice(80, 3, replace=False)
        y[far] += rng.choice([-1, 1], 3) * rng.uniform(10, 1000, 3)
        Q = np.vstack([rng.uniform(-1.2, 1.2, (30, 2)), X[:5] + 0.01])
        model = NadarayaWatsonRegressor(bandwidth=rng.uniform(0.15, 0.6), degree=1,
                                        algorithm="brute").fit(X, y)
        moves = model.key_set_.leave_one_out_moves(Q)
        served = np.flatnonzero(~moves.rest)
        every = np.abs(moves.moves(served, np.arange(80))[:, :, 0])
        assert np.all(every <= moves.bound[served])
        checked += len(served)
    assert checked >= 400


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_fits_without_each_row_from_leverages_equal_the_attention_path(degree):
    # (f_i - L_ii y_i) / (1 - L_ii) from the in-sample sums or moments; rows that weigh
    # more than half of their own fit (isolated points) from the attention.
    X, y, _, w = _data(n=80, d=2)
    X[:3] += 4.0  # far from the rest: their own weight dominates
    model = NadarayaWatsonRegressor(bandwidth=0.15, degree=degree).fit(X, y, sample_weight=w)
    leverage = model.key_set_.in_sample_with_leverage()[1]
    assert (leverage > 0.5).any() and (leverage <= 0.5).any()
    np.testing.assert_allclose(model._fits_without_each_row(y),
                               model._leave_one_out_at_training_points(y),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("degree, d, kernel, bandwidth, algorithm", [
    (1, 1, "gaussian", 0.2, "auto"), (1, 2, "gaussian", 0.3, "auto"),
    (2, 1, "gaussian", 0.3, "auto"), (2, 2, "gaussian", 0.5, "auto"),
    (1, 1, "epanechnikov", 0.3, "kd_tree"),
    # A compact kernel's keys in reach, each query's own design (unbounded fits).
    (2, 2, "epanechnikov", 0.6, "kd_tree"), (1, 2, "tricube", 0.45, "ball_tree"),
    (2, 1, "epanechnikov", 0.35, "cell_list"),
    # Few points in reach: designs singular without a row, refitted.
    (1, 2, "epanechnikov", 0.2, "brute"),
    # Queries whose own design is singular (one or two points in reach).
    (2, 2, "tricube", 0.15, "kd_tree"),
])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bounded", [False, True])
def test_jackknife_plus_of_local_polynomials_equals_explicit_refits(
        degree, d, kernel, bandwidth, algorithm, weighted, bounded):
    X, y, Q, w = _data(n=30, d=d)
    # A concave trend and queries beyond the data: there the bound binds.
    y = np.sqrt(3 * X.sum(1)) + 0.1 * y
    Q = np.vstack([Q, np.full((1, d), -0.5), np.full((1, d), 1.5)])
    if not weighted:
        w = np.ones(len(y))
    levels = [0.5, 0.8, 0.9]

    def make():
        return NadarayaWatsonRegressor(kernel=kernel, bandwidth=bandwidth, degree=degree,
                                       algorithm=algorithm, bounded=bounded)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalFitWarning)
        intervals = make().fit(X, y, sample_weight=w).predict_interval(Q, levels)[1]
        expected = _oracle_jackknife_plus(make, X, y, Q, w, levels)
    np.testing.assert_allclose(intervals, expected, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("seed", [0, 2, 5])
def test_jackknife_plus_of_local_fits_near_a_null_space_equals_refits(seed):
    # Local quadratics in 3 features on 30 rows, a narrow bandwidth: without a key of
    # high leverage the moment matrix's condition grows past the refit's threshold of a
    # null space (its truncated minimum-norm fit), or the update loses the digits a
    # refit keeps: those fits are refitted (they were up to 2.9 off).
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(30, 3))
    X[20:27] = X[:7]
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=30)
    w = rng.integers(1, 4, 30).astype(float)
    Q = np.vstack([rng.normal(size=(5, 3)), X[:3]])
    with warnings.catch_warnings():
        # Some fits there are singular (their Nadaraya-Watson value, refits' too).
        warnings.simplefilter("ignore", LocalFitWarning)
        _intervals_against_refits(lambda: NadarayaWatsonRegressor(bandwidth=0.4, degree=2),
                                  X, y, Q, w, [0.5, 0.8], tolerance=1e-8)


def test_the_cv_regressor_has_the_same_intervals():
    X, y, Q, _ = _data(n=60, d=1)
    cv = NadarayaWatsonRegressorCV(degree=1).fit(X, y)
    plain = NadarayaWatsonRegressor(bandwidth=cv.bandwidth_, degree=1, bounded=True).fit(X, y)
    np.testing.assert_allclose(cv.predict_interval(Q)[1], plain.predict_interval(Q)[1],
                               rtol=1e-12)


def test_jackknife_plus_of_precomputed_distances_equals_the_features():
    X, y, Q, _ = _data(n=30, d=2)
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    DQ = np.sqrt(((Q[:, None] - X[None]) ** 2).sum(-1))
    for kernel, h in (("gaussian", 0.2), ("epanechnikov", 0.1)):
        features = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, y)
        distances = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h,
                                            metric="precomputed").fit(D, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            np.testing.assert_allclose(distances.predict_interval(DQ)[1],
                                       features.predict_interval(Q)[1], rtol=1e-9)


def test_jackknife_plus_at_a_level_too_high_for_n_is_infinite():
    X, y, Q, _ = _data(n=8)
    intervals = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y).predict_interval(
        Q, confidence_level=[0.95, 0.5])[1]
    assert np.all(intervals[:, 0, 0] == -np.inf) and np.all(intervals[:, 1, 0] == np.inf)
    assert np.all(np.isfinite(intervals[:, :, 1]))


def test_jackknife_plus_in_float32_agrees_with_float64():
    X, y, Q, _ = _data(n=40, d=2)
    model = NadarayaWatsonRegressor(bandwidth=0.3)
    i64 = model.fit(X, y).predict_interval(Q)[1]
    i32 = model.fit(X.astype(np.float32), y).predict_interval(Q.astype(np.float32))[1]
    np.testing.assert_allclose(i32, i64, rtol=1e-4, atol=1e-5)


def _adaptive_data(layout, weights, seed=0):
    """Training rows, targets, queries and weights for the adaptive bandwidths: scattered
    points, the same with repeated inputs, or a lattice (k-th neighbor distances tied);
    queries include training inputs."""
    rng = np.random.default_rng(seed)
    if layout == "lattice":
        X = np.stack(np.meshgrid(np.arange(6.0), np.arange(5.0)), -1).reshape(-1, 2)
    else:
        X = rng.normal(size=(30, 2))
        if layout == "repeated":
            X[20:26] = X[:6]
    n = len(X)
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=n)
    w = {"unit": np.ones(n), "integer": rng.integers(1, 4, n).astype(float),
         "fractional": rng.uniform(0.5, 2.0, n)}[weights]
    if weights == "fractional":
        w[[3, 7]] = 0.0  # rows without weight are not training rows
    Q = np.vstack([rng.normal(size=(6, 2)) * X.std(0) + X.mean(0), X[:3]])
    return X, y, Q, w


def _adaptive(kind, kernel, X, degree=0, k=5):
    # The base metric given: a refit measures distances as the fit did.
    return NadarayaWatsonRegressor(kernel=kernel, degree=degree, bandwidth=AdaptiveBandwidth(
        kind, n_neighbors=k, base=np.array([0.3, 0.5]) * X.std(0)))


def _refits_without_each_row(make, X, y, Q, w):
    """The fits (n_q, n) at Q and at each row's own input (n,) of ``make()`` refitted
    without each row."""
    fits, own = np.empty((len(Q), len(y))), np.empty(len(y))
    for j in range(len(y)):
        keep = np.arange(len(y)) != j
        refit = make().fit(X[keep], y[keep], sample_weight=w[keep])
        fits[:, j] = refit.predict(Q)
        own[j] = refit.predict(X[j : j + 1])[0]
    return fits, own


@pytest.mark.parametrize("kind", ["balloon", "sample_point"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("layout, weights", [
    ("scattered", "unit"), ("scattered", "fractional"), ("repeated", "integer"),
    ("repeated", "fractional"), ("lattice", "unit"), ("lattice", "integer")])
def test_adaptive_fits_without_each_row_equal_explicit_refits(kind, kernel, layout,
                                                               weights):
    # Without a row, the neighbor distances that counted it move out (a query's, for
    # the balloon; the keys', for sample-point bandwidths) as a refit without it has
    # them: every such fit at the queries and at the row's own input (where every row
    # has an input of its own, from the rows' leave-one-out on each other; else row by
    # row).
    X, y, Q, w = _adaptive_data(layout, weights)
    model = _adaptive(kind, kernel, X).fit(X, y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        fits = model._leave_one_out_fits(Q, None, y)  # (n_q, n)
        own = model._fits_without_each_row(y)  # (n,)
        expected, expected_own = _refits_without_each_row(
            lambda: _adaptive(kind, kernel, X), X, y, Q, w)
    np.testing.assert_allclose(fits, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(own, expected_own, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["balloon", "sample_point"])
def test_adaptive_fits_without_each_row_with_a_categorical_feature_equal_refits(kind):
    # The neighbors are the continuous features'; the categories' factor weighs them.
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 40
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                      "c": pd.Categorical(rng.choice(["x", "y", "z"], n))})
    y = X["a"].to_numpy() + (X["c"] == "x") + 0.2 * rng.normal(size=n)
    Q = X.iloc[:5].assign(a=X["a"].iloc[:5] + 0.3)

    def make():
        return NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(
            kind, n_neighbors=6, base=np.array([0.5, 0.5, 0.4])))

    model = make().fit(X, y)
    fits = model._leave_one_out_fits(model._validate_predict_data(Q), None, y)
    refits = [make().fit(X.iloc[np.arange(n) != j], np.delete(y, j)) for j in range(n)]
    expected = np.column_stack([refit.predict(Q) for refit in refits])
    np.testing.assert_allclose(fits, expected, rtol=1e-12, atol=1e-12)
    expected_own = [refit.predict(X.iloc[j : j + 1])[0] for j, refit in enumerate(refits)]
    np.testing.assert_allclose(model._fits_without_each_row(np.asarray(y)), expected_own,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("layout, weights", [
    ("scattered", "unit"), ("repeated", "integer"), ("lattice", "unit")])
def test_local_fits_under_a_balloon_bandwidth_without_each_row_equal_refits(
        degree, kernel, layout, weights):
    # Local polynomials on the balloon's attention: a row inside a query's d_k widens
    # it, and the local fit without the row is the one on the wider attention.
    X, y, Q, w = _adaptive_data(layout, weights)
    model = _adaptive("balloon", kernel, X, degree, k=12).fit(X, y, sample_weight=w)
    with warnings.catch_warnings():
        # Singular local designs (few distinct inputs in reach) keep their local-constant
        # values, in the refits alike.
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalFitWarning)
        fits = model._leave_one_out_fits(Q, None, y)  # (n_q, n)
        own = model._fits_without_each_row(y)  # (n,)
        expected, expected_own = _refits_without_each_row(
            lambda: _adaptive("balloon", kernel, X, degree, k=12), X, y, Q, w)
    np.testing.assert_allclose(fits, expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(own, expected_own, rtol=1e-9, atol=1e-9)


def _moves_against_refits(make, X, y, Q, w, block=False):
    """The moves of the fits without each key (keys of one weight: the balloon's, or
    with ``block`` the sample-point bandwidth's held per block of queries) at the
    queries they serve, against refits without each row, and each within its query's
    bound; returns them (f, n) and the queries served (in the targets' unit)."""
    model = make().fit(X, y, sample_weight=w)
    keys = model.key_set_
    with keys.leave_one_out_session():
        moves = keys.leave_one_out_block_moves(Q) if block else keys.leave_one_out_moves(Q)
    fast = np.flatnonzero(~moves.rest)
    y_pred = model.predict(Q)
    if block:  # from the block's own attention
        np.testing.assert_allclose(model._outputs(moves.fits[fast]), y_pred[fast],
                                   rtol=1e-12, atol=1e-14)
    else:  # the balloon's pass is predict's
        np.testing.assert_array_equal(model._outputs(moves.fits), y_pred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        expected, _ = _refits_without_each_row(make, X, y, Q, w)
    scale = model._scaling[1]  # (the moves in the keys' values' unit)
    got = moves.moves(fast, np.arange(len(y)))[:, :, 0] * scale  # (f, n)
    np.testing.assert_allclose(got, expected[fast] - y_pred[fast, None], rtol=1e-9,
                               atol=1e-9)
    assert np.all(np.abs(got) <= moves.bound[fast] * scale * (1 + 1e-12))
    # A few keys asked, in any order: the same moves, shared (as the jackknife+'s
    # windows ask them) or each query its own (as the sets' windows).
    rng = np.random.default_rng(3)
    shared, own = rng.permutation(len(y))[:11], rng.integers(0, len(y), (len(fast), 12))
    np.testing.assert_allclose(moves.moves(fast, shared)[:, :, 0] * scale, got[:, shared],
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(moves.moves(fast, own)[:, :, 0] * scale,
                               np.take_along_axis(got, own, 1), rtol=1e-12, atol=1e-14)
    return got, fast


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("layout", ["scattered", "repeated", "lattice"])
@pytest.mark.parametrize("weight", [1.0, 2.5])
def test_balloon_moves_without_each_row_equal_refits_within_their_bound(kernel, layout,
                                                                        weight):
    # Every key's move, inside d_k (the wider bandwidth) or beyond it.
    X, y, Q, _ = _adaptive_data(layout, "unit")
    k = int(10 * weight)  # units: 10 keys within d_k
    got, fast = _moves_against_refits(
        lambda: _adaptive("balloon", kernel, X, k=k), X, y, Q, np.full(len(y), weight))
    assert len(fast) >= 5


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_balloon_moves_of_points_whose_squares_overflow(kernel):
    # Inputs near 1e160: every squared distance overflows; the distances of the keys
    # within d_k and of each query's own keys are rescaled as the shared keys' are (inf
    # gave those keys no weight).
    X, y, Q, _ = _adaptive_data("scattered", "unit")
    base = np.array([0.3, 0.5]) * X.std(0) * 1e160
    X, Q = X * 1e160, Q * 1e160

    def make():
        return NadarayaWatsonRegressor(kernel=kernel, bandwidth=AdaptiveBandwidth(
            "balloon", n_neighbors=10, base=base))

    got, fast = _moves_against_refits(make, X, y, Q, np.ones(len(y)))
    assert len(fast) >= 5 and np.all(np.isfinite(got))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("weight", [1.0, 2.5])
def test_balloon_moves_hold_a_far_target_just_beyond_d_k(kernel, weight):
    # At the origin ten keys within distance 1, one target far from the others just
    # beyond (the largest move there: the bound of the keys beyond d_k must hold it).
    rng = np.random.default_rng(0)
    radius = np.concatenate([rng.uniform(0.3, 1.0, 9), [1.0, 1.02], rng.uniform(1.5, 3, 29)])
    angle = rng.uniform(0, 2 * np.pi, len(radius))
    X = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    y = 0.01 * rng.normal(size=len(X))
    y[10] = 5.0
    Q = np.array([[0.0, 0.0], [0.5, -0.5], [-1.0, 1.5]])
    k = int(10 * weight)

    def make():
        return NadarayaWatsonRegressor(kernel=kernel, bandwidth=AdaptiveBandwidth(
            "balloon", n_neighbors=k, scale=1.5, base=np.ones(2)))

    got, fast = _moves_against_refits(make, X, y, Q, np.full(len(y), weight))
    assert fast[0] == 0 and np.argmax(np.abs(got[0])) == 10


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("layout", ["scattered", "repeated", "lattice"])
@pytest.mark.parametrize("weight, k", [(1.0, 3), (1.0, 5), (2.5, 12)])
def test_sample_point_block_moves_equal_refits_within_their_bound(kernel, layout, weight,
                                                                   k):
    # Each key's move at the queries a block serves: its own attention, and the keys
    # whose k-th neighbor distance held it at their wider bandwidths; every move within
    # the query's bound (from the largest terms, not the moves themselves).
    X, y, Q, _ = _adaptive_data(layout, "unit")
    _, fast = _moves_against_refits(lambda: _adaptive("sample_point", kernel, X, k=k),
                                    X, y, Q, np.full(len(y), weight), block=True)
    assert len(fast) >= 4


def test_sample_point_block_moves_are_not_offered_where_they_do_not_hold():
    # Keys of several weights (each weight its own wider bandwidths), local polynomials
    # and float32 fits take the fits without each row; the balloon its own moves.
    X, y, Q, w = _adaptive_data("scattered", "integer")
    offered = lambda model: model.key_set_.leave_one_out_blocks
    assert offered(_adaptive("sample_point", "gaussian", X).fit(X, y))
    assert not offered(_adaptive("sample_point", "gaussian", X).fit(X, y, sample_weight=w))
    assert not offered(_adaptive("balloon", "gaussian", X).fit(X, y))
    assert not offered(_adaptive("sample_point", "gaussian", X).fit(X.astype(np.float32), y))


@pytest.mark.parametrize("kind", ["balloon", "sample_point"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("layout, weights", [
    ("repeated", "fractional"), ("scattered", "unit"), ("repeated", "unit"),
    ("lattice", "unit")])
def test_jackknife_plus_with_an_adaptive_bandwidth_equals_explicit_refits(kind, kernel,
                                                                         layout, weights):
    # Keys of one weight under a balloon: the moves of the fits without each key, from
    # two passes (the rows within each query's d_k at the wider bandwidth).
    X, y, Q, w = _adaptive_data(layout, weights)
    levels = [0.5, 0.8, 0.9]
    model = _adaptive(kind, kernel, X).fit(X, y, sample_weight=w)
    moves = model.key_set_.leave_one_out_moves(Q)
    assert (moves is not None and not moves.rest.all()) == (
        kind == "balloon" and weights == "unit")
    # The sample-point bandwidth's moves held per block of queries (some queries left
    # to the fits without each row: T reaches 0.9 on this data).
    assert model.key_set_.leave_one_out_blocks == (kind == "sample_point"
                                                   and weights == "unit")
    fitted = dict(vars(model.key_set_.route))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        y_pred, intervals = model.predict_interval(Q, confidence_level=levels)
        np.testing.assert_allclose(y_pred, model.predict(Q), rtol=1e-12)
    # What the chunks of queries shared is dropped after: the route stays as fitted.
    assert vars(model.key_set_.route).keys() == fitted.keys()
    expected = _oracle_jackknife_plus(lambda: _adaptive(kind, kernel, X), X, y, Q, w, levels)
    np.testing.assert_allclose(intervals, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layout", ["lattice", "scattered"])
@pytest.mark.parametrize("algorithm", ["kd_tree", "brute"])
def test_top_hat_balloon_counts_its_kth_neighbor_as_refits_do(layout, algorithm):
    # The top-hat kernel at c = 1 (its "auto" scale) puts each query's k-th nearest key
    # exactly on its support's edge, inside: the fits without each row (the wider
    # bandwidth's pass; a tree's k-th distance, whose sum of squares rounds in another
    # order in 3 features) must count it as a refit's prediction does.
    rng = np.random.default_rng(4 if layout == "lattice" else 1)
    if layout == "lattice":  # keys at k-th distances exactly, queries between them
        X, Q, k = np.arange(30.0)[:, None], rng.uniform(2, 27, (8, 1)), 8
        w = np.ones(len(X))
    else:
        X, Q, k = rng.normal(size=(30, 3)), rng.normal(size=(8, 3)), 3
        w = rng.uniform(0.5, 2.0, len(X))
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=len(X))
    Q = np.vstack([Q, X[:3]])

    def make():
        return NadarayaWatsonRegressor(kernel="tophat", algorithm=algorithm,
                                       bandwidth=AdaptiveBandwidth("balloon", n_neighbors=k,
                                                                   base=X.std(0)))

    model = make().fit(X, y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        fits, own = model._leave_one_out_fits(Q, None, y), model._fits_without_each_row(y)
        expected, expected_own = _refits_without_each_row(make, X, y, Q, w)
    np.testing.assert_allclose(fits, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(own, expected_own, rtol=1e-12, atol=1e-12)
    _intervals_against_refits(make, X, y, Q, w, [0.5, 0.8], tolerance=1e-10)


def test_the_cv_regressor_has_intervals_with_an_adaptive_bandwidth():
    # The CV estimator that chooses an adaptive bandwidth gives the jackknife+ of a
    # model refitted at the chosen bandwidth, kernel and k without each row.
    X, y, Q, _ = _adaptive_data("scattered", "unit")
    model = NadarayaWatsonRegressorCV(bandwidth_kinds=["sample_point"], degree=0).fit(X, y)
    assert model.bandwidth_kind_ == "sample_point"
    chosen = model.best_params_

    def make():
        return NadarayaWatsonRegressor(kernel=model.kernel_, bandwidth=AdaptiveBandwidth(
            "sample_point", n_neighbors=model.bandwidth_neighbors_,
            scale=model.bandwidth_scale_, base=model.bandwidth_))

    np.testing.assert_allclose(make().fit(X, y).predict(Q), model.predict(Q), rtol=1e-12)
    intervals = model.predict_interval(Q, 0.9)[1]
    expected = _oracle_jackknife_plus(make, X, y, Q, np.ones(len(y)), [0.9])
    np.testing.assert_allclose(intervals, expected, rtol=1e-10, atol=1e-10)
    assert chosen == model.best_params_


@pytest.mark.parametrize("params, error, match", [
    ({"n_neighbors": 5, "degree": 1}, NotImplementedError, "n_neighbors=5 and degree=1"),
    ({"n_neighbors": 5, "metric": "precomputed"}, NotImplementedError,
     "n_neighbors=5 and precomputed distances"),
    ({"bandwidth": AdaptiveBandwidth("sample_point", n_neighbors=5), "degree": 1},
     NotImplementedError, "local polynomials \\(degree=1\\) under a sample-point"),
])
def test_jackknife_plus_refuses_what_it_does_not_compute(params, error, match):
    X, y, Q, _ = _data(n=30)
    if params.get("metric") == "precomputed":
        X, Q = np.abs(X - X.T), np.abs(Q - X.T)  # one feature: its distances
    model = NadarayaWatsonRegressor(**{"bandwidth": 0.3, **params}).fit(X, y)
    with pytest.raises(error, match=match):
        model.predict_interval(Q)


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, [], [[0.9]], "high", [0.9, -0.1]])
def test_jackknife_plus_refuses_bad_levels(level):
    X, y, Q, _ = _data(n=20)
    model = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    with pytest.raises(ValueError, match="confidence_level must be"):
        model.predict_interval(Q, confidence_level=level)


def test_jackknife_plus_refuses_several_outputs():
    X, y, Q, _ = _data(n=20, outputs=2)
    model = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    with pytest.raises(ValueError, match="one target"):
        model.predict_interval(Q)


@pytest.mark.parametrize("zeros", [0.0, 0.3, 0.7, 0.97, 1.0])
def test_sum_of_largest_equals_the_sorted_rows_sum(zeros):
    # Each row's k largest summed, by numpy's partition (few zeros) or torch's top-k (most
    # entries exact zeros, on which the partition slows down): the same sums either way,
    # ties included, and k of 0 or past the row's length.
    from sklearn_nw._uncertainty import sum_of_largest

    rng = np.random.default_rng(3)
    a = np.round(rng.exponential(size=(7, 50)), 1)  # ties
    a[rng.uniform(size=a.shape) < zeros] = 0.0
    for k in (0, 1, 3, 25, 49, 50, 80):
        expected = np.sort(a, axis=1)[:, a.shape[1] - min(k, a.shape[1]):].sum(1)
        np.testing.assert_allclose(sum_of_largest(a, k), expected, rtol=1e-14, atol=0)
    assert sum_of_largest(np.zeros((3, 0)), 0).shape == (3,)


@pytest.mark.parametrize("pairs", [1, 50, 2**17])
def test_windowed_jackknife_plus_equals_every_fit_ranked(pairs):
    # The bounds from the moves of the rows within reach of each rank, the queries in
    # calls of about `pairs` moves (one query per call at 1), against the order
    # statistics of every fit without a row; bounds of every size, ties of residuals.
    from sklearn_nw._uncertainty import jackknife_plus, jackknife_plus_windows

    rng = np.random.default_rng(0)
    n_q, n = 60, 40
    fits = rng.normal(size=n_q)
    moves = rng.uniform(-1, 1, (n_q, n)) * rng.choice([0.0, 0.01, 0.3, 3.0], n_q)[:, None]
    residuals = np.round(np.abs(rng.normal(size=n)), 1)
    bound = np.abs(moves).max(1) * rng.uniform(1.0, 2.0, n_q)  # at least every move
    alphas = np.array([0.02, 0.1, 0.3, 0.5])
    calls = []

    def moves_on(rows, columns):
        calls.append(len(rows))
        return moves[rows[:, None], columns]

    got = jackknife_plus_windows(fits, bound, residuals, alphas, moves_on, pairs=pairs)
    np.testing.assert_allclose(got, jackknife_plus(fits[:, None] + moves, residuals, alphas),
                               rtol=1e-14, atol=1e-14)
    assert sum(calls) == n_q and (max(calls) == 1) == (pairs == 1)


@pytest.mark.parametrize("pairs", [1, 50, 2**17])
def test_windowed_conformal_sets_equal_every_score_counted(pairs):
    # The sets from the moves of the rows within reach of each class's score, each
    # query's own window, against the counts over every score without a row; scores
    # tied with the training ones, moves of every size, levels whose thresholds fall
    # inside the windows and outside them (those classes decided without a move).
    from sklearn_nw._uncertainty import conformal_sets, conformal_sets_windows

    rng = np.random.default_rng(1)
    n_q, n, c = 300, 39, 3  # (1 - alpha) (n + 1) an integer: counts can equal it
    training = np.round(rng.uniform(size=n), 2)
    scores = np.where(rng.uniform(size=(n_q, c)) < 0.2, rng.choice(training, (n_q, c)),
                      rng.uniform(size=(n_q, c)))
    size = rng.choice([0.0, 0.005, 0.05, 0.5], (n_q, 1))
    moves = rng.uniform(-1, 1, (n_q, n, c)) * size[:, :, None]
    bound = np.abs(moves).max(1) * rng.uniform(1.0, 2.0, (n_q, c))  # at least every move
    alphas = np.array([0.05, 0.1, 0.3, 0.5, 0.9])
    computed = set()  # (query, class)

    def moves_on(rows, columns, k):
        computed.update((q, k) for q in rows)
        return moves[rows[:, None], columns, k]

    got = conformal_sets_windows(scores, bound, training, alphas, 1e-9, moves_on,
                                 pairs=pairs)
    np.testing.assert_array_equal(
        got, conformal_sets(scores[:, None, :] + moves, training, alphas, 1e-9))
    # Some classes with training scores within reach were decided without their moves.
    ordered = np.sort(training)
    within = (np.searchsorted(ordered, scores + bound * 1.01 - 1e-9)
              > np.searchsorted(ordered, scores - bound * 1.01 - 1e-9))  # (n_q, c)
    assert 0 < len(computed) < within.sum()


@pytest.mark.parametrize("score, own_mass", [
    ("lac", 1.0), ("aps", 1.0), ("aps", 0.0), ("aps", "random")])
def test_conformity_score_bound_holds_every_move_of_the_probabilities(score, own_mass):
    # Probabilities moved by at most D each, summing to 1 before and after (as the fits
    # without a row): every score's move within its bound, near ties of classes, and
    # the bound reached closely somewhere (a bound twice too wide fails).
    from sklearn_nw._uncertainty import conformity_score_bound, conformity_scores

    rng = np.random.default_rng(0)
    n_q, c, draws = 400, 4, 60
    p = rng.dirichlet(np.full(c, 0.7), n_q)
    p[:50, 1] = np.abs(p[:50, 0] + rng.uniform(-0.01, 0.01, 50))  # near ties
    p /= p.sum(1, keepdims=True)
    D = np.minimum(rng.uniform(0, 0.05, (n_q, c)), p)
    share = rng.uniform(size=(n_q, 1)) if own_mass == "random" else own_mass
    bound = conformity_score_bound(p, D, score, own_mass=share)
    before = conformity_scores(p, score, own_mass=share if np.isscalar(share)
                               else share[:, 0])
    largest = np.zeros((n_q, c))
    for _ in range(draws):
        # Each class at an end of its range, one class taking the sum back to 1.
        move = D * rng.choice([-1.0, 1.0], (n_q, c))
        j = rng.integers(0, c, n_q)
        move[np.arange(n_q), j] = 0.0
        move[np.arange(n_q), j] = -move.sum(1)
        fine = np.all(np.abs(move) <= D + 1e-15, 1)
        after = conformity_scores(p + move, score, own_mass=share if np.isscalar(share)
                                  else share[:, 0])
        largest[fine] = np.maximum(largest[fine], np.abs(after - before)[fine])
    assert np.all(largest <= bound * (1 + 1e-9) + 1e-15)
    assert np.max(largest / np.where(bound > 0, bound, 1)) > 0.5


def test_window_batches_cover_the_queries_in_runs_within_pairs():
    # Consecutive runs, each within its budget of moves (its queries times its union of
    # windows) unless one query alone exceeds it; the longest such run each time.
    from sklearn_nw._uncertainty import window_batches

    rng = np.random.default_rng(0)
    for pairs in (1, 30, 500):
        lo = rng.integers(0, 50, (200, 2))
        hi = lo + rng.integers(0, 20, (200, 2))
        runs = window_batches(lo, hi, pairs, most=16)
        assert [r.start for r in runs] == [0] + [r.stop for r in runs[:-1]]
        assert runs[-1].stop == 200

        def size(run, lo=lo, hi=hi):
            union = hi[run].max(0) - lo[run].min(0)
            return (run.stop - run.start) * union.sum()

        for run in runs:
            assert run.stop - run.start <= 16
            assert size(run) <= pairs or run.stop - run.start == 1
            longer = slice(run.start, run.stop + 1)
            assert (run.stop == 200 or run.stop - run.start == 16
                    or size(longer) > pairs)


def test_class_deviations_equal_the_columns_measured_one_by_one():
    # The dense route's largest attention-weighted deviation of one-hot values, from
    # each class's largest attention, against the engine's column-by-column measure.
    from sklearn_nw import NadarayaWatsonClassifier

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(300, 2))
    y = rng.integers(0, 4, 300)
    w = rng.uniform(0.0, 3.0, 300)
    Q = np.vstack([rng.uniform(-0.5, 1.5, (80, 2))])
    for kernel in ("gaussian", "laplacian"):
        model = NadarayaWatsonClassifier(kernel=kernel, bandwidth=0.2).fit(X, y,
                                                                           sample_weight=w)
        keys = model.key_set_
        sums, by_class = keys.route.partial_pool(keys, Q, largest_deviation=True)
        _, by_column = keys.route.sums_of(keys, Q, keys.values, deviation_of=(0, 1, 2, 3))
        np.testing.assert_allclose(by_class, by_column, rtol=1e-12, atol=0)
        assert np.all(by_class > 0)


def test_one_hot_classes():
    from sklearn_nw._routes import one_hot_classes

    np.testing.assert_array_equal(one_hot_classes(np.eye(3)[[2, 0, 1, 1]]), [2, 0, 1, 1])
    assert one_hot_classes(np.eye(3)[[2, 0]] * 0.5) is None
    assert one_hot_classes(np.ones((4, 1))) is None
    assert one_hot_classes(np.array([[1.0, 1.0], [0.0, 1.0]])) is None


@pytest.mark.parametrize("seed", range(4))
def test_sparse_jackknife_plus_equals_the_dense_one(seed):
    # Sparse attention rows: the fits without the keys in reach, every other row's the
    # query's own fit; against every (b, n) fit partitioned. Ties of residuals and of
    # values, rows holding every key, and ranks at both ends.
    import scipy.sparse as sp

    from sklearn_nw._uncertainty import (
        jackknife_plus,
        jackknife_plus_sparse,
        leave_one_out_fits,
        sparse_leave_one_out_fits,
    )

    rng = np.random.default_rng(seed)
    alphas = np.array([0.01, 0.05, 0.1, 0.3, 0.5, 0.9])
    for _ in range(50):
        b, n = int(rng.integers(1, 8)), int(rng.integers(2, 40))
        dense = rng.uniform(0.01, 1.0, (b, n)) * (rng.random((b, n)) < rng.uniform(0.05, 1))
        dense[np.arange(b), rng.integers(0, n, b)] += 0.5  # every row holds a key
        y = rng.normal(size=n)
        residuals = np.abs(rng.normal(size=n))
        if rng.random() < 0.5:  # ties
            y, residuals = np.round(y), np.round(residuals, 1)
        fits, missing = leave_one_out_fits(dense, y)
        if missing.any():
            continue
        held, keys, held_missing, own = sparse_leave_one_out_fits(sp.csr_array(dense), y)
        assert not held_missing.any()
        np.testing.assert_allclose(
            jackknife_plus_sparse(own, held, keys, residuals, alphas),
            jackknife_plus(fits, residuals, alphas), rtol=1e-13, atol=1e-13)


def _cv_plus_bounds(F, R, levels):
    """The CV+ bounds (q, 2, n_levels) of fits F (q, m) and residuals R (m,): the k-th
    smallest (1-based) of F - R and F + R."""
    m = len(R)
    out = np.empty((len(F), 2, len(levels)))
    for k, level in enumerate(levels):
        lo, hi = _rank_low(level, m), _rank_high(level, m)
        out[:, 0, k] = -np.inf if lo < 1 else np.sort(F - R, axis=1)[:, lo - 1]
        out[:, 1, k] = np.inf if hi > m else np.sort(F + R, axis=1)[:, hi - 1]
    return out


def _oracle_cv_plus(make, X, y, Q, w, levels, splits):
    """CV+ by its definition: a refit per split, each row's residual and fits at the
    queries from the split holding it out, the k-th smallest (1-based) bounds over the
    rows of positive weight."""
    F, R = np.empty((len(Q), len(y))), np.empty(len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        for train, test in splits:
            model = make().fit(X[train], y[train], sample_weight=w[train])
            R[test] = np.abs(y[test] - model.predict(X[test]))
            F[:, test] = model.predict(Q)[:, None]
    return _cv_plus_bounds(F[:, w > 0], R[w > 0], levels)


@pytest.mark.parametrize("make", [
    lambda: NadarayaWatsonRegressor(bandwidth="loo"),
    lambda: NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth("balloon", n_neighbors=5)),
    lambda: NadarayaWatsonRegressor(bandwidth=0.3, n_neighbors=6),
    lambda: NadarayaWatsonRegressorCV(degree="auto"),
], ids=["learned", "adaptive", "n_neighbors", "cv_estimator"])
@pytest.mark.parametrize("cv", [5, KFold(4, shuffle=True, random_state=1)],
                         ids=["int", "splitter"])
def test_cv_plus_equals_explicit_refits_per_split(make, cv):
    # The bandwidth is chosen again on each split's training rows, as a refit chooses it.
    X, y, Q, w = _data(n=50, d=2)
    w[[3, 7]] = 0.0
    levels = [0.5, 0.9]
    model = make().fit(X, y, sample_weight=w)
    y_pred, intervals = model.predict_interval(Q, confidence_level=levels, cv=cv)
    np.testing.assert_allclose(y_pred, model.predict(Q), rtol=1e-12)
    splits = list((KFold(cv) if isinstance(cv, int) else cv).split(X))
    expected = _oracle_cv_plus(make, X, y, Q, w, levels, splits)
    np.testing.assert_allclose(intervals, expected, rtol=1e-9, atol=1e-9)
    # Not the jackknife+ at the bandwidth chosen on every row (where that is defined).
    if make().get_params().get("n_neighbors") is None and not isinstance(
            make().get_params().get("bandwidth"), AdaptiveBandwidth):
        assert not np.allclose(intervals, model.predict_interval(Q, levels)[1])


def test_cv_plus_refuses_splits_that_are_no_partition():
    X, y, Q, _ = _data(n=30)
    model = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    with pytest.raises(ValueError, match="held out 10 of the 30"):
        model.predict_interval(Q, cv=[(np.arange(10, 30), np.arange(10))])
    twice = [(np.arange(15, 30), np.arange(15)), (np.arange(10, 30), np.arange(10))]
    with pytest.raises(ValueError, match="more than once"):
        model.predict_interval(Q, cv=twice)
    with pytest.raises(ValueError, match="one target"):
        NadarayaWatsonRegressor(bandwidth=0.3).fit(X, np.c_[y, y]).predict_interval(Q, cv=3)


def _oracle_cv_plus_as_given(make, X, y, Q, levels, splits):
    """:func:`_oracle_cv_plus` of inputs as the user gives them (a DataFrame's rows)."""
    rows = (lambda a, r: a.iloc[r]) if hasattr(X, "iloc") else (lambda a, r: a[r])
    F, R = np.empty((len(Q), len(y))), np.empty(len(y))
    for train, test in splits:
        model = make().fit(rows(X, train), y[train])
        R[test] = np.abs(y[test] - model.predict(rows(X, test)))
        F[:, test] = model.predict(Q)[:, None]
    return _cv_plus_bounds(F, R, levels)


@pytest.mark.parametrize("given", ["frame", "array"])
def test_cv_plus_with_categorical_features_equals_refits_on_the_data_as_given(given):
    # The clones are fitted on the training rows as given, not on their codes: a
    # DataFrame's categorical dtypes (declared categories, one absent from the data, an
    # ordered feature), or an array of strings with a mask, whose categories each split
    # learns from its own rows (a category held by two rows only is missing from some
    # splits' training parts, and from a query's).
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    n = 60
    x = rng.uniform(-1, 1, n)
    colour = np.array(["red", "green", "blue"], dtype=object)[rng.integers(0, 3, n)]
    colour[:2] = "violet"
    size = rng.integers(0, 4, n)
    y = np.sin(3 * x) + (colour == "red") + 0.3 * size + 0.2 * rng.normal(size=n)
    if given == "frame":
        X = pd.DataFrame({
            "x": x,
            "colour": pd.Categorical(colour, categories=["blue", "green", "red", "violet",
                                                         "white"]),
            "size": pd.Categorical(size, categories=[0, 1, 2, 3], ordered=True)})
        Q = X.iloc[[0, 5, 9, 30]]
        make = lambda: NadarayaWatsonRegressor(bandwidth="loo")
    else:
        X = np.column_stack([x, colour, size]).astype(object)
        Q = X[[0, 5, 9, 30]]
        make = lambda: NadarayaWatsonRegressor(bandwidth="loo",
                                               categorical_features=[False, True, True])
    levels = [0.5, 0.9]
    model = make().fit(X, y)
    splits = list(KFold(5, shuffle=True, random_state=0).split(np.arange(n)))
    y_pred, intervals = model.predict_interval(Q, confidence_level=levels, cv=splits)
    np.testing.assert_allclose(y_pred, model.predict(Q), rtol=1e-12)
    expected = _oracle_cv_plus_as_given(make, X, y, Q, levels, splits)
    np.testing.assert_allclose(intervals, expected, rtol=1e-9, atol=1e-9)


def test_cv_plus_refuses_distances():
    X, y, Q, _ = _data(n=30, d=1)
    D = np.abs(X - X.T)
    model = NadarayaWatsonRegressor(bandwidth=0.3, metric="precomputed").fit(D, y)
    with pytest.raises(NotImplementedError, match="precomputed"):
        model.predict_interval(D[:3], cv=3)


# -- the classifier's conformal sets against n explicit refits -------------------------------


def _oracle_scores(proba, score, own):
    """S(p, k) of every class by its definition, one class at a time: APS with the
    share ``own`` of the class's own mass (a number, or one per row of ``proba``); classes
    within the scores' tolerance (1e-8) of k as probable as k."""
    out = np.empty_like(proba)
    for index in np.ndindex(proba.shape[:-1]):
        p = proba[index]
        share = own[index] if np.ndim(own) else own
        for k in range(len(p)):
            before = sum(p[c] for c in range(len(p)) if p[c] > p[k] + 1e-8)
            out[index + (k,)] = 1 - p[k] if score == "lac" else before + share * p[k]
    return out


def _shares(include_last_label, n, n_queries, seed):
    """The shares of their own mass the training rows' and the queries' APS scores add,
    as ``predict_set`` draws them: one per training row, then one per query."""
    if include_last_label == "randomized":
        rng = np.random.RandomState(seed)
        return rng.uniform(size=n), rng.uniform(size=n_queries)
    return 1.0, 0.0 if include_last_label else 1.0


def _oracle_sets(make, X, y, Q, w, levels, score, include_last_label=True, seed=0):
    """CV+ sets with one row per fold: n refits, each row's score under its own refit."""
    train_share, query_share = _shares(include_last_label, len(y), len(Q), seed)
    classes = np.unique(y)
    rows = np.flatnonzero(w > 0)
    at_q, own = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        for i in rows:
            keep = np.arange(len(y)) != i
            model = make().fit(X[keep], y[keep], sample_weight=w[keep])
            columns = np.searchsorted(classes, model.classes_)  # a class may leave with i
            p_i = np.zeros(len(classes))
            p_i[columns] = model.predict_proba(X[i : i + 1])[0]
            p_q = np.zeros((len(Q), len(classes)))
            p_q[:, columns] = model.predict_proba(Q)
            share = train_share[i] if np.ndim(train_share) else train_share
            own.append(_oracle_scores(p_i, score, share)[np.searchsorted(classes, y[i])])
            at_q.append(_oracle_scores(p_q, score, query_share))
    S, s = np.array(at_q), np.array(own)  # (m, n_q, c), (m,)
    m = len(rows)
    sets = np.empty((len(Q), len(classes), len(levels)), dtype=bool)
    for k, level in enumerate(levels):
        below = (s[:, None, None] < S - 1e-8).sum(0)  # (n_q, c); closer: rounding ties
        sets[:, :, k] = below < _decimal(level) * (m + 1)
    return sets


@pytest.mark.parametrize("score, include_last_label", [
    ("lac", True), ("aps", True), ("aps", False), ("aps", "randomized")])
@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "epanechnikov"])
@pytest.mark.parametrize("weighted", [False, True])
def test_sets_by_windows_equal_explicit_refits(score, include_last_label, kernel, weighted):
    # The dense route's sets from the sums and the moves of the probabilities on the
    # training rows that can change a count; far queries (a key may hold half their
    # weight) from their attention rows. A class of one row leaves with it.
    from sklearn_nw import NadarayaWatsonClassifier

    rng = np.random.default_rng(2)
    X = rng.uniform(size=(200, 2))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=200) > 0.5, "b", "a").astype(object)
    y[X[:, 1] > 0.8] = "c"
    y[5] = "d"
    y = y.astype(str)
    w = rng.uniform(0.2, 3.0, 200) if weighted else np.ones(200)
    if weighted:
        w[[2, 9]] = 0.0
    far = {"gaussian": [2.5, -1.5], "laplacian": [4.0, -3.0], "epanechnikov": [1.3, -0.3]}
    Q = np.vstack([rng.uniform(size=(12, 2)), [far[kernel]]])
    levels = [0.5, 0.8, 0.9, 0.999]

    def make():
        return NadarayaWatsonClassifier(kernel=kernel, bandwidth=0.6, algorithm="brute")

    model = make().fit(X, y, sample_weight=w)
    moves = model.key_set_.leave_one_out_moves(Q)
    assert 0 < moves.rest.sum() < len(Q)
    y_pred, sets = model.predict_set(Q, confidence_level=levels, conformity_score=score,
                                     include_last_label=include_last_label, random_state=7)
    np.testing.assert_array_equal(y_pred, model.predict(Q))
    expected = _oracle_sets(make, X, y, Q, w, levels, score, include_last_label, seed=7)
    np.testing.assert_array_equal(sets, expected)


def _lattice_data(seed=1, copies=True):
    """70 rows on a 0.25 lattice in 2 features (many keys tied in distance at a query's
    k-th nearest), 6 copies of rows with targets of their own (or ``copies=False``: the
    distinct points alone, searched row by row), integer weights, and queries on and
    between the lattice's points."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.uniform(-1, 1, (70, 2)) * 4) / 4
    X = np.vstack([X, X[:6]]) if copies else np.unique(X, axis=0)
    y = np.sin(3 * X[:, 0]) + 0.3 * rng.normal(size=len(X))
    w = rng.integers(1, 3, len(X)).astype(float)
    Q = np.vstack([rng.uniform(-1.1, 1.1, (12, 2)), np.round(rng.uniform(-1, 1, (8, 2)) * 8) / 8,
                   X[:4]])
    return X, y, w, Q


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
@pytest.mark.parametrize("k", [3, 10])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("copies", [True, False])
def test_jackknife_plus_on_the_k_nearest_of_a_lattice_equals_explicit_refits(
        kernel, algorithm, k, weighted, copies):
    # Keys as near as a query's k-th share the last units (in every search: the
    # route's, the fits without each key, the training rows' own and the refits'), so
    # each fit without a key is the refit's, one of a tie or before it leaving (each
    # search holding the tied keys its own way gave bounds 0.1 to 0.26 apart).
    X, y, w, Q = _lattice_data(copies=copies)
    w = w if weighted else np.ones(len(y))

    def make():
        return NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.4, n_neighbors=k,
                                       algorithm=algorithm)

    _intervals_against_refits(make, X, y, Q, w, [0.5, 0.9], tolerance=1e-9)
    assert (make().fit(X, y).key_set_.route.inputs is None) == (not copies)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
@pytest.mark.parametrize("score", ["lac", "aps"])
def test_conformal_sets_on_the_k_nearest_of_a_lattice_equal_explicit_refits(algorithm,
                                                                              score):
    from sklearn_nw import NadarayaWatsonClassifier

    X, y, w, Q = _lattice_data(seed=2)
    labels = np.array(["a", "b", "c"])[np.digitize(y, np.quantile(y, [0.35, 0.7]))]
    levels = [0.5, 0.8, 0.9]

    def make():
        return NadarayaWatsonClassifier(bandwidth=0.4, n_neighbors=5, algorithm=algorithm)

    model = make().fit(X, labels, sample_weight=w)
    _, sets = model.predict_set(Q, confidence_level=levels, conformity_score=score)
    expected = _oracle_sets(make, X, labels, Q, w, levels, score)
    np.testing.assert_array_equal(sets, expected)


@pytest.mark.parametrize("score, include_last_label", [
    ("lac", True), ("aps", True), ("aps", "randomized")])
@pytest.mark.parametrize("kernel, bandwidth", [("gaussian", 0.3), ("epanechnikov", 0.25)])
@pytest.mark.parametrize("k", [1, 6])
@pytest.mark.parametrize("weights", ["unit", "fractional"])
def test_conformal_sets_on_the_k_nearest_equal_explicit_refits(score, include_last_label,
                                                                kernel, bandwidth, k,
                                                                weights):
    # The classifier's sets from the fits without each of a query's k nearest keys (the
    # next keys taken in); the training rows' probabilities without themselves likewise
    # (loo_proba_ with store_loo). Copies of rows share their labels.
    from sklearn_nw import NadarayaWatsonClassifier

    X, y, w, Q = _nearest_data(weights, seed=3)
    labels = np.array(["a", "b", "c"])[np.digitize(y, np.quantile(y, [0.35, 0.7]))]
    levels = [0.5, 0.75, 0.9]

    def make():
        return NadarayaWatsonClassifier(kernel=kernel, bandwidth=bandwidth, n_neighbors=k)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        model = make().fit(X, labels, sample_weight=w)
        y_pred, sets = model.predict_set(Q, confidence_level=levels, conformity_score=score,
                                         include_last_label=include_last_label,
                                         random_state=7)
        np.testing.assert_array_equal(y_pred, model.predict(Q))
        expected = _oracle_sets(make, X, labels, Q, w, levels, score, include_last_label,
                                seed=7)
        np.testing.assert_array_equal(sets, expected)
        stored = make().set_params(store_loo=True).fit(X, labels, sample_weight=w)
        refits = [make().fit(np.delete(X, i, 0), np.delete(labels, i),
                             sample_weight=np.delete(w, i)).predict_proba(X[i : i + 1])[0]
                  for i in np.flatnonzero(w > 0)]
    np.testing.assert_allclose(stored.loo_proba_[w > 0], refits, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("score", ["lac", "aps"])
def test_sparse_conformal_sets_equal_the_dense_ones(score):
    # As test_sparse_jackknife_plus_equals_the_dense_one, for the classifier's sets:
    # class probabilities of few classes (many ties of scores) and random shares.
    import scipy.sparse as sp

    from sklearn_nw._uncertainty import (
        conformal_sets,
        conformal_sets_sparse,
        conformity_scores,
        leave_one_out_fits,
        sparse_leave_one_out_fits,
    )

    rng = np.random.default_rng(0)
    alphas = np.array([0.1, 0.3, 0.5, 0.8])
    for _ in range(60):
        b, n, c = int(rng.integers(1, 6)), int(rng.integers(2, 30)), int(rng.integers(2, 4))
        dense = rng.uniform(0.01, 1.0, (b, n)) * (rng.random((b, n)) < rng.uniform(0.05, 1))
        dense[np.arange(b), rng.integers(0, n, b)] += 0.5
        one_hot = np.eye(c)[rng.integers(0, c, n)]
        share = rng.uniform(size=(b, 1))
        fits, missing = leave_one_out_fits(dense, one_hot)
        if missing.any():
            continue
        training = rng.choice([0.0, 0.25, 0.5, 1.0], n) if rng.random() < 0.5 \
            else rng.uniform(size=n)
        expected = conformal_sets(conformity_scores(fits, score, own_mass=share), training,
                                  alphas, 1e-8)
        held, keys, _, own = sparse_leave_one_out_fits(sp.csr_array(dense), one_hot)
        got = conformal_sets_sparse(conformity_scores(own, score, own_mass=share[:, 0]),
                                    conformity_scores(held, score, own_mass=share), keys,
                                    training, alphas, 1e-8)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("score, include_last_label", [
    ("lac", True), ("aps", True), ("aps", False), ("aps", "randomized")])
@pytest.mark.parametrize("kernel, bandwidth, algorithm", [
    ("gaussian", 0.4, "auto"), ("epanechnikov", 0.5, "kd_tree"),
    ("epanechnikov", 0.08, "brute"),  # lone neighbors: refits fall back
])
@pytest.mark.parametrize("weighted", [False, True])
def test_conformal_sets_equal_explicit_refits(score, include_last_label, kernel, bandwidth,
                                              algorithm, weighted):
    from sklearn_nw import NadarayaWatsonClassifier

    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] + 0.7 * rng.normal(size=40) > 0, "b", "a").astype(object)
    y[5] = "c"  # a class of one row: it leaves with that row
    y = y.astype(str)
    w = rng.uniform(0.2, 3.0, 40) if weighted else np.ones(40)
    if weighted:
        w[[2, 9]] = 0.0
    Q = rng.normal(size=(9, 2))
    levels = [0.5, 0.8, 0.9]

    def make():
        return NadarayaWatsonClassifier(kernel=kernel, bandwidth=bandwidth,
                                        algorithm=algorithm)

    model = make().fit(X, y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        y_pred, sets = model.predict_set(Q, confidence_level=levels, conformity_score=score,
                                         include_last_label=include_last_label,
                                         random_state=7)
        np.testing.assert_array_equal(y_pred, model.predict(Q))
        top = np.argmax(model.predict_proba(Q), axis=1)
    assert sets.shape == (9, 3, 3) and sets.dtype == bool
    np.testing.assert_array_equal(sets, _oracle_sets(make, X, y, Q, w, levels, score,
                                                     include_last_label, seed=7))
    # Higher levels give larger sets; APS sets with the last label always hold the most
    # probable class.
    assert np.all(sets[:, :, 0] <= sets[:, :, 2])
    if score == "aps" and include_last_label is True:
        assert np.all(sets[np.arange(9), top])


@pytest.mark.parametrize("kind", ["balloon", "sample_point"])
@pytest.mark.parametrize("score, include_last_label", [("lac", True), ("aps", "randomized")])
@pytest.mark.parametrize("weights", ["fractional", "unit"])
def test_conformal_sets_with_an_adaptive_bandwidth_equal_explicit_refits(
        kind, score, include_last_label, weights):
    from sklearn_nw import NadarayaWatsonClassifier

    X, _, Q, w = _adaptive_data("repeated", weights, seed=2)
    y = np.where(X[:, 0] + 0.5 * np.random.default_rng(2).normal(size=len(X)) > 0, 1, 0)
    levels = [0.5, 0.8, 0.9]

    def make():
        return NadarayaWatsonClassifier(kernel="epanechnikov", bandwidth=AdaptiveBandwidth(
            kind, n_neighbors=5, base=np.array([0.3, 0.5]) * X.std(0)))

    model = make().fit(X, y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        _, sets = model.predict_set(Q, confidence_level=levels, conformity_score=score,
                                    include_last_label=include_last_label, random_state=7)
    np.testing.assert_array_equal(sets, _oracle_sets(make, X, y, Q, w, levels, score,
                                                     include_last_label, seed=7))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_sample_point_intervals_and_sets_on_windows_equal_explicit_refits(kernel):
    # Enough rows that each query's windows hold a part of them: the bounds and sets
    # decided on those rows' moves alone (held per chunk of queries; chunks of a few
    # queries, some left to the fits without each row) are the refits'.
    from sklearn_nw import NadarayaWatsonClassifier

    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, (150, 2))
    y = np.sin(5 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=150)
    Q = np.vstack([rng.uniform(-0.1, 1.1, (12, 2)), X[:3]])
    w = np.ones(150)
    bandwidth = AdaptiveBandwidth("sample_point", n_neighbors=12, base=np.full(2, 0.3))
    levels = [0.8, 0.9]
    regressor = NadarayaWatsonRegressor(kernel=kernel, bandwidth=bandwidth).fit(X, y)
    assert regressor.key_set_.leave_one_out_blocks
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    classifier = NadarayaWatsonClassifier(kernel=kernel, bandwidth=bandwidth).fit(X, labels)
    with sklearn.config_context(working_memory=0.05):  # chunks of a few queries
        _, intervals = regressor.predict_interval(Q, confidence_level=levels)
        _, lac = classifier.predict_set(Q, confidence_level=levels)
        _, aps = classifier.predict_set(Q, confidence_level=levels, conformity_score="aps")
    expected = _oracle_jackknife_plus(
        lambda: NadarayaWatsonRegressor(kernel=kernel, bandwidth=bandwidth), X, y, Q, w,
        levels)
    np.testing.assert_allclose(intervals, expected, rtol=1e-10, atol=1e-10)
    for sets, score in ((lac, "lac"), (aps, "aps")):
        np.testing.assert_array_equal(sets, _oracle_sets(
            lambda: NadarayaWatsonClassifier(kernel=kernel, bandwidth=bandwidth), X,
            labels, Q, w, levels, score))


def test_aps_takes_classes_within_the_tolerance_as_tied():
    # Probabilities equal in exact arithmetic (1/2 and 1/2 of a top-hat kernel) round
    # differently in the fits without each row and in a refit: within the scores'
    # tolerance neither class counts as more probable than the other.
    from sklearn_nw._uncertainty import conformity_score_bound, conformity_scores

    p = np.array([[0.5, 0.5 - 1e-16], [0.5 - 1e-16, 0.5]])
    scores = conformity_scores(p, "aps", own_mass=0.3, tie=1e-8)
    np.testing.assert_allclose(scores, 0.3 * p, rtol=1e-15)
    assert not np.allclose(conformity_scores(p, "aps", own_mass=0.3), 0.3 * p)
    # The bound holds every move of the probabilities within D.
    D = np.full_like(p, 1e-3)
    bound = conformity_score_bound(p, D, "aps", own_mass=0.3, tie=1e-8)
    rng = np.random.default_rng(0)
    for _ in range(200):
        move = rng.uniform(-1e-3, 1e-3, size=(2, 1)) * np.array([1.0, -1.0])
        moved = conformity_scores(p + move, "aps", own_mass=0.3, tie=1e-8)
        assert np.all(np.abs(moved - scores) <= bound + 1e-15)


def test_aps_sets_at_tied_probabilities_equal_explicit_refits():
    # A top-hat kernel with integer weights: many queries' probabilities tie exactly.
    from sklearn_nw import NadarayaWatsonClassifier

    rng = np.random.default_rng(22)
    X = rng.normal(size=(30, 1))
    y = np.where(X[:, 0] + 0.7 * rng.normal(size=30) > 0, "b", "a")
    w = rng.integers(1, 4, 30).astype(float)
    Q = np.vstack([rng.normal(size=(12, 1)), X[:6]])

    def make():
        return NadarayaWatsonClassifier(kernel="tophat", bandwidth=0.4, algorithm="brute")

    model = make().fit(X, y, sample_weight=w)
    for last in (True, False, "randomized"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            _, sets = model.predict_set(Q, confidence_level=[0.5, 0.8], conformity_score="aps",
                                        include_last_label=last, random_state=7)
        np.testing.assert_array_equal(sets, _oracle_sets(make, X, y, Q, w, [0.5, 0.8], "aps",
                                                         last, seed=7))


def test_randomized_aps_sets_are_small_where_the_fits_are_confident():
    # Iris at confidence 0.9 with a learned bandwidth: the APS sets with the last label
    # hold every class (the training rows' scores are all near 1); randomized, they
    # cover held-out labels at about the level with sets of about one class, and the
    # same seed gives the same sets.
    from sklearn.datasets import load_iris
    from sklearn.model_selection import train_test_split

    from sklearn_nw import NadarayaWatsonClassifier

    X, y = load_iris(return_X_y=True)
    X_fit, X_test, y_fit, y_test = train_test_split(X, y, test_size=0.5, random_state=0,
                                                    stratify=y)
    model = NadarayaWatsonClassifier(bandwidth="loo").fit(X_fit, y_fit)
    sizes, covered = {}, {}
    for name, include in (("last", True), ("randomized", "randomized")):
        _, sets = model.predict_set(X_test, 0.9, conformity_score="aps",
                                    include_last_label=include, random_state=0)
        sizes[name] = sets[:, :, 0].sum(1).mean()
        covered[name] = sets[np.arange(len(y_test)), y_test, 0].mean()
    again = model.predict_set(X_test, 0.9, conformity_score="aps",
                              include_last_label="randomized", random_state=0)[1]
    np.testing.assert_array_equal(again[:, :, 0].sum(1).mean(), sizes["randomized"])
    assert sizes["last"] == 3 and covered["last"] == 1.0
    assert sizes["randomized"] < 1.2 and covered["randomized"] >= 0.85


def test_conformal_sets_refuse_bad_input():
    from sklearn_nw import NadarayaWatsonClassifier

    X, y = np.arange(20.0)[:, None], np.arange(20) % 2
    model = NadarayaWatsonClassifier(bandwidth=1.0).fit(X, y)
    with pytest.raises(ValueError, match="conformity_score must be one of"):
        model.predict_set(X, conformity_score="raps")
    with pytest.raises(ValueError, match="include_last_label must be True, False or"):
        model.predict_set(X, conformity_score="aps", include_last_label="random")
    with pytest.raises(ValueError, match="confidence_level must be"):
        model.predict_set(X, confidence_level=1.0)
    knn = NadarayaWatsonClassifier(bandwidth=1.0, n_neighbors=3, metric="precomputed")
    knn.fit(np.abs(X - X.T), y)
    with pytest.raises(NotImplementedError, match="n_neighbors=3 and precomputed"):
        knn.predict_set(np.abs(X - X.T))


def test_the_training_points_own_pass_does_not_warn():
    # A row of zero weight far from the others is out of every kernel's reach: its
    # in-sample fit falls back, but it is no query of the user's.
    X = np.array([[0.0], [0.1], [0.2], [0.3], [5.0]])
    y = np.array([0.0, 1.0, 0.0, 1.0, 3.0])
    model = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=0.25,
                                    residual_variance="hc2")
    model.fit(X, y, sample_weight=[1.0, 1.0, 1.0, 1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict([[0.15]], return_std=True)
        model.predict_interval([[0.15]])
    with pytest.warns(EmptyNeighborhoodWarning):
        model.predict_interval([[3.0]])


def test_conformal_sets_in_float32_agree_with_float64():
    from sklearn_nw import NadarayaWatsonClassifier

    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    y = (X[:, 0] + 0.5 * rng.normal(size=60) > 0).astype(int)
    Q = rng.normal(size=(20, 2))
    model = NadarayaWatsonClassifier(bandwidth=0.5)
    for score in ("lac", "aps"):
        s64 = model.fit(X, y).predict_set(Q, [0.5, 0.9], conformity_score=score)[1]
        s32 = model.fit(X.astype(np.float32), y).predict_set(
            Q.astype(np.float32), [0.5, 0.9], conformity_score=score)[1]
        # A class may flip only where its score ties a training score to float32's
        # precision: none here.
        np.testing.assert_array_equal(s32, s64)


# -- conventional and robust bias-corrected confidence intervals ------------------------------
# The oracle follows nprobust's lprobust (Calonico, Cattaneo and Farrell) one evaluation
# point and one training point at a time; the radial kernels of the package are its
# product kernels in one feature.

PROFILES = {
    "epanechnikov": lambda u: max(0.0, 1 - u * u),
    "triangular": lambda u: max(0.0, 1 - u),
    "tophat": lambda u: 1.0 if u <= 1 else 0.0,
    "gaussian": lambda u: math.exp(-0.5 * u * u),
}


def _monomials(u, degree):
    """[1, u_k, u_k u_l (k <= l)] up to ``degree``."""
    d = len(u)
    out = [1.0]
    if degree >= 1:
        out += list(u)
    if degree >= 2:
        out += [u[k] * u[m] for k in range(d) for m in range(k, d)]
    return np.array(out)


def _oracle_bias_corrected(X, y, Q, h, b, w, p, kernel, vce, J=3, design_scale=1.0):
    """The estimates and standard errors at each query from the definitions; the
    polynomials in ``design_scale`` times the differences in units of h (an intercept
    and its equivalent kernel do not change with the scale of a design's columns)."""
    n, d = X.shape
    rows = []
    for x in Q:
        U = (X - x) / h  # differences in units of h
        dist_h = np.sqrt((U**2).sum(1))
        dist_b = np.sqrt((((X - x) / b) ** 2).sum(1))
        kh = np.array([w[i] * PROFILES[kernel](dist_h[i]) for i in range(n)])
        kb = np.array([w[i] * PROFILES[kernel](dist_b[i]) for i in range(n)])
        win = [i for i in range(n) if kh[i] > 0 or kb[i] > 0]
        zp = {i: _monomials(design_scale * U[i], p) for i in win}
        zq = {i: _monomials(design_scale * U[i], p + 1) for i in win}
        P = len(zp[win[0]])
        Gp_inv = np.linalg.inv(sum(kh[i] * np.outer(zp[i], zp[i]) for i in win))
        Gq_inv = np.linalg.inv(sum(kb[i] * np.outer(zq[i], zq[i]) for i in win))
        beta_p = Gp_inv @ sum(kh[i] * zp[i] * y[i] for i in win)
        beta_q = Gq_inv @ sum(kb[i] * zq[i] * y[i] for i in win)
        moments = sum(kh[i] * np.outer(zp[i], zq[i][P:]) for i in win)
        l_cl, l_bc, r_h, r_b = {}, {}, {}, {}
        for i in win:
            l_cl[i] = (Gp_inv @ (kh[i] * zp[i]))[0]
            l_bc[i] = (Gp_inv @ (kh[i] * zp[i] - moments @ (Gq_inv @ (kb[i] * zq[i]))[P:]))[0]
            e_h, e_b = y[i] - zp[i] @ beta_p, y[i] - zq[i] @ beta_q
            lev = kh[i] * zp[i] @ Gp_inv @ zp[i]
            m = len(win)
            if vce == "nn":
                others = [j for j in win if j != i]
                dist = {j: math.sqrt(sum((X[j, k] - X[i, k]) ** 2 / h**2 for k in range(d)))
                        for j in others}
                reach = sorted(dist.values())[min(J, m - 1) - 1]
                near = [j for j in others if dist[j] <= reach]
                r_h[i] = r_b[i] = (math.sqrt(len(near) / (len(near) + 1))
                                   * (y[i] - np.mean(y[near])))
            else:
                factor_h = factor_b = {"hc0": 1.0, "hc2": (1 - lev) ** -0.5,
                                       "hc3": 1 / (1 - lev)}.get(vce)
                if vce == "hc1":
                    factor_h = math.sqrt(m / (m - P))
                    factor_b = math.sqrt(m / (m - len(zq[i])))
                r_h[i], r_b[i] = factor_h * e_h, factor_b * e_b
        rows.append([sum(l_cl[i] * y[i] for i in win), sum(l_bc[i] * y[i] for i in win),
                     math.sqrt(sum(l_cl[i] ** 2 * r_h[i] ** 2 for i in win)),
                     math.sqrt(sum(l_bc[i] ** 2 * r_b[i] ** 2 for i in win))])
    return np.array(rows).T  # tau_cl, tau_bc, se_cl, se_rb


@pytest.mark.parametrize("kernel", list(PROFILES))
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("variance", VARIANCES)
@pytest.mark.parametrize("bias_bandwidth", [None, 0.5])
def test_bias_corrected_intervals_equal_the_oracle_in_one_feature(kernel, degree, variance,
                                                                   bias_bandwidth):
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, 80)
    y = np.sin(3 * np.pi * x / 2) / (1 + 18 * x**2 * (np.sign(x) + 1)) + 0.2 * rng.normal(size=80)
    Q = np.array([[-0.9], [-0.4], [0.0], [0.35], [0.85]])
    model = NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.35, degree=degree,
                                    residual_variance=variance).fit(x[:, None], y)
    expected = _oracle_bias_corrected(x[:, None], y, Q, 0.35, bias_bandwidth or 0.35,
                                      np.ones(80), degree, kernel, variance)
    for k, correction in enumerate(["conventional", "robust"]):
        center, intervals, std = model.predict_confidence_interval(
            Q, [0.9, 0.95], bias_correction=correction, bias_bandwidth=bias_bandwidth,
            return_std=True)
        np.testing.assert_allclose(center, expected[k], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(std, expected[2 + k], rtol=1e-9)
        z = np.array([1.6448536269514722, 1.959963984540054])
        np.testing.assert_allclose(intervals[:, 0], center[:, None] - z * std[:, None])
        np.testing.assert_allclose(intervals[:, 1], center[:, None] + z * std[:, None])


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("variance", ["nn", "hc1", "hc3"])
def test_bias_corrected_intervals_in_two_features_with_weights(kernel, degree, variance):
    X, y, Q, w = _data(n=70, d=2)
    h, b = np.array([0.5, 0.6]), np.array([0.7, 0.8])
    model = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h, degree=degree,
                                    residual_variance=variance).fit(X, y, sample_weight=w)
    Q = Q[1:5]
    expected = _oracle_bias_corrected(X / h, y, Q / h, 1.0, b / h, w, degree, kernel, variance)
    center, _, std = model.predict_confidence_interval(Q, bias_bandwidth=b, return_std=True)
    np.testing.assert_allclose(center, expected[1], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(std, expected[3], rtol=1e-9)
    center, _, std = model.predict_confidence_interval(Q, bias_correction="conventional",
                                                       bias_bandwidth=b, return_std=True)
    np.testing.assert_allclose(center, expected[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(std, expected[2], rtol=1e-9)
    # The conventional estimate is the (unbounded) local polynomial: the prediction.
    np.testing.assert_allclose(center, model.predict(Q), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("variance", ["nn", "hc1", "hc3"])
def test_bias_corrected_intervals_with_a_bandwidth_far_wider_than_a_feature(degree,
                                                                          variance):
    # A learned bandwidth can be far wider than a feature's spread (a feature the fit
    # takes as linear): in units of h its design column is tiny and its square tinier,
    # a moment matrix of condition number far above 1e12 though the design has full
    # rank. Its intervals are those of the same fit with the columns rescaled (each
    # query was refused as singular before the moments were taken to a unit diagonal).
    X, y, Q, w = _data(n=70, d=2)
    h = np.array([0.5, 1e4])
    model = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=h, degree=degree,
                                    residual_variance=variance).fit(X, y, sample_weight=w)
    Q = Q[1:5]
    expected = _oracle_bias_corrected(X / h, y, Q / h, 1.0, 1.0, w, degree, "epanechnikov",
                                      variance, design_scale=h)
    for k, correction in enumerate(["conventional", "robust"]):
        center, _, std = model.predict_confidence_interval(Q, bias_correction=correction,
                                                           return_std=True)
        np.testing.assert_allclose(center, expected[k], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(std, expected[2 + k], rtol=1e-8)


@pytest.mark.parametrize("params, call, error, match", [
    ({"degree": 2}, {}, NotImplementedError, "degree=2"),
    ({"n_neighbors": 5}, {}, NotImplementedError, "n_neighbors"),
    ({}, {"bias_correction": "both"}, ValueError, "bias_correction must be"),
    ({}, {"bias_bandwidth": -1.0}, ValueError, "bias_bandwidth must be"),
    ({}, {"bias_bandwidth": [0.1, 0.2, 0.3]}, ValueError, "bias_bandwidth must be"),
    ({}, {"confidence_level": 95}, ValueError, "confidence_level must be"),
])
def test_bias_corrected_intervals_refuse_bad_input(params, call, error, match):
    X, y, Q, _ = _data(n=40)
    model = NadarayaWatsonRegressor(**{"bandwidth": 0.3, **params}).fit(X, y)
    with pytest.raises(error, match=match):
        model.predict_confidence_interval(Q, **call)


def test_bias_corrected_intervals_refuse_singular_windows():
    X = np.array([[0.0], [0.1], [0.2], [3.0], [3.05]])
    model = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=0.3, degree=1)
    model.fit(X, [0.0, 1.0, 0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="1 of 2 queries have a singular local design"):
        model.predict_confidence_interval([[0.1], [3.02]])


def test_bias_corrected_intervals_in_float32_agree_with_float64():
    X, y, Q, _ = _data(n=80, d=2)
    model = NadarayaWatsonRegressor(bandwidth=0.4, degree=1, residual_variance="hc2")
    c64, i64 = model.fit(X, y).predict_confidence_interval(Q)
    c32, i32 = model.fit(X.astype(np.float32), y).predict_confidence_interval(
        Q.astype(np.float32))
    np.testing.assert_allclose(c32, c64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(i32, i64, rtol=1e-4, atol=1e-4)


# -- the leave-one-out state kept at fit (store_loo) ----------------------------------------

_STORED = {
    "dense": {"bandwidth": 0.2},
    "k-d tree": {"kernel": "epanechnikov", "bandwidth": 0.35, "algorithm": "kd_tree"},
    # From the cell list's sums: the in-sample fits and each row's total weight.
    "cell list": {"kernel": "epanechnikov", "bandwidth": 0.35, "algorithm": "cell_list"},
    "local linear": {"bandwidth": 0.25, "degree": 1},
    # On a compact kernel's keys in reach, each row's fit without itself from its design.
    "local linear, k-d tree": {"kernel": "epanechnikov", "bandwidth": 0.6, "degree": 1,
                               "algorithm": "kd_tree"},
    "local quadratic, ball tree": {"kernel": "tricube", "bandwidth": 0.8, "degree": 2,
                                   "algorithm": "ball_tree"},
    "bounded local quadratic": {"bandwidth": 0.4, "degree": 2, "bounded": True},
    "balloon": {"bandwidth": AdaptiveBandwidth("balloon", n_neighbors=8)},
    "sample-point": {"bandwidth": AdaptiveBandwidth("sample_point", n_neighbors=8)},
    "balloon local linear": {"bandwidth": AdaptiveBandwidth("balloon", n_neighbors=12),
                             "degree": 1},
}


@pytest.mark.parametrize("case", list(_STORED))
def test_the_stored_leave_one_out_predictions_are_explicit_refits(case):
    # loo_prediction_ by its definition: n refits at the fitted bandwidth (its rule, k
    # and c held for an adaptive one), each predicting its left-out row.
    X, y, _, w = _data(n=30, d=2)
    w[4] = 0.0
    params = _STORED[case]
    model = NadarayaWatsonRegressor(**params, store_loo=True).fit(X, y, sample_weight=w)
    given = params["bandwidth"]
    held = (AdaptiveBandwidth(given.kind, n_neighbors=given.n_neighbors,
                              base=model.bandwidth_)  # (the base metric as the fit's)
            if isinstance(given, AdaptiveBandwidth) else model.bandwidth_)
    _, own = _refits_without_each_row(
        lambda: NadarayaWatsonRegressor(**dict(params, bandwidth=held)), X, y, X, w)
    np.testing.assert_allclose(model.loo_prediction_, own, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("degree, bandwidth", [(1, 0.3), (2, 0.35), (2, 0.45)])
def test_leave_one_out_predictions_in_reach_with_singular_designs_are_refits(degree,
                                                                            bandwidth):
    # Few keys in reach of a compact kernel: some rows' designs are singular with or
    # without themselves (refitted), a row of weight 0 keeps its own fit.
    X, y, _, w = _data(n=30, d=2)
    w[4] = 0.0
    params = {"kernel": "tricube", "bandwidth": bandwidth, "degree": degree,
              "algorithm": "kd_tree"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalFitWarning)
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        model = NadarayaWatsonRegressor(**params, store_loo=True).fit(X, y, sample_weight=w)
        _, own = _refits_without_each_row(lambda: NadarayaWatsonRegressor(**params),
                                          X, y, X, w)
    np.testing.assert_allclose(model.loo_prediction_, own, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", list(_STORED))
def test_a_stored_leave_one_out_state_changes_no_uncertainty(case):
    # The same standard errors (every residual variance), intervals and effects, to the
    # last bit, whether fit kept the training points' state or each call computes it.
    X, y, Q, w = _data(n=50, d=2)
    w[4] = 0.0
    params = _STORED[case]
    plain = NadarayaWatsonRegressor(**params).fit(X, y, sample_weight=w)
    stored = NadarayaWatsonRegressor(**params, store_loo=True).fit(X, y, sample_weight=w)
    assert "loo_prediction_" not in vars(plain)
    for variance in VARIANCES:
        plain.set_params(residual_variance=variance)
        stored.set_params(residual_variance=variance)  # a variance of its own after fit
        np.testing.assert_array_equal(stored.predict(Q, return_std=True),
                                      plain.predict(Q, return_std=True))
    if case != "balloon":  # (whose effects at degree 0 are refused: tested elsewhere)
        np.testing.assert_array_equal(stored.marginal_effects(Q, return_std=True),
                                      plain.marginal_effects(Q, return_std=True))
    np.testing.assert_array_equal(stored.predict_interval(Q, [0.8, 0.9])[1],
                                  plain.predict_interval(Q, [0.8, 0.9])[1])
    before = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in vars(stored).items()}
    stored.predict(Q, return_std=True)
    stored.predict_interval(Q)
    for k, v in vars(stored).items():  # the calls change nothing
        assert (np.array_equal(v, before[k]) if isinstance(v, np.ndarray)
                else v is before[k]), k


def test_a_stored_leave_one_out_state_of_the_classifier_changes_no_set():
    X, y, Q, w = _data(n=60, d=2)
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    for params in ({"bandwidth": 0.2}, {"bandwidth": AdaptiveBandwidth(n_neighbors=8)}):
        plain = NadarayaWatsonClassifier(**params).fit(X, labels, sample_weight=w)
        stored = NadarayaWatsonClassifier(**params, store_loo=True).fit(X, labels,
                                                                        sample_weight=w)
        given = params["bandwidth"]
        held = (AdaptiveBandwidth(n_neighbors=given.n_neighbors, base=stored.bandwidth_)
                if isinstance(given, AdaptiveBandwidth) else stored.bandwidth_)
        own = np.stack([  # each row's probabilities by a refit without it
            NadarayaWatsonClassifier(bandwidth=held).fit(
                np.delete(X, j, 0), np.delete(labels, j), sample_weight=np.delete(w, j)
            ).predict_proba(X[j : j + 1])[0] for j in range(len(X))])
        np.testing.assert_allclose(stored.loo_proba_, own, rtol=1e-9, atol=1e-12)
        for score in ("lac", "aps"):
            np.testing.assert_array_equal(
                stored.predict_set(Q, [0.8, 0.9], conformity_score=score)[1],
                plain.predict_set(Q, [0.8, 0.9], conformity_score=score)[1])


def test_the_cv_estimators_store_the_chosen_fits_state():
    X, y, Q, _ = _data(n=60, d=1)
    cv = NadarayaWatsonRegressorCV(store_loo=True).fit(X, y)
    plain = NadarayaWatsonRegressorCV().fit(X, y)
    np.testing.assert_array_equal(cv.predict_interval(Q)[1], plain.predict_interval(Q)[1])
    np.testing.assert_array_equal(cv.loo_prediction_,
                                  plain._fits_without_each_row(plain.y_fit_))
    # The candidates' fits keep nothing: only the chosen one's.
    assert all(not p.get("store_loo") for p in cv.cv_results_["params"])


def test_a_refit_without_store_loo_forgets_the_state():
    X, y, Q, _ = _data(n=40, d=1)
    model = NadarayaWatsonRegressor(bandwidth=0.2, residual_variance="hc2", store_loo=True)
    model.fit(X, y)
    assert {"loo_prediction_", "_in_sample_fit", "_nn_neighbors"} <= set(vars(model))
    model.set_params(store_loo=False).fit(X[:30], y[:30])
    assert not {"loo_prediction_", "_in_sample_fit", "_nn_neighbors"} & set(vars(model))
    fresh = NadarayaWatsonRegressor(bandwidth=0.2, residual_variance="hc2").fit(X[:30], y[:30])
    np.testing.assert_array_equal(model.predict(Q, return_std=True)[1],
                                  fresh.predict(Q, return_std=True)[1])


def test_store_loo_without_fits_from_the_fit_keeps_the_standard_errors_state():
    # Local polynomials on the k nearest: no fit without a row from the fit with it, so
    # no loo_prediction_ and predict_interval refuses; the standard errors' state is kept.
    X, y, Q, _ = _data(n=40, d=2)
    model = NadarayaWatsonRegressor(bandwidth=0.3, n_neighbors=8, degree=1,
                                    residual_variance="hc3", store_loo=True).fit(X, y)
    assert "loo_prediction_" not in vars(model) and "_in_sample_fit" in vars(model)
    plain = NadarayaWatsonRegressor(bandwidth=0.3, n_neighbors=8, degree=1,
                                    residual_variance="hc3").fit(X, y)
    np.testing.assert_array_equal(model.predict(Q, return_std=True)[1],
                                  plain.predict(Q, return_std=True)[1])
    with pytest.raises(NotImplementedError, match="n_neighbors=8 and degree=1"):
        model.predict_interval(Q)
    with pytest.raises(InvalidParameterError, match="store_loo"):
        NadarayaWatsonRegressor(store_loo="yes").fit(X, y)


@pytest.mark.parametrize("case", ["dense", "k-d tree", "balloon"])
def test_a_stored_state_spares_the_calls_the_training_points_pass(case, monkeypatch):
    X, y, Q, _ = _data(n=50, d=2)
    model = NadarayaWatsonRegressor(**_STORED[case], residual_variance="hc2",
                                    store_loo=True).fit(X, y)
    expected = model.predict(Q, return_std=True), model.predict_interval(Q)

    def no_pass(*args, **kwargs):
        raise AssertionError("a pass over the training points")

    for name in ("_in_sample_sums", "_fits_without_each_row",
                 "_leave_one_out_at_training_points"):
        monkeypatch.setattr(NadarayaWatsonRegressor, name, no_pass)
    pool_in_chunks = NadarayaWatsonRegressor._pool_in_chunks

    def queries_only(self, X, *args, **kwargs):  # the attention path, not on the keys
        return no_pass() if X is self.key_set_.X else pool_in_chunks(self, X, *args, **kwargs)

    monkeypatch.setattr(NadarayaWatsonRegressor, "_pool_in_chunks", queries_only)
    np.testing.assert_array_equal(model.predict(Q, return_std=True), expected[0])
    np.testing.assert_array_equal(model.predict_interval(Q)[1], expected[1][1])


def test_a_stored_state_spares_the_nearest_neighbor_variance_its_search(monkeypatch):
    # store_loo keeps each row's nearest others at the residual_neighbors of the fit: the
    # nn standard errors then search nothing, as computed per call; another count after
    # fit searches again.
    import sklearn_nw._regression as regression

    X, y, Q, w = _data(n=50, d=2)
    w[[4, 9]] = 0.0
    stored = NadarayaWatsonRegressor(bandwidth=0.3, residual_variance="nn",
                                     store_loo=True).fit(X, y, sample_weight=w)
    plain = NadarayaWatsonRegressor(bandwidth=0.3, residual_variance="nn").fit(
        X, y, sample_weight=w)
    expected = plain.predict(Q, return_std=True)
    five = plain.set_params(residual_neighbors=5).predict(Q, return_std=True)
    search = regression.nearest_others

    def no_search(*args, **kwargs):
        raise AssertionError("a search of the nearest others")

    monkeypatch.setattr(regression, "nearest_others", no_search)
    np.testing.assert_array_equal(stored.predict(Q, return_std=True), expected)
    monkeypatch.setattr(regression, "nearest_others", search)
    np.testing.assert_array_equal(
        stored.set_params(residual_neighbors=5).predict(Q, return_std=True), five)


@pytest.mark.parametrize("n_classes", [2, 3, 10])
def test_aps_scores_are_their_definition_with_ties_and_shares(n_classes):
    # Computed class by class over contiguous blocks: the oracle's sums, ties (a class
    # as probable as k is not above it) and a share per row broadcast.
    from sklearn_nw._uncertainty import conformity_scores

    rng = np.random.default_rng(n_classes)
    proba = rng.dirichlet(np.ones(n_classes), size=(6, 5))
    proba[0, :, 1] = proba[0, :, 0]  # ties
    proba[1] = 1.0 / n_classes
    share = rng.uniform(size=(6, 5))
    for own in (1.0, 0.0, share):
        np.testing.assert_allclose(conformity_scores(proba, "aps", own_mass=own),
                                   _oracle_scores(proba, "aps", own), rtol=1e-13, atol=1e-15)
