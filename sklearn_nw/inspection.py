"""Visualisation of Nadaraya-Watson attention (matplotlib is imported when plotting)."""

import numpy as np
import scipy.sparse as sp
from sklearn.utils._optional_dependencies import check_matplotlib_support
from sklearn.utils.validation import check_is_fitted

__all__ = ["AttentionDisplay"]


class AttentionDisplay:
    """Attention weights as a heatmap: one row per query, one column per training point.

    Create it with :meth:`from_estimator`, or directly from a matrix of weights. The
    constructor only stores data; :meth:`plot` draws.

    Parameters
    ----------
    attention : ndarray or scipy.sparse matrix of shape (n_queries, n_keys)
        Attention weights, rows summing to 1. Local polynomial fits (``degree`` 1 or 2)
        give their equivalent kernel, whose entries may be negative: it is drawn signed,
        on a diverging colour map centred on 0.
    query_order : ndarray of shape (n_queries,), default=None
        Row permutation to display (e.g. queries sorted by target); None keeps the order.
    key_order : ndarray of shape (n_keys,), default=None
        Column permutation to display.

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes with the heatmap.
    figure_ : matplotlib Figure
        Figure containing the heatmap.
    image_ : matplotlib AxesImage
        The heatmap.
    colorbar_ : matplotlib Colorbar or None
        The colour bar, if drawn.

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
    """

    def __init__(self, attention, *, query_order=None, key_order=None):
        self.attention = attention
        self.query_order = query_order
        self.key_order = key_order

    def plot(self, ax=None, *, cmap=None, colorbar=True, xlabel="training points (keys)",
             ylabel="queries", title=None, **imshow_kwargs):
        """Draw the heatmap.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None.
        cmap : str or Colormap, default=None
            Colour map. None: ``"Reds"`` for non-negative weights; for signed ones (the
            equivalent kernel of local polynomials) ``"RdBu_r"`` with a
            :class:`~matplotlib.colors.CenteredNorm` (0 white, the colour scale symmetric),
            unless ``norm`` is given.
        colorbar : bool, default=True
            Whether to add a colour bar.
        xlabel, ylabel, title : str
            Labels.
        **imshow_kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.imshow`.

        Returns
        -------
        display : AttentionDisplay
        """
        check_matplotlib_support(f"{type(self).__name__}.plot")
        import matplotlib.pyplot as plt

        a = self.attention
        a = a.toarray() if sp.issparse(a) else np.asarray(a)
        if self.query_order is not None:
            a = a[np.asarray(self.query_order)]
        if self.key_order is not None:
            a = a[:, np.asarray(self.key_order)]
        if ax is None:
            _, ax = plt.subplots()
        signed = bool(np.any(a < 0))
        if cmap is None:
            cmap = "RdBu_r" if signed else "Reds"
        if signed and "norm" not in imshow_kwargs:
            from matplotlib.colors import CenteredNorm

            imshow_kwargs["norm"] = CenteredNorm(vcenter=0.0)
        imshow_kwargs = {"aspect": "auto", "interpolation": "nearest", **imshow_kwargs}
        self.image_ = ax.imshow(a, cmap=cmap, **imshow_kwargs)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if title is not None:
            ax.set_title(title)
        self.colorbar_ = ax.figure.colorbar(self.image_, ax=ax) if colorbar else None
        self.ax_ = ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X=None, *, sort_by="target", ax=None, **kwargs):
        """Attention of a fitted Nadaraya-Watson estimator, as a heatmap.

        Parameters
        ----------
        estimator : NadarayaWatsonRegressor or NadarayaWatsonClassifier
            Fitted estimator.
        X : array-like of shape (n_queries, n_features), default=None
            Queries. None shows the leave-one-out attention of the training set on itself
            (``estimator.attention_weights_``).
        sort_by : {"target", None}, default="target"
            ``"target"`` orders the training points by their (first) target or class and
            the queries by their prediction, so attention on similar targets lies near the
            diagonal; None keeps the given order.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        **kwargs : dict
            Passed to :meth:`plot`.

        Returns
        -------
        display : AttentionDisplay
        """
        check_matplotlib_support(f"{cls.__name__}.from_estimator")
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
        display = cls(attention, query_order=query_order, key_order=key_order)
        return display.plot(ax=ax, **kwargs)


def _first_target(y):
    y = np.asarray(y, dtype=np.float64)
    return y if y.ndim == 1 else y[:, 0]
