"""Displays of how a bandwidth was chosen: the CV estimators' candidates
(:class:`BandwidthSearchDisplay`) and the loss curve of a learned bandwidth
(:class:`LossCurveDisplay`). Public in :mod:`sklearn_nw.inspection`; matplotlib is imported
when plotting."""

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils._optional_dependencies import check_matplotlib_support
from sklearn.utils.validation import check_is_fitted

from ._selection import ranked

# -- the bandwidth search of the CV estimators ------------------------------------------

_DEGREE_NAMES = {0: "Nadaraya-Watson", 1: "local linear", 2: "local quadratic"}
_KIND_STYLES = {"balloon": ("-", "s"), "sample_point": ("--", "^")}


class BandwidthSearchDisplay:
    """The scores of a CV estimator's candidates against their bandwidth, the chosen one
    marked.

    Fixed bandwidths are drawn against the bandwidth (log scale), one line per degree of
    the local polynomials. Adaptive ones (balloon, sample-point), when searched, go on a
    second axes against their number of neighbors k (log scale), one line per kind and
    degree, each point the best of the scales c tried at that k; a dotted line there marks
    the best fixed bandwidth's value. Colors follow the degree on both axes. Create it
    with :meth:`from_estimator`.

    Read more in the :ref:`User Guide <ug_automatic>`.

    Parameters
    ----------
    cv_results : dict of ndarrays
        A CV estimator's ``cv_results_``: ``"param_bandwidth"`` (each candidate's
        bandwidth vector), ``"mean_test_score"`` and, when present, ``"kind"``,
        ``"n_neighbors"``, ``"scale"`` and ``"degree"``. Non-finite scores (failed
        candidates) leave gaps in the lines.
    best_index : int
        The chosen candidate (``best_index_``).
    loss_name : str, default=None
        When given, ``-mean_test_score`` is drawn, a loss of this name (the CV estimators'
        default leave-one-out score is the negative loss); otherwise the score.
    score_name : str, default="mean test score"
        The score's name, when no ``loss_name`` is given.

    Attributes
    ----------
    ax_ : matplotlib Axes
        The axes of the fixed bandwidths (the adaptive ones' when no fixed bandwidth was
        searched).
    axes_ : ndarray of matplotlib Axes
        Every axes drawn on: the fixed bandwidths', then the adaptive ones'.
    figure_ : matplotlib Figure
        The figure.
    lines_ : list of matplotlib Line2D
        The candidates' lines: per degree for fixed bandwidths, then per degree and kind.
    best_marker_ : matplotlib Line2D
        The chosen candidate: at its bandwidth (of the first feature), or at its k.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_nw import NadarayaWatsonRegressorCV
    >>> from sklearn_nw.inspection import BandwidthSearchDisplay
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 6, (80, 1))
    >>> y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=80)
    >>> search = NadarayaWatsonRegressorCV(bandwidth_kinds=["fixed"], degree=0).fit(X, y)
    >>> disp = BandwidthSearchDisplay.from_estimator(search)
    >>> disp.ax_.get_ylabel()
    'leave-one-out mean squared error'
    >>> bool(disp.best_marker_.get_xdata()[0] == search.bandwidth_[0])
    True
    """

    def __init__(self, cv_results, best_index, *, loss_name=None,
                 score_name="mean test score"):
        self.cv_results = cv_results
        self.best_index = best_index
        self.loss_name = loss_name
        self.score_name = score_name

    def plot(self, ax=None, *, xlabel=None, ylabel=None, **line_kwargs):
        """Draw the candidates' scores or losses.

        Parameters
        ----------
        ax : matplotlib Axes or array-like of two Axes, default=None
            Where to draw: one axes per family drawn (fixed, adaptive); a new figure when
            None.
        xlabel : str, default=None
            Label of the fixed bandwidths' axis; None: ``"bandwidth h"``, or with several
            features the first feature's.
        ylabel : str, default=None
            None: the loss's or score's name.
        **line_kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.plot` for the candidates' lines.

        Returns
        -------
        display : BandwidthSearchDisplay
        """
        check_matplotlib_support(f"{type(self).__name__}.plot")
        import matplotlib.pyplot as plt

        results = self.cv_results
        score = np.asarray(results["mean_test_score"], dtype=np.float64)  # (G,)
        value = -score if self.loss_name is not None else score
        bandwidth = _bandwidths(results)  # (G, d)
        kind = np.asarray(results.get("kind", np.full(len(score), "fixed")))
        degree = results.get("degree")
        degree = np.zeros(len(score), dtype=int) if degree is None else np.asarray(degree)
        fixed = kind == "fixed"
        panels = [name for name, on in (("fixed", fixed.any()), ("adaptive", (~fixed).any()))
                  if on]
        if ax is None:
            _, axes = plt.subplots(1, len(panels), sharey=True, squeeze=False,
                                   figsize=(5.6 * len(panels), 4.2), layout="constrained")
        else:
            axes = np.asarray(ax, dtype=object).reshape(1, -1)
            if axes.shape[1] < len(panels):
                raise ValueError(
                    f"The search holds {' and '.join(panels)} bandwidths, drawn on "
                    f"{len(panels)} axes; got {axes.shape[1]} (pass ax=None or as many).")
        axes = axes[0, : len(panels)]
        ylabel = ylabel or (self.loss_name if self.loss_name is not None else self.score_name)
        several = "degree" in results and len(np.unique(degree)) > 1
        self.lines_ = []
        where = {}
        for panel, axis in zip(panels, axes):
            draw = self._draw_fixed if panel == "fixed" else self._draw_adaptive
            where[panel] = draw(axis, results, value, score, bandwidth, kind, degree,
                                several, xlabel, line_kwargs)
        b = int(self.best_index)
        axis, x = where["fixed" if fixed[b] else "adaptive"]
        label = (f"chosen: h = {bandwidth[b, 0]:.3g}" if fixed[b] else
                 f"chosen: {kind[b].replace('_', '-')}, k = {x[b]:g}, "
                 f"c = {np.ma.getdata(results['scale'])[b]:g}")
        if "degree" in results:
            label += f", degree {degree[b]}"
        (self.best_marker_,) = axis.plot(
            [x[b]], [value[b]], linestyle="none", marker="*", markersize=16, color="gold",
            markeredgecolor="black", zorder=5, label=label)
        for axis in axes:
            axis.grid(True, which="major", alpha=0.3)
            axis.legend(fontsize="small")
        axes[0].set_ylabel(ylabel)
        self.axes_ = axes
        self.ax_ = axes[0]
        self.figure_ = axes[0].figure
        return self

    def _draw_fixed(self, axis, results, value, score, bandwidth, kind, degree, several,
                    xlabel, line_kwargs):
        """The fixed bandwidths' panel: one line per degree, against the first feature's
        bandwidth; returns the axis and the candidates' x."""
        fixed = kind == "fixed"
        x = bandwidth[:, 0]
        for g in np.unique(degree[fixed]):
            (rows,) = np.nonzero(fixed & (degree == g))
            rows = rows[np.argsort(x[rows], kind="stable")]
            label = (f"degree {g} ({_DEGREE_NAMES.get(int(g), '')})" if several
                     else "fixed bandwidth")
            self.lines_ += axis.plot(x[rows], value[rows], marker="o", markersize=3,
                                     color=f"C{int(g)}", label=label, **line_kwargs)
        axis.set_xscale("log")
        axis.set_xlabel(xlabel or _bandwidth_label(bandwidth[fixed]))
        axis.set_title("fixed bandwidths")
        return axis, x

    def _draw_adaptive(self, axis, results, value, score, bandwidth, kind, degree, several,
                       xlabel, line_kwargs):
        """The adaptive bandwidths' panel: one line per kind and degree, the best scale at
        each k, and the best fixed bandwidth's level; returns the axis and the
        candidates' x (k)."""
        fixed = kind == "fixed"
        k = np.ma.getdata(results["n_neighbors"]).astype(np.float64)  # (G,)
        for g in np.unique(degree[~fixed]):
            for name in [n for n in _KIND_STYLES if np.any((kind == n) & (degree == g))]:
                rows = _best_per_k(np.nonzero((kind == name) & (degree == g))[0], k, score)
                style, marker = _KIND_STYLES[name]
                label = name.replace("_", "-") + (f", degree {g}" if several else "")
                self.lines_ += axis.plot(k[rows], value[rows], linestyle=style,
                                         marker=marker, markersize=4, color=f"C{int(g)}",
                                         label=label, **line_kwargs)
        if fixed.any():
            # Failed candidates (non-finite scores) rank last.
            best_fixed = np.nonzero(fixed)[0][np.argmax(ranked(score[fixed]))]
            axis.axhline(value[best_fixed], color="0.5", linestyle=":",
                         label="best fixed bandwidth")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("k nearest neighbors (best scale c at each k)")
        axis.set_title("adaptive bandwidths")
        return axis, k

    @classmethod
    def from_estimator(cls, cv_estimator, *, ax=None, **kwargs):
        """The bandwidth search of a fitted CV estimator.

        With ``cv=None`` and ``scoring=None`` (the defaults) the leave-one-out loss is
        drawn: ``-mean_test_score``, the mean squared error for the regressor, the
        log-loss for the classifier (in the targets' unit, sample-weighted). Otherwise
        the score as ``cv_results_`` holds it (higher is better).

        Parameters
        ----------
        cv_estimator : NadarayaWatsonRegressorCV or NadarayaWatsonClassifierCV
            Fitted estimator.
        ax : matplotlib Axes or array-like of two Axes, default=None
            Where to draw (see :meth:`plot`).
        **kwargs : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : BandwidthSearchDisplay
        """
        check_matplotlib_support(f"{cls.__name__}.from_estimator")
        check_is_fitted(cv_estimator)
        results = getattr(cv_estimator, "cv_results_", None)
        if results is None or "param_bandwidth" not in results:
            raise ValueError(
                f"{type(cv_estimator).__name__} has no bandwidth search (cv_results_ with "
                "a 'param_bandwidth' entry); use a fitted NadarayaWatsonRegressorCV or "
                "NadarayaWatsonClassifierCV.")
        classifier = is_classifier(cv_estimator)
        scoring, cv = cv_estimator.scoring, cv_estimator.cv
        loss_name = score_name = None
        if scoring is None and cv is None:
            loss_name = "leave-one-out " + ("log-loss" if classifier
                                            else "mean squared error")
        else:
            name = (scoring if isinstance(scoring, str) else
                    ("accuracy" if classifier else "R²") if scoring is None else "scoring")
            score_name = ("leave-one-out" if cv is None else "mean test") + f" score ({name})"
        display = cls(results, cv_estimator.best_index_, loss_name=loss_name,
                      score_name=score_name or "mean test score")
        return display.plot(ax=ax, **kwargs)


