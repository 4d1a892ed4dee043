"""What leaving one out means with sample weights and repeated inputs.

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

So the leave-one-out problem is posed on the *distinct* inputs: each carries the summed
weight of its rows and the weighted mean of their values, and leaves itself out entirely.
For the squared error the loss over the rows is the loss over the locations plus the
spread of the values within locations, a constant in the bandwidth; for the log-loss the
one-hot labels become the class frequencies at each location (cross-entropy). Numpy only.
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp


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
    # + 0.0 turns -0.0 into 0.0: the same location, but other bytes for np.unique.
    X_distinct, inverse = np.unique(np.asarray(X) + 0.0, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    w = np.asarray(sample_weight, dtype=np.float64)
    weight = np.bincount(inverse, weights=w, minlength=len(X_distinct))  # (G,)
    n_positive = int(np.count_nonzero(weight > 0))
    if n_positive < 2:
        raise ValueError(
            f"{estimator_name} needs at least 2 distinct training inputs with positive "
            f"sample weight (each point is left out with every copy of it); got "
            f"n_samples={n} with {n_positive} such input(s)."
        )
    values = np.asarray(values, dtype=np.float64)
    # (G, n) sums over each location's rows, weighted.
    rows = sp.csr_array((w, (inverse, np.arange(n))), shape=(len(weight), n))
    sums = rows @ values  # (G, t)
    # A location of zero weight takes no part; any finite values will do.
    means = sums / np.where(weight > 0, weight, 1.0)[:, None]
    deviation = values - means[inverse]  # (n, t)
    spread = float(w @ (deviation**2).sum(1) / w.sum())
    return LeaveOneOutSet(X_distinct, means, weight, inverse, spread)
