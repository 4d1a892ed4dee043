"""A compact kernel's support, its weights evaluated directly: the key layout both the dense
route and the cell list sum over (:class:`SupportKeys`), one call's sums over it
(:class:`SupportSums`), and the cell-list route (:class:`CellListRoute`).

Inside the support the weights are the kernel's profile, evaluated on centered keys
without logarithms; queries that no key reaches are redone over every key in log space
(:meth:`~sklearn_nw._keys.FittedKeys.attend`), which gives them their nearest key(s).
"""

import numpy as np
import scipy.sparse as sp
import torch

from ._engine import augment_keys, key_center, support_pairs_pool, support_pool
from ._routes import PooledValues, Route, numpy_attention

# A cell list's query with at most this many candidates is pooled over its own, as flat
# pairs; queries with more share blocks of candidates (one dense problem per block).
_PAIRS_MAX_CANDIDATES = 2048


class SupportKeys:
    """The keys of positive weight laid out for a compact kernel's direct evaluation.

    Parameters
    ----------
    keys : FittedKeys
    rows : ndarray of shape (n',)
        The keys of positive weight, in the order of the layout (cell order on a cell
        list).

    Attributes
    ----------
    rows : ndarray of shape (n',)
    key_rows : ndarray of shape (n', r + t + 1)
        One row per key: its scaled coordinates less ``center``, its weighted values and
        its weight, computed in float64 and rounded once to the keys' dtype.
    center : ndarray of shape (r,)
        The median of the scaled keys (the weights are translation invariant, and far from
        the origin ``|q|^2 + |x|^2 - 2 q.x`` would lose the distances' precision above
        three dimensions).
    """

    def __init__(self, keys, rows):
        self.rows = rows
        w = keys.sample_weight[rows]
        # Bandwidths near the smallest float overflow the scaled inputs: their queries find
        # no weight and go to the careful path, which ranks distances without them.
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = keys.scaled(keys.X[rows])  # (n', r)
            # The center of _engine.key_center (rows are the keys of positive weight).
            self.center = key_center(torch.from_numpy(scaled)).numpy()  # (r,)
            r, t = scaled.shape[1], keys.values.shape[1]
            key_rows = np.empty((len(rows), r + t + 1), dtype=keys.dtype)
            np.subtract(scaled, self.center, out=key_rows[:, :r], casting="same_kind")
        np.multiply(w[:, None], keys.values[rows], out=key_rows[:, r:-1], casting="same_kind")
        key_rows[:, -1] = w
        self.key_rows = key_rows

    def whole_layout(self):
        """Every key as one block, laid out once: the coordinates (n', r), the weighted
        values and weights (t + 1, n'), both contiguous, and above three coordinates the
        key side of the distance expansion (:func:`_engine.augment_keys`), else None."""
        r = self.center.shape[0]
        xs = np.ascontiguousarray(self.key_rows[:, :r])  # (n', r)
        augmented = None
        if r > 3:
            rows, x2_max = augment_keys(torch.from_numpy(xs))
            augmented = (rows.numpy(), x2_max.numpy())
        return xs, np.ascontiguousarray(self.key_rows[:, r:].T), augmented


