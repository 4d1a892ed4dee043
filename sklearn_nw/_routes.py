"""Routes: the ways a query reaches the fitted keys, one object per way, built at fit.

A route is built once, by :func:`sklearn_nw._keys.build_route`, for the keys of one fit
(:class:`~sklearn_nw._keys.FittedKeys`); it owns the search index it needs, pools the values
at queries (:meth:`Route.pool`) and gives the training points' leave-one-out attention on
each other (:meth:`Route.leave_one_out_attention`). Its :attr:`~Route.name` is the fitted
estimator's ``route_``:

``"dense"``
    Sums over every key of positive weight: the eager engine in log space (a compact
    kernel's profile evaluated directly), or the compiled loop of
    :mod:`sklearn_nw._compiled`, chosen per call by ``compute`` and the compile policy
    (:class:`~sklearn_nw._routes_dense.DenseRoute`).
``"cell_list"``
    A compact kernel's support, searched on a :class:`~sklearn_nw._cells.CellList`: each
    block of queries is a dense problem against the cells around it
    (:class:`~sklearn_nw._routes_support.CellListRoute`).
``"radius"``
    A compact kernel's support, searched by scikit-learn's
    :class:`~sklearn.neighbors.KDTree` or :class:`~sklearn.neighbors.BallTree`
    (:class:`~sklearn_nw._routes_search.RadiusRoute`).
``"k_nearest"``
    The ``n_neighbors`` nearest keys (in units of sample weight), from a tree or a brute
    force search (:class:`~sklearn_nw._routes_search.KNearestRoute`).
``"adaptive"``
    Adaptive (nearest-neighbor) bandwidths: each query's distance to its k-th nearest key,
    then every key of positive weight
    (:class:`~sklearn_nw._routes_adaptive.AdaptiveRoute`).
``"precomputed"``
    Each query row's stored distances (``metric="precomputed"``), or the nearest of them
    with ``n_neighbors`` (:class:`~sklearn_nw._routes_search.PrecomputedRoute`).

Local polynomials (``degree`` 1 or 2) wrap the route they fit on
(:class:`~sklearn_nw._routes_local.LocalPolynomialRoute`) and keep its name.

This module holds what the routes share: the settings of a call, the pooled result, the
pooling of per-query candidates and the leave-one-out attention of a fixed bandwidth.
"""

import contextlib
import threading
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.neighbors import BallTree, KDTree
from sklearn.utils import gen_batches

from ._engine_candidates import candidate_pool
from ._engine_gradient import attention_jacobian
from ._leave_one_out import keep_raw_ties, leave_one_out_set
from ._uncertainty import dense_rows
from ._workers import on_workers

ROUTES = ("dense", "cell_list", "radius", "k_nearest", "adaptive", "precomputed")
# Above this many coordinates a k-d tree prunes too little: a ball tree, or no tree.
TREE_MAX_FEATURES = 15
# Queries are searched and pooled in chunks of this many.
CANDIDATE_CHUNK = 512


class PoolSettings(NamedTuple):
    """The settings of one pooling call."""

    device: torch.device
    return_attention: bool
    compute: str  # "auto", "eager" or "compiled": how the dense route sums
    working_memory: float  # MiB that chunked temporaries may take


class PooledValues(NamedTuple):
    """The values pooled at the queries, as :meth:`Route.pool` returns them (numpy)."""

    out: np.ndarray  # (n_q, t) pooled values, in the keys' dtype
    attention: object  # None, an ndarray (n_q, n_keys) or a scipy.sparse CSR array
    n_fallback: int  # queries with no key in reach, given their nearest key(s)
    n_singular: int = 0  # local polynomials: queries left at their local-constant value


class PooledWithVariance(NamedTuple):
    """The values pooled at the queries and the variances of the pooled values, as a
    route's ``pool_with_variance`` returns them (float64 numpy)."""

    out: np.ndarray  # (n_q, t) pooled values
    variance: np.ndarray  # (n_q, t) sum_i l_i**2 s_i**2, l the equivalent kernel
    n_fallback: int = 0  # queries with no key in reach, given their nearest key(s)
    n_singular: int = 0  # local polynomials: queries left at their local-constant value


class LeaveOneOutMoves(NamedTuple):
    """How the fits at some queries move without each key, as a route's
    ``leave_one_out_moves`` gives them for the jackknife+ and the conformal sets
    (:func:`~sklearn_nw._uncertainty.jackknife_plus_windows`,
    :func:`~sklearn_nw._uncertainty.conformal_sets_windows`): float64 numpy, in the units
    of the keys' values."""

    fits: np.ndarray  # (n_q, t) the fits on every key
    bound: np.ndarray  # (n_q, t) at least |move| of every key; inf where `rest`
    rest: np.ndarray  # (n_q,) bool: the queries these do not serve
    # (rows (b,), keys (m,) shared or (b, m) each row's own) -> (b, m, t): the fits
    # without each key, less `fits`
    moves: object


