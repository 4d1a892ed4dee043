"""The shared base of the Nadaraya-Watson estimators: parameters and the one validation path.

Estimators hand numpy arrays to :func:`_engine.attention_pool` and take numpy arrays back;
tensors live only inside a method call.
"""

import warnings
from numbers import Real

import numpy as np
import scipy.sparse as sp
import torch
from sklearn import get_config
from sklearn.base import BaseEstimator
from sklearn.utils._array_api import get_namespace
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._engine import attention_pool, resolve_device
from .bandwidth import RULES_OF_THUMB, check_bandwidth
from .kernels import KERNELS, Kernel, get_kernel


class EmptyNeighborhoodWarning(UserWarning):
    """Some queries had no training point inside the kernel's support.

    Those queries received the value of their nearest training point(s), the limit of the
    Nadaraya-Watson estimate as the kernel mass vanishes.
    """


class NadarayaWatsonBase(BaseEstimator):
    """Parameters, fitting and attention pooling shared by the regressor and the classifier."""

    _parameter_constraints = {
        "kernel": [StrOptions(set(KERNELS)), Kernel, callable],
        "bandwidth": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions(set(RULES_OF_THUMB)),
            "array-like",
        ],
        "device": [str],
    }

    def __init__(self, kernel="gaussian", bandwidth="scott", *, device="cpu"):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.device = device

    # -- fitting ---------------------------------------------------------------------------

    def _validate_fit_data(self, X, y, sample_weight, *, classifier=False):
        """Validate X, y and sample_weight; resolve kernel, bandwidth and device.

        Stores ``X_fit_`` (a copy, in float64 or float32 as X came) and ``sample_weight_``.
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
            sample_weight, X, dtype=np.float64, ensure_non_negative=True
        )
        self.kernel_ = get_kernel(self.kernel)
        if isinstance(self.bandwidth, str):
            self.bandwidth_ = RULES_OF_THUMB[self.bandwidth](X, sample_weight)
        else:
            self.bandwidth_ = check_bandwidth(self.bandwidth, X.shape[1])
        self.device_ = str(resolve_device(self.device))
        self.X_fit_ = np.array(X, copy=True)
        self.sample_weight_ = sample_weight
        return X, y

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
        dtype = torch.float32 if self.X_fit_.dtype == np.float32 else torch.float64

        def tensor(a):
            return torch.tensor(np.asarray(a), dtype=dtype, device=device)

        w = self.sample_weight_
        with np.errstate(divide="ignore"):
            log_w = np.log(w)
            self_log_w = np.log(np.maximum(w - 1.0, 0.0)) if leave_one_out else None
        result = attention_pool(
            tensor(X),
            tensor(self.X_fit_),
            tensor(values),
            tensor(self.bandwidth_),
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
                f"{self.bandwidth_.tolist()} overflows the {dtype} range of the scaled inputs."
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


