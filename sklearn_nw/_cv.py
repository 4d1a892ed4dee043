"""Nadaraya-Watson estimators with the bandwidth chosen from a grid by cross-validation."""

from numbers import Integral
from typing import ClassVar

import numpy as np
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.metrics import check_scoring, get_scorer_names
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import Interval, StrOptions

from ._classification import NadarayaWatsonClassifier
from ._engine import resolve_device
from ._engine_loo import loo_grid_pool
from ._regression import NadarayaWatsonRegressor
from .bandwidth import scott_bandwidth

# Multiples of Scott's rule in the default grid.
_DEFAULT_GRID = (1 / 8, 8)
_DEFAULT_N_BANDWIDTHS = 25


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
    the one scikit-learn's ``get_params`` reads.
    """

    # Bandwidth grids live in feature space: no precomputed distances.
    metric = "euclidean"

    def __init__(self, bandwidths=None, kernel="gaussian", *, cv=None, scoring=None,
                 n_neighbors=None, algorithm="auto", device="cpu"):
        self.bandwidths = bandwidths
        self.kernel = kernel
        self.cv = cv
        self.scoring = scoring
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.device = device

    def _bandwidth_grid(self):
        """The grid as an array (G, n_features) of bandwidth vectors."""
        d = self.X_fit_.shape[1]
        if self.bandwidths is None or isinstance(self.bandwidths, Integral):
            n = _DEFAULT_N_BANDWIDTHS if self.bandwidths is None else self.bandwidths
            multiples = np.geomspace(*_DEFAULT_GRID, n) if n > 1 else np.ones(1)
            return multiples[:, None] * scott_bandwidth(self.X_fit_, self.sample_weight_)
        grid = np.asarray(self.bandwidths, dtype=np.float64)
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
            scores = self._loo_scores(grid, values, y, loss)
            self.cv_results_ = {"mean_test_score": scores}
        else:
            search = GridSearchCV(
                self._plain_estimator(), {"bandwidth": list(grid)}, cv=self.cv,
                scoring=self.scoring, refit=False,
            ).fit(self.X_fit_, y, sample_weight=self.sample_weight_)
            self.cv_results_ = {k: v for k, v in search.cv_results_.items() if k != "params"}
            scores = self.cv_results_["mean_test_score"]
        self.cv_results_["bandwidth"] = grid
        self.cv_results_["rank_test_score"] = (
            np.argsort(np.argsort(-scores, kind="stable"), kind="stable") + 1
        )
        self.best_index_ = int(np.argmax(scores))
        self.best_score_ = float(scores[self.best_index_])
        self.bandwidths_ = grid
        self.bandwidth_ = grid[self.best_index_]

    def _loo_scores(self, grid, values, y, loss):
        """Exact leave-one-out scores of every grid point, in one pass over the data."""
        n = self.X_fit_.shape[0]
        if n < 2:
            raise ValueError(
                f"{type(self).__name__} with cv=None needs n_samples >= 2 for leave-one-out; "
                f"got n_samples={n}."
            )
        tensor = self._tensor_maker(resolve_device(self.device_))
        log_w, self_log_w = self._log_weights(leave_one_out=True)
        pooled = loo_grid_pool(
            tensor(self.X_fit_), tensor(values), tensor(grid), self.kernel_, tensor(log_w),
            tensor(self_log_w), working_memory=get_config()["working_memory"],
        ).cpu().numpy().astype(np.float64)  # (G, n, t)
        w = self.sample_weight_
        if self.scoring is None:
            if loss == "squared_error":
                per_row = ((pooled - values) ** 2).sum(axis=2)  # (G, n)
            else:
                p_true = (pooled * values).sum(axis=2)  # (G, n)
                per_row = -np.log(np.clip(p_true, np.finfo(self.X_fit_.dtype).eps, None))
            return -(per_row * w).sum(axis=1) / w.sum()
        scorer = check_scoring(self, scoring=self.scoring)
        return np.array([
            scorer(self._loo_predictions(p), self.X_fit_, y, sample_weight=w) for p in pooled
        ])

    def _plain_estimator(self):
        return self._plain_class(kernel=self.kernel, n_neighbors=self.n_neighbors,
                                 algorithm=self.algorithm, device=self.device)


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
    algorithm : {{"auto", "brute", "compiled", "kd_tree", "ball_tree", "cell_list"}}, default="auto"
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
"""


class NadarayaWatsonRegressorCV(_BandwidthSearchMixin, NadarayaWatsonRegressor):
    __doc__ = (
        """Nadaraya-Watson regression with the bandwidth chosen from a grid by cross-validation.

    Follows :class:`~sklearn.linear_model.RidgeCV`: ``cv=None`` is an exact, cheap
    leave-one-out; then it predicts like :class:`NadarayaWatsonRegressor` with
    ``bandwidth=bandwidth_``.
"""
        + _SHARED_DOC.format(loss="mean squared error")
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
    _parameter_constraints: ClassVar[dict] = _search_constraints(NadarayaWatsonRegressor)

    def _targets(self):
        return self.y_fit_

    def _loo_predictions(self, pooled):
        return _LeaveOneOutRegression(pooled if self.y_fit_.ndim == 2 else pooled[:, 0])


class NadarayaWatsonClassifierCV(_BandwidthSearchMixin, NadarayaWatsonClassifier):
    __doc__ = (
        """Nadaraya-Watson classification with the bandwidth chosen from a grid by
    cross-validation.

    ``cv=None`` is an exact, cheap leave-one-out; then it predicts like
    :class:`NadarayaWatsonClassifier` with ``bandwidth=bandwidth_``.
"""
        + _SHARED_DOC.format(loss="log-loss")
        + """
    classes_ : ndarray of shape (n_classes,)
        The class labels.

    See Also
    --------
    NadarayaWatsonClassifier : With a fixed, rule-of-thumb or learned bandwidth.
"""
    )

    _plain_class = NadarayaWatsonClassifier
    _parameter_constraints: ClassVar[dict] = _search_constraints(NadarayaWatsonClassifier)

    def _targets(self):
        return self.classes_[self.y_fit_]

    def _loo_predictions(self, pooled):
        return _LeaveOneOutClassification(pooled, self.classes_)