class GradientWeights(NamedTuple):
    """How the fit at each query moves with the query, as :meth:`Route.gradient_weights`
    returns it (numpy)."""

    weights: np.ndarray  # (n_q, n_keys, d): d f / d x_j = sum_i weights[:, i, j] v_i
    n_fallback: int  # queries with no key in reach (their fit is locally constant)
    n_singular: int = 0  # local polynomials: queries left at their local-constant slope


def nadaraya_watson_jacobian(keys, queries, attention, device, key_scale=None):
    """``d a_i / d x_j`` (b, n, d) of the attention rows ``attention`` (b, n) of
    ``queries`` (b, d), in float64 (:func:`~sklearn_nw._engine_gradient.attention_jacobian`);
    ``key_scale`` (n,) multiplies each key's distances (a sample-point bandwidth)."""
    tensor = lambda a: torch.as_tensor(np.ascontiguousarray(a, dtype=np.float64),
                                       device=device)
    diff = keys.scaled(queries)[:, None, :] - keys.scaled(keys.X)[None]  # (b, n, r)
    W = attention_jacobian(tensor(dense_rows(attention)), tensor(diff), keys.kernel,
                           tensor(keys.coordinate_jacobian()),
                           None if key_scale is None else tensor(key_scale))
    return W.cpu().numpy()


def one_hot_classes(values):
    """Each row's class (n,) int64 where the rows of ``values`` (n, t) are one-hot
    vectors (a classifier's), else None."""
    values = np.asarray(values)
    if values.ndim != 2 or values.shape[1] < 2:
        return None
    classes = np.argmax(values, axis=1)
    one_hot = np.zeros_like(values)
    one_hot[np.arange(len(values)), classes] = 1
    return classes if np.array_equal(values, one_hot) else None


def torch_dtype(dtype):
    return torch.float32 if dtype == np.float32 else torch.float64


def csr_from_parts(parts, shape, dtype):
    """A CSR array of ``shape`` and ``dtype`` from parts ``(rows, counts, columns, values)``: each
    part's entries grouped by its ``rows`` (distinct), ``counts`` of them for each; a row
    may have entries in several parts. Each row's columns stay in the parts' order (the
    indices are not sorted: :meth:`~sklearn_nw._base.NadarayaWatsonBase._pool` sorts
    what it returns to users); no sort of the entries: a scatter, or the parts joined
    where each row is in one of them, in order."""
    if parts and sum(len(part[0]) for part in parts) == shape[0] and np.array_equal(
            np.concatenate([part[0] for part in parts]), np.arange(shape[0])):
        # Each row in one part, in order (every query reached in one pass): joined.
        indptr = np.concatenate([[0], np.cumsum(np.concatenate([p[1] for p in parts]))])
        return sp.csr_array((np.concatenate([p[3] for p in parts]).astype(dtype, copy=False),
                             np.concatenate([p[2] for p in parts]), indptr), shape=shape)
    counts = np.zeros(shape[0], dtype=np.int64)
    for rows, part_counts, _, _ in parts:
        counts[rows] += part_counts
    indptr = np.concatenate([[0], np.cumsum(counts)])  # (n_rows + 1,)
    indices = np.empty(indptr[-1], dtype=np.int64)
    data = np.empty(indptr[-1], dtype=dtype)
    filled = indptr[:-1].copy()  # (n_rows,) where each row's next entry goes
    for rows, part_counts, columns, values in parts:
        # Entry j of a row goes to its next free place, the row's entries in order.
        first = np.cumsum(part_counts) - part_counts  # (m,) each row's first entry
        at = np.repeat(filled[rows] - first, part_counts) + np.arange(len(columns))
        indices[at], data[at] = columns, values
        filled[rows] += part_counts
    return sp.csr_array((data, indices, indptr), shape=shape)


def numpy_attention(attention, n_rows, n_cols):
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


def pooled_values(out, attention, n_fallback, n_queries, n_keys):
    """The engine's result (``out`` a tensor (n_queries, t)) as :class:`PooledValues`."""
    return PooledValues(out.cpu().numpy(), numpy_attention(attention, n_queries, n_keys),
                        n_fallback)


