"""The Dask estimators' training set as the bandwidth strategies see it
(:class:`ShardedTraining`), and the leave-one-out over keys sharded on the cluster behind
it: the exact grid's scores and the learned bandwidth's objective
(:class:`ShardedObjective`).

The strategies of :mod:`sklearn_nw._selection` run on it unchanged: the rules of thumb
take its reduced spread, the CV estimators' search
(:class:`~sklearn_nw._selection_grid.BandwidthGridSearch`) scores its grid here, and
:class:`~sklearn_nw.LeaveOneOutBandwidth` descends :class:`ShardedObjective`.

The grid scores training rows, each shard leaving out the keys at a row's own input. The
descent works, as on one machine (:mod:`sklearn_nw._leave_one_out`), on the distinct
inputs as keys: their weights and mean values are reduced from the blocks by a tree of
merges (the last merge holds every distinct input, ``L (d + t + 1)`` numbers, on one
worker), then split again into shards of inputs; each evaluation of the loss pools every
block of inputs against every shard, and its gradient sums each (block, shard) pair's
part (:func:`sklearn_nw._engine_partial.partial_gradient`). Its units are the inputs,
or with ``leave_out="row"`` where rows repeat an input the distinct rows, each merging
its input's part with what stays at the input (:class:`~sklearn_nw._dask_tasks.RowQueries`)."""

import operator

import dask
import numpy as np
import torch
from distributed import wait as distributed_wait

from ._dask_tasks import (
    build_shard,
    distinct_inputs,
    leave_one_out_block,
    leave_one_row_out_block,
    location_block,
    location_count,
    location_gradient,
    location_losses,
    location_part,
    location_row_losses,
    location_row_terms,
    location_sums,
    location_terms,
    merge_distinct,
    merge_locations,
    merge_pairwise,
    positive_rows,
    row_queries,
    rows_at,
    same_input_sums,
    shard_part,
    training_inputs,
)
from ._losses import get_loss
from ._preconditions import check_two_inputs
from ._selection import Choice, mixed_rule_of_thumb, nearest_multiple
from ._shards import merge
from .kernels import get_kernel


