"""Nadaraya-Watson estimators with their keys sharded over a dask cluster.

The estimators of this module have the names and parameters of the local ones (the dask-ml
convention). ``fit`` takes dask arrays (or numpy arrays, which it splits into one block per
worker thread) and leaves the keys on the workers: each block of training rows becomes one shard,
a :class:`~sklearn_nw._keys.FittedKeys` built and kept where it was computed. ``predict``
pools every block of queries against every shard and merges the shards' partial sums
exactly, by a tree reduction in log space (:mod:`sklearn_nw._shards`):

    f(q) = sum_s N_s(q) / sum_s D_s(q),
    D_s(q) = sum_{j in s} w_j k(u_qj),  N_s(q) = sum_{j in s} w_j k(u_qj) v_j,

each shard sending per query only its normalized sums and ``log D_s`` (t + 3 numbers).

Needs ``dask[array]`` and ``distributed`` (``pip install "sklearn-nw[dask]"``) and a running
:class:`distributed.Client`.
"""

from typing import ClassVar

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

try:
    import dask  # noqa: F401 (the error below names what to install)
    import distributed  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without dask installed
    raise ImportError(
        "sklearn_nw.dask needs dask and distributed: pip install 'sklearn-nw[dask]' "
        "(or pip install 'dask[array]' distributed)."
    ) from exc

from ._classification import NadarayaWatsonClassifier as _LocalClassifier
from ._cv import NadarayaWatsonClassifierCV as _LocalClassifierCV
from ._cv import NadarayaWatsonRegressorCV as _LocalRegressorCV
from ._dask_base import (
    ShardedNadarayaWatson,
    check_search_params,
    constraints_on_shards,
    grid_search,
)
from ._docs import fill_doc
from ._regression import NadarayaWatsonRegressor as _LocalRegressor

__all__ = [
    "NadarayaWatsonClassifier",
    "NadarayaWatsonClassifierCV",
    "NadarayaWatsonRegressor",
    "NadarayaWatsonRegressorCV",
]


# The categorical features' entries of the four estimators' docstrings (fill_doc).
_CATEGORICAL_DOC = """\
    categorical_features : "from_dtype", array-like of bool, int or str, or None, \
            default="from_dtype"
        As in the local estimator: a pandas or dask DataFrame's ``category`` columns
        (categories a dask column does not declare are computed on the cluster), a mask,
        indices or names. The blocks are encoded and embedded on the workers; Gaussian
        kernel only.
    categorical_kernel : {"li_racine", "aitchison_aitken"}, default="li_racine"
"""


@fill_doc(categorical=_CATEGORICAL_DOC.rstrip())
class NadarayaWatsonRegressor(RegressorMixin, ShardedNadarayaWatson):
    """Nadaraya-Watson regression with its keys sharded over a dask cluster.

    The parameters are those of :class:`sklearn_nw.NadarayaWatsonRegressor`: every
    kernel; a rule of thumb, a given bandwidth or a learned one; ``n_neighbors=None``,
    ``degree=0``.

    Read more in the :ref:`User Guide <ug_dask>`.

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
%(categorical)s
    degree : {0}, default=0
    bounded : bool, default=False
        The local polynomials' bound: no effect here (``degree`` is 0).

    Attributes
    ----------
    kernel_ : Kernel
    bandwidth_ : ndarray of shape (n_features,)
    is_categorical_ : ndarray of bool of shape (n_features,) or None
        The categorical features, None without any; ``bandwidth_`` holds their smoothing
        ``lambda``.
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

    _parameter_constraints: ClassVar[dict] = constraints_on_shards(_LocalRegressor)
    _local_class = _LocalRegressor

    def __init__(self, kernel="gaussian", bandwidth="scott", *, n_neighbors=None,
                 algorithm="auto", compute="auto", metric="euclidean", device="cpu",
                 categorical_features="from_dtype", categorical_kernel="li_racine",
                 degree=0, bounded=False):
        super().__init__(kernel, bandwidth, n_neighbors=n_neighbors, algorithm=algorithm,
                         compute=compute, metric=metric, device=device,
                         categorical_features=categorical_features,
                         categorical_kernel=categorical_kernel)
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
        empty neighborhood) and kept on the cluster.

        Parameters
        ----------
        X : dask or numpy array of shape (n_queries, n_features)

        Returns
        -------
        y_pred : dask array of shape (n_queries,) or (n_queries, n_outputs)
        """
        return self._pool(X)


