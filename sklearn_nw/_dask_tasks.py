"""The tasks of :mod:`sklearn_nw.dask` that run on the workers: validation and statistics
of the training blocks, the shards (one :class:`~sklearn_nw._keys.FittedKeys` per block) and
their partial sums, and the pairwise merge of futures. Numpy in, numpy out."""

from typing import NamedTuple

import numpy as np
from sklearn.utils.validation import _check_sample_weight, check_array, check_non_negative

from . import _leave_one_out
from ._engine_partial import PartialSums
from ._keys import FittedKeys
from ._shards import (
    finish,
    leave_one_out_losses,
    leave_one_out_sum,
    leave_one_out_terms,
    merge,
)
from .kernels import Kernel


class ShardSettings(NamedTuple):
    """What every shard and query block shares, sent with each task."""

    kernel: Kernel
    metric: np.ndarray  # (d,) bandwidths
    center: np.ndarray  # (d,) the mean of the training inputs of positive weight
    dtype: np.dtype
    classes: object  # (c,) class labels, or None for a regressor
    offset: object  # (t,) the regressor's targets' weighted mean, or None
    scale: float  # the regressor's targets' largest deviation from it
    one_output: bool  # the regressor's y was 1-D
    working_memory: float


def check_block(X, y, w, dtype, classifier):
    """A block of training rows, validated by scikit-learn's helpers: X in ``dtype``, the
    weights float64 and non-negative, the targets float64 for a regressor, as given for
    a classifier."""
    X = check_array(X, dtype=dtype)
    # A block may weigh nothing: the fit refuses a training set that does, once, over
    # every block.
    w = _check_sample_weight(w, X, dtype=np.float64, allow_all_zero_weights=True)
    # Not ensure_non_negative=True: its message quotes `sample_weight` in backticks,
    # and sklearn_nw.dask's has always named it plainly.
    check_non_negative(w, "sample_weight")
    if classifier:
        y = check_array(y, ensure_2d=False, dtype=None, ensure_min_samples=0)
    else:
        y = check_array(y, ensure_2d=False, dtype=np.float64, ensure_min_samples=0)
    return X, y, w


def first_moments(X, y, w, dtype, classifier):
    """Pass 1 over a block: the sums that the center, the mean, the rules of thumb and
    the classes need (and the block's validation)."""
    X, y, w = check_block(X, y, w, dtype, classifier)
    live = X[w > 0]
    Xd = X.astype(np.float64)
    return {
        "n_rows": X.shape[0], "weight": w.sum(), "wx": w @ Xd, "live_x": live.sum(0, np.float64),
        "n_live": live.shape[0],
        "lo": live.min(0) if len(live) else np.full(X.shape[1], np.inf),
        "hi": live.max(0) if len(live) else np.full(X.shape[1], -np.inf),
        "classes": np.unique(y) if classifier else None,
        "wy": None if classifier else w @ y.reshape(len(y), -1),
    }


def second_moments(X, y, w, mean, offset, dtype, classifier):
    """Pass 2: weighted squared deviations from the mean, and the targets' largest
    deviation from their mean (over rows of positive weight)."""
    X, y, w = check_block(X, y, w, dtype, classifier)
    dev = w @ (X.astype(np.float64) - mean) ** 2
    spread = 0.0
    if not classifier and np.any(w > 0):
        spread = float(np.abs(y.reshape(len(y), -1)[w > 0] - offset).max())
    return dev, spread


class Shard(NamedTuple):
    key_set: FittedKeys  # the shard's keys, weights and values, route "dense" (or WeightlessKeys)
    y: np.ndarray  # the targets as given (for to_local)


class WeightlessKeys(NamedTuple):
    """The keys of a block whose sample weights are all zero, in a :class:`Shard`'s place
    of a :class:`FittedKeys` (which needs a key of positive weight): they give no query any
    kernel weight, and their rows are kept for ``to_local`` and as the leave-one-out
    grid's queries (of weight zero)."""

    X: np.ndarray  # (n, d)
    sample_weight: np.ndarray  # (n,) zeros
    values: np.ndarray  # (n, t)
    metric: np.ndarray  # (d,) bandwidths
    exact_zeros: bool

    def partial_pool(self, queries, *, leave_out_equal=False, working_memory=None):
        """Nothing, nowhere: what :meth:`DenseRoute.partial_pool` gives for such keys."""
        n_q = queries.shape[0]
        return PartialSums(np.zeros((n_q, self.values.shape[1])), np.full(n_q, -np.inf),
                           np.full(n_q, np.inf), np.full(n_q, -np.inf))


