"""The dense route: sums over every key of positive weight, eager or compiled.

Eager, the keys' log-space engine (:meth:`~sklearn_nw._keys.FittedKeys.attend`), or a
compact kernel's profile evaluated directly on the support layout
(:mod:`sklearn_nw._routes_support`); compiled, the fused loop of
:mod:`sklearn_nw._compiled`, chosen per call by ``compute`` and the compile policy. The
route also gives one shard's partial sums and their gradient, which
:mod:`sklearn_nw.dask` merges over the shards of a training set.
"""

import math
import time

import numpy as np
import torch

from ._compiled import AUTO_MAX_COORDS, CompileError, config_key, current_policy
from ._engine import (
    KeyTensors,
    exact_sq_dist,
    exp_,
    fused_pool,
    prepare_keys,
    values_and_ones_t,
)
from ._engine_partial import PartialSums, empty_partial, partial_pool
from ._engine_partial import partial_gradient as engine_partial_gradient
from ._routes import (
    LeaveOneOutMoves,
    PooledWithVariance,
    Route,
    one_hot_classes,
    pooled_values,
    torch_dtype,
)
from ._routes_support import SupportKeys, SupportSums
from ._workers import serial_if_small


class DenseRoute(Route):
    """Every key of positive weight, for every query.

    Parameters
    ----------
    keys : FittedKeys

    Attributes
    ----------
    prepared : KeyTensors
        The engine's per-key arrays of the dense sums (:func:`_engine.prepare_keys`),
        computed once on the CPU, numpy.
    support : SupportKeys or None
        A compact kernel's keys laid out for its direct evaluation; None otherwise.
    """

    name = "dense"

    def __init__(self, keys):
        super().__init__(keys)
        self.support = self.whole = None
        if keys.kernel.is_compact:
            self.support = SupportKeys(keys, np.flatnonzero(keys.sample_weight > 0))
        tensor = lambda a: keys.tensor(a, "cpu")
        prepared = prepare_keys(tensor(keys.X), tensor(keys.values), tensor(keys.metric),
                                keys.kernel, tensor(keys.log_w),
                                None if keys.center is None else tensor(keys.center))
        self.prepared = KeyTensors(*(None if t is None else t.numpy() for t in prepared))
        if self.support is not None:
            self.whole = self.support.whole_layout()

    def _prepared_tensors(self, device):
        return KeyTensors(*(None if a is None else torch.as_tensor(a, device=device)
                            for a in self.prepared))

    def pool(self, keys, queries, settings):
        """Sums over every key: compiled when ``compute`` says so (or "auto" and the
        compile policy find it worth it), else eager."""
        compiled = not settings.return_attention and settings.compute != "eager"
        policy = current_policy()
        key = (self.compile_key(keys, settings.device)
               if compiled and settings.compute == "auto" else None)
        pairs = queries.shape[0] * keys.X.shape[0]
        if compiled and (settings.compute == "compiled"
                         or key is not None and policy.chooses(key, queries.shape[0], pairs)):
            ready = key is not None and policy.is_ready(key)  # else this call compiles
            start = time.perf_counter()
            result = self._pool_compiled(keys, queries, settings, policy)
            if result is not None:
                if ready:  # what "auto" weighs against the eager engine
                    policy.record_compiled(key, queries.shape[0], pairs,
                                           time.perf_counter() - start)
                return result
        start = time.perf_counter()
        result = self._pool_eager(keys, queries, settings)
        if key is not None:  # what "auto" weighs against compiling
            policy.record_eager(key, queries.shape[0], pairs, time.perf_counter() - start)
        return result

    def _pool_eager(self, keys, queries, settings):
        """A compact kernel's profile on the whole support layout, else the log-space
        engine on the prepared keys."""
        if self.support is None:
            result = keys.attend(queries, settings,
                                 prepared=self._prepared_tensors(settings.device))
            return pooled_values(*result, queries.shape[0], keys.X.shape[0])
        tensor = lambda a: keys.tensor(a, settings.device)
        xs, weighted_t, augmented = self.whole
        if augmented is not None:
            augmented = tuple(torch.as_tensor(a, device=settings.device) for a in augmented)
        sums = SupportSums(self.support, keys, queries, settings)
        sums.block(np.arange(queries.shape[0]), tensor(xs), tensor(weighted_t), augmented)
        return sums.finish()

    def compile_key(self, keys, device):
        """The compiled loop's configuration for "auto": compilable kernels, up to
        ``AUTO_MAX_COORDS`` coordinates, not on MPS; else None (always eager)."""
        if (not keys.kernel.compilable or device.type == "mps"
                or keys.n_coords > AUTO_MAX_COORDS):
            return None
        return config_key(keys.kernel, torch_dtype(keys.dtype), device, keys.n_coords,
                          keys.values.shape[1] + 1)

    def _pool_compiled(self, keys, queries, settings, policy):
        """Dense sums on the compiled loop; None where compiling failed under "auto" (the
        policy warns), which leaves the call to the eager engine."""
        tensor = lambda a: keys.tensor(a, settings.device)
        try:
            result = fused_pool(tensor(queries), tensor(keys.X), tensor(keys.values),
                                tensor(keys.metric), keys.kernel, log_w=tensor(keys.log_w),
                                working_memory=settings.working_memory, policy=policy,
                                keys=self._prepared_tensors(settings.device))
        except CompileError as exc:
            if settings.compute == "compiled":
                raise
            policy.warn_fallback(exc)
            return None
        return pooled_values(*result, queries.shape[0], keys.X.shape[0])

    # -- standard errors from sums ---------------------------------------------------------

    def pool_with_variance(self, keys, queries, variance, *, device="cpu",
                           working_memory=1024):
        """The predictions at ``queries`` (n_q, t) and ``sum_i l_i**2 s_i**2`` (n_q, t) for
        the targets' variances ``variance`` (n, t), ``l`` the attention, from one pass of
        sums and no attention matrix: the weights of the predictions' sums, squared,
        weigh the variances. A :class:`~sklearn_nw._routes.PooledWithVariance`; None for
        local polynomials, and where a query has no kernel weight (the nearest-key
        fallback's weights are not the kernel's): the attention path serves those calls."""
        if keys.degree or not np.any(keys.sample_weight > 0):
            return None
        tensor = lambda a: keys.tensor(a, device)
        # In the keys' dtype relative to each output's largest variance (float32
        # overflows at 3e38, the squared targets' unit does not matter to the sums).
        unit = np.max(variance, axis=0, initial=0.0)  # (t,)
        unit[~(unit > 0)] = 1.0
        with serial_if_small(queries.shape[0] * keys.X.shape[0], torch.device(device)):
            sums, squared = partial_pool(
                tensor(queries), tensor(keys.X), tensor(keys.values), tensor(keys.metric),
                keys.kernel, log_w=tensor(keys.log_w), keys=self._prepared_tensors(device),
                working_memory=working_memory, squared_values=tensor(variance / unit))
        if not bool(torch.isfinite(sums.log_den).all()):
            return None
        as_numpy = lambda t: t.cpu().numpy().astype(np.float64, copy=False)
        return PooledWithVariance(as_numpy(sums.out), as_numpy(squared) * unit)

    def in_sample_with_leverage(self, keys, *, device="cpu", working_memory=1024):
        """The in-sample fits (n, t) of the keys and each key's weight in its own fit,
        ``w_i k(0) / sum_j w_j k(u_ij)`` (n,), from sums; float64 numpy, or None as in
        :meth:`pool_with_variance`."""
        if keys.degree or not np.any(keys.sample_weight > 0):
            return None
        tensor = lambda a: keys.tensor(a, device)
        x, log_w = tensor(keys.X), tensor(keys.log_w)
        with serial_if_small(keys.X.shape[0] ** 2, torch.device(device)):
            fits = partial_pool(x, x, tensor(keys.values), tensor(keys.metric), keys.kernel,
                                log_w=log_w, keys=self._prepared_tensors(device),
                                working_memory=working_memory)
        if not bool(torch.isfinite(fits.log_den).all()):
            return None
        own = keys.kernel.log_profile_sq(log_w.new_zeros(1))  # log k(0)
        leverage = torch.exp(log_w + own - fits.log_den)  # (n,)
        return (fits.out.cpu().numpy().astype(np.float64, copy=False),
                leverage.cpu().numpy().astype(np.float64, copy=False))

    def sums_of(self, keys, queries, values, *, device="cpu", working_memory=1024,
                deviation_of=()):
        """:meth:`partial_pool` of other ``values`` (n, k) than the keys' own, at
        ``queries``: their attention-weighted means (n_q, k) and the log normalizers
        (n_q,), a :class:`~sklearn_nw._engine_partial.PartialSums` in float64; with
        ``deviation_of`` (columns), ``(sums, deviation)``: the engine's ``max_j a_j
        |values_jc - mean_c|`` (n_q, len(deviation_of)) beside them."""
        tensor = lambda a: keys.tensor(a, device)
        numpy = lambda t: t.cpu().numpy().astype(np.float64, copy=False)
        v = tensor(values)
        prepared = self._prepared_tensors(device)._replace(v1t=values_and_ones_t(v))
        with serial_if_small(queries.shape[0] * keys.X.shape[0], torch.device(device)):
            part = partial_pool(tensor(queries), tensor(keys.X), v, tensor(keys.metric),
                                keys.kernel, log_w=tensor(keys.log_w), keys=prepared,
                                working_memory=working_memory, deviation_of=deviation_of)
        if not len(deviation_of):
            return PartialSums(*(numpy(t) for t in part))
        return PartialSums(*(numpy(t) for t in part[0])), numpy(part[1])

    def leave_one_out_moves(self, keys, queries, *, device="cpu", working_memory=1024):
        """How the Nadaraya-Watson fits at ``queries`` move without each key:
        ``a_j (f - v_j) / (1 - a_j)``, bounded by ``max_j a_j |f - v_j| / (1 - A)``
        (measured in the pass of the fits for one output; else ``A max_j |f - v_j|``,
        which bounds it) with ``A = w_max k(0) / sum_i w_i k(u_i)`` at least every
        weight (a decreasing profile); the queries where ``A`` may reach 1/2 are left to
        the attention. A
        :class:`~sklearn_nw._routes.LeaveOneOutMoves`, or None for local polynomials,
        other kernels, and where a query has no kernel weight."""
        if keys.degree or not keys.kernel.decreasing:
            return None
        # One output, or the classes' one-hot values, measure their largest weighted
        # deviation in the pass (other outputs: the bound below alone).
        measured = keys.values.shape[1] == 1 or one_hot_classes(keys.values) is not None
        sums = self.partial_pool(keys, queries, device=device,
                                 working_memory=working_memory, largest_deviation=measured)
        sums, deviation = sums if measured else (sums, np.inf)
        if not np.all(np.isfinite(sums.log_den)):
            return None
        fits, v = sums.out, keys.values.astype(np.float64)  # (n_q, t), (n, t)
        held = v[keys.sample_weight > 0]
        # inf (a query far beyond every key: its sums' logarithm far below 0) is "may
        # reach 1/2": the attention's.
        with np.errstate(divide="ignore", over="ignore"):
            largest = np.exp(np.max(keys.log_w) + np.log(keys.kernel([0.0])[0])
                             - sums.log_den)  # (n_q,)
        rest = ~(largest < 0.5)
        spread = np.maximum(fits - held.min(0), held.max(0) - fits)  # (n_q, t)
        share = np.minimum(largest, 0.5)[:, None]  # (n_q, 1)
        # The largest weighted deviation where the engine measured it: far below share *
        # spread, the keys of most weight lying near the query, their values near its fit.
        bound = np.where(rest[:, None], np.inf,
                         np.minimum(share * spread, deviation) / (1 - share))

        scaled_keys = []  # the keys scaled once, for the queries' own keys

        def moves(rows, columns):
            if columns.ndim == 2 and not scaled_keys:  # feature by feature (d, n)
                scaled_keys.append(np.ascontiguousarray(keys.scaled(keys.X).T))
            a = torch.from_numpy(self.attention_on(
                keys, queries[rows], columns, sums.log_den[rows], device=device,
                working_memory=working_memory,
                scaled_keys=scaled_keys[0] if columns.ndim == 2 else None))  # (b, m)
            a = a[:, :, None]  # (b, m, 1)
            v_keys = v[columns] if columns.ndim == 2 else v[columns][None]  # (b | 1, m, t)
            # a (f - v) / (1 - a), in place
            moved = torch.from_numpy(fits[rows, None, :] - v_keys).mul_(a)  # (b, m, t)
            return moved.div_(a.neg().add_(1)).numpy()

        return LeaveOneOutMoves(fits, bound, rest, moves)

    def attention_on(self, keys, queries, columns, log_den, *, device="cpu",
                     working_memory=1024, scaled_keys=None):
        """The attention (b, m) of ``queries`` (b, d) on the keys ``columns`` alone ((m,)
        shared, or (b, m) each query's own), normalized by the sums over every key
        ``exp(log_den)`` (b,) (of :meth:`partial_pool`), from exact distances; float64
        numpy. ``scaled_keys``: every key scaled, feature by feature (d, n), if at hand
        for ``columns`` (b, m)."""
        tensor = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), device=device)
        with np.errstate(over="ignore", invalid="ignore"):
            q = tensor(keys.scaled(queries))
            if columns.ndim == 1:
                d2 = exact_sq_dist(q, tensor(keys.scaled(keys.X[columns])),
                                   working_memory)  # (b, m)
        if columns.ndim == 2:  # each query its own keys: the same differences
            if scaled_keys is None:
                scaled_keys = np.ascontiguousarray(keys.scaled(keys.X).T)  # (d, n)
            d2 = (q[:, None, 0] - tensor(scaled_keys[0][columns])).square_()  # (b, m)
            for j in range(1, q.shape[1]):
                d2.add_((q[:, None, j] - tensor(scaled_keys[j][columns])).square_())
        d2 = torch.nan_to_num_(d2, nan=math.inf, posinf=math.inf)  # (b, m)
        logits = keys.kernel.log_profile_sq(d2) + tensor(keys.log_w[columns])  # (b, m)
        return exp_(logits.sub_(tensor(log_den)[:, None])).cpu().numpy()

    # -- one shard of a larger key set (sklearn_nw.dask) -----------------------------------

    def partial_pool(self, keys, queries, *, leave_out_equal=False, device="cpu",
                     working_memory=1024, largest_deviation=False):
        """The share of ``keys``, one shard of a larger set of keys, in the predictions at
        ``queries`` (n_q, d): a :class:`~sklearn_nw._engine_partial.PartialSums` in float64
        numpy, merged with the other shards' by :func:`sklearn_nw._shards.merge`.
        ``leave_out_equal`` leaves out the keys at each query's location (leave-one-out
        of training inputs). With ``largest_deviation`` (one output, or the classes'
        one-hot values), ``(sums, deviation)``: the engine's ``max_j a_j |v_j - out|``
        (n_q, t) beside them."""
        numpy = lambda t: t.cpu().numpy().astype(np.float64, copy=False)
        deviation = None
        classes = (one_hot_classes(keys.values)
                   if largest_deviation and keys.values.shape[1] > 1 else None)
        if not np.any(keys.sample_weight > 0):
            part = empty_partial(queries.shape[0], keys.values.shape[1], torch.float64)
            deviation = np.full((queries.shape[0], keys.values.shape[1]), np.inf)
        else:
            tensor = lambda a: keys.tensor(a, device)
            with serial_if_small(queries.shape[0] * keys.X.shape[0], torch.device(device)):
                part = partial_pool(
                    tensor(queries), tensor(keys.X), tensor(keys.values),
                    tensor(keys.metric), keys.kernel, log_w=tensor(keys.log_w),
                    keys=self._prepared_tensors(device), leave_out_equal=leave_out_equal,
                    working_memory=working_memory,
                    deviation_of=(0,) if largest_deviation and classes is None else (),
                    key_classes=None if classes is None
                    else torch.as_tensor(classes, device=device))
            if largest_deviation:
                part, deviation = part[0], numpy(part[1])
        sums = PartialSums(*(numpy(t) for t in part))
        return (sums, deviation) if largest_deviation else sums

    def partial_gradient(self, keys, queries, pooled, log_den, cotangent, *,
                         den_cotangent=None, leave_out_equal=False, device="cpu",
                         working_memory=1024):
        """The share of ``keys`` (one shard) in the gradient in the metric of
        ``sum_i cotangent_i . pooled_i`` (plus ``sum_i den_cotangent_i log_den_i`` where
        given), for predictions ``pooled`` (n_q, t) at ``queries`` with log normalizer
        ``log_den`` (n_q,) over every shard (:func:`_engine_partial.partial_gradient`):
        an ndarray like the metric, float64."""
        if not np.any(keys.sample_weight > 0):
            return np.zeros_like(keys.metric)
        tensor = lambda a: keys.tensor(a, device)
        grad = engine_partial_gradient(
            tensor(queries), tensor(keys.X), tensor(keys.values), tensor(keys.metric),
            keys.kernel, log_w=tensor(keys.log_w), center=tensor(keys.center),
            pooled=tensor(pooled), log_den=tensor(log_den), cotangent=tensor(cotangent),
            den_cotangent=None if den_cotangent is None else tensor(den_cotangent),
            leave_out_equal=leave_out_equal, working_memory=working_memory)
        return grad.cpu().numpy().astype(np.float64)
