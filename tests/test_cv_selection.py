"""The CV estimators' choice and report: non-finite candidates ranked last, cv_results_ as
GridSearchCV's (one-dimensional columns, ``params``), scores in the targets' unit exact
wherever float64 holds them, the candidates' warnings once per fit."""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from sklearn_nw import (
    AdaptiveBandwidth,
    LocalFitWarning,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)


def _data(n=90, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 6, (n, 1))
    y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=n)
    return X, y


def _plain(cv_estimator, params):
    """The plain estimator of one candidate's ``params``, as its documentation says."""
    if params["kind"] == "fixed":
        bandwidth = params["bandwidth"]
    else:
        bandwidth = AdaptiveBandwidth(params["kind"], n_neighbors=params["n_neighbors"],
                                      scale=params["scale"], base=params["bandwidth"])
    if "degree" in params:
        return NadarayaWatsonRegressor(bandwidth=bandwidth, degree=params["degree"])
    plain = (NadarayaWatsonClassifier if isinstance(cv_estimator, NadarayaWatsonClassifierCV)
             else NadarayaWatsonRegressor)
    return plain(bandwidth=bandwidth)


def _failing(n_neighbors=np.inf, h_min=0.0):
    """The estimator's own score, NaN (a failed fit, as GridSearchCV records it) for
    adaptive bandwidths of at least ``n_neighbors`` neighbors and for fixed ones below
    ``h_min``."""
    def scorer(estimator, X, y):
        bandwidth = estimator.bandwidth
        if (bandwidth.n_neighbors >= n_neighbors if isinstance(bandwidth, AdaptiveBandwidth)
                else np.min(bandwidth) < h_min):
            return np.nan
        return estimator.score(X, y)
    return scorer


def _fit_with_failures(estimator, X, y):
    """Fit where some candidates' scores are NaN on every split (GridSearchCV warns)."""
    with pytest.warns(UserWarning, match="non-finite"):
        return estimator.fit(X, y)


# -- 1. non-finite candidates rank last -------------------------------------------------

