"""A compact kernel's support, its weights evaluated directly: the key layout both the dense
route and the cell list sum over (:class:`SupportKeys`), one call's sums over it
(:class:`SupportSums`), and the cell-list route (:class:`CellListRoute`).

Inside the support the weights are the kernel's profile, evaluated on centered keys
without logarithms; queries that no key reaches are redone over every key in log space
(:meth:`~sklearn_nw._keys.FittedKeys.attend`), which gives them their nearest key(s).
"""

import numpy as np
import torch

from ._engine import augment_keys, key_center
from ._engine_candidates import support_pairs_pool, support_pool
from ._routes import (
    PooledValues,
    PooledWithVariance,
    PoolSettings,
    Route,
    csr_from_parts,
    numpy_attention,
)
from ._workers import on_workers

# A cell list's query with at most this many candidates is pooled over its own, as flat
# pairs; queries with more share blocks of candidates (one dense problem per block).
_PAIRS_MAX_CANDIDATES = 2048
# (query, candidate) pairs per task at most, where a block of the cell list has more.
_TASK_PAIRS = 2**20


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

    def key_rows_with_squares(self, keys, squares):
        """:attr:`key_rows` followed by ``w_i**2 s_i`` for per-key values ``squares`` (n,
        s) of every key (the sums of :class:`SupportSums` with ``squares``), in the keys'
        dtype."""
        w = keys.sample_weight[self.rows].astype(np.float64)
        return np.hstack([self.key_rows, (w * w)[:, None] * squares[self.rows]]).astype(
            self.key_rows.dtype, copy=False)

    def whole_layout(self):
        """Every key as one block, laid out once: the coordinates (n', r), the weighted
        values and weights (t + 1, n'), both contiguous, and above three coordinates the
        key side of the distance expansion (:func:`~sklearn_nw._engine.augment_keys`), else None."""
        r = self.center.shape[0]
        xs = np.ascontiguousarray(self.key_rows[:, :r])  # (n', r)
        augmented = None
        if r > 3:
            rows, x2_max = augment_keys(torch.from_numpy(xs))
            augmented = (rows.numpy(), x2_max.numpy())
        return xs, np.ascontiguousarray(self.key_rows[:, r:].T), augmented


