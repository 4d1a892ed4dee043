"""The fitted key set: the training points as attention sees them, built once at fit.

An estimator's ``fit`` resolves the kernel and the bandwidth, then builds one
:class:`KeySet`: the keys (training inputs) with their weights, the values that attention
pools, the metric, the *route* a prediction takes and the search index that route needs.
``predict`` hands query arrays to :meth:`KeySet.pool`, which dispatches on the route
through one table and returns numpy arrays; tensors exist only inside that call.

The routes (the ``route_`` of a fitted estimator):

``"dense"``
    Sums over every key of positive weight: the eager engine in log space (a compact
    kernel's profile evaluated directly), or the compiled loop of
    :mod:`sklearn_nw._compiled`, chosen per call by ``compute`` and the compile policy.
``"cell_list"``
    A compact kernel's support, searched on a :class:`~sklearn_nw._cells.CellList`: each
    block of queries is a dense problem against the cells around it.
``"radius"``
    A compact kernel's support, searched by scikit-learn's
    :class:`~sklearn.neighbors.KDTree` or :class:`~sklearn.neighbors.BallTree`
    (:class:`~sklearn_nw._search.TreeSearch`).
``"k_nearest"``
    The ``n_neighbors`` nearest keys (in units of sample weight), from a tree or a brute
    force search (:class:`~sklearn_nw._search.TreeSearch`).
``"adaptive"``
    Adaptive (nearest-neighbor) bandwidths (:mod:`sklearn_nw._adaptive`): each query's
    distance to its k-th nearest key from a tree or a brute force search
    (:class:`~sklearn_nw._search.TreeSearch`), then every key of positive weight, the
    distances divided by the query's bandwidth (balloon) or by each key's (sample-point).
``"precomputed"``
    Each query row's stored distances (``metric="precomputed"``), or the nearest of them
    with ``n_neighbors``.

Everything is numpy at rest, so a fitted key set pickles without torch state; the keys are
handed to torch without a copy where dtype and device allow.
"""

import time
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.neighbors import BallTree, KDTree
from sklearn.utils import gen_batches

from ._adaptive import LeaveOneOutNeighbors, kth_distances
from ._cells import CellList
from ._compiled import AUTO_MAX_COORDS, CompileError, config_key, current_policy
from ._engine import (
    KeyTensors,
    attention_pool,
    augment_keys,
    candidate_pool,
    chunk_rows,
    dense_pool,
    fused_pool,
    key_center,
    prepare_keys,
    serial_if_small,
    support_pairs_pool,
    support_pool,
    transform,
)
from ._engine_partial import PartialSums, empty_partial, partial_pool
from ._engine_partial import partial_gradient as engine_partial_gradient
from ._leave_one_out import leave_one_out_set
from ._local_poly import local_fit_dense, local_fit_sparse, n_terms
from ._search import TreeSearch, exact_distances

# Radius search for compact kernels from this many training points (algorithm="auto"): a
# cell list up to _CELL_MAX_FEATURES dimensions, a tree up to _TREE_MAX_FEATURES.
_TREE_MIN_SAMPLES = 5000
_CELL_MAX_FEATURES = 3
_TREE_MAX_FEATURES = 15
# Queries are searched and pooled in chunks of this many.
_CANDIDATE_CHUNK = 512

# algorithm="auto" searches a compact kernel's support with a tree only when it holds at
# most this fraction of the keys (estimated at fit on _REACH_SAMPLE keys); above, the dense
# sums are faster (measured in 8-D, 5,000 keys, 3% in reach: 0.05 s dense, 0.6 s on the
# k-d tree: a tree visits many nodes in many dimensions).
_RADIUS_MAX_REACH = 0.002
_REACH_SAMPLE = 32
# A cell list's query with at most this many candidates is pooled over its own, as flat
# pairs; queries with more share blocks of candidates (one dense problem per block).
_PAIRS_MAX_CANDIDATES = 2048

ROUTES = ("dense", "cell_list", "radius", "k_nearest", "adaptive", "precomputed")


def resolve_route(kernel, *, n_neighbors, algorithm, compute, precomputed, n_samples,
                  n_coords, adaptive=False):
    """The route of a fit and the search algorithm it uses (None for none).

    ``algorithm="auto"`` searches a compact kernel's support from ``_TREE_MIN_SAMPLES``
    training points: on a cell list up to three coordinates, a k-d tree up to
    ``_TREE_MAX_FEATURES``; below, or above, the dense sums are faster.
    """
    if precomputed:
        return "precomputed", None
    if adaptive:
        return "adaptive", algorithm
    if n_neighbors is not None:
        return "k_nearest", algorithm
    if not kernel.is_compact or algorithm == "brute" or compute == "compiled":
        return "dense", None
    if algorithm == "auto":
        if n_samples < _TREE_MIN_SAMPLES or n_coords > _TREE_MAX_FEATURES:
            return "dense", None
        algorithm = "cell_list" if n_coords <= _CELL_MAX_FEATURES else "kd_tree"
    return ("cell_list" if algorithm == "cell_list" else "radius"), algorithm


class Pooled(NamedTuple):
    """What :meth:`KeySet.pool` returns."""

    out: np.ndarray  # (n_q, t) pooled values, in the keys' dtype
    attention: object  # None, an ndarray (n_q, n_keys) or a scipy.sparse CSR array
    n_fallback: int  # queries with no key in reach, given their nearest key(s)
    n_singular: int = 0  # local polynomials: queries left at their local-constant value


class _Call(NamedTuple):
    """The settings of one :meth:`KeySet.pool` call."""

    device: torch.device
    return_attention: bool
    compute: str
    working_memory: float