@pytest.mark.parametrize("classifier", [False, True])
def test_candidates_whose_fits_failed_are_never_chosen(classifier):
    # As k = 64 on 90 rows whose folds hold 60: its fits fail on every split.
    X, y = _data()
    if classifier:
        y = (y > 0).astype(int)
        make = NadarayaWatsonClassifierCV
        extra = {}
    else:
        make = NadarayaWatsonRegressorCV
        extra = {"degree": 0}
    scorer = _failing(n_neighbors=64)
    est = _fit_with_failures(make(cv=KFold(3), bandwidth_kinds=["balloon"], scoring=scorer,
                                  selection="min", **extra), X, y)
    results = est.cv_results_
    scores = results["mean_test_score"]
    assert np.isnan(scores).any()
    # The oracle: GridSearchCV over the same candidates of the plain estimator.
    candidates = [_plain(est, p) for p in results["params"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # its own non-finite warning
        oracle = GridSearchCV(make._plain_class(), {"bandwidth": [
            c.bandwidth for c in candidates]}, cv=KFold(3), scoring=scorer).fit(X, y)
    np.testing.assert_allclose(scores, oracle.cv_results_["mean_test_score"], rtol=1e-12)
    assert est.best_index_ == oracle.best_index_
    assert est.best_score_ == pytest.approx(oracle.best_score_, rel=1e-12)
    assert np.isfinite(est.best_score_)
    assert est.best_params_["n_neighbors"] == results["n_neighbors"][oracle.best_index_] < 64
    # Ranked last, tied, as GridSearchCV ranks them.
    failed = ~np.isfinite(scores)
    np.testing.assert_array_equal(results["rank_test_score"][failed],
                                  oracle.cv_results_["rank_test_score"][failed])
    assert results["rank_test_score"][~failed].max() < results["rank_test_score"][failed].min()
    # The one-standard-error rule chooses among the finite ones too.
    one_se = _fit_with_failures(
        make(cv=KFold(3), bandwidth_kinds=["balloon"], scoring=scorer, **extra), X, y)
    assert np.isfinite(one_se.best_score_)
    assert np.isfinite(one_se.cv_results_["mean_test_score"][one_se.best_index_])


def test_a_family_whose_fits_all_failed_is_not_kept():
    # Every adaptive candidate's score is NaN on every split: the fixed family is kept,
    # whatever the one-standard-error comparison of a NaN would say.
    X, y = _data()
    est = _fit_with_failures(NadarayaWatsonRegressorCV(
        cv=KFold(3), bandwidth_kinds=["fixed", "balloon"], degree=0,
        scoring=_failing(n_neighbors=1)), X, y)
    assert est.best_params_["kind"] == "fixed"
    assert np.isfinite(est.best_score_)


def test_a_default_grid_is_not_extended_towards_failed_candidates():
    X, y = _data()
    est = NadarayaWatsonRegressorCV(cv=KFold(3), bandwidth_kinds=["fixed"], degree=0,
                                    selection="min")
    h = clone(est).fit(X, y).bandwidths_[:, 0]
    default = np.geomspace(h[0], h[-1], 25)  # the optimum lies inside the default grid
    assert all(np.isclose(default, x, rtol=1e-12).any() for x in h)
    # The five smallest bandwidths of the default grid fail: its best point is inside it,
    # the best of the points that do not fail (every one scored by GridSearchCV).
    est = _fit_with_failures(
        est.set_params(scoring=_failing(h_min=default[5] * (1 - 1e-9))), X, y)
    h_failing = est.bandwidths_[:, 0]
    assert h_failing.min() == pytest.approx(default[0], rel=1e-12)  # not extended
    scores = est.cv_results_["mean_test_score"]
    np.testing.assert_array_equal(np.isnan(scores), h_failing < default[5] * (1 - 1e-9))
    oracle = GridSearchCV(NadarayaWatsonRegressor(), {"bandwidth": list(default[5:])},
                          cv=KFold(3)).fit(X, y)
    assert est.bandwidth_[0] == pytest.approx(oracle.best_params_["bandwidth"], rel=1e-12)
    assert est.best_score_ == pytest.approx(oracle.best_score_, rel=1e-12)


@pytest.mark.parametrize("cv", [None, 3])
def test_every_candidate_non_finite_raises(cv):
    X, y = _data()

    def nan_scorer(*args):
        return np.nan

    est = NadarayaWatsonRegressorCV(bandwidths=[0.3, 1.0], cv=cv, scoring=nan_scorer,
                                    bandwidth_kinds=["fixed"], degree=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # GridSearchCV's non-finite scores
        with pytest.raises(ValueError, match="Every candidate's score is non-finite"):
            est.fit(X, y)


def test_display_marks_a_finite_candidate(pyplot):
    from sklearn_nw.inspection import BandwidthSearchDisplay

    X, y = _data()
    est = _fit_with_failures(NadarayaWatsonRegressorCV(
        cv=KFold(3), bandwidth_kinds=["fixed", "balloon"], degree=0,
        scoring=_failing(n_neighbors=16)), X, y)
    display = BandwidthSearchDisplay.from_estimator(est)
    assert np.isfinite(display.best_marker_.get_ydata()[0])
    assert display.best_marker_.get_ydata()[0] == est.best_score_


# -- 11. cv_results_ as GridSearchCV's --------------------------------------------------

@pytest.mark.parametrize("cv", [None, KFold(3)])
def test_cv_results_make_a_data_frame_with_params(cv):
    pd = pytest.importorskip("pandas")
    X, y = _data(60)
    X = np.column_stack([X[:, 0], np.cos(X[:, 0])])
    kinds = ["fixed", "balloon"]
    est = NadarayaWatsonRegressorCV(cv=cv, bandwidth_kinds=kinds, degree="auto")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est.fit(X, y)
    results = est.cv_results_
    frame = pd.DataFrame(results)
    G = len(est.bandwidths_)
    assert frame.shape[0] == G and est.bandwidths_.shape == (G, 2)
    assert len(results["params"]) == G
    for i in range(G):
        np.testing.assert_array_equal(results["param_bandwidth"][i], est.bandwidths_[i])
        assert results["params"][i]["kind"] == results["kind"][i]
        assert results["params"][i]["degree"] == results["degree"][i]
    best = results["params"][est.best_index_]
    assert best.keys() == est.best_params_.keys()
    for key, value in est.best_params_.items():
        np.testing.assert_array_equal(best[key], value)
    # Each candidate's params rebuild it: its score is that of the plain estimator.
    if cv is not None:
        for i in {0, G - 1, est.best_index_}:
            plain = _plain(est, results["params"][i])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LocalFitWarning)
                expected = cross_val_score(plain, X, y, cv=cv).mean()
            if np.isfinite(results["mean_test_score"][i]):
                assert results["mean_test_score"][i] == pytest.approx(expected, rel=1e-9)


def test_classifier_cv_results_make_a_data_frame():
    pd = pytest.importorskip("pandas")
    X, y = _data(60)
    est = NadarayaWatsonClassifierCV().fit(X, y > 0)
    frame = pd.DataFrame(est.cv_results_)
    assert len(frame) == len(est.bandwidths_)
    assert {"param_bandwidth", "params", "kind", "n_neighbors", "scale"} <= set(frame)
    clone(est)  # parameters untouched


# -- 12. scores in the targets' unit -----------------------------------------------------

def _loo_mse(X, y, h):
    """Plain numpy leave-one-out Nadaraya-Watson (Gaussian) mean squared error."""
    d2 = (X[:, None, 0] - X[None, :, 0]) ** 2  # (n, n)
    K = np.exp(-d2 / (2 * h * h))
    np.fill_diagonal(K, 0.0)
    prediction = K @ y / K.sum(1)
    return np.mean((prediction - y) ** 2)


def _exact(c, mse):
    """``-c**2 mse`` rounded once to float64: -inf beyond its range, -0.0 below it."""
    try:
        return -float(Fraction(c) ** 2 * Fraction(mse))
    except OverflowError:
        return -math.inf


@pytest.mark.parametrize("c", [3e154, 1e153, 1e-160, 1e160, 1e-170, 1.0])
def test_reported_scores_are_exact_wherever_float64_holds_them(c):
    X, y = _data(60)
    grid = [0.1, 0.3, 1.0, 3.0]
    est = NadarayaWatsonRegressorCV(bandwidths=grid, bandwidth_kinds=["fixed"], degree=0,
                                    selection="min").fit(X, y * c)
    expected = np.array([_exact(c, _loo_mse(X, y, h)) for h in grid])
    reported = est.cv_results_["mean_test_score"]
    # One unit in the last place of subnormal numbers, else relative.
    np.testing.assert_allclose(reported, expected, rtol=1e-9, atol=5e-324)
    assert np.array_equal(np.isfinite(reported), np.isfinite(expected))
    assert est.best_score_ == reported[est.best_index_]
    assert est.best_index_ == int(np.argmin([_loo_mse(X, y, h) for h in grid]))
    if np.all(np.isfinite(expected)) and np.all(expected < 0):
        assert len(np.unique(reported)) == len(grid)


# -- the candidates' warnings, once per fit ---------------------------------------------

def test_candidate_warnings_are_emitted_once_per_message():
    # Epanechnikov local-linear fits with small bandwidths are singular at many queries.
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (40, 2))
    y = X.sum(1) + rng.normal(scale=0.1, size=40)
    est = NadarayaWatsonRegressorCV([0.05, 0.08, 0.1, 0.12, 0.5], "epanechnikov", cv=KFold(4),
                                    bandwidth_kinds=["fixed"], degree=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y)
    local = [w for w in caught if issubclass(w.category, LocalFitWarning)]
    assert len(local) == 1
    assert "singular local design" in str(local[0].message)
    messages = [(w.category, str(w.message)) for w in caught]
    assert len(messages) == len(set(messages))
