"""Leave-one-out over keys sharded on a dask cluster: the CV estimators' exact grid
(:class:`LeaveOneOutGridOverShards`) and the leave-one-out objective of the learned
bandwidth's descent (:class:`ShardedObjective`).

The grid scores training rows, each shard leaving out the keys at a row's own input. The
descent works, as on one machine (:mod:`sklearn_nw._leave_one_out`), on the distinct
inputs: their weights and mean values are reduced from the blocks by a tree of merges
(the last merge holds every distinct input, ``L (d + t + 1)`` numbers, on one worker),
then split again into shards of inputs; each evaluation of the loss pools every block of
inputs against every shard, and its gradient sums each (block, shard) pair's part
(:func:`sklearn_nw._engine_partial.partial_gradient`)."""

from numbers import Integral
from typing import NamedTuple

import numpy as np
import torch
from distributed import wait as distributed_wait

from ._cv import (
    _DEFAULT_GRID,
    _DEFAULT_N_BANDWIDTHS,
    _EXTEND_BY,
    _MAX_EXTENSIONS,
    best_finite,
    candidate_params,
    rank_scores,
)
from ._dask_tasks import (
    item,
    leave_one_out_block,
    location_block,
    location_count,
    location_gradient,
    location_losses,
    location_part,
    location_terms,
    merge_locations,
    shard_part,
    training_inputs,
    tree,
)
from ._shards import merge


class GridChoice(NamedTuple):
    bandwidth: np.ndarray  # (d,)
    grid: np.ndarray  # (G, d)
    cv_results: dict
    best_index: int
    best_score: float


class LeaveOneOutGridOverShards:
    """The CV estimators' exact leave-one-out grid over shards (fixed bandwidths,
    Nadaraya-Watson): for each grid point, each block of training rows is pooled against
    every shard, each shard leaving out the keys at the rows' own locations, and the
    blocks' weighted losses are summed. The selection is that of the local CV estimators
    with ``bandwidth_kinds=["fixed"], degree=0``. ``bandwidths`` is the CV estimators'
    parameter."""

    def __init__(self, bandwidths):
        self.bandwidths = bandwidths


    def select(self, client, shards, spec, classifier):
        """The grid's choice (a :class:`GridChoice`) on the shards (futures), Scott's
        rule over the distinct inputs in ``spec.metric``."""
        multiples = default_multiples(self.bandwidths)
        reference = spec.metric
        if multiples is not None:
            grid = multiples[:, None] * reference
        else:
            grid = np.array(self.bandwidths, dtype=np.float64)
            if grid.ndim == 1:
                grid = np.repeat(grid[:, None], len(reference), axis=1)
        scores, reported = self._grid_scores(client, shards, spec, grid, classifier)
        for _ in range(_MAX_EXTENSIONS):
            best = best_finite(scores)
            if (best is None or multiples is None or len(multiples) < 2
                    or 0 < best < len(grid) - 1):
                break
            steps = (multiples[1] / multiples[0]) ** np.arange(1, _EXTEND_BY + 1)  # (E,)
            new = multiples[0] / steps[::-1] if best == 0 else multiples[-1] * steps
            new_scores, new_reported = self._grid_scores(
                client, shards, spec, new[:, None] * reference, classifier)
            ordered = (lambda a, b: (b, a)) if best == 0 else (lambda a, b: (a, b))
            multiples = np.concatenate(ordered(multiples, new))
            scores = np.concatenate(ordered(scores, new_scores))
            reported = np.concatenate(ordered(reported, new_reported))
            grid = multiples[:, None] * reference
        best = best_finite(scores)
        if best is None:
            raise ValueError(
                "Every candidate's leave-one-out score is non-finite; no bandwidth of the "
                "grid can be chosen."
            )
        column, params = candidate_params(grid, [None] * len(grid),
                                          None if classifier else np.zeros(len(grid)))
        cv_results = {
            "mean_test_score": reported,
            "rank_test_score": rank_scores(scores),
            "param_bandwidth": column,
            "params": params,
        }
        return GridChoice(grid[best].copy(), grid, cv_results, best, float(reported[best]))

    def _grid_scores(self, client, shards, spec, grid, classifier):
        """Scores to rank the grid points by, and as reported (the local CV's)."""
        loss = "log_loss" if classifier else "squared_error"
        inputs = [client.submit(training_inputs, shard) for shard in shards]
        sums = []
        for h in grid:
            point = spec._replace(metric=np.asarray(h, dtype=np.float64))
            sums.append([client.submit(leave_one_out_block, tree(client, [
                client.submit(shard_part, shard, q, point, True) for shard in shards],
                merge), own, loss) for q, own in zip(inputs, shards)])
        sums = client.gather(sums)  # G lists of each block's sum of w loss
        weight = sum(client.gather([client.submit(block_weight, f) for f in shards]))
        mean_loss = np.array([sum(point) for point in sums]) / weight  # (G,)
        # The log-loss of the class frequencies is the rows' (the local CV's score).
        return -mean_loss, -mean_loss if classifier else -spec.scale**2 * mean_loss


