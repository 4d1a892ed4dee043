"""sklearn_nw.dask on a real LocalCluster (2 worker processes) against the local estimators."""

import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from sklearn_nw import (  # noqa: E402
    AdaptiveBandwidth,
    EmptyNeighborhoodWarning,
    LeaveOneOutBandwidth,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw import dask as nw_dask  # noqa: E402
from sklearn_nw._scale import search_reference  # noqa: E402
from sklearn_nw.kernels import KERNELS, get_kernel  # noqa: E402

# Every test here is bounded: a hung cluster fails the test instead of holding CI.
pytestmark = pytest.mark.timeout(240)

# One of each family of names (the others are aliases of these).
FAMILIES = sorted({cls: name for name, cls in KERNELS.items()}.values())


@pytest.fixture(scope="module")
def client(local_cluster):
    cluster = local_cluster(n_workers=2, threads_per_worker=1, processes=True)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def expendable_cluster(local_cluster):
    """A second cluster of 2 worker processes for the tests that kill a worker (its nanny
    starts another): the module's client keeps its workers."""
    cluster = local_cluster(n_workers=2, threads_per_worker=1, processes=True)
    yield cluster
    cluster.close()


def _data(n=240, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[n // 2 :: 3] = X[: len(X[n // 2 :: 3])]  # repeated inputs
    y = np.column_stack([np.sin(2 * X[:, 0]) + X[:, 1], X[:, -1] ** 2])
    w = rng.integers(0, 3, n).astype(np.float64)
    return X, y, w, rng.normal(size=(70, d)) * 1.5


@pytest.mark.parametrize("kernel", FAMILIES)
def test_regressor_equals_local(client, kernel):
    X, y, w, Q = _data()
    bandwidth = 0.4 if get_kernel(kernel).is_compact else "scott"
    est = nw_dask.NadarayaWatsonRegressor(kernel, bandwidth).fit(
        da.from_array(X, chunks=70), y, sample_weight=w)
    local = NadarayaWatsonRegressor(kernel, bandwidth).fit(X, y, sample_weight=w)
    assert est.n_shards_ == 4
    np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-13)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        pred = est.predict(da.from_array(Q, chunks=30))
        assert isinstance(pred, da.Array)
        pred = pred.compute()
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        expected = local.predict(Q)
    np.testing.assert_allclose(pred, expected, rtol=0, atol=1e-10)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


def test_one_output_and_float32(client):
    X, y, w, Q = _data()
    est = nw_dask.NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y[:, 0])
    local = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y[:, 0])
    pred = est.predict(Q).compute()
    assert pred.shape == (len(Q),)
    np.testing.assert_allclose(pred, local.predict(Q), atol=1e-10)
    X32, Q32 = X.astype(np.float32), Q.astype(np.float32)
    est = nw_dask.NadarayaWatsonRegressor(bandwidth=0.5).fit(X32, y)
    np.testing.assert_allclose(est.predict(Q32).compute(),
                               NadarayaWatsonRegressor(bandwidth=0.5).fit(X32, y).predict(Q32),
                               atol=1e-5)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tricube"])
def test_classifier_equals_local(client, kernel):
    X, _, w, Q = _data(seed=1)
    labels = np.array(["ant", "bee", "cat"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)]
    est = nw_dask.NadarayaWatsonClassifier(kernel, 0.6).fit(X, labels, sample_weight=w)
    local = NadarayaWatsonClassifier(kernel, 0.6).fit(X, labels, sample_weight=w)
    np.testing.assert_array_equal(est.classes_, local.classes_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        np.testing.assert_allclose(est.predict_proba(Q).compute(), local.predict_proba(Q),
                                   atol=1e-10)
        np.testing.assert_array_equal(est.predict(Q).compute(), local.predict(Q))


def test_compact_kernel_empty_shards_and_fallback(client):
    # Two far-apart clusters, each a shard: queries near one get nothing from the other,
    # and queries far from both fall back to their nearest training point on one machine
    # and here alike.
    rng = np.random.default_rng(2)
    X = np.concatenate([rng.normal(size=(60, 2)), rng.normal(size=(60, 2)) + 50])
    y = np.concatenate([np.zeros(60), np.ones(60)]) + X[:, 0]
    Q = np.concatenate([rng.normal(size=(10, 2)), rng.normal(size=(10, 2)) + 50,
                        [[25.0, 25.0], [-30.0, 0.0], [80.0, 51.0]]])
    est = nw_dask.NadarayaWatsonRegressor("epanechnikov", 1.0).fit(
        da.from_array(X, chunks=60), y)
    local = NadarayaWatsonRegressor("epanechnikov", 1.0).fit(X, y)
    with pytest.warns(EmptyNeighborhoodWarning, match="^3 of 23 queries have no training"):
        pred = est.predict(Q).compute()
    with pytest.warns(EmptyNeighborhoodWarning, match="^3 of 23 queries"):
        expected = local.predict(Q)
    np.testing.assert_allclose(pred, expected, atol=1e-12)


def test_leave_one_out_grid_equals_local(client):
    X, y, w, _ = _data(n=300, d=2, seed=3)
    for kernel in ("gaussian", "epanechnikov"):
        est = nw_dask.NadarayaWatsonRegressorCV(kernel=kernel, leave_out="input").fit(
            da.from_array(X, chunks=100), y, sample_weight=w)
        local = NadarayaWatsonRegressorCV(kernel=kernel, leave_out="input",
                                          bandwidth_kinds=["fixed"],
                                          degree=0, selection="min").fit(
                                              X, y, sample_weight=w)
        assert est.best_index_ == local.best_index_
        np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-12)
        np.testing.assert_allclose(est.cv_results_["mean_test_score"],
                                   local.cv_results_["mean_test_score"], rtol=1e-9)
        np.testing.assert_array_equal(est.cv_results_["rank_test_score"],
                                      local.cv_results_["rank_test_score"])
    labels = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    est = nw_dask.NadarayaWatsonClassifierCV(bandwidths=9, leave_out="input").fit(X, labels)
    local = NadarayaWatsonClassifierCV(bandwidths=9, leave_out="input",
                                       bandwidth_kinds=["fixed"]).fit(X, labels)
    assert est.best_index_ == local.best_index_
    np.testing.assert_allclose(est.cv_results_["mean_test_score"],
                               local.cv_results_["mean_test_score"], atol=1e-12)


