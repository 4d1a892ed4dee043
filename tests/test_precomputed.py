"""metric="precomputed": distance matrices and sparse neighbor graphs instead of features."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from sklearn.metrics import pairwise_distances
from sklearn.neighbors import KNeighborsTransformer, RadiusNeighborsTransformer
from sklearn.pipeline import make_pipeline

from sklearn_nw import (
    EmptyNeighborhoodWarning,
    NadarayaWatsonClassifier,
    NadarayaWatsonRegressor,
)

H = 0.2


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    w = rng.integers(0, 3, n).astype(float)
    return X, y, w, rng.uniform(size=(40, 2))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_dense_distances_equal_the_euclidean_model(kernel):
    X, y, w, Q = _data()
    euclidean = NadarayaWatsonRegressor(kernel, bandwidth=H, algorithm="brute").fit(X, y, w)
    precomputed = NadarayaWatsonRegressor(kernel, bandwidth=H, metric="precomputed")
    precomputed.fit(pairwise_distances(X), y, w)
    pred, attention = precomputed.predict(pairwise_distances(Q, X), return_attention=True)
    expected, expected_attention = euclidean.predict(Q, return_attention=True)
    assert_allclose(pred, expected, rtol=1e-12)
    assert sp.issparse(attention)
    assert abs(attention - expected_attention).max() < 1e-14
    # Leave-one-out: a row's own entry loses one unit of its weight.
    loo = precomputed.attention_weights_
    assert abs(loo - euclidean.attention_weights_).max() < 1e-14


@pytest.mark.parametrize("estimator", [NadarayaWatsonRegressor, NadarayaWatsonClassifier])
def test_k_nearest_graph_equals_the_euclidean_k_nearest(estimator):
    X, y, w, Q = _data()
    target = y if estimator is NadarayaWatsonRegressor else np.digitize(y, [0.3, 1.0])
    graph = KNeighborsTransformer(n_neighbors=30, mode="distance").fit(X)
    euclidean = estimator(bandwidth=H, n_neighbors=7).fit(X, target, w)
    precomputed = estimator(bandwidth=H, n_neighbors=7, metric="precomputed")
    precomputed.fit(graph.transform(X), target, w)
    method = "predict" if estimator is NadarayaWatsonRegressor else "predict_proba"
    assert_allclose(getattr(precomputed, method)(graph.transform(Q)),
                    getattr(euclidean, method)(Q), rtol=1e-12, atol=1e-15)


def test_pipeline_with_a_neighbors_transformer():
    # The KNeighborsTransformer pattern: any (approximate) search that emits a sparse
    # distance graph plugs in front of the estimator.
    X, y, _, Q = _data()
    pipe = make_pipeline(
        KNeighborsTransformer(n_neighbors=20, mode="distance"),
        NadarayaWatsonRegressor(bandwidth=H, n_neighbors=10, metric="precomputed"),
    ).fit(X, y)
    expected = NadarayaWatsonRegressor(bandwidth=H, n_neighbors=10).fit(X, y).predict(Q)
    assert_allclose(pipe.predict(Q), expected, rtol=1e-12)
    # In-sample rows store the point itself at an explicit distance 0: it counts.
    in_sample = NadarayaWatsonRegressor(bandwidth=H, n_neighbors=10).fit(X, y).predict(X)
    assert_allclose(pipe.predict(X), in_sample, rtol=1e-12)


def test_radius_graph_with_a_compact_kernel():
    X, y, w, Q = _data()
    Q[0] = [5.0, 5.0]  # out of reach: its row stores nothing
    graph = RadiusNeighborsTransformer(radius=H, mode="distance").fit(X)
    tree = NadarayaWatsonRegressor("epanechnikov", bandwidth=H, algorithm="kd_tree")
    model = NadarayaWatsonRegressor("epanechnikov", bandwidth=H, metric="precomputed")
    model.fit(graph.transform(X), y, w)
    with pytest.raises(ValueError, match="Row 0 of the precomputed distances stores no"):
        model.predict(graph.transform(Q))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        expected = tree.fit(X, y, w).predict(Q[1:])
    assert_allclose(model.predict(graph.transform(Q[1:])), expected, rtol=1e-12)


def test_precomputed_bad_input():
    X, y, w, Q = _data()
    D = pairwise_distances(X)
    for bandwidth in ("scott", "loo", [0.1, 0.2]):
        with pytest.raises(ValueError, match="bandwidth"):
            NadarayaWatsonRegressor(bandwidth=bandwidth, metric="precomputed").fit(D, y)
    with pytest.raises(ValueError, match="Negative values in data"):
        NadarayaWatsonRegressor(bandwidth=H, metric="precomputed").fit(-D, y)
    with pytest.raises(ValueError, match="square"):
        NadarayaWatsonRegressor(bandwidth=H, metric="precomputed").fit(D[:, :-1], y)
    model = NadarayaWatsonRegressor(bandwidth=H, metric="precomputed").fit(D, y)
    with pytest.raises(ValueError, match="Negative values in data"):
        model.predict(-pairwise_distances(Q, X))
    with pytest.raises(ValueError, match="features"):
        model.predict(pairwise_distances(Q, X)[:, :-1])
    # A graph with fewer units of weight than n_neighbors in some row.
    graph = KNeighborsTransformer(n_neighbors=5, mode="distance").fit(X)
    knn = NadarayaWatsonRegressor(bandwidth=H, n_neighbors=5, metric="precomputed")
    knn.fit(graph.transform(X), y, w)
    with pytest.raises(ValueError, match="n_neighbors=5 needs k units"):
        knn.predict(graph.transform(Q))
