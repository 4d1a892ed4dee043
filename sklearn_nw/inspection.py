"""Displays of Nadaraya-Watson models, in scikit-learn's Display style: the constructor
stores data, ``plot`` draws, ``from_estimator`` (or ``from_kernels``) builds and plots.
matplotlib is imported when plotting."""

import math

import numpy as np
import scipy.sparse as sp
from sklearn.utils._optional_dependencies import check_matplotlib_support
from sklearn.utils.validation import check_is_fitted

from ._bandwidth_displays import BandwidthSearchDisplay, LossCurveDisplay
from ._base import NadarayaWatsonBase
from ._uncertainty_display import UncertaintyBandDisplay

__all__ = ["AttentionDisplay", "BandwidthSearchDisplay", "KernelDisplay", "LossCurveDisplay",
           "UncertaintyBandDisplay"]


class AttentionDisplay:
    """Attention weights as a heatmap: one row per query, one column per training point.

    Create it with :meth:`from_estimator`, or directly from a matrix of weights. The
    constructor only stores data; :meth:`plot` draws. Above ``max_keys`` training points
    (``max_queries`` queries) :meth:`plot` shows an evenly spaced subset of them, every
    m-th in the displayed order, and says so in a note on the axes.

    Read more in the :ref:`User Guide <ug_attention>`.

    Parameters
    ----------
    attention : ndarray or scipy.sparse matrix of shape (n_queries, n_keys)
        Attention weights, rows summing to 1. Local polynomial fits (``degree`` 1 or 2)
        give their equivalent kernel, whose entries may be negative: it is drawn signed,
        on a diverging color map centered on 0.
    query_order : ndarray of shape (n_queries,), default=None
        Row permutation to display (e.g. queries sorted by target); None keeps the order.
    key_order : ndarray of shape (n_keys,), default=None
        Column permutation to display.
    query_sorted_by, key_sorted_by : str, default=None
        What the orders follow (e.g. ``"prediction"``, ``"target"``), named in the note
        on a subset.

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes with the heatmap.
    figure_ : matplotlib Figure
        Figure containing the heatmap.
    image_ : matplotlib AxesImage
        The heatmap.
    colorbar_ : matplotlib Colorbar or None
        The color bar, if drawn.
    query_indices_ : ndarray of shape (n_shown_queries,)
        The rows of ``attention`` shown, top to bottom.
    key_indices_ : ndarray of shape (n_shown_keys,)
        The columns of ``attention`` (training points) shown, left to right.
    note_ : str or None
        The note on the axes saying which subset is shown; None when everything is.
    note_artist_ : matplotlib Text or None
        The note as drawn.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_nw import NadarayaWatsonRegressor
    >>> from sklearn_nw.inspection import AttentionDisplay
    >>> X = np.linspace(0, 5, 40)[:, None]
    >>> reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, np.sin(X[:, 0]))
    >>> disp = AttentionDisplay.from_estimator(reg, X[::2])
    >>> disp.image_.get_array().shape
    (20, 40)
    >>> disp = AttentionDisplay.from_estimator(reg, X[::2], max_keys=10)
    >>> print(disp.note_)
    showing 10 of 40 training points (every 4th, sorted by target);
    rows no longer sum to 1
    """

    def __init__(self, attention, *, query_order=None, key_order=None, query_sorted_by=None,
                 key_sorted_by=None):
        self.attention = attention
        self.query_order = query_order
        self.key_order = key_order
        self.query_sorted_by = query_sorted_by
        self.key_sorted_by = key_sorted_by

    def plot(self, ax=None, *, cmap=None, colorbar=True, xlabel="training points (keys)",
             ylabel="queries", title=None, max_queries=None, max_keys=None, **imshow_kwargs):
        """Draw the heatmap.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None.
        cmap : str or Colormap, default=None
            Color map. None: ``"Reds"`` for non-negative weights; for signed ones (the
            equivalent kernel of local polynomials) ``"RdBu_r"`` with a
            :class:`~matplotlib.colors.CenteredNorm` (0 white, the color scale symmetric),
            unless ``norm`` is given.
        colorbar : bool, default=True
            Whether to add a color bar.
        xlabel, ylabel, title : str
            Labels.
        max_queries, max_keys : int, default=None
            Show at most this many queries (rows) and training points (columns): above
            it every m-th of them in the displayed order, m = ceil(n / max), the axes
            still counting positions in the full order. None shows all.
        **imshow_kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.imshow`.

        Returns
        -------
        display : AttentionDisplay
        """
        check_matplotlib_support(f"{type(self).__name__}.plot")
        import matplotlib.pyplot as plt

        a = self.attention
        a = sp.csr_matrix(a) if sp.issparse(a) else np.asarray(a)
        rows = _order(self.query_order, a.shape[0])
        cols = _order(self.key_order, a.shape[1])
        row_step, col_step = _step(len(rows), max_queries, "max_queries"), _step(
            len(cols), max_keys, "max_keys")
        self.query_indices_, self.key_indices_ = rows[::row_step], cols[::col_step]
        # A sparse matrix is cut down before it is made dense.
        a = a[self.query_indices_][:, self.key_indices_]
        a = a.toarray() if sp.issparse(a) else a
        if ax is None:
            _, ax = plt.subplots()
        signed = bool(np.any(a < 0))
        if cmap is None:
            cmap = "RdBu_r" if signed else "Reds"
        if signed and "norm" not in imshow_kwargs:
            from matplotlib.colors import CenteredNorm

            imshow_kwargs["norm"] = CenteredNorm(vcenter=0.0)
        if max(row_step, col_step) > 1:
            # Pixel j stands for position j * step of the full order.
            imshow_kwargs.setdefault("extent", (
                -col_step / 2, (len(self.key_indices_) - 0.5) * col_step,
                (len(self.query_indices_) - 0.5) * row_step, -row_step / 2))
        imshow_kwargs = {"aspect": "auto", "interpolation": "nearest", **imshow_kwargs}
        self.image_ = ax.imshow(a, cmap=cmap, **imshow_kwargs)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if title is not None:
            ax.set_title(title)
        self.note_ = _subset_note(
            [(len(self.key_indices_), len(cols), col_step, "training points",
              self.key_sorted_by),
             (len(self.query_indices_), len(rows), row_step, "queries", self.query_sorted_by)])
        self.note_artist_ = None if self.note_ is None else ax.text(
            0.99, 0.99, self.note_, transform=ax.transAxes, ha="right", va="top",
            fontsize="x-small", bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "0.7"})
        self.colorbar_ = ax.figure.colorbar(self.image_, ax=ax) if colorbar else None
        self.ax_ = ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X=None, *, sort_by="target", max_queries=300,
                       max_keys=300, ax=None, **kwargs):
        """Attention of a fitted Nadaraya-Watson estimator, as a heatmap.

        Parameters
        ----------
        estimator : NadarayaWatsonRegressor, NadarayaWatsonClassifier or Pipeline
            Fitted estimator, or a fitted :class:`~sklearn.pipeline.Pipeline` whose last
            step is one: ``X`` then goes through the steps before it, and the attention
            is that of the last step, on the training points as it saw them.
        X : array-like of shape (n_queries, n_features), default=None
            Queries. None shows the leave-one-out attention of the training set on itself
            (``estimator.attention_weights_``).
        sort_by : {"target", None}, default="target"
            ``"target"`` orders the training points by their (first) target or class and
            the queries by their prediction, so attention on similar targets lies near the
            diagonal; None keeps the given order.
        max_queries, max_keys : int or None, default=300
            At most this many queries and training points are shown, every m-th in the
            displayed order (see :meth:`plot`); the attention is computed for all of
            them, so a shown row no longer sums to 1 when training points are left out.
            None shows all.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        **kwargs : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : AttentionDisplay

        Raises
        ------
        TypeError
            If ``estimator`` (or a pipeline's last step) is not a Nadaraya-Watson
            estimator.
        """
        check_matplotlib_support(f"{cls.__name__}.from_estimator")
        estimator, X = _last_step(estimator, X)
        check_is_fitted(estimator)
        if X is None:
            attention = estimator.attention_weights_
            pred = attention @ _first_target(estimator.y_fit_)
        else:
            pred, attention = estimator.predict(X, return_attention=True)
            if hasattr(estimator, "classes_"):
                pred = np.searchsorted(estimator.classes_, pred)
            pred = _first_target(pred)
        query_order = key_order = None
        if sort_by == "target":
            key_order = np.argsort(_first_target(estimator.y_fit_), kind="stable")
            query_order = np.argsort(pred, kind="stable")
        elif sort_by is not None:
            raise ValueError(f"sort_by must be 'target' or None; got {sort_by!r}.")
        sorted_by = (None, None) if sort_by is None else (
            "prediction", "class" if hasattr(estimator, "classes_") else "target")
        display = cls(attention, query_order=query_order, key_order=key_order,
                      query_sorted_by=sorted_by[0], key_sorted_by=sorted_by[1])
        return display.plot(ax=ax, max_queries=max_queries, max_keys=max_keys, **kwargs)