class KeySet:
    """The keys, weights, values, metric and search index of a fitted estimator.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The keys: training inputs (float64 or float32, the dtype of every computation), or
        for ``route="precomputed"`` the training distances.
    sample_weight : ndarray of shape (n,)
        Frequency weights; a key of zero weight never receives attention.
    values : ndarray of shape (n, t)
        What attention pools: scaled targets, or one-hot labels.
    metric : ndarray of shape (d,) or (d, r)
        Bandwidths, or a learned projection (distances ``||(q - x) @ metric||``); for
        ``"precomputed"`` one number, the bandwidth in the distances' unit.
    kernel : Kernel
    route : str
        One of :data:`ROUTES` (see :func:`resolve_route`).
    algorithm : str or None
        The search algorithm of the route (``"kd_tree"``, ``"ball_tree"``, ``"brute"``,
        ``"cell_list"``, ``"auto"``).
    n_neighbors : int or None
        The k of ``"k_nearest"``, or of the nearest stored distances (``"precomputed"``).
    exact_zeros : bool
        Weights that underflow are exactly 0 (class probabilities); else they may be as
        large as ``exp(log(tiny) + 10)``, negligible in a weighted mean.
    degree : int
        0 pools the values (Nadaraya-Watson); 1 or 2 fits a local polynomial of that
        degree to them with the attention as weights (:mod:`sklearn_nw._local_poly`) and
        returns its intercept, and the equivalent kernel as the attention.
    center : ndarray of shape (d,), default=None
        Where the dense route centers the keys (by default the median of those of positive
        weight): the shards of one key set share one (:meth:`partial_pool`).
    bounded : bool
        Local fits kept within the range of the values carrying their weight
        (:func:`~sklearn_nw._local_poly.bound`).

    Attributes
    ----------
    route : str
        The route; a cell list on data too spread out for a grid falls back to
        ``"radius"`` on a k-d tree when the route was chosen by ``algorithm="auto"``.
    index : CellList, TreeSearch or None
        The search index of the keys of positive weight, in the search space (the metric
        divided by its largest bandwidth: distances there neither overflow nor lose their
        order at bandwidths near the smallest float).
    index_rows : ndarray of shape (n_indexed,) or None
        The keys that ``index`` holds.
    adaptive : Adaptive or None
        An adaptive bandwidth (route ``"adaptive"``): its kind, k and c.
    key_bandwidth : ndarray of shape (n,) or None
        A sample-point bandwidth's ``c d_k(x_i)`` per key, in the search space; None
        otherwise (every key shares ``metric``).
    """

    def __init__(self, X, sample_weight, values, metric, kernel, *, route, algorithm=None,
                 n_neighbors=None, exact_zeros=False, explicit_algorithm=False, degree=0,
                 adaptive=None, bounded=False, center=None):
        if route not in ROUTES:
            raise ValueError(f"Unknown route {route!r}; expected one of {ROUTES}.")
        if degree and route == "precomputed":
            raise ValueError("Local polynomials need coordinates, not precomputed distances.")
        self.degree = degree
        self.center = center
        self.bounded = bounded
        self.X = X
        self.dtype = X.dtype
        self.sample_weight = sample_weight
        self.values = np.asarray(values, dtype=self.dtype)
        self.metric = np.asarray(metric, dtype=np.float64)
        self.kernel = kernel
        self.n_neighbors = n_neighbors
        self.exact_zeros = exact_zeros
        self.adaptive = adaptive
        if (adaptive is None) != (route != "adaptive"):
            raise ValueError("The adaptive route needs an adaptive bandwidth, and only it.")
        self.key_bandwidth = None
        with np.errstate(divide="ignore"):
            self.log_w = np.log(sample_weight).astype(self.dtype)  # (n,)
        self.route, self.index, self.index_rows = route, None, None
        self._support = None
        if route == "precomputed":
            self.search_scale = float(self.metric[0])
            return
        # The search space: the metric divided by its largest bandwidth (1 for a learned
        # projection, whose distances do not overflow).
        self.search_scale = 1.0 if self.metric.ndim == 2 else float(self.metric.max())
        if route in ("cell_list", "radius", "k_nearest", "adaptive"):
            self._build_index(algorithm, explicit_algorithm)
        if adaptive is not None and self.sample_weight.sum() < adaptive.n_neighbors * (
                1 - 1e-9):
            raise ValueError(
                f"An adaptive bandwidth with n_neighbors={adaptive.n_neighbors} needs k "
                f"units of sample weight; there are only {self.sample_weight.sum():g} "
                f"(n_samples={X.shape[0]}). Lower n_neighbors."
            )
        if adaptive is not None and adaptive.kind == "sample_point":
            self.key_bandwidth = adaptive.scale * kth_distances(
                self.index, self.sample_weight[self.index_rows], self.search_space(X),
                adaptive.n_neighbors, leave_out_location=True)  # (n,)
        if kernel.is_compact and self.route in ("dense", "cell_list"):
            self._support = self._support_keys()
        self._dense = self._dense_keys() if self.route == "dense" else None
        self._support_dense = (self._support_dense_keys()
                               if self.route == "dense" and kernel.is_compact else None)
        self._unit_weights = bool(np.all(sample_weight == 1.0))
        # Local polynomials: the keys in the scaled metric, centered (the designs' differences
        # are taken there, where the kernel's reach is about 1).
        self._poly_keys = None
        if degree:
            with np.errstate(over="ignore", invalid="ignore"):
                keys = self.scaled(X)  # (n, r)
            center = key_center(torch.from_numpy(keys[sample_weight > 0])).numpy()  # (r,)
            self._poly_keys = (center, (keys - center).astype(self.dtype))

    # -- fit: the index and the compact kernels' keys ----------------------------------

    def _build_index(self, algorithm, explicit):
        # Only keys with positive weight can receive attention (zero weight = no row).
        self.index_rows = np.flatnonzero(self.sample_weight > 0)
        every = len(self.index_rows) == self.X.shape[0]
        points = self.search_space(self.X if every else self.X[self.index_rows])
        if self.route == "cell_list":
            try:
                self.index = CellList(points, self.kernel.support * self.search_scale)
                return
            except ValueError:
                if explicit:
                    raise
                self.route, algorithm = "radius", "kd_tree"  # too spread out for a grid
        self.index = TreeSearch(points, algorithm)
        if self.route == "radius" and not explicit and self._reach(points) > _RADIUS_MAX_REACH:
            # "auto": the support holds too many keys for a search to pay.
            self.route, self.index, self.index_rows = "dense", None, None

    def _reach(self, points):
        """The fraction of the indexed keys within a compact kernel's support of a key,
        estimated on ``_REACH_SAMPLE`` keys spread over the index."""
        sample = points[np.linspace(0, len(points) - 1, _REACH_SAMPLE).astype(int)]
        counts = self.index.tree.query_radius(
            sample, r=self.kernel.support * self.search_scale, count_only=True)
        return float(np.mean(counts)) / len(points)

    def _support_keys(self):
        """The rows, key rows ``[scaled key, w v, w]`` and center that a compact kernel's
        direct evaluation uses: the keys of positive weight (in cell order on a
        cell list), centered on their median (the weights are translation invariant, and far
        from the origin ``|q|^2 + |x|^2 - 2 q.x`` would lose the distances' precision
        above three dimensions)."""
        if self.route == "cell_list":
            rows = self.index_rows[self.index.order]
        else:
            rows = np.flatnonzero(self.sample_weight > 0)
        w = self.sample_weight[rows]
        # Bandwidths near the smallest float overflow the scaled inputs: their queries find
        # no weight and go to the careful path, which ranks distances without them.
        with np.errstate(over="ignore", invalid="ignore"):
            keys = self.scaled(self.X[rows])  # (n', r)
            # The center of _engine.key_center (rows are the keys of positive weight).
            center = key_center(torch.from_numpy(keys)).numpy()  # (r,)
            # One row per key: its coordinates, its weighted values and its weight,
            # computed in float64 and rounded once to the keys' dtype.
            r, t = keys.shape[1], self.values.shape[1]
            key_rows = np.empty((len(rows), r + t + 1), dtype=self.dtype)
            np.subtract(keys, center, out=key_rows[:, :r], casting="same_kind")
        np.multiply(w[:, None], self.values[rows], out=key_rows[:, r:-1], casting="same_kind")
        key_rows[:, -1] = w
        return rows, key_rows, center

    def _dense_keys(self):
        """The engine's per-key tensors of the dense sums (:func:`_engine.prepare_keys`),
        computed once on the CPU and kept as numpy."""
        tensor = lambda a: self._tensor(a, "cpu")
        keys = prepare_keys(tensor(self.X), tensor(self.values), tensor(self.metric),
                            self.kernel, tensor(self.log_w),
                            None if self.center is None else tensor(self.center))
        return KeyTensors(*(None if t is None else t.numpy() for t in keys))

    def _support_dense_keys(self):
        """A compact kernel's dense route, laid out once: the support keys' coordinates
        (n', r), their weighted values and weights (t + 1, n'), both contiguous, and above
        three coordinates the key side of the distance expansion
        (:func:`_engine.augment_keys`), else None."""
        _, key_rows, _ = self._support
        r = key_rows.shape[1] - self.values.shape[1] - 1
        xs = np.ascontiguousarray(key_rows[:, :r])  # (n', r)
        augmented = None
        if r > 3:
            rows, x2_max = augment_keys(torch.from_numpy(xs))
            augmented = (rows.numpy(), x2_max.numpy())
        return xs, np.ascontiguousarray(key_rows[:, r:].T), augmented

    def _dense_tensors(self, device):
        return KeyTensors(*(None if a is None else torch.as_tensor(a, device=device)
                            for a in self._dense))

    # -- the metric ------------------------------------------------------------------------

    def scaled(self, X):
        """Inputs (float64) in the kernel's metric: divided by the bandwidths, or projected
        (the engine's :func:`~sklearn_nw._engine.transform`, not centered)."""
        return _transform(X, self.metric)

    def search_space(self, X):
        """Inputs in the searches' space: :meth:`scaled` times ``search_scale``."""
        if self.metric.ndim == 2:
            return self.scaled(X)
        return _transform(X, self.metric / self.search_scale)

    def _tensor(self, a, device):
        """``a`` as a tensor in the keys' dtype: a view of it on the CPU when it has that
        dtype and is writable (torch refuses read-only memory)."""
        a = np.asarray(a)
        if not a.flags.writeable:
            return torch.tensor(a, dtype=_torch_dtype(self.dtype), device=device)
        return torch.as_tensor(a, dtype=_torch_dtype(self.dtype), device=device)

    # -- pooling ---------------------------------------------------------------------------

    def pool(self, queries, *, return_attention=False, compute="auto", device="cpu",
             working_memory=1024):
        """Attention-weighted average of the values at ``queries``, by the route.

        Parameters
        ----------
        queries : ndarray of shape (n_q, d)
            In the keys' dtype (distances to the keys for ``"precomputed"``).
        return_attention : bool
            Also return the attention: dense, or CSR for compact kernels and restricted
            routes.
        compute : {"auto", "eager", "compiled"}
            How the ``"dense"`` route computes its sums when no attention is asked for.
        device : torch.device or str
        working_memory : float
            MiB that chunked temporaries may take.

        Returns
        -------
        Pooled
        """
        call = _Call(torch.device(device), return_attention, compute, working_memory)
        with serial_if_small(queries.shape[0] * self.X.shape[0], call.device):
            if self.degree:
                return self._pool_local(queries, call)
            out, attention, n_fallback = _POOLS[self.route](self, queries, call)
        return Pooled(out.cpu().numpy(),
                      _numpy_attention(attention, queries.shape[0], self.X.shape[0]),
                      n_fallback)

    def partial_pool(self, queries, *, leave_out_equal=False, device="cpu",
                     working_memory=1024):
        """This key set's part of the predictions at ``queries`` (n_q, d) as one shard of
        a larger key set (route ``"dense"``): a
        :class:`~sklearn_nw._engine_partial.PartialSums` in float64 numpy, merged with the
        other shards' by :func:`sklearn_nw._shards.merge`.
        ``leave_out_equal`` leaves out the keys at each query's location (leave-one-out
        of training inputs)."""
        if self.route != "dense" or self.degree:
            raise ValueError("Partial sums are those of the dense Nadaraya-Watson route.")
        if not np.any(self.sample_weight > 0):
            part = empty_partial(queries.shape[0], self.values.shape[1], torch.float64)
        else:
            tensor = lambda a: self._tensor(a, device)
            with serial_if_small(queries.shape[0] * self.X.shape[0], torch.device(device)):
                part = partial_pool(
                    tensor(queries), tensor(self.X), tensor(self.values),
                    tensor(self.metric), self.kernel, log_w=tensor(self.log_w),
                    keys=self._dense_tensors(device), leave_out_equal=leave_out_equal,
                    working_memory=working_memory)
        return PartialSums(*(t.cpu().numpy().astype(np.float64, copy=False) for t in part))

    def partial_gradient(self, queries, pooled, log_den, cotangent, *, leave_out_equal=False,
                         device="cpu", working_memory=1024):
        """This shard's part of the gradient in the metric of ``sum_i cotangent_i .
        pooled_i``, for predictions ``pooled`` (n_q, t) at ``queries`` with log normaliser
        ``log_den`` (n_q,) over every shard (:func:`_engine_partial.partial_gradient`):
        an ndarray like the metric, float64."""
        if not np.any(self.sample_weight > 0):
            return np.zeros_like(self.metric)
        tensor = lambda a: self._tensor(a, device)
        grad = engine_partial_gradient(
            tensor(queries), tensor(self.X), tensor(self.values), tensor(self.metric),
            self.kernel, log_w=tensor(self.log_w), center=tensor(self.center),
            pooled=tensor(pooled), log_den=tensor(log_den), cotangent=tensor(cotangent),
            leave_out_equal=leave_out_equal, working_memory=working_memory)
        return grad.cpu().numpy().astype(np.float64)

    def _pool_adaptive(self, q, call):
        """Adaptive bandwidths: each query against every key of positive weight, the
        distances divided by the query's bandwidth ``c d_k(q)`` (balloon) or each key's
        (sample-point, whose weights carry ``h_i^(-r)``), in chunks of queries within
        ``working_memory``."""
        adaptive, search_queries = self.adaptive, self.search_space(q)
        weight = self.sample_weight[self.index_rows]  # (n',)
        tiny = np.finfo(np.float64).tiny
        if adaptive.kind == "balloon":
            h = np.maximum(adaptive.scale * kth_distances(
                self.index, weight, search_queries, adaptive.n_neighbors), tiny)  # (n_q,)
        else:
            h = np.maximum(self.key_bandwidth[self.index_rows], tiny)  # (n',)
            # w_i h_i^(-r), relative to the smallest h (no overflow at many coordinates).
            weight = weight * (h.min() / h) ** self._n_coords()
        n_keys = len(self.index_rows)
        tensor = lambda a: self._tensor(a, call.device)
        values, log_w = tensor(self.values[self.index_rows]), tensor(np.log(weight))
        # Per query a row of distances, logits and weights (and of the attention).
        row_bytes = n_keys * self.dtype.itemsize * (4 + call.return_attention)
        outs, attentions, n_fallback = [], [], 0
        for rows in gen_batches(q.shape[0], chunk_rows(q.shape[0], row_bytes,
                                                       call.working_memory)):
            dist = self.index.distances(search_queries[rows])  # (b, n')
            with np.errstate(over="ignore"):  # h = tiny: d_k = 0, only distance 0 counts
                dist /= h[rows, None] if adaptive.kind == "balloon" else h
            part = dense_pool(tensor(dist), values, self.kernel, log_w=log_w,
                              return_attention=call.return_attention,
                              exact_zeros=self.exact_zeros)
            outs.append(part.out)
            n_fallback += part.n_fallback
            if call.return_attention:
                # The keys of positive weight are the attention's columns.
                block = np.zeros((len(dist), self.X.shape[0]), dtype=self.dtype)
                block[:, self.index_rows] = part.attention.cpu().numpy()
                attentions.append(sp.csr_array(block) if self.kernel.is_compact else block)
        attention = None
        if call.return_attention:
            attention = (sp.vstack(attentions, format="csr") if self.kernel.is_compact
                         else torch.from_numpy(np.concatenate(attentions)))
        return torch.cat(outs), attention, n_fallback

    def _n_coords(self):
        """The coordinates of the metric: features, or the projection's components."""
        return self.metric.shape[1] if self.metric.ndim == 2 else self.X.shape[1]

    def _pool_local(self, q, call):
        """Local polynomial fits on the route's attention, in chunks of queries whose
        attention and designs fit in ``working_memory``; a query whose design is singular
        keeps its Nadaraya-Watson value and attention."""
        n_q, n = q.shape[0], self.X.shape[0]
        center, keys = self._poly_keys
        p = n_terms(keys.shape[1], self.degree)
        # Designs (n p), the fits' products and the bound's temporaries (n each).
        step = chunk_rows(n_q, n * (2 * p + 4) * self.dtype.itemsize, call.working_memory)
        with_attention = call._replace(return_attention=True)
        outs, attentions, n_fallback, n_singular = [], [], 0, 0
        for rows in gen_batches(n_q, step):
            out, attention, fallback = _POOLS[self.route](self, q[rows], with_attention)
            with np.errstate(over="ignore", invalid="ignore"):
                qs = self.scaled(q[rows]) - center  # (b, r)
            out, attention, singular = self._local_fit(
                qs, keys, out, _numpy_attention(attention, len(qs), n), call.device)
            outs.append(out)
            attentions.append(attention)
            n_fallback += fallback
            n_singular += singular
        attention = None
        if call.return_attention:
            attention = (sp.vstack(attentions, format="csr") if sp.issparse(attentions[0])
                         else np.concatenate(attentions))
        return Pooled(np.concatenate(outs), attention, n_fallback, n_singular)

    def _local_fit(self, qs, keys, pooled, attention, device, values=None):
        """The local fits of queries ``qs`` (b, r) on their attention (an ndarray or a CSR
        array) of ``values`` (the key set's by default): outputs (b, t) and the equivalent
        kernel (same kind), the pooled values ``pooled`` and the attention on singular
        rows; and the number of those."""
        tensor = lambda a: self._tensor(a, device)
        values = self.values if values is None else values
        pooled = pooled.cpu().numpy() if isinstance(pooled, torch.Tensor) else pooled
        if sp.issparse(attention):
            attention = sp.csr_array(attention)
            crow = torch.as_tensor(attention.indptr, dtype=torch.long, device=device)
            col = torch.as_tensor(attention.indices, dtype=torch.long, device=device)
            out, kernel, singular = local_fit_sparse(
                tensor(qs), tensor(keys), crow, col, tensor(attention.data),
                tensor(values), self.degree, self.bounded)
            singular = singular.cpu().numpy()
            kernel = kernel.cpu().numpy()
            entry_singular = np.repeat(singular, np.diff(attention.indptr))
            kernel[entry_singular] = attention.data[entry_singular]
            kernel = sp.csr_array((kernel, attention.indices, attention.indptr),
                                  shape=attention.shape)
        else:
            out, kernel, singular = local_fit_dense(
                tensor(qs), tensor(keys), tensor(attention), tensor(values), self.degree,
                self.bounded)
            singular = singular.cpu().numpy()
            kernel = kernel.cpu().numpy()
            kernel[singular] = attention[singular]
        out = out.cpu().numpy()
        out[singular] = pooled[singular]
        return out, kernel, int(singular.sum())

    def _pool_dense(self, q, call):
        """Sums over every key: compiled when ``compute`` says so (or "auto" and the
        compile policy find it worth it), else eager."""
        dense = not call.return_attention and call.compute != "eager"
        policy = current_policy()
        key = self._compile_key(call.device) if dense and call.compute == "auto" else None
        pairs = q.shape[0] * self.X.shape[0]
        if dense and (call.compute == "compiled"
                      or key is not None and policy.chooses(key, q.shape[0], pairs)):
            ready = key is not None and policy.is_ready(key)  # else this call compiles
            start = time.perf_counter()
            result = self._pool_compiled(q, call, policy)
            if result is not None:
                if ready:  # what "auto" weighs against the eager engine
                    policy.record_compiled(key, q.shape[0], pairs, time.perf_counter() - start)
                return result
        start = time.perf_counter()
        if self.kernel.is_compact:
            result = self._pool_support(q, call)
        else:
            tensor = lambda a: self._tensor(a, call.device)
            result = attention_pool(
                tensor(q), tensor(self.X), tensor(self.values), tensor(self.metric),
                self.kernel, log_w=tensor(self.log_w), return_attention=call.return_attention,
                exact_zeros=self.exact_zeros, working_memory=call.working_memory,
                keys=self._dense_tensors(call.device),
            )
        if key is not None:  # what "auto" weighs against compiling
            policy.record_eager(key, q.shape[0], pairs, time.perf_counter() - start)
        return result

    def _compile_key(self, device):
        """The compiled loop's configuration for "auto": compilable kernels, up to
        ``AUTO_MAX_COORDS`` coordinates, not on MPS; else None (always eager)."""
        n_coords = self.metric.shape[-1] if self.metric.ndim == 2 else self.X.shape[1]
        if (not self.kernel.compilable or device.type == "mps"
                or n_coords > AUTO_MAX_COORDS):
            return None
        return config_key(self.kernel, _torch_dtype(self.dtype), device, n_coords,
                          self.values.shape[1] + 1)

    def _pool_compiled(self, q, call, policy):
        """Dense sums on the compiled loop; None where compiling failed under "auto" (the
        policy warns), which leaves the call to the eager engine."""
        tensor = lambda a: self._tensor(a, call.device)
        try:
            return fused_pool(tensor(q), tensor(self.X), tensor(self.values),
                              tensor(self.metric), self.kernel, log_w=tensor(self.log_w),
                              working_memory=call.working_memory, policy=policy,
                              keys=self._dense_tensors(call.device))
        except CompileError as exc:
            if call.compute == "compiled":
                raise
            policy.warn_fallback(exc)
            return None

    def _pool_support(self, q, call):
        """A compact kernel, weights evaluated directly: on a cell list, each query with
        few candidates against its own, and blocks of the others against the keys of the
        cells around them; else all queries against all keys of positive weight. Queries
        with no key in reach are redone on the log-space engine, for the nearest-key
        fallback."""
        rows, key_rows, center = self._support
        tensor = lambda a: self._tensor(a, call.device)
        with np.errstate(over="ignore", invalid="ignore"):
            qs_all = self.scaled(q) - center  # (n_q, r)
        key_rows = tensor(key_rows)  # (n', r + t + 1)
        r = qs_all.shape[1]  # key rows: r coordinates, t weighted values, the weight
        n_q, n_keys = q.shape[0], self.X.shape[0]
        out = np.empty((n_q, self.values.shape[1]), dtype=self.dtype)
        parts, lonely = [], []
        if self.route == "cell_list":
            search = self.search_space(q)  # (n_q, d)
            lo, hi = self.index.runs(search)  # (n_q, runs)
            n_candidates = (hi - lo).sum(1)  # (n_q,)
            lonely.append(np.flatnonzero(n_candidates == 0))
            few = np.flatnonzero((n_candidates > 0) & (n_candidates <= _PAIRS_MAX_CANDIDATES))
            if len(few):
                self._pool_pairs(few, lo[few], hi[few], qs_all, key_rows, call, out,
                                 lonely, parts)
            many = np.flatnonzero(n_candidates > _PAIRS_MAX_CANDIDATES)
            blocks = (((many[queries], runs) for queries, runs in
                       self.index.blocks(search[many])) if len(many) else ())
        else:
            blocks = [(np.arange(n_q), [(0, len(rows))])]
        for queries, runs in blocks:
            if not runs:
                lonely.append(queries)
                continue
            if self.route == "dense":  # every key, laid out at fit
                xs, wv1_t, augmented = self._support_dense
                xs, wv1_t = tensor(xs), tensor(wv1_t)  # (n', r), (t + 1, n')
                if augmented is not None:
                    augmented = tuple(torch.as_tensor(a, device=call.device)
                                      for a in augmented)
            else:
                # The candidates' key rows, copied whole (contiguous) when several runs.
                block = (key_rows[runs[0][0]:runs[0][1]] if len(runs) == 1
                         else torch.cat([key_rows[a:b] for a, b in runs]))  # (m, r + t + 1)
                xs, wv1_t, augmented = block[:, :r], block[:, r:].T, None
            block_out, empty, attention = support_pool(
                tensor(qs_all[queries]), xs, wv1_t, self.kernel,
                return_attention=call.return_attention, working_memory=call.working_memory,
                augmented=augmented,
            )
            out[queries] = block_out.cpu().numpy()
            lonely.append(queries[empty.cpu().numpy()])
            if call.return_attention:
                found = np.concatenate([np.arange(a, b) for a, b in runs])
                crow, col, val = (a.cpu().numpy() for a in attention)
                parts.append((np.repeat(queries, np.diff(crow)), rows[found[col]], val))
        lonely = np.concatenate(lonely)
        n_fallback = 0
        if len(lonely):
            result = attention_pool(
                tensor(q[lonely]), tensor(self.X), tensor(self.values), tensor(self.metric),
                self.kernel, log_w=tensor(self.log_w), return_attention=call.return_attention,
                exact_zeros=self.exact_zeros, working_memory=call.working_memory,
            )
            out[lonely] = result.out.cpu().numpy()
            n_fallback = result.n_fallback
            if call.return_attention:
                crow, col, val = (a.cpu().numpy() for a in result.attention)
                parts.append((np.repeat(lonely, np.diff(crow)), col, val))
        attention = None
        if call.return_attention:
            q_rows, cols, vals = (np.concatenate(p) for p in zip(*parts))
            attention = sp.csr_array((vals, (q_rows, cols)), shape=(n_q, n_keys))
        return torch.from_numpy(out), attention, n_fallback

    def _pool_pairs(self, queries, lo, hi, qs_all, key_rows, call, out, lonely, parts):
        """The cell list's queries with few candidates, each against its own: the slices
        ``lo``, ``hi`` (f, runs) of the key rows in cell order."""
        rows = self._support[0]

        def index(a):
            return torch.as_tensor(a, dtype=torch.long, device=call.device)

        block_out, empty, attention = support_pairs_pool(
            self._tensor(qs_all[queries], call.device), key_rows, index(lo), index(hi),
            self.kernel, return_attention=call.return_attention,
        )
        out[queries] = block_out.cpu().numpy()
        lonely.append(queries[empty.cpu().numpy()])
        if call.return_attention:
            crow, col, val = (a.cpu().numpy() for a in attention)
            parts.append((np.repeat(queries, np.diff(crow)), rows[col], val))

    def _pool_searched(self, q, call):
        """The k nearest keys, or those in a compact kernel's support, from the index."""
        search_queries = self.search_space(q)
        n_q = q.shape[0]

        def candidates(rows):
            return self._searched_candidates(search_queries[rows])

        return self._pool_candidates(n_q, candidates, self.search_scale, call)

    def _pool_stored(self, q, call):
        """The stored entries of precomputed distances."""

        def candidates(rows):
            return self._stored_candidates(q, rows)

        return self._pool_candidates(q.shape[0], candidates, self.search_scale, call)

    def _pool_candidates(self, n_q, candidates, scale, call, values=None,
                         chunk=_CANDIDATE_CHUNK):
        """Attention restricted to each query's candidates, in chunks of queries.

        ``candidates(rows)`` gives, for a slice of query rows, the distances (``scale``
        times the scaled ones), the keys and the counts per query of their candidates (CSR
        layout), and the sample weight of each pair (None for unit weights).
        """
        device = call.device
        tensor = lambda a: self._tensor(a, device)
        values = tensor(self.values if values is None else values)

        def index(a):
            return torch.as_tensor(a, dtype=torch.long, device=device)

        parts, offset = [], 0
        for rows in gen_batches(n_q, chunk):
            dist, ind, counts, pair_w = candidates(rows)
            indptr = np.concatenate([[0], np.cumsum(counts)])
            with np.errstate(divide="ignore"):
                pair_log_w = None if pair_w is None else tensor(np.log(pair_w))
            part = candidate_pool(
                tensor(dist), index(ind), index(indptr), values, self.kernel,
                scale=scale, log_w=pair_log_w, return_attention=call.return_attention,
                exact_zeros=self.exact_zeros,
            )
            parts.append((part, offset))
            offset += len(ind)
        if len(parts) == 1:  # small calls: nothing to stitch
            return parts[0][0]
        out = torch.cat([p.out for p, _ in parts])
        attention = None
        if call.return_attention:
            indptr = torch.cat([parts[0][0].attention[0][:1]]
                               + [p.attention[0][1:] + o for p, o in parts])
            attention = (indptr, torch.cat([p.attention[1] for p, _ in parts]),
                         torch.cat([p.attention[2] for p, _ in parts]))
        return out, attention, sum(p.n_fallback for p, _ in parts)

    # -- candidates ------------------------------------------------------------------------

    def _searched_candidates(self, queries):
        """Candidates from the index for ``queries`` in the search space: the k nearest,
        or those in a compact kernel's support (a query with none in reach gets its
        nearest key(s), every tie)."""
        if self.n_neighbors is not None:
            dist, ind, pair_w = self._k_nearest_units(queries)
            counts = np.full(len(queries), dist.shape[1])
            return dist.ravel(), ind.ravel(), counts, pair_w.ravel()
        dist, ind = self.index.within(queries, self.kernel.support * self.search_scale)
        counts = np.array([len(i) for i in ind])
        lonely = np.flatnonzero(counts == 0)
        if len(lonely):
            # No key in reach: the nearest ones, every tie (the pooling keeps those at the
            # least distance and averages them, as the dense engine does).
            d1, _ = self.index.nearest(queries[lonely], 1)
            radii = d1[:, 0] * (1.0 + 1e-9) + np.finfo(np.float64).tiny
            d_l, i_l = self.index.within(queries[lonely], radii)
            for j, q in enumerate(lonely):
                dist[q], ind[q] = d_l[j], i_l[j]
                counts[q] = len(i_l[j])
        dist, ind = np.concatenate(dist), np.concatenate(ind)
        if len(self.index_rows) < self.X.shape[0]:
            ind = self.index_rows[ind]
        return dist, ind, counts, None if self._unit_weights else self.sample_weight[ind]

    def _k_nearest_units(self, queries):
        """The nearest keys holding ``n_neighbors`` units of sample weight.

        Sample weights count as repeated rows: the k nearest of the repeated data are the
        nearest keys until their weights add up to k, the last one only in part. Returns
        distances, keys and the weight each pair keeps, all (b, m).
        """
        k = self.n_neighbors
        dist, ind, w, cumulative = self.index.nearest_holding(
            queries, self.sample_weight[self.index_rows], k, first=min(k, len(self.index_rows)))
        return dist, self.index_rows[ind], np.clip(k - (cumulative - w), 0.0, w)

    def _stored_candidates(self, X, rows, *, leave_one_out=False):
        """Candidates from a precomputed distance matrix: every stored entry of the rows
        (all of a dense one), or the nearest holding ``n_neighbors`` units of weight. For
        leave-one-out (X is the training graph) a row's own entry and its entries at
        distance 0 get no weight."""
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
                    f"Row {first} of the precomputed distances stores no neighbor: every "
                    "query needs at least one stored distance."
                )
            dist, ind = block.data.astype(np.float64), block.indices
        w = self.sample_weight[ind].copy()  # pair weights, same layout as dist
        if leave_one_out:
            # The point leaves with all the mass at its location: itself and every
            # training point at distance 0 from it.
            query = np.repeat(np.arange(rows.start, rows.start + len(counts)), counts)
            w[(ind == query) | (dist == 0)] = 0.0
        if self.n_neighbors is not None and not leave_one_out:
            dist, ind, w, counts = _nearest_units(dist, ind, w, counts, self.n_neighbors,
                                                  rows.start)
        return dist.ravel(), ind.ravel(), counts, w.ravel()

    # -- leave-one-out attention -----------------------------------------------------------

    def leave_one_out_attention(self, *, device="cpu", working_memory=1024,
                                estimator_name="attention_weights_"):
        """Attention of the keys on each other, each key left out with all the mass at
        its location: CSR for compact kernels and precomputed distances (a tree finds
        each key's neighbors; no dense block is formed), else dense."""
        call = _Call(torch.device(device), True, "eager", working_memory)
        n = self.X.shape[0]
        none = np.zeros((n, 0), dtype=self.dtype)
        if self.route == "precomputed":
            if np.count_nonzero(self.sample_weight) < 2:
                raise ValueError(
                    "attention_weights_ needs n_samples >= 2 with positive weight for "
                    f"leave-one-out; got n_samples={n}."
                )

            def candidates(rows):
                return self._stored_candidates(self.X, rows, leave_one_out=True)

            _, attention, n_fallback = self._pool_candidates(n, candidates, self.search_scale,
                                                             call, values=none)
            return _numpy_attention(attention, n, n), n_fallback, 0
        loo = leave_one_out_set(self.X, none, self.sample_weight,
                                estimator_name=estimator_name)
        G = len(loo.weight)
        values = np.zeros((G, 0), dtype=self.dtype)
        if self.route == "adaptive":
            attention, n_fallback = self._adaptive_leave_one_out(loo, working_memory,
                                                                 call.device)
        elif self.kernel.is_compact:
            candidates = self._leave_one_out_candidates(loo, working_memory)
            _, attention, n_fallback = self._pool_candidates(G, candidates, self.search_scale,
                                                             call, values=values)
        else:
            tensor = lambda a: self._tensor(a, call.device)
            _, attention, n_fallback = attention_pool(
                tensor(loo.X), tensor(loo.X), tensor(values), tensor(self.metric),
                self.kernel, log_w=tensor(loo.log_weight),
                self_log_w=tensor(loo.self_log_weight), return_attention=True,
                working_memory=working_memory,
            )
        attention = loo.expand_attention(_numpy_attention(attention, G, G),
                                         self.sample_weight, self.dtype)
        if not self.degree:
            return attention, n_fallback, 0
        return (*self._local_attention(attention, call), n_fallback)

    def _adaptive_leave_one_out(self, loo, working_memory, device):
        """Exact leave-one-out attention (G, G) of the distinct inputs under the adaptive
        bandwidth (:class:`~sklearn_nw._adaptive.LeaveOneOutNeighbors`): dense, CSR for
        compact kernels; refused above ``working_memory``."""
        G = len(loo.weight)
        if 4 * G * G * 8 > working_memory * 2**20:
            raise ValueError(
                f"The leave-one-out attention of an adaptive bandwidth holds dense ({G}, "
                f"{G}) matrices, more than scikit-learn's working_memory of "
                f"{working_memory} MiB. Raise the limit with "
                "sklearn.config_context(working_memory=...)."
            )
        points = torch.as_tensor(self.search_space(loo.X), device=device)  # (G, r)
        D = exact_distances(points, points)  # (G, G)
        neighbors = LeaveOneOutNeighbors(D, torch.as_tensor(loo.weight, device=device),
                                         self.adaptive.n_neighbors)
        attention, n_fallback = neighbors.attention(self.adaptive, self.kernel,
                                                    self._n_coords())
        attention = attention.to(_torch_dtype(self.dtype))
        if self.kernel.is_compact:
            return sp.csr_array(attention.cpu().numpy()), n_fallback
        return attention, n_fallback

    def _local_attention(self, attention, call):
        """The equivalent kernels (n, n) of local fits at the keys themselves from their
        leave-one-out attention (a key's own location has no weight: the fit is exact
        leave-one-out), in chunks of rows; and the number of singular rows. Bounded fits'
        kernels depend on the key set's values (:func:`~sklearn_nw._local_poly.bound`):
        those of its own values."""
        center, keys = self._poly_keys
        n = keys.shape[0]
        p = n_terms(keys.shape[1], self.degree)
        step = chunk_rows(n, n * (2 * p + 4) * self.dtype.itemsize, call.working_memory)
        parts, n_singular = [], 0
        t = self.values.shape[1]
        for rows in gen_batches(n, step):
            _, kernel, singular = self._local_fit(
                keys[rows], keys, np.zeros((rows.stop - rows.start, t)), attention[rows],
                call.device)
            parts.append(kernel)
            n_singular += singular
        if sp.issparse(attention):
            return sp.vstack(parts, format="csr"), n_singular
        return np.concatenate(parts), n_singular

    def _leave_one_out_candidates(self, loo, working_memory):
        """Candidates for the leave-one-out attention of the distinct inputs of ``loo``
        under a compact kernel: the other inputs inside the support, found by a tree, or
        the nearest other one(s) where none is. Refuses, before storing them, more entries
        of the expanded (n, n) attention than ``working_memory`` MiB hold."""
        points = self.search_space(loo.X)  # (G, r)
        positive = np.flatnonzero(loo.weight > 0)
        Tree = KDTree if points.shape[1] <= _TREE_MAX_FEATURES else BallTree
        tree = Tree(points[positive])
        rows_per_input = np.bincount(loo.inverse, minlength=len(loo.weight))  # (G,)
        budget = int(working_memory * 2**20) // (self.dtype.itemsize + 8)
        stored = 0

        def others(query_rows, radius):
            """Indexed inputs within ``radius`` (one per query) of each query, itself out."""
            ind, dist = tree.query_radius(points[query_rows], r=radius, return_distance=True)
            ind = [positive[i] for i in ind]
            keep = [i != q for i, q in zip(ind, query_rows)]
            return [d[k] for d, k in zip(dist, keep)], [i[k] for i, k in zip(ind, keep)]

        def candidates(rows):
            nonlocal stored
            query_rows = np.arange(rows.start, rows.stop)
            dist, ind = others(query_rows, self.kernel.support * self.search_scale)
            lonely = np.flatnonzero([len(i) == 0 for i in ind])
            if len(lonely):
                # None in reach: the nearest other input(s), every tie.
                d, i = tree.query(points[query_rows[lonely]], k=min(2, len(positive)))
                itself = positive[i[:, 0]] == query_rows[lonely]
                d1 = np.where(itself, d[:, -1], d[:, 0])  # (l,)
                radius = d1 * (1.0 + 1e-9) + np.finfo(np.float64).tiny
                for j, dq, iq in zip(lonely, *others(query_rows[lonely], radius)):
                    dist[j], ind[j] = dq, iq
            stored += int(sum(rows_per_input[q] * rows_per_input[i].sum()
                              for q, i in zip(query_rows, ind)))
            if stored > budget:
                raise ValueError(
                    f"attention_weights_ would store more than {budget} nonzero weights "
                    f"(the support of {self.kernel!r} holds many training points at "
                    f"bandwidth {self.metric.tolist()}), more than scikit-learn's "
                    f"working_memory of {working_memory} MiB. Raise the limit with "
                    "sklearn.config_context(working_memory=...) or use a smaller bandwidth."
                )
            counts = np.array([len(i) for i in ind])
            dist, ind = np.concatenate(dist), np.concatenate(ind)
            return dist, ind, counts, loo.weight[ind]

        return candidates


