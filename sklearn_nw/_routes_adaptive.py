"""The adaptive route: nearest-neighbor bandwidths (:mod:`sklearn_nw._adaptive`).

Each query's distance to its k-th nearest key comes from a tree or a brute force search
(:class:`~sklearn_nw._search.TreeSearch`); then every key of positive weight, the distances
divided by the query's bandwidth (balloon) or by each key's (sample-point). With
categorical features the neighbors, distances and bandwidths are the continuous
features'; the categories' Gaussian factor multiplies the weights, whatever the
bandwidth (:mod:`sklearn_nw._categorical`).
"""

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import gen_batches

from ._adaptive import LeaveOneOutNeighbors, kth_distances
from ._engine_candidates import dense_pool
from ._grids import categorical_logits
from ._routes import Route, pooled_values, torch_dtype
from ._search import exact_distances
from ._workers import chunk_rows


class AdaptiveRoute(Route):
    """Every key of positive weight under an adaptive bandwidth.

    Parameters
    ----------
    keys : FittedKeys
    adaptive : Adaptive
        The bandwidth's kind, k and c.
    index : TreeSearch
        The keys of positive weight, ``index_rows``, in the search space (its continuous
        coordinates, ``keys.continuous_coords``).
    index_rows : ndarray of shape (n_indexed,)
    """

    name = "adaptive"

    def __init__(self, keys, adaptive, index, index_rows):
        super().__init__(keys)
        self.adaptive, self.index, self.index_rows = adaptive, index, index_rows
        if keys.sample_weight.sum() < adaptive.n_neighbors * (1 - 1e-9):
            raise ValueError(
                f"An adaptive bandwidth with n_neighbors={adaptive.n_neighbors} needs k "
                f"units of sample weight; there are only {keys.sample_weight.sum():g} "
                f"(n_samples={keys.X.shape[0]}). Lower n_neighbors."
            )
        self.r = keys.continuous_coords
        # The keys' categorical coordinates in the kernel's unit (divided by their scales).
        self.categories = (None if self.r == keys.n_coords
                           else keys.scaled(keys.X[index_rows])[:, self.r:])
        if adaptive.kind == "sample_point":
            self.key_bandwidth = adaptive.scale * kth_distances(
                index, keys.sample_weight[index_rows], keys.search_space(keys.X)[:, :self.r],
                adaptive.n_neighbors, leave_out_location=True)  # (n,)

    def pool(self, keys, queries, settings):
        """Each query against every key of positive weight, the distances divided by the
        query's bandwidth ``c d_k(q)`` (balloon) or each key's (sample-point, whose
        weights carry ``h_i^(-r)``), in chunks of queries within ``working_memory``."""
        adaptive, r = self.adaptive, self.r
        search_queries = keys.search_space(queries)[:, :r]
        weight = keys.sample_weight[self.index_rows]  # (n',)
        tiny = np.finfo(np.float64).tiny
        if adaptive.kind == "balloon":
            h = np.maximum(adaptive.scale * kth_distances(
                self.index, weight, search_queries, adaptive.n_neighbors), tiny)  # (n_q,)
        else:
            h = np.maximum(self.key_bandwidth[self.index_rows], tiny)  # (n',)
            # w_i h_i^(-r), relative to the smallest h (no overflow at many coordinates).
            weight = weight * (h.min() / h) ** r
        n_keys = len(self.index_rows)
        tensor = lambda a: keys.tensor(a, settings.device)
        values, log_w = tensor(keys.values[self.index_rows]), tensor(np.log(weight))
        # Per query a row of distances, logits and weights (and of the attention, and
        # of the categories' distances and their sum with the others').
        row_bytes = n_keys * keys.dtype.itemsize * (
            4 + settings.return_attention + 2 * (self.categories is not None))
        n_q = queries.shape[0]
        outs, attentions, n_fallback = [], [], 0
        for rows in gen_batches(n_q, chunk_rows(n_q, row_bytes, settings.working_memory)):
            dist = self.index.distances(search_queries[rows])  # (b, n')
            with np.errstate(over="ignore"):  # h = tiny: d_k = 0, only distance 0 counts
                dist /= h[rows, None] if adaptive.kind == "balloon" else h
            if r < keys.n_coords:  # with the categories' distances (in the kernel's unit)
                dist = np.hypot(dist, exact_distances(
                    torch.as_tensor(keys.scaled(queries[rows])[:, r:]),
                    torch.as_tensor(self.categories)).numpy())
            part = dense_pool(tensor(dist), values, keys.kernel, log_w=log_w,
                              return_attention=settings.return_attention,
                              exact_zeros=keys.exact_zeros)
            outs.append(part.out)
            n_fallback += part.n_fallback
            if settings.return_attention:
                # The keys of positive weight are the attention's columns.
                block = np.zeros((len(dist), keys.X.shape[0]), dtype=keys.dtype)
                block[:, self.index_rows] = part.attention.cpu().numpy()
                attentions.append(sp.csr_array(block) if keys.kernel.is_compact else block)
        attention = None
        if settings.return_attention:
            attention = (sp.vstack(attentions, format="csr") if keys.kernel.is_compact
                         else torch.from_numpy(np.concatenate(attentions)))
        return pooled_values(torch.cat(outs), attention, n_fallback, n_q, keys.X.shape[0])

    def key_scale(self, keys):
        """A sample-point key's distances are divided by its bandwidth (in the search
        space); a balloon's bandwidth moves with the query, whose derivative is not
        computed."""
        if self.adaptive.kind == "balloon":
            raise NotImplementedError(
                "Marginal effects differentiate the attention with the bandwidth held; a "
                "balloon bandwidth (AdaptiveBandwidth(kind='balloon')) moves with the query "
                "(its k-th neighbor distance). Use kind='sample_point', a fixed bandwidth, "
                "or degree=1 (the local slope).")
        h = np.maximum(self.key_bandwidth, np.finfo(np.float64).tiny)  # (n,)
        return keys.search_scale / h

    def _leave_one_out_inputs(self, keys, loo, values, settings):
        """Exact leave-one-out attention (G, G) of the distinct inputs under the adaptive
        bandwidth (:class:`~sklearn_nw._adaptive.LeaveOneOutNeighbors`): dense, CSR for
        compact kernels; refused above ``working_memory``."""
        working_memory, device = settings.working_memory, settings.device
        G = len(loo.weight)
        if 4 * G * G * 8 > working_memory * 2**20:
            raise ValueError(
                f"The leave-one-out attention of an adaptive bandwidth holds dense ({G}, "
                f"{G}) matrices, more than scikit-learn's working_memory of "
                f"{working_memory} MiB. Raise the limit with "
                "sklearn.config_context(working_memory=...)."
            )
        r = self.r
        points = torch.as_tensor(keys.search_space(loo.X)[:, :r], device=device)  # (G, r)
        D = exact_distances(points, points)  # (G, G)
        extra = (None if r == keys.n_coords else
                 categorical_logits(keys.kernel, keys.scaled(loo.X)[:, r:], device))
        neighbors = LeaveOneOutNeighbors(D, torch.as_tensor(loo.weight, device=device),
                                         self.adaptive.n_neighbors, extra=extra)
        attention, n_fallback = neighbors.attention(self.adaptive, keys.kernel, r)
        attention = attention.to(torch_dtype(keys.dtype))
        if keys.kernel.is_compact:
            return sp.csr_array(attention.cpu().numpy()), n_fallback
        return attention, n_fallback
