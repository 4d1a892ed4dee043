"""
=============
Kernel shapes
=============

A Nadaraya-Watson estimator weighs training point :math:`x_i` for a query :math:`x` by a
kernel profile :math:`k(u)` of the scaled distance :math:`u = \\lVert x - x_i \\rVert / h`,
then normalizes the weights to sum to one (the attention). This example draws every
kernel registered in :data:`sklearn_nw.kernels.KERNELS` with
:class:`~sklearn_nw.inspection.KernelDisplay`, explains what a compact support changes,
and clears up a naming mix-up: the triangular kernel is not the Epanechnikov kernel.
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Every registered kernel
# -----------------------
#
# :meth:`~sklearn_nw.inspection.KernelDisplay.from_kernels` without arguments draws each
# kernel once, titled by its name and its aliases (``"boxcar"`` and ``"uniform"`` are the
# top-hat). Dotted lines mark the edge of a compact support.
import matplotlib.pyplot as plt
import numpy as np
from scipy import sparse

from sklearn_nw import NadarayaWatsonRegressor
from sklearn_nw.inspection import KernelDisplay
from sklearn_nw.kernels import KERNELS, get_kernel

display = KernelDisplay.from_kernels()
display.figure_.suptitle(
    "The registered kernels: profile k(u) of the scaled distance u"
)

# %%
# Compact and infinite support
# ----------------------------
#
# Most kernels are *compact*: :math:`k(u) = 0` for :math:`|u| > 1`, so a query attends
# only to the training points within one bandwidth of it. The attention matrix is then
# sparse (``predict(X, return_attention=True)`` returns a ``scipy.sparse`` matrix), and
# large training sets are searched with a cell list or a tree instead of every point.
# The price: a query farther than one bandwidth from every training point has nobody
# to attend to; it falls back to the nearest training point with an
# :class:`~sklearn_nw.EmptyNeighborhoodWarning`. Kernels of *infinite* support (the
# Gaussian, the exponential, the constant) give every training point some weight, so
# every query gets an answer, and the attention is dense.
kinds = {}
for name, kernel_class in KERNELS.items():
    kinds.setdefault(
        kernel_class, name
    )  # the first name of each kernel, aliases left out
compact = [
    name
    for kernel_class, name in kinds.items()
    if np.isfinite(kernel_class.support)
]
infinite = [
    name
    for kernel_class, name in kinds.items()
    if not np.isfinite(kernel_class.support)
]
print(f"compact support ({len(compact)}): {', '.join(compact)}")
print(f"infinite support ({len(infinite)}): {', '.join(infinite)}")

# %%
# On 200 training inputs in [0, 10] with a bandwidth of 0.5, each query of a compact
# kernel reaches only a small share of the training set; the Gaussian reaches all of it.
rng = np.random.default_rng(0)
X = np.sort(rng.uniform(0, 10, 200))[:, None]
y = np.sin(X[:, 0]) + rng.normal(scale=0.2, size=200)
queries = np.linspace(0, 10, 101)[:, None]
for kernel in ["epanechnikov", "gaussian"]:
    model = NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.5).fit(X, y)
    _, attention = model.predict(queries, return_attention=True)
    dense = attention.toarray() if sparse.issparse(attention) else attention
    stored = attention.nnz if sparse.issparse(attention) else attention.size
    print(
        f"{kernel:>12}: {type(attention).__name__}, {stored:,} of {dense.size:,} "
        f"entries stored, {np.mean(dense > 0):.1%} positive"
    )

# %%
# Triangular is not Epanechnikov
# ------------------------------
#
# Some attention tutorials call the triangular kernel :math:`\max(0, 1 - |u|)` the
# "Epanechnikov" kernel. The Epanechnikov kernel is :math:`\max(0, 1 - u^2)`: flat at
# the top and steep at the edge, where the triangular kernel has a peak at 0 and falls
# linearly. Both have the same support, but for the same bandwidth the triangular kernel
# concentrates its weight on the closest points. In this package the triangular kernel
# is ``"linear"`` (alias ``"triangular"``).
fig, ax = plt.subplots(layout="constrained")
KernelDisplay.from_kernels(["triangular", "epanechnikov"], ax=ax)
ax.set_title("Triangular vs Epanechnikov kernel")

linear, epanechnikov = get_kernel("linear"), get_kernel("epanechnikov")
for u in (0.25, 0.5, 0.75):
    print(
        f"k({u}): triangular {float(linear(u)):.4f}, Epanechnikov {float(epanechnikov(u)):.4f}"
    )

# %%
# Normalized to unit area (a probability density on :math:`[-1, 1]`), the triangular
# kernel has a smaller variance than the Epanechnikov kernel: the same bandwidth smooths
# less. Computed on a fine grid:
u = np.linspace(-1, 1, 200_001)
du = u[1] - u[0]
for name, kernel in (("triangular", linear), ("Epanechnikov", epanechnikov)):
    density = kernel(np.abs(u))
    density = density / (density.sum() * du)
    print(
        f"{name:>12}: variance {np.sum(u**2 * density) * du:.4f} of the unit-area kernel"
    )