def test_leave_one_out_grid_goes_past_its_end(client):
    # A short period: the optimum lies below the default grid (issue 11's example).
    rng = np.random.default_rng(4)
    X = np.sort(rng.uniform(0, 10, 200))[:, None]
    y = np.sin(8 * X[:, 0]) + 0.1 * rng.normal(size=200)
    est = nw_dask.NadarayaWatsonRegressorCV(bandwidths=5).fit(X, y)
    local = NadarayaWatsonRegressorCV(bandwidths=5, bandwidth_kinds=["fixed"],
                                      degree=0, selection="min").fit(X, y)
    assert len(est.cv_results_["params"]) == len(est.bandwidths_) > 5
    np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-12)


def test_leave_one_out_grid_probes_below_itself_as_local(client):
    # 400 points in one feature: the default grid's lowest point lies above the
    # nearest-neighbor scale, so it is probed below (the distinct inputs' nearest
    # distances found on the cluster).
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 10, (400, 1))
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=400)
    est = nw_dask.NadarayaWatsonRegressorCV().fit(da.from_array(X, chunks=100), y)
    local = NadarayaWatsonRegressorCV(bandwidth_kinds=["fixed"], degree=0,
                                      selection="min").fit(X, y)
    reference = search_reference(X, np.ones(len(X)))[0]
    assert local.bandwidths_.min() < reference / 8 * (1 - 1e-9)  # probed below the grid
    np.testing.assert_allclose(est.bandwidths_, local.bandwidths_, rtol=1e-12)
    np.testing.assert_allclose(est.cv_results_["mean_test_score"],
                               local.cv_results_["mean_test_score"], rtol=1e-9)
    assert est.best_index_ == local.best_index_


def test_to_local(client):
    X, y, w, Q = _data()
    est = nw_dask.NadarayaWatsonRegressor(bandwidth="silverman").fit(X, y, sample_weight=w)
    local = est.to_local()
    assert isinstance(local, NadarayaWatsonRegressor)
    np.testing.assert_array_equal(local.bandwidth_, est.bandwidth_)
    np.testing.assert_allclose(local.predict(Q), est.predict(Q).compute(), atol=1e-10)
    # the rows come back in their order
    np.testing.assert_array_equal(local.X_fit_, X)


def test_mismatched_chunks_are_aligned(client):
    X, y, w, Q = _data()
    Xd = da.from_array(X, chunks=50)
    yd = da.from_array(y, chunks=(90, 2))
    wd = da.from_array(w, chunks=120)
    est = nw_dask.NadarayaWatsonRegressor().fit(Xd, yd, sample_weight=wd)
    local = NadarayaWatsonRegressor().fit(X, y, sample_weight=w)
    np.testing.assert_allclose(est.predict(Q).compute(), local.predict(Q), atol=1e-10)
    with pytest.raises(ValueError, match="X has 240 rows but y has 239"):
        nw_dask.NadarayaWatsonRegressor().fit(Xd, y[:-1])


@pytest.mark.parametrize("params, match", [
    ({"n_neighbors": 5}, "global top-k merge"),
    ({"degree": 1}, "degree=1"),
    ({"bandwidth": AdaptiveBandwidth()}, "AdaptiveBandwidth"),
    ({"compute": "compiled"}, "compute"),
])
def test_refused_parameters(client, params, match):
    X, y, _, _ = _data()
    with pytest.raises(ValueError, match=match):
        nw_dask.NadarayaWatsonRegressor(**params).fit(X, y)


