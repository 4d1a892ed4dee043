"""A key set split into shards: each shard's partial sums, and their exact merge. Numpy in,
numpy out.

Shard s reports, for each query, ``out_s = N_s / D_s`` and ``log D_s`` (its numerator and
normalizer, a :class:`~sklearn_nw._engine_partial.PartialSums` of
:mod:`sklearn_nw._engine_partial`); the prediction over every shard is

    out = sum_s exp(log D_s - log D) out_s,    log D = logsumexp_s log D_s,

the Nadaraya-Watson ratio ``sum_s N_s / sum_s D_s`` computed in log space. :func:`merge`
combines two shards' parts into the part of their union: it is associative and
commutative, so a tree reduction in any order gives the same prediction (to rounding).
Where no shard gives kernel weight, the merge keeps the nearest keys of all shards (ties
pooled by weight): the single-machine fallback. :func:`finish` turns the merged part
into the predictions and the number of queries that fell back;
:func:`leave_one_out_sum` scores a block of training rows' leave-one-out predictions
with the losses of :mod:`sklearn_nw._losses` and their weighted mean.
"""

import numpy as np
import torch

from ._engine_partial import PartialSums
from ._losses import get_loss


def _shares(a, b, total):
    """exp(a - total) and exp(b - total), 0 where a (or b) is -inf, for finite totals."""
    with np.errstate(invalid="ignore"):
        safe = np.where(np.isfinite(total), total, 0.0)
        return np.exp(a - safe), np.exp(b - safe)


def merge(a, b):
    """The :class:`PartialSums` of the union of two disjoint sets of keys."""
    log_den = np.logaddexp(a.log_den, b.log_den)  # (n_q,)
    share_a, share_b = _shares(a.log_den, b.log_den, log_den)
    out = share_a[:, None] * a.out + share_b[:, None] * b.out  # (n_q, t)
    # No kernel weight on either: the nearer shard's nearest keys, or both on a tie.
    near = np.minimum(a.near, b.near)  # (n_q,)
    tie_a = np.where(a.near == near, a.log_near_w, -np.inf)
    tie_b = np.where(b.near == near, b.log_near_w, -np.inf)
    log_near_w = np.logaddexp(tie_a, tie_b)
    near_a, near_b = _shares(tie_a, tie_b, log_near_w)
    nearest = near_a[:, None] * a.out + near_b[:, None] * b.out
    empty = ~np.isfinite(log_den)
    out[empty] = nearest[empty]
    return PartialSums(out, log_den, np.where(empty, near, np.inf),
                       np.where(empty, log_near_w, -np.inf))


def merge_all(parts):
    """:func:`merge` of a sequence of parts, pairwise (a tree), for one process."""
    parts = list(parts)
    while len(parts) > 1:
        parts = [merge(*parts[i : i + 2]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


def finish(part):
    """The pooled values (n_q, t) of a part of every shard, and how many queries fell
    back to their nearest key(s)."""
    return part.out, int(np.count_nonzero(~np.isfinite(part.log_den)))


def leave_one_out_sum(pooled, values, weight, loss):
    """The weighted sum ``sum_i w_i loss_i`` over a block of training rows of their
    leave-one-out loss: ``pooled`` (n, t) are the rows' leave-one-out predictions in the
    pooled unit, ``values`` (n, t) what was pooled (scaled targets, one-hot labels),
    ``weight`` (n,)."""
    loss = get_loss(loss)
    return float(loss.weighted_sum(loss.per_row(*_tensors(pooled, values)),
                                   torch.tensor(weight)))


def leave_one_out_terms(pooled, values, weight, loss, total):
    """A block of rows' share of the weighted mean leave-one-out loss
    ``sum_i w_i loss_i / total`` and its gradient in the predictions (the cotangent
    (n, t) of the descent's backward pass)."""
    loss = get_loss(loss)
    pred, target = _tensors(pooled, values)
    # torch.tensor copies: a block's weights may arrive read-only from another worker.
    value = float(loss.weighted_mean(loss.per_row(pred, target), torch.tensor(weight), total))
    share = torch.from_numpy(weight / total)  # (n,)
    return value, (share[:, None] * loss.gradient(pred, target)).numpy()


def leave_one_out_losses(pooled, values, loss):
    """The leave-one-out loss (n,) of each row of predictions ``pooled`` (n, t) of
    ``values`` (n, t)."""
    return get_loss(loss).per_row(*_tensors(pooled, values)).numpy()


def _tensors(pooled, values):
    """Predictions and the pooled values as float64 tensors."""
    return torch.from_numpy(pooled), torch.from_numpy(values.astype(np.float64))
