"""What leaving one out means with sample weights and repeated inputs, once.

Leave-one-out scores a bandwidth by predicting each training row from the others. What
"the others" are is the *unit* that leaves together, ``leave_out`` or ``groups``:

- ``"row"`` (the default, as scikit-learn's :class:`~sklearn.model_selection.LeaveOneOut`,
  statsmodels' ``cv_ls`` and R's np have it): a row leaves with its whole sample weight;
  other rows at the same input stay, as the other observations they are. Multiplying
  every weight by a constant changes nothing (the predictions are ratios and the loss a
  weighted mean), but an integer weight is not a repeated row: a row of weight 2 leaves
  entirely, one of two copies leaves its twin behind.
- ``"input"``: a row leaves with all the mass at its location, its own weight and every
  row with the same input. Integer weights then equal repeated rows, and no row ever sees
  a copy of itself, so rows copied by resampling (a bootstrap drawn as rows) cannot pull
  the bandwidth toward 0; but on tables whose inputs repeat, a query at a training input
  never sees the targets observed there, which are its best predictors.
- a *group* (``groups`` given to ``fit``, as scikit-learn's
  :class:`~sklearn.model_selection.LeaveOneGroupOut` has it): a row leaves with every row
  of its group, wherever their inputs; leave-one-out is then exact leave-one-group-out.

All are posed on *keys* (:func:`leave_one_out_set`): under ``"input"`` the distinct
inputs (:func:`distinct_inputs`, where -0.0 and 0.0 are one input), each carrying the
summed weight of its rows and the weighted mean of their values and leaving itself out
entirely; under ``"row"`` the distinct rows (identical input, value and weight), each
keeping on itself the weight of its copies, one row's less (:attr:`LeaveOneOutSet.self_weight`);
with groups the distinct rows of (input, value, weight, group), each leaving with every
key of its group (:attr:`LeaveOneOutSet.group`).
For the squared error the loss over the rows is the loss over the keys plus the spread of
the values within keys, a constant in the bandwidth; for the log-loss the one-hot labels
become the class frequencies at each key (cross-entropy).

Where inputs repeat under ``"row"``, the same loss is also posed on the distinct inputs as
keys, the distinct rows their queries (:func:`input_queries`): each query attends its own
input with what stays there when its row leaves (:class:`QueryTerms`), so the sums run
over fewer keys. The learned bandwidth and the CV estimators' grid of Nadaraya-Watson
take it.

The pieces every engine and strategy shares, in torch: query i of a leave-one-out block is
key ``rows[i]``, whose entry gets the logit :func:`self_logits` (:func:`set_self_`), and
with groups the entries of its group's other keys ``-inf`` (:func:`leave_group_out_`); a
left-out query may attend the keys :func:`other_keys` gives, and one left with no kernel
mass falls back to its nearest of them, every tie (:func:`nearest_keys`). Numpy and
torch; no scikit-learn.
"""

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch

from ._preconditions import check_two_inputs

# The units leave-one-out can leave out (the estimators' ``leave_out``).
UNITS = ("row", "input")


def distinct_inputs(X, sample_weight=None):
    """The distinct rows of ``X`` and the distinct input of each row.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    sample_weight : array-like of shape (n_samples,), default=None
        When given, only the rows of positive weight count.

    Returns
    -------
    inputs : ndarray of shape (n_inputs, n_features)
        Sorted as :func:`numpy.unique` sorts them; an input at 0.0 in a feature is stored
        as 0.0 there, never as -0.0.
    inverse : ndarray of shape (n_rows,)
        The index into ``inputs`` of each row counted (each row of positive weight when
        ``sample_weight`` is given).
    """
    X = np.asarray(X)
    if sample_weight is not None:
        X = X[np.asarray(sample_weight) > 0]
    # + 0.0 turns -0.0 into 0.0: the same location, which must get the same bytes
    # whichever of the two a block (or a shard) happens to hold.
    inputs, inverse = np.unique(X + 0.0, axis=0, return_inverse=True)
    return inputs, inverse.reshape(-1)


def distinct_rows(X, values, sample_weight, group=None):
    """The distinct rows of ``(X, values, sample_weight)`` (identical input, values and
    weight: interchangeable rows), the keys of ``leave_out="row"``; with ``group`` (n,)
    integer codes, of ``(X, values, sample_weight, group)`` (the keys of groups).

    Returns
    -------
    first : ndarray of shape (n_keys,)
        One row of each.
    inverse : ndarray of shape (n_rows,)
        The distinct row of each row.
    """
    columns = [np.asarray(X) + 0.0, values, sample_weight]
    if group is not None:
        columns.append(group)
    rows = np.column_stack(columns)
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


