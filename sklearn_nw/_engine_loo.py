"""Leave-one-out sums of the Nadaraya-Watson engine. Torch only.

The loss of learned bandwidths (and its gradient, by autograd or written out for the
Gaussian), the same loss against given neighbor lists, and the leave-one-out predictions of
a whole grid of bandwidths in one pass. Notation as in :mod:`sklearn_nw._engine`; query i is
training point i, which keeps ``self_log_w[i]`` on itself: the estimators pose
leave-one-out on their distinct inputs, each leaving itself out entirely (``-inf``). Its own
key, and the nearest other keys of a query with no kernel mass, are those of
:mod:`sklearn_nw._leave_one_out`; the losses and their weighted mean those of
:mod:`sklearn_nw._losses`.
"""

import math
from typing import NamedTuple

import torch

from ._engine import (
    N_TEMPORARIES,
    augmented_sq_dist,
    exact_sq_dist,
    exp_,
    full_precision,
    fused_gaussian_keys,
    key_center,
    run_chunks,
    transform,
    values_and_ones_t,
)
from ._leave_one_out import (
    keep_own_values_,
    leave_group_out_,
    nearest_keys,
    other_keys,
    query_terms,
    same_group,
    self_logits,
    set_self_,
    tie_exact_sq_dist,
)
from ._local_poly import linear_fits_from_sums, linear_raw_columns, local_fit_many, n_terms
from ._losses import get_loss
from ._workers import CACHE_BYTES, chunk_rows, n_workers

# MiB of (rows, keys, coordinates) differences for the exact recomputation of a few rows.
_EXACT_MIB = 16


def loo_logits(qs, xs, kernel, log_w, self_log_w, rows, d2=None, group=None, own=None,
               raw=None):
    """Leave-one-out logits of the key rows ``rows`` (b,) against all keys, differentiable.

    ``d2`` (b, n), the squared scaled distances, is computed from ``qs`` and ``xs`` unless
    given. ``own`` (b,): each query's logit on its own key, where not
    :func:`~sklearn_nw._leave_one_out.self_logits` of ``self_log_w`` (queries at shared
    keys, :class:`~sklearn_nw._leave_one_out.QueryTerms`). With ``group`` (n,) the keys'
    groups, a row's whole group leaves with it. Rows
    with zero kernel mass fall back to the nearest other positive-weight key(s) (of other
    groups), a constant in the parameters, as in :func:`attention_pool`: every tie, the
    distances from ``raw`` ``(x, h)``, the keys' raw coordinates (n, d) and the metric,
    where given (:func:`~sklearn_nw._leave_one_out.tie_exact_sq_dist`), else ``d2``."""
    if d2 is None:
        d2 = augmented_sq_dist(qs, xs, refine=kernel.quadratic_coef is None)  # (b, n)
    logits = kernel.log_profile_sq(d2) + log_w  # (b, n)
    set_self_(logits, rows, self_logits(kernel, self_log_w, rows) if own is None else own)
    if group is not None:  # out of place: logits may be in autograd's graph
        logits = logits.masked_fill(same_group(group, rows), -math.inf)  # (b, n)
    empty = torch.isneginf(logits.detach().amax(1))  # (b,)
    if bool(empty.any()):
        near = (d2.detach()[empty] if raw is None
                else tie_exact_sq_dist(raw[0][rows[empty]], raw[0], raw[1].detach()))
        nearest, _ = nearest_keys(near, other_keys(torch.isfinite(log_w), rows[empty],
                                                   group))  # (e, n)
        fallback = torch.full_like(logits.detach(), -math.inf)  # (b, n)
        fallback[empty] = torch.where(nearest, log_w, -math.inf)
        logits = torch.where(empty[:, None], fallback, logits)
    return logits


def loo_loss(x, v, h, kernel, log_w, self_log_w, *, loss, rows=None, working_memory=1024,
             backward=False, group=None, queries=None):
    """Sample-weighted mean leave-one-out loss, ``sum_i w_i l_i / sum_i w_i`` over ``rows``.

    Parameters
    ----------
    x : Tensor (n, d)
        Training inputs: the keys and, through ``rows``, the queries.
    v : Tensor (n, t)
        Targets for the squared error; one-hot labels (class frequencies) for the log-loss.
    h : Tensor (d,) or (d, r)
        Bandwidths or projection, possibly requiring grad.
    kernel : Kernel
    log_w, self_log_w : Tensor (n,)
        Log sample weights, and the log weight each point keeps on itself.
    loss : SquaredError or LogLoss
        A loss of :mod:`sklearn_nw._losses`, or its name.
    rows : Tensor (m,), optional
        Training rows used as queries (a minibatch); all rows when None.
    working_memory : float
        MiB for the ``(chunk, n)`` temporaries, which autograd keeps until each chunk's
        backward pass.
    backward : bool
        Back-propagate chunk by chunk, accumulating into ``h.grad``: memory stays bounded.
    group : Tensor (n,), optional
        The keys' groups: each query leaves with every key of its group (leave-one-group-
        out); None: with its own key alone.
    queries : QueryTerms, optional
        The queries, aligned with ``rows`` (their own keys), where they are not the keys
        themselves (:class:`~sklearn_nw._leave_one_out.QueryTerms`); None: the keys
        ``rows``.

    Returns
    -------
    loss : float
    """
    loss = get_loss(loss)
    n = x.shape[0]
    rows = torch.arange(n, device=x.device) if rows is None else rows
    queries = query_terms(queries, v, log_w, self_log_w, rows)
    w_rows = queries.log_w.exp()  # (m,)
    total = w_rows.sum()
    xs_graph = transform(x, key_center(x), h)  # (n, r)
    # Chunks back-propagate into this detached copy; one final pass carries it to h.
    xs = xs_graph.detach().requires_grad_(backward)
    row_bytes = n * x.element_size() * 8
    step = chunk_rows(len(rows), row_bytes, working_memory, cap_bytes=4 * CACHE_BYTES)
    max_workers = _workers_within(working_memory, step * row_bytes)
    if kernel.quadratic_coef is not None:
        weights = w_rows / total  # (m,)
        # Queries keeping more of their own key than they take out: their key pooled
        # whole, their own row taken out in closed form (one pass over those keys).
        closed = (None if queries.row_log_w is None or group is not None
                  else queries.row_log_w < queries.self_log_w)  # (m,)
        with full_precision(), torch.no_grad():
            if closed is None or not bool(closed.any()):
                value, grad = _gaussian_loo(
                    xs.detach(), v, log_w, self_log_w, rows, weights, kernel, loss, step,
                    backward, max_workers=max_workers, group=group, queries=queries)
            else:
                value, grad = _gaussian_loo_closed(
                    xs.detach(), v, log_w, rows[closed], queries.select(closed),
                    weights[closed], kernel, loss, step, backward, max_workers=max_workers)
                if not bool(closed.all()):
                    rest = ~closed
                    part, part_grad = _gaussian_loo(
                        xs.detach(), v, log_w, self_log_w, rows[rest], weights[rest],
                        kernel, loss, step, backward, max_workers=max_workers,
                        queries=queries.select(rest))
                    value += part
                    grad = grad.add_(part_grad) if backward else None
        if backward:
            # sum(xs_graph * grad) carries the same gradient: backward with an explicit
            # gradient tensor imports sympy (0.6 s before a fresh process's first fit).
            (xs_graph * grad).sum().backward()
        return value
    value, grad = 0.0, None

    def chunk_loss(s, _):
        chunk = rows[s : s + step]  # (b,)
        # Each chunk back-propagates into a leaf of its own; the chunks' gradients are added
        # in order (commit), as they would accumulate into one leaf.
        leaf = xs.detach().requires_grad_(backward)  # (n, r)
        terms = queries.chunk(s, step)
        with torch.set_grad_enabled(backward):  # grad mode is the thread's own
            logits = loo_logits(leaf[chunk], leaf, kernel, log_w, self_log_w, chunk,
                                group=group, own=terms.own_logits(kernel),
                                raw=(x, h))  # (b, n)
            attention = torch.log_softmax(logits, dim=1).exp()  # (b, n)
            pooled = attention @ v  # (b, t)
            if terms.own_shift is not None:  # out of place: in autograd's graph
                own = attention[torch.arange(len(chunk), device=x.device), chunk]  # (b,)
                pooled = pooled + own[:, None] * terms.own_shift
            per_row = loss.per_row(pooled, terms.v)  # (b,)
            part = loss.weighted_mean(per_row, w_rows[s : s + step], total)
            if backward:
                part.backward()
        return float(part.detach()), leaf.grad

    def commit(part):
        nonlocal value, grad
        value += part[0]
        if part[1] is not None:
            grad = part[1] if grad is None else grad.add_(part[1])

    with full_precision():
        # On the workers, one torch thread each (see _engine.run_chunks).
        run_chunks(chunk_loss, rows, step, n, blocks=0, needs_grad=False, commit=commit,
                    max_workers=max_workers)
    if backward:
        (xs_graph * grad).sum().backward()  # as above
    return value


