"""The shared base of the Nadaraya-Watson estimators: parameters, the one validation path
and the route, resolved once at fit.

``fit`` validates, resolves the kernel and the bandwidth, then builds the fitted keys
(:class:`~sklearn_nw._keys.FittedKeys`) and the route object that ``predict`` will take
(:func:`~sklearn_nw._keys.build_route`). Estimators hand numpy arrays to the keys and take
numpy arrays back; they never touch a tensor.

Every bandwidth is chosen by a strategy (:mod:`sklearn_nw._selection`): the ``bandwidth``
parameter's, or a search handed to :meth:`_fit` (the CV estimators' grid); its
``select(training)`` is given the training data as one
:class:`~sklearn_nw._selection.Training` and returns a
:class:`~sklearn_nw._selection.Choice`.
"""

import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from sklearn import get_config
from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils import gen_batches
from sklearn.utils._array_api import get_namespace
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from ._adaptive import Adaptive
from ._categorical import find_categorical
from ._keys import FittedKeys
from ._losses import LOG_LOSS, SQUARED_ERROR
from ._preconditions import resolve_device
from ._selection import Training
from ._uncertainty import (
    leave_one_out_fits,
    leave_one_out_own_fits,
    sparse_leave_one_out_fits,
)
from ._validation import NumberInterval, check_combinations, check_groups
from ._workers import PASS_BYTES, chunk_rows, n_workers, on_workers
from .bandwidth import RULES_OF_THUMB, AdaptiveBandwidth, LeaveOneOutBandwidth, as_strategy
from .kernels import CATEGORICAL_KERNELS, KERNELS, Kernel, get_kernel


def _check_distances(X, *, square):
    """A precomputed distance matrix: non-negative, square when it is the training one."""
    values = X.data if sp.issparse(X) else X
    if np.any(values < 0):
        raise ValueError("Negative values in data: metric='precomputed' needs distances, "
                         "which are non-negative.")
    if square and X.shape[0] != X.shape[1]:
        raise ValueError(
            "metric='precomputed' fits on the square matrix of distances between the training "
            f"samples; got X of shape {X.shape}."
        )


class EmptyNeighborhoodWarning(UserWarning):
    """Some queries had no training point inside the kernel's support.

    Those queries received the value of their nearest training point(s), the limit of the
    Nadaraya-Watson estimate as the kernel mass vanishes.

    Like scikit-learn's own warnings, it is issued on every call that has such queries,
    not once per estimator or per session. A ``"once"`` or ``"default"`` filter does not
    thin it out: scikit-learn's input validation enters :func:`warnings.catch_warnings` on
    every call, which resets Python's record of the warnings already shown. To silence
    it, for the session or for a block of code::

        import warnings
        from sklearn_nw import EmptyNeighborhoodWarning

        warnings.filterwarnings("ignore", category=EmptyNeighborhoodWarning)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            model.predict(X)

    Read more in the :ref:`User Guide <ug_empty_neighborhoods>`.
    """


class LocalFitWarning(UserWarning):
    """Some queries' local polynomial fits were singular (``degree`` 1 or 2).

    The value of their local least-squares fit at the query was not identified at the
    float type's precision: fewer training points with weight than the polynomial has
    terms (a compact kernel, a small bandwidth, few neighbors), points on a line or a
    plane the query is off, or a query too far from its keys for the float type. (A
    constant coordinate, or points on a line through the query, still identify it.)
    Those queries received their Nadaraya-Watson value (the
    local-constant fit), whose attention is also what ``return_attention`` gives them.
    Filter it like :class:`EmptyNeighborhoodWarning`.

    Read more in the :ref:`User Guide <ug_local_polynomials>`.
    """


def check_pooled(n_queries, out, n_fallback, n_singular=0, *, kernel, bandwidth, dtype,
                 degree=0):
    """An error for non-finite outputs ``out``, a warning for queries that fell back to
    their nearest training point(s), and one for singular local fits (of ``degree``)."""
    if n_singular:
        warnings.warn(
            f"{n_singular} of {n_queries} queries have a singular local design for "
            f"degree={degree}: no unique local fit at this precision (fewer weighted "
            "points than the polynomial has terms, points on a line or plane the query "
            "is off, or a query too far from them for the float type); they get their "
            "Nadaraya-Watson (local-constant) value. Increase the bandwidth or lower "
            "the degree to avoid this.",
            LocalFitWarning,
        )
    if not np.all(np.isfinite(out)):
        raise ValueError(
            "Nadaraya-Watson produced non-finite values: the kernel "
            f"{kernel!r} returned negative, NaN or infinite weights, or the bandwidth "
            f"{bandwidth.tolist()} overflows the {dtype} range of the scaled "
            "inputs."
        )
    if n_fallback:
        why = (f"have no training point inside the support of the {kernel!r} kernel"
               if kernel.is_compact else
               f"are so far from every training point, in units of the bandwidth, that "
               f"the weights of the {kernel!r} kernel underflow to 0")
        warnings.warn(
            f"{n_fallback} of {n_queries} queries {why}; they get the value of "
            "their nearest training point(s), the limit as the bandwidth shrinks. "
            "Increase the bandwidth to avoid this.",
            EmptyNeighborhoodWarning,
        )


