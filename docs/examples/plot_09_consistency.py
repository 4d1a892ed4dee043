r"""
===============================================================
Consistency: error shrinks as n grows and the bandwidth shrinks
===============================================================

Nadaraya-Watson regression is *consistent*: as the number of samples ``n`` grows and the
bandwidth ``h`` shrinks slowly enough (``h -> 0`` and ``n h -> inf``), the estimate
converges to the regression function. For a twice-differentiable function in one
dimension the squared bias is of order ``h**4`` and the variance of order
``1 / (n h)``; balancing them gives the classical rates

.. math::

    h^\star \propto n^{-1/5}, \qquad \text{MSE} \propto n^{-4/5}.

This example fits :class:`~sklearn_nw.NadarayaWatsonRegressorCV` (fixed bandwidths,
degree 0: plain Nadaraya-Watson, the bandwidth chosen by exact leave-one-out) on samples
of growing size and measures both: the test error against the true function, and the
bandwidth that leave-one-out chose.
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Data
# ----
#
# ``y = 2 sin(x) + x**0.8 + noise`` with ``x`` uniform on [0, 5] and Gaussian noise of
# standard deviation 1. The error is measured against the noise-free function on a fine
# grid of [0, 5], and also on the interior [0.5, 4.5] alone, away from the edges.
import matplotlib.pyplot as plt
import numpy as np

from sklearn_nw import NadarayaWatsonRegressorCV


def truth(x):
    return 2 * np.sin(x) + x**0.8


noise = 1.0
X_test = np.linspace(0, 5, 2001)[:, None]
y_true = truth(X_test[:, 0])
interior = (X_test[:, 0] >= 0.5) & (X_test[:, 0] <= 4.5)

# %%
# Fits of growing size
# --------------------
#
# Sample sizes double from 50 to 3,200; every size is drawn for five seeds. The exact
# leave-one-out search costs ``n**2`` per grid point, which is what keeps the largest
# size at a few thousand here.
sizes = 50 * 2 ** np.arange(7)
seeds = [0, 1, 2, 3, 4]
bandwidth = np.empty((len(seeds), len(sizes)))
mse = np.empty((len(seeds), len(sizes)))
mse_interior = np.empty((len(seeds), len(sizes)))
examples = {}  # the fits of the first seed, drawn below
for i, seed in enumerate(seeds):
    rng = np.random.default_rng(seed)
    for j, n in enumerate(sizes):
        X = rng.uniform(0, 5, size=(n, 1))
        y = truth(X[:, 0]) + rng.normal(scale=noise, size=n)
        reg = NadarayaWatsonRegressorCV(
            bandwidth_kinds=["fixed"], degree=0
        ).fit(X, y)
        squared_error = (reg.predict(X_test) - y_true) ** 2
        bandwidth[i, j] = reg.bandwidth_[0]
        mse[i, j] = squared_error.mean()
        mse_interior[i, j] = squared_error[interior].mean()
        if seed == seeds[0] and n in (sizes[0], sizes[-1]):
            examples[n] = (X, y, reg)


def geometric_mean(a):
    return np.exp(np.log(a).mean(axis=0))


def log_log_slope(x, y):
    return np.polyfit(np.log(x), np.log(y), 1)[0]


h_mean = geometric_mean(bandwidth)
mse_mean = geometric_mean(mse)
mse_interior_mean = geometric_mean(mse_interior)
print(
    "    n   bandwidth   MSE on [0, 5]   MSE on [0.5, 4.5]   (geometric means over seeds)"
)
for n, h, e, e_in in zip(sizes, h_mean, mse_mean, mse_interior_mean):
    print(f"{n:>5}   {h:9.4f}   {e:13.5f}   {e_in:17.5f}")
slope_h = log_log_slope(sizes, h_mean)
slope_mse = log_log_slope(sizes, mse_mean)
slope_mse_interior = log_log_slope(sizes, mse_interior_mean)
for name, per_seed, mean_slope, rate in (
    ("bandwidth", bandwidth, slope_h, "-1/5"),
    ("MSE on [0, 5]", mse, slope_mse, "-4/5"),
    ("MSE on [0.5, 4.5]", mse_interior, slope_mse_interior, "-4/5"),
):
    seed_slopes = [log_log_slope(sizes, row) for row in per_seed]
    standard_error = np.std(seed_slopes, ddof=1) / np.sqrt(len(seeds))
    print(
        f"slope of the {name:<17}  {mean_slope:+.3f}  (classical rate {rate})\n"
        f"    per seed {', '.join(f'{v:+.3f}' for v in seed_slopes)},"
        f" standard error {standard_error:.3f}"
    )

# %%
# Plots
# -----
#
# Left, the data and fits of the smallest and the largest sample (first seed). Middle,
# the test error against ``n``, one faint line per seed and their geometric mean, with a
# reference line of slope -4/5. Right, the bandwidth chosen by leave-one-out with a
# reference line of slope -1/5. The reference lines go through the first mean point;
# the dotted ones are the rates with the boundary bias, explained below.
# The first panel on its own row, so that the text stays legible in the page's
# column.
fig, mosaic = plt.subplot_mosaic([["a", "a"], ["b", "c"]], figsize=(9, 7.6), layout="constrained")
axes = [mosaic["a"], mosaic["b"], mosaic["c"]]

ax = axes[0]
for n, color in zip(examples, ("tab:orange", "tab:blue")):
    X, y, reg = examples[n]
    ax.scatter(
        X[:, 0],
        y,
        s=4 if n > 100 else 12,
        alpha=0.25 if n > 100 else 0.6,
        color=color,
    )
    ax.plot(
        X_test[:, 0],
        reg.predict(X_test),
        color=color,
        lw=2,
        label=f"n = {n}, h = {reg.bandwidth_[0]:.3f}",
    )
ax.plot(X_test[:, 0], y_true, "k--", lw=1.5, label="true function")
ax.set_xlabel("x")
ax.set_ylabel("y")
ax.set_title("Data and Nadaraya-Watson fits")
ax.legend(loc="lower left")

ax = axes[1]
for row in mse:
    ax.plot(sizes, row, color="tab:blue", alpha=0.25, lw=1)
ax.plot(
    sizes,
    mse_mean,
    "o-",
    color="tab:blue",
    label=f"on [0, 5]: slope {slope_mse:.2f}",
)
ax.plot(
    sizes,
    mse_interior_mean,
    "s-",
    color="tab:green",
    label=f"on [0.5, 4.5]: slope {slope_mse_interior:.2f}",
)
ax.plot(
    sizes,
    mse_mean[0] * (sizes / sizes[0]) ** (-4 / 5),
    "k--",
    label="reference slope -4/5 (interior rate)",
)
ax.plot(
    sizes,
    mse_mean[0] * (sizes / sizes[0]) ** (-3 / 4),
    "k:",
    label="slope -3/4 (with the boundary bias)",
)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("number of training samples n")
ax.set_ylabel("test MSE against the true function")
ax.set_title("Test error")
ax.legend()

ax = axes[2]
for row in bandwidth:
    ax.plot(sizes, row, color="tab:purple", alpha=0.25, lw=1)
ax.plot(
    sizes,
    h_mean,
    "o-",
    color="tab:purple",
    label=f"leave-one-out: slope {slope_h:.2f}",
)
ax.plot(
    sizes,
    h_mean[0] * (sizes / sizes[0]) ** (-1 / 5),
    "k--",
    label="reference slope -1/5 (interior rate)",
)
ax.plot(
    sizes,
    h_mean[0] * (sizes / sizes[0]) ** (-1 / 4),
    "k:",
    label="slope -1/4 (with the boundary bias)",
)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("number of training samples n")
ax.set_ylabel("chosen bandwidth h")
ax.set_title("Bandwidth chosen by exact leave-one-out")
ax.legend()
plt.show()

# %%
# Reading the slopes
# ------------------
#
# The error falls and the bandwidth shrinks, as consistency promises, and the fitted
# slopes printed above are near the classical ones. They are not a clean test of them:
# the per-seed slopes spread by the standard errors printed beside them, and the
# classical rates are interior rates, whose assumptions this problem breaks at its
# edges.
#
# * Within a bandwidth of an end of the data the attention is one-sided, and
#   Nadaraya-Watson's bias there is of order ``h``, not ``h**2``. Integrated over [0, 5]
#   it adds a term of order ``h**3`` to the squared error; balancing ``h**3`` against the
#   variance ``1 / (n h)`` gives ``h ~ n^(-1/4)`` and an MSE of order ``n^(-3/4)``, the
#   dotted lines. Leave-one-out scores every training point, the edges included, so in
#   the limit it aims at that bandwidth; and with it even the interior error eventually
#   falls as ``n^(-3/4)``, its variance ``1 / (n h)`` then the larger term.
# * ``x**0.8`` has an unbounded slope and second derivative at 0: the function is not
#   twice differentiable there.
#
# Over 50 to 3,200 samples the two pairs of rates differ by less than the seeds' spread.
# Local-linear fits (``degree=1``) remove the boundary bias of order ``h``.
