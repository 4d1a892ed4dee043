"""How the attention moves with its query: the derivative of Nadaraya-Watson attention
rows with respect to the query's coordinates. Torch only.

With logits ``L_i(q) = log k(s_i) + log w_i``, ``s_i = ||rho_i (q - x_i) M||**2`` (``M``
the metric: bandwidths or a projection; ``rho_i`` a key's own scale, 1 unless a
sample-point bandwidth gives it one) and attention ``a_i = softmax_i L_i``,

    d a_i / d q = a_i (g_i - sum_k a_k g_k),   g_i = d L_i / d q
                = 2 (log k)'(s_i) rho_i**2 (q - x_i) M M^T,

so the derivative of the fit ``sum_i a_i v_i`` is linear in the values, with these
weights. The kernel's log-profile is differentiated by autograd (exactly, on each
squared distance); keys without attention get no weight (a compact kernel's support
ends where its log-profile's derivative may not be finite).
"""

import torch


def attention_jacobian(attention, diff, kernel, jacobian, key_scale=None):
    """``d a_i / d x_j`` of attention rows, in the inputs' coordinates.

    Parameters
    ----------
    attention : Tensor (b, n)
        Attention rows (summing to 1 over their support), float64.
    diff : Tensor (b, n, r)
        ``(q - x_i) M``: the queries' differences from the keys in the metric's
        coordinates.
    kernel : Kernel
        Its ``log_profile_sq`` is differentiated.
    jacobian : Tensor (d, r)
        ``d (x M) / d x``: the diagonal of ``1 / h`` or the projection.
    key_scale : Tensor (n,), default=None
        ``rho_i``: each key's distances multiplied by it (a sample-point bandwidth).

    Returns
    -------
    Tensor (b, n, d)
        The weights ``W`` with ``d f / d x_j = sum_i W_ij v_i`` for any values ``v``;
        each row sums to 0 over the keys.
    """
    u = diff if key_scale is None else diff * key_scale[None, :, None]  # (b, n, r)
    with torch.enable_grad():
        s = (u * u).sum(-1).detach().requires_grad_()  # (b, n)
        (slope,) = torch.autograd.grad(kernel.log_profile_sq(s).sum(), s)  # (b, n)
    held = attention > 0  # (b, n)
    scale = 2.0 * torch.where(held, slope, 0.0)  # (b, n)
    if key_scale is not None:
        scale = scale * key_scale[None, :]
    g = scale[:, :, None] * u  # (b, n, r): d L_i / d (q M)
    mean = (attention[:, :, None] * g).sum(1, keepdim=True)  # (b, 1, r)
    W = torch.where(held[:, :, None], attention[:, :, None] * (g - mean), 0.0)  # (b, n, r)
    return W @ jacobian.T  # (b, n, d)