class LeaveOneOutSet(NamedTuple):
    """The training set seen by leave-one-out: its keys (distinct inputs, or distinct
    rows), their weight and values, and the weight each keeps on itself when left out."""

    X: np.ndarray  # (G, d) the keys' inputs
    values: np.ndarray  # (G, t) sample-weighted mean of the values of each key's rows
    weight: np.ndarray  # (G,) summed sample weight of each key's rows
    inverse: np.ndarray  # (n,) the key of each training row
    spread: float  # weighted mean squared deviation of the values within each key
    # (G,) the weight a key keeps on itself when one of its rows leaves: its copies'
    # (leave_out="row"); None for none (leave_out="input").
    self_weight: object = None
    # The leading columns of X that local polynomials are in: the continuous features
    # of embedded categorical ones (sklearn_nw._categorical); None for all.
    polynomial_columns: object = None
    # (G,) int: the group of each key, whose keys all leave together (groups given to
    # fit); None without groups.
    group: object = None
    # ((G, t), (G, t)) the smallest and largest value among each key's rows of positive
    # weight, where some key holds rows of different values (leave_out="input"): a
    # bounded local fit keeps within the range of the rows' targets, as a refit on the
    # rows does, not of the keys' means; None where every key's rows share one value.
    value_range: object = None

    @property
    def log_weight(self):
        with np.errstate(divide="ignore"):
            return np.log(self.weight)

    @property
    def self_log_weight(self):
        """The log weight a key keeps on itself when left out (``-inf`` for none)."""
        if self.self_weight is None:
            return np.full(len(self.weight), -np.inf)
        with np.errstate(divide="ignore"):
            return np.log(self.self_weight)

    def expand(self, pooled):
        """Per-location leave-one-out predictions (..., G, t) as per-row ones (..., n, t)."""
        return pooled[..., self.inverse, :]

    def expand_attention(self, attention, sample_weight, dtype):
        """Attention between the distinct inputs (G, G), dense or CSR, as attention between
        the training rows (n, n) in ``dtype``: a location's weight is shared by its rows
        in proportion to their ``sample_weight`` (n,)."""
        n = len(self.inverse)
        location_weight = self.weight[self.inverse]  # (n,)
        share = np.divide(sample_weight, location_weight, out=np.zeros(n),
                          where=location_weight > 0)
        if not sp.issparse(attention):
            rows = attention[np.ix_(self.inverse, self.inverse)] * share  # (n, n)
            return rows.astype(dtype, copy=False)
        spread = sp.csr_array((share, (self.inverse, np.arange(n))),
                              shape=(len(self.weight), n))
        rows = sp.csr_array(attention[self.inverse, :] @ spread).astype(dtype)
        rows.eliminate_zeros()
        return rows