def _last_step(estimator, X):
    """The Nadaraya-Watson estimator whose attention is shown, and the queries in its
    input space: a pipeline's last step, ``X`` transformed by the steps before it."""
    from sklearn.pipeline import Pipeline

    if isinstance(estimator, Pipeline):
        check_is_fitted(estimator)
        if X is not None:
            for _, step in estimator.steps[:-1]:
                if step is not None and not (isinstance(step, str) and step == "passthrough"):
                    X = step.transform(X)
        what, estimator = f"the last step of a Pipeline, {estimator.steps[-1][1]!r},", (
            estimator.steps[-1][1])
    else:
        what = repr(estimator)
    if not isinstance(estimator, NadarayaWatsonBase):
        raise TypeError(
            "AttentionDisplay.from_estimator needs a fitted NadarayaWatsonRegressor or "
            "NadarayaWatsonClassifier (or a Pipeline ending in one), whose predictions are "
            f"weighted averages of training points; {what} is not one."
        )
    return estimator, X


def _first_target(y):
    y = np.asarray(y, dtype=np.float64)
    return y if y.ndim == 1 else y[:, 0]


def _order(order, n):
    return np.arange(n) if order is None else np.asarray(order)


def _step(n, max_shown, name):
    """Every how many of ``n`` items to show so that at most ``max_shown`` are."""
    if max_shown is None:
        return 1
    if isinstance(max_shown, bool) or not isinstance(max_shown, (int, np.integer)) or (
            max_shown < 1):
        raise ValueError(f"{name} must be a positive integer or None; got {max_shown!r}.")
    return max(1, math.ceil(n / max_shown))


