"""Nadaraya-Watson estimators with the bandwidth chosen from a grid by cross-validation."""

import warnings
from contextvars import ContextVar
from inspect import signature
from numbers import Integral
from typing import ClassVar

import numpy as np
from sklearn import get_config
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    RegressorMixin,
    _fit_context,
    is_classifier,
)
from sklearn.metrics import check_scoring, get_scorer, get_scorer_names
from sklearn.model_selection import GridSearchCV
from sklearn.utils import Bunch
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _raise_for_params,
    _routing_enabled,
    process_routing,
)

from ._classification import NadarayaWatsonClassifier
from ._docs import ATTRIBUTES, entries
from ._regression import NadarayaWatsonRegressor
from .bandwidth import LeaveOneOutGrid, search_reference

# Multiples of Scott's rule in the default grid.
_DEFAULT_GRID = (1 / 8, 8)
_DEFAULT_N_BANDWIDTHS = 25

# The metadata of the running ``fit`` call, for the search inside ``_fit``; a context
# variable, so that it never becomes fitted state.
_FIT_METADATA = ContextVar("sklearn_nw_cv_fit_metadata", default=None)


def _fit_metadata():
    """The running fit's metadata: ``params`` as passed (``sample_weight`` included when
    given) and ``routed``, scikit-learn's routing of them (None when routing is off)."""
    metadata = _FIT_METADATA.get()
    return Bunch(params={}, routed=None) if metadata is None else metadata


def _accepts_sample_weight(scorer):
    """Whether a scorer takes ``sample_weight``, decided as GridSearchCV decides it."""
    accept = getattr(scorer, "_accept_sample_weight", None)  # scikit-learn's scorers
    if accept is not None:
        return accept()
    return "sample_weight" in signature(scorer).parameters


def _search_constraints(plain_class):
    """The plain estimator's parameter constraints, ``bandwidth`` replaced by the search's."""
    constraints = {k: v for k, v in plain_class._parameter_constraints.items()
                   if k not in ("bandwidth", "metric")}
    constraints.update({
        "bandwidths": [Interval(Integral, 1, None, closed="left"), "array-like", None],
        "cv": ["cv_object"],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
    })
    return constraints


