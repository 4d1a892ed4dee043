"""The CV estimators score the model they deploy, within scikit-learn's working_memory.

- With ``n_neighbors`` the exact leave-one-out scores are those of the k-nearest model that
  ``predict`` uses, checked against explicit refits of the plain estimator without each
  point; ``degree="auto"`` tries no design that k neighbors cannot identify.
- Under a small ``working_memory`` the default search drops the families whose dense
  matrices do not fit, the local-polynomial grid computes in chunks (and scores as it
  does unchunked), and explicitly requested adaptive bandwidths are refused with a
  message that says what would fit.
- The default search's peak memory stays near its working set.
"""

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from sklearn import config_context

from sklearn_nw import (
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw._base import LocalFitWarning


def _refit_scores(make, X, y, bandwidths, sample_weight=None, *, proba=False):
    """Minus the weighted mean leave-one-out loss of each bandwidth, from explicit refits
    of ``make(h)`` without each point: squared error, or log-loss of the true class."""
    n = len(X)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    scores = []
    for h in bandwidths:
        losses = np.empty(n)
        for i in range(n):
            keep = np.arange(n) != i
            with warnings.catch_warnings():
                # A refit's singular local fits fall back, as the search's do.
                warnings.simplefilter("ignore", LocalFitWarning)
                model = make(h).fit(X[keep], y[keep], sample_weight=w[keep])
                if proba:
                    p = model.predict_proba(X[i : i + 1])[0]
                    losses[i] = -np.log(max(p[list(model.classes_).index(y[i])],
                                            np.finfo(float).eps))
                else:
                    losses[i] = (model.predict(X[i : i + 1])[0] - y[i]) ** 2
        scores.append(-np.sum(w * losses) / np.sum(w))
    return np.array(scores)


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_regressor_cv_n_neighbors_scores_the_deployed_model(degree):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 6, (40, 1))
    y = np.sin(X[:, 0]) + rng.normal(scale=0.1, size=40)
    bandwidths = [0.3, 3.0]
    reg = NadarayaWatsonRegressorCV(bandwidths=bandwidths, n_neighbors=5, degree=degree,
                                    selection="min").fit(X, y)
    expected = _refit_scores(
        # The deployed model: the CV regressor's local fits are bounded by default.
        lambda h: NadarayaWatsonRegressor(bandwidth=h, n_neighbors=5, degree=degree,
                                          bounded=True),
        X, y, bandwidths)
    np.testing.assert_allclose(reg.cv_results_["mean_test_score"], expected, rtol=1e-7)
    assert reg.bandwidth_[0] == bandwidths[int(np.argmax(expected))]


def test_regressor_cv_n_neighbors_weights_and_per_feature_bandwidths():
    # Weighted points (k counts units of weight, the last neighbor in part) and
    # per-feature bandwidths of different ratios (other neighbors per grid point).
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 2))
    y = X[:, 0] - X[:, 1] ** 2 + rng.normal(scale=0.2, size=30)
    w = rng.integers(1, 4, size=30).astype(float)
    bandwidths = [[0.4, 2.0], [2.0, 0.4], [1.0, 1.0]]
    reg = NadarayaWatsonRegressorCV(bandwidths=bandwidths, n_neighbors=6, degree=1,
                                    selection="min").fit(X, y, sample_weight=w)
    expected = _refit_scores(
        lambda h: NadarayaWatsonRegressor(bandwidth=h, n_neighbors=6, degree=1,
                                          bounded=True),
        X, y, bandwidths, w)
    np.testing.assert_allclose(reg.cv_results_["mean_test_score"], expected, rtol=1e-7)


def test_classifier_cv_n_neighbors_scores_the_deployed_model():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] + rng.normal(scale=0.5, size=40) > 0, "a", "b")
    bandwidths = [0.2, 1.0, 5.0]
    clf = NadarayaWatsonClassifierCV(bandwidths=bandwidths, n_neighbors=4).fit(X, y)
    expected = _refit_scores(
        lambda h: NadarayaWatsonClassifier(bandwidth=h, n_neighbors=4),
        X, y, bandwidths, proba=True)
    np.testing.assert_allclose(clf.cv_results_["mean_test_score"], expected, rtol=1e-7)


