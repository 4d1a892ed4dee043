"""Nadaraya-Watson estimators with their keys sharded over a dask cluster.

The estimators of this module have the names and parameters of the local ones (the dask-ml
convention). ``fit`` takes dask arrays (or numpy arrays, which it splits into one block per
worker thread) and leaves the keys on the workers: each block of training rows becomes one shard,
a :class:`~sklearn_nw._keys.KeySet` built and kept where it was computed. ``predict``
pools every block of queries against every shard and merges the shards' partial sums
exactly, by a tree reduction in log space (:mod:`sklearn_nw._shards`):

    f(q) = sum_s N_s(q) / sum_s D_s(q),
    D_s(q) = sum_{j in s} w_j k(u_qj),  N_s(q) = sum_{j in s} w_j k(u_qj) v_j,

each shard sending per query only its normalised sums and ``log D_s`` (t + 3 numbers).

Needs ``dask[array]`` and ``distributed`` (``pip install "sklearn-nw[dask]"``) and a running
:class:`distributed.Client`.
"""

import math
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone, is_classifier
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

try:
    import dask
    import dask.array as da
    import distributed
except ImportError as exc:  # pragma: no cover - exercised without dask installed
    raise ImportError(
        "sklearn_nw.dask needs dask and distributed: pip install 'sklearn-nw[dask]' "
        "(or pip install 'dask[array]' distributed)."
    ) from exc

from ._base import check_pooled
from ._classification import NadarayaWatsonClassifier as _LocalClassifier
from ._cv import NadarayaWatsonClassifierCV as _LocalClassifierCV
from ._cv import NadarayaWatsonRegressorCV as _LocalRegressorCV
from ._dask_loo import LeaveOneOutGridOverShards, ShardedObjective
from ._dask_tasks import (
    Spec,
    build_shard,
    check_queries,
    distinct_inputs,
    fallback_count,
    first_moments,
    location_sums,
    outputs,
    second_moments,
    shard_part,
    tree,
    union,
    with_metric,
)
from ._regression import NadarayaWatsonRegressor as _LocalRegressor
from ._shards import merge
from .bandwidth import (
    RULES_OF_THUMB,
    AdaptiveBandwidth,
    LeaveOneOutBandwidth,
    check_bandwidth,
    rule_of_thumb,
)
from .kernels import KERNELS, Kernel, get_kernel

__all__ = [
    "NadarayaWatsonClassifier",
    "NadarayaWatsonClassifierCV",
    "NadarayaWatsonRegressor",
    "NadarayaWatsonRegressorCV",
]


def _client():
    """The running dask.distributed client, or a clear error."""
    try:
        client = distributed.get_client()
    except ValueError:
        raise ValueError(
            "sklearn_nw.dask computes on a dask.distributed cluster and found no client: "
            "start one first, e.g. `from distributed import Client; client = Client()` "
            "(a LocalCluster) or `Client('tcp://scheduler:8786')`."
        ) from None
    if client.status != "running":
        raise ValueError(f"The dask client is {client.status}; start a new one.")
    return client




# -- the estimators ---------------------------------------------------------------------


def _n_threads(client):
    """The cluster's worker threads: numpy input is split into one block per thread."""
    return max(1, sum(client.nthreads().values()))