class _BandwidthSearchMixin:
    """Chooses ``bandwidth_`` from ``bandwidths`` in place of the plain estimator's rule.

    It comes first in the CV estimators' bases, so its ``__init__`` (their parameters) is
    the one scikit-learn's ``get_params`` reads. Metadata is routed as in
    :class:`~sklearn.linear_model.RidgeCV`: to the estimator's own fit, the scorer's
    ``score`` and the splitter's ``split``.
    """

    def __init__(self, bandwidths=None, kernel="gaussian", *, cv=None, scoring=None,
                 n_neighbors=None, algorithm="auto", compute="auto", device="cpu"):
        self.bandwidths = bandwidths
        self.kernel = kernel
        self.cv = cv
        self.scoring = scoring
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.device = device

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, **params):
        """Choose the bandwidth from the grid, then store the training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets; for the classifier, class labels of shape (n_samples,), of any type
            ``numpy.unique`` can sort.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative frequency weights: an integer weight equals repeating the row.
            Without metadata routing they also go to the scorer when it takes
            ``sample_weight``; with routing, to the scorer and the splitter when they
            request them.
        **params : dict
            Metadata for the scorer and the splitter, e.g. ``groups`` for
            :class:`~sklearn.model_selection.GroupKFold`.

            Only available if ``enable_metadata_routing=True``, which can be set by using
            ``sklearn.set_config(enable_metadata_routing=True)``. See
            :ref:`Metadata Routing User Guide <metadata_routing>` for more details.

        Returns
        -------
        self : object
            The fitted estimator.

        Notes
        -----
        With ``cv=None`` the sample weights are frequency weights of the leave-one-out
        predictions and weigh the default score; with a splitter they weigh each split's
        fit, and its score when the scorer takes them. So the chosen bandwidth may differ
        between the two, as for :class:`~sklearn.linear_model.RidgeCV`.
        """
        return self._fit_search(X, y, sample_weight, params, classifier=is_classifier(self))

    def _fit_search(self, X, y, sample_weight, params, *, classifier):
        """``fit`` of the CV estimators: route the metadata, then the plain estimators' fit,
        whose :meth:`_fit_bandwidth` runs the search with it."""
        _raise_for_params(params, self, "fit")
        if sample_weight is not None:
            params = {**params, "sample_weight": sample_weight}
        routed = process_routing(self, "fit", **params) if _routing_enabled() else None
        token = _FIT_METADATA.set(Bunch(params=params, routed=routed))
        try:
            return self._fit(X, y, sample_weight, classifier=classifier)
        finally:
            _FIT_METADATA.reset(token)

    def get_metadata_routing(self):
        """Get metadata routing of this object.

        Please check :ref:`User Guide <metadata_routing>` on how the routing
        mechanism works.

        Returns
        -------
        routing : MetadataRouter
            A :class:`~sklearn.utils.metadata_routing.MetadataRouter` encapsulating
            routing information: this estimator's ``fit``, the scorer's ``score`` and the
            splitter's ``split``.
        """
        return (
            MetadataRouter(owner=self)
            .add_self_request(self)
            .add(
                scorer=self._get_scorer(),
                method_mapping=MethodMapping().add(caller="fit", callee="score"),
            )
            .add(
                splitter=self.cv,
                method_mapping=MethodMapping().add(caller="fit", callee="split"),
            )
        )

    def _get_scorer(self):
        """The scorer of ``scoring``; None for the default scores without routing.

        With routing on, the default scores (the weighted loss of the leave-one-out
        predictions, or the estimator's ``score`` on each split) use ``sample_weight``
        whenever it is given, so the default scorer requests it, as in RidgeCV.
        """
        if _routing_enabled() and self.scoring is None:
            return get_scorer(self._default_scoring).set_score_request(sample_weight=True)
        return check_scoring(self, scoring=self.scoring, allow_none=True)

    def _bandwidth_grid(self):
        """The grid as an array (G, n_features) of bandwidth vectors."""
        d = self.X_fit_.shape[1]
        if self.bandwidths is None or isinstance(self.bandwidths, Integral):
            n = _DEFAULT_N_BANDWIDTHS if self.bandwidths is None else self.bandwidths
            multiples = np.geomspace(*_DEFAULT_GRID, n) if n > 1 else np.ones(1)
            return multiples[:, None] * search_reference(self.X_fit_, self.sample_weight_)
        grid = np.array(self.bandwidths, dtype=np.float64)  # a copy: never the user's array
        if grid.size == 0:
            raise ValueError("bandwidths must not be empty.")
        if grid.ndim == 1:
            grid = np.repeat(grid[:, None], d, axis=1)
        elif grid.ndim != 2 or grid.shape[1] != d:
            raise ValueError(
                "bandwidths must be a sequence of scalars or of per-feature vectors of length "
                f"n_features={d}; got an array of shape {grid.shape}."
            )
        if not np.all(np.isfinite(grid)) or np.any(grid <= 0):
            raise ValueError(f"bandwidths must be positive and finite; got {grid.tolist()}.")
        return grid

    def _fit_bandwidth(self, values, *, loss):
        grid = self._bandwidth_grid()
        y = self._targets()
        if self.cv is None:
            # Ranked in the pooled values' unit: squared errors in the targets' unit can
            # underflow or overflow (targets of 1e-200 or 1e250).
            scores, reported = self._loo_scores(grid, values, y, loss)
            self.cv_results_ = {"mean_test_score": reported}
        else:
            estimator = self._plain_estimator()
            if _routing_enabled():
                estimator.set_fit_request(sample_weight=True)
            search = GridSearchCV(
                estimator, {"bandwidth": list(grid)}, cv=self.cv,
                scoring=self._get_scorer(), refit=False,
            ).fit(self.X_fit_, y, **self._search_params())
            self.cv_results_ = {k: v for k, v in search.cv_results_.items() if k != "params"}
            scores = self.cv_results_["mean_test_score"]
        self.cv_results_["bandwidth"] = grid
        self.cv_results_["rank_test_score"] = (
            np.argsort(np.argsort(-scores, kind="stable"), kind="stable") + 1
        )
        self.best_index_ = int(np.argmax(scores))
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        self.bandwidths_ = grid
        self.bandwidth_ = grid[self.best_index_]

    def _loo_scores(self, grid, values, y, loss):
        """Exact leave-one-out scores of every grid point, in one pass over the data: to
        rank them, and as reported (the default loss in the targets' unit)."""
        loo = self._leave_one_out_set(values, "cv=None")
        score = None
        if self.scoring is not None:
            scorer, score_params = self._loo_scorer()

            def score(pooled):  # (L, t) at the distinct inputs
                predictions = self._loo_predictions(loo.expand(pooled))
                return scorer(predictions, self.X_fit_, y, **score_params)

        result = LeaveOneOutGrid(grid, score=score).select(
            loo, self.kernel_, loss=loss, dtype=self.X_fit_.dtype, device=self.device_,
            working_memory=get_config()["working_memory"],
        )
        if self.scoring is None:
            return result.scores, -self._loss_over_rows(result.loss, loo)
        return result.scores, result.scores

    def _search_params(self):
        """The metadata for GridSearchCV's fit: as passed to ``fit``, with the validated
        sample weights, and none when none were given (ones would make GridSearchCV send
        them to, or warn about, a scorer that takes no ``sample_weight``)."""
        params = dict(_fit_metadata().params)
        if "sample_weight" in params:
            params["sample_weight"] = self.sample_weight_
        return params

    def _loo_scorer(self):
        """The user's scorer of the leave-one-out predictions and the metadata it gets: as
        routed, or without routing the sample weights when given and the scorer takes them
        (with GridSearchCV's warning when it does not)."""
        scorer = self._get_scorer()
        metadata = _fit_metadata()
        if metadata.routed is not None:
            return scorer, metadata.routed.scorer.score
        if "sample_weight" not in metadata.params:
            return scorer, {}
        if _accepts_sample_weight(scorer):
            return scorer, {"sample_weight": self.sample_weight_}
        warnings.warn(
            f"The scoring {scorer} does not support sample_weight, which may lead to "
            f"statistically incorrect results when fitting {self} with sample_weight.",
            UserWarning,
        )
        return scorer, {}

    def _plain_estimator(self):
        return self._plain_class(kernel=self.kernel, n_neighbors=self.n_neighbors,
                                 algorithm=self.algorithm, compute=self.compute,
                                 device=self.device)


