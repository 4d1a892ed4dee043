"""
==================
Attention heatmaps
==================

Nadaraya-Watson regression is attention pooling: each query (test input) attends to
the training inputs (keys) with weights :math:`\\alpha_i(x)` that sum to one, and
predicts the weighted mean of their targets. This example draws those weights as
heatmaps with :class:`~sklearn_nw.inspection.AttentionDisplay`, one row per test input
and one column per training input, for several kernels and bandwidths, and then the
signed weights of a local-linear fit.
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause
# sphinx_gallery_thumbnail_number = 2

# %%
# The data
# --------
#
# Fifty training inputs :math:`x \sim U(0, 5)`, sorted, with targets
# :math:`y = 2 \sin(x) + x^{0.8} + \varepsilon`, :math:`\varepsilon \sim N(0, 0.5^2)`;
# the test inputs are 0, 0.1, ..., 4.9. Both are sorted, so a query's nearest
# training inputs lie near the diagonal of the heatmaps, and the displays keep that
# order (``sort_by=None``).
import matplotlib.pyplot as plt
import numpy as np

from sklearn_nw import NadarayaWatsonRegressor
from sklearn_nw.inspection import AttentionDisplay


def f(x):
    return 2 * np.sin(x) + x**0.8


rng = np.random.default_rng(0)
x_train = np.sort(rng.uniform(0, 5, 50))
y_train = f(x_train) + rng.normal(scale=0.5, size=50)
x_test = np.arange(0, 5, 0.1)
X_train, X_test = x_train[:, None], x_test[:, None]

fig, ax = plt.subplots(layout="constrained")
ax.plot(x_test, f(x_test), color="black", label="2 sin(x) + x^0.8")
ax.scatter(x_train, y_train, s=15, color="0.5", label="training data")
for h in (0.2, 0.5, 1.0):
    model = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h).fit(
        X_train, y_train
    )
    ax.plot(x_test, model.predict(X_test), label=f"Gaussian, h = {h}")
ax.set_xlabel("x")
ax.set_ylabel("y")
ax.set_title("Nadaraya-Watson fits for three bandwidths")
ax.legend()

# %%
# Attention for several kernels and bandwidths
# --------------------------------------------
#
# Each row of a heatmap is one test input's attention over the 50 training inputs. A
# small bandwidth concentrates it on the few nearest points (a narrow band along the
# diagonal: a wiggly fit); a large one spreads it over many (a wide band: a smooth fit).
# The Gaussian gives every training point a positive weight; the compact kernels
# (Epanechnikov, top-hat, linear) none beyond one bandwidth, so their bands have sharp
# edges. The top-hat weighs every point in reach equally, the linear (triangular)
# kernel favors the nearest ones most. Each panel has its own color scale: the maps
# show where the attention goes; the largest weight of each panel is printed below.
kernels = ["gaussian", "epanechnikov", "tophat", "linear"]
bandwidths = [0.2, 0.5, 1.0]
fig, axes = plt.subplots(
    len(kernels),
    len(bandwidths),
    figsize=(9, 10),
    sharex=True,
    sharey=True,
    layout="constrained",
)
for row, kernel in enumerate(kernels):
    for col, h in enumerate(bandwidths):
        model = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(
            X_train, y_train
        )
        display = AttentionDisplay.from_estimator(
            model,
            X_test,
            sort_by=None,
            ax=axes[row, col],
            colorbar=False,
            title=f"{kernel}, h = {h}",
            xlabel="training inputs (sorted)"
            if row == len(kernels) - 1
            else "",
            ylabel="test inputs (sorted)" if col == 0 else "",
        )
        print(
            f"{kernel:>12}, h = {h}: largest weight "
            f"{display.image_.get_array().max():.3f}"
        )
fig.suptitle(
    "Attention of 50 test inputs (rows) over 50 training inputs (columns)"
)

# %%
# The equivalent kernel of a local-linear fit
# -------------------------------------------
#
# ``degree=1`` fits, around each query, a straight line to the targets by least squares
# weighted by the kernel, and predicts its value at the query. The prediction is still a
# weighted sum of the targets, and ``return_attention=True`` returns those weights (the
# *equivalent kernel*): they sum to one but are signed, so the display draws them on a
# diverging color map centered on 0 (blue negative, red positive).
#
# Entries go negative because the local line extrapolates: at a query away from the
# kernel-weighted mean of its neighbors' inputs (near the ends of the data, where all of
# them lie on one side), the fitted slope carries the prediction beyond them, which
# gives the points on the far side of that mean a negative weight.
#
# The right panel plots two rows of the heatmap against the training inputs: at the
# first test input, 0, the weights of the training points beyond the nearest few turn
# negative, while Nadaraya-Watson's (degree 0) stay positive; in the middle of the data,
# at 2.5, the local-linear weights are almost those of Nadaraya-Watson.
model = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=0.5, degree=1)
model.fit(X_train, y_train)
fig, (ax_map, ax_row) = plt.subplots(
    1, 2, figsize=(9, 4), layout="constrained"
)
display = AttentionDisplay.from_estimator(
    model,
    X_test,
    sort_by=None,
    ax=ax_map,
    title="equivalent kernel of a local-linear fit\n(Gaussian, h = 0.5)",
    xlabel="training inputs (sorted)",
    ylabel="test inputs (sorted)",
)
display.colorbar_.set_label("weight")

weights = display.image_.get_array()
nadaraya_watson = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=0.5)
_, weights_nw = nadaraya_watson.fit(X_train, y_train).predict(
    X_test, return_attention=True
)
for i, color in ((0, "C0"), (25, "C1")):
    ax_row.plot(
        x_train,
        weights[i],
        marker="o",
        markersize=3,
        color=color,
        label=f"local linear, test input {x_test[i]:.1f}",
    )
    ax_row.plot(
        x_train,
        weights_nw[i],
        linestyle="--",
        color=color,
        label=f"Nadaraya-Watson, test input {x_test[i]:.1f}",
    )
ax_row.axhline(0, color="black", linewidth=0.8)
ax_row.set_xlabel("training input x_i")
ax_row.set_ylabel("weight of training point i")
ax_row.set_title("two rows of the attention")
ax_row.legend()

print(
    f"{np.mean(weights < 0):.1%} of the local-linear weights are negative; the smallest "
    f"is {weights.min():.3f}, at test input {x_test[np.argmin(weights.min(axis=1))]:.1f}"
)
print(
    f"its rows sum to 1 within {np.abs(weights.sum(axis=1) - 1).max():.1e}; "
    f"the smallest Nadaraya-Watson weight is {weights_nw.min():.2e}"
)
