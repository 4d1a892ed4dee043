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
from sklearn.utils import gen_batches
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
from ._engine import (
    PoolResult,
    attention_pool,
    fused_pool,
    neighbour_pool,
    resolve_device,
    support_pool,
)
from .bandwidth import (
    RULES_OF_THUMB,
    LeaveOneOutBandwidth,
    check_bandwidth,
    scott_bandwidth,
)
from .kernels import KERNELS, Kernel, get_kernel

# Radius search for compact kernels from this many training points (algorithm="auto"): a
# cell list up to _CELL_MAX_FEATURES dimensions, a tree up to _TREE_MAX_FEATURES; queries are
# searched in chunks of _NEIGHBOUR_CHUNK.
_TREE_MIN_SAMPLES = 5000
_CELL_MAX_FEATURES = 3
_TREE_MAX_FEATURES = 15
_NEIGHBOUR_CHUNK = 512


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


def _nearest_units(dist, ind, w, counts, k, first_row):
    """Per row (CSR layout), the nearest candidates holding ``k`` units of weight, the last
    one only in part; returns them padded to one width (weight 0 on padding) and counts."""
    b, width = len(counts), int(counts.max())
    padded = np.full((b, width), np.inf)
    padded_ind = np.zeros((b, width), dtype=ind.dtype)
    padded_w = np.zeros((b, width))
    column = np.arange(len(dist)) - np.repeat(np.cumsum(counts) - counts, counts)
    row = np.repeat(np.arange(b), counts)
    padded[row, column], padded_ind[row, column], padded_w[row, column] = dist, ind, w
    order = np.argsort(padded, axis=1, kind="stable")
    padded, padded_ind, padded_w = (np.take_along_axis(a, order, axis=1)
                                    for a in (padded, padded_ind, padded_w))
    cumulative = np.cumsum(padded_w, axis=1)
    short = np.flatnonzero(cumulative[:, -1] < k)
    if len(short):
        raise ValueError(
            f"n_neighbors={k} needs k units of sample weight among each row's stored "
            f"distances; row {first_row + int(short[0])} of the precomputed graph holds "
            f"{cumulative[short[0], -1]:g}. Store more neighbours per row or lower n_neighbors."
        )
    keep = np.clip(k - (cumulative - padded_w), 0.0, padded_w)  # (b, width)
    m = int(np.max(width - np.argmax(keep[:, ::-1] > 0, axis=1)))  # past the last kept
    padded, padded_ind, keep = padded[:, :m], padded_ind[:, :m], keep[:, :m]
    padded = np.where(np.isfinite(padded), padded, 0.0)  # padding: weight 0 at distance 0
    return padded, padded_ind, keep, np.full(b, m)


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
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "algorithm": [
            StrOptions({"auto", "brute", "compiled", "kd_tree", "ball_tree", "cell_list"})
        ],
        "metric": [StrOptions({"euclidean", "precomputed"})],
        "device": [str],
    }

    def __init__(self, kernel="gaussian", bandwidth="scott", *, n_neighbors=None,
                 algorithm="auto", metric="euclidean", device="cpu"):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.metric = metric
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
        self.kernel_ = get_kernel(self.kernel)
        self.device_ = str(resolve_device(self.device))
        self.X_fit_ = X.copy() if sp.issparse(X) else np.array(X, copy=True)
        self.sample_weight_ = sample_weight
        values = self._fit_targets(y)
        self._fit_bandwidth(values, loss="log_loss" if classifier else "squared_error")
        self._fit_neighbors()
        return self

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
            if not self.kernel_.is_compact or algorithm in ("brute", "compiled"):
                return
            if algorithm == "auto":
                if n < _TREE_MIN_SAMPLES or d > _TREE_MAX_FEATURES:
                    return
                algorithm = "cell_list" if d <= _CELL_MAX_FEATURES else "kd_tree"
        elif algorithm in ("cell_list", "compiled"):
            what = ("searches the support of a compact kernel" if algorithm == "cell_list"
                    else "attends to every training point")
            raise ValueError(
                f"algorithm={algorithm!r} {what}; it cannot find the k nearest points "
                "(n_neighbors). Use 'auto', 'kd_tree' or 'ball_tree'."
            )
        # Only points with positive weight can receive attention (zero weight = no row).
        self.neighbor_rows_ = np.flatnonzero(self.sample_weight_ > 0)
        points = self._scaled(self.X_fit_[self.neighbor_rows_])
        if algorithm == "cell_list":
            try:
                self.neighbors_ = CellList(points, self.kernel_.support)
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

    def _pool(self, X, values, *, return_attention=False, leave_one_out=False):
        """Attention-weighted average of ``values`` (n_samples_fit, t) at queries X.

        Returns the pooled values as an ndarray (n_queries, t) and the attention (None, an
        ndarray, or a scipy.sparse CSR array for compact kernels).
        """
        device = self._compute_device()
        log_w, self_log_w = self._log_weights(leave_one_out=leave_one_out)
        # Dense sums over all training points, nothing but the outputs: the compiled loop
        # can compute them, if forced or if "auto" finds compiling worth it.
        dense = (self.metric != "precomputed" and getattr(self, "neighbors_", None) is None
                 and not (return_attention or leave_one_out))
        key = self._compile_key(device, values) if dense and self.algorithm == "auto" else None
        pairs = X.shape[0] * self.X_fit_.shape[0]
        if dense and (self.algorithm == "compiled"
                      or key is not None and auto_compiled(key, X.shape[0], pairs)):
            result = self._fused_pool(X, values, device, log_w)
            if result is not None:
                return self._check_result(X, result)
        start = time.perf_counter()
        result = self._eager_pool(X, values, device, log_w, self_log_w, return_attention,
                                  leave_one_out)
        if key is not None:  # what "auto" weighs against compiling
            record_eager(key, pairs, time.perf_counter() - start)
        return self._check_result(X, result)

    def _eager_pool(self, X, values, device, log_w, self_log_w, return_attention,
                    leave_one_out):
        """The eager engine's :class:`PoolResult`: over stored or searched neighbours, the
        training points in a compact kernel's support, or all of them."""
        tensor = self._tensor_maker(device)
        if self.metric == "precomputed":
            return self._neighbour_pool(
                X, values, device, log_w, return_attention,
                partial(self._stored_candidates, X, leave_one_out=leave_one_out),
            )
        neighbors = getattr(self, "neighbors_", None)
        if self.kernel_.is_compact and not leave_one_out and (
                neighbors is None or isinstance(neighbors, CellList)):
            return self._support_pool(X, values, device, log_w, return_attention)
        if neighbors is not None and not leave_one_out:
            return self._neighbour_pool(X, values, device, log_w, return_attention,
                                        partial(self._searched_candidates, X))
        return attention_pool(
            tensor(X),
            tensor(self.X_fit_),
            tensor(values),
            tensor(getattr(self, "projection_", self.bandwidth_)),
            self.kernel_,
            log_w=tensor(log_w),
            self_log_w=None if self_log_w is None else tensor(self_log_w),
            return_attention=return_attention,
            # Class probabilities must be exactly 0 where no attention goes.
            exact_zeros=is_classifier(self),
            working_memory=get_config()["working_memory"],
        )

    def _compile_key(self, device, values):
        """The compiled loop's configuration for "auto": built-in kernels, up to
        ``AUTO_MAX_COORDS`` coordinates, not on MPS; else None (always eager)."""
        n_coords = (self.projection_.shape[1] if hasattr(self, "projection_")
                    else self.X_fit_.shape[1])
        if (type(self.kernel_) not in set(KERNELS.values()) or device.type == "mps"
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
            if self.algorithm == "compiled":
                raise
            warnings.warn(f"{exc}; computing on the eager engine instead.", UserWarning)
            return None

    def _support_pool(self, X, values, device, log_w, return_attention):
        """A compact kernel, weights evaluated directly: on a cell list, each block of
        queries against the training points of the cells around it; else all queries
        against all training points with weight. Queries with no training point in reach
        are redone on the log-space engine, for the nearest-point fallback."""
        tensor = self._tensor_maker(device)
        if isinstance(self.neighbors_, CellList):
            rows = self.neighbor_rows_[self.neighbors_.order]  # indexed points, in cell order
            blocks = self.neighbors_.blocks
        else:
            rows = np.flatnonzero(self.sample_weight_ > 0)

            def blocks(queries):
                return [(np.arange(len(queries)), [(0, len(rows))])]
        w = self.sample_weight_[rows]
        keys = self._scaled(self.X_fit_[rows])  # (n', r)
        # Centred on the keys (the weights are translation invariant): far from the origin,
        # |q|^2 + |x|^2 - 2 q.x above three dimensions would lose the distances' precision.
        centre = keys.mean(0) if len(keys) else 0.0
        xs = tensor(keys - centre)  # (n', r)
        wv1 = tensor(np.column_stack([w[:, None] * values[rows], w]))  # (n', t + 1)
        n_q, n_fit = X.shape[0], self.X_fit_.shape[0]
        out = np.empty((n_q, values.shape[1]), dtype=self.X_fit_.dtype)
        parts, lonely = [], []
        working_memory = get_config()["working_memory"]
        qs_all = self._scaled(X)
        for queries, runs in blocks(qs_all):
            if not runs:
                lonely.append(queries)
                continue
            block_out, empty, attention = support_pool(
                tensor(qs_all[queries] - centre), torch.cat([xs[a:b] for a, b in runs]),
                torch.cat([wv1[a:b] for a, b in runs]).T, self.kernel_,
                return_attention=return_attention, working_memory=working_memory,
            )
            out[queries] = block_out.cpu().numpy()
            lonely.append(queries[empty.cpu().numpy()])
            if return_attention:
                found = np.concatenate([np.arange(a, b) for a, b in runs])
                crow, col, val = (a.cpu().numpy() for a in attention)
                parts.append((np.repeat(queries, np.diff(crow)), rows[found[col]], val))
        lonely = np.concatenate(lonely)
        n_fallback = 0
        if len(lonely):
            result = attention_pool(
                tensor(X[lonely]), tensor(self.X_fit_), tensor(values),
                tensor(getattr(self, "projection_", self.bandwidth_)), self.kernel_,
                log_w=tensor(log_w), return_attention=return_attention,
                exact_zeros=is_classifier(self), working_memory=working_memory,
            )
            out[lonely] = result.out.cpu().numpy()
            n_fallback = result.n_fallback
            if return_attention:
                crow, col, val = (a.cpu().numpy() for a in result.attention)
                parts.append((np.repeat(lonely, np.diff(crow)), col, val))
        attention = None
        if return_attention:
            q_rows, cols, vals = (np.concatenate(p) for p in zip(*parts))
            attention = sp.csr_array((vals, (q_rows, cols)), shape=(n_q, n_fit))
        return PoolResult(torch.from_numpy(out), attention, n_fallback)

    def _neighbour_pool(self, X, values, device, log_w, return_attention, candidates):
        """Attention restricted to each query's candidates, in chunks of queries.

        ``candidates(rows)`` gives, for a slice of query rows, the scaled distances, the
        training rows and the counts per query of their candidates (CSR layout), and the
        sample weight of each pair (None for unit weights).
        """
        tensor = self._tensor_maker(device)

        def index(a):
            return torch.as_tensor(a, dtype=torch.long, device=device)

        parts, offset = [], 0
        for rows in gen_batches(X.shape[0], _NEIGHBOUR_CHUNK):
            dist, ind, counts, pair_w = candidates(rows)
            indptr = np.concatenate([[0], np.cumsum(counts)])
            with np.errstate(divide="ignore"):
                pair_log_w = None if pair_w is None else tensor(np.log(pair_w))
            part = neighbour_pool(
                tensor(dist**2), index(ind), index(indptr), tensor(values), self.kernel_,
                log_w=pair_log_w, return_attention=return_attention,
            )
            parts.append((part, offset))
            offset += len(ind)
        out = torch.cat([p.out for p, _ in parts])
        attention = None
        if return_attention:
            indptr = torch.cat([parts[0][0].attention[0][:1]]
                               + [p.attention[0][1:] + o for p, o in parts])
            attention = (indptr, torch.cat([p.attention[1] for p, _ in parts]),
                         torch.cat([p.attention[2] for p, _ in parts]))
        return PoolResult(out, attention, sum(p.n_fallback for p, _ in parts))

    def _searched_candidates(self, X, rows):
        """Candidates from the fitted search: the k nearest, or those in a compact
        kernel's support (a query with none in reach gets its nearest point)."""
        queries = self._scaled(X[rows])
        if self.n_neighbors is not None:
            dist, ind, pair_w = self._k_nearest_units(queries)
            counts = np.full(len(queries), dist.shape[1])
            return dist.ravel(), ind.ravel(), counts, pair_w.ravel()
        dist, ind = self.neighbors_.radius_neighbors(
            queries, radius=self.kernel_.support, sort_results=False
        )
        counts = np.array([len(i) for i in ind])
        lonely = np.flatnonzero(counts == 0)
        if len(lonely):
            # No point in reach: the nearest ones, every tie (the pooling keeps those at
            # the least distance and averages them, as the dense engine does).
            d1, _ = self.neighbors_.kneighbors(queries[lonely], n_neighbors=1)
            for j, q in enumerate(lonely):
                radius = d1[j, 0] * (1.0 + 1e-9) + np.finfo(np.float64).tiny
                dq, iq = self.neighbors_.radius_neighbors(queries[q : q + 1], radius=radius)
                dist[q], ind[q] = dq[0], iq[0]
                counts[q] = len(iq[0])
        dist, ind = np.concatenate(dist), np.concatenate(ind)
        if len(self.neighbor_rows_) < self.X_fit_.shape[0]:
            ind = self.neighbor_rows_[ind]
        unit_weights = bool(np.all(self.sample_weight_ == 1.0))
        return dist, ind, counts, None if unit_weights else self.sample_weight_[ind]

    def _stored_candidates(self, X, rows, *, leave_one_out=False):
        """Candidates from a precomputed distance matrix: every stored entry of the rows
        (all of a dense one), or the nearest holding ``n_neighbors`` units of weight. For
        leave-one-out (X is the training graph) a row's own entry loses one unit."""
        block = sp.csr_array(X[rows]) if sp.issparse(X) else None
        if block is None:
            n = X.shape[1]
            dist = np.asarray(X[rows], dtype=np.float64).ravel()  # (b n,)
            counts = np.full(len(dist) // n, n)
            ind = np.tile(np.arange(n), len(counts))  # (b n,)
        else:
            counts = np.diff(block.indptr)
            if np.any(counts == 0):
                first = rows.start + int(np.flatnonzero(counts == 0)[0])
                raise ValueError(
                    f"Row {first} of the precomputed distances stores no neighbour: every "
                    "query needs at least one stored distance."
                )
            dist, ind = block.data.astype(np.float64), block.indices
        w = self.sample_weight_[ind].copy()  # pair weights, same layout as dist
        if leave_one_out:
            query = np.repeat(np.arange(rows.start, rows.start + len(counts)), counts)
            own = ind == query
            w[own] = np.maximum(w[own] - 1.0, 0.0)
        if self.n_neighbors is not None and not leave_one_out:
            dist, ind, w, counts = _nearest_units(dist, ind, w, counts, self.n_neighbors,
                                                  rows.start)
        return (dist / self.bandwidth_[0]).ravel(), ind.ravel(), counts, w.ravel()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # metric="precomputed" takes (n_queries, n_samples_fit) distances, dense or a
        # sparse neighbour graph: non-negative.
        precomputed = self.metric == "precomputed"
        tags.input_tags.pairwise = tags.input_tags.sparse = precomputed
        tags.input_tags.positive_only = precomputed
        return tags

    def _k_nearest_units(self, queries):
        """The nearest training points holding ``n_neighbors`` units of sample weight.

        Sample weights count as repeated rows: the k nearest of the repeated data are the
        nearest points until their weights add up to k, the last one only in part. Returns
        distances, rows of ``X_fit_`` and the weight each pair keeps, all (b, m).
        """
        k, n_indexed = self.n_neighbors, len(self.neighbor_rows_)
        m = min(k, n_indexed)
        while True:
            dist, ind = self.neighbors_.kneighbors(queries, n_neighbors=m)  # (b, m)
            ind = self.neighbor_rows_[ind]
            w = self.sample_weight_[ind]  # (b, m)
            cumulative = np.cumsum(w, axis=1)
            if m == n_indexed or np.all(cumulative[:, -1] >= k):
                break
            m = min(2 * m, n_indexed)  # fractional weights: look further
        return dist, ind, np.clip(k - (cumulative - w), 0.0, w)

    def _check_result(self, X, result):
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
            warnings.warn(
                f"{result.n_fallback} of {X.shape[0]} queries have no training point inside the "
                f"support of the {self.kernel_!r} kernel; they get the value of their nearest "
                "training point(s). Increase the bandwidth to avoid this.",
                EmptyNeighborhoodWarning,
            )
        attention = result.attention
        if sp.issparse(attention):
            attention.eliminate_zeros()
        elif isinstance(attention, tuple):
            crow, col, val = (t.cpu().numpy() for t in attention)
            attention = sp.csr_array((val, col, crow), shape=(X.shape[0], self.X_fit_.shape[0]))
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
        leave-one-out prediction of point i: one unit of point i's own sample weight is
        removed, so the diagonal is zero for unit weights, and rows sum to 1. Computed when
        read (it is not stored), in chunks; the dense matrix is refused when it would exceed
        scikit-learn's ``working_memory``. It attends to every training point, also when
        ``n_neighbors`` restricts the attention of ``predict``.
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