def test_refused_cv_parameters(client):
    X, y, _, _ = _data()
    with pytest.raises(ValueError, match="cv=5"):
        nw_dask.NadarayaWatsonRegressorCV(cv=5).fit(X, y)
    with pytest.raises(ValueError, match="bandwidth_kinds"):
        nw_dask.NadarayaWatsonRegressorCV(bandwidth_kinds=["balloon"]).fit(X, y)
    with pytest.raises(ValueError, match="selection='one_se'"):
        nw_dask.NadarayaWatsonRegressorCV(selection="one_se").fit(X, y)


def test_bad_input(client):
    X, y, _, Q = _data()
    X_nan = X.copy()
    X_nan[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        nw_dask.NadarayaWatsonRegressor().fit(da.from_array(X_nan, chunks=60), y)
    with pytest.raises(ValueError, match="Negative values in data passed to sample_weight"):
        nw_dask.NadarayaWatsonRegressor().fit(X, y, sample_weight=-np.ones(len(X)))
    est = nw_dask.NadarayaWatsonRegressor().fit(X, y)
    with pytest.raises(ValueError, match="expecting 3 features"):
        est.predict(Q[:, :2])


def test_client_gone(client, local_cluster):
    X, y, _, Q = _data()
    cluster = local_cluster(n_workers=1, processes=False)
    other = distributed.Client(cluster, set_as_default=False)
    with other.as_current():
        est = nw_dask.NadarayaWatsonRegressor().fit(X, y)
    other.close()
    cluster.close()
    with pytest.raises(ValueError, match="lost with the dask client"):
        est.predict(Q)


def test_no_client_and_no_dask():
    code = ("import numpy as np\nfrom sklearn_nw.dask import NadarayaWatsonRegressor\n"
            "NadarayaWatsonRegressor().fit(np.ones((4, 1)), np.ones(4))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode != 0
    assert "found no client" in run.stderr
    code = ("import sys\nsys.modules['dask'] = None\nimport sklearn_nw\n"
            "sklearn_nw.NadarayaWatsonRegressor().fit([[0.0], [1.0]], [0.0, 1.0])\n"
            "import sklearn_nw.dask")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode != 0
    assert "pip install 'sklearn-nw[dask]'" in run.stderr
    assert "NadarayaWatsonRegressor" not in run.stderr  # the local package worked


def test_worker_killed_between_fit_and_predict(expendable_cluster):
    # The shards are computed from the training blocks' graph, so a shard lost with its
    # worker is recomputed by dask (the nanny restarts the worker): the result is exact.
    X, y, w, Q = _data()
    with (distributed.Client(expendable_cluster, set_as_default=False) as other,
          other.as_current()):
        other.wait_for_workers(2, timeout=120)
        est = nw_dask.NadarayaWatsonRegressor().fit(da.from_array(X, chunks=60), y,
                                                    sample_weight=w)
        victim = sorted(other.who_has(est._shards).values())[0][0]
        try:
            other.run(os._exit, 1, workers=[victim])
        except Exception:  # the connection to the killed worker closes
            pass
        pred = est.predict(Q).compute()
    expected = NadarayaWatsonRegressor().fit(X, y, sample_weight=w).predict(Q)
    np.testing.assert_allclose(pred, expected, atol=1e-10)


def test_local_model_predicts_block_by_block(client):
    # The documented query-parallel prediction with a local model.
    X, y, _, Q = _data()
    local = NadarayaWatsonRegressor().fit(X, y[:, 0])
    queries = da.from_array(Q, chunks=(25, Q.shape[1]))
    pred = queries.map_blocks(local.predict, drop_axis=1, dtype=np.float64)
    np.testing.assert_allclose(pred.compute(), local.predict(Q), atol=1e-12)


def test_grid_search_on_joblib_dask_backend(client):
    # The documented GridSearchCV on the cluster through joblib's dask backend.
    from joblib import parallel_backend
    from sklearn.model_selection import GridSearchCV

    X, y, _, _ = _data()
    grid = {"bandwidth": [0.2, 0.5, 1.0]}
    with parallel_backend("dask"):
        search = GridSearchCV(NadarayaWatsonRegressor(), grid, cv=3, n_jobs=-1).fit(X, y)
    serial = GridSearchCV(NadarayaWatsonRegressor(), grid, cv=3).fit(X, y)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               serial.cv_results_["mean_test_score"], atol=1e-12)


def _same_descent(ours, theirs, X, y, w, chunks):
    """Fit a Dask estimator with a learned bandwidth and its local twin: the same
    bandwidths, iterations and loss curve. Returns both, fitted."""
    est = ours.fit(da.from_array(X, chunks=chunks), y, sample_weight=w)
    local = theirs.fit(X, y, sample_weight=w)
    np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-7)
    assert est.n_iter_ == local.n_iter_
    np.testing.assert_allclose(est.loss_curve_, local.loss_curve_, rtol=1e-9)
    return est, local


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_learned_bandwidth_equals_local(client, kernel):
    # The descent on the distinct inputs, their loss and gradient summed over shards,
    # takes the local descent's path: same bandwidths, iterations and loss curve.
    X, y, w, Q = _data(n=200, d=2, seed=5)
    # Every row at an input leaves together; tol=1e-5 ends the compact kernel's descent
    # after 17 losses (30 at the default 1e-8), each a round trip to the workers.
    loo = LeaveOneOutBandwidth(leave_out="input", tol=1e-5)
    est, local = _same_descent(nw_dask.NadarayaWatsonRegressor(kernel, loo),
                               NadarayaWatsonRegressor(kernel, loo), X, y[:, 0], w, 70)
    # The same predictions, with the same warnings (the compact kernel's queries beyond
    # every support).
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        pred = est.predict(Q).compute()
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        expected = local.predict(Q)
    np.testing.assert_allclose(pred, expected, atol=1e-7)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


