"""Leave-one-out over keys sharded on a dask cluster: the CV estimators' exact grid
(:class:`LeaveOneOutGridOverShards`) and the leave-one-out objective of the learned
bandwidth's descent (:class:`ShardedObjective`)."""

from numbers import Integral
from typing import NamedTuple

import numpy as np

from ._cv import _DEFAULT_GRID, _DEFAULT_N_BANDWIDTHS, _EXTEND_BY, _MAX_EXTENSIONS
from ._dask_tasks import (
    leave_one_out_block,
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
            best = int(np.argmax(scores))
            if multiples is None or len(multiples) < 2 or 0 < best < len(grid) - 1:
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
        best = int(np.argmax(scores))
        cv_results = {
            "mean_test_score": reported,
            "rank_test_score": np.argsort(np.argsort(-scores, kind="stable"),
                                          kind="stable") + 1,
            "bandwidth": grid,
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
        sums = client.gather(sums)  # G lists of (sum w loss, sum w hit) per block
        weight = sum(client.gather([client.submit(block_weight, f) for f in shards]))
        mean_loss = np.array([sum(s[0] for s in point) for point in sums]) / weight  # (G,)
        if classifier:
            accuracy = np.array([sum(s[1] for s in point) for point in sums]) / weight
            return accuracy - 1e-15 * np.minimum(mean_loss, 1e6), accuracy
        return -mean_loss, -spec.scale**2 * mean_loss


def block_weight(shard):
    return float(shard.key_set.sample_weight.sum())


def default_multiples(bandwidths):
    """The multiples of the reference bandwidth of a default grid; None for a given one."""
    if bandwidths is None or isinstance(bandwidths, Integral):
        n = _DEFAULT_N_BANDWIDTHS if bandwidths is None else bandwidths
        return np.geomspace(*_DEFAULT_GRID, n) if n > 1 else np.ones(1)
    return None
