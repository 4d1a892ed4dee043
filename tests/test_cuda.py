"""Every engine path on a CUDA device agrees with the same path on the CPU (skipped without
CUDA). The dense Gaussian path is checked against the oracle in test_regression."""

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from sklearn.neighbors import KNeighborsTransformer

from sklearn_nw import (
    AdaptiveBandwidth,
    NadarayaWatsonClassifier,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _data(n=6000, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    y = np.sin(6 * X[:, 0]) + X[:, -1]
    w = rng.integers(0, 3, n).astype(float)
    return X, y, w, rng.uniform(size=(300, d))


@pytest.mark.parametrize("params", [
    {"kernel": "epanechnikov", "bandwidth": 0.05, "algorithm": "cell_list"},
    {"kernel": "epanechnikov", "bandwidth": 0.05, "algorithm": "brute"},
    {"kernel": "tricube", "bandwidth": 0.05, "algorithm": "kd_tree"},
    {"kernel": "gaussian", "bandwidth": 0.05, "n_neighbors": 20},
    {"kernel": "exponential", "bandwidth": 0.1},
])
def test_cuda_paths_agree_with_the_cpu(params):
    X, y, w, Q = _data()
    cpu = NadarayaWatsonRegressor(**params).fit(X, y, w)
    gpu = NadarayaWatsonRegressor(**params, device="cuda").fit(X, y, w)
    pred, attention = gpu.predict(Q, return_attention=True)
    expected, expected_attention = cpu.predict(Q, return_attention=True)
    assert_allclose(pred, expected, rtol=1e-10, atol=1e-12)
    assert abs(attention - expected_attention).max() < 1e-12


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_cuda_compiled_path_agrees_with_the_cpu(kernel):
    # Inductor generates Triton code here (C++ on the CPU).
    X, y, w, Q = _data()
    params = {"kernel": kernel, "bandwidth": 0.05, "compute": "compiled"}
    for dtype, tolerance in ((np.float64, 1e-10), (np.float32, 1e-4)):
        cpu = NadarayaWatsonRegressor(**params).fit(X.astype(dtype), y, w)
        gpu = NadarayaWatsonRegressor(**params, device="cuda").fit(X.astype(dtype), y, w)
        assert_allclose(gpu.predict(Q.astype(dtype)), cpu.predict(Q.astype(dtype)),
                        rtol=tolerance, atol=tolerance)


def test_cuda_precomputed_graph_and_classifier():
    X, y, w, Q = _data(n=1000)
    labels = np.digitize(y, [0.3, 1.0])
    graph = KNeighborsTransformer(n_neighbors=40, mode="distance").fit(X)
    kwargs = {"bandwidth": 0.1, "n_neighbors": 10, "metric": "precomputed"}
    cpu = NadarayaWatsonClassifier(**kwargs).fit(graph.transform(X), labels, w)
    gpu = NadarayaWatsonClassifier(**kwargs, device="cuda").fit(graph.transform(X), labels, w)
    assert_allclose(gpu.predict_proba(graph.transform(Q)), cpu.predict_proba(graph.transform(Q)),
                    rtol=1e-10, atol=1e-12)


def test_cuda_leave_one_out_grid_and_learned_bandwidth():
    X, y, w, _ = _data(n=800, d=3)
    cpu = NadarayaWatsonRegressorCV().fit(X, y, w)
    gpu = NadarayaWatsonRegressorCV(device="cuda").fit(X, y, w)
    assert_allclose(gpu.cv_results_["mean_test_score"], cpu.cv_results_["mean_test_score"],
                    rtol=1e-9)
    assert gpu.best_index_ == cpu.best_index_
    # The learned bandwidth's descent may take other steps on other hardware: compare the
    # leave-one-out losses it reaches, not the bandwidths.
    learned = NadarayaWatsonRegressor(bandwidth="loo", device="cuda").fit(X, y, w)
    reference = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y, w)
    assert learned.loss_curve_.min() == pytest.approx(reference.loss_curve_.min(), rel=1e-3)


@pytest.mark.parametrize("kind", ["balloon", "sample_point"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_cuda_adaptive_bandwidths_agree_with_the_cpu(kind, kernel):
    X, y, w, Q = _data(n=1500)
    bandwidth = AdaptiveBandwidth(kind, n_neighbors=12, scale=0.8)
    cpu = NadarayaWatsonRegressor(kernel, bandwidth=bandwidth).fit(X, y, w)
    gpu = NadarayaWatsonRegressor(kernel, bandwidth=bandwidth, device="cuda").fit(X, y, w)
    assert_allclose(gpu.predict(Q), cpu.predict(Q), rtol=1e-10, atol=1e-12)
    loo_gpu, loo_cpu = gpu.attention_weights_, cpu.attention_weights_
    if kernel == "epanechnikov":
        loo_gpu, loo_cpu = loo_gpu.toarray(), loo_cpu.toarray()
    assert_allclose(loo_gpu, loo_cpu, atol=1e-12)
    cv_cpu = NadarayaWatsonRegressorCV(kernel, bandwidth_kinds=[kind]).fit(X[:600], y[:600])
    cv_gpu = NadarayaWatsonRegressorCV(kernel, bandwidth_kinds=[kind], device="cuda").fit(
        X[:600], y[:600])
    for key in ("kind", "n_neighbors", "scale", "degree"):
        assert cv_gpu.best_params_[key] == cv_cpu.best_params_[key]
    assert_allclose(cv_gpu.cv_results_["mean_test_score"], cv_cpu.cv_results_["mean_test_score"],
                    rtol=1e-9)