def _as_rows(a, name, chunks=None, n_blocks=1):
    """``a`` as a dask array split into row blocks only (numpy arrays into ``n_blocks``
    blocks, or along ``chunks``)."""
    if hasattr(a, "to_dask_array"):  # a dask DataFrame or Series: its partitions' rows
        a = a.to_dask_array(lengths=True)
    if isinstance(a, da.Array):
        if any(math.isnan(c) for c in a.chunks[0]):
            a = a.compute_chunk_sizes()
        return a.rechunk(dict.fromkeys(range(1, a.ndim), -1)) if a.ndim > 1 else a
    a = np.asarray(a)
    if a.ndim == 0:
        raise ValueError(f"{name} must be an array, got a scalar {a!r}.")
    if chunks is None:
        chunks = max(1, -(-a.shape[0] // max(1, n_blocks)))
    return da.from_array(a, chunks=(chunks,) + a.shape[1:])


class _DaskNadarayaWatson(BaseEstimator):
    """Parameters, fitting and pooling shared by the dask regressor and classifier."""

    def __init__(self, kernel="gaussian", bandwidth="scott", *, n_neighbors=None,
                 algorithm="auto", compute="auto", metric="euclidean", device="cpu"):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.metric = metric
        self.device = device

    def _fit(self, X, y, sample_weight, *, classifier, search=None):
        """Validate, reduce the statistics, build the shards; with ``search`` (a
        :class:`LeaveOneOutGridOverShards`) choose the bandwidth by it and return its choice."""
        if self.n_neighbors is not None:
            raise ValueError(
                f"n_neighbors={self.n_neighbors!r} restricts attention to the k nearest "
                "training points, which needs a global top-k merge across shards; "
                "sklearn_nw.dask does not do it. Use n_neighbors=None, or the local "
                "estimator (to_local()).")
        bandwidth = "scott" if search is not None else self.bandwidth
        refused = [what for what, on in (
            ("metric='precomputed'", getattr(self, "metric", None) == "precomputed"),
            (f"algorithm={self.algorithm!r} (each shard sums densely)",
             self.algorithm not in ("auto", "brute")),
            ("compute='compiled'", self.compute == "compiled"),
            (f"degree={getattr(self, 'degree', 0)!r}",
             getattr(self, "degree", 0) not in (0, "auto" if search else 0)),
            (f"bandwidth={bandwidth!r}",
             not isinstance(bandwidth, (Real, str, list, tuple, np.ndarray,
                                        LeaveOneOutBandwidth))
             or isinstance(bandwidth, bool)
             or (isinstance(bandwidth, str) and bandwidth not in (*RULES_OF_THUMB, "loo"))),
        ) if on]
        if refused:
            raise ValueError(
                "sklearn_nw.dask pools Nadaraya-Watson sums over shards of keys with a rule "
                "of thumb, a given or a learned bandwidth; it cannot use "
                f"{', '.join(refused)}. Use the local estimator for those (to_local() "
                "gives it).")
        client = _client()
        # feature_names_in_ (and n_features_in_) from a pandas or dask DataFrame, as the
        # local estimators' validate_data sets them; the arrays are checked on the workers.
        validate_data(self, X, reset=True, skip_check_array=True)
        X = _as_rows(X, "X", n_blocks=_n_threads(client))
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features); got {X.ndim}-D.")
        _check_some_rows(X, self)
        chunks = X.chunks[0]
        y = self._rows_like(y, "y", X)
        if classifier and y.ndim != 1:
            # scikit-learn's check of the labels' shape (its error, or its warning for a
            # column vector) on a stand-in of y's shape: y stays on the cluster.
            column_or_1d(np.broadcast_to(np.zeros((), dtype=np.int8), y.shape), warn=True)
            y = y[:, 0]
        w = None if sample_weight is None else self._rows_like(sample_weight,
                                                               "sample_weight", X)
        dtype = np.float32 if X.dtype == np.float32 else np.float64
        # An empty block (a boolean filter's, or a zero-length chunk) holds nothing to fit.
        blocks = [block for block, n_rows in zip(zip(
            X.to_delayed().ravel(), y.to_delayed().ravel(),
            [None] * len(chunks) if w is None else w.to_delayed().ravel()), chunks)
            if n_rows > 0]
        first = client.gather(client.compute(
            [dask.delayed(first_moments)(xb, yb, wb, dtype, classifier)
             for xb, yb, wb in blocks]))
        weight = sum(f["weight"] for f in first)
        n_live = sum(f["n_live"] for f in first)
        if n_live == 0 or weight <= 0:
            raise ValueError("sample_weight must have a positive sum.")
        mean = sum(f["wx"] for f in first) / weight
        center = (sum(f["live_x"] for f in first) / n_live)
        classes = offset = None
        if classifier:
            classes = np.unique(np.concatenate([f["classes"] for f in first]))
            check_classification_targets(classes)
            self.classes_ = classes
        else:
            offset = sum(f["wy"] for f in first) / weight
        second = client.gather(client.compute(
            [dask.delayed(second_moments)(xb, yb, wb, mean, offset, dtype, classifier)
             for xb, yb, wb in blocks]))
        sigma = np.sqrt(sum(s[0] for s in second) / weight)
        constant = (np.min([f["lo"] for f in first], 0) == np.max([f["hi"] for f in first], 0))
        sigma[constant] = 0.0
        scale = max(s[1] for s in second)
        self.kernel_ = get_kernel(self.kernel, dtype=dtype)
        self.n_features_in_ = X.shape[1]
        self.n_samples_fit_ = X.shape[0]
        spec = Spec(self.kernel_, None, center, np.dtype(dtype), classes, offset,
                     scale if 0 < scale < np.inf else 1.0,
                     not classifier and y.ndim == 1, get_config()["working_memory"])
        if search is not None:
            # The grid's center: Scott's rule over the distinct inputs of positive weight.
            distinct = tree(client, [client.compute(dask.delayed(distinct_inputs)(xb, wb))
                                      for xb, _, wb in blocks], union)
            n_distinct = client.submit(len, distinct).result()
            if n_distinct < 2:
                raise ValueError(
                    f"{type(self).__name__} needs at least 2 distinct training inputs with "
                    f"positive sample weight; got {n_distinct}.")
            spec = spec._replace(metric=rule_of_thumb("scott", sigma, n_distinct))
        elif self.bandwidth == "loo" or isinstance(self.bandwidth, LeaveOneOutBandwidth):
            spec = spec._replace(metric=self._learn(client, blocks, spec, sigma, classifier))
        elif isinstance(self.bandwidth, str):
            spec = spec._replace(metric=rule_of_thumb(self.bandwidth, sigma, weight))
        else:
            spec = spec._replace(metric=check_bandwidth(self.bandwidth, len(sigma)))
        self._shards = client.compute(
            [dask.delayed(build_shard)(xb, yb, wb, spec, classifier)
             for xb, yb, wb in blocks])
        distributed.wait(self._shards)
        for f in self._shards:
            if f.status == "error":
                f.result()  # raises the worker's error here
        if spec.metric.ndim == 1:
            self.bandwidth_ = spec.metric
        choice = None
        if search is not None:
            choice = search.select(client, self._shards, spec, classifier)
            spec = spec._replace(metric=choice.bandwidth)
            self._shards = [client.submit(with_metric, f, spec) for f in self._shards]
            self.bandwidth_ = spec.metric
        self._spec = spec
        self.n_shards_ = len(self._shards)
        return choice

    def _learn(self, client, blocks, spec, sigma, classifier):
        """The metric learned by :class:`~sklearn_nw.LeaveOneOutBandwidth`'s descent on
        the leave-one-out loss of the distinct inputs, sharded over the cluster (full
        batch); sets ``n_iter_``, ``loss_curve_`` and, for the full metric,
        ``projection_`` and ``bandwidth_``."""
        for stale in ("projection_", "n_iter_", "loss_curve_"):
            self.__dict__.pop(stale, None)
        selector = (LeaveOneOutBandwidth() if isinstance(self.bandwidth, str)
                    else clone(self.bandwidth))
        kernel = get_kernel(self.kernel, dtype=np.float64)  # the descent is in float64
        locations = client.compute([dask.delayed(location_sums)(xb, yb, wb, spec, classifier)
                                    for xb, yb, wb in blocks])
        loss = "log_loss" if classifier else "squared_error"
        objective = ShardedObjective(client, locations, spec._replace(kernel=kernel), loss,
                                     n_shards=len(blocks))
        if objective.n_inputs < 2:
            raise ValueError(
                f"{type(self).__name__} with bandwidth='loo' needs at least 2 distinct "
                f"training inputs with positive sample weight; got {objective.n_inputs}.")
        result = selector.select_on(objective, kernel, full_batch=True,
                                    h_start=rule_of_thumb("scott", sigma, objective.n_inputs))
        self.n_iter_ = result.n_iter
        curve = np.asarray(result.loss_curve, dtype=np.float64)
        self.loss_curve_ = curve if classifier else spec.scale**2 * (curve + objective.spread)
        if result.projection is None:
            return result.bandwidth
        self.projection_ = result.projection
        self.bandwidth_ = result.bandwidth
        return result.projection

    def _set_choice(self, choice):
        self.cv_results_ = choice.cv_results
        self.best_index_ = choice.best_index
        self.best_score_ = choice.best_score
        self.bandwidths_ = choice.grid
        self.best_params_ = {"bandwidth": choice.bandwidth, "kind": "fixed"}
        if "degree" in self.get_params(deep=False):
            # Nadaraya-Watson, reported as the local regressor CV reports its degree.
            self.degree_ = 0
            self.best_params_["degree"] = self.degree_
        return self

    def _rows_like(self, a, name, X):
        a = _as_rows(a, name)  # numpy arrays as one block, split along X's blocks below
        if a.shape[0] != X.shape[0]:
            raise ValueError(
                f"X has {X.shape[0]} rows but {name} has {a.shape[0]}; they must match.")
        if a.chunks[0] != X.chunks[0]:  # mismatched blocks: the rows of X's blocks
            a = a.rechunk({0: X.chunks[0]})
        return a

    def _check_live(self):
        check_is_fitted(self)
        client = _client()
        lost = [f for f in self._shards if f.status == "cancelled"
                or f.client.status != "running"]
        if lost:
            raise ValueError(
                "The shards of this estimator were lost with the dask client they were fitted "
                "on; fit it again on a running client (or call to_local() before closing "
                "the client).")
        return client

    def _pool(self, X, *, leave_out_equal=False):
        """The outputs at queries X as a dask array (after checking the fallback counts,
        which needs the partial sums computed: they are kept on the cluster)."""
        client = self._check_live()
        given = X
        X = _as_rows(X, "X", n_blocks=_n_threads(client))
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_queries, n_features); got {X.ndim}-D.")
        # The feature names and count checked as the local estimators check them.
        validate_data(self, given, reset=False, skip_check_array=True)
        _check_some_rows(X, self)
        spec = self._spec
        finals, shapes = [], []
        for block, n_rows in zip(X.to_delayed().ravel(), X.chunks[0]):
            q = client.compute(dask.delayed(check_queries)(block, self.n_features_in_,
                                                             spec.dtype))
            parts = [client.submit(shard_part, shard, q, spec, leave_out_equal)
                     for shard in self._shards]
            finals.append(tree(client, parts, merge))
            shapes.append(n_rows)
        counts = client.gather([client.submit(fallback_count, f) for f in finals])
        n_fallback = sum(c for c, _ in counts)
        out_finite = np.array([all(ok for _, ok in counts)])
        check_pooled(X.shape[0], out_finite.astype(float) if out_finite.all()
                     else np.array([np.nan]), n_fallback, kernel=self.kernel_,
                     bandwidth=self.bandwidth_, dtype=spec.dtype)
        blocks = [client.submit(outputs, f, spec) for f in finals]
        t = 1 if spec.classes is None and spec.one_output else (
            len(spec.classes) if spec.classes is not None else len(spec.offset))
        dtype = spec.dtype if spec.classes is not None else np.float64
        arrays = [da.from_delayed(dask.delayed(o), shape=(n,) if spec.one_output
                                  and spec.classes is None else (n, t), dtype=dtype)
                  for o, n in zip(blocks, shapes)]
        return da.concatenate(arrays)

    def to_local(self):
        """The equivalent local estimator, fitted on the gathered training data.

        Its ``bandwidth`` is this estimator's fitted ``bandwidth_``; its predictions are
        this estimator's (to rounding).

        Returns
        -------
        estimator : sklearn_nw.NadarayaWatsonRegressor or NadarayaWatsonClassifier
        """
        client = self._check_live()
        shards = client.gather(self._shards)
        X = np.concatenate([s.key_set.X for s in shards])
        y = np.concatenate([s.y for s in shards])
        w = np.concatenate([s.key_set.sample_weight for s in shards])
        if hasattr(self, "feature_names_in_"):
            import pandas as pd  # the names came with a (pandas or dask) DataFrame

            X = pd.DataFrame(X, columns=self.feature_names_in_)
        return self._local_class(**self._local_params()).fit(X, y, sample_weight=w)

    def _local_params(self):
        # A learned projection is no bandwidth: the local estimator learns it again.
        if hasattr(self, "projection_"):
            return self.get_params()
        return {**self.get_params(), "bandwidth": self.bandwidth_.copy()}


