"""What leaving one out means with sample weights and repeated inputs, once.

A training point is left out together with *all* the mass at its location: its own sample
weight and every row with the same input. Then

- multiplying every weight by a constant changes nothing (the predictions are ratios and
  the loss a weighted mean);
- integer weights equal repeated rows (a repeated row is more mass at one location);
- no point ever predicts itself, however it was weighted or duplicated, so the loss cannot
  be driven down by shrinking the bandwidth onto copies of the query (a bootstrap resample
  collapses the bandwidth otherwise).

The price: on data whose inputs repeat (tables of discrete features), a query at a
training location never sees the targets observed there, so the leave-one-out loss rates
small bandwidths a little worse than a held-out query at that location would.

So the leave-one-out problem is posed on the *distinct* inputs (:func:`distinct_inputs`,
where -0.0 and 0.0 are one input): each carries the summed weight of its rows and the
weighted mean of their values, and leaves itself out entirely. For the squared error the
loss over the rows is the loss over the locations plus the spread of the values within
locations, a constant in the bandwidth; for the log-loss the one-hot labels become the
class frequencies at each location (cross-entropy).

The pieces every engine and strategy shares, in torch: query i of a leave-one-out block is
key ``rows[i]``, whose entry gets the logit :func:`self_logits` (:func:`set_self_`); a
left-out query may attend the keys :func:`other_keys` gives, and one left with no kernel
mass falls back to its nearest of them, every tie (:func:`nearest_keys`). Numpy and torch;
no scikit-learn.
"""

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch

from ._preconditions import check_two_inputs


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


class LeaveOneOutSet(NamedTuple):
    """The training set seen by leave-one-out: distinct inputs, their weight and values."""

    X: np.ndarray  # (G, d) distinct training inputs
    values: np.ndarray  # (G, t) sample-weighted mean of the values at each input
    weight: np.ndarray  # (G,) summed sample weight at each input
    inverse: np.ndarray  # (n,) the distinct input of each training row
    spread: float  # weighted mean squared deviation of the values within each input

    @property
    def log_weight(self):
        with np.errstate(divide="ignore"):
            return np.log(self.weight)

    @property
    def self_log_weight(self):
        """The log weight a location keeps on itself when left out: none (``-inf``)."""
        return np.full(len(self.weight), -np.inf)

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


def leave_one_out_set(X, values, sample_weight, *, estimator_name="leave-one-out"):
    """Group the training rows by input for leave-one-out (see the module docstring).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    values : ndarray of shape (n_samples, t)
        Targets, or one-hot labels.
    sample_weight : ndarray of shape (n_samples,)
    estimator_name : str
        Named in the error raised when fewer than two distinct inputs carry weight.

    Returns
    -------
    LeaveOneOutSet
    """
    n = X.shape[0]
    X_distinct, inverse = distinct_inputs(X)
    w = np.asarray(sample_weight, dtype=np.float64)
    weight = np.bincount(inverse, weights=w, minlength=len(X_distinct))  # (G,)
    check_two_inputs(int(np.count_nonzero(weight > 0)), n, estimator_name)
    values = np.asarray(values, dtype=np.float64)
    # (G, n) sums over each location's rows, weighted.
    rows = sp.csr_array((w, (inverse, np.arange(n))), shape=(len(weight), n))
    sums = rows @ values  # (G, t)
    # A location of zero weight takes no part; any finite values will do.
    means = sums / np.where(weight > 0, weight, 1.0)[:, None]
    deviation = values - means[inverse]  # (n, t)
    spread = float(w @ (deviation**2).sum(1) / w.sum())
    return LeaveOneOutSet(X_distinct, means, weight, inverse, spread)


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


def other_keys(positive, rows):
    """(b, n) bool: the keys a left-out query may attend, those of ``positive`` (n,)
    weight other than its own (query i is key ``rows[i]`` (b,))."""
    return set_self_(positive.expand(len(rows), -1).clone(), rows, False)


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