def _ordinal(m):
    suffix = "th" if 10 <= m % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(m % 10, "th")
    return f"{m}{suffix}"


def _subset_note(parts):
    """The note on an attention heatmap that shows a subset: ``parts`` are (shown, total,
    step, what, sorted_by) of the columns, then of the rows."""
    lines = []
    for shown, total, step, what, sorted_by in parts:
        if step > 1:
            order = "" if sorted_by is None else f", sorted by {sorted_by}"
            lines.append(f"{shown:,} of {total:,} {what} (every {_ordinal(step)}{order})")
    if not lines:
        return None
    lines[0] = "showing " + lines[0]
    if parts[0][2] > 1:
        lines.append("rows no longer sum to 1")
    return ";\n".join(lines)


# -- kernel profiles -------------------------------------------------------------------

class KernelDisplay:
    """Kernel profiles k(u) against the scaled distance u = distance / bandwidth.

    Small multiples, one axes per kernel, with dotted lines at the support of the compact
    kernels; or every kernel on one axes. Create it with :meth:`from_kernels`.

    Read more in the :ref:`User Guide <ug_kernels>`.

    Parameters
    ----------
    u : ndarray of shape (n_points,)
        Scaled distances (signed: the profile is drawn at ``|u|``).
    profiles : ndarray of shape (n_kernels, n_points)
        ``k(|u|)`` of each kernel.
    names : list of str
        Each kernel's title.
    supports : list of float
        Each kernel's support radius (``inf`` when not compact).

    Attributes
    ----------
    axes_ : ndarray of matplotlib Axes
        The grid of axes (unused ones hidden), or the one axes of all kernels.
    figure_ : matplotlib Figure
        The figure.
    lines_ : list of matplotlib Line2D
        Each kernel's profile, in the order of ``names``.

    Examples
    --------
    >>> from sklearn_nw.inspection import KernelDisplay
    >>> disp = KernelDisplay.from_kernels(["gaussian", "epanechnikov"])
    >>> [ax.get_title() for ax in disp.axes_.ravel()]
    ['gaussian', 'epanechnikov']
    >>> float(disp.lines_[1].get_ydata().max())
    1.0
    """

    def __init__(self, u, profiles, names, supports):
        self.u = u
        self.profiles = profiles
        self.names = names
        self.supports = supports

    def plot(self, ax=None, *, n_cols=5, **line_kwargs):
        """Draw the profiles.

        Parameters
        ----------
        ax : matplotlib Axes or array-like of Axes, default=None
            None: a new figure with a grid of ``n_cols`` columns, one axes per kernel. One
            Axes: every kernel on it, with a legend. Several: one per kernel.
        n_cols : int, default=5
            Columns of a new grid.
        **line_kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.plot`.

        Returns
        -------
        display : KernelDisplay
        """
        check_matplotlib_support(f"{type(self).__name__}.plot")
        import matplotlib.pyplot as plt
        from matplotlib.axes import Axes

        n = len(self.names)
        overlay = isinstance(ax, Axes)
        if ax is None:
            cols = max(1, min(n_cols, n))
            rows = math.ceil(n / cols)
            fig, grid = plt.subplots(rows, cols, sharex=True, sharey=True, squeeze=False,
                                     figsize=(2.3 * cols, 2.0 * rows + 0.6),
                                     layout="constrained")
            fig.supxlabel("scaled distance u = (x - x_i) / h")
            fig.supylabel("k(u)")
            for extra in grid.ravel()[n:]:
                extra.set_visible(False)
        else:
            grid = np.asarray([[ax]], dtype=object) if overlay else np.asarray(ax, dtype=object)
            if not overlay and grid.size < n:
                raise ValueError(f"{n} kernels need {n} axes (or one Axes, or None); got "
                                 f"{grid.size}.")
        targets = [grid.ravel()[0]] * n if overlay else list(grid.ravel()[:n])
        self.lines_ = []
        for i, (axis, name, support) in enumerate(zip(targets, self.names, self.supports)):
            kwargs = {"color": f"C{i}" if overlay else "C0", **line_kwargs}
            self.lines_ += axis.plot(self.u, self.profiles[i], label=name, **kwargs)
            if math.isfinite(support):
                for edge in (-support, support):
                    axis.axvline(edge, color=kwargs["color"], linestyle=":", linewidth=1,
                                 alpha=0.7)
            if not overlay:
                axis.set_title(name, fontsize="medium")
            if ax is not None:
                axis.set_xlabel("scaled distance u")
                axis.set_ylabel("k(u)")
            axis.grid(True, alpha=0.3)
        if overlay:
            targets[0].legend()
        self.axes_ = grid
        self.figure_ = targets[0].figure
        return self

    @classmethod
    def from_kernels(cls, kernels=None, *, u_max=None, n_points=601, ax=None, **kwargs):
        """Profiles of named kernels or :class:`~sklearn_nw.Kernel` objects.

        Parameters
        ----------
        kernels : str, Kernel, callable or a list of them, default=None
            The kernels, as :func:`~sklearn_nw.kernels.get_kernel` takes them (one alone
            is a list of one), each titled by its name as given (a Kernel by its
            ``repr``). None: every kernel of
            :data:`~sklearn_nw.kernels.KERNELS` once, titled by its first name with its
            aliases in parentheses.
        u_max : float, default=None
            The profiles are drawn on ``[-u_max, u_max]``. None: 3 when a kernel has
            infinite support, else 1.5 times the largest support.
        n_points : int, default=601
            Points of ``u``.
        ax : matplotlib Axes or array-like of Axes, default=None
            Where to draw (see :meth:`plot`).
        **kwargs : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : KernelDisplay
        """
        check_matplotlib_support(f"{cls.__name__}.from_kernels")
        from .kernels import KERNELS, Kernel, get_kernel

        if isinstance(kernels, (str, Kernel)) or callable(kernels):
            kernels = [kernels]  # one kernel: a list of one
        elif kernels is not None:
            kernels = list(kernels)
        if kernels == []:
            raise ValueError(
                "KernelDisplay.from_kernels needs at least one kernel; got an empty list. "
                "Pass None to show every named kernel."
            )
        if kernels is None:
            names = {}  # kernel class -> its names, first the canonical one
            for name, kernel_class in KERNELS.items():
                names.setdefault(kernel_class, []).append(name)
            objects = [kernel_class() for kernel_class in names]
            titles = [first + (f" ({', '.join(rest)})" if rest else "")
                      for first, *rest in names.values()]
        else:
            objects = [get_kernel(kernel) for kernel in kernels]
            titles = [kernel if isinstance(kernel, str) else repr(obj)
                      for kernel, obj in zip(kernels, objects)]
        supports = [float(kernel.support) for kernel in objects]
        if u_max is None:
            u_max = 3.0 if not all(map(math.isfinite, supports)) else 1.5 * max(supports)
        u = np.linspace(-u_max, u_max, n_points)  # (n_points,)
        profiles = np.stack([np.asarray(kernel(np.abs(u)), dtype=np.float64)
                             for kernel in objects])  # (K, n_points)
        return cls(u, profiles, titles, supports).plot(ax=ax, **kwargs)