# The one dispatch table: route -> how its queries are pooled.
_POOLS = {
    "dense": KeySet._pool_dense,
    "cell_list": KeySet._pool_support,
    "radius": KeySet._pool_searched,
    "k_nearest": KeySet._pool_searched,
    "adaptive": KeySet._pool_adaptive,
    "precomputed": KeySet._pool_stored,
}


def _transform(X, metric):
    """``X`` (n, d) divided by bandwidths or projected by ``metric``, in float64 numpy."""
    X, metric = (np.asarray(a, dtype=np.float64) for a in (X, metric))
    # torch refuses read-only memory (a memory-mapped array): those are copied.
    X, metric = (torch.from_numpy(a if a.flags.writeable else a.copy()) for a in (X, metric))
    return transform(X, 0.0, metric).numpy()


def _torch_dtype(dtype):
    return torch.float32 if dtype == np.float32 else torch.float64


def _numpy_attention(attention, n_rows, n_cols):
    """Attention as numpy: None, a dense ndarray, or a CSR array without stored zeros."""
    if attention is None:
        return None
    if isinstance(attention, tuple):
        crow, col, val = (t.cpu().numpy() for t in attention)
        attention = sp.csr_array((val, col, crow), shape=(n_rows, n_cols))
    elif not sp.issparse(attention):
        return attention.cpu().numpy()
    attention.eliminate_zeros()
    return attention


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
            f"{cumulative[short[0], -1]:g}. Store more neighbors per row or lower n_neighbors."
        )
    keep = np.clip(k - (cumulative - padded_w), 0.0, padded_w)  # (b, width)
    m = int(np.max(width - np.argmax(keep[:, ::-1] > 0, axis=1)))  # past the last kept
    padded, padded_ind, keep = padded[:, :m], padded_ind[:, :m], keep[:, :m]
    padded = np.where(np.isfinite(padded), padded, 0.0)  # padding: weight 0 at distance 0
    return padded, padded_ind, keep, np.full(b, m)
