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
from typing import ClassVar

import numpy as np
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import StrOptions
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
from ._dask_loo import ShardedTraining, build_shards
from ._dask_tasks import (
    Spec,
    check_queries,
    fallback_count,
    first_moments,
    outputs,
    second_moments,
    shard_part,
    tree,
    with_metric,
)
from ._regression import NadarayaWatsonRegressor as _LocalRegressor
from ._selection_grid import BandwidthGridSearch
from ._shards import merge
from ._validation import check_combinations
from .bandwidth import as_strategy
from .kernels import get_kernel

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
        """Validate, reduce the statistics, choose the bandwidth by its strategy (that of
        the ``bandwidth`` parameter, or ``search``: the CV estimators'), build the
        shards."""
        check_combinations(self, "dask")
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
        # The bandwidth's strategy, as the local estimators resolve it, run on the
        # training set sharded over the cluster.
        training = ShardedTraining(client, blocks, spec, sigma, weight, classifier,
                                   X.shape[0], type(self).__name__)
        strategy = search if search is not None else as_strategy(self.bandwidth)
        for stale in ("projection_", "n_iter_", "loss_curve_"):
            self.__dict__.pop(stale, None)
        choice = strategy.select(training)
        spec = spec._replace(
            metric=choice.bandwidth if choice.projection is None else choice.projection)
        if training.shards is None:
            self._shards = build_shards(client, blocks, spec, classifier)
        else:  # the grid's shards, at the chosen bandwidth
            self._shards = [client.submit(with_metric, f, spec) for f in training.shards]
        self.bandwidth_ = choice.bandwidth
        if choice.projection is not None:
            self.projection_ = choice.projection
        for name, value in (choice.report or {}).items():
            setattr(self, name, value)
        self._spec = spec
        self.n_shards_ = len(self._shards)
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


def _grid_search(est):
    """The CV estimators' search, as the local ones run it, on the sharded training set:
    fixed bandwidths, Nadaraya-Watson, the best leave-one-out score (the only rule
    without per-sample scores)."""
    return BandwidthGridSearch(est.bandwidths, estimator=est, kinds=("fixed",), degree=0,
                               selection="min")


def _check_search_params(est):
    """Refuse what the Dask CV estimators' search does not do (the table of
    :mod:`sklearn_nw._validation`)."""
    check_combinations(est, "dask search")


# What a shard computes: dense sums, eagerly, over feature vectors.
_SERVED_OPTIONS = {"algorithm": {"auto", "brute"}, "compute": {"auto", "eager"},
                   "metric": {"euclidean"}}


def _constraints_on_shards(local_class):
    """The local estimator's parameter constraints, the string options of ``algorithm``,
    ``compute`` and ``metric`` cut to those a shard computes."""
    return {
        name: [StrOptions(c.options & _SERVED_OPTIONS[name])
               if name in _SERVED_OPTIONS and isinstance(c, StrOptions) else c
               for c in allowed]
        for name, allowed in local_class._parameter_constraints.items()
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

    _parameter_constraints: ClassVar[dict] = _constraints_on_shards(_LocalRegressor)
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

    _parameter_constraints: ClassVar[dict] = _constraints_on_shards(_LocalClassifier)
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

    _parameter_constraints: ClassVar[dict] = _constraints_on_shards(_LocalRegressorCV)
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
        return self._fit(X, y, sample_weight, classifier=False, search=_grid_search(self))

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

    _parameter_constraints: ClassVar[dict] = _constraints_on_shards(_LocalClassifierCV)
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
        return self._fit(X, y, sample_weight, classifier=True, search=_grid_search(self))

    def _local_params(self):
        return {**self.get_params(), "bandwidths": [self.bandwidth_.copy()],
                "bandwidth_kinds": ["fixed"]}
