"""The shared base of the Nadaraya-Watson estimators: parameters and the one validation path.

Estimators hand numpy arrays to :func:`_engine.attention_pool` and take numpy arrays back;
tensors live only inside a method call.
"""

import warnings
from numbers import Real
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
import torch
from sklearn import get_config
from sklearn.base import BaseEstimator, clone
from sklearn.utils._array_api import get_namespace
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from ._engine import attention_pool, resolve_device
from .bandwidth import (
    RULES_OF_THUMB,
    LeaveOneOutBandwidth,
    check_bandwidth,
    scott_bandwidth,
)
from .kernels import KERNELS, Kernel, get_kernel


class EmptyNeighborhoodWarning(UserWarning):
    """Some queries had no training point inside the kernel's support.

    Those queries received the value of their nearest training point(s), the limit of the
    Nadaraya-Watson estimate as the kernel mass vanishes.
    """


class NadarayaWatsonBase(BaseEstimator):
    """Parameters, fitting and attention pooling shared by the regressor and the classifier."""

    _parameter_constraints: ClassVar[dict] = {
        "kernel": [StrOptions(set(KERNELS)), Kernel, callable],
        "bandwidth": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions(set(RULES_OF_THUMB) | {"loo"}),
            LeaveOneOutBandwidth,
            "array-like",
        ],
        "device": [str],
    }

    def __init__(self, kernel="gaussian", bandwidth="scott", *, device="cpu"):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.device = device

    # -- fitting ---------------------------------------------------------------------------

    def _fit(self, X, y, sample_weight, *, classifier=False):
        """The one validation and fitting path of every Nadaraya-Watson estimator.

        Validates X, y and sample_weight, resolves kernel and device, stores copies of the
        training data (``X_fit_`` in float64 or float32 as X came), lets the subclass encode
        its targets (:meth:`_fit_targets`), then resolves the bandwidth.
        """
        xp, _ = get_namespace(X)
        X, y = validate_data(
            self,
            X,
            y,
            dtype=[xp.float64, xp.float32],
            multi_output=not classifier,
            y_numeric=not classifier,
        )
        if classifier:
            check_classification_targets(y)
        sample_weight = _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True, copy=True
        )
        self.kernel_ = get_kernel(self.kernel)
        self.device_ = str(resolve_device(self.device))
        self.X_fit_ = np.array(X, copy=True)
        self.sample_weight_ = sample_weight
        values = self._fit_targets(y)
        self._fit_bandwidth(values, loss="log_loss" if classifier else "squared_error")
        return self

    def _fit_bandwidth(self, values, *, loss):
        """Set ``bandwidth_`` (and, for a learned one, ``n_iter_``, ``loss_curve_`` and for
        the full metric ``projection_``)."""
        for stale in ("projection_", "n_iter_", "loss_curve_"):
            self.__dict__.pop(stale, None)
        X, w, bandwidth = self.X_fit_, self.sample_weight_, self.bandwidth
        if isinstance(bandwidth, str) and bandwidth in RULES_OF_THUMB:
            self.bandwidth_ = RULES_OF_THUMB[bandwidth](X, w)
            return
        if not isinstance(bandwidth, (LeaveOneOutBandwidth, str)):
            self.bandwidth_ = check_bandwidth(bandwidth, X.shape[1])
            return
        selector = LeaveOneOutBandwidth() if isinstance(bandwidth, str) else clone(bandwidth)
        tensor = self._tensor_maker(resolve_device(self.device_))
        log_w, self_log_w = self._log_weights(leave_one_out=True)
        result = selector.select(
            tensor(X), tensor(values), tensor(log_w), tensor(self_log_w), self.kernel_,
            loss=loss, h_start=scott_bandwidth(X, w),
            working_memory=get_config()["working_memory"],
        )
        self.bandwidth_ = result.bandwidth
        if result.projection is not None:
            self.projection_ = result.projection
        self.n_iter_ = result.n_iter
        self.loss_curve_ = result.loss_curve

    def _fit_targets(self, y):
        """Store the encoded targets; return them as float values (n_samples, t) to pool."""
        raise NotImplementedError

    def _tensor_maker(self, device):
        dtype = torch.float32 if self.X_fit_.dtype == np.float32 else torch.float64
        return lambda a: torch.tensor(np.asarray(a), dtype=dtype, device=device)

    def _log_weights(self, *, leave_one_out):
        """Log sample weights and, for leave-one-out, the log of each point's own weight
        less one unit (``-inf`` for unit weights)."""
        w = self.sample_weight_
        with np.errstate(divide="ignore"):
            return np.log(w), (np.log(np.maximum(w - 1.0, 0.0)) if leave_one_out else None)

    # -- attention pooling -----------------------------------------------------------------

    def _validate_predict_data(self, X):
        xp, _ = get_namespace(X)
        X = validate_data(self, X, reset=False, dtype=[xp.float64, xp.float32])
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

    def _pool(self, X, values, *, return_attention=False, leave_one_out=False):
        """Attention-weighted average of ``values`` (n_samples_fit, t) at queries X.

        Returns the pooled values as an ndarray (n_queries, t) and the attention (None, an
        ndarray, or a scipy.sparse CSR array for compact kernels).
        """
        device = self._compute_device()
        tensor = self._tensor_maker(device)
        log_w, self_log_w = self._log_weights(leave_one_out=leave_one_out)
        result = attention_pool(
            tensor(X),
            tensor(self.X_fit_),
            tensor(values),
            tensor(getattr(self, "projection_", self.bandwidth_)),
            self.kernel_,
            log_w=tensor(log_w),
            self_log_w=None if self_log_w is None else tensor(self_log_w),
            return_attention=return_attention,
            working_memory=get_config()["working_memory"],
        )
        out = result.out.cpu().numpy()
        if not np.all(np.isfinite(out)):
            raise ValueError(
                "Nadaraya-Watson produced non-finite values: the kernel "
                f"{self.kernel_!r} returned negative, NaN or infinite weights, or the bandwidth "
                f"{self.bandwidth_.tolist()} overflows the {self.X_fit_.dtype} range of the scaled "
                "inputs."
            )
        if result.n_fallback:
            warnings.warn(
                f"{result.n_fallback} of {X.shape[0]} queries have no training point inside the "
                f"support of the {self.kernel_!r} kernel; they get the value of their nearest "
                "training point(s). Increase the bandwidth to avoid this.",
                EmptyNeighborhoodWarning,
            )
        attention = result.attention
        if isinstance(attention, tuple):
            crow, col, val = (t.cpu().numpy() for t in attention)
            attention = sp.csr_array((val, col, crow), shape=(X.shape[0], self.X_fit_.shape[0]))
        elif attention is not None:
            attention = attention.cpu().numpy()
        return out, attention

    @property
    def attention_weights_(self):
        """Leave-one-out attention of the training set on itself.

        ndarray of shape (n_samples_fit, n_samples_fit), or a scipy.sparse CSR array for
        compact kernels. Row i holds the weights of every training point in the
        leave-one-out prediction of point i: one unit of point i's own sample weight is
        removed, so the diagonal is zero for unit weights, and rows sum to 1. Computed when
        read (it is not stored), in chunks; the dense matrix is refused when it would exceed
        scikit-learn's ``working_memory``.
        """
        check_is_fitted(self)
        n = self.X_fit_.shape[0]
        if np.count_nonzero(self.sample_weight_) < 2 and self.sample_weight_.max() < 2:
            raise ValueError(
                "attention_weights_ needs n_samples >= 2 with positive weight for "
                f"leave-one-out; got n_samples={n}."
            )
        nbytes = n * n * self.X_fit_.dtype.itemsize
        working_memory = get_config()["working_memory"]
        if not self.kernel_.is_compact and nbytes > working_memory * 2**20:
            raise ValueError(
                f"attention_weights_ would be a dense ({n}, {n}) matrix of "
                f"{nbytes / 2**20:.0f} MiB, more than scikit-learn's working_memory of "
                f"{working_memory} MiB. For the attention of some queries use "
                "predict(X_query, return_attention=True); for the whole matrix raise the "
                "limit with sklearn.config_context(working_memory=...); a compact kernel "
                "(e.g. kernel='epanechnikov') gives a sparse matrix instead."
            )
        values = np.zeros((n, 0), dtype=self.X_fit_.dtype)
        _, attention = self._pool(self.X_fit_, values, return_attention=True, leave_one_out=True)
        return attention