def _check_some_rows(X, estimator):
    """Refuse a dask array X of no rows with the local estimators' error (scikit-learn's
    check_array on an empty stand-in of X's shape)."""
    if X.shape[0] == 0:
        check_array(np.empty(X.shape, dtype=X.dtype), estimator=estimator)


def _check_search_params(est):
    refused = [what for what, on in (
        (f"cv={est.cv!r}", est.cv is not None),
        (f"scoring={est.scoring!r}", est.scoring is not None),
        (f"bandwidth_kinds={est.bandwidth_kinds!r}",
         est.bandwidth_kinds != "auto" and list(est.bandwidth_kinds) != ["fixed"]),
        (f"degree={getattr(est, 'degree', 0)!r}", getattr(est, "degree", 0) not in ("auto", 0)),
        # The classifier's leave-one-out log-loss has no per-sample scores: both rules
        # take the best grid point, locally as here.
        ("selection='one_se' (the regressor's per-sample one-standard-error rule)",
         est.selection == "one_se" and not is_classifier(est)),
    ) if on]
    if refused:
        raise ValueError(
            "sklearn_nw.dask's CV estimators choose a fixed bandwidth by the exact "
            "leave-one-out loss (Nadaraya-Watson, degree 0); they cannot use "
            f"{', '.join(refused)}. Use the local estimator for the others.")


