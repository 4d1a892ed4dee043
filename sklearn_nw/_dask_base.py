"""What the Dask estimators share: the cluster's client, the training blocks' moments,
fitting (the bandwidth's strategy run on the training set sharded over the cluster,
:class:`~sklearn_nw._dask_loo.ShardedTraining`) and pooling every block of queries
against every shard, and the constraints derived from the local estimators'.

The public estimators are in :mod:`sklearn_nw.dask`, which imports dask first (with a
clear error without it).
"""

import math
from typing import NamedTuple

import dask
import dask.array as da
import distributed
import numpy as np
from sklearn import get_config
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

from ._base import check_pooled
from ._categorical import find_categorical, is_frame
from ._dask_loo import ShardedTraining, build_shards
from ._dask_tasks import (
    ShardSettings,
    check_queries,
    encoded_rows,
    fallback_count,
    first_moments,
    merge_pairwise,
    outputs,
    second_moments,
    shard_part,
    with_metric,
)
from ._selection_grid import BandwidthGridSearch
from ._shards import merge
from ._validation import check_combinations
from .bandwidth import as_strategy
from .kernels import get_kernel


def get_client():
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


def n_threads(client):
    """The cluster's worker threads: numpy input is split into one block per thread."""
    return max(1, sum(client.nthreads().values()))


def as_rows(a, name, chunks=None, n_blocks=1):
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


def columns_of(X):
    """What scikit-learn's checks of the feature names and their count read of X: a dask
    DataFrame's empty pandas stand-in (its ``_meta``: the columns and dtypes, which
    scikit-learn reads of a pandas DataFrame only), else X itself."""
    return X._meta if is_frame(X) and hasattr(X, "_meta") else X


