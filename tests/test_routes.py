"""Switching routes changes nothing: every route a prediction can take gives the same
predictions and attention, for both estimators.

The route (``route_``) is resolved once at fit from ``algorithm``, ``n_neighbors``,
``compute`` and ``metric``. Wherever two routes compute the same estimate -- a compact
kernel's support found by a cell list, a tree or no search at all; the k nearest with k
covering every training point; precomputed distances of the same points; the compiled
loop -- they must agree to rounding.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.metrics import pairwise_distances

from sklearn_nw import (
    AdaptiveBandwidth,
    EmptyNeighborhoodWarning,
    LocalFitWarning,
    NadarayaWatsonClassifier,
    NadarayaWatsonRegressor,
)

H = 0.15  # one bandwidth for every feature: precomputed distances take a scalar


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (600, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    w = rng.integers(0, 3, len(X)).astype(float)  # zero weights included
    Q = rng.uniform(-0.1, 1.1, (80, 2))
    Q[0] = [3.0, 3.0]  # out of every support: the nearest-point fallback
    return X, y, w, Q


def _routes(kernel, n_units):
    """(parameters, expected route) of every route that computes the full estimate."""
    routes = [
        ({"algorithm": "brute", "compute": "eager"}, "dense"),
        ({"algorithm": "brute", "compute": "compiled"}, "dense"),
        # k nearest with k = every unit of weight: every training point.
        ({"n_neighbors": n_units, "algorithm": "brute"}, "k_nearest"),
        ({"n_neighbors": n_units, "algorithm": "kd_tree"}, "k_nearest"),
        ({"n_neighbors": n_units, "algorithm": "ball_tree"}, "k_nearest"),
        ({"metric": "precomputed"}, "precomputed"),
    ]
    if kernel != "gaussian":  # a compact support: searched, or not
        routes += [({"algorithm": "cell_list"}, "cell_list"),
                   ({"algorithm": "kd_tree"}, "radius"),
                   ({"algorithm": "ball_tree"}, "radius")]
    return routes


def _predict(Estimator, kernel, params, X, target, w, Q):
    """Predictions (probabilities for the classifier) and the attention, where the route
    returns it (the compiled loop computes no attention: its predictions alone)."""
    precomputed = params.get("metric") == "precomputed"
    est = Estimator(kernel, bandwidth=H, **params)
    est.fit(pairwise_distances(X) if precomputed else X, target, sample_weight=w)
    queries = pairwise_distances(Q, X) if precomputed else Q
    method = est.predict_proba if Estimator is NadarayaWatsonClassifier else est.predict
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        if params.get("compute") == "compiled":
            return est, method(queries), None
        out, attention = method(queries, return_attention=True)
    if sp.issparse(attention):  # canonical, as users get it: each row's keys ascending
        within = np.diff(attention.indices)[np.diff(np.repeat(
            np.arange(attention.shape[0]), np.diff(attention.indptr))) == 0]
        assert np.all(within > 0), params
    dense = attention.toarray() if hasattr(attention, "toarray") else attention
    return est, out, dense


@pytest.mark.parametrize("Estimator", [NadarayaWatsonRegressor, NadarayaWatsonClassifier])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_every_route_gives_the_same_numbers(Estimator, kernel):
    X, y, w, Q = _data()
    target = np.digitize(y, [0.3, 1.0]) if Estimator is NadarayaWatsonClassifier else y
    results = {}
    for params, route in _routes(kernel, int(w.sum())):
        est, out, attention = _predict(Estimator, kernel, params, X, target, w, Q)
        assert est.route_ == route, params
        results[repr(params)] = (out, attention)
    reference, reference_attention = results.pop(repr({"algorithm": "brute",
                                                       "compute": "eager"}))
    assert np.all(np.isfinite(reference))
    for name, (out, attention) in results.items():
        assert_allclose(out, reference, rtol=1e-12, atol=1e-14, err_msg=name)
        if attention is not None:
            assert_allclose(attention, reference_attention, rtol=1e-12, atol=1e-14,
                            err_msg=name)


@pytest.mark.parametrize("task_pairs", [None, 5000])
def test_the_workers_share_large_calls_without_changing_them(monkeypatch, task_pairs):
    # Many queries, each with thousands of candidates: the cell list's blocks (past 2,048
    # candidates a query) and the trees' chunks of 512 queries run on the workers, and
    # their parts are put together in order. With task_pairs, the cell list's blocks are
    # also split by rows into several tasks.
    from sklearn_nw import _routes_support

    if task_pairs is not None:
        monkeypatch.setattr(_routes_support, "_TASK_PAIRS", task_pairs)
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (5000, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    w = rng.uniform(0.5, 2.0, len(X))
    Q = rng.uniform(-0.1, 1.1, (1300, 2))
    Q[7] = [4.0, -3.0]  # no key in reach: its nearest key
    dense = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.45, algorithm="brute")
    with pytest.warns(EmptyNeighborhoodWarning):
        pred, attention = dense.fit(X, y, sample_weight=w).predict(Q, return_attention=True)
    attention = attention.toarray()
    for algorithm in ("cell_list", "kd_tree", "ball_tree"):
        est = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.45, algorithm=algorithm)
        with pytest.warns(EmptyNeighborhoodWarning):
            got, got_attention = est.fit(X, y, sample_weight=w).predict(
                Q, return_attention=True)
        assert_allclose(got, pred, rtol=1e-12, atol=1e-14, err_msg=algorithm)
        assert_allclose(got_attention.toarray(), attention, rtol=1e-12, atol=1e-14,
                        err_msg=algorithm)


def test_the_route_is_resolved_at_fit():
    X, y, w, _ = _data()
    big = np.random.default_rng(1).uniform(size=(6000, 2))
    cases = [
        (NadarayaWatsonRegressor(), X, "dense"),
        (NadarayaWatsonRegressor("epanechnikov"), X, "dense"),  # small: no search pays
        (NadarayaWatsonRegressor("epanechnikov", bandwidth=0.05), big, "cell_list"),
        (NadarayaWatsonRegressor("epanechnikov", bandwidth=0.05, compute="compiled"), big,
         "dense"),
        (NadarayaWatsonRegressor(n_neighbors=5), X, "k_nearest"),
        (NadarayaWatsonRegressor("tricube", algorithm="ball_tree"), X, "radius"),
    ]
    for est, data, route in cases:
        est.fit(data, data[:, 0])
        assert est.route_ == route, est
        assert est.key_set_.route.name == route


def test_auto_searches_a_support_only_when_it_holds_few_points():
    # From 4 to 15 features, "auto" searches a compact kernel's support with a k-d tree
    # when it holds few of the training points; when it holds many (here ~1 in 15), a tree
    # visits most of them anyway and the dense sums are faster.
    X = np.random.default_rng(2).uniform(size=(6000, 5))
    y = X[:, 0]
    narrow = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.08).fit(X, y)
    wide = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.5).fit(X, y)
    assert narrow.route_ == "radius" and narrow.key_set_.index.algorithm == "kd_tree"
    assert wide.route_ == "dense" and wide.key_set_.index is None
    # Asked for, the tree is used whatever the support holds.
    asked = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.5, algorithm="kd_tree")
    assert asked.fit(X, y).route_ == "radius"
    Q = X[:50] + 0.01
    assert_allclose(wide.predict(Q), asked.predict(Q), rtol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_every_route_takes_queries_with_negative_strides(kernel):
    # A reversed view (X[::-1]) cannot become a tensor without a copy; it must predict as
    # its copy does.
    X, y, w, Q = _data()
    extra = [({"bandwidth": AdaptiveBandwidth(n_neighbors=5)}, "adaptive"),
             ({"degree": 1}, "dense")]
    for params, _ in _routes(kernel, int(w.sum())) + extra:
        if params.get("compute") == "compiled":
            continue  # the same dense route; compiling here costs seconds
        precomputed = params.get("metric") == "precomputed"
        est = NadarayaWatsonRegressor(kernel, **{"bandwidth": H, **params})
        est.fit(pairwise_distances(X) if precomputed else X[::-1], y[::-1],
                sample_weight=w[::-1])
        queries = (pairwise_distances(Q, X) if precomputed else Q)[::-2]
        with warnings.catch_warnings():
            # Queries beyond the data: none in a compact support, or too few there for a
            # local line; warned about alike on both calls, the point here is the values.
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            warnings.simplefilter("ignore", LocalFitWarning)
            assert_array_equal(est.predict(queries), est.predict(queries.copy()),
                               err_msg=repr(params))