class Route:
    """How queries reach the keys of one fit: its index, its pooling and its leave-one-out
    attention.

    A route is built for the keys of one fit (:class:`~sklearn_nw._keys.FittedKeys`),
    which hold it and hand themselves to each call; it keeps no reference to them (the
    fitted state holds no cycle).

    Parameters
    ----------
    keys : FittedKeys
        The keys the route is built for.

    Attributes
    ----------
    name : str
        One of :data:`ROUTES`: the fitted estimator's ``route_``.
    index : CellList, TreeSearch or None
        The search index of the keys of positive weight, in the search space
        (:meth:`~sklearn_nw._keys.FittedKeys.search_space`).
    attention_is_sparse : bool
        Whether :meth:`pool` gives the attention as a CSR array; else a dense
        (n_queries, n_keys) one.
    leave_one_out_is_sparse : bool
        Whether :meth:`leave_one_out_attention` gives a CSR array; else a dense (n, n) one.
    key_bandwidth : ndarray of shape (n,) or None
        A sample-point bandwidth's ``c d_k(x_i)`` per key, in the search space; None when
        every key shares the keys' metric.
    """

    name = None
    index = None
    key_bandwidth = None

    def leave_one_out_session(self):
        """A context in which the fits without each row at several chunks of queries
        share what depends on the keys alone (nothing here): see
        :meth:`~sklearn_nw._routes_adaptive.AdaptiveRoute.leave_one_out_session`."""
        return contextlib.nullcontext()

    def __init__(self, keys):
        self.attention_is_sparse = keys.kernel.is_compact
        self.leave_one_out_is_sparse = keys.kernel.is_compact

    def pool(self, keys, queries, settings):
        """Attention-weighted average of the keys' values at ``queries``.

        Parameters
        ----------
        keys : FittedKeys
            The keys the route was built for.
        queries : ndarray of shape (n_q, d)
            In the keys' dtype (distances to the keys for ``"precomputed"``).
        settings : PoolSettings

        Returns
        -------
        PooledValues
        """
        raise NotImplementedError

    def gradient_weights(self, keys, queries, settings):
        """How the fit at ``queries`` moves with each coordinate of the query: the
        derivative of its attention rows (:func:`nadaraya_watson_jacobian`), the
        attention of :meth:`pool`; a :class:`GradientWeights`. Where the keys in reach
        change (a compact kernel's support, the k nearest) it is the derivative with
        them held: the fit's own wherever they do not change."""
        pooled = self.pool(keys, queries, settings._replace(return_attention=True))
        weights = nadaraya_watson_jacobian(keys, queries, pooled.attention, settings.device,
                                           self.key_scale(keys))
        return GradientWeights(weights, pooled.n_fallback)

    def key_scale(self, keys):
        """What each key's distances are multiplied by (n,), or None (all by 1)."""
        return None

    def leave_one_out_attention(self, keys, settings, estimator_name):
        """Attention of the keys on each other, each key left out with all the mass at its
        location: ``(attention, n_fallback, n_singular)``, the attention (n, n) dense, or
        CSR when :attr:`leave_one_out_is_sparse`.

        The distinct inputs attend each other (:func:`~sklearn_nw._leave_one_out.leave_one_out_set`)
        and their attention is expanded to the training rows; ``estimator_name`` is named
        in the error for fewer than two of them.
        """
        n = keys.X.shape[0]
        none = np.zeros((n, 0), dtype=keys.dtype)
        loo = leave_one_out_set(keys.X, none, keys.sample_weight, estimator_name=estimator_name)
        G = len(loo.weight)
        values = np.zeros((G, 0), dtype=keys.dtype)
        attention, n_fallback = self._leave_one_out_inputs(keys, loo, values, settings)
        attention = loo.expand_attention(numpy_attention(attention, G, G), keys.sample_weight,
                                         keys.dtype)
        return attention, n_fallback, 0

    def _leave_one_out_inputs(self, keys, loo, values, settings):
        """The leave-one-out attention (G, G) of the distinct inputs of ``loo`` under the
        keys' fixed bandwidth, and its fallback count: a compact kernel's found by a tree
        (no dense block is formed), else every key's."""
        if keys.kernel.is_compact:
            candidates = leave_one_out_candidates(keys, loo, settings.working_memory)
            _, attention, n_fallback = pool_candidates(keys, len(loo.weight), candidates,
                                                       keys.search_scale, settings,
                                                       values=values)
            return attention, n_fallback
        _, attention, n_fallback = keys.attend_leave_one_out(loo, values, settings)
        return attention, n_fallback