class _LeaveOneOutRegression(RegressorMixin, BaseEstimator):
    """Leave-one-out predictions posing as a fitted regressor, for scikit-learn's scorers."""

    def __init__(self, predictions):
        self.predictions = predictions

    def predict(self, X):
        return self.predictions

    def __sklearn_is_fitted__(self):
        return True


class _LeaveOneOutClassification(ClassifierMixin, BaseEstimator):
    """Leave-one-out probabilities posing as a fitted classifier, for scikit-learn's scorers."""

    def __init__(self, proba, classes):
        self.proba = proba
        self.classes = classes

    @property
    def classes_(self):
        return self.classes

    def predict_proba(self, X):
        return self.proba

    def predict(self, X):
        return self.classes[np.argmax(self.proba, axis=1)]

    def __sklearn_is_fitted__(self):
        return True


_SHARED_DOC = r"""
    Parameters
    ----------
    bandwidths : int, array-like of shape (n_bandwidths,) or (n_bandwidths, n_features), default=None
        The grid: scalar bandwidths, or per-feature bandwidth vectors. An int ``m`` means
        ``m`` multiples of Scott's rule, geometrically spaced from 1/8 to 8; None means 25.
    kernel : str, Kernel or callable, default="gaussian"
        As in the plain estimator.
    cv : int, cross-validation generator or iterable, default=None
        None: exact leave-one-out for every grid point, in one pass over the distance
        blocks (the distances are computed once and shared by all bandwidths), with sample
        weights as frequency weights. Otherwise scikit-learn's splitters, through
        :class:`~sklearn.model_selection.GridSearchCV`.
    scoring : str or callable, default=None
        None: with ``cv=None`` the negative sample-weighted {loss} of the leave-one-out
        predictions; with a splitter the estimator's ``score``. A scorer name or callable
        is applied to the leave-one-out predictions (``cv=None``) or to each split.
    n_neighbors : int, default=None
        As in the plain estimator (the leave-one-out scores use all training points).
    algorithm : {{"auto", "brute", "kd_tree", "ball_tree", "cell_list"}}, default="auto"
        As in the plain estimator.
    compute : {{"auto", "eager", "compiled"}}, default="auto"
        As in the plain estimator.
    device : str, default="cpu"
        Torch device, as in the plain estimator.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
        The chosen bandwidth (the first best grid point on ties).
    bandwidths_ : ndarray of shape (n_bandwidths, n_features)
        The grid as bandwidth vectors.
    best_score_ : float
        Score of the chosen bandwidth.
    best_index_ : int
        Its index in the grid.
    cv_results_ : dict of ndarrays
        ``"bandwidth"`` (the grid), ``"mean_test_score"``, ``"rank_test_score"``, and with a
        splitter the per-split scores and timings of GridSearchCV.
"""  # noqa: E501 (a numpydoc type line is one line)