def test_learned_metric_and_classifier_equal_local(client):
    X, y, _, Q = _data(n=150, d=2, seed=6)
    full = LeaveOneOutBandwidth(form="full", leave_out="input")
    est = nw_dask.NadarayaWatsonRegressor(bandwidth=full).fit(X, y)
    local = NadarayaWatsonRegressor(bandwidth=full).fit(X, y)
    np.testing.assert_allclose(est.projection_, local.projection_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(est.predict(Q).compute(), local.predict(Q), atol=1e-7)
    labels = (X[:, 0] + X[:, 1] > 0).astype(int)
    by_input = LeaveOneOutBandwidth(leave_out="input")
    est = nw_dask.NadarayaWatsonClassifier(bandwidth=by_input).fit(X, labels)
    local = NadarayaWatsonClassifier(bandwidth=by_input).fit(X, labels)
    np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-7)


def test_worker_killed_during_predict(expendable_cluster, tmp_path):
    # A worker dies while the partial sums are computed: dask recomputes what it held
    # (shards from their graph, partial sums from theirs) and the result is still exact.
    # The death is part of the graph: the first worker to compute a query block exits
    # (the marker file, created atomically, makes it happen once), so it dies in the middle
    # of the predict with no sleep and no race.
    rng = np.random.default_rng(7)
    X, Q = rng.normal(size=(6000, 3)), rng.normal(size=(6000, 3))
    y = np.sin(X[:, 0])
    marker = str(tmp_path / "died")

    def die_once(block):
        try:
            distributed.get_worker()
        except ValueError:  # not on a worker
            return block
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return block
        os._exit(1)

    with (distributed.Client(expendable_cluster, set_as_default=False) as other,
          other.as_current()):
        other.wait_for_workers(2, timeout=120)  # the nanny's new worker, if one was killed
        est = nw_dask.NadarayaWatsonRegressor(bandwidth=0.3).fit(
            da.from_array(X, chunks=1000), y)
        queries = da.from_array(Q, chunks=1000).map_blocks(die_once, meta=Q[:0])
        pred = est.predict(queries).compute()
    assert os.path.exists(marker)  # a worker did die
    expected = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y).predict(Q)
    np.testing.assert_allclose(pred, expected, atol=1e-10)


@pytest.mark.parametrize("ours, theirs", [
    (nw_dask.NadarayaWatsonRegressor, NadarayaWatsonRegressor),
    (nw_dask.NadarayaWatsonClassifier, NadarayaWatsonClassifier),
    (nw_dask.NadarayaWatsonRegressorCV, NadarayaWatsonRegressorCV),
    (nw_dask.NadarayaWatsonClassifierCV, NadarayaWatsonClassifierCV),
])
def test_same_parameters_as_the_local_estimators(ours, theirs):
    params, local = ours().get_params(), theirs().get_params()
    if ours is nw_dask.NadarayaWatsonRegressorCV:
        # The one exception, documented: the shards' grid has no per-sample losses for
        # the one-standard-error rule, the local regressor's default.
        assert (params.pop("selection"), local.pop("selection")) == ("min", "one_se")
    # Not on shards, documented: the regressor's standard errors (return_std=True) and
    # the uncertainty methods' leave-one-out state.
    if "residual_variance" in local:
        assert {k: local.pop(k) for k in ("residual_variance", "residual_neighbors")} == {
            "residual_variance": "nn", "residual_neighbors": 3}
    assert local.pop("store_loo") is False
    assert params == local


# -- issue 24 (second round): empty and weightless blocks, feature names, best_params_,
# 0-row queries and 2-D class labels, each against the local estimator on the same rows.