def encode(y, spec, classifier):
    """The values attention pools: one-hot labels, or the targets centered and scaled."""
    if classifier:
        return np.eye(len(spec.classes), dtype=spec.dtype)[np.searchsorted(spec.classes, y)]
    return (y.reshape(len(y), -1) - spec.offset) / spec.scale


def build_shard(X, y, w, spec, classifier):
    X, y, w = check_block(X, y, w, spec.dtype, classifier)
    values = encode(y, spec, classifier)
    if not np.any(w > 0):
        return Shard(WeightlessKeys(X, w, values, spec.metric, classifier), y)
    key_set = FittedKeys(X, w, values, spec.metric, spec.kernel, algorithm="brute",
                         exact_zeros=classifier, center=spec.center)
    return Shard(key_set, y)


def with_metric(shard, spec):
    """The shard with bandwidths ``spec.metric``."""
    ks = shard.key_set
    if isinstance(ks, WeightlessKeys):
        return shard._replace(key_set=ks._replace(metric=spec.metric))
    return shard._replace(key_set=FittedKeys(ks.X, ks.sample_weight, ks.values, spec.metric,
                                             spec.kernel, algorithm="brute",
                                             exact_zeros=ks.exact_zeros, center=spec.center))


def positive_rows(X, w):
    """How many rows of a block carry positive weight (all of them without weights)."""
    return len(X) if w is None else int(np.count_nonzero(np.asarray(w) > 0))


def distinct_inputs(X, w):
    """A block's distinct inputs of positive weight (as the local estimators count them)."""
    return _leave_one_out.distinct_inputs(X, w)[0]


def merge_distinct(a, b):
    """The distinct inputs of two blocks' distinct inputs."""
    return _leave_one_out.distinct_inputs(np.concatenate([a, b]))[0]


def training_inputs(shard):
    return shard.key_set.X


def leave_one_out_block(part, shard, loss):
    """A block of training rows' leave-one-out loss, summed with weights."""
    ks = shard.key_set
    return leave_one_out_sum(part.out, ks.values, ks.sample_weight, loss)


