"""The two leave-one-out losses, written once. Torch only.

``pred`` and ``target`` are (..., t): predictions and targets for the squared error, class
probabilities and class frequencies (one-hot labels, or the label mix at a repeated
input) for the log-loss, which is then the cross-entropy ``-sum_c target_c log pred_c``.
Probabilities are clipped at float64's eps, as :func:`sklearn.metrics.log_loss` clips
float64 predictions, whatever dtype they were computed in.
"""

import torch

LOG_LOSS_EPS = torch.finfo(torch.float64).eps


def per_row(kind, pred, target):
    """Loss of each row, shape (...)."""
    if kind == "squared_error":
        return ((pred - target) ** 2).sum(-1)
    return -(target * torch.log(pred.clamp(min=LOG_LOSS_EPS))).sum(-1)


def gradient(kind, pred, target):
    """``d per_row / d pred``, shape (..., t); zero where the clip is active."""
    if kind == "squared_error":
        return 2.0 * (pred - target)
    return torch.where(pred > LOG_LOSS_EPS, -target / pred.clamp(min=LOG_LOSS_EPS), 0.0)
