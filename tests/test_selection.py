"""One way to choose a bandwidth: every specification resolves to a strategy whose
``select(training)`` returns one :class:`~sklearn_nw._selection.Choice`, on one machine
and on a training set sharded over a Dask cluster."""

import numpy as np
import pytest

from sklearn_nw import (
    AdaptiveBandwidth,
    LeaveOneOutBandwidth,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw.bandwidth import as_strategy, scott_bandwidth, silverman_bandwidth


def _data(n=120, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    w = rng.uniform(0.5, 2.0, size=n)
    return X, y, w


@pytest.mark.parametrize("bandwidth, expected", [
    (0.5, lambda X, w: np.full(X.shape[1], 0.5)),
    ([0.5, 2.0], lambda X, w: np.array([0.5, 2.0])),
    ("scott", scott_bandwidth),
    ("silverman", silverman_bandwidth),
])
def test_given_bandwidths_and_rules_are_strategies(bandwidth, expected):
    X, y, w = _data()
    est = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(X, y, sample_weight=w)
    strategy = as_strategy(bandwidth)
    assert callable(strategy.select)
    np.testing.assert_array_equal(est.bandwidth_, expected(X, w))


@pytest.mark.parametrize("bandwidth", [
    "loo", LeaveOneOutBandwidth(form="isotropic", max_iter=5),
    AdaptiveBandwidth("balloon", n_neighbors=7),
])
def test_every_specification_returns_one_choice(bandwidth):
    """The learned and adaptive strategies return a Choice whose report becomes the fitted
    attributes, and never change the parameter they came from."""
    X, y, w = _data()
    before = repr(bandwidth)
    est = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(X, y, sample_weight=w)
    assert repr(bandwidth) == before
    strategy = as_strategy(bandwidth)
    assert strategy is not bandwidth
    if isinstance(bandwidth, AdaptiveBandwidth):
        assert est.bandwidth_kind_ == "balloon" and est.bandwidth_neighbors_ == 7
        assert not hasattr(est, "n_iter_")
    else:
        assert est.n_iter_ >= 1 and est.loss_curve_.ndim == 1


def test_a_refit_with_a_rule_drops_a_learned_bandwidths_report():
    X, y, w = _data()
    est = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y, sample_weight=w)
    assert hasattr(est, "n_iter_") and hasattr(est, "loss_curve_")
    est.set_params(bandwidth="scott").fit(X, y, sample_weight=w)
    assert not hasattr(est, "n_iter_") and not hasattr(est, "loss_curve_")


def test_precomputed_distances_refuse_rules_and_learned_bandwidths():
    with pytest.raises(ValueError, match="metric='precomputed' needs a numeric bandwidth"):
        as_strategy("scott", precomputed=True)
    with pytest.raises(ValueError, match=r"got bandwidth=LeaveOneOutBandwidth\(\)"):
        as_strategy(LeaveOneOutBandwidth(), precomputed=True)


# -- the same strategies on a training set sharded over a Dask cluster ----------------------

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from sklearn_nw import dask as nw_dask  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=":0")
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("bandwidths, message", [
    ([0.5, -1.0], "bandwidths must be positive and finite"),
    ([], "bandwidths must not be empty"),
    ([[0.5, 1.0, 2.0]], "per-feature vectors of length n_features=2"),
])
def test_dask_search_checks_a_given_grid_as_the_local_one(client, bandwidths, message):
    X, y, w = _data()
    with pytest.raises(ValueError, match=message):
        NadarayaWatsonRegressorCV(bandwidths=bandwidths).fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match=message):
        nw_dask.NadarayaWatsonRegressorCV(bandwidths=bandwidths, selection="min").fit(
            da.from_array(X, chunks=40), da.from_array(y, chunks=40),
            sample_weight=da.from_array(w, chunks=40))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("classifier", [False, True])
def test_dask_search_reports_as_the_local_search(client, classifier):
    """The same strategy on both training sets: the same grid (with its extension), the
    same ranking and the same choice, reported under the same names."""
    X, y, w = _data(n=90)
    if classifier:
        y = (y > 0).astype(int)
        local = NadarayaWatsonClassifierCV(bandwidth_kinds=["fixed"], selection="min")
        sharded = nw_dask.NadarayaWatsonClassifierCV(selection="min")
    else:
        local = NadarayaWatsonRegressorCV(bandwidth_kinds=["fixed"], degree=0,
                                          selection="min")
        sharded = nw_dask.NadarayaWatsonRegressorCV(selection="min")
    local.fit(X, y, sample_weight=w)
    sharded.fit(da.from_array(X, chunks=30), da.from_array(y, chunks=30),
                sample_weight=da.from_array(w, chunks=30))
    np.testing.assert_allclose(sharded.bandwidths_, local.bandwidths_, rtol=1e-12)
    np.testing.assert_allclose(sharded.cv_results_["mean_test_score"],
                               local.cv_results_["mean_test_score"], rtol=1e-9)
    np.testing.assert_array_equal(sharded.cv_results_["rank_test_score"],
                                  local.cv_results_["rank_test_score"])
    assert sharded.best_index_ == local.best_index_
    assert sharded.best_params_.keys() == local.best_params_.keys()
    np.testing.assert_allclose(sharded.bandwidth_, local.bandwidth_, rtol=1e-12)


@pytest.mark.timeout(240)
def test_dask_refit_with_a_rule_drops_a_learned_bandwidths_report(client):
    X, y, w = _data()
    Xd, yd = da.from_array(X, chunks=40), da.from_array(y, chunks=40)
    est = nw_dask.NadarayaWatsonRegressor(bandwidth="loo").fit(Xd, yd)
    assert hasattr(est, "n_iter_") and hasattr(est, "loss_curve_")
    est.set_params(bandwidth="scott").fit(Xd, yd)
    assert not hasattr(est, "n_iter_") and not hasattr(est, "loss_curve_")
    np.testing.assert_allclose(est.bandwidth_, scott_bandwidth(X), rtol=1e-12)


@pytest.mark.parametrize("Estimator", [NadarayaWatsonRegressor, NadarayaWatsonRegressorCV])
def test_a_boolean_is_no_degree(Estimator):
    """degree is a number proper, as n_neighbors and the bandwidth: True is refused, not
    taken for 1."""
    from sklearn.utils._param_validation import InvalidParameterError

    X, y, _ = _data(n=30)
    with pytest.raises(InvalidParameterError, match="'degree' parameter"):
        Estimator(degree=True).fit(X, y)