def _bandwidth_label(grid):
    """The fixed bandwidths' axis label: the bandwidth, or the first feature's, saying
    whether the others move in proportion."""
    if grid.shape[1] == 1:
        return "bandwidth h"
    ratios = grid / grid[:, :1]  # (G, d)
    if np.allclose(ratios, ratios[0], rtol=1e-9, atol=0):
        return "bandwidth of the first feature (the others in proportion)"
    return "bandwidth of the first feature"


def _bandwidths(results):
    """The candidates' bandwidth vectors (G, d) of ``cv_results``, stacked from
    ``"param_bandwidth"``."""
    return np.stack([np.asarray(h, dtype=np.float64)
                     for h in np.ma.getdata(results["param_bandwidth"])])


def _best_per_k(rows, k, score):
    """Of the candidates ``rows``, the best-scoring at each k (a failed one only where
    all at that k failed), in increasing k."""
    order = ranked(score)
    best = {}
    for i in rows:
        if k[i] not in best or order[i] > order[best[k[i]]]:
            best[k[i]] = i
    return np.array([best[key] for key in sorted(best)], dtype=int)


# -- the learned bandwidth's descent ---------------------------------------------------

class LossCurveDisplay:
    """The leave-one-out loss along the search of a learned bandwidth.

    ``loss_curve_`` of an estimator fitted with ``bandwidth="loo"`` or
    :class:`~sklearn_nw.LeaveOneOutBandwidth`: the loss at each evaluation of L-BFGS (line
    searches included, so it need not fall at every step), at each minibatch step of
    Adam, or after each refinement of the exact grids of a kernel without a gradient.
    Create it with :meth:`from_estimator`.

    Read more in the :ref:`User Guide <ug_learned_bandwidth>`.

    Parameters
    ----------
    loss_curve : array-like of shape (n_evaluations,)
        The losses.
    n_iter : int, default=None
        The optimizer's iterations, for the title.
    loss_name : str, default="leave-one-out loss"
        The y axis label.

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes with the curve.
    figure_ : matplotlib Figure
        Figure containing the curve.
    line_ : matplotlib Line2D
        The loss curve, against the evaluation 1, 2, ...

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_nw import NadarayaWatsonRegressor
    >>> from sklearn_nw.inspection import LossCurveDisplay
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 6, (80, 1))
    >>> y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=80)
    >>> reg = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    >>> disp = LossCurveDisplay.from_estimator(reg)
    >>> bool(np.array_equal(disp.line_.get_ydata(), reg.loss_curve_))
    True
    """

    def __init__(self, loss_curve, *, n_iter=None, loss_name="leave-one-out loss"):
        self.loss_curve = loss_curve
        self.n_iter = n_iter
        self.loss_name = loss_name

    def plot(self, ax=None, *, xlabel="evaluation of the loss", ylabel=None, title=None,
             **line_kwargs):
        """Draw the loss curve.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None.
        xlabel : str, default="evaluation of the loss"
            Label of the x axis.
        ylabel : str, default=None
            None: ``loss_name``.
        title : str, default=None
            None: the number of iterations and evaluations.
        **line_kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.plot`.

        Returns
        -------
        display : LossCurveDisplay
        """
        check_matplotlib_support(f"{type(self).__name__}.plot")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator

        curve = np.asarray(self.loss_curve, dtype=np.float64)
        if ax is None:
            _, ax = plt.subplots(layout="constrained")
        line_kwargs = {"marker": "o", "markersize": 3, **line_kwargs}
        (self.line_,) = ax.plot(np.arange(1, len(curve) + 1), curve, **line_kwargs)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel or self.loss_name)
        if title is None:
            title = f"{len(curve)} evaluations" + (
                "" if self.n_iter is None else f", {self.n_iter} iterations")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        self.ax_ = ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, *, ax=None, **kwargs):
        """The loss curve of an estimator with a learned bandwidth.

        Parameters
        ----------
        estimator : NadarayaWatsonRegressor or NadarayaWatsonClassifier
            Fitted with ``bandwidth="loo"`` or a
            :class:`~sklearn_nw.LeaveOneOutBandwidth`.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        **kwargs : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : LossCurveDisplay

        Raises
        ------
        ValueError
            If the estimator's bandwidth was not learned (no ``loss_curve_``).
        """
        check_matplotlib_support(f"{cls.__name__}.from_estimator")
        check_is_fitted(estimator)
        if getattr(estimator, "loss_curve_", None) is None:
            params = estimator.get_params(deep=False)
            how = (f"bandwidth={params['bandwidth']!r}" if "bandwidth" in params
                   else "a grid search (see BandwidthSearchDisplay)")
            raise ValueError(
                f"{type(estimator).__name__} has no learned bandwidth (loss_curve_): its "
                f"bandwidth came from {how}. LossCurveDisplay needs an estimator fitted "
                "with bandwidth='loo' or LeaveOneOutBandwidth(...).")
        loss_name = "leave-one-out " + ("log-loss" if is_classifier(estimator)
                                        else "mean squared error")
        display = cls(estimator.loss_curve_, n_iter=getattr(estimator, "n_iter_", None),
                      loss_name=loss_name)
        return display.plot(ax=ax, **kwargs)
