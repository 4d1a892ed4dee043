"""Reference outputs of every route and estimator, to show that a restructuring changes
no result.

Run it on two commits and compare::

    python benchmarks/reference_outputs.py before.npz        # on the old commit
    python benchmarks/reference_outputs.py after.npz         # on the new one
    python benchmarks/reference_outputs.py --compare before.npz after.npz

Each configuration below fits one estimator on fixed data and records what a user sees:
predictions, class probabilities, the attention matrix, ``cv_results_`` scores, learned
bandwidths and ``loss_curve_``. ``--compare`` prints, for every array, whether it is
bit-identical or its largest relative difference.
"""

import sys
import warnings

import numpy as np


def _data(n=240, d=2, seed=0, classes=False, n_queries=90):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, -1] ** 2 + 0.2 * rng.standard_normal(n)
    if classes:
        y = np.digitize(y, [-0.4, 0.4])
    w = rng.uniform(0.5, 2.0, size=n)
    Q = rng.uniform(-2.2, 2.2, size=(n_queries, d))
    return X, y, w, Q


def _attention(attention):
    """The attention as arrays: dense as it is, sparse as its canonical CSR parts."""
    if not hasattr(attention, "tocsr"):
        return {"attention": np.asarray(attention)}
    attention = attention.tocsr()
    attention.sort_indices()
    return {"attention.indptr": attention.indptr, "attention.indices": attention.indices,
            "attention.data": attention.data}


def _configurations():
    """(name, factory) pairs: factory() -> dict of arrays."""
    from sklearn_nw import (
        AdaptiveBandwidth,
        LeaveOneOutBandwidth,
        NadarayaWatsonClassifier,
        NadarayaWatsonClassifierCV,
        NadarayaWatsonRegressor,
        NadarayaWatsonRegressorCV,
    )

    def plain(cls, classes=False, d=2, weighted=True, dtype=np.float64, n=240, n_queries=90,
              **params):
        def run():
            X, y, w, Q = _data(n=n, d=d, classes=classes, n_queries=n_queries)
            X, Q = X.astype(dtype), Q.astype(dtype)
            est = cls(**params).fit(X, y, sample_weight=w if weighted else None)
            out = {}
            if classes:
                out["proba"], attention = est.predict_proba(Q), None
                out["predict"] = est.predict(Q)
            else:
                out["predict"], attention = est.predict(Q, return_attention=True)
                out.update(_attention(attention))
            out["bandwidth_"] = np.asarray(est.bandwidth_, dtype=np.float64)
            for name in ("loss_curve_", "projection_", "key_bandwidths_"):
                if hasattr(est, name):
                    out[name] = np.asarray(getattr(est, name), dtype=np.float64)
            if hasattr(est, "n_iter_"):
                out["n_iter_"] = np.asarray(est.n_iter_)
            if hasattr(est, "cv_results_"):
                for key in ("mean_test_score", "rank_test_score"):
                    out[f"cv_results_[{key}]"] = np.asarray(
                        est.cv_results_[key], dtype=np.float64)
                out["bandwidths_"] = np.asarray(est.bandwidths_, dtype=np.float64)
                out["best_index_"] = np.asarray(est.best_index_)
            return out
        return run

    def precomputed():
        from sklearn.metrics import pairwise_distances
        X, y, w, Q = _data()
        est = NadarayaWatsonRegressor(bandwidth=0.4, metric="precomputed").fit(
            pairwise_distances(X), y, sample_weight=w)
        pred, attention = est.predict(pairwise_distances(Q, X), return_attention=True)
        return {"predict": pred, **_attention(attention)}

    R, C = NadarayaWatsonRegressor, NadarayaWatsonClassifier
    RCV, CCV = NadarayaWatsonRegressorCV, NadarayaWatsonClassifierCV
    return [
        ("dense-gaussian", plain(R)),
        ("dense-float32", plain(R, dtype=np.float32)),
        ("loo-float32", plain(R, dtype=np.float32, bandwidth="loo")),
        ("silverman-exponential", plain(R, kernel="exponential", bandwidth="silverman")),
        ("compiled", plain(R, compute="compiled", bandwidth=0.3)),
        ("cell-list", plain(R, kernel="epanechnikov", bandwidth=0.5, algorithm="cell_list")),
        # Many candidates per query: the cell list's blocks (past 2,048 candidates), the
        # tree and k-nearest routes' chunks of 512 queries.
        ("cell-list-blocks", plain(R, n=8000, n_queries=1500, kernel="epanechnikov",
                                   bandwidth=1.2, algorithm="cell_list")),
        ("tree-compact-chunks", plain(R, n=3000, n_queries=1500, kernel="tricube",
                                      bandwidth=0.3, algorithm="kd_tree")),
        ("k-nearest-chunks", plain(R, n=3000, n_queries=1500, n_neighbors=40, bandwidth=0.3)),
        ("tree-compact", plain(R, kernel="tricube", bandwidth=0.5, algorithm="kd_tree")),
        ("ball-tree-compact", plain(R, kernel="epanechnikov", bandwidth=0.5,
                                     algorithm="ball_tree")),
        ("k-nearest", plain(R, n_neighbors=15, bandwidth=0.3)),
        ("k-nearest-compact", plain(R, kernel="epanechnikov", n_neighbors=15, bandwidth=0.3)),
        ("precomputed", precomputed),
        ("adaptive-balloon", plain(R, bandwidth=AdaptiveBandwidth("balloon", n_neighbors=12))),
        ("adaptive-sample-point", plain(
            R, bandwidth=AdaptiveBandwidth("sample_point", n_neighbors=12, scale=0.5))),
        ("local-linear", plain(R, degree=1, bandwidth=0.4)),
        ("local-quadratic-bounded", plain(R, degree=2, bandwidth=0.6, bounded=True)),
        ("local-linear-compact", plain(R, degree=1, kernel="epanechnikov", bandwidth=0.8)),
        ("local-linear-adaptive", plain(
            R, degree=1, bandwidth=AdaptiveBandwidth("balloon", n_neighbors=30, scale=1.0))),
        ("loo-diagonal", plain(R, bandwidth="loo")),
        ("loo-isotropic-unweighted", plain(R, bandwidth=LeaveOneOutBandwidth(form="isotropic"),
                                        weighted=False)),
        ("loo-full", plain(R, d=3, bandwidth=LeaveOneOutBandwidth(form="full", max_iter=30))),
        ("loo-local-linear", plain(R, degree=1, bandwidth=LeaveOneOutBandwidth(max_iter=20))),
        ("loo-compact", plain(R, kernel="epanechnikov", bandwidth="loo")),
        ("loo-minibatch", plain(R, bandwidth=LeaveOneOutBandwidth(
            batch_size=64, max_iter=15, random_state=0))),
        ("classifier-dense", plain(C, classes=True)),
        ("classifier-k-nearest", plain(C, classes=True, n_neighbors=10, bandwidth=0.4)),
        ("classifier-loo", plain(C, classes=True, bandwidth="loo")),
        ("classifier-adaptive", plain(
            C, classes=True, bandwidth=AdaptiveBandwidth("balloon", n_neighbors=10))),
        ("cv-default", plain(RCV)),
        ("cv-fixed-min", plain(RCV, bandwidth_kinds=("fixed",), selection="min")),
        ("cv-grid-given", plain(RCV, bandwidths=[0.1, 0.2, 0.4, 0.8])),
        ("cv-degree-auto", plain(RCV, degree="auto", bandwidth_kinds=("fixed",))),
        ("cv-k-nearest", plain(RCV, n_neighbors=20, bandwidth_kinds=("fixed",))),
        ("cv-splitter", plain(RCV, cv=3, bandwidths=6, bandwidth_kinds=("fixed",))),
        ("cv-splitter-adaptive", plain(RCV, cv=3, bandwidths=4,
                                       bandwidth_kinds=("fixed", "balloon"))),
        ("cv-scoring", plain(RCV, scoring="neg_mean_absolute_error",
                             bandwidth_kinds=("fixed",))),
        ("cv-classifier", plain(CCV, classes=True)),
        ("cv-classifier-accuracy", plain(CCV, classes=True, scoring="accuracy",
                                         bandwidth_kinds=("fixed",))),
    ]