def same_input_sums(shard, locations):
    """For each row of a shard, the weight (n,) and the weighted sum of the values (n, t)
    of the other rows at its input (:class:`Locations` of every row less its own): what
    stays when the row leaves alone (``leave_out="row"``)."""
    ks = shard.key_set
    weight, values = ks.sample_weight, np.asarray(ks.values, dtype=np.float64)
    L = len(locations.weight)
    _, inverse = np.unique(np.concatenate([locations.X, ks.X]), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    position = np.full(inverse.max() + 1, -1)
    position[inverse[:L]] = np.arange(L)
    found = position[inverse[L:]]  # the row's input among the locations; -1: none
    at = np.maximum(found, 0)
    total = np.where(found >= 0, locations.weight[at], 0.0)
    sums = np.where(found[:, None] >= 0, locations.sums[at], 0.0)
    return np.maximum(total - weight, 0.0), sums - weight[:, None] * values


def leave_one_row_out_block(part, shard, same, log_k0, loss):
    """A block of training rows' leave-one-row-out loss, summed with weights: ``part``
    leaves out every key at each row's input, the rows there other than itself
    (``same``, :func:`same_input_sums`) are added back at distance 0 (kernel weight
    ``exp(log_k0)``)."""
    ks = shard.key_set
    weight, sums = same
    with np.errstate(divide="ignore", invalid="ignore"):
        own = PartialSums(np.where(weight[:, None] > 0, sums / weight[:, None], 0.0),
                          log_k0 + np.log(weight), np.full(len(weight), np.inf),
                          np.full(len(weight), -np.inf))
    return leave_one_out_sum(merge(part, own).out, ks.values, ks.sample_weight, loss)


def encoded_rows(X, categorical, n_features):
    """A block of inputs as given with its categorical features as codes (float64,
    :meth:`~sklearn_nw._categorical.CategoricalFeatures.encode`), checked as the local
    estimators check X (numbers, finite, ``n_features`` columns)."""
    if len(X.shape) == 2 and X.shape[1] != n_features:
        raise ValueError(
            f"X has {X.shape[1]} features, but the estimator is expecting {n_features} "
            "features as input.")
    return check_array(categorical.encode(X), dtype=np.float64, ensure_min_samples=0)


def check_queries(Q, n_features, dtype):
    Q = check_array(Q, dtype=[np.float64, np.float32], ensure_min_samples=0)
    if Q.shape[1] != n_features:
        raise ValueError(
            f"X has {Q.shape[1]} features, but the estimator is expecting {n_features} "
            "features as input.")
    return Q.astype(dtype, copy=False)


def shard_part(shard, Q, spec, leave_out_equal=False):
    key_set = shard.key_set
    if not np.array_equal(key_set.metric, spec.metric):  # a grid point's bandwidths
        key_set = with_metric(shard, spec).key_set
    if isinstance(key_set, WeightlessKeys):  # nothing, nowhere
        return key_set.partial_pool(Q, leave_out_equal=leave_out_equal,
                                    working_memory=spec.working_memory)
    return key_set.route.partial_pool(key_set, Q, leave_out_equal=leave_out_equal,
                                      working_memory=spec.working_memory)


def outputs(part, spec):
    """The estimator's outputs of a query block's part of every shard, its fallback
    count and whether every output is finite."""
    out, n_fallback = finish(part)
    if spec.classes is not None:
        out = out / out.sum(1, keepdims=True)
    else:
        out = out * spec.scale + spec.offset
        out = out[:, 0] if spec.one_output else out
    return out.astype(spec.dtype if spec.classes is not None else np.float64)


def fallback_count(part):
    return finish(part)[1], bool(np.all(np.isfinite(part.out)))


def merge_pairwise(client, parts, func, *args):
    """Merge futures ``parts`` pairwise on the cluster, a tree of ``func`` tasks."""
    while len(parts) > 1:
        parts = [client.submit(func, parts[i], parts[i + 1], *args)
                 if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


# -- leave-one-out on the distinct inputs (the learned bandwidth's descent) ---------------


class Locations(NamedTuple):
    """Distinct training inputs of positive weight: their summed weight and values."""

    X: np.ndarray  # (L, d) sorted as numpy.unique sorts them
    weight: np.ndarray  # (L,)
    sums: np.ndarray  # (L, t) the weighted sums of the values at each input
    sum_sq: float  # sum over the rows of w |v|^2 (the values' spread within inputs)


def location_sums(X, y, w, spec, classifier):
    """A block's :class:`Locations`."""
    X, y, w = check_block(X, y, w, spec.dtype, classifier)
    values = encode(y, spec, classifier).astype(np.float64)
    live = w > 0
    inputs, inverse = _leave_one_out.distinct_inputs(X, w)
    return _grouped(inputs, inverse, w[live], w[live, None] * values[live],
                    float(w @ (values**2).sum(1)))


def _grouped(inputs, inverse, weight, sums, sum_sq):
    L = len(inputs)
    grouped = np.zeros((L, sums.shape[1]))
    np.add.at(grouped, inverse, sums)
    return Locations(inputs, np.bincount(inverse, weights=weight, minlength=L), grouped,
                     sum_sq)


def merge_locations(a, b):
    """The :class:`Locations` of two blocks' rows."""
    inputs, inverse = _leave_one_out.distinct_inputs(np.concatenate([a.X, b.X]))
    return _grouped(inputs, inverse, np.concatenate([a.weight, b.weight]),
                    np.concatenate([a.sums, b.sums]), a.sum_sq + b.sum_sq)


def location_count(locations):
    """How many distinct inputs, and the rows' sum of w |v|^2."""
    return len(locations.weight), locations.sum_sq


def location_block(locations, start, stop):
    """Inputs ``start:stop`` of the distinct ones as a shard of keys: the keys of their
    weights and mean values (float64)."""
    X = locations.X[start:stop].astype(np.float64)
    weight = locations.weight[start:stop]
    return X, weight, locations.sums[start:stop] / weight[:, None]


def location_key_set(block, metric, spec):
    X, weight, means = block
    return FittedKeys(X, weight, means, metric, spec.kernel, algorithm="brute",
                      center=spec.center)


def location_part(keys, queries, metric, spec):
    """The partial sums of a block of distinct inputs at another block's, each query's
    own input left out."""
    key_set = location_key_set(keys, metric, spec)
    return key_set.route.partial_pool(key_set, queries[0], leave_out_equal=True,
                                      working_memory=spec.working_memory)


def location_terms(part, block, loss, total):
    """A block of distinct inputs' share of the weighted mean loss and its cotangent."""
    _, weight, means = block
    return leave_one_out_terms(part.out, means, weight, loss, total)


def location_losses(part, block, loss):
    """The leave-one-out loss of each distinct input of a block."""
    return leave_one_out_losses(part.out, block[2], loss)


def location_gradient(keys, queries, part, terms, metric, spec):
    """A block of keys' part of the gradient of the loss at a block of queries:
    ``terms[1]`` the cotangent of the queries' pooled values, or a pair of it and that
    of their log normalizers (:func:`location_row_terms`)."""
    key_set = location_key_set(keys, metric, spec)
    cotangent, den_cotangent = terms[1] if isinstance(terms[1], tuple) else (terms[1], None)
    return key_set.route.partial_gradient(
        key_set, queries[0], part.out, part.log_den, cotangent, den_cotangent=den_cotangent,
        leave_out_equal=True, working_memory=spec.working_memory)


# -- leave one row out where rows repeat an input: the rows as queries of their inputs ------


class RowQueries(NamedTuple):
    """The distinct rows (input, values, weight) at a block of distinct inputs, as the
    queries of leave-one-row-out (:class:`~sklearn_nw._leave_one_out.InputQueries` on one
    machine): each attends the other inputs and, at distance 0, what stays at its own."""

    key: np.ndarray  # (m,) its input in the block
    values: np.ndarray  # (m, t) its values (scaled targets, one-hot labels)
    weight: np.ndarray  # (m,) its weight in the loss: its copies' together
    kept: np.ndarray  # (m,) the weight its input keeps when one of its rows leaves
    own_values: np.ndarray  # (m, t) the mean values of that kept weight (0 where none)


def rows_at(X, y, w, spec, classifier, block):
    """The rows of positive weight of a training block at a block of distinct inputs
    (:func:`location_block`): their input's position there (-1 elsewhere), values and
    weights."""
    X, y, w = check_block(X, y, w, spec.dtype, classifier)
    values = encode(y, spec, classifier).astype(np.float64)
    live = w > 0
    X, values, w = X[live] + 0.0, values[live], w[live]
    inputs = block[0]
    _, inverse = np.unique(np.concatenate([inputs, X.astype(np.float64)]), axis=0,
                           return_inverse=True)
    inverse = inverse.ravel()
    position = np.full(inverse.max(initial=-1) + 1, -1)
    position[inverse[: len(inputs)]] = np.arange(len(inputs))
    return position[inverse[len(inputs):]], values, w


def row_queries(block, *parts):
    """The :class:`RowQueries` of a block of distinct inputs from the blocks' rows there
    (:func:`rows_at` of every training block)."""
    key = np.concatenate([k for k, _, _ in parts])
    here = key >= 0
    rows = np.column_stack([key, np.concatenate([v for _, v, _ in parts]),
                            np.concatenate([w for _, _, w in parts])])[here]
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    key, values, w = distinct[:, 0].astype(np.intp), distinct[:, 1:-1], distinct[:, -1]
    _, weight, means = block
    # What stays at the input: the other rows (exactly 0 where this is its only distinct
    # row and it has no copies: a sum of one term less that term) and its copies.
    kept = np.maximum(weight[key] - w, 0.0)  # (m,)
    kept_sums = (weight[key, None] * means[key] - w[:, None] * values)  # (m, t)
    own_values = np.divide(kept_sums, kept[:, None], out=np.zeros_like(kept_sums),
                           where=kept[:, None] > 0)
    return RowQueries(key, values, w * counts, kept, own_values)


def _row_predictions(part, rows, log_k0):
    """The rows' leave-one-out predictions (m, t): the inputs' ``part`` (every other
    input) merged with what stays at their own, and each row's shares ``(a, b)`` (m,) of
    the two (0 where the merge has no kernel weight: a fallback)."""
    with np.errstate(divide="ignore"):
        own_log = log_k0 + np.log(rows.kept)  # (m,)
    own = PartialSums(rows.own_values, own_log, np.full(len(own_log), np.inf),
                      np.full(len(own_log), -np.inf))
    at = PartialSums(*(a[rows.key] for a in part))
    merged = merge(at, own)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(merged.log_den)
        total = np.where(finite, merged.log_den, 0.0)
        a = np.where(finite, np.exp(at.log_den - total), 0.0)
        b = np.where(finite, np.exp(own_log - total), 0.0)
    return merged.out, a, b, at.out


def location_row_terms(part, rows, log_k0, loss, total):
    """A block of inputs' distinct rows' share of the weighted mean leave-one-row-out loss,
    and its cotangents (the inputs' pooled values (L, t) and log normalizers (L,))."""
    pred, a, b, out = _row_predictions(part, rows, log_k0)
    value, g = leave_one_out_terms(pred, rows.values, rows.weight, loss, total)  # g (m, t)
    L = len(part.log_den)
    cotangent = np.zeros((L, pred.shape[1]))
    np.add.at(cotangent, rows.key, a[:, None] * g)
    den_cotangent = np.bincount(rows.key, weights=a * b * (g * (out - rows.own_values)).sum(1),
                                minlength=L)
    return value, (cotangent, den_cotangent)


def location_row_losses(part, rows, log_k0, loss):
    """The leave-one-row-out loss (m,) of each distinct row at a block of inputs."""
    return leave_one_out_losses(_row_predictions(part, rows, log_k0)[0], rows.values, loss)
