"""The fitted keys: the training points as attention sees them, with their route, built once
at fit.

An estimator's ``fit`` resolves the kernel and the bandwidth, then builds one
:class:`FittedKeys`: the keys (training inputs) with their weights, the values that attention
pools, the metric, and the route a prediction takes (:mod:`sklearn_nw._routes`), which
:func:`build_route` resolves once, with the search index it needs. ``predict`` hands query
arrays to :meth:`FittedKeys.pool`, which the route computes; tensors exist only inside that
call.

Everything is numpy at rest, so fitted keys pickle without torch state; the keys are
handed to torch without a copy where dtype and device allow.
"""

import numpy as np
import torch

from ._cells import CellList
from ._engine import attention_pool, transform
from ._routes import TREE_MAX_FEATURES, PoolSettings, torch_dtype
from ._routes_adaptive import AdaptiveRoute
from ._routes_dense import DenseRoute
from ._routes_local import LocalPolynomialRoute
from ._routes_search import KNearestRoute, PrecomputedRoute, RadiusRoute
from ._routes_support import CellListRoute
from ._search import TreeSearch
from ._workers import serial_if_small

# Radius search for compact kernels from this many training points (algorithm="auto"): a
# cell list up to _CELL_MAX_FEATURES dimensions, a tree up to TREE_MAX_FEATURES.
_TREE_MIN_SAMPLES = 5000
_CELL_MAX_FEATURES = 3
# algorithm="auto" searches a compact kernel's support with a tree only when it holds at
# most this fraction of the keys (estimated at fit on _REACH_SAMPLE keys); above, the dense
# sums are faster (measured in 8-D, 5,000 keys, 3% in reach: 0.05 s dense, 0.6 s on the
# k-d tree: a tree visits many nodes in many dimensions).
_RADIUS_MAX_REACH = 0.002
_REACH_SAMPLE = 32