def _dask_configurations():
    from sklearn_nw import dask as nw_dask

    def run(cls, classes=False, **params):
        def go():
            import dask.array as da
            X, y, w, Q = _data(classes=classes)
            Xd, yd, wd = (da.from_array(a, chunks=60) for a in (X, y, w))
            est = cls(**params).fit(Xd, yd, sample_weight=wd)
            out = {"predict": np.asarray(est.predict(da.from_array(Q, chunks=45)))}
            out["bandwidth_"] = np.asarray(est.bandwidth_, dtype=np.float64)
            for name in ("loss_curve_",):
                if hasattr(est, name):
                    out[name] = np.asarray(getattr(est, name), dtype=np.float64)
            if hasattr(est, "cv_results_"):
                out["cv_results_[mean_test_score]"] = np.asarray(
                    est.cv_results_["mean_test_score"], dtype=np.float64)
            return out
        return go

    return [
        ("dask-regressor", run(nw_dask.NadarayaWatsonRegressor)),
        ("dask-loo", run(nw_dask.NadarayaWatsonRegressor, bandwidth="loo")),
        ("dask-cv", run(nw_dask.NadarayaWatsonRegressorCV)),
        ("dask-classifier-cv", run(nw_dask.NadarayaWatsonClassifierCV, classes=True)),
    ]


def collect():
    results = {}
    configurations = _configurations()
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        client = None
    else:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                               dashboard_address=None)
        client = Client(cluster)
        configurations += _dask_configurations()
    try:
        for name, run in configurations:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for key, value in run().items():
                    results[f"{name}/{key}"] = value
            print(name, flush=True)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    return results


def compare(before, after):
    a, b = np.load(before), np.load(after)
    worst = 0.0
    for key in sorted(set(a.files) | set(b.files)):
        if key not in a.files or key not in b.files:
            print(f"{key}: only in {'after' if key in b.files else 'before'}")
            worst = np.inf
            continue
        x, y = a[key], b[key]
        if x.shape != y.shape:
            print(f"{key}: shapes {x.shape} vs {y.shape}")
            worst = np.inf
        elif np.array_equal(x, y, equal_nan=True):
            continue
        else:
            scale = np.maximum(np.abs(x), np.abs(y))
            rel = np.where(scale > 0, np.abs(x - y) / np.where(scale > 0, scale, 1), 0)
            rel = float(np.nanmax(np.where(np.isnan(x) == np.isnan(y), rel, np.inf)))
            worst = max(worst, rel)
            print(f"{key}: max relative difference {rel:.3g}")
    print(f"{len(set(a.files) | set(b.files))} arrays; worst relative difference {worst:.3g}"
          + (" (all bit-identical)" if worst == 0 else ""))


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        np.savez(sys.argv[1], **collect())