class SupportSums:
    """One call's sums over :class:`SupportKeys`: blocks of queries against blocks of keys
    (:meth:`block`, :meth:`runs`) or each query against its own candidates
    (:meth:`pairs`); :meth:`finish` redoes the queries that no key reached over every key
    and assembles the result.

    Parameters
    ----------
    support : SupportKeys
    keys : FittedKeys
        The keys ``support`` was laid out from.
    queries : ndarray of shape (n_q, d)
    settings : PoolSettings
    """

    def __init__(self, support, keys, queries, settings):
        self.support, self.keys, self.queries, self.settings = support, keys, queries, settings
        with np.errstate(over="ignore", invalid="ignore"):
            self.qs = keys.scaled(queries) - support.center  # (n_q, r)
        self.out = np.empty((queries.shape[0], keys.values.shape[1]), dtype=keys.dtype)
        self.parts, self.unreached = [], []

    def _tensor(self, a):
        return self.keys.tensor(a, self.settings.device)

    def block(self, rows, xs, wv1_t, augmented=None, found=None):
        """Query ``rows`` against the keys ``xs`` (m, r) with weighted values and weights
        ``wv1_t`` (t + 1, m): the support keys ``found`` (all, in order, when None)."""
        settings = self.settings
        block_out, empty, attention = support_pool(
            self._tensor(self.qs[rows]), xs, wv1_t, self.keys.kernel,
            return_attention=settings.return_attention,
            working_memory=settings.working_memory, augmented=augmented,
        )
        self.out[rows] = block_out.cpu().numpy()
        self.unreached.append(rows[empty.cpu().numpy()])
        if settings.return_attention:
            crow, col, val = (a.cpu().numpy() for a in attention)
            keys = self.support.rows[col if found is None else found[col]]
            self.parts.append((np.repeat(rows, np.diff(crow)), keys, val))

    def runs(self, rows, runs, key_rows):
        """Query ``rows`` against the support keys of ``runs`` (``(start, stop)`` slices of
        ``key_rows``, the tensor of :attr:`SupportKeys.key_rows`)."""
        r = self.qs.shape[1]  # key rows: r coordinates, t weighted values, the weight
        # The candidates' key rows, copied whole (contiguous) when several runs.
        block = (key_rows[runs[0][0]:runs[0][1]] if len(runs) == 1
                 else torch.cat([key_rows[a:b] for a, b in runs]))  # (m, r + t + 1)
        found = None
        if self.settings.return_attention:
            found = np.concatenate([np.arange(a, b) for a, b in runs])
        self.block(rows, block[:, :r], block[:, r:].T, found=found)

    def pairs(self, rows, lo, hi, key_rows):
        """Query ``rows``, each against its own candidates: the slices ``lo``, ``hi``
        (f, runs) of ``key_rows`` (the tensor of :attr:`SupportKeys.key_rows`)."""
        settings = self.settings

        def index(a):
            return torch.as_tensor(a, dtype=torch.long, device=settings.device)

        block_out, empty, attention = support_pairs_pool(
            self._tensor(self.qs[rows]), key_rows, index(lo), index(hi),
            self.keys.kernel, return_attention=settings.return_attention,
        )
        self.out[rows] = block_out.cpu().numpy()
        self.unreached.append(rows[empty.cpu().numpy()])
        if settings.return_attention:
            crow, col, val = (a.cpu().numpy() for a in attention)
            self.parts.append((np.repeat(rows, np.diff(crow)), self.support.rows[col], val))

    def mark_unreached(self, rows):
        """Query ``rows`` have no support key in reach."""
        self.unreached.append(rows)

    def finish(self):
        """The pooled values, the queries no key reached given their nearest key(s)."""
        keys, settings = self.keys, self.settings
        unreached = np.concatenate(self.unreached)
        n_q, n_keys = self.queries.shape[0], keys.X.shape[0]
        n_fallback = 0
        if len(unreached):
            result = keys.attend(self.queries[unreached], settings)
            self.out[unreached] = result.out.cpu().numpy()
            n_fallback = result.n_fallback
            if settings.return_attention:
                crow, col, val = (a.cpu().numpy() for a in result.attention)
                self.parts.append((np.repeat(unreached, np.diff(crow)), col, val))
        attention = None
        if settings.return_attention:
            q_rows, cols, vals = (np.concatenate(p) for p in zip(*self.parts))
            attention = sp.csr_array((vals, (q_rows, cols)), shape=(n_q, n_keys))
        return PooledValues(self.out, numpy_attention(attention, n_q, n_keys), n_fallback)


class CellListRoute(Route):
    """A compact kernel's support, searched on a :class:`~sklearn_nw._cells.CellList`: a
    query with few candidates against its own, blocks of the others against the keys of
    the cells around them.

    Parameters
    ----------
    keys : FittedKeys
    index : CellList
        The keys of positive weight, ``index_rows``, binned in the search space.
    index_rows : ndarray of shape (n_indexed,)
    """

    name = "cell_list"

    def __init__(self, keys, index, index_rows):
        super().__init__(keys)
        self.index = index
        self.support = SupportKeys(keys, index_rows[index.order])

    def pool(self, keys, queries, settings):
        sums = SupportSums(self.support, keys, queries, settings)
        key_rows = keys.tensor(self.support.key_rows, settings.device)  # (n', r + t + 1)
        search = keys.search_space(queries)  # (n_q, d)
        lo, hi = self.index.runs(search)  # (n_q, runs)
        n_candidates = (hi - lo).sum(1)  # (n_q,)
        sums.mark_unreached(np.flatnonzero(n_candidates == 0))
        few = np.flatnonzero((n_candidates > 0) & (n_candidates <= _PAIRS_MAX_CANDIDATES))
        if len(few):
            sums.pairs(few, lo[few], hi[few], key_rows)
        many = np.flatnonzero(n_candidates > _PAIRS_MAX_CANDIDATES)
        if len(many):
            for rows, runs in self.index.blocks(search[many]):
                if runs:
                    sums.runs(many[rows], runs, key_rows)
                else:
                    sums.mark_unreached(many[rows])
        return sums.finish()
