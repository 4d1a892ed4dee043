"""Nadaraya-Watson kernel regression."""

from numbers import Integral
from typing import ClassVar

import numpy as np
from sklearn.base import RegressorMixin, _fit_context
from sklearn.utils.validation import check_is_fitted

from ._base import NadarayaWatsonBase
from ._docs import ATTRIBUTES, PARAMETERS, entries, fill_doc
from ._validation import NumberInterval


@fill_doc(parameters=entries(PARAMETERS), attributes=entries(ATTRIBUTES))
class NadarayaWatsonRegressor(RegressorMixin, NadarayaWatsonBase):
    r"""Nadaraya-Watson kernel regression: attention pooling of the training targets.

    The prediction at a query q is the average of the training targets weighted by a
    kernel of the scaled distance to each training input -- a softmax attention with the
    training inputs as keys, the targets as values and a fixed, radial score function.

    Read more in the :ref:`User Guide <ug_attention>`.

    Parameters
    ----------
%(parameters)s

    Attributes
    ----------
    y_fit_ : ndarray of shape (n_samples_fit,) or (n_samples_fit, n_outputs)
        Training targets (the values), float64.
%(attributes)s

    See Also
    --------
    NadarayaWatsonClassifier : The same attention pooling of one-hot class labels.
    sklearn.neighbors.KNeighborsRegressor : Averages over the k nearest neighbors.
    sklearn.neighbors.RadiusNeighborsRegressor : Averages over a fixed radius.

    Notes
    -----
    With bandwidths :math:`h`, kernel profile :math:`k` and sample weights :math:`w`,

    .. math::

        \hat f(q) = \sum_i \alpha_i(q)\, y_i, \qquad
        \alpha_i(q) = \operatorname{softmax}_i\big(\log k(\lVert (q - x_i) / h \rVert)
        + \log w_i\big),

    With ``degree`` 1 or 2 the prediction is instead the intercept :math:`\beta_0(q)` of
    the local polynomial fit
    :math:`\min_\beta \sum_i \alpha_i(q) (y_i - \phi(x_i - q)^\top \beta)^2`
    (:math:`\phi(u) = (1, u)` or :math:`(1, u, u_k u_l)`), as in statsmodels'
    ``KernelReg(reg_type="ll")`` for degree 1.

    The weights are computed in log space and in chunks of queries, so far queries and
    tiny bandwidths reach the nearest-neighbor limit instead of 0/0. With a compact kernel,
    a query with no training point inside the support gets the value of its nearest
    training point(s) and an :class:`~sklearn_nw.EmptyNeighborhoodWarning`. float32 input
    is computed in float32, anything else in float64. The targets are pooled centered on
    their weighted mean and
    divided by their largest deviation from it, so their unit matters neither to float32
    (which would underflow ``1e-50`` or overflow ``1e39``) nor to the leave-one-out
    bandwidths, which are scale-equivariant in ``y``; predictions are float64.

    References
    ----------
    - E.\  A. Nadaraya, "On estimating regression", *Theory of Probability and its
      Applications* 9(1), 1964.
    - G.\  S. Watson, "Smooth regression analysis", *Sankhya A* 26(4), 1964.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_nw import NadarayaWatsonRegressor
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> y = np.array([0.0, 1.0, 4.0, 9.0])
    >>> reg = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y)
    >>> reg.predict([[1.5]]).round(3)
    array([2.536])
    >>> reg.bandwidth_
    array([0.5])
    """

    _parameter_constraints: ClassVar[dict] = {
        **NadarayaWatsonBase._parameter_constraints,
        "degree": [NumberInterval(Integral, 0, 2, closed="both")],
        "bounded": ["boolean"],
    }

    def __init__(self, kernel="gaussian", bandwidth="scott", *, n_neighbors=None,
                 algorithm="auto", compute="auto", metric="euclidean", device="cpu",
                 degree=0, bounded=False, categorical_features="from_dtype",
                 categorical_kernel="li_racine"):
        super().__init__(kernel, bandwidth, n_neighbors=n_neighbors, algorithm=algorithm,
                         compute=compute, metric=metric, device=device,
                         categorical_features=categorical_features,
                         categorical_kernel=categorical_kernel)
        self.degree = degree
        self.bounded = bounded

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Store the training data and resolve the kernel and bandwidth.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative frequency weights: an integer weight equals repeating the row.

        Returns
        -------
        self : NadarayaWatsonRegressor
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight, degree=self.degree)

    def _fit_targets(self, y):
        self.y_fit_ = np.array(y, dtype=np.float64)
        self._scaling = self._target_scaling()
        return self._values()

    def _target_scaling(self):
        """Offset (t,) and scale of the pooled values ``(y - offset) / scale``: the
        weighted mean and the largest deviation from it, so that the values lie in
        [-1, 1] whatever the targets' unit (float32 would underflow or overflow them, and
        the leave-one-out loss would depend on it)."""
        y = self.y_fit_.reshape(len(self.y_fit_), -1)
        w = self.sample_weight_
        offset = np.average(y, axis=0, weights=w)
        scale = float(np.abs(y[w > 0] - offset).max())
        return offset, (scale if 0 < scale < np.inf else 1.0)

    def _values(self):
        offset, scale = self._scaling
        return (self.y_fit_.reshape(len(self.y_fit_), -1) - offset) / scale

    def _targets(self):
        return self.y_fit_

    def _outputs(self, pooled):
        # Back in the targets' unit and shape: (n, n_outputs), or (n,) for 1-D targets.
        offset, scale = self._scaling
        pooled = pooled.astype(np.float64) * scale + offset
        return pooled if self.y_fit_.ndim == 2 else pooled[:, 0]

    def _loss_over_rows(self, loss, loo):
        # The squared error of the rows adds their spread within each distinct input.
        # Back in the targets' unit in one rounding, mantissas multiplied and exponents
        # added: scale**2 alone overflows from scales of 1.3e154 (or loses digits below
        # 1e-154) where the loss itself is within float64's range; beyond it, inf or 0.
        m, e = np.frexp(np.asarray(loss + loo.spread, dtype=np.float64))
        s, f = np.frexp(np.float64(self._scaling[1]))
        with np.errstate(over="ignore", under="ignore"):
            return np.ldexp(m * s * s, e + 2 * f)

    def predict(self, X, return_attention=False):
        """Predict targets as the attention-weighted average of the training targets.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query points.
        return_attention : bool, default=False
            Also return the attention matrix.

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Predictions, float64 as the targets are stored (the attention weights are
            computed in the dtype of ``X_fit_``).
        attention : ndarray or scipy.sparse.csr_array of shape (n_queries, n_samples_fit)
            Only with ``return_attention=True``: the weights of the training points for each
            query, rows summing to 1; sparse for compact kernels. With ``degree`` 1 or 2,
            the equivalent kernel of the local fit (``y_pred = attention @ y``), whose
            entries may be negative.
        """
        check_is_fitted(self)
        X = self._validate_predict_data(X)
        out, attention = self._pool(X, return_attention=return_attention)
        y_pred = self._outputs(out)
        return (y_pred, attention) if return_attention else y_pred

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