def pool_candidates(keys, n_q, candidates, scale, settings, values=None,
                    chunk=CANDIDATE_CHUNK):
    """Attention restricted to each query's candidates, in chunks of queries: the pooled
    values (n_q, t), the attention as CSR tensors (or None) and the fallback count.

    ``candidates(rows)`` gives, for a slice of query rows, the distances (``scale``
    times the scaled ones), the keys and the counts per query of their candidates (CSR
    layout), and the sample weight of each pair (None for unit weights). ``values`` are
    pooled instead of the keys' when given.
    """
    device = settings.device
    tensor = lambda a: keys.tensor(a, device)
    values = tensor(keys.values if values is None else values)

    def index(a):
        return torch.as_tensor(a, dtype=torch.long, device=device)

    def pool_chunk(rows, _):
        dist, ind, counts, pair_w = candidates(rows)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        with np.errstate(divide="ignore"):
            pair_log_w = None if pair_w is None else tensor(np.log(pair_w))
        return candidate_pool(
            tensor(dist), index(ind), index(indptr), values, keys.kernel,
            scale=scale, log_w=pair_log_w, return_attention=settings.return_attention,
            exact_zeros=keys.exact_zeros,
        )

    # Each chunk (its search and its pooling) on a worker (see sklearn_nw._workers).
    parts = on_workers(gen_batches(n_q, chunk), pool_chunk, device)
    if len(parts) == 1:  # small calls: nothing to stitch
        return parts[0]
    out = torch.cat([p.out for p in parts])
    attention = None
    if settings.return_attention:
        offsets = np.cumsum([0] + [len(p.attention[1]) for p in parts[:-1]])
        indptr = torch.cat([parts[0].attention[0][:1]]
                           + [p.attention[0][1:] + int(o) for p, o in zip(parts, offsets)])
        attention = (indptr, torch.cat([p.attention[1] for p in parts]),
                     torch.cat([p.attention[2] for p in parts]))
    return out, attention, sum(p.n_fallback for p in parts)


def leave_one_out_candidates(keys, loo, working_memory):
    """Candidates for the leave-one-out attention of the distinct inputs of ``loo`` under
    a compact kernel: the other inputs inside the support, found by a tree, or the nearest
    other one(s) where none is. Refuses, before storing them, more entries of the
    expanded (n, n) attention than ``working_memory`` MiB hold."""
    points = keys.search_space(loo.X)  # (G, r)
    positive = np.flatnonzero(loo.weight > 0)
    Tree = KDTree if points.shape[1] <= TREE_MAX_FEATURES else BallTree
    tree = Tree(points[positive])
    rows_per_input = np.bincount(loo.inverse, minlength=len(loo.weight))  # (G,)
    budget = int(working_memory * 2**20) // (keys.dtype.itemsize + 8)
    stored = 0
    counting = threading.Lock()  # the chunks run on the workers

    def others(query_rows, radius):
        """Indexed inputs within ``radius`` (one per query) of each query, itself out."""
        ind, dist = tree.query_radius(points[query_rows], r=radius, return_distance=True)
        ind = [positive[i] for i in ind]
        keep = [i != q for i, q in zip(ind, query_rows)]
        return [d[k] for d, k in zip(dist, keep)], [i[k] for i, k in zip(ind, keep)]

    def candidates(rows):
        nonlocal stored
        query_rows = np.arange(rows.start, rows.stop)
        dist, ind = others(query_rows, keys.kernel.support * keys.search_scale)
        unreached = np.flatnonzero([len(i) == 0 for i in ind])
        if len(unreached):
            # None in reach: the nearest other input(s), every tie.
            d, i = tree.query(points[query_rows[unreached]], k=min(2, len(positive)))
            itself = positive[i[:, 0]] == query_rows[unreached]
            d1 = np.where(itself, d[:, -1], d[:, 0])  # (l,)
            radius = d1 * (1.0 + 1e-9) + np.finfo(np.float64).tiny
            # Every tie of the raw differences, as the dense fallback keeps them.
            d_l, i_l = keep_raw_ties(loo.X[query_rows[unreached]],
                                     *others(query_rows[unreached], radius), loo.X,
                                     keys.metric, keys.dtype)
            for j, dq, iq in zip(unreached, d_l, i_l):
                dist[j], ind[j] = dq, iq
        entries = int(sum(rows_per_input[q] * rows_per_input[i].sum()
                          for q, i in zip(query_rows, ind)))
        with counting:
            stored += entries
            over = stored > budget
        if over:
            raise ValueError(
                f"attention_weights_ would store more than {budget} nonzero weights "
                f"(the support of {keys.kernel!r} holds many training points at "
                f"bandwidth {keys.metric.tolist()}), more than scikit-learn's "
                f"working_memory of {working_memory} MiB. Raise the limit with "
                "sklearn.config_context(working_memory=...) or use a smaller bandwidth."
            )
        counts = np.array([len(i) for i in ind])
        dist, ind = np.concatenate(dist), np.concatenate(ind)
        return dist, ind, counts, loo.weight[ind]

    return candidates