def _workers_within(working_memory, chunk_bytes):
    """The workers whose chunks of ``chunk_bytes`` fit in ``working_memory`` MiB at once
    (at least 1)."""
    return max(1, int(working_memory * 2**20) // max(1, chunk_bytes))


def loo_local_loss(x, v, h, kernel, log_w, self_log_w, *, loss, degree, bounded=False,
                   rows=None, working_memory=1024, backward=False, polynomial_columns=None,
                   group=None):
    """:func:`loo_loss` of local polynomials of ``degree`` (1 or 2): each left-out row
    predicts the intercept of its kernel-weighted polynomial fit over the other keys
    (:func:`~sklearn_nw._local_poly.local_fit_many`, bounded or not), its
    Nadaraya-Watson value where that local design is singular, as the fitted regressor
    does. The polynomials are in the leading ``polynomial_columns`` of ``x`` (None: all);
    ``group`` as in :func:`loo_loss`. Unbounded local-linear fits of a Gaussian-family
    kernel with bandwidths per coordinate take :func:`_gaussian_local_linear`'s passes;
    the rest, plain autograd through the fits, chunk by chunk; the losses row by row are
    :func:`loo_local_per_row`'s."""
    loss = get_loss(loss)
    rows = torch.arange(x.shape[0], device=x.device) if rows is None else rows
    w_rows = log_w[rows].exp()  # (m,)
    total = w_rows.sum()
    xs_graph = transform(x, key_center(x), h)  # (n, r)
    xs = xs_graph.detach().requires_grad_(backward)
    # Bandwidths per coordinate rescale the polynomial's coordinates, which leaves every
    # intercept as it is: the designs are then constants, and the gradient flows through
    # the attention alone. A projection (a learned metric) changes their span: not so.
    design_xs = xs.detach() if h.ndim == 1 else xs
    value = 0.0
    if moment_passes(kernel, degree, bounded, h):
        with full_precision(), torch.no_grad():
            value, grad, rows = _gaussian_local_linear(
                xs.detach(), v, log_w, self_log_w, rows, w_rows / total, kernel, loss,
                backward, working_memory, polynomial_columns, group)
        if backward:
            xs.grad = grad
        w_rows = log_w[rows].exp()
    with full_precision(), torch.set_grad_enabled(backward):
        for s, pooled in (_local_chunks(xs, v, kernel, log_w, self_log_w, rows, degree,
                                        bounded, working_memory, polynomial_columns, group,
                                        design_xs=design_xs, raw=(x, h))
                          if len(rows) else ()):
            per_row = loss.per_row(pooled, v[rows[s : s + len(pooled)]])  # (b,)
            part = loss.weighted_mean(per_row, w_rows[s : s + len(pooled)], total)
            if backward:
                part.backward()
            value += float(part.detach())
    if backward and xs.grad is not None:
        (xs_graph * xs.grad).sum().backward()  # as in loo_loss
    return value


def moment_passes(kernel, degree, bounded, h):
    """Whether :func:`_gaussian_local_linear` computes these leave-one-out fits."""
    return kernel.quadratic_coef is not None and degree == 1 and not bounded and h.ndim == 1


def _logit_error(xs, kernel):
    """The relative error (n,) of the Gaussian weights, as :func:`_gaussian_loo` and
    :func:`loo_grid_pool` compute them (``|q|^2 + |x|^2 - 2 q . x``), on the keys that
    carry a row's weight (within a few bandwidths of it: ``|x|^2`` near ``|q|^2``), for
    each row of scaled keys ``xs`` (n, r), a few roundings of ``c |q|^2``."""
    x2 = (xs * xs).sum(1)  # (n,)
    return 8 * torch.finfo(xs.dtype).eps * kernel.quadratic_coef * (x2 + 1.0)


def _gaussian_local_linear(xs, v, log_w, self_log_w, rows, weights, kernel, loss, need_grad,
                           working_memory, polynomial_columns, group, per_row_out=None):
    """The leave-one-out loss of unbounded local-linear fits of a Gaussian-family kernel,
    and its gradient in ``xs`` (n, r), by :func:`_gaussian_loo`'s passes.

    A local-linear fit is a function of its attention's weighted means of the keys' raw
    moments ``[1, x, x x^T, v, x v]`` (:func:`~sklearn_nw._local_poly.linear_raw_columns`
    of the polynomial's coordinates, constants in the bandwidths: see
    :func:`loo_local_loss`), just as a Nadaraya-Watson fit is of the values': those
    passes pool the moments in place of the values, and the loss's gradient in each
    row's moments (autograd through its small solve) takes the place of its gradient in
    the prediction. Rows whose moved moments would lose digits
    (:func:`~sklearn_nw._local_poly.linear_moments_at`) or whose query lies beyond its
    keys (:data:`~sklearn_nw._local_poly.ORIGIN_SPREADS`, where the fitted regressor
    centers the design elsewhere) are left out: returned, for the general path.

    Returns ``value, grad, left`` (the rows left out, a subset of ``rows``); with
    ``per_row_out`` (m,), each row's loss is written there too (0 on the rows left out).
    """
    n, t = xs.shape[0], v.shape[1]
    px = xs[:, :polynomial_columns]  # (n, r')
    center = px[rows].mean(0)  # (r',)
    q = px - center  # (n, r') every row's query, about the center
    raw = linear_raw_columns(q, v)  # (n, k)
    error = _logit_error(xs, kernel)  # (n,)
    row_bytes = n * xs.element_size() * 8
    # Blocks four times the Nadaraya-Watson passes': each chunk's small solves and their
    # autograd cost about a millisecond (n = 3,000 in 2 features: a pass 20 % faster).
    step = chunk_rows(len(rows), row_bytes, working_memory, cap_bytes=16 * CACHE_BYTES)
    left = []

    def moments_loss(sums, s, chunk, w):  # sums (b, k): the attention's means of raw
        with torch.enable_grad():
            sums = sums.detach().requires_grad_(need_grad)
            pred, skip = linear_fits_from_sums(sums, q[chunk], t,
                                               error[chunk])  # (b, t), (b,)
            per_row = torch.where(skip, 0.0, loss.per_row(pred, v[chunk]))  # (b,)
            if per_row_out is not None:
                per_row_out[s : s + len(chunk)] = per_row.detach()
            part = loss.weighted_sum(per_row, w)
            grad = torch.autograd.grad(part, sums)[0] if need_grad else None
        if bool(skip.any()):
            left.append(chunk[skip])
        return float(part.detach()), grad

    value, grad = _gaussian_loo(xs, raw, log_w, self_log_w, rows, weights, kernel, None,
                                step, need_grad, group=group, moments_loss=moments_loss,
                                max_workers=_workers_within(working_memory, step * row_bytes))
    left = torch.cat(left).sort().values if left else rows[:0]
    return value, grad, left


def loo_local_per_row(x, v, h, kernel, log_w, self_log_w, *, loss, degree, bounded=False,
                      rows=None, working_memory=1024, polynomial_columns=None, group=None):
    """The leave-one-out losses (m,) of :func:`loo_local_loss`, row by row, without
    gradient, by autograd's general path."""
    loss = get_loss(loss)
    rows = torch.arange(x.shape[0], device=x.device) if rows is None else rows
    xs = transform(x, key_center(x), h)  # (n, r)
    with full_precision(), torch.no_grad():
        pooled = torch.cat([p for _, p in _local_chunks(
            xs, v, kernel, log_w, self_log_w, rows, degree, bounded, working_memory,
            polynomial_columns, group, raw=(x, h))])
        return loss.per_row(pooled, v[rows])  # (m,)


def loo_local_grid(x, v, hs, kernel, log_w, self_log_w, *, loss, degree, bounded=False,
                   rows=None, working_memory=1024, polynomial_columns=None, group=None):
    """:func:`loo_local_per_row` at each bandwidth vector of ``hs`` (G, d): (G, m).

    Unbounded local-linear fits of a Gaussian-family kernel pool the keys' raw moments
    over the whole grid in one pass (:func:`loo_grid_pool`, their designs constants, as in
    :func:`_gaussian_local_linear`); the rows it leaves out, and every other case, go
    bandwidth by bandwidth through the general path."""
    loss = get_loss(loss)
    rows = torch.arange(x.shape[0], device=x.device) if rows is None else rows
    general = {"loss": loss, "degree": degree, "bounded": bounded, "group": group,
               "working_memory": working_memory, "polynomial_columns": polynomial_columns}
    if not moment_passes(kernel, degree, bounded, hs[0]):
        return torch.stack([loo_local_per_row(x, v, h, kernel, log_w, self_log_w, rows=rows,
                                              **general) for h in hs])
    with full_precision(), torch.no_grad():
        pred, skip = loo_linear_grid_pool(x, v, hs, kernel, log_w, self_log_w, rows=rows,
                                          working_memory=working_memory,
                                          polynomial_columns=polynomial_columns,
                                          group=group)  # (G, m, t), (G, m)
        out = loss.per_row(pred, v[rows])  # (G, m)
        for g in skip.any(1).nonzero()[:, 0].tolist():
            at = skip[g].nonzero()[:, 0]
            out[g, at] = loo_local_per_row(x, v, hs[g], kernel, log_w, self_log_w,
                                           rows=rows[at], **general)
        return out


def loo_linear_grid_pool(x, v, hs, kernel, log_w, self_log_w, *, rows=None,
                         working_memory=1024, polynomial_columns=None, group=None):
    """Leave-one-out unbounded local-linear fits (G, m, t) of a Gaussian-family kernel at
    each bandwidth vector of ``hs`` (G, d), from one pass of the keys' raw moments over the
    grid (:func:`loo_grid_pool`, :func:`~sklearn_nw._local_poly.linear_fits_from_sums`;
    Nadaraya-Watson where a design is singular), and the fits (G, m) it leaves to the
    general path: moved sums that lose digits, queries beyond their keys. Arguments as
    :func:`loo_local_grid`'s."""
    rows = torch.arange(x.shape[0], device=x.device) if rows is None else rows
    with full_precision(), torch.no_grad():
        px = transform(x, key_center(x), hs[0])[:, :polynomial_columns]  # (n, r')
        q = px - px[rows].mean(0)  # (n, r')
        sums = loo_grid_pool(x, linear_raw_columns(q, v), hs, kernel, log_w, self_log_w,
                             rows=rows, working_memory=working_memory,
                             group=group)  # (G, m, k)
        error = torch.stack([_logit_error(transform(x, key_center(x), h), kernel)[rows]
                             for h in hs])  # (G, m)
        return linear_fits_from_sums(sums, q[rows].expand(len(hs), -1, -1), v.shape[1],
                                     error)


def _local_chunks(xs, v, kernel, log_w, self_log_w, rows, degree, bounded, working_memory,
                  polynomial_columns=None, group=None, design_xs=None, raw=None):
    """``(start, pooled)`` for chunks of ``rows``: the leave-one-out local fits (b, t) of
    scaled keys ``xs`` (n, r), polynomial in their leading ``polynomial_columns`` (None:
    all) of ``design_xs`` (default ``xs``), Nadaraya-Watson on singular rows. Each
    chunk's fits are one product of its attention with the keys' designs
    (:func:`~sklearn_nw._local_poly.local_fit_many`)."""
    n = xs.shape[0]
    design_xs = xs if design_xs is None else design_xs
    px = design_xs[:, :polynomial_columns]  # (n, r') the polynomials' coordinates
    p = n_terms(px.shape[1], degree)
    # Each row's moment columns (p^2 + p t + 1) and the attention, kept for the backward
    # pass.
    step = chunk_rows(len(rows), n * xs.element_size()
                      * (p * p + p * v.shape[1] + 1 + N_TEMPORARIES), working_memory)
    for s in range(0, len(rows), step):
        chunk = rows[s : s + step]  # (b,)
        logits = loo_logits(xs[chunk], xs, kernel, log_w, self_log_w, chunk,
                            group=group, raw=raw)  # (b, n)
        attention = torch.softmax(logits, dim=1)  # (b, n)
        local, singular = local_fit_many(px[chunk], px, attention[None], v, degree, bounded)
        yield s, torch.where(singular[0, :, None], attention @ v, local[0])  # (b, t)


def loo_loss_neighbors(x, v, h, kernel, log_w, self_log_w, *, loss, rows, neighbors,
                        backward=False):
    """:func:`loo_loss` with each query's keys restricted to candidate neighbors.

    ``neighbors`` (m, k) indexes the keys each query row of ``rows`` (m,) attends to (its
    k nearest, say); every row must be among its own candidates. Small (m, k) blocks, so
    plain autograd.
    """
    loss = get_loss(loss)
    center = key_center(x)
    qs = transform(x[rows], center, h)  # (m, r)
    ks = transform(x[neighbors], center, h)  # (m, k, r)
    d2 = ((qs[:, None, :] - ks) ** 2).sum(-1)  # (m, k)
    is_self = neighbors == rows[:, None]  # (m, k)
    # The kernel sees the constant 0 at the self entry, not d2: at a cusp at 0 (the
    # exponential kernel) its infinite derivative would make the backward pass NaN.
    logits = torch.where(is_self, self_logits(kernel, self_log_w, rows)[:, None],
                         log_w[neighbors] + kernel.log_profile_sq(torch.where(is_self, 0.0, d2)))
    empty = torch.isneginf(logits.detach().amax(1))  # (m,)
    if bool(empty.any()):
        nearest, _ = nearest_keys(d2.detach(), torch.isfinite(log_w[neighbors]) & ~is_self)
        logits = torch.where(empty[:, None], torch.where(nearest, log_w[neighbors], -math.inf),
                             logits)
    with torch.set_grad_enabled(backward):
        pooled = (torch.softmax(logits, dim=1)[:, :, None] * v[neighbors]).sum(1)  # (m, t)
        per_row = loss.per_row(pooled, v[rows])  # (m,)
        value = loss.weighted_mean(per_row, log_w[rows].exp())
    if backward:
        value.backward()
    return float(value.detach())


def _gaussian_loo(xs, v, log_w, self_log_w, rows, weights, kernel, loss, step, need_grad,
                  pooled=None, max_workers=None, group=None, moments_loss=None, queries=None):
    """Leave-one-out loss of a Gaussian-family kernel and its gradient in the scaled
    coordinates ``xs`` (n, r), written out by hand: a few passes over each (b, n) block
    instead of the two dozen autograd makes.

    With logits ``S_ij = -c |q_i - x_j|^2 + log_w_j`` (the self entry ``self_log_w_i``),
    attention ``P = softmax(S)``, predictions ``p_i = sum_j P_ij v_j`` and
    ``g_i = dL/dp_i``, the softmax gives ``G_ij = dL/dS_ij = P_ij g_i . (v_j - p_i)``, and
    ``dS_ij/dq_i = -2c (q_i - x_j) = -dS_ij/dx_j`` off the diagonal (the self entry is a
    constant), so both gradients are matrix products of G. With ``group`` (n,) the entries
    of a query's group are ``-inf`` (constants too: their G is 0). With ``loss=None`` it
    only writes the leave-one-out predictions into ``pooled`` (m, t); with
    ``moments_loss`` a function ``(p, start, chunk, w) -> (sum of w l, dL/dp)`` of the
    pooled ``v`` replaces the loss. ``queries`` as in :func:`loo_loss`. The chunks of
    ``step`` rows run on at most ``max_workers`` workers, their losses and gradients added
    in order.
    """
    c = kernel.quadratic_coef
    fused = _FusedKeys.of(xs, v, log_w, c)
    tiny, eps, x2_max, shift = fused.tiny, fused.eps, fused.x2_max, fused.shift
    v1_t, v_t, xs1_t = fused.v1_t, fused.v_t, fused.xs1_t
    grad = torch.zeros_like(xs) if need_grad else None  # (n, r)
    queries = query_terms(queries, v, log_w, self_log_w, rows)

    def loo_chunk(s, blocks):  # blocks: two (chunk, n) blocks (see _workers.CACHE_BYTES)
        chunk = rows[s : s + step]  # (b,)
        terms = queries.chunk(s, step)
        qs1, q2, logits = fused.logits(chunk, blocks[0])  # (b, r + 1), (b, 1), (b, n)
        b = len(chunk)
        own = terms.own_logits(kernel) - shift  # (b,)
        set_self_(logits, chunk, own)
        leave_group_out_(logits, group, chunk)
        # Exact logits are <= 0; the expansion's rounding must not overflow exp. With the
        # gradient, weights at exp_'s floor are exactly 0: their products with it would be
        # subnormal, which slowed the gradient's matrix products tenfold (randhie's 3,442
        # distinct rows in 9 features, a learned bandwidth: a fit 13.5 s -> 3.5 s).
        e = exp_(logits.clamp_(max=0.0), exact_zeros=need_grad)  # (b, n)
        num_den = (v1_t @ e.T).T  # (b, t + 1)
        # Redone from exact differences, max-subtracted: rows whose weights all underflowed,
        # and rows where the expansion's rounding could reach 0.01 in a logit (tiny
        # bandwidths: far from the keys' center in units of h).
        unsure = 64 * eps * c * (q2[:, 0] + x2_max) > 0.01  # (b,)
        low = (num_den[:, -1] < tiny) | unsure  # (b,)
        if bool(low.any()):
            _exact_rows(e, num_den, low, qs1[:, :-1], xs, log_w - shift, c, chunk, own, v1_t,
                        group, exact_zeros=need_grad)
        keep_own_values_(num_den, e, chunk, terms.own_shift)
        z = num_den[:, -1:]  # (b, 1)
        pred = num_den[:, :-1] / z  # (b, t)
        if pooled is not None:
            pooled[s : s + step] = pred
        if loss is None and moments_loss is None:
            return None
        part, g = _chunk_loss(pred, terms.v, weights[s : s + step], loss,
                              None if moments_loss is None else
                              lambda p, w: moments_loss(p, s, chunk, w))
        if not need_grad:
            return part, None
        gz = g / z  # (b, t)
        gv = (torch.mul(gz, v_t, out=blocks[1, :b]) if v.shape[1] == 1
              else torch.mm(gz, v_t, out=blocks[1, :b]))  # (b, n)
        G = e.mul_(gv.sub_((gz * pred).sum(1, keepdim=True)))  # (b, n) = dL/dS
        set_self_(G, chunk, 0.0)  # the self entry is a constant
        return part, (chunk, *_coordinate_gradients(G, qs1, xs, xs1_t, c))

    return _run_summed(loo_chunk, xs[rows], step, xs.shape[0], grad, max_workers), grad


class _FusedKeys(NamedTuple):
    """What the passes of a Gaussian-family kernel's fused logits over the keys share:
    ``[2c q, -c |q|^2, 1] @ keys_t = -c |q - x|^2 + log_w - max(log_w) <= 0``, logits
    that need no max pass (rows that underflow are redone). Skinny products are laid out
    as (k, n) @ (n, b): several times faster in BLAS."""

    c: float
    tiny: float  # the smallest sum of weights taken as is
    eps: float
    x2: torch.Tensor  # (n,) the keys' squared norms
    x2_max: float
    shift: torch.Tensor  # the largest finite log weight
    keys_t: torch.Tensor  # (r + 2, n)
    v1_t: torch.Tensor  # (t + 1, n) the values and ones
    v_t: torch.Tensor  # (t, n)
    xs1: torch.Tensor  # (n, r + 1) the keys and ones
    xs1_t: torch.Tensor  # (r + 1, n)

    @classmethod
    def of(cls, xs, v, log_w, c):
        n = xs.shape[0]
        x2 = (xs * xs).sum(1)
        xs1 = torch.cat([xs, xs.new_ones(n, 1)], dim=1)
        return cls(c, math.sqrt(torch.finfo(xs.dtype).tiny), torch.finfo(xs.dtype).eps, x2,
                   float(x2.max()), log_w[torch.isfinite(log_w)].max(),
                   fused_gaussian_keys(xs, log_w, c).T.contiguous(), values_and_ones_t(v),
                   v.T.contiguous(), xs1, xs1.T.contiguous())

    def logits(self, chunk, out):
        """The fused logits (b, n) of the keys ``chunk`` (b,) as queries, into ``out``
        (at least b rows), with their coordinates and ones (b, r + 1) and squared norms
        (b, 1)."""
        c, qs1, q2 = self.c, self.xs1[chunk], self.x2[chunk, None]
        query = torch.cat([2.0 * c * qs1[:, :-1], -c * q2, qs1[:, -1:]], dim=1)
        return qs1, q2, torch.mm(query, self.keys_t, out=out[: len(chunk)])


def _run_summed(loo_chunk, queries, step, n, grad, max_workers):
    """Run ``loo_chunk`` over the chunks of ``step`` ``queries`` (against ``n`` keys) on at most
    ``max_workers`` workers (one torch thread each, see :func:`_engine.run_chunks`),
    adding their losses and accumulating their gradients ``(chunk, own rows, every row)``
    into ``grad`` in order; returns the summed loss."""
    value = 0.0

    def commit(part):
        nonlocal value
        if part is None:
            return
        value += part[0]
        if part[1] is not None:
            chunk, own_rows, every_row = part[1]
            grad.index_add_(0, chunk, own_rows)
            grad.add_(every_row)

    run_chunks(loo_chunk, queries, step, n, blocks=2, needs_grad=False, commit=commit,
               max_workers=max_workers)
    return value


def _gaussian_loo_closed(xs, v, log_w, rows, queries, weights, kernel, loss, step,
                         need_grad, max_workers=None):
    """:func:`_gaussian_loo`'s loss and gradient for queries at shared keys ``rows`` (m,)
    that keep more of their own key than they take out of it (``queries``, a
    :class:`~sklearn_nw._leave_one_out.QueryTerms` with ``row_log_w < self_log_w``), in
    one pass over the distinct keys of ``rows`` instead of one per query: each such key
    is pooled whole, its own entry with all its weight (sums ``N``, ``D``), and each query
    at it takes its row's entry ``s`` out in closed form, ``p = (N - s y) / (D - s)``;
    ``s`` is at most half of ``D``, so the difference loses no digit. The gradient in the
    logits is ``e_uv (A_u . v_v + B_u)``, with ``A_u = sum_i g_i / (D - s_i)`` and
    ``B_u = -sum_i g_i . p_i / (D - s_i)`` over key u's queries, ``g = dL/dp``."""
    c = kernel.quadratic_coef
    log_k0 = float(kernel.log_profile_sq(xs.new_zeros(1))[0])
    fused = _FusedKeys.of(xs, v, log_w, c)
    tiny, eps, x2_max, shift = fused.tiny, fused.eps, fused.x2_max, fused.shift
    v1_t, v_t, xs1_t = fused.v1_t, fused.v_t, fused.xs1_t
    # The distinct keys of the queries, and the queries by key: key k's are
    # order[starts[k]:starts[k + 1]].
    keys, at = torch.unique(rows, return_inverse=True)  # (u,), (m,)
    order = torch.argsort(at, stable=True)
    starts = torch.searchsorted(at[order], torch.arange(len(keys) + 1, device=xs.device))
    grad = torch.zeros_like(xs) if need_grad else None  # (n, r)

    def loo_chunk(s, blocks):  # blocks: two (chunk, n) blocks (see _workers.CACHE_BYTES)
        chunk = keys[s : s + step]  # (b,)
        qs1, q2, logits = fused.logits(chunk, blocks[0])  # (b, r + 1), (b, 1), (b, n)
        b = len(chunk)
        own = log_w[chunk] + log_k0 - shift  # (b,) the key whole
        set_self_(logits, chunk, own)
        e = exp_(logits.clamp_(max=0.0), exact_zeros=need_grad)  # (b, n)
        num_den = (v1_t @ e.T).T  # (b, t + 1)
        unsure = 64 * eps * c * (q2[:, 0] + x2_max) > 0.01  # (b,)
        low = (num_den[:, -1] < tiny) | unsure  # (b,)
        moved = torch.zeros(b, dtype=xs.dtype, device=xs.device)  # each row's own shift
        if bool(low.any()):
            moved[low] = _exact_rows(e, num_den, low, qs1[:, :-1], xs, log_w - shift, c,
                                     chunk, own, v1_t, exact_zeros=need_grad)
        mine = order[starts[s] : starts[min(s + step, len(keys))]]  # the chunk's queries
        local = at[mine] - s  # (k,) their key in the chunk
        terms = queries.select(mine)
        taken = torch.exp(terms.row_log_w + log_k0 - shift - moved[local])  # (k,) s
        rest = num_den[local, -1] - taken  # (k,) D - s
        pred = (num_den[local, :-1] - taken[:, None] * terms.v) / rest[:, None]  # (k, t)
        part, g = _chunk_loss(pred, terms.v, weights[mine], loss)
        if not need_grad:
            return part, None
        a = g / rest[:, None]  # (k, t)
        A = torch.zeros(b, v.shape[1], dtype=xs.dtype, device=xs.device).index_add_(
            0, local, a)  # (b, t)
        B = torch.zeros(b, dtype=xs.dtype, device=xs.device).index_add_(
            0, local, -(a * pred).sum(1))  # (b,)
        gv = (torch.mul(A, v_t, out=blocks[1, :b]) if v.shape[1] == 1
              else torch.mm(A, v_t, out=blocks[1, :b]))  # (b, n)
        G = e.mul_(gv.add_(B[:, None]))  # (b, n) = dL/dS
        set_self_(G, chunk, 0.0)  # the self entry is a constant
        return part, (chunk, *_coordinate_gradients(G, qs1, xs, xs1_t, c))

    return _run_summed(loo_chunk, xs[keys], step, xs.shape[0], grad, max_workers), grad


def _chunk_loss(pred, target, w, loss, moments_loss=None):
    """A chunk's weighted loss (a float) and its gradient in the predictions (b, t):
    ``loss`` of the predictions ``pred`` (b, t) against ``target`` under the weights
    ``w`` (b,), or ``moments_loss(pred, w)`` where given."""
    if moments_loss is not None:
        return moments_loss(pred, w)
    part = float(loss.weighted_sum(loss.per_row(pred, target), w))
    return part, w[:, None] * loss.gradient(pred, target)  # (b, t)


def _exact_rows(e, num_den, low, qs, xs, shifted_log_w, c, chunk, own, v1_t, group=None,
                exact_zeros=False):
    """Redo the ``low`` rows of a Gaussian chunk's weights ``e`` (b, n) and sums
    ``num_den`` (b, t + 1) in place from exact differences, max-subtracted (weights at
    :func:`~sklearn_nw._engine.exp_`'s floor exactly 0 with ``exact_zeros``). Returns
    the maxima subtracted (l,)."""
    again = -c * exact_sq_dist(qs[low], xs, _EXACT_MIB) + shifted_log_w  # (l, n)
    set_self_(again, chunk[low], own[low])
    leave_group_out_(again, group, chunk[low])
    top = again.amax(1, keepdim=True)  # (l, 1)
    e[low] = exp_(again - top, exact_zeros=exact_zeros)
    num_den[low] = (v1_t @ e[low].T).T
    return top[:, 0]


def _coordinate_gradients(G, qs1, xs, xs1_t, c):
    """From ``G = dL/dS`` (b, n) of a chunk of queries ``qs1`` (b, r + 1, a column of
    ones last), the loss's gradient in the chunk's own rows (b, r) and in every key's row
    (n, r): ``dS_ij/dq_i = -2c (q_i - x_j) = -dS_ij/dx_j``."""
    gx = (xs1_t @ G.T).T  # (b, r + 1): G @ x and the row sums of G
    gq = (qs1.T @ G).T  # (n, r + 1): G.T @ q and the column sums of G
    return (-2.0 * c * (gx[:, -1:] * qs1[:, :-1] - gx[:, :-1]),
            2.0 * c * (gq[:, :-1] - gq[:, -1:] * xs))


def loo_grid_pool(x, v, hs, kernel, log_w, self_log_w, *, rows=None, working_memory=1024,
                  group=None, queries=None):
    """Leave-one-out pooled values for a grid of bandwidth vectors, in one pass.

    The per-feature squared differences of each block of queries are computed once and
    shared by every grid point; when all grid points are multiples of the first, one
    block of scaled squared distances is shared instead. Gaussian-family kernels skip
    both: their logits are one small matrix product per grid point.

    Parameters
    ----------
    x : Tensor (n, d)
    v : Tensor (n, t)
    hs : Tensor (G, d)
        Bandwidth vectors.
    kernel, log_w, self_log_w
        As in :func:`loo_loss`.
    rows : Tensor (m,), optional
        Training rows to predict; all rows when None.
    group : Tensor (n,), optional
        As in :func:`loo_loss`: each row leaves with its group.
    queries : QueryTerms, optional
        As in :func:`loo_loss`: queries at the keys ``rows`` that are not those keys.

    Returns
    -------
    pooled : Tensor (G, m, t)
        ``pooled[g, i]``: the leave-one-out prediction of ``rows[i]`` with bandwidth ``hs[g]``.
    """
    n, d = x.shape
    rows_all = torch.arange(n, device=x.device) if rows is None else rows
    queries = query_terms(queries, v, log_w, self_log_w, rows_all)
    ratios = hs / hs[0]  # (G, d)
    isotropic = bool(torch.allclose(ratios, ratios[:, :1], rtol=1e-12, atol=0.0))
    xs = transform(x, key_center(x), hs[0])  # (n, d)
    # The per-feature squared differences (d per distance) where neither the fused
    # Gaussian logits nor one shared distance serves every grid point.
    width = 1 if isotropic or kernel.quadratic_coef is not None else d
    row_bytes = n * x.element_size() * (N_TEMPORARIES + width)
    m = len(rows_all)
    # Two chunks per worker at least, or the chunks run on the calling thread's team of
    # threads (see _engine.run_chunks).
    step = chunk_rows(m, row_bytes, working_memory, workers=n_workers(x.device),
                      cap_bytes=4 * CACHE_BYTES)
    v1t = values_and_ones_t(v)  # (t + 1, n)
    pooled = x.new_empty(len(hs), m, v.shape[1])  # (G, m, t)
    if kernel.quadratic_coef is not None and isotropic:
        cs = [kernel.quadratic_coef / float(ratio) ** 2 for ratio in ratios[:, 0]]
        with full_precision():
            _gaussian_grid_loo(xs, v, log_w, self_log_w, rows_all, cs, step, pooled, group,
                               queries)
        return pooled
    if kernel.quadratic_coef is not None:
        # The fused Gaussian logits cost a (b, r + 1) @ (r + 1, n) product per grid point,
        # less than sharing explicit distances would.
        center = key_center(x)
        with full_precision():
            for g in range(len(hs)):
                _gaussian_loo(transform(x, center, hs[g]), v, log_w, self_log_w, rows_all,
                              None, kernel, None, step, False, pooled[g], group=group,
                              queries=queries)
        return pooled
    def pool_chunk(s, _):
        rows = rows_all[s : s + step]  # (b,)
        terms = queries.chunk(s, step)
        if isotropic:
            d2_first = augmented_sq_dist(xs[rows], xs, refine=True)  # (b, n)
        else:
            diff2 = (xs[rows, None, :] - xs[None, :, :]) ** 2  # (b, n, d)
        for g in range(len(hs)):
            if isotropic:
                d2 = d2_first / ratios[g, 0] ** 2  # (b, n)
            else:
                d2 = diff2 @ ratios[g] ** -2  # (b, n)
            logits = loo_logits(None, None, kernel, log_w, self_log_w, rows, d2=d2,
                                group=group, own=terms.own_logits(kernel),
                                raw=(x, hs[g]))
            logits -= logits.amax(1, keepdim=True)
            e = exp_(logits)  # (b, n)
            num_den = keep_own_values_((v1t @ e.T).T, e, rows, terms.own_shift)  # (b, t + 1)
            pooled[g, s : s + step] = num_den[:, :-1] / num_den[:, -1:]

    with full_precision():
        # On worker threads, one torch thread each (see _engine.run_chunks).
        run_chunks(pool_chunk, xs[rows_all], step, n, blocks=0, needs_grad=False)
    return pooled


def squaring_chains(cs, max_depth):
    """Group Gaussian coefficients into chains ``c, 2**k1 c, 2**(k1 + k2) c, ...``, each
    reached from the one before by ``k`` squarings, at most ``max_depth`` squarings from
    the chain's start. Returns lists of ``(index into cs, squarings from the previous)``."""
    chains, tails = [], {}  # tails: grid index -> (its chain, its depth in squarings)
    for g in sorted(range(len(cs)), key=cs.__getitem__):
        for p, (chain, depth) in tails.items():
            k = round(math.log2(cs[g] / cs[p]))
            if 1 <= k <= max_depth - depth and abs(cs[g] - 2**k * cs[p]) <= 1e-12 * cs[g]:
                del tails[p]
                chain.append((g, k))
                tails[g] = (chain, depth + k)
                break
        else:
            chains.append([(g, 0)])
            tails[g] = (chains[-1], 0)
    return chains


def _gaussian_grid_loo(xs, v, log_w, self_log_w, rows, cs, step, pooled, group=None,
                       queries=None):
    """Leave-one-out predictions of the Gaussian ``exp(-c_g |q - x|^2)`` for a grid of
    coefficients ``cs`` in one pass, writing ``pooled`` (G, m, t).

    Each block of squared distances is shifted by its row minimum ``mu_i`` over the other
    keys with weight, ``K = exp(-c (d2 - mu))``, so every row keeps an entry of 1 and the
    softmax is unchanged. A grid whose coefficients double from one point to another (the
    default grid, geometric with ratio ``2 ** (1/4)`` in ``h``) then needs no ``exp`` for the
    second: its block is the first one squared. Squaring doubles the relative rounding error,
    so a chain restarts from ``exp`` after a few squarings (about ``2**depth`` ulps).
    ``queries`` as in :func:`loo_loss`.
    """
    n = xs.shape[0]
    max_depth = 3 if xs.dtype in (torch.float16, torch.bfloat16, torch.float32) else 10
    chains = squaring_chains(cs, max_depth)
    # The exponent floor of exp_ squared must stay a normal number (denormals are slow).
    floor = math.exp(0.5 * math.log(torch.finfo(xs.dtype).tiny) + 5.0)
    w = torch.exp(log_w - log_w.max())  # (n,)
    queries = query_terms(queries, v, log_w, self_log_w, rows)
    # What each query keeps of its own key, its weight and values (m, t + 1).
    own_v = v[rows] if queries.own_shift is None else v[rows] + queries.own_shift  # (m, t)
    self_w = torch.exp(queries.self_log_w - log_w.max())  # (m,)
    self_v1 = torch.cat([own_v, v.new_ones(len(rows), 1)], dim=1)  # (m, t + 1)
    weighted_t = torch.cat([w[:, None] * v, w[:, None]], dim=1).T.contiguous()  # (t + 1, n)
    no_weight = torch.nonzero(w == 0).flatten()  # (z,)

    def pool_chunk(s, blocks):  # blocks: the distance and kernel blocks (2, step, n)
        chunk = rows[s : s + step]  # (b,)
        d2 = augmented_sq_dist(xs[chunk], xs, out=blocks[0, : len(chunk)])  # (b, n)
        set_self_(d2, chunk, math.inf)  # its own weight is the self term below
        leave_group_out_(d2, group, chunk, math.inf)  # its group leaves with it
        if len(no_weight):
            d2.index_fill_(1, no_weight, math.inf)
        mu = d2.amin(1, keepdim=True)  # (b, 1)
        # A point whose own weight exceeds one unit keeps part of it, at distance 0.
        mu[(self_w[s : s + step] > 0) | ~torch.isfinite(mu[:, 0])] = 0.0
        d2.sub_(mu)
        self_term = self_w[s : s + step, None] * self_v1[s : s + step]  # (b, t + 1)
        k = blocks[1, : len(chunk)]  # (b, n)
        for chain in chains:
            for g, squarings in chain:
                if squarings == 0:
                    exp_(torch.mul(d2, -cs[g], out=k), exact_zeros=False)
                for _ in range(squarings):
                    k.clamp_(min=floor).square_()
                num_den = (weighted_t @ k.T).T + self_term  # (b, t + 1)
                pooled[g, s : s + step] = num_den[:, :-1] / num_den[:, -1:]

    # On worker threads, one torch thread each, each with its own two blocks, allocated
    # once (see _engine.run_chunks and _workers.CACHE_BYTES).
    run_chunks(pool_chunk, xs[rows], step, n, blocks=2, needs_grad=False)


class SweepDistances:
    """The scaled squared distances of query ``rows`` to every key at bandwidths ``h``,
    kept so that bandwidths differing from ``h`` in one feature cost a pass over them
    instead of over all d features: multiplying ``h_j`` by ``f`` adds
    ``(f**-2 - 1) (x_ij - x_kj)**2 / h_j**2`` to each entry. A coordinate sweep over the d
    features then costs O(m n d), not O(m n d**2).

    Parameters
    ----------
    x, v, kernel, log_w, self_log_w
        As in :func:`loo_loss`.
    h : Tensor (d,)
        The base bandwidths.
    rows : Tensor (m,)
        Training rows used as queries.
    working_memory : float
        MiB for the ``(chunk, n)`` temporaries (the ``(m, n)`` distances come on top:
        see :meth:`fits`).
    group : Tensor (n,), optional
        As in :func:`loo_loss`.
    queries : QueryTerms, optional
        As in :func:`loo_loss`.
    """

    def __init__(self, x, v, h, kernel, log_w, self_log_w, rows, working_memory, group=None,
                 queries=None):
        self.v, self.kernel, self.log_w, self.self_log_w = v, kernel, log_w, self_log_w
        self.group = group
        self.queries = query_terms(queries, v, log_w, self_log_w, rows)
        self.rows, self.h = rows, h.clone()  # (m,), (d,)
        self.x = x  # (n, d) the raw keys: the fallback's ties (loo_logits)
        self.xc = x - key_center(x)  # (n, d)
        xs = self.xc / h  # (n, d)
        self.d2 = exact_sq_dist(xs[rows], xs, working_memory)  # (m, n)
        m, n = len(rows), x.shape[0]
        row_bytes = n * x.element_size() * (N_TEMPORARIES + 1)
        # Cache-sized chunks, two per worker at least (as in loo_grid_pool).
        self.step = chunk_rows(m, row_bytes, working_memory, workers=n_workers(x.device),
                               cap_bytes=4 * CACHE_BYTES)

    @staticmethod
    def fits(m, n, element_size, working_memory):
        """Whether the (m, n) distances take at most half of ``working_memory`` MiB."""
        return m * n * element_size <= working_memory * 2**19

    def _feature_sq_diff(self, j, s):
        """Squared differences (b, n) in feature j, scaled, of the rows of the chunk at s."""
        xj = self.xc[:, j] / self.h[j]  # (n,)
        return (xj[self.rows[s : s + self.step], None] - xj[None, :]) ** 2  # (b, n)

    def pool(self, j, factors):
        """Leave-one-out pooled values (S, m, t) with ``h_j`` times each of ``factors``."""
        rows, v = self.rows, self.v
        v1t = values_and_ones_t(v)  # (t + 1, n)
        pooled = v.new_empty(len(factors), len(rows), v.shape[1])  # (S, m, t)

        def pool_chunk(s, _):
            chunk = rows[s : s + self.step]  # (b,)
            terms = self.queries.chunk(s, self.step)
            own = terms.own_logits(self.kernel)  # (b,)
            dj2 = self._feature_sq_diff(j, s)  # (b, n)
            gaussian = (None if self.kernel.quadratic_coef is None else
                        self._gaussian_logits(chunk, own, self.d2[s : s + self.step], dj2,
                                              factors))
            for g, f in enumerate(factors):
                logits = None if gaussian is None else next(gaussian)
                if logits is None:
                    # Clipped at 0: "ignoring" a feature (f >> 1) nearly cancels its share.
                    d2 = torch.add(self.d2[s : s + self.step], dj2,
                                   alpha=float(f) ** -2 - 1.0).clamp_(min=0.0)  # (b, n)
                    h = self.h.clone()
                    h[j] = h[j] * float(f)
                    logits = loo_logits(None, None, self.kernel, self.log_w,
                                         self.self_log_w, chunk, d2=d2, group=self.group,
                                         own=own, raw=(self.x, h))
                    logits -= logits.amax(1, keepdim=True)  # (b, n)
                e = exp_(logits)  # (b, n)
                num_den = keep_own_values_((v1t @ e.T).T, e, chunk,
                                           terms.own_shift)  # (b, t + 1)
                pooled[g, s : s + self.step] = num_den[:, :-1] / num_den[:, -1:]

        self._run(pool_chunk)
        return pooled

    def _gaussian_logits(self, chunk, own, d2, dj2, factors):
        """A Gaussian kernel's logits (b, n) at each of ``factors`` in turn, max-subtracted,
        each query's on its own key ``own`` (b,):
        ``log k = -c d2`` is affine in the distances, so the chunk's logits at ``h`` are
        computed once and each factor adds its multiple of feature j's share (unclipped:
        a share cancelled to rounding level moves a logit by as much). None for a factor
        that leaves a row with no key of weight: the general path and its nearest-key
        fallback take it."""
        c = self.kernel.quadratic_coef
        base = torch.mul(d2, -c).add_(self.log_w)  # (b, n)
        logits = torch.empty_like(base)
        for f in factors:
            torch.add(base, dj2, alpha=-c * (float(f) ** -2 - 1.0), out=logits)
            set_self_(logits, chunk, own)
            leave_group_out_(logits, self.group, chunk)
            top = logits.amax(1, keepdim=True)  # (b, 1)
            yield None if bool(torch.isneginf(top).any()) else logits.sub_(top)

    def move(self, j, factor):
        """Make ``h_j`` times ``factor`` the base bandwidths."""

        def move_chunk(s, _):
            d2 = self.d2[s : s + self.step]  # (b, n)
            d2.add_(self._feature_sq_diff(j, s), alpha=float(factor) ** -2 - 1.0)
            d2.clamp_(min=0.0)

        self._run(move_chunk)
        self.h[j] *= factor

    def _run(self, run_chunk):
        """``run_chunk(start, None)`` for the chunks of rows, on worker threads (see
        :func:`~sklearn_nw._engine.run_chunks`)."""
        with full_precision(), torch.no_grad():
            run_chunks(run_chunk, self.d2, self.step, self.d2.shape[1], blocks=0,
                        needs_grad=False)