class NadarayaWatsonBase(BaseEstimator):
    """Parameters, fitting and attention pooling shared by the regressor and the classifier."""

    _parameter_constraints: ClassVar[dict] = {
        "kernel": [StrOptions(set(KERNELS)), Kernel, callable],
        "bandwidth": [
            NumberInterval(Real, 0, None, closed="neither"),
            StrOptions(set(RULES_OF_THUMB) | {"loo"}),
            LeaveOneOutBandwidth,
            AdaptiveBandwidth,
            "array-like",
        ],
        "n_neighbors": [NumberInterval(Integral, 1, None, closed="left"), None],
        "algorithm": [StrOptions({"auto", "brute", "kd_tree", "ball_tree", "cell_list"})],
        "compute": [StrOptions({"auto", "eager", "compiled"})],
        "metric": [StrOptions({"euclidean", "precomputed"})],
        "device": [str],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
        "categorical_kernel": [StrOptions(set(CATEGORICAL_KERNELS))],
        "store_loo": ["boolean"],
    }

    def __init__(self, kernel="gaussian", bandwidth="scott", *, n_neighbors=None,
                 algorithm="auto", compute="auto", metric="euclidean", device="cpu",
                 categorical_features="from_dtype", categorical_kernel="li_racine",
                 store_loo=False):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.metric = metric
        self.device = device
        self.categorical_features = categorical_features
        self.categorical_kernel = categorical_kernel
        self.store_loo = store_loo

    # -- fitting ---------------------------------------------------------------------------

    def _fit(self, X, y, sample_weight, *, classifier=False, search=None, degree=0,
             groups=None):
        """The one validation and fitting path of every Nadaraya-Watson estimator.

        Validates X, y and sample_weight, resolves kernel and device, stores copies of the
        training data (``X_fit_`` in float64 or float32 as X came), lets the subclass encode
        its targets (:meth:`_fit_targets`), then resolves the bandwidth by the strategy of the
        ``bandwidth`` parameter or, when given, by ``search`` (the CV estimators' grid
        search; :meth:`_fit_bandwidth`). ``degree`` is the local polynomials' (the
        regressor's parameter; 0 is Nadaraya-Watson). ``groups`` (n,), given to ``fit``,
        are the units a leave-one-out selection leaves out (leave-one-group-out); a
        strategy that leaves nothing out (a given bandwidth, a rule of thumb) ignores them.
        """
        self._check_parameter_combinations(degree)
        raw_X = X
        X = self._fit_categorical(X)
        if (self._categorical is not None and not self._categorical.n_continuous
                and degree not in (0, "auto")):
            raise ValueError(
                f"degree={degree} fits local polynomials in the continuous features "
                "(np's rule), and every feature is categorical here: there is no "
                "polynomial to fit. Use degree=0 (Nadaraya-Watson), or add a continuous "
                "feature.")
        xp, _ = get_namespace(X)
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse="csr" if self._precomputed() else False,
            dtype=[xp.float64, xp.float32],
            multi_output=not classifier,
            y_numeric=not classifier,
        )
        if self._precomputed():
            _check_distances(X, square=True)
        if classifier:
            check_classification_targets(y)
        sample_weight = _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True, copy=True
        )
        groups = check_groups(groups, X)
        self.kernel_ = get_kernel(self.kernel, dtype=X.dtype)
        if self._categorical is not None:
            self._categorical.use_kernel(self.kernel_)
        self.device_ = str(resolve_device(self.device))
        self.X_fit_ = X.copy() if sp.issparse(X) else np.array(X, copy=True)
        self.sample_weight_ = sample_weight
        values = self._fit_targets(y)
        degree = self._fit_bandwidth(values, classifier=classifier, search=search,
                                     degree=degree, raw_X=raw_X, groups=groups)
        self._fit_keys(values, degree)
        self._store_leave_one_out()
        return self

    # What store_loo keeps: the leave-one-out predictions (public) and, for the
    # regressor, the in-sample fits and self-weights.
    _stored_leave_one_out = ()

    def _store_leave_one_out(self):
        """With ``store_loo``, compute what the uncertainty methods take from the
        training points and keep it (:meth:`_leave_one_out_state`); else forget a
        previous fit's."""
        for name in self._stored_leave_one_out:
            self.__dict__.pop(name, None)
        if self.store_loo:
            for name, value in self._leave_one_out_state().items():
                setattr(self, name, value)

    def _leave_one_out_state(self):
        """The fitted attributes ``store_loo`` keeps, by name."""
        raise NotImplementedError

    def _has_leave_one_out_fits(self):
        """Whether each training row's fit without it is computed from the fit with it
        (:meth:`_check_leave_one_out_fits` would pass)."""
        return (not (self.bandwidth_kind_ == "sample_point" and self.key_set_.degree)
                and (self.n_neighbors is None or self.key_set_.leave_one_out_nearest)
                and np.count_nonzero(self.sample_weight_) >= 2)

    def _fit_categorical(self, X):
        """Find the categorical features (``categorical_features``), learn their
        categories and return ``X`` with them encoded as codes (``is_categorical_``: None
        when there are none, as HistGradientBoosting's)."""
        self._categorical = self.is_categorical_ = None
        if self._precomputed():
            return X
        self._categorical = find_categorical(X, self.categorical_features,
                                             self.categorical_kernel)
        if self._categorical is None:
            return X
        self.is_categorical_ = self._categorical.categorical
        return self._categorical.fit_encode(X)

    def _training(self, values, *, classifier, degree=0, raw_X=None, groups=None):
        """The training data for a bandwidth strategy, with this estimator's functions."""
        return Training(
            X=self.X_fit_, y=self._targets(), classes=self.classes_ if classifier else None,
            sample_weight=self.sample_weight_, values=values, kernel=self.kernel_,
            loss=LOG_LOSS if classifier else SQUARED_ERROR, device=self.device_,
            working_memory=get_config()["working_memory"],
            estimator_name=type(self).__name__, outputs=self._outputs,
            loss_over_rows=self._loss_over_rows, degree=degree,
            # The regressor's: local fits bounded by the targets' range.
            bounded=bool(getattr(self, "bounded", False)), precomputed=self._precomputed(),
            categorical=self._categorical, raw_X=raw_X, groups=groups,
        )

    def _precomputed(self):
        """Whether X holds distances (``metric="precomputed"``). The CV estimators have
        no ``metric``: their bandwidth grids live in feature space."""
        return getattr(self, "metric", "euclidean") == "precomputed"

    def _check_parameter_combinations(self, degree=0):
        """Refuse parameters that cannot go together (the table of
        :mod:`sklearn_nw._validation`) before any long work (a bandwidth search, an
        index); ``degree`` is the one the fit is asked for."""
        check_combinations(self, "local", degree=degree)

    def _fit_keys(self, values, degree=0):
        """Build the fitted keys (``key_set_``): the training points, their weights,
        ``values`` and the route that ``predict`` takes (``route_``), resolved once with
        its search index (a cell list, a tree, a k-nearest search)."""
        adaptive = (None if self.bandwidth_kind_ == "fixed" else Adaptive(
            self.bandwidth_kind_, self.bandwidth_neighbors_, self.bandwidth_scale_))
        X, metric = self.X_fit_, getattr(self, "projection_", self.bandwidth_)
        if self._categorical is not None:
            X, metric = self._categorical.embed(X), self._categorical.expand(self._scales)
        self.key_set_ = FittedKeys(
            X, self.sample_weight_, values, metric, self.kernel_,
            algorithm=self.algorithm, n_neighbors=self.n_neighbors, compute=self.compute,
            precomputed=self._precomputed(), adaptive=adaptive, degree=degree,
            # The regressor's: local fits bounded by the targets' range.
            bounded=bool(getattr(self, "bounded", False)),
            # Class probabilities must be exactly 0 where no attention goes.
            exact_zeros=is_classifier(self),
            polynomial_columns=(None if self._categorical is None
                                else self._categorical.n_continuous),
        )
        route = self.key_set_.route
        self.route_ = route.name
        if route.key_bandwidth is not None:
            self.key_bandwidths_ = route.key_bandwidth / self.key_set_.search_scale

    def _fit_bandwidth(self, values, *, classifier, search=None, degree=0, raw_X=None,
                       groups=None):
        """Set ``bandwidth_`` and what the bandwidth's strategy reports (``n_iter_`` and
        ``loss_curve_`` of a learned one, ``projection_`` of a full metric, a search's
        results): the strategy is ``search`` when given (the CV estimators'), else the
        ``bandwidth`` parameter's (:func:`~sklearn_nw.bandwidth.as_strategy`); its
        ``select(training)`` chooses (:mod:`sklearn_nw._selection`). Returns the degree
        of the fit: ``degree``, or the search's choice."""
        for stale in ("projection_", "n_iter_", "loss_curve_", "key_bandwidths_"):
            self.__dict__.pop(stale, None)
        strategy = (search if search is not None
                    else as_strategy(self.bandwidth, precomputed=self._precomputed()))
        choice = strategy.select(self._training(values, classifier=classifier,
                                                degree=degree, raw_X=raw_X, groups=groups))
        self.bandwidth_ = choice.bandwidth
        if self._categorical is not None:  # the searches' scales; lambda in bandwidth_
            self._scales = choice.bandwidth
            self.bandwidth_ = (self._categorical.public(choice.bandwidth)
                               if choice.shown is None else choice.shown)
        if choice.projection is not None:
            self.projection_ = choice.projection
        self._set_adaptive(choice.adaptive)
        for name, value in (choice.report or {}).items():
            setattr(self, name, value)
        return choice.degree

    def _set_adaptive(self, adaptive):
        """Record the adaptive bandwidth (an :class:`~sklearn_nw._adaptive.Adaptive` or
        None) in the fitted attributes."""
        self.bandwidth_kind_ = "fixed" if adaptive is None else adaptive.kind
        self.bandwidth_neighbors_ = None if adaptive is None else adaptive.n_neighbors
        self.bandwidth_scale_ = None if adaptive is None else adaptive.scale

    def _fit_targets(self, y):
        """Store the encoded targets; return :meth:`_values`."""
        raise NotImplementedError

    def _targets(self):
        """The training targets as the user gave them (class labels for the classifier)."""
        raise NotImplementedError

    def _values(self):
        """The values (n_samples_fit, t) that attention pools: scaled targets or one-hot
        labels."""
        raise NotImplementedError

    def _outputs(self, pooled):
        """The estimator's outputs as the user sees them (``predict`` of the regressor,
        ``predict_proba`` of the classifier) of pooled values (n_rows, t)."""
        raise NotImplementedError

    def _loss_over_rows(self, loss, loo):
        """A leave-one-out loss of ``loo``'s values, as the loss of the training rows in
        the targets' unit."""
        raise NotImplementedError

    # -- attention pooling -----------------------------------------------------------------

    def _validate_predict_data(self, X):
        X = self._validate_predict_codes(X)
        return X if self._categorical is None else self._categorical.embed(X)

    def _validate_predict_codes(self, X):
        """Queries validated as :meth:`_validate_predict_data` does, their categorical
        features as category codes (not yet embedded)."""
        xp, _ = get_namespace(X)
        precomputed = self._precomputed()
        if self._categorical is not None:
            X = self._categorical.encode(X)
        # C order: the engine views the queries as tensors, which take no negative strides
        # (X[::-1]); a C-contiguous array is passed through uncopied.
        X = validate_data(self, X, reset=False, dtype=[xp.float64, xp.float32],
                          accept_sparse="csr" if precomputed else False, order="C")
        if precomputed:
            _check_distances(X, square=False)
        # Compute in the fitted dtype: a float32 query against a float64 fit is upcast.
        return X.astype(self.X_fit_.dtype, copy=False)

    def _compute_device(self):
        try:
            return resolve_device(self.device_)
        except ValueError:
            warnings.warn(
                f"This estimator was fitted on device {self.device_!r}, which is not available "
                "here; computing on the CPU.",
                UserWarning,
            )
            return "cpu"

    def _pool(self, X, *, return_attention=False):
        """Attention-weighted average of the fitted values at queries X, on the fitted
        route.

        Returns the pooled values as an ndarray (n_queries, t) and the attention (None, an
        ndarray, or a scipy.sparse CSR array for compact kernels and restricted routes,
        its indices sorted: :func:`user_attention`).
        """
        if return_attention and not self.key_set_.route.attention_is_sparse:
            self._check_dense_attention(X.shape[0], "predict(X, return_attention=True)")
        result = self.key_set_.pool(
            X, return_attention=return_attention, compute=self.compute,
            device=self._compute_device(), working_memory=get_config()["working_memory"],
        )
        self._check_pooled(X.shape[0], result.out, result.n_fallback, result.n_singular)
        return result.out, user_attention(result.attention)

    def _pool_in_chunks(self, X, each, temporaries=4, *, training=False):
        """:meth:`_pool` of queries X in chunks, each with its attention: ``each(rows,
        attention)`` is called on every chunk (``rows`` a slice of X); returns the pooled
        values (n_queries, t), checked once for all of them (for the ``training`` points
        themselves, only for non-finite values: a row of zero weight out of every
        other's reach is no query of the user's). A chunk's dense attention and
        ``temporaries`` float64 blocks of its size fit in ``working_memory`` and, dense,
        in ``PASS_BYTES``. Sparse rows are sized as dense ones in the first chunk, then
        by four times the most keys a row has held so far."""
        working_memory = get_config()["working_memory"]
        n_q = X.shape[0]
        dense = not self.key_set_.route.attention_is_sparse
        n_keys = max(1, self.X_fit_.shape[0])
        row_keys = n_keys  # a chunk's rows: every key each, or the most held so far
        outs, n_fallback, n_singular = [], 0, 0
        start = 0
        while start < n_q:
            rows = slice(start, start + chunk_rows(n_q - start, 8 * temporaries * row_keys,
                                                   working_memory,
                                                   cap_bytes=PASS_BYTES if dense else None))
            result = self.key_set_.pool(
                X[rows], return_attention=True, compute=self.compute,
                device=self._compute_device(), working_memory=working_memory)
            outs.append(result.out)
            n_fallback += result.n_fallback
            n_singular += result.n_singular
            if not dense:
                held = int(np.diff(result.attention.indptr).max(initial=1))
                row_keys = min(n_keys, max(row_keys if start else 1, 4 * held))
            each(rows, result.attention)
            start = rows.stop
        out = np.concatenate(outs)
        if training:
            n_fallback = n_singular = 0
        self._check_pooled(n_q, out, n_fallback, n_singular)
        return out

    # -- leave-one-out fits at a fixed bandwidth (jackknife+, conformal sets) --------------

    def _check_leave_one_out_fits(self, what, refits):
        """Refuse fits whose leave-one-out refits are not computed from the fit with the
        row; ``what`` begins the message, ``refits`` names what refits the estimator
        instead."""
        why = instead = None
        if self.bandwidth_kind_ == "sample_point" and self.key_set_.degree:
            why = (f"local polynomials (degree={self.key_set_.degree}) under a sample-point "
                   "bandwidth (a row's removal moves other keys' bandwidths, a design of "
                   "its own for every row)")
            instead = "degree=0, a balloon or a fixed bandwidth"
        elif self.n_neighbors is not None and not self.key_set_.leave_one_out_nearest:
            why = (f"n_neighbors={self.n_neighbors} and "
                   + (f"degree={self.key_set_.degree} (the k nearest change when a row "
                      "leaves, and with them every local design)" if self.key_set_.degree
                      else "precomputed distances"))
            instead = "n_neighbors=None" + (", or degree=0" if self.key_set_.degree else "")
        if why is not None:
            raise NotImplementedError(
                f"{what} from the fit with every row; not with {why}. Use {instead}, or "
                f"{refits}.")
        n_positive = int(np.count_nonzero(self.sample_weight_))
        if n_positive < 2:
            raise ValueError(f"{what} from leave-one-out fits; it needs at least 2 "
                             f"training points of positive weight, got {n_positive}.")

    def _leave_one_out_fits(self, queries, attention, values):
        """The outputs without each training row at queries with ``attention`` (b, n):
        (b, n) for ``values`` (n,), (b, n, t) for (n, t), in the units of ``values`` (the
        outputs' own, as :meth:`_outputs` gives them). Those whose weight was all on the
        row left out are refitted without it (the nearest other keys' fallback, which
        their attention does not hold)."""
        keys = self.key_set_
        if keys.degree:  # local polynomials: from their designs, not the attention
            fits, missing = keys.leave_one_out_local_fits(
                queries, device=self._compute_device(),
                working_memory=get_config()["working_memory"])
            b, n, t = fits.shape
            fits = self._outputs(fits.reshape(b * n, t)).reshape((b, n) + np.shape(values)[1:])
            fits[missing] = np.nan
        elif self.bandwidth_kind_ != "fixed":  # the neighbor distances move as well
            fits, missing = keys.leave_one_out_adaptive_fits(
                queries, np.reshape(values, (len(values), -1)),
                device=self._compute_device(), working_memory=get_config()["working_memory"])
            fits = fits.reshape((len(queries), len(values)) + np.shape(values)[1:])
        else:
            fits, missing = leave_one_out_fits(attention, values)
        for j in np.unique(np.nonzero(missing)[1]):
            at = np.flatnonzero(missing[:, j])
            fits[at, j] = self._refit_without(queries[at], j)
        return fits

    def _sparse_leave_one_out_fits(self, queries, attention, values, positive):
        """The fits without each key in reach of queries with sparse attention rows
        (:func:`~sklearn_nw._uncertainty.sparse_leave_one_out_fits`; on the k nearest
        keys, the next ones taken in:
        :meth:`~sklearn_nw._keys.FittedKeys.leave_one_out_nearest_fits`; those with no
        weight left refitted), the keys as indices into the rows of ``positive`` weight
        (-1 past a query's own count), and each query's own fit."""
        if self.key_set_.leave_one_out_nearest:  # the next of the k nearest move in
            _, fits, keys, missing = self.key_set_.leave_one_out_nearest_fits(
                queries, values, device=self._compute_device(),
                working_memory=get_config()["working_memory"])
            fits = fits.reshape(keys.shape + np.shape(values)[1:])
            own = sp.csr_array(attention, dtype=np.float64) @ np.asarray(values, np.float64)
        else:
            fits, keys, missing, own = sparse_leave_one_out_fits(attention, values)
        return (*self._resolve_sparse_fits(queries, fits, keys, missing, positive), own)

    def _resolve_sparse_fits(self, queries, fits, keys, missing, positive):
        """The fits without each key in reach (b, e) or (b, e, t), those ``missing``
        refitted, and the keys as indices into the rows of ``positive`` weight (-1 past
        a query's own count, and for a key of no weight)."""
        for j in np.unique(keys[missing]):
            at, slot = np.nonzero(missing & (keys == j))
            fits[at, slot] = self._refit_without(queries[at], j)
        # The rows of positive weight numbered, -1 for the others and for key -1 (the
        # last): a key of no weight carries no attention, never known.
        index = np.append(np.where(positive, np.cumsum(positive) - 1, -1), -1)
        return fits, index[keys]

    def _in_query_chunks(self, n_queries, compute, row_bytes=0):
        """``compute(rows)`` of chunks of ``n_queries`` queries (``rows`` a slice), on the
        workers (two chunks per worker at least), concatenated, within the route's
        leave-one-out session (the chunks share what it finds from the keys alone): the
        per-query work of the fits without each row. With ``row_bytes`` (what a query's
        row of them takes) the chunks the workers hold at once fit in ``working_memory``,
        each in ``PASS_BYTES``."""
        device = self._compute_device()
        step = chunk_rows(n_queries, row_bytes,
                          get_config()["working_memory"] if row_bytes else None,
                          cap_bytes=PASS_BYTES if row_bytes else None,
                          workers=n_workers(device))
        with self.key_set_.leave_one_out_session():
            return np.concatenate(on_workers(gen_batches(n_queries, step),
                                             lambda rows, _: compute(rows), device))

    def _sparse_rows_in_chunks(self, attention, compute):
        """``compute(rows)`` of chunks of the rows of CSR ``attention`` (``rows`` an
        index array), as :meth:`_in_query_chunks`, the rows taken by their count of keys
        (each chunk padded to its own largest: :func:`~sklearn_nw._uncertainty.padded_rows`);
        the results in the rows' order."""
        order = np.argsort(np.diff(attention.indptr), kind="stable")
        by_count = self._in_query_chunks(len(order), lambda rows: compute(order[rows]))
        out = np.empty_like(by_count)
        out[order] = by_count
        return out

    def _refit_without(self, queries, j):
        """The outputs at ``queries`` of the fit without training row ``j``, refitted (a
        query whose weight was all on it falls back to the nearest other keys)."""
        keys = self.key_set_
        keep = np.ones(keys.X.shape[0], dtype=bool)
        keep[j] = False
        others = keys.subset(keep)
        q = queries[:, keep] if keys.precomputed else queries
        pooled = others.pool(q, compute=self.compute, device=self._compute_device(),
                             working_memory=get_config()["working_memory"])
        return self._outputs(pooled.out)

    def _fits_without_each_row(self, values, sums=None):
        """Each training row's output without it at its own input, (n,) or (n, t) as
        ``values``: ``(f_i - L_ii v_i) / (1 - L_ii)`` from the in-sample fits and each
        row's weight in its own (Nadaraya-Watson and unbounded local polynomials alike: a
        least-squares fit at a point without one of its rows), where the route has them
        from sums (:meth:`_in_sample_sums`, or ``sums`` given) and ``L_ii <= 1/2``; else
        from the attention (:meth:`_leave_one_out_at_training_points`)."""
        if (self.bandwidth_kind_ != "fixed" or getattr(self, "bounded", False)
                or self.key_set_.leave_one_out_nearest):
            return self._leave_one_out_at_training_points(values)
        sums = self._in_sample_sums() if sums is None else sums
        if sums is None:
            return self._leave_one_out_at_training_points(values)
        fitted, leverage = sums
        share = np.minimum(leverage, 0.5).reshape((-1,) + (1,) * (np.ndim(values) - 1))
        fits = (fitted - share * values) / (1 - share)
        rest = np.flatnonzero(~(leverage <= 0.5))
        if len(rest):
            fits[rest] = self._leave_one_out_at_training_points(values, rest)
        return fits

    def _in_sample_sums(self):
        """The training rows' in-sample outputs (n,) or (n, t) and each row's weight in
        its own fit (n,), where the route has them from sums or moments (no attention
        matrix: :meth:`~sklearn_nw._keys.FittedKeys.in_sample_with_leverage`); else None."""
        sums = self.key_set_.in_sample_with_leverage(
            device=self._compute_device(), working_memory=get_config()["working_memory"])
        return None if sums is None else (self._outputs(sums[0]), sums[1])

    def _leave_one_out_at_training_points(self, values, training_rows=None):
        """Each training row's output without it, :meth:`_leave_one_out_fits` at its own
        input: (n,) or (n, t) as ``values``; only the rows ``training_rows`` (m,), if
        given: (m,) or (m, t)."""
        keys = self.key_set_
        if training_rows is None:
            training_rows = np.arange(keys.X.shape[0])
        out = np.empty((len(training_rows),) + values.shape[1:])
        if self.bandwidth_kind_ != "fixed" and keys.degree:  # every fit, in chunks
            t = int(np.prod(values.shape[1:], dtype=int))
            step = chunk_rows(len(training_rows), 8 * keys.X.shape[0] * (8 + 4 * t),
                              get_config()["working_memory"])
            for rows in gen_batches(len(training_rows), step):
                own = training_rows[rows]
                out[rows] = self._leave_one_out_fits(keys.X[own], None, values)[
                    np.arange(len(own)), own]
            return out
        if keys.leave_one_out_in_reach or keys.leave_one_out_nearest:
            # Local fits on a compact kernel's keys in reach; the k nearest of the others.
            return self._own_fits_in_reach(values, training_rows).reshape(out.shape)
        if self.bandwidth_kind_ != "fixed":  # the neighbor distances move as well
            fits, missing = keys.leave_one_out_adaptive_own_fits(
                values.reshape(len(values), -1), device=self._compute_device(),
                working_memory=get_config()["working_memory"])
            for i in np.flatnonzero(missing):  # all the weight on the row: refitted
                fits[i] = np.reshape(self._refit_without(keys.X[i : i + 1], i), -1)
            return fits[training_rows].reshape(out.shape)

        def each(rows, attention):
            own = training_rows[rows]
            if keys.degree:
                fits = self._leave_one_out_fits(keys.X[own], attention, values)
                out[rows] = fits[np.arange(len(own)), own]
                return
            out[rows], missing = leave_one_out_own_fits(attention, values, own)
            if missing.any():  # all the weight on the row itself: refitted without it
                at = np.flatnonzero(missing)
                fits = self._leave_one_out_fits(keys.X[own[at]], attention[at], values)
                out[rows.start + at] = fits[np.arange(len(at)), own[at]]

        self._pool_in_chunks(keys.X[training_rows], each,
                             4 + 3 * np.shape(values.reshape(len(values), -1))[1],
                             training=True)
        return out

    def _own_fits_in_reach(self, values, training_rows):
        """:meth:`_leave_one_out_at_training_points` of local polynomials on a compact
        kernel's keys in reach (m, t): each row's fit without itself from its own design
        (:meth:`~sklearn_nw._keys.FittedKeys.leave_one_out_sparse_local_fits`), or on
        the k nearest keys from the nearest others
        (:meth:`~sklearn_nw._keys.FittedKeys.leave_one_out_nearest_fits`); a row outside
        its own reach or k units (no weight) keeps its fit, one whose design is singular
        with or without itself, or with no kernel weight left, is refitted."""
        keys = self.key_set_
        v = values.reshape(len(values), -1)  # (n, t)
        settings = {"device": self._compute_device(),
                    "working_memory": get_config()["working_memory"]}

        def own_fits(rows):
            own = training_rows[rows]
            if keys.leave_one_out_nearest:  # a row at its own input is one of its keys
                fitted, fits, held, missing = keys.leave_one_out_nearest_fits(
                    keys.X[own], v, rows=own, **settings)
                singular = np.zeros(len(own), dtype=bool)
            else:
                fitted, fits, held, missing, singular = keys.leave_one_out_sparse_local_fits(
                    keys.X[own], v, **settings)
            at = np.arange(len(own))
            match = held == own[:, None]  # (b, e): the row itself among its keys
            inside, slot = match.any(1), match.argmax(1)
            out = np.where(inside[:, None], fits[at, slot], fitted)  # (b, t)
            for i in np.flatnonzero((inside & missing[at, slot]) | singular):
                out[i] = np.reshape(self._refit_without(keys.X[own[i] : own[i] + 1], own[i]),
                                    -1)
            return out

        return self._in_query_chunks(len(training_rows), own_fits)

    def _check_dense_attention(self, n_rows, what):
        """Refuse a dense (n_rows, n_samples_fit) attention above ``working_memory``."""
        n = self.X_fit_.shape[0]
        nbytes = n_rows * n * self.X_fit_.dtype.itemsize
        working_memory = get_config()["working_memory"]
        if nbytes > working_memory * 2**20:
            raise ValueError(
                f"{what} would be a dense ({n_rows}, {n}) matrix of "
                f"{nbytes / 2**20:.3g} MiB, more than scikit-learn's working_memory of "
                f"{working_memory} MiB. For the attention of some queries use "
                "predict(X_query, return_attention=True) on fewer of them at a time; raise "
                "the limit with sklearn.config_context(working_memory=...); or use a compact "
                "kernel (e.g. kernel='epanechnikov') or n_neighbors, whose attention is sparse."
            )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # metric="precomputed" takes (n_queries, n_samples_fit) distances, dense or a
        # sparse neighbor graph: non-negative.
        precomputed = self._precomputed()
        tags.input_tags.pairwise = tags.input_tags.sparse = precomputed
        tags.input_tags.positive_only = precomputed
        return tags

    def _check_pooled(self, n_queries, out, n_fallback, n_singular=0):
        check_pooled(n_queries, out, n_fallback, n_singular, kernel=self.kernel_,
                     bandwidth=self.bandwidth_, dtype=self.X_fit_.dtype,
                     degree=self.key_set_.degree)

    @property
    def attention_weights_(self):
        """Leave-one-out attention of the training set on itself.

        ndarray of shape (n_samples_fit, n_samples_fit), or a scipy.sparse CSR array for
        compact kernels and for ``metric="precomputed"`` (the stored entries of the
        training distances). Row i holds the weights of every training point in the
        leave-one-out prediction of point i: point i is left out with all the mass at its
        location (every training row with the same input; for precomputed distances, every
        stored distance of 0), so those entries are zero, and rows sum to 1. This is the
        unit ``leave_out="input"`` leaves out, whichever unit chose the bandwidth: where no
        input repeats, the two are the same. Computed when
        read (it is not stored), in chunks; compact kernels find each point's neighbors
        with a tree and never form a dense block. Refused when the dense matrix, or the
        sparse one's entries, would exceed scikit-learn's ``working_memory``. It attends to
        every training point, also when ``n_neighbors`` restricts the attention of
        ``predict``. With ``degree`` 1 or 2 (the regressor), row i is the equivalent kernel
        of point i's leave-one-out local polynomial fit: rows sum to 1, entries may be
        negative.
        """
        check_is_fitted(self)
        n = self.X_fit_.shape[0]
        if not self.key_set_.route.leave_one_out_is_sparse:
            self._check_dense_attention(n, "attention_weights_")
        attention, n_fallback, n_singular = self.key_set_.leave_one_out_attention(
            device=self._compute_device(), working_memory=get_config()["working_memory"],
            estimator_name=f"{type(self).__name__} with attention_weights_",
        )
        self._check_pooled(n, np.zeros(1), n_fallback, n_singular)
        return attention


def confidence_levels(confidence_level):
    """``confidence_level`` as a 1-D float array of levels in (0, 1)."""
    try:
        levels = np.atleast_1d(np.asarray(confidence_level, dtype=np.float64))
    except (TypeError, ValueError):
        levels = None
    if (levels is None or levels.ndim != 1 or levels.size == 0
            or not np.all((levels > 0) & (levels < 1))):
        raise ValueError("confidence_level must be a number in (0, 1) or a 1-D array-like "
                         f"of them; got {confidence_level!r}.")
    return levels


def user_attention(attention):
    """Attention as users get it: a sparse one in canonical form, each row's indices
    sorted (the routes may leave them in their search's order, which the package's own
    uses of it do not need); a dense one or None as is."""
    if sp.issparse(attention):
        attention.sort_indices()
    return attention