def _block_data(n=180, d=2, seed=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(2 * X[:, 0]) + X[:, 1], rng.uniform(0.5, 2.0, n), rng.normal(size=(25, d))


@pytest.mark.parametrize("case", ["filter_empties_middle", "filter_empties_first",
                                  "zero_length_chunk"])
def test_empty_row_blocks_equal_local(client, case):
    X, y, w, Q = _block_data()
    if case == "zero_length_chunk":
        keep = np.ones(len(X), dtype=bool)
        Xd = da.from_array(X, chunks=((90, 0, 90), (2,)))
    else:
        # A boolean filter leaves blocks of unknown (nan) size, one of them empty; y and
        # the weights come as numpy arrays of the kept rows.
        empty = slice(60, 120) if case == "filter_empties_middle" else slice(0, 60)
        keep = np.ones(len(X), dtype=bool)
        keep[empty] = False
        Xd = da.from_array(X, chunks=(60, 2))[da.from_array(keep, chunks=60)]
        assert np.isnan(Xd.chunks[0]).any()
    est = nw_dask.NadarayaWatsonRegressor(bandwidth="scott").fit(
        Xd, y[keep], sample_weight=w[keep])
    local = NadarayaWatsonRegressor(bandwidth="scott").fit(X[keep], y[keep],
                                                           sample_weight=w[keep])
    np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-12)
    np.testing.assert_allclose(est.predict(Q).compute(), local.predict(Q), atol=1e-10)
    np.testing.assert_array_equal(est.to_local().X_fit_, X[keep])


def test_no_rows_at_all_raises_as_local(client):
    X, y, _, _ = _block_data()
    with pytest.raises(ValueError) as theirs:
        NadarayaWatsonRegressor().fit(X[:0], y[:0])
    with pytest.raises(ValueError, match=re.escape(str(theirs.value))):
        nw_dask.NadarayaWatsonRegressor().fit(da.from_array(X, chunks=60)[:0], y[:0])


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_block_without_weight_equals_local(client, kernel):
    X, y, w, Q = _block_data()
    w[60:120] = 0.0  # the whole middle block
    Xd = da.from_array(X, chunks=60)
    est = nw_dask.NadarayaWatsonRegressor(kernel, 0.5).fit(Xd, y, sample_weight=w)
    local = NadarayaWatsonRegressor(kernel, 0.5).fit(X, y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)  # the compact kernel
        np.testing.assert_allclose(est.predict(Q).compute(), local.predict(Q), atol=1e-10)
    labels = (X[:, 0] > 0).astype(int)
    est = nw_dask.NadarayaWatsonClassifier(kernel, 0.8).fit(Xd, labels, sample_weight=w)
    local = NadarayaWatsonClassifier(kernel, 0.8).fit(X, labels, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        np.testing.assert_allclose(est.predict_proba(Q).compute(), local.predict_proba(Q),
                                   atol=1e-10)


def test_block_without_weight_grid_equals_local(client):
    X, y, w, _ = _block_data()
    w[:60] = 0.0
    est = nw_dask.NadarayaWatsonRegressorCV(bandwidths=5).fit(
        da.from_array(X, chunks=60), y, sample_weight=w)
    local = NadarayaWatsonRegressorCV(bandwidths=5, bandwidth_kinds=["fixed"], degree=0,
                                      selection="min").fit(X, y, sample_weight=w)
    np.testing.assert_allclose(est.cv_results_["mean_test_score"],
                               local.cv_results_["mean_test_score"], rtol=1e-9)
    np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-12)


def test_feature_names_as_local(client):
    pd = pytest.importorskip("pandas")
    X, y, _, Q = _block_data()
    frame, queries = pd.DataFrame(X, columns=["a", "b"]), pd.DataFrame(Q, columns=["a", "b"])
    est = nw_dask.NadarayaWatsonRegressor(bandwidth=0.5).fit(frame, y)
    local = NadarayaWatsonRegressor(bandwidth=0.5).fit(frame, y)
    np.testing.assert_array_equal(est.feature_names_in_, local.feature_names_in_)
    np.testing.assert_allclose(est.predict(queries).compute(), local.predict(queries),
                               atol=1e-10)
    for other in (queries[["b", "a"]], queries.set_axis(["a", "c"], axis=1)):
        with pytest.raises(ValueError) as theirs:
            local.predict(other)
        with pytest.raises(ValueError, match=re.escape(str(theirs.value))):
            est.predict(other)
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        expected = local.predict(Q)
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        np.testing.assert_allclose(est.predict(Q).compute(), expected, atol=1e-10)
    np.testing.assert_array_equal(est.to_local().feature_names_in_, local.feature_names_in_)
    # A refit on plain arrays forgets the names, as the local estimator does.
    assert not hasattr(est.fit(X, y), "feature_names_in_")


def test_best_params_as_local(client):
    X, y, _, _ = _block_data()
    est = nw_dask.NadarayaWatsonRegressorCV(bandwidths=4).fit(X, y)
    local = NadarayaWatsonRegressorCV(bandwidths=4, bandwidth_kinds=["fixed"], degree=0,
                                      selection="min").fit(X, y)
    assert est.best_params_.keys() == local.best_params_.keys()
    assert est.best_params_["degree"] == local.best_params_["degree"] == 0
    assert est.degree_ == local.degree_
    labels = (X[:, 0] > 0).astype(int)
    est = nw_dask.NadarayaWatsonClassifierCV(bandwidths=4).fit(X, labels)
    local = NadarayaWatsonClassifierCV(bandwidths=4, bandwidth_kinds=["fixed"]).fit(X, labels)
    assert est.best_params_.keys() == local.best_params_.keys()