class ShardedTraining:
    """The training set of a Dask estimator, sharded over a cluster, as the bandwidth
    strategies see it: the methods of :class:`~sklearn_nw._selection.Training` they call.

    Parameters
    ----------
    client : distributed.Client
    blocks : list of tuple of Delayed
        The training blocks (X, y, sample_weight or None).
    spec : ShardSettings
        The kernel, the center, the targets' offset and scale, the working memory.
    sigma : ndarray of shape (n_features,)
        The features' weighted standard deviations, reduced from the blocks.
    weight : float
        The total sample weight.
    classifier : bool
    n_samples : int
    name : str
        The estimator, named in errors.
    categorical : CategoricalFeatures, default=None
        The categorical features (:mod:`sklearn_nw._categorical`): the blocks hold the
        inputs embedded, the strategies' parameters are one per feature (``sigma``'s),
        each turned into the bandwidths of the embedded columns (:meth:`metric`).
    """

    degree = 0  # Nadaraya-Watson: the Dask estimators fit no local polynomials
    bounded = False
    precomputed = False
    n_neighbors = None
    groups = None  # leave-one-group-out is not sharded: the Dask estimators' fit takes none

    def rule_of_thumb(self, rule):
        """The bandwidths of a rule of thumb, from the reduced spread."""
        return mixed_rule_of_thumb(rule, self.sigma, self.weight, self.categorical)

    def __init__(self, client, blocks, spec, sigma, weight, classifier, n_samples, name,
                 categorical=None):
        self.client, self.blocks, self.spec = client, blocks, spec
        self.sigma, self.weight = sigma, weight
        self.classifier, self.n_samples, self.name = classifier, n_samples, name
        self.categorical = categorical
        self.loss = "log_loss" if classifier else "squared_error"
        self.shards = None  # built for the grid, at the reference bandwidth (:meth:`_shards`)
        self._reference = None
        self._n_rows = self._same = None  # rows of positive weight; _same_input's

    @property
    def n_features(self):
        return len(self.sigma)

    def spread(self):
        return self.sigma, self.weight

    def _replace(self, degree):
        """Itself: the Training API's copy at another degree, here always 0."""
        if degree:
            raise ValueError("sklearn_nw.dask fits no local polynomials (degree=0).")
        return self

    def subsample(self, n_rows, above=None, seed=0):
        """Itself: the shards descend full batch on every row."""
        return self

    def metric(self, h):
        """The bandwidths of the blocks' columns (numpy) of the strategies' parameters
        ``h`` (d,): the embedded columns' with categorical features."""
        h = np.asarray(h, dtype=np.float64)
        return h if self.categorical is None else self.categorical.expand(h)

    def reference(self):
        """Scott's rule over the distinct inputs of positive weight (counted by a tree of
        unions on the cluster)."""
        if self._reference is None:
            client = self.client
            blocks = [client.compute(dask.delayed(distinct_inputs)(xb, wb))
                      for xb, _, wb in self.blocks]
            distinct = self._distinct = merge_pairwise(client, blocks, merge_distinct)
            n_distinct = self._n_distinct = client.submit(len, distinct).result()
            check_two_inputs(n_distinct, self.n_samples, self.name)
            self._reference = mixed_rule_of_thumb("scott", self.sigma, n_distinct,
                                                  self.categorical)
        return self._reference

    def nearest_multiple(self, reference):
        """:meth:`~sklearn_nw._selection.Training.nearest_multiple`, on the cluster."""
        if self.categorical is not None:
            return None
        self.reference()
        return self.client.submit(nearest_multiple, self._distinct, reference).result()

    def _rows_apart(self, leave_out):
        """Whether leaving one out differs from leaving an input out: ``leave_out="row"``
        where rows of positive weight repeat an input."""
        if leave_out != "row":
            return False
        if self._n_rows is None:  # counted once per fit
            self.reference()
            self._n_rows = sum(self.client.gather(self.client.compute(
                [dask.delayed(positive_rows)(xb, wb) for xb, _, wb in self.blocks])))
        return self._n_rows > self._n_distinct

    def _same_input(self, shards):
        """Per shard, the futures of :func:`~sklearn_nw._dask_tasks.same_input_sums` of
        its rows, from the distinct inputs' weights and sums reduced over the blocks
        (once per fit)."""
        if self._same is None:
            client = self.client
            locations = merge_pairwise(client, client.compute(
                [dask.delayed(location_sums)(xb, yb, wb, self.spec, self.classifier)
                 for xb, yb, wb in self.blocks]), merge_locations)
            self._same = [client.submit(same_input_sums, shard, locations)
                          for shard in shards]
        return self._same

    def learn_bandwidth(self, learner):
        """The :class:`~sklearn_nw._selection.Choice` of ``learner`` (a
        :class:`~sklearn_nw.LeaveOneOutBandwidth`) by its descent on the leave-one-out
        loss of the distinct inputs (or, leaving rows out where rows repeat an input, of
        the distinct rows as their queries), sharded over the cluster (full batch)."""
        client, spec = self.client, self.spec
        kernel = get_kernel(spec.kernel, dtype=np.float64)  # the descent is in float64
        locations = client.compute([dask.delayed(location_sums)(xb, yb, wb, spec,
                                                                self.classifier)
                                    for xb, yb, wb in self.blocks])
        objective = ShardedObjective(
            client, locations, spec._replace(kernel=kernel), self.loss,
            n_shards=len(self.blocks), categorical=self.categorical,
            rows=self.blocks if self._rows_apart(learner.leave_out) else None)
        check_two_inputs(objective.n_inputs, self.n_samples,
                         f"{self.name} with bandwidth='loo'")
        result = learner.learn_on(objective, kernel, full_batch=True,
                                  h_start=mixed_rule_of_thumb("scott", self.sigma,
                                                              objective.n_inputs,
                                                              self.categorical))
        curve = np.asarray(result.loss_curve, dtype=np.float64)
        if not self.classifier:  # the rows' loss in the targets' unit
            curve = spec.scale**2 * (curve + objective.spread)
        return Choice(result.bandwidth, 0, projection=result.projection,
                      report={"n_iter_": result.n_iter, "loss_curve_": curve})

    def leave_one_out_scores(self, grid, scorer=None, score_params=None, *,
                             leave_out="row"):
        """The exact leave-one-out scores of the fixed bandwidths of ``grid`` (a
        :class:`~sklearn_nw._grids.LeaveOneOutGrid` of Nadaraya-Watson over every
        input): to rank them by, as reported (the local CV's), and None per sample."""
        if scorer is not None or grid.degree or grid.n_neighbors is not None:
            raise ValueError(
                "sklearn_nw.dask scores fixed bandwidths by their leave-one-out loss, "
                "Nadaraya-Watson over every training point; use the local estimator for "
                "a scoring, degree or n_neighbors."
            )
        scores, reported = self._grid_scores(self._shards(), np.asarray(grid.grid),
                                             self._rows_apart(leave_out))
        return scores, reported, None

    def _shards(self):
        """The training blocks' shards, built once, at the reference bandwidth."""
        if self.shards is None:
            self.shards = build_shards(self.client, self.blocks,
                                       self.spec._replace(metric=self.metric(
                                           self.reference())),
                                       self.classifier)
        return self.shards

    def _grid_scores(self, shards, grid, rows_apart=False):
        """Scores to rank the grid points by, and as reported (the local CV's). Each
        training row's prediction leaves out every key at its input, and with
        ``rows_apart`` adds back the other rows there (leave one row out), from the
        distinct inputs' weights and sums reduced over the blocks."""
        client, spec, loss = self.client, self.spec, self.loss
        inputs = [client.submit(training_inputs, shard) for shard in shards]
        if rows_apart:
            same = self._same_input(shards)
            log_k0 = float(spec.kernel.log_profile_sq(torch.zeros(1, dtype=torch.float64))[0])

        def block_loss(part, own, i):
            if not rows_apart:
                return client.submit(leave_one_out_block, part, own, loss)
            return client.submit(leave_one_row_out_block, part, own, same[i], log_k0, loss)

        sums = []
        for h in grid:
            point = spec._replace(metric=self.metric(h))
            sums.append([block_loss(merge_pairwise(client, [
                client.submit(shard_part, shard, q, point, True) for shard in shards],
                merge), own, i) for i, (q, own) in enumerate(zip(inputs, shards))])
        sums = client.gather(sums)  # G lists of each block's sum of w loss
        weight = sum(client.gather([client.submit(block_weight, f) for f in shards]))
        mean_loss = np.array([sum(point) for point in sums]) / weight  # (G,)
        # The log-loss of the class frequencies is the rows' (the local CV's score).
        return -mean_loss, -mean_loss if self.classifier else -spec.scale**2 * mean_loss