_CONSTRAINTS = {
    "kernel": [StrOptions(set(KERNELS)), Kernel, callable],
    "bandwidth": [Interval(Real, 0, None, closed="neither"),
                  StrOptions(set(RULES_OF_THUMB) | {"loo"}), LeaveOneOutBandwidth,
                  AdaptiveBandwidth, "array-like"],
    "n_neighbors": [None, Interval(Integral, 1, None, closed="left")],
    "algorithm": [StrOptions({"auto", "brute"})],
    "compute": [StrOptions({"auto", "eager"})],
    "metric": [StrOptions({"euclidean"})],
    "device": [str],
}


class NadarayaWatsonRegressor(RegressorMixin, _DaskNadarayaWatson):
    """Nadaraya-Watson regression with its keys sharded over a dask cluster.

    The parameters are those of :class:`sklearn_nw.NadarayaWatsonRegressor`: every
    kernel; a rule of thumb, a given bandwidth or a learned one; ``n_neighbors=None``,
    ``degree=0``.

    Parameters
    ----------
    kernel : str, Kernel or callable, default="gaussian"
    bandwidth : {"scott", "silverman", "loo"}, float, array-like or LeaveOneOutBandwidth, \
            default="scott"
        A learned bandwidth descends the leave-one-out loss of the distinct training
        inputs, full batch, its loss and gradient summed over the shards.
    n_neighbors : None
        Refused otherwise (a global top-k merge is not implemented).
    algorithm : {"auto", "brute"}, default="auto"
    compute : {"auto", "eager"}, default="auto"
    metric : {"euclidean"}, default="euclidean"
    device : str, default="cpu"
    degree : {0}, default=0
    bounded : bool, default=False
        The local polynomials' bound: no effect here (``degree`` is 0).

    Attributes
    ----------
    kernel_ : Kernel
    bandwidth_ : ndarray of shape (n_features,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when X was a pandas or dask DataFrame with string column names: they, and
        their order, are required of X at prediction.
    n_samples_fit_ : int
    n_shards_ : int
        The shards of keys kept on the workers: one per block of training rows.
    projection_ : ndarray of shape (n_features, n_components)
        Only with ``LeaveOneOutBandwidth(form="full")``: the learned metric.
    n_iter_ : int
        Only with a learned bandwidth: iterations of the descent.
    loss_curve_ : ndarray
        Only with a learned bandwidth: the leave-one-out loss at each evaluation.

    Examples
    --------
    >>> import numpy as np
    >>> from distributed import Client, LocalCluster
    >>> from sklearn_nw.dask import NadarayaWatsonRegressor
    >>> client = Client(LocalCluster(n_workers=1, processes=False, dashboard_address=None))
    >>> X = np.linspace(0, 3, 40)[:, None]
    >>> est = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, np.sin(X[:, 0]))
    >>> est.predict(np.array([[1.5]])).compute().round(3)  # a dask array, computed
    array([0.882])
    >>> client.close()
    """

    _parameter_constraints: ClassVar[dict] = {
        **_CONSTRAINTS, "degree": [Interval(Integral, 0, 2, closed="both")],
        "bounded": ["boolean"]}
    _local_class = _LocalRegressor

    def __init__(self, kernel="gaussian", bandwidth="scott", *, n_neighbors=None,
                 algorithm="auto", compute="auto", metric="euclidean", device="cpu",
                 degree=0, bounded=False):
        super().__init__(kernel, bandwidth, n_neighbors=n_neighbors, algorithm=algorithm,
                         compute=compute, metric=metric, device=device)
        self.degree = degree
        self.bounded = bounded

    def fit(self, X, y, sample_weight=None):
        """Shard the training data over the cluster's workers and resolve the bandwidth.

        Parameters
        ----------
        X : dask or numpy array of shape (n_samples, n_features)
        y : dask or numpy array of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : dask or numpy array of shape (n_samples,), default=None

        Returns
        -------
        self : NadarayaWatsonRegressor
        """
        self._validate_params()
        self._fit(X, y, sample_weight, classifier=False)
        return self

    def predict(self, X):
        """Predictions at X, pooled over every shard.

        The partial sums are computed when this is called (to warn about queries with an
        empty neighbourhood) and kept on the cluster.

        Parameters
        ----------
        X : dask or numpy array of shape (n_queries, n_features)

        Returns
        -------
        y_pred : dask array of shape (n_queries,) or (n_queries, n_outputs)
        """
        return self._pool(X)


