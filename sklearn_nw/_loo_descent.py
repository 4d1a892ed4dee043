"""The learned bandwidth's optimizers: full-batch L-BFGS-B (scipy's, with torch autograd's
gradient) and Adam on minibatches, on a leave-one-out objective
(:mod:`sklearn_nw._loo_objective`), as :class:`~sklearn_nw.LeaveOneOutBandwidth` runs
them."""

import functools
import warnings

import numpy as np
import torch
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import ThreadpoolController

from ._loo_objective import LOG_LIMIT, LogProgress, NeighborSearch

# Full-batch L-BFGS up to this many samples; minibatches of _MINIBATCH queries above, each
# against its _NEIGHBORS nearest keys (the tree rebuilt every _REFRESH steps), with the grid
# and the final comparisons exact on EVAL_ROWS random queries.
FULL_BATCH_MAX = 4096
_MINIBATCH = 256
_NEIGHBORS = 256
_REFRESH = 10
EVAL_ROWS = 512


# A loss below this fraction of the targets' variance is a perfect fit (the descent stops).
NEGLIGIBLE = 1e-9


@functools.cache
def _threadpools():
    """threadpoolctl's controller of the loaded thread pools (finding them takes ~4 ms)."""
    return ThreadpoolController()


class _Converged(Exception):
    """Raised from the L-BFGS-B objective to stop at a perfect fit."""


class _NonFinite(Exception):
    """Raised from the L-BFGS-B objective when the loss or its gradient is not finite."""


def descent(learner, objective, positive, full_batch, generator):
    """The optimizer of ``learner`` (a :class:`~sklearn_nw.LeaveOneOutBandwidth`: its
    ``batch_size``, ``max_iter``, ``tol``, ``learning_rate``, ``n_neighbors`` and
    ``verbose``) on ``objective``, as a function of (theta, to_metric) returning the loss
    curve and the iterations run: full-batch L-BFGS-B, or Adam on minibatches."""

    def descend(theta, to_metric):
        if full_batch:
            curve, n_iter, converged = lbfgs(
                objective, theta, to_metric, positive, max_iter=learner.max_iter,
                tol=learner.tol, progress=progress_bar(learner))
        else:
            batch = _MINIBATCH if learner.batch_size == "auto" else learner.batch_size
            curve, converged = adam(
                objective, theta, to_metric, positive, batch, generator,
                learning_rate=learner.learning_rate, max_iter=learner.max_iter,
                tol=learner.tol, n_neighbors=learner.n_neighbors,
                progress=progress_bar(learner))
            n_iter = len(curve)
        if not converged:
            warnings.warn(
                "The leave-one-out bandwidth search stopped after max_iter="
                f"{learner.max_iter} iterations without converging; increase max_iter or tol.",
                ConvergenceWarning,
            )
        return curve, n_iter

    return descend


def progress_bar(learner):
    """Progress of a verbose descent: a tqdm bar, or without tqdm a line per update on
    stderr (:class:`LogProgress`, which also logs it); None when quiet."""
    if not learner.verbose:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return LogProgress(learner.max_iter)
    return tqdm(total=learner.max_iter, desc="leave-one-out bandwidth")


