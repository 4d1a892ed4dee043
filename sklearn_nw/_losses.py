"""The two leave-one-out losses, one object each. Torch only.

``pred`` and ``target`` are (..., t): predictions and targets for the squared error, class
probabilities and class frequencies (one-hot labels, or the label mix at a repeated
input) for the log-loss, which is then the cross-entropy ``-sum_c target_c log pred_c``.
Every consumer -- the exact grid of the CV estimators, the descent of
:class:`~sklearn_nw.bandwidth.LeaveOneOutBandwidth` and its hand-written Gaussian
gradient -- takes its per-row value and gradient from here, so they cannot drift apart.
"""

import torch


class SquaredError:
    """``sum_t (pred_t - target_t)^2`` per row: the regressor's loss."""

    name = "squared_error"

    def per_row(self, pred, target):
        """Loss of each row, shape (...)."""
        return ((pred - target) ** 2).sum(-1)

    def gradient(self, pred, target):
        """``d per_row / d pred``, shape (..., t)."""
        return 2.0 * (pred - target)

    def __repr__(self):
        return f"{type(self).__name__}()"


class LogLoss:
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

    def __repr__(self):
        return f"{type(self).__name__}()"


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