def block_weight(shard):
    return float(shard.key_set.sample_weight.sum())


def default_multiples(bandwidths):
    """The multiples of the reference bandwidth of a default grid; None for a given one."""
    if bandwidths is None or isinstance(bandwidths, Integral):
        n = _DEFAULT_N_BANDWIDTHS if bandwidths is None else bandwidths
        return np.geomspace(*_DEFAULT_GRID, n) if n > 1 else np.ones(1)
    return None


class ShardedObjective:
    """The leave-one-out loss of the distinct training inputs, sharded over a cluster, as
    :meth:`sklearn_nw.LeaveOneOutBandwidth.select_on` descends it (full batch).

    Parameters
    ----------
    client : distributed.Client
    blocks : list of Future
        The training blocks' :class:`~sklearn_nw._dask_tasks.Locations`.
    spec : Spec
        The kernel (float64), the center and the working memory.
    loss : str
        "squared_error" or "log_loss".
    """

    def __init__(self, client, blocks, spec, loss, n_shards):
        self.client, self.spec, self.loss_name = client, spec, loss
        locations = tree(client, blocks, merge_locations)
        n, sum_sq = client.submit(location_count, locations).result()
        bounds = np.linspace(0, n, max(1, min(n_shards, n)) + 1).astype(int)
        self.shards = [client.submit(location_block, locations, a, b)
                       for a, b in zip(bounds[:-1], bounds[1:])]
        distributed_wait(self.shards)
        del locations  # the merged set: the cluster may drop it now that it is split
        parts = client.gather([client.submit(item, f, slice(1, 3)) for f in self.shards])
        weight = np.concatenate([w for w, _ in parts])  # (L,)
        means = np.concatenate([m for _, m in parts])  # (L, t)
        self.log_w = torch.from_numpy(np.log(weight))
        mean = weight @ means / weight.sum()
        self.baseline = float(weight @ ((means - mean) ** 2).sum(1) / weight.sum())
        self.values_max_sq = float((means**2).sum(1).max())
        # The rows' spread around their input's mean: the loss over the rows is the loss
        # over the inputs plus this (squared error).
        self.spread = float((sum_sq - weight @ (means**2).sum(1)) / weight.sum())
        self.weight = weight

    @property
    def n_inputs(self):
        return len(self.weight)

    def _parts(self, metric):
        """Futures of the merged partial sums at each block of inputs."""
        return [tree(self.client, [self.client.submit(location_part, keys, queries, metric,
                                                      self.spec) for keys in self.shards],
                     merge) for queries in self.shards]

    def per_input(self, metric):
        """The leave-one-out loss (L,) of every distinct input at ``metric``."""
        losses = [self.client.submit(location_losses, part, block, self.loss_name)
                  for part, block in zip(self._parts(metric), self.shards)]
        return np.concatenate(self.client.gather(losses))

    def per_row(self, hs, rows):
        """Losses (G, m) of inputs ``rows`` at bandwidth vectors ``hs`` (G, d)."""
        rows = rows.cpu().numpy()
        return torch.from_numpy(np.stack([self.per_input(np.asarray(h, dtype=np.float64))[rows]
                                          for h in hs]))

    def grid(self, hs, rows):
        """Weighted mean losses (G,) of bandwidth vectors ``hs`` (G, d) over ``rows``."""
        w = self.weight[rows.cpu().numpy()]
        return (self.per_row(hs, rows).numpy() @ w) / w.sum()

    def loss(self, metric, rows, backward=False):
        """The weighted mean loss over ``rows`` (every input of positive weight: full
        batch); with ``backward`` its gradient is back-propagated into ``metric``'s graph."""
        if len(rows) != self.n_inputs:
            raise ValueError("The sharded leave-one-out objective is full batch only.")
        h = metric.detach().cpu().numpy().astype(np.float64)
        parts = self._parts(h)
        total = float(self.weight.sum())
        terms = [self.client.submit(location_terms, part, block, self.loss_name, total)
                 for part, block in zip(parts, self.shards)]
        value = sum(self.client.gather([self.client.submit(item, t, 0) for t in terms]))
        if backward:
            grads = [self.client.submit(location_gradient, keys, queries, part, term, h,
                                        self.spec)
                     for queries, part, term in zip(self.shards, parts, terms)
                     for keys in self.shards]
            grad = sum(self.client.gather(grads))
            (metric * torch.as_tensor(grad, dtype=metric.dtype)).sum().backward()
        return float(value)
