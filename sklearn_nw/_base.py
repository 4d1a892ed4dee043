"""The shared base of the Nadaraya-Watson estimators: parameters and the one validation path.

Estimators hand numpy arrays to :func:`_engine.attention_pool` and take numpy arrays back;
tensors live only inside a method call.
"""

import time
import warnings
from functools import partial
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
import torch
from sklearn import get_config
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.neighbors import NearestNeighbors
from sklearn.utils._array_api import get_namespace
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from ._cells import CellList
from ._compiled import (
    AUTO_MAX_COORDS,
    CompileError,
    auto_compiled,
    config_key,
    record_eager,
)
from ._engine import attention_pool, fused_pool, resolve_device
from ._leave_one_out import leave_one_out_set
from ._neighbour_pool import NeighbourPoolMixin
from .bandwidth import (
    RULES_OF_THUMB,
    LeaveOneOutBandwidth,
    check_bandwidth,
    search_reference,
)
from .kernels import KERNELS, Kernel, get_kernel

# Radius search for compact kernels from this many training points (algorithm="auto"): a
# cell list up to _CELL_MAX_FEATURES dimensions, a tree up to _TREE_MAX_FEATURES.
_TREE_MIN_SAMPLES = 5000
_CELL_MAX_FEATURES = 3
_TREE_MAX_FEATURES = 15


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
    """


class _NumberInterval(Interval):
    """scikit-learn's :class:`Interval` for numbers proper: a boolean is no count of
    neighbours nor a width, and any real number (a ``Fraction``, which ``np.isnan``
    refuses) is compared by its float value."""

    def is_satisfied_by(self, val):
        if isinstance(val, (bool, np.bool_)):
            return False
        if isinstance(val, Real) and not isinstance(val, (Integral, float, np.floating)):
            try:
                val = float(val)
            except (OverflowError, TypeError, ValueError):
                return False
        return super().is_satisfied_by(val)


class NadarayaWatsonBase(NeighbourPoolMixin, BaseEstimator):
    """Parameters, fitting and attention pooling shared by the regressor and the classifier."""

    _parameter_constraints: ClassVar[dict] = {
        "kernel": [StrOptions(set(KERNELS)), Kernel, callable],
        "bandwidth": [
            _NumberInterval(Real, 0, None, closed="neither"),
            StrOptions(set(RULES_OF_THUMB) | {"loo"}),
            LeaveOneOutBandwidth,
            "array-like",
        ],
        "n_neighbors": [_NumberInterval(Integral, 1, None, closed="left"), None],
        "algorithm": [StrOptions({"auto", "brute", "kd_tree", "ball_tree", "cell_list"})],
        "compute": [StrOptions({"auto", "eager", "compiled"})],
        "metric": [StrOptions({"euclidean", "precomputed"})],
        "device": [str],
    }

    def __init__(self, kernel="gaussian", bandwidth="scott", *, n_neighbors=None,
                 algorithm="auto", compute="auto", metric="euclidean", device="cpu"):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.metric = metric
        self.device = device

    # -- fitting ---------------------------------------------------------------------------

    def _fit(self, X, y, sample_weight, *, classifier=False):
        """The one validation and fitting path of every Nadaraya-Watson estimator.

        Validates X, y and sample_weight, resolves kernel and device, stores copies of the
        training data (``X_fit_`` in float64 or float32 as X came), lets the subclass encode
        its targets (:meth:`_fit_targets`), then resolves the bandwidth.
        """
        self._check_parameter_combinations()
        xp, _ = get_namespace(X)
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse="csr" if self.metric == "precomputed" else False,
            dtype=[xp.float64, xp.float32],
            multi_output=not classifier,
            y_numeric=not classifier,
        )
        if self.metric == "precomputed":
            _check_distances(X, square=True)
        if classifier:
            check_classification_targets(y)
        sample_weight = _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True, copy=True
        )
        self.kernel_ = get_kernel(
            self.kernel, dtype=torch.float32 if X.dtype == np.float32 else torch.float64)
        self.device_ = str(resolve_device(self.device))
        self.X_fit_ = X.copy() if sp.issparse(X) else np.array(X, copy=True)
        self.sample_weight_ = sample_weight
        values = self._fit_targets(y)
        self._fit_bandwidth(values, loss="log_loss" if classifier else "squared_error")
        self._fit_neighbors()
        return self

    def _check_parameter_combinations(self):
        """Refuse parameters that cannot go together before any long work (a bandwidth
        search, an index)."""
        if self.n_neighbors is not None and self.algorithm == "cell_list":
            raise ValueError(
                "algorithm='cell_list' searches the support of a compact kernel; it cannot "
                "find the k nearest points (n_neighbors). Use 'auto', 'kd_tree' or "
                "'ball_tree'."
            )
        if self.compute == "compiled":
            restricted = [what for what, on in (
                (f"n_neighbors={self.n_neighbors!r}", self.n_neighbors is not None),
                (f"algorithm={self.algorithm!r}", self.algorithm not in ("auto", "brute")),
                ("metric='precomputed'", self.metric == "precomputed")) if on]
            if restricted:
                raise ValueError(
                    "compute='compiled' computes the dense sums over every training point; "
                    f"it cannot serve {' and '.join(restricted)}, which restrict attention "
                    "to some of them. Use compute='auto' or 'eager', or algorithm='brute' "
                    "without n_neighbors."
                )

    def _fit_neighbors(self):
        """Index the scaled training points when attention is restricted to neighbours:
        the k nearest (``n_neighbors``, a tree), or those inside a compact kernel's support
        (a cell list or a tree, unless ``algorithm="brute"`` or, for ``"auto"``, small or
        high-dimensional data, where the dense engine is faster)."""
        self.neighbors_ = self.neighbor_rows_ = None
        if self.metric == "precomputed":  # each query row holds its own candidates
            return
        n = self.X_fit_.shape[0]
        d = self.projection_.shape[1] if hasattr(self, "projection_") else self.X_fit_.shape[1]
        algorithm = self.algorithm
        if self.n_neighbors is None:
            if not self.kernel_.is_compact or algorithm == "brute" or self.compute == "compiled":
                return
            if algorithm == "auto":
                if n < _TREE_MIN_SAMPLES or d > _TREE_MAX_FEATURES:
                    return
                algorithm = "cell_list" if d <= _CELL_MAX_FEATURES else "kd_tree"
        # Only points with positive weight can receive attention (zero weight = no row).
        self.neighbor_rows_ = np.flatnonzero(self.sample_weight_ > 0)
        points = self._search_space(self.X_fit_[self.neighbor_rows_])
        if algorithm == "cell_list":
            try:
                self.neighbors_ = CellList(points, self.kernel_.support * self._search_scale())
                return
            except ValueError:
                if self.algorithm == "cell_list":
                    raise
                algorithm = "kd_tree"  # "auto" on data too spread out for a grid
        # The search runs on as many threads as torch's operations (the trees release the
        # GIL), instead of scikit-learn's default of one.
        self.neighbors_ = NearestNeighbors(algorithm=algorithm, n_jobs=torch.get_num_threads())
        self.neighbors_.fit(points)

    def _scaled(self, X):
        """Inputs in the kernel's metric: divided by the bandwidths, or projected."""
        if hasattr(self, "projection_"):
            return np.asarray(X, dtype=np.float64) @ self.projection_
        return np.asarray(X, dtype=np.float64) / self.bandwidth_

    def _search_scale(self):
        """The largest bandwidth (1 for a learned metric): neighbour searches run on
        :meth:`_scaled` inputs times it, whose distances neither overflow nor lose their
        order at bandwidths near the smallest float."""
        return 1.0 if hasattr(self, "projection_") else float(self.bandwidth_.max())

    def _search_space(self, X):
        """Inputs in the neighbour searches' space (see :meth:`_search_scale`)."""
        if hasattr(self, "projection_"):
            return self._scaled(X)
        return np.asarray(X, dtype=np.float64) / (self.bandwidth_ / self._search_scale())

    def _fit_bandwidth(self, values, *, loss):
        """Set ``bandwidth_`` (and, for a learned one, ``n_iter_``, ``loss_curve_`` and for
        the full metric ``projection_``)."""
        for stale in ("projection_", "n_iter_", "loss_curve_"):
            self.__dict__.pop(stale, None)
        X, w, bandwidth = self.X_fit_, self.sample_weight_, self.bandwidth
        if self.metric == "precomputed":
            if isinstance(bandwidth, (str, LeaveOneOutBandwidth)):
                raise ValueError(
                    f"metric='precomputed' needs a numeric bandwidth, in the units of the "
                    f"distances; got bandwidth={bandwidth!r} (rules of thumb and learned "
                    "bandwidths need feature vectors)."
                )
            self.bandwidth_ = check_bandwidth(bandwidth, 1)
            return
        if isinstance(bandwidth, str) and bandwidth in RULES_OF_THUMB:
            self.bandwidth_ = RULES_OF_THUMB[bandwidth](X, w)
            return
        if not isinstance(bandwidth, (LeaveOneOutBandwidth, str)):
            self.bandwidth_ = check_bandwidth(bandwidth, X.shape[1])
            return
        selector = LeaveOneOutBandwidth() if isinstance(bandwidth, str) else clone(bandwidth)
        tensor = self._tensor_maker(resolve_device(self.device_))
        loo = self._leave_one_out_set(values, "bandwidth='loo'")
        result = selector.select(
            tensor(loo.X), tensor(loo.values), tensor(loo.log_weight),
            tensor(loo.self_log_weight), self.kernel_, loss=loss,
            h_start=search_reference(X, w), working_memory=get_config()["working_memory"],
        )
        self.bandwidth_ = result.bandwidth
        if result.projection is not None:
            self.projection_ = result.projection
        self.n_iter_ = result.n_iter
        self.loss_curve_ = self._loss_over_rows(result.loss_curve, loo)

    def _leave_one_out_set(self, values, what):
        """The training set as leave-one-out sees it: its distinct inputs, each left out
        with every copy of itself (:mod:`sklearn_nw._leave_one_out`)."""
        return leave_one_out_set(self.X_fit_, values, self.sample_weight_,
                                 estimator_name=f"{type(self).__name__} with {what}")

    def _fit_targets(self, y):
        """Store the encoded targets; return :meth:`_values`."""
        raise NotImplementedError

    def _values(self):
        """The values (n_samples_fit, t) that attention pools: scaled targets or one-hot
        labels."""
        raise NotImplementedError

    def _loss_over_rows(self, loss, loo):
        """A leave-one-out loss of ``loo``'s values, as the loss of the training rows in
        the targets' unit."""
        raise NotImplementedError

    def _tensor_maker(self, device):
        dtype = torch.float32 if self.X_fit_.dtype == np.float32 else torch.float64
        return lambda a: torch.tensor(np.asarray(a), dtype=dtype, device=device)

    def _log_weights(self):
        with np.errstate(divide="ignore"):
            return np.log(self.sample_weight_)

    # -- attention pooling -----------------------------------------------------------------

    def _validate_predict_data(self, X):
        xp, _ = get_namespace(X)
        precomputed = self.metric == "precomputed"
        X = validate_data(self, X, reset=False, dtype=[xp.float64, xp.float32],
                          accept_sparse="csr" if precomputed else False)
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
            return torch.device("cpu")

    def _pool(self, X, values, *, return_attention=False):
        """Attention-weighted average of ``values`` (n_samples_fit, t) at queries X.

        Returns the pooled values as an ndarray (n_queries, t) and the attention (None, an
        ndarray, or a scipy.sparse CSR array for compact kernels).
        """
        device = self._compute_device()
        log_w = self._log_weights()
        restricted = self.metric == "precomputed" or getattr(self, "neighbors_", None) is not None
        if return_attention and not restricted and not self.kernel_.is_compact:
            self._check_dense_attention(X.shape[0], "predict(X, return_attention=True)")
        # Dense sums over all training points, nothing but the outputs: the compiled loop
        # can compute them, if forced or if "auto" finds compiling worth it.
        dense = not restricted and not return_attention
        key = self._compile_key(device, values) if dense and self.compute == "auto" else None
        pairs = X.shape[0] * self.X_fit_.shape[0]
        if dense and (self.compute == "compiled"
                      or key is not None and auto_compiled(key, X.shape[0], pairs)):
            result = self._fused_pool(X, values, device, log_w)
            if result is not None:
                return self._check_result(X, result)
        start = time.perf_counter()
        result = self._eager_pool(X, values, device, log_w, return_attention)
        if key is not None:  # what "auto" weighs against compiling
            record_eager(key, pairs, time.perf_counter() - start)
        return self._check_result(X, result)

    def _eager_pool(self, X, values, device, log_w, return_attention):
        """The eager engine's :class:`PoolResult`: over stored or searched neighbours, the
        training points in a compact kernel's support, or all of them."""
        tensor = self._tensor_maker(device)
        if self.metric == "precomputed":
            return self._neighbour_pool(X, values, device, log_w, return_attention,
                                        partial(self._stored_candidates, X),
                                        scale=self.bandwidth_[0])
        neighbors = getattr(self, "neighbors_", None)
        if self.kernel_.is_compact and (neighbors is None or isinstance(neighbors, CellList)):
            return self._support_pool(X, values, device, log_w, return_attention)
        if neighbors is not None:
            return self._neighbour_pool(X, values, device, log_w, return_attention,
                                        partial(self._searched_candidates, X),
                                        scale=self._search_scale())
        return attention_pool(
            tensor(X),
            tensor(self.X_fit_),
            tensor(values),
            tensor(getattr(self, "projection_", self.bandwidth_)),
            self.kernel_,
            log_w=tensor(log_w),
            return_attention=return_attention,
            # Class probabilities must be exactly 0 where no attention goes.
            exact_zeros=is_classifier(self),
            working_memory=get_config()["working_memory"],
        )

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

    def _compile_key(self, device, values):
        """The compiled loop's configuration for "auto": compilable kernels, up to
        ``AUTO_MAX_COORDS`` coordinates, not on MPS; else None (always eager)."""
        n_coords = (self.projection_.shape[1] if hasattr(self, "projection_")
                    else self.X_fit_.shape[1])
        if (not self.kernel_.compilable or device.type == "mps"
                or n_coords > AUTO_MAX_COORDS):
            return None
        dtype = torch.float32 if self.X_fit_.dtype == np.float32 else torch.float64
        return config_key(self.kernel_, dtype, device, n_coords, values.shape[1] + 1)

    def _fused_pool(self, X, values, device, log_w):
        """Dense sums on the compiled loop (:mod:`sklearn_nw._compiled`); None where
        compiling failed under "auto" (it warns), which leaves the call to the eager
        engine."""
        tensor = self._tensor_maker(device)
        try:
            return fused_pool(tensor(X), tensor(self.X_fit_), tensor(values),
                              tensor(getattr(self, "projection_", self.bandwidth_)),
                              self.kernel_, log_w=tensor(log_w),
                              working_memory=get_config()["working_memory"])
        except CompileError as exc:
            if self.compute == "compiled":
                raise
            warnings.warn(f"{exc}; computing on the eager engine instead.", UserWarning)
            return None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # metric="precomputed" takes (n_queries, n_samples_fit) distances, dense or a
        # sparse neighbour graph: non-negative.
        precomputed = self.metric == "precomputed"
        tags.input_tags.pairwise = tags.input_tags.sparse = precomputed
        tags.input_tags.positive_only = precomputed
        return tags

    def _check_result(self, X, result, n_keys=None):
        """Numpy outputs, an error for non-finite values, a warning for fallbacks."""
        out = result.out.cpu().numpy()
        if not np.all(np.isfinite(out)):
            raise ValueError(
                "Nadaraya-Watson produced non-finite values: the kernel "
                f"{self.kernel_!r} returned negative, NaN or infinite weights, or the bandwidth "
                f"{self.bandwidth_.tolist()} overflows the {self.X_fit_.dtype} range of the scaled "
                "inputs."
            )
        if result.n_fallback:
            why = (f"have no training point inside the support of the {self.kernel_!r} kernel"
                   if self.kernel_.is_compact else
                   f"are so far from every training point, in units of the bandwidth, that "
                   f"the weights of the {self.kernel_!r} kernel underflow to 0")
            warnings.warn(
                f"{result.n_fallback} of {X.shape[0]} queries {why}; they get the value of "
                "their nearest training point(s), the limit as the bandwidth shrinks. "
                "Increase the bandwidth to avoid this.",
                EmptyNeighborhoodWarning,
            )
        attention = result.attention
        if sp.issparse(attention):
            attention.eliminate_zeros()
        elif isinstance(attention, tuple):
            crow, col, val = (t.cpu().numpy() for t in attention)
            n_keys = self.X_fit_.shape[0] if n_keys is None else n_keys
            attention = sp.csr_array((val, col, crow), shape=(X.shape[0], n_keys))
            attention.eliminate_zeros()
        elif attention is not None:
            attention = attention.cpu().numpy()
        return out, attention

    @property
    def attention_weights_(self):
        """Leave-one-out attention of the training set on itself.

        ndarray of shape (n_samples_fit, n_samples_fit), or a scipy.sparse CSR array for
        compact kernels and for ``metric="precomputed"`` (the stored entries of the
        training distances). Row i holds the weights of every training point in the
        leave-one-out prediction of point i: point i is left out with all the mass at its
        location (every training row with the same input; for precomputed distances, every
        stored distance of 0), so those entries are zero, and rows sum to 1. Computed when
        read (it is not stored), in chunks; compact kernels find each point's neighbours
        with a tree and never form a dense block. Refused when the dense matrix, or the
        sparse one's entries, would exceed scikit-learn's ``working_memory``. It attends to
        every training point, also when ``n_neighbors`` restricts the attention of
        ``predict``.
        """
        check_is_fitted(self)
        n = self.X_fit_.shape[0]
        device = self._compute_device()
        if self.metric == "precomputed":
            if np.count_nonzero(self.sample_weight_) < 2:
                raise ValueError(
                    "attention_weights_ needs n_samples >= 2 with positive weight for "
                    f"leave-one-out; got n_samples={n}."
                )
            values = np.zeros((n, 0), dtype=self.X_fit_.dtype)
            result = self._neighbour_pool(
                self.X_fit_, values, device, self._log_weights(), True,
                partial(self._stored_candidates, self.X_fit_, leave_one_out=True),
                scale=self.bandwidth_[0],
            )
            return self._check_result(self.X_fit_, result)[1]
        loo = self._leave_one_out_set(np.zeros((n, 0)), "attention_weights_")
        values = np.zeros((len(loo.weight), 0), dtype=self.X_fit_.dtype)
        if self.kernel_.is_compact:
            result = self._neighbour_pool(
                loo.X, values, device, None, True,
                self._leave_one_out_candidates(loo, get_config()["working_memory"]),
                scale=self._search_scale(),
            )
        else:
            self._check_dense_attention(n, "attention_weights_")
            tensor = self._tensor_maker(device)
            result = attention_pool(
                tensor(loo.X), tensor(loo.X), tensor(values),
                tensor(getattr(self, "projection_", self.bandwidth_)), self.kernel_,
                log_w=tensor(loo.log_weight), self_log_w=tensor(loo.self_log_weight),
                return_attention=True, working_memory=get_config()["working_memory"],
            )
        _, attention = self._check_result(loo.X, result, n_keys=len(loo.weight))
        return self._expand_attention(attention, loo)

    def _expand_attention(self, attention, loo):
        """Attention between distinct inputs (G, G) as attention between training rows
        (n, n): a location's weight is shared by its rows in proportion to their own."""
        n, w = len(loo.inverse), self.sample_weight_
        location_weight = loo.weight[loo.inverse]  # (n,)
        share = np.divide(w, location_weight, out=np.zeros(n), where=location_weight > 0)
        if not sp.issparse(attention):
            rows = attention[np.ix_(loo.inverse, loo.inverse)] * share  # (n, n)
            return rows.astype(self.X_fit_.dtype, copy=False)
        spread = sp.csr_array((share, (loo.inverse, np.arange(n))), shape=(len(loo.weight), n))
        rows = sp.csr_array(attention[loo.inverse, :] @ spread).astype(self.X_fit_.dtype)
        rows.eliminate_zeros()
        return rows