class NadarayaWatsonClassifier(ClassifierMixin, _DaskNadarayaWatson):
    """Nadaraya-Watson classification with its keys sharded over a dask cluster.

    The parameters are those of :class:`sklearn_nw.NadarayaWatsonClassifier`: every
    kernel; a rule of thumb, a given bandwidth or a learned one; ``n_neighbors=None``.

    Parameters
    ----------
    kernel : str, Kernel or callable, default="gaussian"
    bandwidth : {"scott", "silverman", "loo"}, float, array-like or LeaveOneOutBandwidth, \
            default="scott"
        A learned bandwidth descends the leave-one-out log-loss of the distinct training
        inputs, full batch, its loss and gradient summed over the shards.
    n_neighbors : None
    algorithm : {"auto", "brute"}, default="auto"
    compute : {"auto", "eager"}, default="auto"
    metric : {"euclidean"}, default="euclidean"
    device : str, default="cpu"

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    kernel_ : Kernel
    bandwidth_ : ndarray of shape (n_features,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when X was a pandas or dask DataFrame with string column names: they, and
        their order, are required of X at prediction.
    n_samples_fit_ : int
    n_shards_ : int
    projection_ : ndarray of shape (n_features, n_components)
        Only with ``LeaveOneOutBandwidth(form="full")``.
    n_iter_ : int
        Only with a learned bandwidth.
    loss_curve_ : ndarray
        Only with a learned bandwidth.
    """

    _parameter_constraints: ClassVar[dict] = dict(_CONSTRAINTS)
    _local_class = _LocalClassifier

    def fit(self, X, y, sample_weight=None):
        """Shard the training data over the cluster's workers and resolve the bandwidth.

        Parameters
        ----------
        X : dask or numpy array of shape (n_samples, n_features)
        y : dask or numpy array of shape (n_samples,)
        sample_weight : dask or numpy array of shape (n_samples,), default=None

        Returns
        -------
        self : NadarayaWatsonClassifier
        """
        self._validate_params()
        self._fit(X, y, sample_weight, classifier=True)
        return self

    def predict_proba(self, X):
        """Class probabilities at X, pooled over every shard.

        Parameters
        ----------
        X : dask or numpy array of shape (n_queries, n_features)

        Returns
        -------
        proba : dask array of shape (n_queries, n_classes)
        """
        return self._pool(X)

    def predict(self, X):
        """The class of highest probability at X.

        Parameters
        ----------
        X : dask or numpy array of shape (n_queries, n_features)

        Returns
        -------
        y_pred : dask array of shape (n_queries,)
        """
        proba = self.predict_proba(X)
        classes = self.classes_
        return proba.map_blocks(lambda p: classes[np.argmax(p, axis=1)], drop_axis=1,
                                dtype=classes.dtype)


