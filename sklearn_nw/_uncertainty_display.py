"""The fit of a regressor with its confidence and prediction bands along one feature
(:class:`UncertaintyBandDisplay`). Public in :mod:`sklearn_nw.inspection`; matplotlib is
imported when plotting."""

from numbers import Integral

import numpy as np
from sklearn.utils._optional_dependencies import check_matplotlib_support
from sklearn.utils.validation import check_array, check_is_fitted

from ._base import confidence_levels
from ._regression import NadarayaWatsonRegressor

BIAS_CORRECTIONS = ("robust", "conventional", "both")
_BAND_LABELS = {"robust": "robust bias-corrected", "conventional": "conventional"}
_BAND_STYLES = {"robust": {"color": "C0", "alpha": 0.35},
                "conventional": {"color": "C3", "alpha": 0.25}}


class UncertaintyBandDisplay:
    """A regressor's fit along one feature, with its confidence band for the regression
    function and its prediction band for new targets.

    The constructor only stores data; :meth:`plot` draws; :meth:`from_estimator` computes
    the bands with :meth:`~sklearn_nw.NadarayaWatsonRegressor.predict_confidence_interval`
    and :meth:`~sklearn_nw.NadarayaWatsonRegressor.predict_interval` on a grid and plots.

    With several features the curve and the bands are a *slice*: the chosen feature
    varies on the grid, every other feature is held at one value (by default its median
    in ``X``). The bands are then pointwise intervals for the regression function, and
    for a new target, at those points of the input space only; they are not bands for a
    partial dependence (an average over the other features), nor simultaneous over the
    grid.

    Read more in the :ref:`User Guide <ug_uncertainty_display>`.

    Parameters
    ----------
    grid : ndarray of shape (n_grid,)
        The values of the feature on the grid.
    prediction : ndarray of shape (n_grid,)
        The estimator's prediction at the grid's points.
    confidence_bands : dict of str to ndarray of shape (n_grid, 2), default=None
        Lower and upper bounds of the confidence intervals by kind, ``"robust"`` and/or
        ``"conventional"``.
    prediction_band : ndarray of shape (n_grid, 2), default=None
        Lower and upper bounds of the prediction intervals.
    confidence_level : float, default=0.95
        The level of both bands, for their labels.
    feature_name : str, default=None
        The x-axis label.
    X_points, y_points : ndarray of shape (n_points,), default=None
        Points to draw as a scatter (the training data along the feature).
    held_at : dict of str to float, default=None
        The values at which the other features are held, named, for the title.

    Attributes
    ----------
    ax_ : matplotlib Axes
        The axes.
    figure_ : matplotlib Figure
        The figure.
    line_ : matplotlib Line2D
        The fit.
    confidence_bands_ : dict of str to matplotlib PolyCollection
        Each confidence band drawn, by kind.
    prediction_band_ : matplotlib PolyCollection or None
        The prediction band.
    scatter_ : matplotlib PathCollection or None
        The points.

    See Also
    --------
    sklearn_nw.NadarayaWatsonRegressor.predict_confidence_interval : The confidence
        intervals.
    sklearn_nw.NadarayaWatsonRegressor.predict_interval : The jackknife+ prediction
        intervals.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_nw import NadarayaWatsonRegressor
    >>> from sklearn_nw.inspection import UncertaintyBandDisplay
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (200, 1))
    >>> y = np.sin(3 * X[:, 0]) + rng.normal(scale=0.3, size=200)
    >>> reg = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=0.3,
    ...                               degree=1).fit(X, y)
    >>> disp = UncertaintyBandDisplay.from_estimator(reg, X, y, grid_resolution=50)
    >>> sorted(disp.confidence_bands_)
    ['robust']
    >>> disp.prediction_band.shape
    (50, 2)
    """

    def __init__(self, grid, prediction, *, confidence_bands=None, prediction_band=None,
                 confidence_level=0.95, feature_name=None, X_points=None, y_points=None,
                 held_at=None):
        self.grid = grid
        self.prediction = prediction
        self.confidence_bands = confidence_bands
        self.prediction_band = prediction_band
        self.confidence_level = confidence_level
        self.feature_name = feature_name
        self.X_points = X_points
        self.y_points = y_points
        self.held_at = held_at

    def plot(self, ax=None, *, show_points=True, line_kwargs=None, scatter_kwargs=None,
             legend=True):
        """Draw the prediction band, the confidence bands, the points and the fit.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None.
        show_points : bool, default=True
            Whether to draw ``X_points`` and ``y_points``.
        line_kwargs, scatter_kwargs : dict, default=None
            Passed to :meth:`matplotlib.axes.Axes.plot` (the fit) and
            :meth:`matplotlib.axes.Axes.scatter` (the points).
        legend : bool, default=True
            Whether to add a legend.

        Returns
        -------
        display : UncertaintyBandDisplay
        """
        check_matplotlib_support(f"{type(self).__name__}.plot")
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        grid = np.asarray(self.grid, dtype=np.float64)
        level = f"{100 * self.confidence_level:g}%"
        self.scatter_ = None
        if show_points and self.X_points is not None and self.y_points is not None:
            what = "training points" if not self.held_at else (
                "training points (all values of the other features)")
            self.scatter_ = ax.scatter(self.X_points, self.y_points, **{
                "s": 8, "color": "0.55", "alpha": 0.5, "label": what,
                **(scatter_kwargs or {})})
        self.prediction_band_ = None
        if self.prediction_band is not None:
            band = np.asarray(self.prediction_band, dtype=np.float64)
            self.prediction_band_ = ax.fill_between(
                grid, band[:, 0], band[:, 1], color="C2", alpha=0.15, linewidth=0,
                label=f"{level} prediction band (jackknife+)")
        self.confidence_bands_ = {}
        for kind, band in (self.confidence_bands or {}).items():
            band = np.asarray(band, dtype=np.float64)
            self.confidence_bands_[kind] = ax.fill_between(
                grid, band[:, 0], band[:, 1], linewidth=0, **_BAND_STYLES.get(kind, {}),
                label=f"{level} confidence band ({_BAND_LABELS.get(kind, kind)})")
        (self.line_,) = ax.plot(grid, self.prediction, **{"color": "k", "linewidth": 1.5,
                                                          "label": "fit",
                                                          **(line_kwargs or {})})
        ax.set_xlabel(self.feature_name or "x")
        ax.set_ylabel("target")
        if self.held_at:
            ax.set_title("other features held at "
                         + ", ".join(f"{k} = {v:.3g}" for k, v in self.held_at.items()),
                         fontsize="small")
        if legend:
            ax.legend(fontsize="small")
        self.ax_ = ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X, y=None, *, feature=0, confidence_level=0.95,
                       bias_correction="robust", bias_bandwidth=None, prediction_band=True,
                       grid_resolution=100, held_at=None, ax=None, **kwargs):
        """The fit of a fitted regressor along one feature, with its bands.

        On ``grid_resolution`` evenly spaced values of the feature, from its least to its
        largest value in ``X``, the other features held at ``held_at``: the prediction
        (:meth:`~sklearn_nw.NadarayaWatsonRegressor.predict`), the confidence intervals
        (:meth:`~sklearn_nw.NadarayaWatsonRegressor.predict_confidence_interval`, the
        robust bias-corrected one centered at the bias-corrected estimate, not at the
        fit) and the jackknife+ prediction intervals
        (:meth:`~sklearn_nw.NadarayaWatsonRegressor.predict_interval`), all at
        ``confidence_level``. Each is pointwise.

        Parameters
        ----------
        estimator : NadarayaWatsonRegressor or NadarayaWatsonRegressorCV
            Fitted, on one target.
        X : array-like of shape (n_samples, n_features)
            Data that sets the grid's range and the other features' medians (usually the
            training inputs).
        y : array-like of shape (n_samples,), default=None
            Targets of ``X``, drawn as points against the feature; None draws none.
        feature : int or str, default=0
            The feature along which the fit is drawn: an index, or a name of
            ``feature_names_in_``.
        confidence_level : float, default=0.95
            The level of the confidence and the prediction bands, in (0, 1).
        bias_correction : {"robust", "conventional", "both"} or None, default="robust"
            Which confidence band to draw; None: none.
        bias_bandwidth : float or array-like of shape (n_features,), default=None
            Passed to ``predict_confidence_interval``.
        prediction_band : bool, default=True
            Whether to draw the jackknife+ prediction band.
        grid_resolution : int, default=100
            Points of the grid, at least 2.
        held_at : array-like of shape (n_features,), default=None
            The values of the other features (the chosen feature's entry is ignored);
            None: their medians in ``X``. Unused with one feature.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        **kwargs : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : UncertaintyBandDisplay

        Raises
        ------
        TypeError
            If ``estimator`` is not a :class:`~sklearn_nw.NadarayaWatsonRegressor` (or
            its CV estimator).
        ValueError
            For a bad ``feature``, ``confidence_level``, ``bias_correction``,
            ``grid_resolution`` or ``held_at``, a ``y`` of another length than ``X``, or an
            estimator fitted on several outputs.
        NotImplementedError
            Where the estimator's methods refuse (e.g. ``degree=2`` for the confidence
            band, ``n_neighbors`` for both; pass ``bias_correction=None`` or
            ``prediction_band=False``).
        """
        check_matplotlib_support(f"{cls.__name__}.from_estimator")
        if not isinstance(estimator, NadarayaWatsonRegressor):
            raise TypeError(
                f"{cls.__name__}.from_estimator needs a fitted NadarayaWatsonRegressor or "
                f"NadarayaWatsonRegressorCV; got {type(estimator).__name__}.")
        check_is_fitted(estimator)
        if np.ndim(estimator.y_fit_) == 2:
            raise ValueError(f"{cls.__name__} draws one target; this estimator was fitted "
                             f"on {estimator.y_fit_.shape[1]} outputs.")
        if bias_correction is not None and bias_correction not in BIAS_CORRECTIONS:
            raise ValueError(f"bias_correction must be one of {BIAS_CORRECTIONS} or None; "
                             f"got {bias_correction!r}.")
        if np.ndim(confidence_level) != 0:
            raise ValueError("confidence_level must be one number in (0, 1) (one level for "
                             f"both bands); got {confidence_level!r}.")
        (level,) = confidence_levels(confidence_level)
        if (isinstance(grid_resolution, bool) or not isinstance(grid_resolution, Integral)
                or grid_resolution < 2):
            raise ValueError("grid_resolution must be an integer of at least 2; got "
                             f"{grid_resolution!r}.")
        names = getattr(estimator, "feature_names_in_", None)
        X = check_array(X, dtype=np.float64)
        if X.shape[1] != estimator.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features; the estimator was fitted on "
                             f"{estimator.n_features_in_}.")
        j = _feature_index(feature, X.shape[1], names)
        if y is not None:
            y = np.asarray(y, dtype=np.float64).ravel()
            if len(y) != len(X):
                raise ValueError(f"y has {len(y)} values for {len(X)} rows of X.")
        if held_at is None:
            center = np.median(X, axis=0)
        else:
            center = np.asarray(held_at, dtype=np.float64).ravel()
            if center.shape != (X.shape[1],) or not np.all(np.isfinite(center)):
                raise ValueError(f"held_at must hold {X.shape[1]} finite values (one per "
                                 f"feature); got {held_at!r}.")
        grid = np.linspace(X[:, j].min(), X[:, j].max(), grid_resolution)
        queries = np.repeat(center[None], grid_resolution, axis=0)  # (n_grid, d)
        queries[:, j] = grid
        queries = _like_training_frame(queries, names)
        prediction = estimator.predict(queries)
        kinds = {"both": ("robust", "conventional"), None: ()}.get(
            bias_correction, (bias_correction,))
        bands = {kind: estimator.predict_confidence_interval(
                     queries, level, bias_correction=kind,
                     bias_bandwidth=bias_bandwidth)[1][:, :, 0] for kind in kinds}
        pi_band = estimator.predict_interval(queries, level)[1][:, :, 0] if (
            prediction_band) else None
        label = (str(names[j]) if names is not None else f"feature {j}") if (
            X.shape[1] > 1 or names is not None) else "x"
        others = None
        if X.shape[1] > 1:
            others = {(str(names[k]) if names is not None else f"feature {k}"): center[k]
                      for k in range(X.shape[1]) if k != j}
        display = cls(grid, prediction, confidence_bands=bands, prediction_band=pi_band,
                      confidence_level=float(level), feature_name=label,
                      X_points=X[:, j] if y is not None else None, y_points=y,
                      held_at=others)
        return display.plot(ax=ax, **kwargs)


def _feature_index(feature, n_features, names):
    """The column of ``feature`` (an index, or a name of ``feature_names_in_``)."""
    if isinstance(feature, str):
        if names is None or feature not in list(names):
            raise ValueError(f"feature {feature!r} is not a name of the estimator's "
                             "feature_names_in_"
                             + ("" if names is None else f" {list(names)}") + ".")
        return list(names).index(feature)
    if isinstance(feature, bool) or not isinstance(feature, Integral) or not (
            -n_features <= feature < n_features):
        raise ValueError(f"feature must be an index in [0, {n_features}) or a feature "
                         f"name; got {feature!r}.")
    return int(feature) % n_features


def _like_training_frame(queries, names):
    """The queries as a pandas DataFrame with the columns the estimator was fitted on,
    where it was fitted on named features (else scikit-learn warns that they are gone)."""
    if names is None:
        return queries
    try:
        import pandas as pd
    except ImportError:  # fitted on another container: numpy, and scikit-learn's warning
        return queries
    return pd.DataFrame(queries, columns=list(names))