class SupportSums:
    """One call's sums over :class:`SupportKeys`: blocks of queries against blocks of keys
    (:meth:`block`, :meth:`runs`, the blocks of a cell list on the workers) or each query
    against its own candidates (:meth:`pairs`); :meth:`finish` redoes the queries that no
    key reached over every key and assembles the result.

    Parameters
    ----------
    support : SupportKeys
    keys : FittedKeys
        The keys ``support`` was laid out from.
    queries : ndarray of shape (n_q, d)
    settings : PoolSettings
    squares : ndarray of shape (n, s), optional
        Values ``s_i`` per key (every key, in the keys' order) whose sums
        ``sum_i a_i**2 s_i`` over the squared attention follow the pooled values in the
        result's ``out`` (n_q, t + s): the key rows the sums run over then end with
        ``w_i**2 s_i`` (:meth:`SupportKeys.key_rows_with_squares`).
    with_den : bool
        Each query's total weight ``sum_i w_i k_i`` follows in the last column of ``out``
        (NaN for the queries no key reaches).
    """

    def __init__(self, support, keys, queries, settings, squares=None, with_den=False):
        self.support, self.keys, self.queries, self.settings = support, keys, queries, settings
        self.squares, self.with_den = squares, with_den
        self.n_squares = 0 if squares is None else squares.shape[1]
        with np.errstate(over="ignore", invalid="ignore"):
            self.qs = keys.scaled(queries) - support.center  # (n_q, r)
        self.out = np.empty((queries.shape[0],
                             keys.values.shape[1] + self.n_squares + with_den),
                            dtype=keys.dtype)
        self.parts, self.unreached = [], []

    def _tensor(self, a):
        return self.keys.tensor(a, self.settings.device)

    def block(self, rows, xs, weighted_t, augmented=None):
        """Query ``rows`` against every support key: ``xs`` (n', r) with weighted values
        and weights ``weighted_t`` (t + 1, n')."""
        self._record(self._block(rows, xs, weighted_t, augmented))

    def runs(self, blocks, key_rows):
        """Query blocks against the support keys of their runs: ``blocks`` are
        ``(rows, runs)``, the runs ``(start, stop)`` slices of ``key_rows`` (the tensor of
        :attr:`SupportKeys.key_rows`; none: no key in reach); each block on a worker,
        recorded in order."""
        r = self.qs.shape[1]  # key rows: r coordinates, t weighted values, the weight

        def block_sums(block, _):
            rows, runs = block
            if not runs:
                return rows, None, rows, None
            # The candidates' key rows, copied whole (contiguous) when several runs.
            candidates = (key_rows[runs[0][0]:runs[0][1]] if len(runs) == 1
                          else torch.cat([key_rows[a:b] for a, b in runs]))  # (m, r + t + 1)
            found = None
            if self.settings.return_attention:
                found = np.concatenate([np.arange(a, b) for a, b in runs])
            return self._block(rows, candidates[:, :r], candidates[:, r:].T, found=found)

        for sums in on_workers(blocks, block_sums, self.settings.device):
            self._record(sums)

    def _block(self, rows, xs, weighted_t, augmented=None, found=None):
        """The sums of query ``rows`` against the keys ``xs`` (m, r) with weighted values
        and weights ``weighted_t`` (t + 1, m), the support keys ``found`` (all, in order,
        when None): ``(rows, pooled values, rows with no key in reach, attention part)``.
        """
        settings = self.settings
        block_out, empty, attention = support_pool(
            self._tensor(self.qs[rows]), xs, weighted_t, self.keys.kernel,
            return_attention=settings.return_attention,
            working_memory=settings.working_memory, augmented=augmented,
            squares=self.n_squares, with_den=self.with_den,
        )
        part = None
        if settings.return_attention:
            crow, col, val = (a.cpu().numpy() for a in attention)
            keys = self.support.rows[col if found is None else found[col]]
            part = (rows, np.diff(crow), keys, val)
        return rows, block_out.cpu().numpy(), rows[empty.cpu().numpy()], part

    def _record(self, sums):
        rows, out, unreached, part = sums
        if out is not None:
            self.out[rows] = out
        self.unreached.append(unreached)
        if part is not None:
            self.parts.append(part)

    def pairs(self, rows, lo, hi, key_rows):
        """Query ``rows``, each against its own candidates: the slices ``lo``, ``hi``
        (f, runs) of ``key_rows`` (the tensor of :attr:`SupportKeys.key_rows`)."""
        settings = self.settings

        def index(a):
            return torch.as_tensor(a, dtype=torch.long, device=settings.device)

        block_out, empty, attention = support_pairs_pool(
            self._tensor(self.qs[rows]), key_rows, index(lo), index(hi),
            self.keys.kernel, return_attention=settings.return_attention,
            squares=self.n_squares, with_den=self.with_den,
        )
        self.out[rows] = block_out.cpu().numpy()
        self.unreached.append(rows[empty.cpu().numpy()])
        if settings.return_attention:
            crow, col, val = (a.cpu().numpy() for a in attention)
            self.parts.append((rows, np.diff(crow), self.support.rows[col], val))

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
            with_attention = settings.return_attention or self.squares is not None
            result = keys.attend(self.queries[unreached],
                                 settings._replace(return_attention=with_attention))
            t = keys.values.shape[1]
            self.out[unreached, :t] = result.out.cpu().numpy()
            n_fallback = result.n_fallback
            if with_attention:
                crow, col, val = (a.cpu().numpy() for a in result.attention)
            if self.with_den:  # no kernel weight: the fallback's is another's
                self.out[unreached, -1] = np.nan
            if self.squares is not None:  # their attention's squares: the nearest key(s)
                row = np.repeat(np.arange(len(unreached)), np.diff(crow))
                weights = val.astype(np.float64) ** 2
                self.out[unreached, t : t + self.n_squares] = np.stack(
                    [np.bincount(row, weights=weights * self.squares[col, c],
                                 minlength=len(unreached))
                     for c in range(self.n_squares)], axis=1)
            if settings.return_attention:
                self.parts.append((unreached, np.diff(crow), col, val))
        attention = None
        if settings.return_attention:
            attention = csr_from_parts(self.parts, (n_q, n_keys), keys.dtype)
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
        return self._pool(keys, queries, settings)

    def pool_with_variance(self, keys, queries, variance, *, device="cpu",
                           working_memory=1024):
        """The predictions at ``queries`` (n_q, t) and ``sum_i l_i**2 s_i**2`` (n_q, t)
        for the targets' variances ``variance`` (n, t), ``l`` the attention, from the
        cell list's sums with the squared weights weighing the variances beside (no
        attention matrix); the queries no key reaches from their nearest key(s)'
        attention. A :class:`~sklearn_nw._routes.PooledWithVariance`."""
        # Relative to each output's largest variance, as the dense route's (float32).
        unit = np.max(variance, axis=0, initial=0.0)  # (t,)
        unit[~(unit > 0)] = 1.0
        settings = PoolSettings(torch.device(device), False, "auto", working_memory)
        pooled = self._pool(keys, queries, settings, squares=variance / unit)
        t = keys.values.shape[1]
        out = pooled.out.astype(np.float64, copy=False)
        return PooledWithVariance(out[:, :t], out[:, t:] * unit, pooled.n_fallback)

    def in_sample_with_leverage(self, keys, *, device="cpu", working_memory=1024):
        """The in-sample fits (n, t) of the keys and each key's weight in its own fit,
        ``w_i k(0) / sum_j w_j k(u_ij)`` (n,), from the cell list's sums (each training
        point's total weight beside its fit); float64 numpy, or None where a key of
        positive weight has no kernel weight there (a bandwidth so small its scaled
        inputs overflow: the attention path)."""
        settings = PoolSettings(torch.device(device), False, "auto", working_memory)
        out = self._pool(keys, keys.X, settings, with_den=True).out.astype(np.float64,
                                                                              copy=False)
        positive = keys.sample_weight > 0
        den = out[positive, -1]
        if not np.all(den > 0) or not np.all(np.isfinite(den)):
            return None
        leverage = np.zeros(len(out))
        leverage[positive] = (keys.sample_weight[positive] * float(keys.kernel([0.0])[0])
                              / den)
        return out[:, :-1], leverage

    def _pool(self, keys, queries, settings, squares=None, with_den=False):
        """:meth:`pool`; with ``squares`` (n, s), the sums of :class:`SupportSums`'s
        beside the pooled values; ``with_den``, each query's total weight after them."""
        sums = SupportSums(self.support, keys, queries, settings, squares, with_den)
        key_rows = keys.tensor(self.support.key_rows if squares is None else
                               self.support.key_rows_with_squares(keys, squares),
                               settings.device)  # (n', r + t + 1 (+ s))
        search = keys.search_space(queries)  # (n_q, d)
        lo, hi = self.index.runs(search)  # (n_q, runs)
        n_candidates = (hi - lo).sum(1)  # (n_q,)
        sums.mark_unreached(np.flatnonzero(n_candidates == 0))
        few = np.flatnonzero((n_candidates > 0) & (n_candidates <= _PAIRS_MAX_CANDIDATES))
        if len(few):
            sums.pairs(few, lo[few], hi[few], key_rows)
        many = np.flatnonzero(n_candidates > _PAIRS_MAX_CANDIDATES)
        if len(many):
            blocks = []
            for rows, runs in self.index.blocks(search[many]):
                # A block of many queries and candidates is split by rows: the workers
                # share the call evenly.
                m = sum(b - a for a, b in runs)
                step = max(1, _TASK_PAIRS // max(1, m))
                blocks += [(many[rows[s:s + step]], runs) for s in range(0, len(rows), step)]
            sums.runs(blocks, key_rows)
        return sums.finish()