def test_zero_row_predict_raises_as_local(client):
    X, y, _, Q = _block_data()
    labels = (X[:, 0] > 0).astype(int)
    for ours, theirs, target, method in (
            (nw_dask.NadarayaWatsonRegressor, NadarayaWatsonRegressor, y, "predict"),
            (nw_dask.NadarayaWatsonClassifier, NadarayaWatsonClassifier, labels,
             "predict_proba")):
        local = theirs().fit(X, target)
        with pytest.raises(ValueError) as expected:
            getattr(local, method)(Q[:0])
        est = ours().fit(X, target)
        for empty in (Q[:0], da.from_array(Q, chunks=10)[:0]):
            with pytest.raises(ValueError, match=re.escape(str(expected.value))):
                getattr(est, method)(empty)


def test_classifier_two_dimensional_y_as_local(client):
    from sklearn.exceptions import DataConversionWarning

    X, _, _, Q = _block_data()
    labels = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError) as theirs:
        NadarayaWatsonClassifier().fit(X, np.column_stack([labels, labels]))
    with pytest.raises(ValueError, match=re.escape(str(theirs.value))):
        nw_dask.NadarayaWatsonClassifier().fit(X, np.column_stack([labels, labels]))
    # A column vector: the local estimator warns and ravels it.
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        local = NadarayaWatsonClassifier().fit(X, labels[:, None])
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        est = nw_dask.NadarayaWatsonClassifier().fit(da.from_array(X, chunks=60),
                                                     labels[:, None])
    np.testing.assert_allclose(est.predict_proba(Q).compute(), local.predict_proba(Q),
                               atol=1e-10)


def test_cv_results_as_local_and_a_data_frame(client):
    # cv_results_ as GridSearchCV's (1-D columns, "params"), the same as the local CV's.
    pd = pytest.importorskip("pandas")
    X, y, w, _ = _data(n=120, d=2, seed=5)
    est = nw_dask.NadarayaWatsonRegressorCV(bandwidths=[0.2, 0.5, 1.0], leave_out="input").fit(
        da.from_array(X, chunks=40), y, sample_weight=w)
    local = NadarayaWatsonRegressorCV(bandwidths=[0.2, 0.5, 1.0], leave_out="input",
                                      bandwidth_kinds=["fixed"], degree=0,
                                      selection="min").fit(X, y, sample_weight=w)
    frame = pd.DataFrame(est.cv_results_)
    assert len(frame) == 3
    for ours, theirs in zip(est.cv_results_["params"], local.cv_results_["params"]):
        assert ours.keys() == theirs.keys()
        np.testing.assert_array_equal(ours["bandwidth"], theirs["bandwidth"])
        assert (ours["kind"], ours["degree"]) == (theirs["kind"], theirs["degree"])
    assert est.best_params_.keys() == est.cv_results_["params"][est.best_index_].keys()


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_leaving_rows_out_on_repeated_inputs_equals_local(client, kernel):
    # Rows repeat inputs (with other targets, weights, zero weights, across blocks): the
    # grid leaves one row out as the local one does, each unit's score equal; so does
    # the sharded descent (the distinct rows as queries of their inputs).
    X, y, w, _ = _data(n=120, d=2, seed=5)
    labels = np.array(["a", "b", "c"])[(y[:, 0] > 0).astype(int) + (y[:, 1] > 1)]
    for ours, theirs, target, params in (
            (nw_dask.NadarayaWatsonRegressorCV, NadarayaWatsonRegressorCV, y,
             {"degree": 0, "selection": "min"}),
            (nw_dask.NadarayaWatsonClassifierCV, NadarayaWatsonClassifierCV, labels, {})):
        for leave_out in ("row", "input"):
            est = ours(kernel=kernel, leave_out=leave_out).fit(
                da.from_array(X, chunks=35), target, sample_weight=w)
            local = theirs(kernel=kernel, leave_out=leave_out, bandwidth_kinds=["fixed"],
                           **params).fit(X, target, sample_weight=w)
            np.testing.assert_allclose(est.cv_results_["mean_test_score"],
                                       local.cv_results_["mean_test_score"], rtol=1e-10)
            np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-12)
    # tol=1e-5: the compact kernel's descent ends after fewer round trips (as above).
    loo = LeaveOneOutBandwidth(tol=1e-5)
    _same_descent(nw_dask.NadarayaWatsonRegressor(kernel, loo),
                  NadarayaWatsonRegressor(kernel, loo), X, y[:, 0], w, 35)
    _same_descent(nw_dask.NadarayaWatsonClassifier(kernel, loo),
                  NadarayaWatsonClassifier(kernel, loo), X, labels, w, 35)
    X = np.random.default_rng(0).normal(size=(120, 2))
    est = nw_dask.NadarayaWatsonRegressorCV(bandwidths=[0.2, 0.5]).fit(X, y)
    local = NadarayaWatsonRegressorCV(bandwidths=[0.2, 0.5], bandwidth_kinds=["fixed"],
                                      degree=0, selection="min").fit(X, y)
    np.testing.assert_allclose(est.cv_results_["mean_test_score"],
                               local.cv_results_["mean_test_score"], rtol=1e-12)