def test_auto_degree_with_n_neighbors_tries_only_identifiable_designs():
    # Two features: the quadratic design has 6 terms, more than 5 neighbors identify.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 2))
    y = X[:, 0] ** 2 + X[:, 1] + rng.normal(scale=0.1, size=200)
    reg = NadarayaWatsonRegressorCV(n_neighbors=5).fit(X, y)
    assert set(reg.cv_results_["degree"]) == {0, 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error", LocalFitWarning)
        reg.predict(X[:20])


def _data(n, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X[:, 0]) + X[:, 1] ** 2 + rng.normal(scale=0.3, size=n)


def test_auto_search_drops_what_does_not_fit_working_memory():
    # 600 distinct inputs: the adaptive grids' dense (600, 600) matrices (6 of them, 17
    # MiB) exceed 8 MiB; the fixed local-polynomial grid computes in chunks.
    X, y = _data(600)
    with config_context(working_memory=8):
        reg = NadarayaWatsonRegressorCV().fit(X, y)
    assert "kind" not in reg.cv_results_  # fixed bandwidths only
    assert set(reg.cv_results_["degree"]) == {0, 1, 2}
    assert np.all(np.isfinite(reg.cv_results_["mean_test_score"]))


def test_auto_degree_drops_a_degree_whose_row_does_not_fit():
    # 100 inputs in 2-D: a row of the quadratic fits (6 terms) takes 25 KiB, of the
    # linear ones (3 terms) 18 KiB.
    X, y = _data(100, seed=6)
    with config_context(working_memory=0.02):
        reg = NadarayaWatsonRegressorCV().fit(X, y)
    assert set(reg.cv_results_["degree"]) == {0, 1}
    with config_context(working_memory=0.02), pytest.raises(
            ValueError,
            match=r"one row takes 0.0244 MiB, more than scikit-learn's working_memory of 0.02"):
        NadarayaWatsonRegressorCV(degree=2, bandwidth_kinds=["fixed"]).fit(X, y)


@pytest.mark.parametrize("degree", [1, 2])
def test_local_polynomial_grid_in_chunks_scores_as_unchunked(degree):
    X, y = _data(300, seed=4)
    kwargs = {"bandwidth_kinds": ["fixed"], "degree": degree, "selection": "min"}
    reg = NadarayaWatsonRegressorCV(**kwargs).fit(X, y)
    with config_context(working_memory=1):
        small = NadarayaWatsonRegressorCV(**kwargs).fit(X, y)
    np.testing.assert_allclose(small.cv_results_["mean_test_score"],
                               reg.cv_results_["mean_test_score"], rtol=1e-10)
    np.testing.assert_array_equal(small.bandwidth_, reg.bandwidth_)


def test_local_polynomial_grid_in_chunks_equals_refits():
    X, y = _data(25, seed=5)
    bandwidths = [0.5, 1.5]
    with config_context(working_memory=0.01):  # a few rows per chunk
        reg = NadarayaWatsonRegressorCV(bandwidths=bandwidths, degree=1, bounded=False,
                                        selection="min").fit(X, y)
    expected = _refit_scores(lambda h: NadarayaWatsonRegressor(bandwidth=h, degree=1),
                             X, y, bandwidths)
    np.testing.assert_allclose(reg.cv_results_["mean_test_score"], expected, rtol=1e-7)


def test_requested_adaptive_kinds_over_working_memory_say_what_fits():
    X, y = _data(600)
    with config_context(working_memory=8), pytest.raises(
            ValueError, match=r"working_memory of 8 MiB.*needs at least 17 MiB"):
        NadarayaWatsonRegressorCV(bandwidth_kinds=["balloon"], degree=0).fit(X, y)


def test_default_search_peak_memory_near_its_working_set():
    # Peak resident memory above a warmed-up process, in a fresh interpreter: the dense
    # (1000, 1000) matrices are 8 MB each; the search held ~1 GB of them at once.
    pytest.importorskip("resource")  # POSIX only
    script = textwrap.dedent("""
        import resource
        import sys
        import numpy as np
        from sklearn_nw import NadarayaWatsonRegressorCV
        rng = np.random.default_rng(0)
        X = rng.normal(size=(1000, 2))
        y = np.sin(X[:, 0]) + X[:, 1] ** 2 + rng.normal(scale=0.3, size=1000)
        NadarayaWatsonRegressorCV().fit(X[:40], y[:40])
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        NadarayaWatsonRegressorCV().fit(X, y)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print((after - before) / (2**20 if sys.platform == "darwin" else 2**10))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True)
    assert float(result.stdout.split()[-1]) < 400  # MiB (ru_maxrss: KiB, bytes on macOS)