# The plain estimators' fitted attributes that the CV estimators share.
_FITTED = entries(ATTRIBUTES, "kernel_", "device_", "X_fit_", "route_", "key_set_",
                  "sample_weight_", "attention_weights_", "n_features_in_",
                  "feature_names_in_")


class NadarayaWatsonRegressorCV(_BandwidthSearchMixin, NadarayaWatsonRegressor):
    __doc__ = (
        """Nadaraya-Watson regression with the bandwidth chosen from a grid by cross-validation.

    Follows :class:`~sklearn.linear_model.RidgeCV`: ``cv=None`` is an exact, cheap
    leave-one-out; then it predicts like :class:`NadarayaWatsonRegressor` with
    ``bandwidth=bandwidth_``.
"""
        + _SHARED_DOC.format(loss="mean squared error")
        + """    y_fit_ : ndarray of shape (n_samples_fit,) or (n_samples_fit, n_outputs)
        Training targets, float64.
"""
        + _FITTED
        + """

    See Also
    --------
    NadarayaWatsonRegressor : With a fixed, rule-of-thumb or learned bandwidth.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_nw import NadarayaWatsonRegressorCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 6, (200, 1))
    >>> y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=200)
    >>> reg = NadarayaWatsonRegressorCV(bandwidths=[0.001, 0.3, 30.0]).fit(X, y)
    >>> reg.bandwidth_
    array([0.3])
"""
    )

    _plain_class = NadarayaWatsonRegressor
    _default_scoring = "r2"
    _parameter_constraints: ClassVar[dict] = _search_constraints(NadarayaWatsonRegressor)

    def _targets(self):
        return self.y_fit_

    def _loo_predictions(self, pooled):
        pooled = self._unscale(pooled)
        return _LeaveOneOutRegression(pooled if self.y_fit_.ndim == 2 else pooled[:, 0])


class NadarayaWatsonClassifierCV(_BandwidthSearchMixin, NadarayaWatsonClassifier):
    __doc__ = (
        """Nadaraya-Watson classification with the bandwidth chosen from a grid by
    cross-validation.

    ``cv=None`` is an exact, cheap leave-one-out; then it predicts like
    :class:`NadarayaWatsonClassifier` with ``bandwidth=bandwidth_``.
"""
        + _SHARED_DOC.format(loss="log-loss")
        + """    classes_ : ndarray of shape (n_classes,)
        The class labels.
    y_fit_ : ndarray of shape (n_samples_fit,)
        Training labels encoded as indices into ``classes_``.
"""
        + _FITTED
        + """

    See Also
    --------
    NadarayaWatsonClassifier : With a fixed, rule-of-thumb or learned bandwidth.
"""
    )

    _plain_class = NadarayaWatsonClassifier
    _default_scoring = "accuracy"
    _parameter_constraints: ClassVar[dict] = _search_constraints(NadarayaWatsonClassifier)

    def _targets(self):
        return self.classes_[self.y_fit_]

    def _loo_predictions(self, pooled):
        return _LeaveOneOutClassification(pooled, self.classes_)