class FittedKeys:
    """The keys, weights, values and metric of a fitted estimator, and their route.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The keys: training inputs (float64 or float32, the dtype of every computation), or
        for ``precomputed`` the training distances.
    sample_weight : ndarray of shape (n,)
        Frequency weights; a key of zero weight never receives attention.
    values : ndarray of shape (n, t)
        What attention pools: scaled targets, or one-hot labels.
    metric : ndarray of shape (d,) or (d, r)
        Bandwidths, or a learned projection (distances ``||(q - x) @ metric||``); for
        ``precomputed`` one number, the bandwidth in the distances' unit.
    kernel : Kernel
    algorithm, n_neighbors, compute, precomputed, adaptive, degree, bounded
        What the route is resolved from (:func:`build_route`).
    exact_zeros : bool
        Weights that underflow are exactly 0 (class probabilities); else they may be as
        large as ``exp(log(tiny) + 10)``, negligible in a weighted mean.
    center : ndarray of shape (d,), default=None
        Where the dense route centers the keys (by default the median of those of positive
        weight): the shards of one training set share one
        (:meth:`~sklearn_nw._routes_dense.DenseRoute.partial_pool`).

    Attributes
    ----------
    route : Route
        The route resolved at fit (:func:`build_route`); ``route.name`` is the estimator's
        ``route_``.
    search_scale : float
        The search space's unit: the metric divided by its largest bandwidth, where
        distances neither overflow nor lose their order at bandwidths near the smallest
        float (1 for a learned projection; the bandwidth for precomputed distances).
    """

    def __init__(self, X, sample_weight, values, metric, kernel, *, algorithm="brute",
                 n_neighbors=None, compute="auto", precomputed=False, adaptive=None, degree=0,
                 bounded=False, exact_zeros=False, center=None, polynomial_columns=None):
        self.X = X
        self.dtype = X.dtype
        self.sample_weight = sample_weight
        self.values = np.asarray(values, dtype=self.dtype)
        self.metric = np.asarray(metric, dtype=np.float64)
        self.kernel = kernel
        self.exact_zeros = exact_zeros
        self.center = center
        self.degree = degree
        self.polynomial_columns = polynomial_columns
        with np.errstate(divide="ignore"):
            self.log_w = np.log(sample_weight).astype(self.dtype)  # (n,)
        if precomputed:
            self.search_scale = float(self.metric[0])
        else:
            self.search_scale = 1.0 if self.metric.ndim == 2 else float(self.metric.max())
        # What the route was resolved from: keys of fewer rows are built alike (:meth:`subset`).
        self.options = {
            "algorithm": algorithm, "n_neighbors": n_neighbors, "compute": compute,
            "precomputed": precomputed, "adaptive": adaptive, "degree": degree,
            "bounded": bounded, "exact_zeros": exact_zeros, "center": center,
            "polynomial_columns": polynomial_columns}
        self.precomputed = precomputed
        self.route = build_route(self, algorithm=algorithm, n_neighbors=n_neighbors,
                                 compute=compute, precomputed=precomputed, adaptive=adaptive,
                                 degree=degree, bounded=bounded)

    @property
    def index(self):
        """The route's search index (a cell list, a tree or brute-force search), or None."""
        return self.route.index

    @property
    def n_coords(self):
        """The coordinates of the metric: features, or the projection's components."""
        return self.metric.shape[1] if self.metric.ndim == 2 else self.X.shape[1]

    @property
    def continuous_coords(self):
        """The leading coordinates that are continuous features' (all but categorical
        features' embedded columns, :mod:`sklearn_nw._categorical`): those local
        polynomials fit and adaptive bandwidths measure and scale."""
        return self.n_coords if self.polynomial_columns is None else self.polynomial_columns

    @property
    def n_local_terms(self):
        """The parameters of each query's local fit: 1 for Nadaraya-Watson (a local
        constant), else the terms of the local polynomial in its coordinates."""
        if not self.degree:
            return 1
        r = self.continuous_coords
        return 1 + r + (r * (r + 1) // 2 if self.degree >= 2 else 0)

    def subset(self, keep):
        """The keys of the rows ``keep`` (a boolean mask (n,)) alone, with the same metric,
        kernel and options: what a refit on those rows at this bandwidth holds. For
        precomputed distances, queries must then keep the columns ``keep`` only."""
        X = self.X[keep][:, keep] if self.precomputed else self.X[keep]
        return FittedKeys(X, self.sample_weight[keep], self.values[keep], self.metric,
                          self.kernel, **self.options)

    def nadaraya_watson(self, metric):
        """Keys like these with another ``metric``, pooling by plain attention (degree
        0, unbounded): the attention of a local fit at another bandwidth."""
        options = {**self.options, "degree": 0, "bounded": False}
        return FittedKeys(self.X, self.sample_weight, self.values, metric, self.kernel,
                          **options)

    # -- the metric ------------------------------------------------------------------------

    def scaled(self, X):
        """Inputs (float64) in the kernel's metric: divided by the bandwidths, or projected
        (the engine's :func:`~sklearn_nw._engine.transform`, not centered)."""
        return _transform(X, self.metric)

    def coordinate_jacobian(self):
        """``d scaled(x) / d x`` (d, r): the diagonal of ``1 / h``, or the projection."""
        return np.diag(1.0 / self.metric) if self.metric.ndim == 1 else self.metric

    def search_space(self, X):
        """Inputs in the searches' space: :meth:`scaled` times ``search_scale``."""
        if self.metric.ndim == 2:
            return self.scaled(X)
        return _transform(X, self.metric / self.search_scale)

    def tensor(self, a, device):
        """``a`` as a tensor in the keys' dtype: a view of it on the CPU when it has that
        dtype and is writable (torch refuses read-only memory)."""
        a = np.asarray(a)
        if not a.flags.writeable:
            return torch.tensor(a, dtype=torch_dtype(self.dtype), device=device)
        return torch.as_tensor(a, dtype=torch_dtype(self.dtype), device=device)

    # -- attention over every key: what each route computes, or falls back to -------------

    def attend(self, queries, settings, *, prepared=None):
        """The log-space engine's attention of ``queries`` on every key of positive weight
        (:func:`~sklearn_nw._engine.attention_pool`; a query whose weights all underflow
        gets its nearest key(s)), with the keys' ``prepared`` tensors when given; the
        engine's result, tensors."""
        tensor = lambda a: self.tensor(a, settings.device)
        return attention_pool(
            tensor(queries), tensor(self.X), tensor(self.values), tensor(self.metric),
            self.kernel, log_w=tensor(self.log_w), return_attention=settings.return_attention,
            exact_zeros=self.exact_zeros, working_memory=settings.working_memory,
            keys=prepared,
        )

    def attend_leave_one_out(self, loo, values, settings):
        """:meth:`attend` of the distinct inputs of ``loo`` (a
        :class:`~sklearn_nw._leave_one_out.LeaveOneOutSet`) on each other, each left out
        with all the mass at its location, pooling ``values``; the attention is dense."""
        tensor = lambda a: self.tensor(a, settings.device)
        return attention_pool(
            tensor(loo.X), tensor(loo.X), tensor(values), tensor(self.metric),
            self.kernel, log_w=tensor(loo.log_weight),
            self_log_w=tensor(loo.self_log_weight), return_attention=True,
            working_memory=settings.working_memory,
        )

    # -- what the estimators ask ----------------------------------------------------------

    def pool(self, queries, *, return_attention=False, compute="auto", device="cpu",
             working_memory=1024):
        """Attention-weighted average of the values at ``queries``, on the route.

        Parameters
        ----------
        queries : ndarray of shape (n_q, d)
            In the keys' dtype (distances to the keys for ``"precomputed"``).
        return_attention : bool
            Also return the attention: dense, or CSR when ``route.attention_is_sparse``.
        compute : {"auto", "eager", "compiled"}
            How the dense route computes its sums when no attention is asked for.
        device : torch.device or str
        working_memory : float
            MiB that chunked temporaries may take.

        Returns
        -------
        PooledValues
        """
        settings = PoolSettings(torch.device(device), return_attention, compute,
                                working_memory)
        with serial_if_small(queries.shape[0] * self.X.shape[0], settings.device):
            return self.route.pool(self, queries, settings)

    def pool_with_variance(self, queries, variance, *, device="cpu", working_memory=1024):
        """The predictions at ``queries`` and the variances ``sum_i l_i**2 s_i**2`` of the
        targets' ``variance`` (n, t) without an attention matrix (a
        :class:`~sklearn_nw._routes.PooledWithVariance`), where the route computes them from
        sums (:meth:`~sklearn_nw._routes_dense.DenseRoute.pool_with_variance`) or moments
        (:meth:`~sklearn_nw._routes_local.LocalPolynomialRoute.pool_with_variance`); else
        None."""
        method = getattr(self.route, "pool_with_variance", None)
        return None if method is None else method(self, queries, variance, device=device,
                                                  working_memory=working_memory)

    def in_sample_with_leverage(self, *, device="cpu", working_memory=1024):
        """The keys' in-sample fits and own weights from sums or moments where the route
        has them (:meth:`~sklearn_nw._routes_dense.DenseRoute.in_sample_with_leverage`,
        :meth:`~sklearn_nw._routes_local.LocalPolynomialRoute.in_sample_with_leverage`);
        else None."""
        method = getattr(self.route, "in_sample_with_leverage", None)
        return None if method is None else method(self, device=device,
                                                  working_memory=working_memory)

    def leave_one_out_moves(self, queries, *, device="cpu", working_memory=1024):
        """How the fits at ``queries`` move without each key, for the jackknife+, where
        the route computes it from sums (a :class:`~sklearn_nw._routes.LeaveOneOutMoves`:
        :meth:`~sklearn_nw._routes_dense.DenseRoute.leave_one_out_moves`,
        :meth:`~sklearn_nw._routes_local.LocalPolynomialRoute.leave_one_out_moves`); else
        None."""
        method = getattr(self.route, "leave_one_out_moves", None)
        return None if method is None else method(self, queries, device=device,
                                                  working_memory=working_memory)

    def leave_one_out_block_moves(self, queries):
        """How the fits at a block of ``queries`` move without each key, held for that
        block (a :class:`~sklearn_nw._routes.LeaveOneOutMoves`:
        :meth:`~sklearn_nw._routes_adaptive.AdaptiveRoute.leave_one_out_block_moves`,
        the sample-point bandwidth's); else None."""
        if not self.leave_one_out_blocks:
            return None
        return self.route.leave_one_out_block_moves(self, queries)

    @property
    def leave_one_out_blocks(self):
        """Whether :meth:`leave_one_out_block_moves` gives the moves: Nadaraya-Watson under
        a sample-point bandwidth, keys of one weight, float64."""
        return getattr(self.route, "leave_one_out_blocks", False)

    def gradient_weights(self, queries, *, device="cpu", working_memory=1024):
        """How the fit at ``queries`` moves with each coordinate: the weights (n_q, n, d)
        of the values in its derivative (Nadaraya-Watson), or in the local polynomial's
        slopes, on the route (:meth:`~sklearn_nw._routes.Route.gradient_weights`); a
        :class:`~sklearn_nw._routes.GradientWeights`."""
        settings = PoolSettings(torch.device(device), True, "eager", working_memory)
        with serial_if_small(queries.shape[0] * self.X.shape[0], settings.device):
            return self.route.gradient_weights(self, queries, settings)

    def leave_one_out_local_fits(self, queries, *, device="cpu", working_memory=1024):
        """Local polynomial fits (``degree`` 1 or 2) at ``queries`` without each key, at
        this bandwidth: ``(fits, missing)`` of
        :meth:`~sklearn_nw._routes_local.LocalPolynomialRoute.leave_one_out_fits`."""
        settings = PoolSettings(torch.device(device), True, "eager", working_memory)
        return self.route.leave_one_out_fits(self, queries, settings)

    def leave_one_out_sparse_local_fits(self, queries, values, *, device="cpu",
                                        working_memory=1024):
        """Local polynomial fits of ``values`` (n, t) at ``queries`` without each key in
        reach of a compact kernel: ``(own, fits, held, missing, singular)`` of
        :meth:`~sklearn_nw._routes_local.LocalPolynomialRoute.leave_one_out_sparse_fits`,
        or None where the route has no such fits."""
        if not self.leave_one_out_in_reach:
            return None
        settings = PoolSettings(torch.device(device), True, "eager", working_memory)
        return self.route.leave_one_out_sparse_fits(self, queries, values, settings)

    @property
    def leave_one_out_in_reach(self):
        """Whether :meth:`leave_one_out_sparse_local_fits` has fits to give: unbounded
        local polynomials on a compact kernel's keys in reach, at a fixed bandwidth."""
        return getattr(self.route, "leave_one_out_in_reach", False)

    def leave_one_out_nearest_fits(self, queries, values, *, device="cpu",
                                   working_memory=1024, rows=None):
        """The fits of ``values`` (n, t) at ``queries`` without each of their k nearest
        keys (``n_neighbors``), as refits find the k nearest of the others: ``(own, fits,
        held, missing)`` of
        :meth:`~sklearn_nw._routes_search.KNearestRoute.leave_one_out_held_fits` (with
        ``rows``, each query's own training row: at least the fits without it)."""
        settings = PoolSettings(torch.device(device), True, "eager", working_memory)
        return self.route.leave_one_out_held_fits(self, queries, values, settings, rows)

    @property
    def leave_one_out_nearest(self):
        """Whether :meth:`leave_one_out_nearest_fits` gives the fits without each key:
        Nadaraya-Watson on the k nearest keys (``n_neighbors``, not precomputed)."""
        return hasattr(self.route, "leave_one_out_held_fits")

    def leave_one_out_session(self):
        """A context in which the fits without each row at several chunks of queries
        share what the route finds from the keys alone
        (:meth:`~sklearn_nw._routes.Route.leave_one_out_session`)."""
        return self.route.leave_one_out_session()

    def leave_one_out_adaptive_fits(self, queries, values, *, device="cpu",
                                    working_memory=1024):
        """The fits of ``values`` (n, t) at ``queries`` without each key under an adaptive
        bandwidth, as refits without it: ``(fits, missing)`` of
        :meth:`~sklearn_nw._routes_adaptive.AdaptiveRoute.leave_one_out_fits`."""
        settings = PoolSettings(torch.device(device), True, "eager", working_memory)
        return self.route.leave_one_out_fits(self, queries, settings, values)

    def leave_one_out_adaptive_own_fits(self, values, *, device="cpu", working_memory=1024):
        """Each key's fit of ``values`` (n, t) at its own input without it under an
        adaptive bandwidth, as a refit: ``(fits, missing)`` of
        :meth:`~sklearn_nw._routes_adaptive.AdaptiveRoute.leave_one_out_own_fits`."""
        settings = PoolSettings(torch.device(device), True, "eager", working_memory)
        return self.route.leave_one_out_own_fits(self, settings, values)

    def leave_one_out_attention(self, *, device="cpu", working_memory=1024,
                                estimator_name="attention_weights_"):
        """Attention of the keys on each other, each key left out with all the mass at its
        location (:meth:`~sklearn_nw._routes.Route.leave_one_out_attention`):
        ``(attention, n_fallback, n_singular)``."""
        settings = PoolSettings(torch.device(device), True, "eager", working_memory)
        return self.route.leave_one_out_attention(self, settings, estimator_name)


def build_route(keys, *, algorithm, n_neighbors, compute, precomputed, adaptive, degree,
                bounded):
    """The route of ``keys``, final: its search index built, the fallbacks of
    ``algorithm="auto"`` already taken.

    Parameters
    ----------
    keys : FittedKeys
    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "cell_list"}
    n_neighbors : int or None
        The k of ``"k_nearest"``, or of the nearest stored distances (``"precomputed"``).
    compute : {"auto", "eager", "compiled"}
    precomputed : bool
        ``keys.X`` holds the training distances.
    adaptive : Adaptive or None
        An adaptive bandwidth: its kind, k and c.
    degree : int
        0 pools the values (Nadaraya-Watson); 1 or 2 fits a local polynomial of that
        degree on the route's attention (:class:`LocalPolynomialRoute`).
    bounded : bool
        Local fits kept within the range of the values carrying their weight.

    Returns
    -------
    Route

    Notes
    -----
    ``algorithm="auto"`` searches a compact kernel's support from ``_TREE_MIN_SAMPLES``
    training points: on a cell list up to three coordinates, a k-d tree up to
    ``TREE_MAX_FEATURES``; below, or above, the dense sums are faster. A cell list on data
    too spread out for a grid falls back to a k-d tree, and a tree whose support holds
    too many keys to the dense sums; an explicit ``algorithm`` is kept.
    """
    if degree and precomputed:
        raise ValueError("Local polynomials need coordinates, not precomputed distances.")
    route = _nadaraya_watson_route(keys, algorithm=algorithm, n_neighbors=n_neighbors,
                                   compute=compute, precomputed=precomputed,
                                   adaptive=adaptive)
    return LocalPolynomialRoute(route, keys, degree, bounded) if degree else route


def _nadaraya_watson_route(keys, *, algorithm, n_neighbors, compute, precomputed, adaptive):
    """The route of the pooling itself (degree 0)."""
    if precomputed:
        return PrecomputedRoute(keys, n_neighbors)
    if adaptive is None and n_neighbors is None:
        return _support_route(keys, algorithm=algorithm, compute=compute)
    rows, points = _indexed(keys)
    if adaptive is not None:  # the neighbors of the continuous features
        return AdaptiveRoute(keys, adaptive,
                             TreeSearch(points[:, :keys.continuous_coords], algorithm), rows)
    index = TreeSearch(points, algorithm)
    return KNearestRoute(keys, index, rows, n_neighbors)


def _support_route(keys, *, algorithm, compute):
    """Sums over every key, or a search of a compact kernel's support."""
    if not keys.kernel.is_compact or algorithm == "brute" or compute == "compiled":
        return DenseRoute(keys)
    explicit = algorithm != "auto"
    if not explicit:
        if keys.X.shape[0] < _TREE_MIN_SAMPLES or keys.n_coords > TREE_MAX_FEATURES:
            return DenseRoute(keys)
        algorithm = "cell_list" if keys.n_coords <= _CELL_MAX_FEATURES else "kd_tree"
    rows, points = _indexed(keys)
    if algorithm == "cell_list":
        try:
            cells = CellList(points, keys.kernel.support * keys.search_scale)
        except ValueError:
            if explicit:
                raise
            algorithm = "kd_tree"  # too spread out for a grid
        else:
            return CellListRoute(keys, cells, rows)
    index = TreeSearch(points, algorithm)
    if not explicit and _reach(keys, index, points) > _RADIUS_MAX_REACH:
        return DenseRoute(keys)  # the support holds too many keys for a search to pay
    return RadiusRoute(keys, index, rows)


def _indexed(keys):
    """The keys a search indexes, those of positive weight (zero weight = no row): their
    rows, and their points in the search space."""
    rows = np.flatnonzero(keys.sample_weight > 0)
    every = len(rows) == keys.X.shape[0]
    return rows, keys.search_space(keys.X if every else keys.X[rows])


def _reach(keys, index, points):
    """The fraction of the indexed keys within a compact kernel's support of a key,
    estimated on ``_REACH_SAMPLE`` keys spread over the index."""
    sample = points[np.linspace(0, len(points) - 1, _REACH_SAMPLE).astype(int)]
    counts = index.tree.query_radius(sample, r=keys.kernel.support * keys.search_scale,
                                     count_only=True)
    return float(np.mean(counts)) / len(points)


def _transform(X, metric):
    """``X`` (n, d) divided by bandwidths or projected by ``metric``, in float64 numpy."""
    X, metric = (np.asarray(a, dtype=np.float64) for a in (X, metric))
    # torch refuses read-only memory (a memory-mapped array): those are copied.
    X, metric = (torch.from_numpy(a if a.flags.writeable else a.copy()) for a in (X, metric))
    return transform(X, 0.0, metric).numpy()