_CV_CONSTRAINTS = {
    "bandwidths": [None, Interval(Integral, 1, None, closed="left"), "array-like"],
    "kernel": _CONSTRAINTS["kernel"],
    "bandwidth_kinds": [StrOptions({"auto"}), list, tuple],
    "cv": [None, "cv_object"],
    "scoring": [None, str, callable],
    "n_neighbors": _CONSTRAINTS["n_neighbors"],
    "algorithm": _CONSTRAINTS["algorithm"],
    "compute": _CONSTRAINTS["compute"],
    "device": [str],
    "selection": [StrOptions({"one_se", "min"})],
}


class NadarayaWatsonRegressorCV(NadarayaWatsonRegressor):
    """Nadaraya-Watson regression over a dask cluster, the bandwidth chosen by the exact
    leave-one-out grid.

    The parameters are those of :class:`sklearn_nw.NadarayaWatsonRegressorCV`, which this
    equals with ``bandwidth_kinds=["fixed"], degree=0, selection="min"``: the default
    grid spans 1/8 to 8
    times Scott's rule (over the distinct inputs) and goes on past an end that holds the
    best point; each point is scored by its exact leave-one-out squared error, every
    block of training rows pooled against every shard, the shards leaving out the keys
    at the rows' own locations. Adaptive bandwidths, local polynomials, ``cv`` and
    ``scoring`` are the local estimator's only.

    Parameters
    ----------
    bandwidths : None, int or array-like, default=None
    kernel : str, Kernel or callable, default="gaussian"
    bandwidth_kinds : "auto" or ["fixed"], default="auto"
        Fixed bandwidths only ("auto" is that here).
    cv : None
    scoring : None
    n_neighbors : None
    algorithm : {"auto", "brute"}, default="auto"
    compute : {"auto", "eager"}, default="auto"
    device : str, default="cpu"
    degree : {"auto", 0}, default="auto"
        Nadaraya-Watson ("auto" is 0 here).
    bounded : bool, default=True
        The local polynomials' bound: no effect here (``degree`` is 0).
    selection : "min", default="min"
        The best grid point. The local estimator's default, the one-standard-error
        rule, needs each distinct training input's leave-one-out loss, which the shards
        reduce to one number per block of rows.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
    cv_results_ : dict of ndarrays
        ``mean_test_score`` (the negative leave-one-out mean squared error),
        ``rank_test_score`` (non-finite scores last), ``param_bandwidth`` and ``params``
        of every grid point, as GridSearchCV's.
    best_index_ : int
    best_score_ : float
    best_params_ : dict
        ``bandwidth``, ``kind`` ("fixed") and ``degree`` (0), as the local estimator's.
    degree_ : int
        0: Nadaraya-Watson.
    bandwidths_ : ndarray of shape (n_bandwidths, n_features)
    kernel_ : Kernel
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when X was a pandas or dask DataFrame with string column names: they, and
        their order, are required of X at prediction.
    n_samples_fit_ : int
    n_shards_ : int
    """

    _parameter_constraints: ClassVar[dict] = {
        **_CV_CONSTRAINTS, "degree": [StrOptions({"auto"}), Interval(Integral, 0, 2,
                                                                      closed="both")],
        "bounded": ["boolean"]}
    _local_class = _LocalRegressorCV

    def __init__(self, bandwidths=None, kernel="gaussian", *, bandwidth_kinds="auto",
                 cv=None, scoring=None, n_neighbors=None, algorithm="auto", compute="auto",
                 device="cpu", degree="auto", bounded=True, selection="min"):
        self.bandwidths = bandwidths
        self.kernel = kernel
        self.bandwidth_kinds = bandwidth_kinds
        self.cv = cv
        self.scoring = scoring
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.device = device
        self.degree = degree
        self.bounded = bounded
        self.selection = selection

    def fit(self, X, y, sample_weight=None):
        """Shard the training data and choose the bandwidth by exact leave-one-out.

        Parameters
        ----------
        X : dask or numpy array of shape (n_samples, n_features)
        y : dask or numpy array of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : dask or numpy array of shape (n_samples,), default=None

        Returns
        -------
        self : NadarayaWatsonRegressorCV
        """
        self._validate_params()
        _check_search_params(self)
        return self._set_choice(self._fit(X, y, sample_weight, classifier=False,
                                          search=LeaveOneOutGridOverShards(self.bandwidths)))

    def _local_params(self):
        return {**self.get_params(), "bandwidths": [self.bandwidth_.copy()],
                "bandwidth_kinds": ["fixed"], "degree": 0}


