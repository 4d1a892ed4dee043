"""The two leave-one-out losses, one object each. Torch only.

``pred`` and ``target`` are (..., t): predictions and targets for the squared error, class
probabilities and class frequencies (one-hot labels, or the label mix at a repeated
input) for the log-loss, which is then the cross-entropy ``-sum_c target_c log pred_c``.
Every consumer -- the exact grid of the CV estimators, the descent of
:class:`~sklearn_nw.bandwidth.LeaveOneOutBandwidth` and its hand-written Gaussian
gradient, the same on keys sharded over a cluster -- takes from here its per-row value
and gradient, the sample-weighted mean of the per-row values and the spread of the
values that scales them, so they cannot drift apart.
"""

import torch


class Loss:
    """What both losses share: the weighted mean of per-row losses, and the spread."""

    name = None

    def weighted_sum(self, per_row, weight):
        """``sum_i w_i l_i`` over the last axis of ``per_row`` (..., m), weights (m,)."""
        return (per_row * weight).sum(-1)

    def weighted_mean(self, per_row, weight, total=None):
        """``sum_i w_i l_i / total`` over the last axis of ``per_row`` (..., m): the
        sample-weighted mean loss, or, with ``total`` the weight of a larger set of
        rows, the share of ``weight`` (m,)'s rows (a chunk, a block) in its mean."""
        return self.weighted_sum(per_row, weight) / (weight.sum() if total is None else total)

    def spread(self, values, weight):
        """The weighted mean squared deviation of ``values`` (n, t) from their weighted
        mean, weights (n,): the variance of the targets, the Gini impurity of one-hot
        labels; the loss of the best constant prediction (squared error), the scale
        below which a leave-one-out loss is negligible (either loss)."""
        w = weight[:, None]  # (n, 1)
        mean = (w * values).sum(0) / w.sum()  # (t,)
        return (w * (values - mean) ** 2).sum() / w.sum()

    def __repr__(self):
        return f"{type(self).__name__}()"


class SquaredError(Loss):
    """``sum_t (pred_t - target_t)^2`` per row: the regressor's loss."""

    name = "squared_error"

    def per_row(self, pred, target):
        """Loss of each row, shape (...)."""
        return ((pred - target) ** 2).sum(-1)

    def gradient(self, pred, target):
        """``d per_row / d pred``, shape (..., t)."""
        return 2.0 * (pred - target)


class LogLoss(Loss):
    """``-sum_c target_c log pred_c`` per row: the classifier's loss.

    Probabilities are clipped at ``eps`` (float64's, as :func:`sklearn.metrics.log_loss`
    clips float64 predictions), whatever dtype they were computed in.
    """

    name = "log_loss"
    eps = torch.finfo(torch.float64).eps

    def per_row(self, pred, target):
        """Loss of each row, shape (...)."""
        return -(target * torch.log(pred.clamp(min=self.eps))).sum(-1)

    def gradient(self, pred, target):
        """``d per_row / d pred``, shape (..., t); zero where the clip is active."""
        return torch.where(pred > self.eps, -target / pred.clamp(min=self.eps), 0.0)


SQUARED_ERROR = SquaredError()
LOG_LOSS = LogLoss()


def get_loss(loss):
    """The loss object of a name (``"squared_error"``, ``"log_loss"``) or the object."""
    if isinstance(loss, str):
        losses = {SQUARED_ERROR.name: SQUARED_ERROR, LOG_LOSS.name: LOG_LOSS}
        if loss not in losses:
            raise ValueError(f"Unknown loss {loss!r}; expected one of {sorted(losses)}.")
        return losses[loss]
    return loss
