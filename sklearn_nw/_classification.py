"""Nadaraya-Watson kernel classification."""

import numpy as np
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils.validation import check_is_fitted

from ._base import NadarayaWatsonBase


class NadarayaWatsonClassifier(ClassifierMixin, NadarayaWatsonBase):
    r"""Nadaraya-Watson kernel classification: attention pooling of one-hot labels.

    The class probabilities at a query q are the kernel-weighted class frequencies of the
    training points, with the same attention as :class:`NadarayaWatsonRegressor`.

    Parameters
    ----------
    kernel : str, Kernel or callable, default="gaussian"
        A name from :data:`sklearn_nw.kernels.KERNELS`, a
        :class:`~sklearn_nw.kernels.Kernel`, or a function mapping a torch tensor of scaled
        distances ``u >= 0`` to non-negative weights.
    bandwidth : float, array-like of shape (n_features,) or {"scott", "silverman"}, default="scott"
        The bandwidth h, one per feature, or a rule of thumb computed from the weighted
        training data.
    n_neighbors : int, default=None
        Restrict each query's attention to its ``n_neighbors`` nearest training points (in
        the scaled metric, found with scikit-learn's neighbour search); None attends to all
        of them. For the Gaussian, the error against full attention is the attention mass
        beyond the k-th neighbour, renormalised away.
    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "cell_list"}, default="auto"
        How neighbours are found, as in :class:`~sklearn.neighbors.KNeighborsRegressor`.
        For a compact kernel and ``n_neighbors=None``, only the training points inside the
        support are visited: a tree's radius search, or ``"cell_list"``: the points binned
        into cubes a fraction of the support wide (on the three widest coordinates), each
        block of queries computed densely against the cubes around it. ``"auto"`` uses the
        cell list up to 3 dimensions and a k-d tree up to 15, from 5,000 training points,
        and the dense sums over every training point otherwise (and always with
        ``compute="compiled"``). ``"brute"`` always uses the dense sums.
    compute : {"auto", "eager", "compiled"}, default="auto"
        How the dense sums are computed. ``"eager"``: torch operations on blocks of
        queries. ``"compiled"``: one loop that :func:`torch.compile` fuses (distance,
        kernel weight and weighted sums of each query-key pair, no block of weights in
        memory), compiled once per process for each kernel, dtype, device and number of
        features or outputs (seconds), then faster than the eager engine; it raises where
        compiling fails, and refuses ``n_neighbors``, a tree or cell-list ``algorithm`` and
        ``metric="precomputed"``, which restrict attention. ``"auto"``: a configuration of
        a compilable kernel (``Kernel.compilable``: the named kernels) with up to 16
        features is compiled once the eager engine has spent about a compile's time on it
        (5 s, this call's estimated time included), and used for calls of at least 256
        queries after that; if compiling fails (no C++ compiler) it warns and stays eager.
        Attention maps and leave-one-out sums are always eager.
    metric : {"euclidean", "precomputed"}, default="euclidean"
        ``"precomputed"``: ``X`` holds distances instead of features, as in
        :class:`~sklearn.neighbors.KNeighborsRegressor`: an (n_samples, n_samples) matrix in
        ``fit`` and (n_queries, n_samples_fit) in ``predict``, dense, or a sparse neighbour
        graph whose stored entries (explicit zeros included) are each row's candidates,
        e.g. from :class:`~sklearn.neighbors.KNeighborsTransformer` or an approximate
        search in a pipeline. ``bandwidth`` must then be a number in the distances' units;
        ``n_neighbors`` picks the nearest stored entries (each row must store that many
        units of sample weight); attention is returned sparse.
    device : str, default="cpu"
        Torch device: ``"cpu"``, ``"cuda"`` (or ``"cuda:i"``), ``"mps"`` or ``"auto"``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    bandwidth_ : ndarray of shape (n_features,)
        The bandwidth used.
    kernel_ : Kernel
        The resolved kernel.
    device_ : str
        The resolved device.
    X_fit_ : ndarray of shape (n_samples_fit, n_features)
        Training inputs, float64 or float32 as given.
    y_fit_ : ndarray of shape (n_samples_fit,)
        Training labels encoded as indices into ``classes_``.
    neighbors_ : NearestNeighbors or None
        Neighbour index of the scaled training points of positive weight, when attention
        is restricted to neighbours.
    neighbor_rows_ : ndarray of shape (n_indexed,) or None
        Rows of ``X_fit_`` that ``neighbors_`` indexes.
    sample_weight_ : ndarray of shape (n_samples_fit,)
        Frequency weights of the training points (ones when none were given).
    attention_weights_ : ndarray or scipy.sparse.csr_array of shape \
            (n_samples_fit, n_samples_fit)
        Leave-one-out attention of the training set on itself, computed when read.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string feature names.

    See Also
    --------
    NadarayaWatsonRegressor : Attention pooling of real-valued targets.
    sklearn.neighbors.KNeighborsClassifier : Votes among the k nearest neighbours.

    Notes
    -----
    .. math::

        \hat p(c \mid q) = \sum_i \alpha_i(q)\, [y_i = c], \qquad
        \alpha_i(q) = \operatorname{softmax}_i\big(\log k(\lVert (q - x_i) / h \rVert)
        + \log w_i\big).

    ``predict`` returns the class of highest probability (the first in ``classes_`` on ties).

    Examples
    --------
    >>> from sklearn_nw import NadarayaWatsonClassifier
    >>> X = [[0.0], [0.2], [1.0], [1.2]]
    >>> y = ["low", "low", "high", "high"]
    >>> clf = NadarayaWatsonClassifier(bandwidth=0.3).fit(X, y)
    >>> clf.predict([[0.1], [1.1]])
    array(['low', 'high'], dtype='<U4')
    >>> clf.classes_
    array(['high', 'low'], dtype='<U4')
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Store the training data and resolve the kernel and bandwidth.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels, of any type ``numpy.unique`` can sort.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative frequency weights: an integer weight equals repeating the row.

        Returns
        -------
        self : NadarayaWatsonClassifier
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight, classifier=True)

    def _fit_targets(self, y):
        self.classes_, self.y_fit_ = np.unique(y, return_inverse=True)
        return self._values()

    def _values(self):
        return np.eye(len(self.classes_), dtype=self.X_fit_.dtype)[self.y_fit_]  # (n, c)

    def _loss_over_rows(self, loss, loo):
        return loss  # the cross-entropy of the class frequencies is the rows' log-loss

    def predict_proba(self, X, return_attention=False):
        """Class probabilities: the attention-weighted class frequencies.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query points.
        return_attention : bool, default=False
            Also return the attention matrix.

        Returns
        -------
        proba : ndarray of shape (n_queries, n_classes)
            Probabilities in the order of ``classes_``, rows summing to 1.
        attention : ndarray or scipy.sparse.csr_array of shape (n_queries, n_samples_fit)
            Only with ``return_attention=True``; rows summing to 1, sparse for compact
            kernels.
        """
        check_is_fitted(self)
        X = self._validate_predict_data(X)
        proba, attention = self._pool(X, self._values(), return_attention=return_attention)
        proba /= proba.sum(axis=1, keepdims=True)
        return (proba, attention) if return_attention else proba

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (``-inf`` for classes of zero probability).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query points.

        Returns
        -------
        log_proba : ndarray of shape (n_queries, n_classes)
        """
        check_is_fitted(self)
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X, return_attention=False):
        """Predict the class of highest attention-weighted frequency.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query points.
        return_attention : bool, default=False
            Also return the attention matrix.

        Returns
        -------
        y_pred : ndarray of shape (n_queries,)
            Labels from ``classes_``.
        attention : ndarray or scipy.sparse.csr_array of shape (n_queries, n_samples_fit)
            Only with ``return_attention=True``.
        """
        check_is_fitted(self)
        proba, attention = self.predict_proba(X, return_attention=True) if return_attention \
            else (self.predict_proba(X), None)
        y_pred = self.classes_[np.argmax(proba, axis=1)]
        return (y_pred, attention) if return_attention else y_pred