# -- issue 26: categorical features on shards, against the local estimators on the same
# rows (the blocks encoded and embedded on the workers).


def _mixed_table(n=150, seed=0):
    """A pandas table: a number, an unordered category with a declared category no row
    has, an ordered one, and a string column; queries with an unseen string and an
    unordered category absent at fit (different from every key)."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(seed)
    color = pd.Categorical(rng.choice(["red", "green", "blue"], n),
                           categories=["red", "green", "blue", "violet"])
    size = pd.Categorical(rng.choice(["S", "M", "L"], n), categories=["S", "M", "L"],
                          ordered=True)
    frame = pd.DataFrame({"x": rng.normal(size=n), "color": color, "size": size,
                          "town": rng.choice(["Ayr", "Bath", "Cork"], n)})
    y = (np.sin(2 * frame.x) + (frame.color == "red") + 0.5 * size.codes
         + (frame.town == "Ayr") + 0.2 * rng.normal(size=n)).to_numpy()
    w = rng.integers(0, 3, n).astype(np.float64)
    queries = frame.iloc[:30].copy()
    queries.loc[queries.index[:3], "color"] = "violet"
    queries.loc[queries.index[3:6], "town"] = "Derry"
    return frame, y, w, queries


@pytest.mark.parametrize("ours, theirs, bandwidth, categorical_kernel", [
    (nw_dask.NadarayaWatsonRegressor, NadarayaWatsonRegressor, [0.4, 0.3, 0.5, 0.2],
     "aitchison_aitken"),
    (nw_dask.NadarayaWatsonRegressor, NadarayaWatsonRegressor, "scott", "li_racine"),
    (nw_dask.NadarayaWatsonRegressor, NadarayaWatsonRegressor, "loo", "aitchison_aitken"),
    (nw_dask.NadarayaWatsonClassifier, NadarayaWatsonClassifier, "loo", "li_racine"),
    (nw_dask.NadarayaWatsonRegressorCV, NadarayaWatsonRegressorCV, None, "li_racine"),
    (nw_dask.NadarayaWatsonClassifierCV, NadarayaWatsonClassifierCV, None,
     "aitchison_aitken"),
])
def test_categorical_features_equal_the_local_estimators(client, ours, theirs, bandwidth,
                                                         categorical_kernel):
    dd = pytest.importorskip("dask.dataframe")
    frame, y, w, queries = _mixed_table()
    classifier = "Classifier" in ours.__name__
    if classifier:
        y = np.array(["low", "mid", "high"])[np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))]
    params = {"categorical_features": ["color", "size", "town"],
              "categorical_kernel": categorical_kernel}
    if "CV" in ours.__name__:  # the shards' grid: fixed bandwidths, Nadaraya-Watson
        local_params = {**params, "bandwidth_kinds": ["fixed"], "selection": "min",
                        **({} if classifier else {"degree": 0})}
    else:
        params["bandwidth"] = bandwidth
        local_params = params
    est = ours(**params).fit(dd.from_pandas(frame, npartitions=3), y, sample_weight=w)
    local = theirs(**local_params).fit(frame, y, sample_weight=w)
    np.testing.assert_array_equal(est.is_categorical_, local.is_categorical_)
    np.testing.assert_array_equal(est.feature_names_in_, local.feature_names_in_)
    np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-7)
    predict = "predict_proba" if classifier else "predict"
    expected = getattr(local, predict)(queries)
    for given in (queries, dd.from_pandas(queries, npartitions=2)):
        np.testing.assert_allclose(getattr(est, predict)(given).compute(), expected,
                                   rtol=0, atol=1e-9)
    if "CV" in ours.__name__:
        np.testing.assert_allclose(est.cv_results_["mean_test_score"],
                                   local.cv_results_["mean_test_score"], rtol=1e-10)
    back = est.to_local()
    np.testing.assert_array_equal(back.is_categorical_, local.is_categorical_)
    np.testing.assert_allclose(getattr(back, predict)(queries), expected, rtol=0, atol=1e-9)


@pytest.mark.parametrize("categorical_kernel", ["li_racine", "aitchison_aitken"])
def test_categorical_features_of_arrays_equal_the_local_estimator(client,
                                                                  categorical_kernel):
    # Codes in a dask array named by a mask, in a numpy array by indices; categories
    # never declared, learned from the rows on the cluster.
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(size=200), rng.integers(0, 4, 200),
                         rng.normal(size=200), rng.choice([10.0, 20.0, 30.0], 200)])
    y = X[:, 0] + (X[:, 1] == 2) + X[:, 3] / 10 + 0.1 * rng.normal(size=200)
    Q = np.column_stack([rng.normal(size=40), rng.integers(0, 5, 40),  # 4: not seen at fit
                         rng.normal(size=40), rng.choice([10.0, 20.0, 30.0], 40)])
    mask = np.array([False, True, False, True])
    for given, spec in ((da.from_array(X, chunks=70), mask), (X, [1, 3])):
        est = nw_dask.NadarayaWatsonRegressor(
            bandwidth="loo", categorical_features=spec,
            categorical_kernel=categorical_kernel).fit(given, y)
        local = NadarayaWatsonRegressor(bandwidth="loo", categorical_features=mask,
                                        categorical_kernel=categorical_kernel).fit(X, y)
        np.testing.assert_allclose(est.bandwidth_, local.bandwidth_, rtol=1e-7)
        np.testing.assert_allclose(est.predict(da.from_array(Q, chunks=15)).compute(),
                                   local.predict(Q), rtol=0, atol=1e-9)


def test_categorical_features_refused_as_by_the_local_estimator(client):
    dd = pytest.importorskip("dask.dataframe")
    frame, y, _, _ = _mixed_table()
    # Not the Gaussian kernel; a missing category at fit and in the queries; an ordered
    # category never seen at fit; a full learned metric.
    missing = frame.copy()
    missing.loc[missing.index[5], "color"] = None
    unranked = frame.iloc[:5].copy()
    unranked["size"] = unranked["size"].cat.set_categories(["S", "M", "L", "XL"])
    unranked.loc[unranked.index[0], "size"] = "XL"
    for params, X, queries in (({"kernel": "epanechnikov", "bandwidth": 1.0}, frame, None),
                               ({}, missing, None), ({}, frame, missing.iloc[:10]),
                               ({}, frame, unranked),
                               ({"bandwidth": LeaveOneOutBandwidth(form="full")}, frame,
                                None)):
        params = {**params, "categorical_features": ["color", "size", "town"]}
        local = NadarayaWatsonRegressor(**params)
        est = nw_dask.NadarayaWatsonRegressor(**params)
        with pytest.raises(ValueError) as theirs:
            local.fit(X, y)
            local.predict(queries)
        with pytest.raises(ValueError, match=re.escape(str(theirs.value))):
            est.fit(dd.from_pandas(X, npartitions=3), y)
            est.predict(dd.from_pandas(queries, npartitions=2)).compute()


def test_categories_a_dask_column_does_not_declare_are_computed(client):
    # A dask category column whose categories are unknown (astype on the cluster): made
    # known on the cluster, the fit equal to the local one on the same values.
    dd = pytest.importorskip("dask.dataframe")
    frame, y, w, queries = _mixed_table(n=90, seed=4)
    given = dd.from_pandas(frame.astype({"town": str}), npartitions=3)
    given["town"] = given["town"].astype("category")
    assert not given["town"].cat.known
    est = nw_dask.NadarayaWatsonRegressor(bandwidth=[0.4, 0.3, 0.5, 0.2]).fit(
        given, y, sample_weight=w)
    local = NadarayaWatsonRegressor(bandwidth=[0.4, 0.3, 0.5, 0.2]).fit(
        frame.astype({"town": "category"}), y, sample_weight=w)
    np.testing.assert_array_equal(est.is_categorical_, [False, True, True, True])
    np.testing.assert_allclose(
        est.predict(queries.astype({"town": "category"})).compute(),
        local.predict(queries.astype({"town": "category"})), rtol=0, atol=1e-12)


def test_categorical_cv_on_repeated_inputs_leaves_rows_out(client):
    # Categories repeat inputs: the Dask CV's grid center is learned leaving one row
    # out (the sharded descent's distinct rows), as the local one's, and its grid leaves
    # rows out: the same grid, each point's score the local CV's.
    dd = pytest.importorskip("dask.dataframe")
    frame, y, w, queries = _mixed_table(n=120, seed=6)
    frame["x"] = np.round(frame["x"].to_numpy())  # few values: rows repeat inputs
    est = nw_dask.NadarayaWatsonRegressorCV(categorical_features=["color", "size", "town"])
    est.fit(dd.from_pandas(frame, npartitions=3), y, sample_weight=w)
    local = NadarayaWatsonRegressorCV(
        categorical_features=["color", "size", "town"], bandwidth_kinds=["fixed"],
        degree=0, selection="min").fit(frame, y, sample_weight=w)
    np.testing.assert_allclose(
        np.array(est.cv_results_["param_bandwidth"].tolist(), dtype=float),
        np.array(local.cv_results_["param_bandwidth"].tolist(), dtype=float), rtol=1e-7)
    np.testing.assert_allclose(est.cv_results_["mean_test_score"],
                               local.cv_results_["mean_test_score"], rtol=1e-7)
    np.testing.assert_allclose(est.predict(queries).compute(), local.predict(queries),
                               rtol=0, atol=1e-9)