def row_blocks(X, n_blocks):
    """The row blocks of inputs ``X`` as given, each (block, its number of rows): a dask
    DataFrame's partitions or a dask array's row blocks (delayed), an array or pandas
    DataFrame in memory split into ``n_blocks``."""
    if is_frame(X) and hasattr(X, "to_delayed"):  # a dask DataFrame
        lengths = X.map_partitions(len).compute()
        return list(zip(X.to_delayed(), lengths))
    if isinstance(X, da.Array):
        X = as_rows(X, "X")
        return list(zip(X.to_delayed().ravel(), X.chunks[0]))
    rows = X if is_frame(X) else np.asarray(X)
    step = max(1, -(-len(rows) // max(1, n_blocks)))
    take = rows.iloc.__getitem__ if is_frame(X) else rows.__getitem__
    return [(take(slice(a, a + step)), len(take(slice(a, a + step))))
            for a in range(0, max(len(rows), 1), step)]


class Moments(NamedTuple):
    """What one pass over the training blocks reduces (:func:`reduce_moments`)."""

    weight: float  # the total sample weight
    center: np.ndarray  # (d,) the mean input of the rows of positive weight
    classes: object  # (c,) the sorted class labels (a classifier), else None
    offset: object  # (t,) the weighted mean target (a regressor), else None
    sigma: np.ndarray  # (d,) the features' weighted standard deviations (0: constant)
    scale: float  # the largest |target - offset| (a regressor's scale)


def reduce_moments(client, blocks, dtype, classifier):
    """The training blocks' :class:`Moments`, in two passes on the cluster (the first and
    second moments); a ValueError when no weight is positive."""
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
    else:
        offset = sum(f["wy"] for f in first) / weight
    second = client.gather(client.compute(
        [dask.delayed(second_moments)(xb, yb, wb, mean, offset, dtype, classifier)
         for xb, yb, wb in blocks]))
    sigma = np.sqrt(sum(s[0] for s in second) / weight)
    constant = (np.min([f["lo"] for f in first], 0) == np.max([f["hi"] for f in first], 0))
    sigma[constant] = 0.0
    scale = max(s[1] for s in second)
    return Moments(weight, center, classes, offset, sigma, scale)


class ShardedNadarayaWatson(BaseEstimator):
    """The fitting and pooling the Dask estimators share: validation, the moments, the
    bandwidth's strategy on the sharded training set, the shards; pooling every block of
    queries against every shard."""

    def __init__(self, kernel="gaussian", bandwidth="scott", *, n_neighbors=None,
                 algorithm="auto", compute="auto", metric="euclidean", device="cpu",
                 categorical_features="from_dtype", categorical_kernel="li_racine"):
        self.categorical_features = categorical_features
        self.categorical_kernel = categorical_kernel
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
        client = get_client()
        # feature_names_in_ (and n_features_in_) from a pandas or dask DataFrame, as the
        # local estimators' validate_data sets them; the arrays are checked on the workers.
        validate_data(self, columns_of(X), reset=True, skip_check_array=True)
        self._categorical = find_categorical(X, self.categorical_features,
                                             self.categorical_kernel)
        self.is_categorical_ = None if self._categorical is None else (
            self._categorical.categorical)
        if self._categorical is None:
            X = as_rows(X, "X", n_blocks=n_threads(client))
        else:
            self._categorical.use_kernel(get_kernel(self.kernel, dtype=np.float64))
            X = self._embedded_rows(X, client, fit=True)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features); got {X.ndim}-D.")
        check_some_rows(X, self)
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
        moments = reduce_moments(client, blocks, dtype, classifier)
        if classifier:
            self.classes_ = moments.classes
        self.kernel_ = get_kernel(self.kernel, dtype=dtype)
        sigma = moments.sigma
        if self._categorical is not None:  # the continuous features' spreads, per feature
            sigma = np.zeros(self._categorical.n_features)
            sigma[self._categorical.continuous] = moments.sigma[:self._categorical.n_continuous]
        self.n_features_in_ = len(sigma)
        self.n_samples_fit_ = X.shape[0]
        scale = moments.scale
        spec = ShardSettings(self.kernel_, None, moments.center, np.dtype(dtype), moments.classes,
                    moments.offset, scale if 0 < scale < np.inf else 1.0,
                    not classifier and y.ndim == 1, get_config()["working_memory"])
        # The bandwidth's strategy, as the local estimators resolve it, run on the
        # training set sharded over the cluster.
        training = ShardedTraining(client, blocks, spec, sigma, moments.weight,
                                   classifier, X.shape[0], type(self).__name__,
                                   categorical=self._categorical)
        strategy = search if search is not None else as_strategy(self.bandwidth)
        for stale in ("projection_", "n_iter_", "loss_curve_"):
            self.__dict__.pop(stale, None)
        choice = strategy.select(training)
        spec = spec._replace(metric=training.metric(choice.bandwidth)
                             if choice.projection is None else choice.projection)
        if training.shards is None:
            self._shards = build_shards(client, blocks, spec, classifier)
        else:  # the grid's shards, at the chosen bandwidth
            self._shards = [client.submit(with_metric, f, spec) for f in training.shards]
        self.bandwidth_ = choice.bandwidth
        if self._categorical is not None:  # lambda at the categorical features
            self.bandwidth_ = (self._categorical.public(choice.bandwidth)
                               if choice.shown is None else choice.shown)
        if choice.projection is not None:
            self.projection_ = choice.projection
        for name, value in (choice.report or {}).items():
            setattr(self, name, value)
        self._spec = spec
        self.n_shards_ = len(self._shards)
        return self

    def _embedded_rows(self, X, client, fit=False):
        """Inputs X with categorical features as the shards hold them: each row block
        encoded (:meth:`~sklearn_nw._categorical.CategoricalFeatures.encode`, checked as
        the local estimators check X) and embedded, on the workers, float64 (a dask
        array). At fit, the categories seen are counted there too."""
        categorical = self._categorical
        d, d_embedded = categorical.n_features, len(categorical.source)
        blocks = row_blocks(X, n_threads(client))
        codes = da.concatenate([
            da.from_delayed(dask.delayed(encoded_rows)(block, categorical, d),
                            shape=(n_rows, d), dtype=np.float64)
            for block, n_rows in blocks])
        if fit:
            categorical.n_levels = [len(u) for u in dask.compute(
                *[da.unique(codes[:, j]) for j in categorical.columns])]
        return codes.map_blocks(categorical.embed, dtype=np.float64,
                                chunks=(codes.chunks[0], (d_embedded,)))

    def _rows_like(self, a, name, X):
        a = as_rows(a, name)  # numpy arrays as one block, split along X's blocks below
        if a.shape[0] != X.shape[0]:
            raise ValueError(
                f"X has {X.shape[0]} rows but {name} has {a.shape[0]}; they must match.")
        if a.chunks[0] != X.chunks[0]:  # mismatched blocks: the rows of X's blocks
            a = a.rechunk({0: X.chunks[0]})
        return a

    def _check_live(self):
        check_is_fitted(self)
        client = get_client()
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
        X = (as_rows(X, "X", n_blocks=n_threads(client)) if self._categorical is None
             else self._embedded_rows(X, client))
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_queries, n_features); got {X.ndim}-D.")
        # The feature names and count checked as the local estimators check them.
        validate_data(self, columns_of(given), reset=False, skip_check_array=True)
        check_some_rows(X, self)
        spec = self._spec
        finals, shapes = [], []
        for block, n_rows in zip(X.to_delayed().ravel(), X.chunks[0]):
            q = client.compute(dask.delayed(check_queries)(block, X.shape[1], spec.dtype))
            parts = [client.submit(shard_part, shard, q, spec, leave_out_equal)
                     for shard in self._shards]
            finals.append(merge_pairwise(client, parts, merge))
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
        if self._categorical is not None:  # the rows as given: their categories
            X = self._categorical.decode(self._categorical.unembed(X))
        elif hasattr(self, "feature_names_in_"):
            import pandas as pd  # the names came with a (pandas or dask) DataFrame

            X = pd.DataFrame(X, columns=self.feature_names_in_)
        return self._local_class(**self._local_params()).fit(X, y, sample_weight=w)

    def _local_params(self):
        # A learned projection is no bandwidth: the local estimator learns it again.
        if hasattr(self, "projection_"):
            return self.get_params()
        return {**self.get_params(), "bandwidth": self.bandwidth_.copy()}


