"""Nadaraya-Watson kernel classification."""

import numpy as np
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils.validation import check_is_fitted

from ._base import NadarayaWatsonBase
from ._docs import ATTRIBUTES, PARAMETERS, entries, fill_doc

# The regressor's own: its local polynomials and its standard errors.
_REGRESSOR_ONLY = ("degree", "bounded", "residual_variance", "residual_neighbors")


@fill_doc(parameters=entries(PARAMETERS, *(k for k in PARAMETERS
                                            if k not in _REGRESSOR_ONLY)),
          attributes=entries(ATTRIBUTES))
class NadarayaWatsonClassifier(ClassifierMixin, NadarayaWatsonBase):
    r"""Nadaraya-Watson kernel classification: attention pooling of one-hot labels.

    The class probabilities at a query q are the kernel-weighted class frequencies of the
    training points, with the same attention as :class:`NadarayaWatsonRegressor`.

    Parameters
    ----------
%(parameters)s

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    y_fit_ : ndarray of shape (n_samples_fit,)
        Training labels encoded as indices into ``classes_``.
%(attributes)s

    See Also
    --------
    NadarayaWatsonRegressor : Attention pooling of real-valued targets.
    sklearn.neighbors.KNeighborsClassifier : Votes among the k nearest neighbors.

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

    def _targets(self):
        return self.classes_[self.y_fit_]

    def _values(self):
        return np.eye(len(self.classes_), dtype=self.X_fit_.dtype)[self.y_fit_]  # (n, c)

    def _outputs(self, pooled):
        return pooled  # pooled one-hot labels are the class probabilities

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
        proba, attention = self._pool(X, return_attention=return_attention)
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
