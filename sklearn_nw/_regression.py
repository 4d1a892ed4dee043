"""Nadaraya-Watson kernel regression."""

from numbers import Integral
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from scipy.stats import norm
from sklearn import get_config
from sklearn.base import RegressorMixin, _fit_context, clone
from sklearn.model_selection import check_cv
from sklearn.utils import gen_batches
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import NadarayaWatsonBase, confidence_levels, user_attention
from ._bias_correction import bias_corrected_fits, kernel_attention
from ._docs import ATTRIBUTES, LEAVE_ONE_OUT, PARAMETERS, entries, fill_doc
from ._uncertainty import (
    RESIDUAL_VARIANCES,
    RankedScores,
    dense_rows,
    jackknife_plus,
    jackknife_plus_sparse,
    jackknife_plus_windows,
    nearest_neighbor_variance,
    nearest_others,
    residual_variance,
    self_weights,
    squared_attention,
)
from ._validation import NumberInterval
from ._workers import chunk_rows


@fill_doc(parameters=entries(PARAMETERS),
          attributes=entries(ATTRIBUTES) + "\n" + LEAVE_ONE_OUT["loo_prediction_"])
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
        "residual_variance": [StrOptions(set(RESIDUAL_VARIANCES))],
        "residual_neighbors": [NumberInterval(Integral, 1, None, closed="left")],
    }

    def __init__(self, kernel="gaussian", bandwidth="scott", *, n_neighbors=None,
                 algorithm="auto", compute="auto", metric="euclidean", device="cpu",
                 degree=0, bounded=False, categorical_features="from_dtype",
                 categorical_kernel="li_racine", residual_variance="nn",
                 residual_neighbors=3, store_loo=False):
        super().__init__(kernel, bandwidth, n_neighbors=n_neighbors, algorithm=algorithm,
                         compute=compute, metric=metric, device=device,
                         categorical_features=categorical_features,
                         categorical_kernel=categorical_kernel, store_loo=store_loo)
        self.degree = degree
        self.bounded = bounded
        self.residual_variance = residual_variance
        self.residual_neighbors = residual_neighbors

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, groups=None):
        """Store the training data and resolve the kernel and bandwidth.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative frequency weights: an integer weight equals repeating the row.
        groups : array-like of shape (n_samples,), default=None
            Group labels of the samples, as
            :class:`~sklearn.model_selection.LeaveOneGroupOut` takes them. A learned
            bandwidth (``bandwidth="loo"`` or :class:`~sklearn_nw.LeaveOneOutBandwidth`)
            then minimizes the leave-one-*group*-out loss: each row is predicted
            without every row of its group (e.g. rows copied by resampling, each group
            one original row). A bandwidth chosen without leaving anything out (a
            number, a rule of thumb, an :class:`~sklearn_nw.AdaptiveBandwidth`) does not
            depend on them, and they are ignored, as ``KFold.split`` ignores them. With
            metadata routing, request them with ``set_fit_request(groups=True)``. See
            :ref:`the user guide <leave_out>`.

        Returns
        -------
        self : NadarayaWatsonRegressor
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight, degree=self.degree, groups=groups)

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

    def predict(self, X, return_attention=False, *, return_std=False):
        """Predict targets as the attention-weighted average of the training targets.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query points.
        return_attention : bool, default=False
            Also return the attention matrix.
        return_std : bool, default=False
            Also return the standard error of the estimated regression function at each
            query, ``sqrt(sum_i l_i(x)**2 s_i**2)`` with ``l(x)`` the attention and each
            target's variance ``s_i**2`` estimated as ``residual_variance`` says (see
            :ref:`the user guide <uncertainty>`). It is the error of the fit around its
            own expectation (the bias is not in it), and needs one pass of the training
            points over themselves (their in-sample fit, or their nearest neighbors).

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Predictions, float64 as the targets are stored (the attention weights are
            computed in the dtype of ``X_fit_``).
        y_std : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Only with ``return_std=True``: the standard errors, float64, per output.
        attention : ndarray or scipy.sparse.csr_array of shape (n_queries, n_samples_fit)
            Only with ``return_attention=True``: the weights of the training points for each
            query, rows summing to 1; sparse for compact kernels. With ``degree`` 1 or 2,
            the equivalent kernel of the local fit (``y_pred = attention @ y``), whose
            entries may be negative. Returned last, after ``y_std`` when both are asked
            for.
        """
        check_is_fitted(self)
        X = self._validate_predict_data(X)
        if not return_std:
            out, attention = self._pool(X, return_attention=return_attention)
            y_pred = self._outputs(out)
            return (y_pred, attention) if return_attention else y_pred
        if return_attention and not self.key_set_.route.attention_is_sparse:
            self._check_dense_attention(X.shape[0], "predict(X, return_attention=True)")
        variance = self._target_variance()  # (n, t)
        if not return_attention:
            sums = self.key_set_.pool_with_variance(
                X, variance, device=self._compute_device(),
                working_memory=get_config()["working_memory"])
            if sums is not None:  # no attention matrix: sums or moments
                out = sums.out
                self._check_pooled(X.shape[0], out, sums.n_fallback, sums.n_singular)
                y_std = np.sqrt(sums.variance)
                return self._outputs(out), y_std if self.y_fit_.ndim == 2 else y_std[:, 0]
        parts, attentions = [], []

        def each(rows, attention):
            parts.append(squared_attention(attention) @ variance)
            if return_attention:
                attentions.append(attention)

        y_pred = self._outputs(self._pool_in_chunks(X, each))
        y_std = np.sqrt(np.concatenate(parts))
        y_std = y_std if self.y_fit_.ndim == 2 else y_std[:, 0]
        if not return_attention:
            return y_pred, y_std
        attention = (sp.vstack(attentions, format="csr") if sp.issparse(attentions[0])
                     else np.concatenate(attentions))
        return y_pred, y_std, user_attention(attention)

    def marginal_effects(self, X, *, average=False, return_std=False):
        r"""Marginal effects: how the estimated regression function changes with each
        feature at X, with their standard errors.

        For a continuous feature j, the partial derivative
        :math:`\partial \hat f(x) / \partial x_j` in the feature's own unit: with
        ``degree=0``, the exact derivative of the Nadaraya-Watson fit (of its attention,
        the kernel's log-profile differentiated by torch autograd); with ``degree`` 1 or
        2, the slope of the local polynomial at x (its linear coefficient for degree 1,
        what statsmodels' ``KernelReg(reg_type="ll").fit()`` returns as marginal
        effects), which is not the derivative of the local-linear prediction. For a
        categorical feature, R np's first difference: the prediction at the query's
        category less that at the first category (unordered), or at the previous
        category (ordered); 0 at the first category. Every effect is linear in the
        targets, :math:`\sum_i w_{ij}(x) y_i`, and its standard error is
        :math:`\sqrt{\sum_i w_{ij}(x)^2 \hat\sigma_i^2}` with the variances of
        ``predict(X, return_std=True)`` (``residual_variance``). See :ref:`the user
        guide <ug_marginal_effects>`.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Where the effects are computed.
        average : bool, default=False
            Return the average marginal effects over the queries X instead, with the
            weights ``w_ij`` averaged over the queries (then squared, for the standard
            errors).
        return_std : bool, default=False
            Also return the standard errors.

        Returns
        -------
        effects : ndarray of shape (n_queries, n_features)
            The marginal effects, float64; (n_queries, n_outputs, n_features) for a fit
            on several outputs; with ``average=True``, (n_features,) or (n_outputs,
            n_features).
        std : ndarray of the same shape
            Only with ``return_std=True``: their standard errors.

        Raises
        ------
        NotImplementedError
            With ``metric="precomputed"`` (no features to differentiate in) or a balloon
            adaptive bandwidth with ``degree=0`` (the bandwidth moves with the query).
        TypeError
            If ``average`` or ``return_std`` is not a bool.

        Notes
        -----
        Where the training points in reach change (a compact kernel's support, the
        ``n_neighbors`` nearest), the derivative is taken with them held: the fit's own
        wherever they do not change. A query with no training point in reach has the
        value of its nearest ones, locally constant: its effects are 0. With
        ``bounded=True`` the slopes are those of the local polynomial before the bound.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_nw import NadarayaWatsonRegressor
        >>> X = np.linspace(0.0, 3.0, 31)[:, None]
        >>> y = X[:, 0] ** 2
        >>> reg = NadarayaWatsonRegressor(bandwidth=0.3, degree=1).fit(X, y)
        >>> reg.marginal_effects([[1.5]]).round(3)
        array([[3.]])
        """
        check_is_fitted(self)
        for name, flag in (("average", average), ("return_std", return_std)):
            if not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False; got {flag!r}.")
        codes = self._validate_predict_codes(X)
        keys = self.key_set_
        if keys.precomputed:
            raise NotImplementedError(
                "Marginal effects are derivatives with respect to the features; "
                "metric='precomputed' has distances, not features.")
        categorical = self._categorical
        queries = codes if categorical is None else categorical.embed(codes)
        n_q, d = codes.shape
        n = keys.X.shape[0]
        y = self.y_fit_.reshape(n, -1)  # (n, t)
        variance = self._target_variance() if return_std else None  # (n, t)
        working_memory = get_config()["working_memory"]
        device = self._compute_device()
        # Per query: the route's differences, logit gradients and weights (n r each), the
        # weights in the features, their squares and copies (n d each), attention rows.
        step = chunk_rows(n_q, 8 * n * (5 * keys.n_coords + 4 * d + 4), working_memory)
        effects, stds, total = [], [], np.zeros((n, d))
        n_fallback = n_singular = 0
        for rows in gen_batches(n_q, step):
            weights, fallback, singular = self._effect_weights(
                codes[rows], queries[rows], device, working_memory)  # (b, n, d)
            n_fallback += fallback
            n_singular += singular
            if average:
                total += weights.sum(0)
                continue
            effects.append(np.einsum("bnd,nt->btd", weights, y))
            if return_std:
                stds.append(np.sqrt(np.einsum("bnd,nt->btd", weights**2, variance)))
        if average:
            total /= n_q
            effect = np.einsum("nd,nt->td", total, y)  # (t, d)
            std = np.sqrt(np.einsum("nd,nt->td", total**2, variance)) if return_std else None
        else:
            effect = np.concatenate(effects)  # (n_q, t, d)
            std = np.concatenate(stds) if return_std else None
        self._check_pooled(n_q, effect, n_fallback, n_singular)
        if self.y_fit_.ndim == 1:
            effect = effect[..., 0, :]
            std = None if std is None else std[..., 0, :]
        return (effect, std) if return_std else effect

    def _effect_weights(self, codes, queries, device, working_memory):
        """The weights (b, n, d) of the training targets in the marginal effects at
        queries with category ``codes`` (b, d) and embedded ``queries``, and the queries
        that fell back to their nearest training point(s) and had singular local fits."""
        keys = self.key_set_
        weights, n_fallback, n_singular = keys.gradient_weights(
            queries, device=device, working_memory=working_memory)
        categorical = self._categorical
        if categorical is None:
            return weights, n_fallback, n_singular
        out = np.zeros(weights.shape[:2] + (codes.shape[1],))  # (b, n, d)
        out[:, :, categorical.continuous] = weights[:, :, : categorical.n_continuous]

        def attention(q):  # the predictions' weights: attention or equivalent kernel
            return dense_rows(keys.pool(q, return_attention=True, compute="eager",
                                        device=device,
                                        working_memory=working_memory).attention)

        own = attention(queries) if len(categorical.columns) else None  # (b, n)
        for k, j in enumerate(categorical.columns):
            moved, same = categorical.reference_codes(codes, k)
            out[:, :, j] = np.where(same[:, None], 0.0,
                                    own - attention(categorical.embed(moved)))
        return out, n_fallback, n_singular

    def predict_interval(self, X, confidence_level=0.9, *, cv=None):
        """Jackknife+ (or CV+) prediction intervals for new targets at X.

        At the fitted bandwidth, the fit without training row i at a query is its
        attention without row i, renormalized: one attention row per query gives every
        leave-one-out fit ``f_{-i}(x)``, and the training rows' own give the leave-one-out
        residuals ``R_i = |y_i - f_{-i}(x_i)|``. The interval runs from the
        ``floor(alpha (n + 1))``-th smallest of ``f_{-i}(x) - R_i`` to the
        ``ceil((1 - alpha) (n + 1))``-th smallest of ``f_{-i}(x) + R_i``, ``alpha = 1 -
        confidence_level``, over the n training rows of positive sample weight (Barber
        et al. 2021; ``alpha (n + 1)`` taken as the decimal the level is written as: at
        0.8 and 29 rows, 6, not the 5.99... of its binary float): it covers a new target
        with probability at least ``1 - 2 alpha`` for exchangeable data, and about ``1 -
        alpha`` in practice. With ``degree`` 1 or
        2, each local fit without a row is its own least-squares update (Sherman-Morrison:
        the fit moves by its equivalent kernel's weight times the row's residual from the
        query's local polynomial, over one minus its leverage there), and a bounded one
        (``bounded``) bounded again by the attention without the row. A fit without a row
        that these do not give (a query whose attention is all on that row, a compact
        kernel's lone neighbor; a local design singular without it) is refitted as such.
        Under an adaptive bandwidth the neighbor distances that counted the row move out
        as a refit without it has them (a balloon query's own, at any degree; at degree
        0, the sample-point bandwidths of the keys whose k nearest held it), the rule and
        its k and c held; on the ``n_neighbors`` nearest keys, a row among a query's k
        nearest makes way for the next key(s), as the k nearest of a refit's keys. The
        bandwidth is held fixed: its own choice from the same data (a learned or CV
        bandwidth) is not repeated without each row, which makes the residuals a little
        small. With ``cv``, CV+ instead (Barber et al. 2021): on each split of the
        training rows a clone of this estimator is fitted on the training part, its
        bandwidth chosen there as this estimator chose it; the held-out rows' residuals
        and the predictions at X of the split they were held out of take the place of
        the leave-one-out ones. It costs one fit per split, and serves every bandwidth.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query points.
        confidence_level : float or array-like of shape (n_levels,), default=0.9
            Each in (0, 1).
        cv : int, cross-validation generator or iterable, default=None
            None: jackknife+ at the fitted bandwidth. Otherwise the splits of CV+ (an
            int k is ``KFold(k)``, as :func:`~sklearn.model_selection.check_cv` reads
            it), which must hold every training row out exactly once; ``groups`` given
            to ``fit`` are not passed to them.

        Returns
        -------
        y_pred : ndarray of shape (n_queries,)
            The predictions (of the fit on every training row, as :meth:`predict`).
        y_intervals : ndarray of shape (n_queries, 2, n_levels)
            Lower (``[:, 0, :]``) and upper (``[:, 1, :]``) bounds, one pair per confidence
            level, as MAPIE's ``predict_interval``; ``-inf`` and ``+inf`` where too few
            training rows reach the level (``alpha (n + 1) < 1``).

        Raises
        ------
        NotImplementedError
            Without ``cv``: with local polynomials under a sample-point bandwidth or on
            the ``n_neighbors`` nearest keys, or ``n_neighbors`` with precomputed
            distances, whose fits without a row are not computed from the fit with it
            (other keys' designs, or the next key, change). With ``cv``: with
            ``metric="precomputed"``
            (the refits would need distances between the training rows).
        ValueError
            With several outputs, a confidence level outside (0, 1), or splits that do
            not hold every row out once.
        """
        check_is_fitted(self)
        alphas = 1.0 - confidence_levels(confidence_level)
        if cv is not None:
            return self._cv_plus(X, alphas, cv)
        X = self._validate_predict_data(X)
        self._check_jackknife()
        y = self.y_fit_
        positive = self.sample_weight_ > 0
        residuals = np.abs(y - self._leave_one_out_predictions())
        with self.key_set_.leave_one_out_session():  # (shared by both passes)
            by_windows = (self._jackknife_plus_by_blocks(X, positive, residuals, alphas)
                          if self.key_set_.leave_one_out_blocks else
                          self._jackknife_plus_by_windows(X, positive, residuals, alphas))
            if by_windows is None:
                return self._jackknife_plus_by_attention(X, y, positive, residuals, alphas)
            y_pred, intervals, rest = by_windows
            if rest.any():
                y_pred[rest], intervals[rest] = self._jackknife_plus_by_attention(
                    X[rest], y, positive, residuals, alphas)
        return y_pred, intervals

    def _jackknife_plus_by_windows(self, X, positive, residuals, alphas):
        """The predictions at X, their jackknife+ bounds from the moves of the fits
        without each key on the few keys that can decide a bound
        (:func:`~sklearn_nw._uncertainty.jackknife_plus_windows`), and which queries
        (n_q,) those do not serve (the attention path's); None where the route has no
        such moves (:meth:`~sklearn_nw._keys.FittedKeys.leave_one_out_moves`)."""
        moves = self.key_set_.leave_one_out_moves(
            X, device=self._compute_device(), working_memory=get_config()["working_memory"])
        if moves is None or moves.rest.all():
            return None
        y_pred = self._outputs(moves.fits)
        self._check_pooled(X.shape[0], y_pred[~moves.rest], 0, 0)
        scale = self._scaling[1]  # the values' unit in the targets'
        ranking, fast = np.flatnonzero(positive), np.flatnonzero(~moves.rest)
        intervals = np.empty((X.shape[0], 2, len(alphas)))
        intervals[fast] = jackknife_plus_windows(
            y_pred[fast], moves.bound[fast, 0] * scale, residuals[ranking], alphas,
            lambda rows, columns: moves.moves(fast[rows], ranking[columns])[:, :, 0] * scale,
            device=self._compute_device())
        return y_pred, intervals, moves.rest

    def _jackknife_plus_by_blocks(self, X, positive, residuals, alphas):
        """:meth:`_jackknife_plus_by_windows` from moves held per chunk of queries
        (:meth:`~sklearn_nw._keys.FittedKeys.leave_one_out_block_moves`: each chunk's own
        pass gives its predictions, the bounds on its moves and the moves on the windows'
        keys), on the workers."""
        scale = self._scaling[1]  # the values' unit in the targets'
        ranking = np.flatnonzero(positive)
        ranked = RankedScores(residuals[ranking])  # (shared by the chunks)
        y_pred, rest = np.empty(X.shape[0]), np.zeros(X.shape[0], dtype=bool)

        def bounds(rows):  # (rows a slice: each chunk writes its own predictions)
            moves = self.key_set_.leave_one_out_block_moves(X[rows])
            rest[rows] = moves.rest
            fast = np.flatnonzero(~moves.rest)
            out = np.full((len(moves.rest), 2, len(alphas)), np.nan)
            if len(fast):
                y_pred[rows][fast] = self._outputs(moves.fits[fast])
                out[fast] = jackknife_plus_windows(
                    y_pred[rows][fast], moves.bound[fast, 0] * scale, ranked, alphas,
                    lambda queries, columns: moves.moves(
                        fast[queries], ranking[columns])[:, :, 0] * scale)
            return out

        intervals = self._in_query_chunks(X.shape[0], bounds,
                                          row_bytes=8 * 10 * self.X_fit_.shape[0])
        self._check_pooled(X.shape[0], y_pred[~rest], 0, 0)
        return y_pred, intervals, rest

    def _jackknife_plus_by_attention(self, X, y, positive, residuals, alphas):
        """The predictions at X and their jackknife+ bounds from the queries' attention
        rows: every fit without a row (sparse rows: the fits without the keys in reach;
        local polynomials: from their own designs, no equivalent kernel formed)."""
        parts = []
        if self.key_set_.leave_one_out_in_reach:
            return self._sparse_local_jackknife_plus(X, y, positive, residuals, alphas)
        if self.key_set_.leave_one_out_nearest:
            return self._nearest_jackknife_plus(X, y, positive, residuals, alphas)
        if self.key_set_.degree or self.bandwidth_kind_ != "fixed":
            y_pred = self._outputs(self._pool(X)[0])
            every_row = bool(positive.all())

            def bounds(rows):  # a chunk's own pass (the fits without each row), its bounds
                fits = self._leave_one_out_fits(X[rows], None, y)
                if not every_row:
                    fits = fits[:, positive]
                # The bounds decided on the few rows whose moves can reach them: the
                # moves from the query's fit, each at most its largest (NaN: none).
                moves = fits - y_pred[rows, None]
                bound = np.maximum(moves.max(1, initial=0.0), -moves.min(1, initial=0.0))
                if not np.isfinite(bound).all():  # (no bound: every row ranked)
                    return jackknife_plus(fits, residuals[positive], alphas)
                return jackknife_plus_windows(
                    y_pred[rows], bound, residuals[positive], alphas,
                    lambda queries, columns: moves[queries[:, None], columns])

            return y_pred, self._in_query_chunks(X.shape[0], bounds,
                                                 row_bytes=8 * 4 * self.X_fit_.shape[0])

        ranked = RankedScores(residuals[positive])  # (the sparse rows' chunks share it)

        def each_query(rows, attention):
            if sp.issparse(attention) and not self.key_set_.degree:
                # A few keys per query: every other row's fit without it is the query's.
                parts.append(self._sparse_jackknife_plus(X[rows], attention, y, positive,
                                                         ranked, alphas))
                return
            fits = self._leave_one_out_fits(X[rows], attention, y)
            parts.append(jackknife_plus(fits[:, positive], residuals[positive], alphas))

        y_pred = self._outputs(self._pool_in_chunks(X, each_query))
        return y_pred, np.concatenate(parts)

    def _sparse_local_jackknife_plus(self, X, y, positive, residuals, alphas):
        """The predictions at X and their jackknife+ bounds for local polynomials on a
        compact kernel's keys in reach: the fits without each of them from the query's
        design (:meth:`~sklearn_nw._keys.FittedKeys.leave_one_out_sparse_local_fits`;
        those whose design is singular without a key refitted), every other row's the
        query's own fit (:func:`jackknife_plus_sparse`), in chunks of queries on the
        workers. A query whose own design is singular has the prediction's fallback
        (Nadaraya-Watson) as its own fit, and every fit without a key in reach refitted."""
        y_pred = self._outputs(self._pool(X)[0])
        settings = {"device": self._compute_device(),
                    "working_memory": get_config()["working_memory"]}
        ranked = RankedScores(residuals[positive])

        def bounds(rows):
            own, fits, keys, missing, singular = self.key_set_.leave_one_out_sparse_local_fits(
                X[rows], y, **settings)
            own, fits = own[:, 0], fits[:, :, 0]
            own[singular] = y_pred[rows][singular]
            fits, keys = self._resolve_sparse_fits(X[rows], fits, keys, missing, positive)
            return jackknife_plus_sparse(own, fits, keys, ranked, alphas)

        return y_pred, self._in_query_chunks(X.shape[0], bounds)

    def _nearest_jackknife_plus(self, X, y, positive, residuals, alphas):
        """The predictions at X and their jackknife+ bounds on the k nearest keys: the
        fits with every key and without each of a query's k nearest from one search
        (:meth:`~sklearn_nw._keys.FittedKeys.leave_one_out_nearest_fits`, the next keys
        taken in; those with no kernel weight left refitted), every other row's the
        query's own fit (:func:`jackknife_plus_sparse`), in chunks of queries on the
        workers; no attention matrix formed. The predictions are the route's where a
        query's k nearest hold no kernel weight (its nearest-key fallback, and its
        warning) and in float32 fits (computed in float32, as predict does)."""
        keys = self.key_set_
        own, fits, held, missing = keys.leave_one_out_nearest_fits(
            X, y, device=self._compute_device(),
            working_memory=get_config()["working_memory"])
        y_pred = own[:, 0]
        rest = (np.flatnonzero(~np.isfinite(y_pred)) if keys.dtype == np.float64
                else np.arange(len(X)))
        if len(rest):
            y_pred[rest] = self._outputs(self._pool(X[rest])[0])
        fits, held = self._resolve_sparse_fits(X, fits[:, :, 0], held, missing, positive)
        ranked = RankedScores(residuals[positive])
        return y_pred, self._in_query_chunks(X.shape[0], lambda rows: jackknife_plus_sparse(
            y_pred[rows], fits[rows], held[rows], ranked, alphas))

    def _sparse_jackknife_plus(self, queries, attention, y, positive, ranked, alphas):
        """Jackknife+ bounds of queries with sparse attention rows (b, n): the fits
        without the keys in reach (:func:`sparse_leave_one_out_fits`; those whose weight
        was all on the key refitted), every other row's the query's own fit
        (:func:`jackknife_plus_sparse`), in chunks of queries of similar counts on the
        workers. ``ranked``: the rows of positive weight's residuals, a
        :class:`~sklearn_nw._uncertainty.RankedScores`."""
        attention = sp.csr_array(attention)

        def bounds(rows):
            fits, keys, own = self._sparse_leave_one_out_fits(queries[rows], attention[rows],
                                                              y, positive)
            return jackknife_plus_sparse(own, fits, keys, ranked, alphas)

        return self._sparse_rows_in_chunks(attention, bounds)

    def _check_jackknife(self):
        """Refuse what the closed-form jackknife+ does not compute."""
        self._check_leave_one_out_fits(
            "predict_interval computes jackknife+",
            "refit the estimator without each row: predict_interval(X, cv=...) (CV+) or "
            "MAPIE's cross-conformal estimators")
        self._check_one_target()

    def _check_one_target(self):
        if self.y_fit_.ndim == 2:
            raise ValueError(
                "predict_interval takes one target; this estimator was fitted on "
                f"{self.y_fit_.shape[1]} outputs. Fit one estimator per output.")

    def _cv_plus(self, X, alphas, cv):
        """The predictions at the queries X and their CV+ bounds (q, 2, n_levels) over
        the splits ``cv`` (see :meth:`predict_interval`): one clone fitted per split."""
        self._check_one_target()
        if self._precomputed():
            raise NotImplementedError(
                "predict_interval(cv=...) refits the estimator on the training rows, which "
                "metric='precomputed' (distances between them) does not allow. Use "
                "cv=None (jackknife+), or MAPIE's CrossConformalRegressor on the data as "
                "given.")
        y_pred = self.predict(X)
        if self._categorical is None:
            X = self._validate_predict_data(X)  # as the clones are fitted: on X_fit_
            X_fit = self.X_fit_
        else:  # the clones fitted on the rows as given (their categories), X as given
            X_fit = self._categorical.decode(self.X_fit_)
        y, weight = self.y_fit_, self.sample_weight_
        rows_of = (lambda rows: X_fit.iloc[rows]) if hasattr(X_fit, "iloc") else (
            lambda rows: X_fit[rows])
        n = len(y)
        split_of = np.full(n, -1)
        residuals = np.empty(n)
        predictions = []  # (q,) per split
        for s, (train, test) in enumerate(check_cv(cv).split(X_fit, y)):
            if np.any(split_of[test] >= 0):
                raise ValueError("predict_interval's cv holds a row out more than once: "
                                 "CV+ needs a partition of the rows, such as KFold's.")
            model = clone(self).fit(rows_of(train), y[train], sample_weight=weight[train])
            residuals[test] = np.abs(y[test] - model.predict(rows_of(test)))
            predictions.append(model.predict(X))
            split_of[test] = s
        if np.any(split_of < 0):
            raise ValueError(
                f"predict_interval's cv held out {int(np.sum(split_of >= 0))} of the {n} "
                "training rows: CV+ needs every row held out once (a partition, such as "
                "KFold's).")
        positive = weight > 0
        predictions = np.column_stack(predictions)  # (q, n_splits)
        split_of, residuals = split_of[positive], residuals[positive]
        # The (b, n) fits of a block of queries at a time, each row's its split's.
        step = chunk_rows(len(X), 3 * 8 * len(residuals), get_config()["working_memory"])
        return y_pred, np.concatenate([
            jackknife_plus(predictions[rows][:, split_of], residuals, alphas)
            for rows in gen_batches(len(X), step)])

    def predict_confidence_interval(self, X, confidence_level=0.95, *,
                                    bias_correction="robust", bias_bandwidth=None,
                                    return_std=False):
        """Confidence intervals for the regression function at X, conventional or robust
        bias-corrected (Calonico, Cattaneo and Farrell 2018).

        The local polynomial of degree p = ``degree`` (0 or 1) at each query has a bias
        of the order of its bandwidth to the power p + 1, which the conventional interval
        ``f(x) +- z se`` ignores. The robust bias-corrected interval subtracts the bias
        estimated by a local polynomial of degree p + 1 with bandwidth ``bias_bandwidth``,
        and takes the standard error of the corrected estimate, the bias estimate's own
        variance included. The standard errors are nprobust's: the residuals of the
        query's own local fits within its window (or of each window point's nearest
        others for ``residual_variance="nn"``), scaled as ``residual_variance`` says. In
        one feature the estimates, standard errors and both intervals are those of
        nprobust's ``lprobust`` with the same p, h, b, kernel and ``vce``. With
        categorical features the polynomials are in the continuous features (np's rule)
        and the categories weigh each window by their kernel, at the fit's lambda. See
        :ref:`the user guide <uncertainty>`.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query points.
        confidence_level : float or array-like of shape (n_levels,), default=0.95
            Each in (0, 1).
        bias_correction : {"robust", "conventional"}, default="robust"
            The robust bias-corrected interval, centered at the bias-corrected estimate;
            or the conventional one, centered at the local polynomial's.
        bias_bandwidth : float or array-like of shape (n_features,), default=None
            The bandwidth b of the bias estimate (nprobust's ``b``); None: ``bandwidth_``
            (nprobust's ``rho=1``). With categorical features, a number is the continuous
            features' b (the categories keep the fit's lambda), and one value per feature
            is read as ``bandwidth_`` is (lambda at the categorical ones).
        return_std : bool, default=False
            Also return the standard errors.

        Returns
        -------
        y_center : ndarray of shape (n_queries,)
            The estimate each interval is centered at: bias-corrected (``"robust"``), or
            the unbounded local polynomial's (``"conventional"``, the prediction unless
            ``bounded`` shrank it).
        y_intervals : ndarray of shape (n_queries, 2, n_levels)
            Lower (``[:, 0, :]``) and upper (``[:, 1, :]``) bounds per confidence level,
            ``y_center -+ z se`` with z the normal quantile.
        y_std : ndarray of shape (n_queries,)
            Only with ``return_std=True``: the standard errors.

        Raises
        ------
        NotImplementedError
            With ``degree=2`` (its bias estimate would be cubic), ``n_neighbors``, an
            adaptive bandwidth or precomputed distances.
        ValueError
            With several outputs, a bad level or bias bandwidth, or a query whose local
            designs are singular in its window.
        """
        check_is_fitted(self)
        X = self._validate_predict_data(X)
        levels = confidence_levels(confidence_level)
        if bias_correction not in ("robust", "conventional"):
            raise ValueError("bias_correction must be 'robust' or 'conventional'; got "
                             f"{bias_correction!r}.")
        self._check_confidence_interval()
        keys = self.key_set_
        metric_b = self._bias_metric(bias_bandwidth)
        working_memory = get_config()["working_memory"]
        to_b = None if bias_bandwidth is None else keys.metric / metric_b  # units of h to b
        y = self.y_fit_.reshape(len(self.y_fit_), -1)
        # In units of h; with categorical features, their embedding follows the r
        # continuous coordinates the polynomials are in (np's rule).
        xs = keys.scaled(keys.X)  # (n, r + embedded)
        n, r = xs.shape[0], keys.continuous_coords
        q_terms = 1 + r + r * (r + 1) // 2  # the bias fit's, at most
        step = chunk_rows(X.shape[0], 8 * (8 + 4 * q_terms) * max(1, n), working_memory)
        parts = []
        for start in range(0, X.shape[0], step):
            rows = slice(start, min(X.shape[0], start + step))
            u = xs[None] - keys.scaled(X[rows])[:, None]  # (b, n, r)
            # The attention of h and of b, from the differences already at hand.
            a = kernel_attention(u, keys.kernel, keys.log_w)  # (b, n)
            c = a if to_b is None else kernel_attention(u * to_b, keys.kernel, keys.log_w)
            parts.append(bias_corrected_fits(u[:, :, :r], a, c, y, keys.degree,
                                             self.residual_variance,
                                             self.residual_neighbors, xs))
        tau_cl, tau_bc, se_cl, se_rb = (np.concatenate(p)[:, 0] for p in zip(*parts))
        center, std = (tau_bc, se_rb) if bias_correction == "robust" else (tau_cl, se_cl)
        bad = ~(np.isfinite(center) & np.isfinite(std))
        if bad.any():
            raise ValueError(
                f"{int(bad.sum())} of {len(bad)} queries have a singular local design of "
                f"degree {keys.degree} or {keys.degree + 1} in their window (too few "
                "training points within the bandwidth, or points on a line the query is "
                "off). Use a larger bandwidth or bias_bandwidth.")
        z = norm.ppf(0.5 + levels / 2)  # (n_levels,)
        intervals = np.stack([center[:, None] - z * std[:, None],
                              center[:, None] + z * std[:, None]], axis=1)
        return (center, intervals, std) if return_std else (center, intervals)

    def _check_confidence_interval(self):
        """Refuse what the bias-corrected intervals do not compute."""
        keys = self.key_set_
        why = None
        if keys.degree > 1:
            why = "degree=2 (its bias estimate would be a cubic fit)"
        elif self.bandwidth_kind_ != "fixed" or self.n_neighbors is not None:
            why = "an adaptive bandwidth or n_neighbors (no bandwidth b to change)"
        elif keys.precomputed:
            why = "precomputed distances"
        if why is not None:
            raise NotImplementedError(
                f"predict_confidence_interval fits local polynomials of degree p and p + 1 "
                f"at a fixed bandwidth in the features; not with {why}.")
        if self.y_fit_.ndim == 2:
            raise ValueError("predict_confidence_interval takes one target; this estimator "
                             f"was fitted on {self.y_fit_.shape[1]} outputs.")

    def _bias_metric(self, bias_bandwidth):
        """The bandwidths ``b`` of the bias fit: ``bias_bandwidth`` per feature, checked,
        or the fit's own (None); with categorical features, of every embedded column."""
        metric = self.key_set_.metric
        if bias_bandwidth is None:
            return metric
        categorical = self._categorical
        if categorical is not None:
            return categorical.expand(self._categorical_bias_parameters(bias_bandwidth))
        if metric.ndim == 2:
            raise ValueError("bias_bandwidth needs per-feature bandwidths; this "
                             "estimator learned a full metric (projection_).")
        try:
            b = np.broadcast_to(np.asarray(bias_bandwidth, dtype=np.float64),
                                metric.shape).copy()
        except (TypeError, ValueError):
            b = None
        if b is None or not np.all(np.isfinite(b) & (b > 0)):
            raise ValueError("bias_bandwidth must be a positive number or one per "
                             f"feature; got {bias_bandwidth!r}.")
        return b

    def _categorical_bias_parameters(self, bias_bandwidth):
        """The parameters (d,) of the bias fit with categorical features: a number for
        every continuous feature (the categorical ones as fitted), or one value per
        feature in ``bandwidth_``'s terms."""
        categorical = self._categorical
        given = np.asarray(bias_bandwidth, dtype=object)
        try:
            if given.ndim == 0:
                b = float(bias_bandwidth)
                if not (np.isfinite(b) and b > 0):
                    raise ValueError
                parameters = np.array(self._scales, dtype=np.float64)
                parameters[categorical.continuous] = b
                return parameters
            return categorical.check(bias_bandwidth)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                "bias_bandwidth must be a positive number (the continuous features' b) "
                "or one value per feature as bandwidth_ holds them (the smoothing lambda "
                f"of a categorical one); got {bias_bandwidth!r}.") from exc

    def _target_variance(self):
        """Each training target's variance ``s_i**2`` (n, t), by ``residual_variance``."""
        keys = self.key_set_
        y = self.y_fit_.reshape(len(self.y_fit_), -1)
        positive = self.sample_weight_ > 0
        if self.residual_variance == "nn":
            stored = getattr(self, "_nn_neighbors", None)  # store_loo's, with its J
            neighbors = (stored[1] if stored is not None
                         and stored[0] == self.residual_neighbors
                         else self._nearest_others(self.residual_neighbors))
            return nearest_neighbor_variance(y, neighbors, positive)
        fitted, leverage = self._in_sample()
        return residual_variance(y, fitted.reshape(y.shape), leverage, positive,
                                 method=self.residual_variance, n_params=keys.n_local_terms)

    def _nearest_others(self, n_neighbors):
        """Each training row's ``n_neighbors`` nearest other rows of positive weight,
        with ties (:func:`~sklearn_nw._uncertainty.nearest_others`), in the kernel's
        metric: the ``nn`` residual variance's."""
        keys, positive = self.key_set_, self.sample_weight_ > 0
        if keys.precomputed:
            return nearest_others(positive, n_neighbors,
                                  distances=self._precomputed_distances,
                                  working_memory=get_config()["working_memory"])
        # Scaled by the bandwidths, or projected.
        return nearest_others(positive, n_neighbors, points=keys.scaled(keys.X))

    def _in_sample(self):
        """The in-sample fits (n,) or (n, t) and each training row's weight in its own
        fit (n,): kept at fit (``store_loo``), else computed (:meth:`_in_sample_from`)."""
        if hasattr(self, "_in_sample_fit"):
            return self._in_sample_fit
        return self._in_sample_from(self._in_sample_sums())

    def _in_sample_from(self, sums):
        """:meth:`_in_sample` from the route's ``sums`` (:meth:`_in_sample_sums`), or
        where there are none (None) from the attention."""
        if sums is not None:  # no attention matrix
            return sums
        leverage = np.empty(len(self.y_fit_))

        def each(rows, attention):
            leverage[rows] = self_weights(attention, np.arange(rows.start, rows.stop))

        return self._outputs(self._pool_in_chunks(self.key_set_.X, each, training=True)), leverage

    _stored_leave_one_out = ("loo_prediction_", "_in_sample_fit", "_nn_neighbors")

    def _leave_one_out_state(self):
        """``store_loo``'s: the in-sample fits and self-weights (``return_std``'s
        residual variances), each row's nearest others at ``residual_neighbors`` (the
        ``nn`` variance's, kept with that count), and each row's fit without it
        (``loo_prediction_``: jackknife+), where computed from the fit with it; one pass
        for both where the route has them from sums."""
        sums = self._in_sample_sums()
        state = {"_in_sample_fit": self._in_sample_from(sums)}
        if np.count_nonzero(self.sample_weight_) >= 2:  # (else nn refuses, at its call)
            state["_nn_neighbors"] = (self.residual_neighbors,
                                      self._nearest_others(self.residual_neighbors))
        if self._has_leave_one_out_fits():
            # Without the route's sums, from the attention (as _fits_without_each_row).
            state["loo_prediction_"] = (
                self._fits_without_each_row(self.y_fit_, sums) if sums is not None
                else self._leave_one_out_at_training_points(self.y_fit_))
        return state

    def _leave_one_out_predictions(self):
        """``loo_prediction_``: kept at fit (``store_loo``), or computed."""
        if hasattr(self, "loo_prediction_"):
            return self.loo_prediction_
        return self._fits_without_each_row(self.y_fit_)

    def _precomputed_distances(self, rows):
        """The precomputed distances (b, n) of the training rows ``rows`` to every
        training row (inf where a sparse matrix stores none)."""
        block = self.key_set_.X[rows]
        if not sp.issparse(block):
            return block
        block = sp.csr_array(block).tocoo()
        dense = np.full(block.shape, np.inf)
        dense[block.row, block.col] = block.data
        return dense

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