def check_some_rows(X, estimator):
    """Refuse a dask array X of no rows with the local estimators' error (scikit-learn's
    check_array on an empty stand-in of X's shape)."""
    if X.shape[0] == 0:
        check_array(np.empty(X.shape, dtype=X.dtype), estimator=estimator)


def grid_search(est):
    """The CV estimators' search, as the local ones run it, on the sharded training set:
    fixed bandwidths, Nadaraya-Watson, the best leave-one-out score (the only rule
    without per-sample scores)."""
    return BandwidthGridSearch(est.bandwidths, estimator=est, kinds=("fixed",), degree=0,
                               selection="min", leave_out=est.leave_out)


def check_search_params(est):
    """Refuse what the Dask CV estimators' search does not do (the table of
    :mod:`sklearn_nw._validation`)."""
    check_combinations(est, "dask search")


# What a shard computes: dense sums, eagerly, over feature vectors.
SERVED_OPTIONS = {"algorithm": {"auto", "brute"}, "compute": {"auto", "eager"},
                   "metric": {"euclidean"}}


# The local estimators' parameters the shards do not take: the regressor's standard
# errors and the leave-one-out state of the uncertainty methods (none on shards).
LOCAL_ONLY = {"residual_variance", "residual_neighbors", "store_loo"}


def constraints_on_shards(local_class):
    """The local estimator's parameter constraints, the string options of ``algorithm``,
    ``compute`` and ``metric`` cut to those a shard computes."""
    return {
        name: [StrOptions(c.options & SERVED_OPTIONS[name])
               if name in SERVED_OPTIONS and isinstance(c, StrOptions) else c
               for c in allowed]
        for name, allowed in local_class._parameter_constraints.items()
        if name not in LOCAL_ONLY
    }
