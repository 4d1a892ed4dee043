"""Nadaraya-Watson kernel classification."""

import numpy as np
import scipy.sparse as sp
from sklearn import get_config
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._base import NadarayaWatsonBase, confidence_levels
from ._docs import ATTRIBUTES, LEAVE_ONE_OUT, PARAMETERS, entries, fill_doc
from ._uncertainty import (
    CONFORMITY_SCORES,
    RankedScores,
    conformal_sets,
    conformal_sets_sparse,
    conformal_sets_windows,
    conformity_score_bound,
    conformity_scores,
    score_tolerance,
)

# The regressor's own: its local polynomials and its standard errors.
_REGRESSOR_ONLY = ("degree", "bounded", "residual_variance", "residual_neighbors")


@fill_doc(parameters=entries(PARAMETERS, *(k for k in PARAMETERS
                                            if k not in _REGRESSOR_ONLY)),
          attributes=entries(ATTRIBUTES) + "\n" + LEAVE_ONE_OUT["loo_proba_"])
class NadarayaWatsonClassifier(ClassifierMixin, NadarayaWatsonBase):
    r"""Nadaraya-Watson kernel classification: attention pooling of one-hot labels.

    The class probabilities at a query q are the kernel-weighted class frequencies of the
    training points, with the same attention as :class:`NadarayaWatsonRegressor`.

    Read more in the :ref:`User Guide <ug_classification>`.

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
    def fit(self, X, y, sample_weight=None, groups=None):
        """Store the training data and resolve the kernel and bandwidth.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels, of any type ``numpy.unique`` can sort.
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
        self : NadarayaWatsonClassifier
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight, classifier=True, groups=groups)

    def _fit_targets(self, y):
        self.classes_, self.y_fit_ = np.unique(y, return_inverse=True)
        return self._values()

    _stored_leave_one_out = ("loo_proba_",)

    def _leave_one_out_state(self):
        """``store_loo``'s: each row's class probabilities without it (``loo_proba_``:
        the conformal sets' scores), where computed from the fit with it."""
        if not self._has_leave_one_out_fits():
            return {}
        one_hot = np.eye(len(self.classes_))[self.y_fit_]
        return {"loo_proba_": self._fits_without_each_row(one_hot)}

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

    def predict_set(self, X, confidence_level=0.9, *, conformity_score="lac",
                    include_last_label=True, random_state=None):
        """Conformal prediction sets: the classes a new label at X may have.

        At the fitted bandwidth, the class probabilities without training row i at a
        query are its attention without row i, renormalized: one attention row per query
        gives every leave-one-out fit ``p_{-i}(x)``, and the training rows' own give
        their scores ``s_i = S(x_i, y_i; p_{-i})``. Class k is in the set at level ``1 -
        alpha`` when fewer than ``(1 - alpha) (n + 1)`` (as a decimal, as
        :meth:`~sklearn_nw.NadarayaWatsonRegressor.predict_interval` ranks) of the n
        training rows of positive weight have ``s_i < S(x, k; p_{-i})`` (by more than
        1e-8, or 100 float32
        epsilons in float32: closer scores are ties of rounding): the CV+ sets of
        Romano, Sesia and Candes (2020) with one row per fold (the jackknife+ of
        classification), which hold a new label with probability at least ``1 - 2
        alpha`` for exchangeable data. The bandwidth is held fixed; under an adaptive
        one, the neighbor distances that counted the row move as a refit without it has
        them. See :ref:`the user guide <uncertainty>`.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query points.
        confidence_level : float or array-like of shape (n_levels,), default=0.9
            Each in (0, 1).
        conformity_score : {"lac", "aps"}, default="lac"
            The score ``S(x, k; p)``: ``"lac"`` (least ambiguous set-valued classifier)
            ``1 - p_k``; ``"aps"`` (adaptive prediction sets) the probability of the
            classes more probable than k, plus a share of ``p_k`` that
            ``include_last_label`` sets.
        include_last_label : {True, False, "randomized"}, default=True
            APS only, MAPIE's parameter: the share of its own probability a class adds to
            its score. True: all of it for the training rows' labels, none at the
            queries (every set holds the most probable class; large sets where the fits
            are confident); False: all of it on both sides (smaller sets, which may
            hold no class); ``"randomized"``: a uniform draw per training row and per
            query (Romano, Sesia and Candes' randomized APS: sets of the right size on
            average).
        random_state : int, RandomState instance or None, default=None
            The draws of ``include_last_label="randomized"``: one per training row in
            order, then one per query.

        Returns
        -------
        y_pred : ndarray of shape (n_queries,)
            The predicted labels, as :meth:`predict`.
        y_sets : ndarray of shape (n_queries, n_classes, n_levels) of bool
            Whether each class of ``classes_`` is in the set, per confidence level, as
            MAPIE's ``predict_set``.

        Raises
        ------
        NotImplementedError
            With ``n_neighbors`` and precomputed distances, whose fits without a row are
            not computed from the fit with it (the next stored entry comes in).
        """
        check_is_fitted(self)
        X = self._validate_predict_data(X)
        alphas = 1.0 - confidence_levels(confidence_level)
        if conformity_score not in CONFORMITY_SCORES:
            raise ValueError(f"conformity_score must be one of {CONFORMITY_SCORES}; got "
                             f"{conformity_score!r}.")
        if not any(include_last_label is v for v in (True, False)) and not (
                isinstance(include_last_label, str) and include_last_label == "randomized"):
            raise ValueError("include_last_label must be True, False or 'randomized'; got "
                             f"{include_last_label!r}.")
        self._check_leave_one_out_fits(
            "predict_set computes conformal sets",
            "refit the estimator without each row (MAPIE's cross-conformal estimators)")
        positive = self.sample_weight_ > 0
        one_hot = np.eye(len(self.classes_))[self.y_fit_]  # (n, c)
        if include_last_label == "randomized":
            rng = check_random_state(random_state)
            train_share = rng.uniform(size=len(one_hot))  # (n,)
            query_share = rng.uniform(size=(len(X), 1))  # one per query
        else:
            train_share, query_share = 1.0, 0.0 if include_last_label else 1.0
        loo_proba = (self.loo_proba_ if hasattr(self, "loo_proba_")
                     else self._fits_without_each_row(one_hot))
        tolerance = score_tolerance(self.X_fit_.dtype)
        own = conformity_scores(loo_proba, conformity_score, own_mass=train_share,
                                tie=tolerance)  # (n, c)
        training_scores = own[np.arange(len(one_hot)), self.y_fit_][positive]
        with self.key_set_.leave_one_out_session():  # (shared by both passes)
            by_windows = self._sets_by_windows(X, conformity_score, query_share, positive,
                                               training_scores, alphas, tolerance)
            if by_windows is None:
                return self._conformal_sets_by_attention(
                    X, conformity_score, query_share, positive, one_hot, training_scores,
                    alphas, tolerance)
            y_pred, sets, rest = by_windows
            if rest.any():
                y_pred[rest], sets[rest] = self._conformal_sets_by_attention(
                    X[rest], conformity_score,
                    query_share if np.isscalar(query_share) else query_share[rest],
                    positive, one_hot, training_scores, alphas, tolerance)
        return y_pred, sets

    def _sets_by_windows(self, X, conformity_score, query_share, positive, training_scores,
                         alphas, tolerance):
        """The predictions at X, their conformal sets from the moves of the class
        probabilities without each key on the training rows that can change a count
        (:func:`~sklearn_nw._uncertainty.conformal_sets_windows`), and which queries
        (n_q,) those do not serve; None where the route has no such moves (the route's
        for every query, or held per chunk of queries:
        :meth:`~sklearn_nw._keys.FittedKeys.leave_one_out_block_moves`)."""
        settings = (conformity_score, positive, training_scores, alphas, tolerance)
        if self.key_set_.leave_one_out_blocks:
            proba = np.empty((X.shape[0], len(self.classes_)))
            rest = np.zeros(X.shape[0], dtype=bool)

            def sets(rows):  # (rows a slice: each chunk writes its own probabilities)
                moves = self.key_set_.leave_one_out_block_moves(X[rows])
                proba[rows], rest[rows] = moves.fits, moves.rest
                share = query_share if np.isscalar(query_share) else query_share[rows]
                return self._sets_from_moves(moves, share, *settings)

            row_bytes = 8 * (10 + 2 * len(self.classes_)) * self.X_fit_.shape[0]
            out = self._in_query_chunks(X.shape[0], sets, row_bytes=row_bytes)
        else:
            moves = self.key_set_.leave_one_out_moves(
                X, device=self._compute_device(),
                working_memory=get_config()["working_memory"])
            if moves is None or moves.rest.all():
                return None
            proba, rest = moves.fits, moves.rest
            out = self._sets_from_moves(moves, query_share, *settings)
        self._check_pooled(X.shape[0], proba[~rest], 0, 0)
        return self.classes_[np.argmax(proba, axis=1)], out, rest

    def _sets_from_moves(self, moves, query_share, conformity_score, positive,
                         training_scores, alphas, tolerance):
        """The conformal sets (n_q, c, n_levels) at the queries ``moves`` (a
        :class:`~sklearn_nw._routes.LeaveOneOutMoves`) serves, from the moves on the
        training rows that can change a count; undefined at the others (``rest``).

        A probability moves by at most ``D_j`` (the route's bound), a score by at most
        :func:`~sklearn_nw._uncertainty.conformity_score_bound`."""
        ranking, fast = np.flatnonzero(positive), np.flatnonzero(~moves.rest)
        sets = np.zeros((len(moves.rest), len(self.classes_), len(alphas)), dtype=bool)
        if not len(fast):
            return sets
        p, D = moves.fits[fast], moves.bound[fast]  # (q, c)
        share = (query_share if np.isscalar(query_share)
                 else query_share[fast])  # a number, or (q, 1)
        scores = conformity_scores(p, conformity_score, own_mass=share if np.isscalar(
            share) else share[:, 0], tie=tolerance)  # (q, c)
        bound = conformity_score_bound(p, D, conformity_score, own_mass=share,
                                       tie=tolerance)

        def moves_on(rows, columns, k):
            moved = p[rows, None, :] + moves.moves(fast[rows], ranking[columns])  # (b, m, c)
            own = share if np.isscalar(share) else share[rows]
            return (conformity_scores(moved, conformity_score, own_mass=own, classes=[k],
                                      tie=tolerance)[:, :, 0] - scores[rows, None, k])

        sets[fast] = conformal_sets_windows(scores, bound, training_scores, alphas,
                                            tolerance, moves_on,
                                            device=self._compute_device())
        return sets

    def _conformal_sets_by_attention(self, X, conformity_score, query_share, positive,
                                     one_hot, training_scores, alphas, tolerance):
        """The predictions at X and their conformal sets from the queries' attention
        rows: every fit without a row (sparse rows: the fits without the keys in
        reach; adaptive bandwidths: refits without the row, chunks of queries on the
        workers)."""
        if self.bandwidth_kind_ != "fixed":  # the fits without each row from the route
            proba = self._pool(X)[0]

            def sets(rows):
                share = query_share if np.isscalar(query_share) else query_share[rows]
                fits = self._leave_one_out_fits(X[rows], None, one_hot)[:, positive]
                scores = conformity_scores(fits, conformity_score, own_mass=share,
                                           tie=tolerance)
                return conformal_sets(scores, training_scores, alphas, tolerance)

            row_bytes = 8 * (4 + 3 * len(self.classes_)) * self.X_fit_.shape[0]
            return (self.classes_[np.argmax(proba, axis=1)],
                    self._in_query_chunks(X.shape[0], sets, row_bytes=row_bytes))
        parts = []
        ranked = RankedScores(training_scores)  # (the sparse rows' chunks share it)

        def each(rows, attention):
            share = query_share if np.isscalar(query_share) else query_share[rows]
            if sp.issparse(attention) and self.bandwidth_kind_ == "fixed":
                # A few keys per query: every other row's fit without it is the query's.
                queries, attention = X[rows], sp.csr_array(attention)

                def sets(chunk):
                    fits, keys, own_fit = self._sparse_leave_one_out_fits(
                        queries[chunk], attention[chunk], one_hot, positive)
                    mass = share if np.isscalar(share) else share[chunk]
                    own_mass = mass if np.isscalar(mass) else mass[:, 0]
                    return conformal_sets_sparse(
                        conformity_scores(own_fit, conformity_score, own_mass=own_mass,
                                          tie=tolerance),
                        conformity_scores(fits, conformity_score, own_mass=mass,
                                          tie=tolerance), keys, ranked, alphas, tolerance)

                parts.append(self._sparse_rows_in_chunks(attention, sets))
                return
            fits = self._leave_one_out_fits(X[rows], attention, one_hot)[:, positive]
            scores = conformity_scores(fits, conformity_score, own_mass=share, tie=tolerance)
            parts.append(conformal_sets(scores, training_scores, alphas, tolerance))

        with self.key_set_.leave_one_out_session():  # (the chunks share it)
            proba = self._pool_in_chunks(X, each, 4 + 3 * len(self.classes_))
        y_pred = self.classes_[np.argmax(proba, axis=1)]
        return y_pred, np.concatenate(parts)