class NadarayaWatsonClassifierCV(NadarayaWatsonClassifier):
    """Nadaraya-Watson classification over a dask cluster, the bandwidth chosen by the
    exact leave-one-out grid.

    The parameters are those of :class:`sklearn_nw.NadarayaWatsonClassifierCV`, which
    this equals with ``bandwidth_kinds=["fixed"]``: each grid point is scored by its
    leave-one-out log-loss, computed over the shards as in
    :class:`NadarayaWatsonRegressorCV`, and the best one is kept (as the local
    classifier keeps it with either ``selection``).

    Parameters
    ----------
    bandwidths : None, int or array-like, default=None
    kernel : str, Kernel or callable, default="gaussian"
    bandwidth_kinds : "auto" or ["fixed"], default="auto"
    cv : None
    scoring : None
    n_neighbors : None
    algorithm : {"auto", "brute"}, default="auto"
    compute : {"auto", "eager"}, default="auto"
    device : str, default="cpu"
    selection : {"one_se", "min"}, default="one_se"
        Either keeps the best grid point (the leave-one-out log-loss has no per-sample
        scores), as in the local classifier.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    bandwidth_ : ndarray of shape (n_features,)
    cv_results_ : dict of ndarrays
        ``mean_test_score`` (the negative leave-one-out log-loss), ``rank_test_score``
        (non-finite scores last), ``param_bandwidth`` and ``params`` of every grid point,
        as GridSearchCV's.
    best_index_ : int
    best_score_ : float
    best_params_ : dict
    bandwidths_ : ndarray of shape (n_bandwidths, n_features)
    kernel_ : Kernel
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when X was a pandas or dask DataFrame with string column names: they, and
        their order, are required of X at prediction.
    n_samples_fit_ : int
    n_shards_ : int
    """

    _parameter_constraints: ClassVar[dict] = dict(_CV_CONSTRAINTS)
    _local_class = _LocalClassifierCV

    def __init__(self, bandwidths=None, kernel="gaussian", *, bandwidth_kinds="auto",
                 cv=None, scoring=None, n_neighbors=None, algorithm="auto", compute="auto",
                 device="cpu", selection="one_se"):
        self.bandwidths = bandwidths
        self.kernel = kernel
        self.bandwidth_kinds = bandwidth_kinds
        self.cv = cv
        self.scoring = scoring
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.device = device
        self.selection = selection

    def fit(self, X, y, sample_weight=None):
        """Shard the training data and choose the bandwidth by exact leave-one-out.

        Parameters
        ----------
        X : dask or numpy array of shape (n_samples, n_features)
        y : dask or numpy array of shape (n_samples,)
        sample_weight : dask or numpy array of shape (n_samples,), default=None

        Returns
        -------
        self : NadarayaWatsonClassifierCV
        """
        self._validate_params()
        _check_search_params(self)
        return self._set_choice(self._fit(X, y, sample_weight, classifier=True,
                                          search=LeaveOneOutGridOverShards(self.bandwidths)))

    def _local_params(self):
        return {**self.get_params(), "bandwidths": [self.bandwidth_.copy()],
                "bandwidth_kinds": ["fixed"]}