def lbfgs(objective, theta, to_metric, rows, *, max_iter, tol, progress):
    """Full-batch L-BFGS-B (scipy's) on the parameters ``theta``, with the loss and its
    gradient from torch autograd. Leaves ``theta`` at the lowest loss evaluated and
    returns the loss at each evaluation, the iterations run and whether it converged.

    scipy's optimizer rather than ``torch.optim.LBFGS``, whose construction imports
    ``torch._dynamo``: about a second before the first fit of a fresh process.
    """
    shape, curve = theta.shape, []
    best = {"loss": np.inf, "theta": theta.detach().clone()}

    def loss_and_gradient(z):
        """The loss at parameters z (flat), divided by the starting loss (so tol,
        scipy's ftol on max(|f|, 1) = 1, is relative to it), and its gradient."""
        with torch.no_grad():
            theta.copy_(theta.new_tensor(z.reshape(shape)))
        theta.grad = None
        value = objective.loss(to_metric(theta), rows, backward=True)
        grad = (np.zeros(z.shape) if theta.grad is None
                else theta.grad.detach().cpu().numpy().astype(np.float64).ravel())
        if not (np.isfinite(value) and np.all(np.isfinite(grad))):
            # A line search cannot go on from a NaN; the result is the best point.
            raise _NonFinite
        curve.append(value)
        if value < best["loss"]:
            best["loss"], best["theta"] = value, theta.detach().clone()
        if progress is not None:
            progress.update(1)
            progress.set_postfix(loss=f"{value:.6g}")
        if value <= NEGLIGIBLE * objective.baseline:
            # A perfect leave-one-out fit: going on would only chase rounding, and
            # equivalent data (weights or repeated rows) would end in different places.
            raise _Converged
        scale = max(curve[0], np.finfo(np.float64).tiny)
        return value / scale, grad / scale

    n_iter = [0]

    def count(*_):
        n_iter[0] += 1

    try:
        z0 = theta.detach().cpu().numpy().astype(np.float64).ravel()
        start = loss_and_gradient(z0)
        step = _first_step(start[1])
        u0 = z0 / step

        def in_steps(u):
            if np.array_equal(u, u0):
                return start[0], step * start[1]
            value, grad = loss_and_gradient(step * u)
            return value, step * grad

        # L-BFGS-B's algebra is on (n_parameters, 10) matrices: with more than one
        # BLAS thread, scipy's idle OpenBLAS threads spin and take the cores from
        # torch's (fits 2-3x slower on 2 cores). scikit-learn's KMeans limits BLAS
        # likewise. Only OpenBLAS (scipy's and numpy's): torch's own BLAS keeps its
        # threads for the objective.
        with _threadpools().select(internal_api="openblas").limit(limits=1):
            result = minimize(
                in_steps, u0, jac=True, method="L-BFGS-B", callback=count,
                options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-10,
                         "maxcor": 10},
            )
        # Status 1: max_iter ran out. Status 2, a line search that cannot lower the
        # loss any more (at most 20 evaluations each), is the end of the descent.
        converged = result.status != 1
    except _Converged:
        converged = True
    except _NonFinite:
        warnings.warn(
            "The leave-one-out loss was not finite at a bandwidth the search tried; it "
            "stopped there and keeps the best bandwidth found before.",
            ConvergenceWarning,
        )
        converged = True
    if progress is not None:
        progress.close()
    with torch.no_grad():
        theta.copy_(best["theta"])
    return np.asarray(curve), n_iter[0], converged


def _first_step(gradient):
    """The unit of L-BFGS-B's parameters, from the gradient at the start (flat).

    L-BFGS-B's first trial step has unit length in the parameters, a factor e on the
    bandwidths: past the minimum next to a start the grids put within a factor ~1.4 of
    it, often into another basin. In units of the returned step it is the gradient step,
    at most of unit L1 length (torch's L-BFGS's first step); L-BFGS is scale-free after
    its first iteration."""
    norm_1 = float(np.abs(gradient).sum())
    step = float(np.linalg.norm(gradient)) * min(1.0, 1.0 / norm_1) if norm_1 else 1.0
    if not 0.0 < step < np.inf:
        # A 2-norm that underflowed (a gradient near 0: its squares are 0) or
        # overflowed: from the gradient over its 1-norm; a flat start takes unit steps.
        step = (float(np.linalg.norm(gradient / norm_1)) * min(norm_1, 1.0)
                if 0.0 < norm_1 < np.inf else 0.0) or 1.0
    return step


def adam(objective, theta, to_metric, positive, batch, generator, *, learning_rate, max_iter,
         tol, n_neighbors, progress):
    """Adam on minibatches of ``batch`` rows of ``positive``, each against its
    ``n_neighbors`` nearest keys (``"auto"``: _NEIGHBORS; None: every key), until the mean
    loss of a window of steps stops falling by ``tol``; returns the loss of each step and
    whether it converged."""
    optimizer = torch.optim.Adam([theta], lr=learning_rate)
    window = max(5, min(20, max_iter // 5))
    curve, converged = [], False
    k = _NEIGHBORS if n_neighbors == "auto" else n_neighbors
    k = None if k is None or k >= objective.x.shape[0] else k
    for step in range(max_iter):
        pick = torch.randint(len(positive), (min(batch, len(positive)),),
                             generator=generator, device=positive.device)
        rows = positive[pick]
        optimizer.zero_grad()
        if k is None:
            curve.append(objective.loss(to_metric(theta), rows, backward=True))
        else:
            if step % _REFRESH == 0:  # the neighbor search follows the moving metric
                search = NeighborSearch(objective.x, objective.metric(to_metric(theta).detach()))
            curve.append(objective.loss_neighbors(
                to_metric(theta), rows, search.neighbors(rows, k), backward=True))
        optimizer.step()
        with torch.no_grad():
            theta.clamp_(min=-LOG_LIMIT, max=LOG_LIMIT)
        if progress is not None:
            progress.update(1)
            progress.set_postfix(loss=f"{curve[-1]:.6g}")
        if (step + 1) % window == 0 and step + 1 >= 2 * window:
            recent = np.mean(curve[-window:])
            before = np.mean(curve[-2 * window : -window])
            if before - recent <= tol * abs(before):
                converged = True
                break
    if progress is not None:
        progress.close()
    return np.asarray(curve), converged