def build_shards(client, blocks, spec, classifier):
    """The shards (futures of :class:`~sklearn_nw._dask_tasks.Shard`) of the training
    blocks at ``spec.metric``; a worker's error is raised here."""
    shards = client.compute([dask.delayed(build_shard)(xb, yb, wb, spec, classifier)
                             for xb, yb, wb in blocks])
    distributed_wait(shards)
    for f in shards:
        if f.status == "error":
            f.result()  # raises the worker's error here
    return shards


def block_weight(shard):
    return float(shard.key_set.sample_weight.sum())


class ShardedObjective:
    """The leave-one-out loss of the distinct training inputs, sharded over a cluster, as
    :meth:`sklearn_nw.LeaveOneOutBandwidth.learn_on` descends it (full batch). With
    ``rows``, its units are the distinct rows instead, each leaving alone: the queries
    of their inputs (:class:`~sklearn_nw._dask_tasks.RowQueries`), each input's part
    merged with what stays at it, and the gradient through both the inputs' pooled
    values and their normalizers.

    Parameters
    ----------
    client : distributed.Client
    blocks : list of Future
        The training blocks' :class:`~sklearn_nw._dask_tasks.Locations`.
    spec : ShardSettings
        The kernel (float64), the center and the working memory.
    loss : str
        "squared_error" or "log_loss".
    n_shards : int
        How many shards the distinct inputs are split into.
    categorical : CategoricalFeatures, default=None
        The categorical features: the parameters (one per feature) are expanded to the
        bandwidths of the embedded columns (``expand``), differentiably; ``odds`` marks
        the parameters that are a categorical feature's odds.
    rows : list of tuple of Delayed, default=None
        The training blocks (X, y, sample_weight or None), whose distinct rows are the
        units (``leave_out="row"``); None: the distinct inputs are.
    """

    def __init__(self, client, blocks, spec, loss, n_shards, categorical=None, rows=None):
        self.client, self.spec, self.loss_name = client, spec, loss
        self.expand = None if categorical is None else categorical.expand
        self.odds = None if categorical is None else categorical.categorical
        self.loss_function = get_loss(loss)
        locations = merge_pairwise(client, blocks, merge_locations)
        n, sum_sq = client.submit(location_count, locations).result()
        bounds = np.linspace(0, n, max(1, min(n_shards, n)) + 1).astype(int)
        self.shards = [client.submit(location_block, locations, a, b)
                       for a, b in zip(bounds[:-1], bounds[1:])]
        distributed_wait(self.shards)
        del locations  # the merged set: the cluster may drop it now that it is split
        parts = client.gather([client.submit(operator.getitem, f, slice(1, 3))
                               for f in self.shards])
        weight = np.concatenate([w for w, _ in parts])  # (L,)
        means = np.concatenate([m for _, m in parts])  # (L, t)
        self.log_w = torch.from_numpy(np.log(weight))
        self.baseline = float(self.loss_function.spread(torch.from_numpy(means),
                                                        torch.from_numpy(weight)))
        self.values_max_sq = float((means**2).sum(1).max())
        # The rows' spread around their input's mean: the loss over the rows is the loss
        # over the inputs plus this (squared error).
        self.spread = float((sum_sq - weight @ (means**2).sum(1)) / weight.sum())
        self.weight = weight
        self.rows = None
        if rows is not None:
            self._rows(rows)

    def _rows(self, blocks):
        """Make the distinct rows the units: their queries per block of inputs, their
        weights, and the loss's scale and spread of theirs."""
        client, classifier = self.client, self.loss_name == "log_loss"
        self.rows = [client.submit(row_queries, shard, *client.compute([
            dask.delayed(rows_at)(xb, yb, wb, self.spec, classifier, shard)
            for xb, yb, wb in blocks])) for shard in self.shards]
        distributed_wait(self.rows)
        weight, values = (np.concatenate(client.gather([
            client.submit(operator.attrgetter(name), f) for f in self.rows]))
            for name in ("weight", "values"))  # (m,), (m, t)
        self.log_w = torch.from_numpy(np.log(weight))
        self.baseline = float(self.loss_function.spread(torch.from_numpy(values),
                                                        torch.from_numpy(weight)))
        self.values_max_sq = float((values**2).sum(1).max())
        self.spread = 0.0  # a distinct row's copies share its values
        self.unit_weight = weight
        self._log_k0 = float(self.spec.kernel.log_profile_sq(
            torch.zeros(1, dtype=torch.float64))[0])

    @property
    def units(self):
        """The weights of the loss's units: the distinct inputs', or rows'."""
        return self.weight if self.rows is None else self.unit_weight

    @property
    def n_inputs(self):
        return len(self.weight)

    def _parts(self, metric):
        """Futures of the merged partial sums at each block of inputs, at the parameters
        ``metric`` (d,) (numpy)."""
        client = self.client
        if self.expand is not None:
            metric = self.expand(metric)
        return [merge_pairwise(client, [client.submit(location_part, keys, queries, metric,
                                                      self.spec) for keys in self.shards],
                               merge) for queries in self.shards]

    def per_input(self, metric):
        """The leave-one-out loss (L,) of every distinct input (or row) at ``metric``."""
        parts = self._parts(metric)
        if self.rows is None:
            losses = [self.client.submit(location_losses, part, block, self.loss_name)
                      for part, block in zip(parts, self.shards)]
        else:
            losses = [self.client.submit(location_row_losses, part, rows, self._log_k0,
                                         self.loss_name)
                      for part, rows in zip(parts, self.rows)]
        return np.concatenate(self.client.gather(losses))

    def per_row(self, hs, rows):
        """Losses (G, m) of inputs ``rows`` at bandwidth vectors ``hs`` (G, d)."""
        rows = rows.cpu().numpy()
        return torch.from_numpy(np.stack([self.per_input(np.asarray(h, dtype=np.float64))[rows]
                                          for h in hs]))

    def grid(self, hs, rows):
        """Weighted mean losses (G,) of bandwidth vectors ``hs`` (G, d) over ``rows``."""
        w = torch.from_numpy(self.units[rows.cpu().numpy()])
        return self.loss_function.weighted_mean(self.per_row(hs, rows), w).numpy()

    def loss(self, metric, rows, backward=False):
        """The weighted mean loss over ``rows`` (every input of positive weight: full
        batch); with ``backward`` its gradient is back-propagated into ``metric``'s graph."""
        if len(rows) != len(self.units):
            raise ValueError("The sharded leave-one-out objective is full batch only.")
        h = metric.detach().cpu().numpy().astype(np.float64)
        parts = self._parts(h)
        if self.expand is not None:  # the gradient flows back through the expansion
            metric = self.expand(metric)
            h = metric.detach().cpu().numpy().astype(np.float64)
        total = float(self.units.sum())
        if self.rows is None:
            terms = [self.client.submit(location_terms, part, block, self.loss_name, total)
                     for part, block in zip(parts, self.shards)]
        else:
            terms = [self.client.submit(location_row_terms, part, rows, self._log_k0,
                                        self.loss_name, total)
                     for part, rows in zip(parts, self.rows)]
        value = sum(self.client.gather([self.client.submit(operator.getitem, t, 0) for t in terms]))
        if backward:
            grads = [self.client.submit(location_gradient, keys, queries, part, term, h,
                                        self.spec)
                     for queries, part, term in zip(self.shards, parts, terms)
                     for keys in self.shards]
            grad = sum(self.client.gather(grads))
            (metric * torch.as_tensor(grad, dtype=metric.dtype)).sum().backward()
        return float(value)