@fill_doc(categorical=_CATEGORICAL_DOC.rstrip())
class NadarayaWatsonClassifier(ClassifierMixin, ShardedNadarayaWatson):
    """Nadaraya-Watson classification with its keys sharded over a dask cluster.

    The parameters are those of :class:`sklearn_nw.NadarayaWatsonClassifier`: every
    kernel; a rule of thumb, a given bandwidth or a learned one; ``n_neighbors=None``.

    Read more in the :ref:`User Guide <ug_dask>`.

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
%(categorical)s

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    kernel_ : Kernel
    bandwidth_ : ndarray of shape (n_features,)
    is_categorical_ : ndarray of bool of shape (n_features,) or None
        The categorical features, None without any; ``bandwidth_`` holds their smoothing
        ``lambda``.
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

    _parameter_constraints: ClassVar[dict] = constraints_on_shards(_LocalClassifier)
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


@fill_doc(categorical=_CATEGORICAL_DOC.rstrip())
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

    Read more in the :ref:`User Guide <ug_dask>`.

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
%(categorical)s
    degree : {"auto", 0}, default="auto"
        Nadaraya-Watson ("auto" is 0 here).
    bounded : bool, default=True
        The local polynomials' bound: no effect here (``degree`` is 0).
    selection : "min", default="min"
        The best grid point. The local estimator's default, the one-standard-error
        rule, needs each distinct training input's leave-one-out loss, which the shards
        reduce to one number per block of rows.
    leave_out : {"row", "input"}, default="row"
        As in the local estimator. Each row's prediction leaves out every key at its
        input on every shard; with ``"row"`` the other rows at that input are added
        back from their weights and values, reduced over the blocks by input.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
    is_categorical_ : ndarray of bool of shape (n_features,) or None
        The categorical features, None without any; ``bandwidth_`` holds their smoothing
        ``lambda``.
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

    _parameter_constraints: ClassVar[dict] = constraints_on_shards(_LocalRegressorCV)
    _local_class = _LocalRegressorCV

    def __init__(self, bandwidths=None, kernel="gaussian", *, bandwidth_kinds="auto",
                 cv=None, scoring=None, n_neighbors=None, algorithm="auto", compute="auto",
                 device="cpu", categorical_features="from_dtype",
                 categorical_kernel="li_racine", degree="auto", bounded=True,
                 selection="min", leave_out="row"):
        self.categorical_features = categorical_features
        self.categorical_kernel = categorical_kernel
        self.leave_out = leave_out
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
        check_search_params(self)
        return self._fit(X, y, sample_weight, classifier=False, search=grid_search(self))

    def _local_params(self):
        return {**self.get_params(), "bandwidths": [self.bandwidth_.copy()],
                "bandwidth_kinds": ["fixed"], "degree": 0}


@fill_doc(categorical=_CATEGORICAL_DOC.rstrip())
class NadarayaWatsonClassifierCV(NadarayaWatsonClassifier):
    """Nadaraya-Watson classification over a dask cluster, the bandwidth chosen by the
    exact leave-one-out grid.

    The parameters are those of :class:`sklearn_nw.NadarayaWatsonClassifierCV`, which
    this equals with ``bandwidth_kinds=["fixed"]``: each grid point is scored by its
    leave-one-out log-loss, computed over the shards as in
    :class:`NadarayaWatsonRegressorCV`, and the best one is kept (as the local
    classifier keeps it with either ``selection``).

    Read more in the :ref:`User Guide <ug_dask>`.

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
%(categorical)s
    selection : {"one_se", "min"}, default="one_se"
        Either keeps the best grid point (the leave-one-out log-loss has no per-sample
        scores), as in the local classifier.
    leave_out : {"row", "input"}, default="row"
        As in the local estimator. Each row's prediction leaves out every key at its
        input on every shard; with ``"row"`` the other rows at that input are added
        back from their weights and values, reduced over the blocks by input.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    bandwidth_ : ndarray of shape (n_features,)
    is_categorical_ : ndarray of bool of shape (n_features,) or None
        The categorical features, None without any; ``bandwidth_`` holds their smoothing
        ``lambda``.
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

    _parameter_constraints: ClassVar[dict] = constraints_on_shards(_LocalClassifierCV)
    _local_class = _LocalClassifierCV

    def __init__(self, bandwidths=None, kernel="gaussian", *, bandwidth_kinds="auto",
                 cv=None, scoring=None, n_neighbors=None, algorithm="auto", compute="auto",
                 device="cpu", categorical_features="from_dtype",
                 categorical_kernel="li_racine", selection="one_se", leave_out="row"):
        self.categorical_features = categorical_features
        self.categorical_kernel = categorical_kernel
        self.leave_out = leave_out
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
        check_search_params(self)
        return self._fit(X, y, sample_weight, classifier=True, search=grid_search(self))

    def _local_params(self):
        return {**self.get_params(), "bandwidths": [self.bandwidth_.copy()],
                "bandwidth_kinds": ["fixed"]}