def leave_one_out_set(X, values, sample_weight, *, leave_out="input", groups=None,
                      estimator_name="leave-one-out"):
    """Group the training rows into leave-one-out's keys (see the module docstring).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    values : ndarray of shape (n_samples, t)
        Targets, or one-hot labels.
    sample_weight : ndarray of shape (n_samples,)
    leave_out : {"row", "input"}, default="input"
        The unit that leaves: a row (the keys are the distinct rows, each keeping its
        copies' weight on itself), or all the rows at an input (the keys are the
        distinct inputs). With ``groups`` it must be ``"row"`` (a ValueError
        otherwise: two units).
    groups : ndarray of shape (n_samples,), default=None
        The group of each row (validated, any sortable labels): the rows of a group leave
        together. The keys are then the distinct rows of (input, value, weight, group).
    estimator_name : str
        Named in the error raised when fewer than two distinct inputs (or groups) carry
        weight.

    Returns
    -------
    LeaveOneOutSet
    """
    n = X.shape[0]
    w = np.asarray(sample_weight, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    X_keys, inverse = distinct_inputs(X)
    check_two_inputs(int(np.count_nonzero(np.bincount(inverse, weights=w) > 0)), n,
                     estimator_name)
    code = None
    if groups is not None and leave_out != "row":
        raise ValueError(
            f"{estimator_name}: groups are a unit of their own; leave_out={leave_out!r} "
            "is another. Pass groups with leave_out='row' (the default), e.g. the "
            "distinct inputs as groups to leave every row at an input out as well.")
    if groups is not None:
        _, code = np.unique(groups, return_inverse=True)
        code = code.reshape(-1)
        if np.count_nonzero(np.bincount(code, weights=w) > 0) < 2:
            raise ValueError(
                f"{estimator_name} leaves one group out: it needs at least two groups "
                "with positive sample weight; got "
                f"{int(np.count_nonzero(np.bincount(code, weights=w) > 0))}.")
    if leave_out == "row" or groups is not None:
        first, inverse = distinct_rows(X, values, w, code)
        X_keys = (X[first] + 0.0).astype(X.dtype, copy=False)
    weight = np.bincount(inverse, weights=w, minlength=len(X_keys))  # (G,)
    # (G, n) sums over each key's rows, weighted.
    rows = sp.csr_array((w, (inverse, np.arange(n))), shape=(len(weight), n))
    sums = rows @ values  # (G, t)
    # A key of zero weight takes no part; any finite values will do.
    means = sums / np.where(weight > 0, weight, 1.0)[:, None]
    deviation = values - means[inverse]  # (n, t)
    spread = float(w @ (deviation**2).sum(1) / w.sum())
    self_weight = None
    if groups is not None:  # a key's copies are of its group: they leave with it
        return LeaveOneOutSet(X_keys, means, weight, inverse, spread, group=code[first])
    if leave_out == "row":
        self_weight = np.maximum(weight - w[first], 0.0)  # (G,) the copies' weight
        return LeaveOneOutSet(X_keys, means, weight, inverse, spread, self_weight)
    held = w > 0
    low, high = np.full(means.shape, np.inf), np.full(means.shape, -np.inf)  # (G, t)
    np.minimum.at(low, inverse[held], values[held])
    np.maximum.at(high, inverse[held], values[held])
    low[weight <= 0] = high[weight <= 0] = means[weight <= 0]  # (any finite values)
    return LeaveOneOutSet(X_keys, means, weight, inverse, spread,
                          value_range=None if np.array_equal(low, high) else (low, high))


class InputQueries(NamedTuple):
    """Leave-one-out of ``leave_out="row"`` posed on the distinct *inputs* as keys, its
    queries the distinct rows (:func:`input_queries`): a row at an input shared with
    other rows attends to that input's key with the weight and the mean value of what
    stays there (its copies and the other rows), not with the whole key's. The sums
    over keys are then over inputs, fewer than the distinct rows where inputs repeat
    with different targets (randhie's first 8,000 rows: 1,101 inputs, 3,442 rows)."""

    keys: LeaveOneOutSet  # the distinct inputs: summed weights, mean values, no self weight
    key: np.ndarray  # (m,) each distinct row's input (its own key)
    log_weight: np.ndarray  # (m,) each distinct row's weight in the loss (its copies')
    self_log_weight: np.ndarray  # (m,) the weight its own key keeps when it leaves
    own_values: np.ndarray  # (m, t) the mean value of that kept weight (any where none)
    values: np.ndarray  # (m, t) its target
    row_log_weight: np.ndarray  # (m,) the weight one of its rows takes out of its input

    def tensors(self, tensor):
        """The keys' inputs, values, log weights and self log weights, and the queries'
        keys (m,) (int64, on the device of ``tensor``'s tensors) and
        :class:`QueryTerms`, as ``tensor`` (a function of an array) makes them."""
        keys = self.keys
        x, v, log_w, self_log_w = (tensor(a) for a in (
            keys.X, keys.values, keys.log_weight, keys.self_log_weight))
        terms = QueryTerms(tensor(self.log_weight), tensor(self.self_log_weight),
                           tensor(self.own_values - keys.values[self.key]),
                           tensor(self.values), tensor(self.row_log_weight))
        return x, v, log_w, self_log_w, torch.as_tensor(self.key, device=x.device), terms


def input_queries(loo):
    """The distinct rows of a ``leave_out="row"`` set ``loo`` as queries of its distinct
    inputs (:class:`InputQueries`), or None where that does not apply (another unit,
    groups) or would not pay (fewer than a fifth fewer inputs than rows)."""
    if loo.self_weight is None or loo.group is not None:
        return None
    inputs, key = distinct_inputs(loo.X)
    if len(inputs) > 0.8 * len(loo.weight):
        return None
    inputs = inputs.astype(loo.X.dtype, copy=False)
    weight = np.bincount(key, weights=loo.weight, minlength=len(inputs))  # (U,)
    weighted = loo.weight[:, None] * loo.values  # (m, t)
    sums = np.stack([np.bincount(key, weights=column, minlength=len(inputs))
                     for column in weighted.T], axis=1)  # (U, t)
    means = sums / np.where(weight > 0, weight, 1.0)[:, None]
    # Of a distinct row's input, what stays when one of its rows leaves: the other rows
    # (exactly 0 where it is the input's only distinct row: a sum of one term less that
    # term) and its copies.
    kept = (weight[key] - loo.weight) + loo.self_weight  # (m,)
    kept_sums = (sums[key] - weighted) + loo.self_weight[:, None] * loo.values  # (m, t)
    own_values = np.divide(kept_sums, kept[:, None], out=np.zeros_like(kept_sums),
                           where=kept[:, None] > 0)
    keys = LeaveOneOutSet(inputs, means, weight, key[loo.inverse], loo.spread,
                          polynomial_columns=loo.polynomial_columns)
    with np.errstate(divide="ignore"):
        return InputQueries(keys, key, np.log(loo.weight), np.log(kept), own_values,
                            loo.values, np.log(loo.weight - loo.self_weight))


# -- the left-out query's own key, and its nearest others (torch) --------------------------


def set_self_(block, rows, value):
    """Write ``value`` into each query's entry for its own key, in place: ``block`` is
    (..., b, n) over queries and keys, query i is key ``rows[i]`` (b,); ``value`` is a
    scalar or (..., b). Returns ``block``."""
    block[..., torch.arange(len(rows), device=block.device), rows] = value
    return block


def self_logits(kernel, self_log_w, rows):
    """The logit (b,) each left-out query ``rows`` keeps on its own key: the kernel at
    distance exactly 0 (a distance computed by expansion is rounding noise there) plus
    the log weight the key keeps, ``self_log_w[rows]``: ``-inf`` for the estimators'
    leave-one-out of distinct inputs; finite where a point keeps part of its own weight
    (one unit of it left out)."""
    return kernel.log_profile_sq(self_log_w.new_zeros(len(rows))) + self_log_w[rows]


class QueryTerms(NamedTuple):
    """What the engines' left-out queries bring, aligned with their ``rows`` (m,) (each
    query's own key): their weight in the loss, the weight their own key keeps, the
    mean value of what it keeps less the key's value (None: the key's own), and their
    targets. :func:`query_terms` gives those of queries that are keys themselves; an
    :class:`InputQueries` objective gives its own (queries at shared keys)."""

    log_w: torch.Tensor  # (m,)
    self_log_w: torch.Tensor  # (m,)
    own_shift: object  # (m, t) Tensor, or None
    v: torch.Tensor  # (m, t)
    # (m,) the log weight each takes out of its own key (one row's), where known: None.
    row_log_w: object = None

    def chunk(self, s, step):
        """The terms of the queries s to s + step."""
        return self.select(slice(s, s + step))

    def select(self, index):
        """The terms of the queries ``index`` (a slice, indices or a mask)."""
        return QueryTerms(*(None if part is None else part[index] for part in self))

    def own_logits(self, kernel):
        """Each query's logit (m,) on its own key, as :func:`self_logits`."""
        return kernel.log_profile_sq(self.self_log_w.new_zeros(len(self.self_log_w))) + (
            self.self_log_w)


def query_terms(queries, v, log_w, self_log_w, rows):
    """``queries`` (a :class:`QueryTerms` aligned with ``rows``) where given, else those
    of the keys ``rows`` (m,) as their own queries: their weights, kept weights and
    values (targets)."""
    if queries is not None:
        return queries
    return QueryTerms(log_w[rows], self_log_w[rows], None, v[rows])


def keep_own_values_(num_den, weights, rows, own_shift):
    """Give each query's own-key entry the mean value of what its key keeps: add its
    weight there times ``own_shift`` (b, t) to the pooled numerators ``num_den``
    (b, t + 1), in place; ``weights`` (b, n) as pooled, query i's own key ``rows[i]``.
    Nothing where ``own_shift`` is None. Returns ``num_den``."""
    if own_shift is not None:
        own = weights[torch.arange(len(rows), device=weights.device), rows]  # (b,)
        num_den[:, :-1] += own[:, None] * own_shift
    return num_den


def same_group(group, rows):
    """(b, n) bool: the keys in the group of each left-out query (query i is key
    ``rows[i]`` (b,), ``group`` (n,) the keys' groups), its own key included."""
    return group[rows][:, None] == group[None, :]


def leave_group_out_(block, group, rows, value=-math.inf):
    """Write ``value`` (``-inf``: no attention) into each query's entries for the keys of
    its own group, in place: ``block`` is (..., b, n) as in :func:`set_self_`, ``group``
    (n,) the keys' groups, or None (no groups: ``block`` unchanged). Returns ``block``."""
    if group is not None:
        block.masked_fill_(same_group(group, rows), value)
    return block


def other_keys(positive, rows, group=None):
    """(b, n) bool: the keys a left-out query may attend, those of ``positive`` (n,)
    weight other than its own (query i is key ``rows[i]`` (b,)) and, with ``group`` (n,),
    outside its group."""
    eligible = set_self_(positive.expand(len(rows), -1).clone(), rows, False)
    return leave_group_out_(eligible, group, rows, False)


def tie_exact_sq_dist(q, x, h):
    """Squared distances (b, n) of points ``q`` (b, d) to ``x`` (n, d) (or each query its
    own, (b, n, d)), both in their raw coordinates, in the metric of bandwidths ``h`` (d,)
    or of a projection (d, r), divided by its largest entry (the same order as the scaled
    distances), from the raw differences ``q - x``: keys exactly as far from a query stay
    tied, as the fitted estimators' nearest-key fallback has them (centered or scaled
    coordinates round differently, and break such ties: a lattice's). For the few rows
    of the fallback."""
    unit = h / h.abs().max()
    diff = q[:, None, :] - (x if x.ndim == 3 else x[None])  # (b, n, d)
    diff = diff / unit if unit.ndim == 1 else diff @ unit
    return torch.einsum("bnr,bnr->bn", diff, diff)


def keep_raw_ties(queries, dists, inds, points, metric, dtype):
    """A searched fallback's candidates kept where they tie with their query's nearest by
    :func:`tie_exact_sq_dist` in ``dtype``, each at the least of their distances (the
    pooling then keeps them all): queries (m, d) with no key in reach, raw inputs, and
    per query its candidates' distances and indices into ``points`` (raw inputs),
    those within a rounding of the nearest. A tree's distances of scaled points round a
    lattice's ties apart, or a near tie the other way; the dense fallback keeps every
    tie of the raw differences. Returns the lists ``(dists, inds)`` kept."""
    counts = np.array([len(i) for i in inds])
    if not counts.sum():
        return dists, inds
    m, width = len(queries), int(counts.max())
    held = points[np.concatenate(list(inds)).astype(np.intp)]  # (p, d)
    owner = np.repeat(np.arange(m), counts)  # (p,)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])  # (m,)
    slot = np.arange(len(held)) - first[owner]  # (p,)
    # Each query's candidates in a row, padded with its first (never the only nearest).
    pad = held[np.minimum(first, len(held) - 1)]  # (m, d) (a query without any: any)
    padded = np.repeat(pad[:, None], width, axis=1).astype(dtype)  # (m, w, d)
    padded[owner, slot] = held
    tensor = lambda a: torch.as_tensor(np.asarray(a, dtype=dtype))
    d2 = tie_exact_sq_dist(tensor(queries), tensor(padded), tensor(metric)).numpy()  # (m, w)
    tied = np.split((d2 == d2.min(1, keepdims=True))[owner, slot], first[1:])
    return ([np.full(np.count_nonzero(t), d[t].min()) for d, t in zip(dists, tied)],
            [i[t] for i, t in zip(inds, tied)])


def nearest_keys(d2, eligible):
    """The nearest-key fallback of queries with no kernel mass: each query's nearest
    ``eligible`` keys, every tie.

    Parameters
    ----------
    d2 : Tensor of shape (b, n)
        Distances, or any increasing function of them (squared, scaled). Keys at an
        infinite distance are nearest only when no eligible key is nearer: then all of
        them are (tied).
    eligible : Tensor of bool, shape (b, n) or (n,)
        The keys that may be attended: of positive weight and, for leave-one-out, not
        the query's own (:func:`other_keys`).

    Returns
    -------
    nearest : Tensor of bool, shape (b, n)
    distance : Tensor of shape (b,)
        The nearest eligible distance (``inf`` where no key is eligible).
    """
    d2 = torch.where(eligible, d2, math.inf)  # (b, n)
    distance = d2.amin(1)  # (b,)
    return eligible & (d2 == distance[:, None]), distance
