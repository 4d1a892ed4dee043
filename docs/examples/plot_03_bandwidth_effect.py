"""
===========================
The effect of the bandwidth
===========================

The bandwidth sets how far a Nadaraya–Watson fit looks: a small one averages a few
neighboring targets and follows the noise, a large one averages many and flattens the
function. This example fits the same data with a Gaussian kernel at four bandwidths,
compares each fit with the noise-free function, splits its expected error into squared
bias and variance, and shows that exact leave-one-out, which sees only the noisy
training data, ranks the bandwidths much as the test error does.
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The data
# --------
#
# As in :ref:`sphx_glr_auto_examples_plot_02_kernel_fits.py`: fifty sorted points
# :math:`x \sim U(0, 5)`, :math:`y = 2 \sin(x) + x^{0.8} + \varepsilon` with
# :math:`\varepsilon \sim N(0, 0.5^2)`, and a dense grid of test points.
import matplotlib.pyplot as plt
import numpy as np

from sklearn_nw import NadarayaWatsonRegressor, NadarayaWatsonRegressorCV


def f(x):
    return 2 * np.sin(x) + x**0.8


rng = np.random.default_rng(0)
n_samples, noise_std = 50, 0.5
x_train = np.sort(rng.uniform(0, 5, n_samples))
y_train = f(x_train) + rng.normal(scale=noise_std, size=n_samples)
X_train = x_train[:, np.newaxis]

x_test = np.linspace(0, 5, 500)
X_test = x_test[:, np.newaxis]
f_test = f(x_test)

# %%
# What the Gaussian's bandwidth is
# --------------------------------
#
# The package's Gaussian kernel is :math:`k(u) = \exp(-u^2 / 2)` of the scaled distance
# :math:`u = |q - x_i| / h`, so the weight of training point :math:`x_i` at a query
# :math:`q` is proportional to :math:`\exp(-(q - x_i)^2 / (2 h^2))`: the bandwidth
# :math:`h` is the standard deviation :math:`\sigma` of the Gaussian, not its variance
# and not :math:`\sqrt{2}\,\sigma`. The attention weights that ``predict`` returns
# confirm it:
sigma = 0.5
reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=sigma).fit(
    X_train, y_train
)
_, attention = reg.predict([[2.5]], return_attention=True)
weights = np.exp(-((2.5 - x_train) ** 2) / (2 * sigma**2))
weights /= weights.sum()
print(
    f"max |attention - normalized exp(-(q - x)^2 / (2 sigma^2))|: "
    f"{np.abs(attention[0] - weights).max():.1e}"
)

# %%
# Four bandwidths
# ---------------
#
# For each :math:`\sigma` we print the test error against the noise-free function and
# the leave-one-out error. :class:`~sklearn_nw.NadarayaWatsonRegressorCV` computes the
# latter exactly for every bandwidth of a grid in one pass (``cv_results_`` holds the
# negative mean squared error); refitting without each point in turn agrees with it.
sigmas = [0.1, 0.2, 0.5, 1.0]
cv = NadarayaWatsonRegressorCV(
    bandwidths=sigmas, bandwidth_kinds=["fixed"], degree=0
)
cv.fit(X_train, y_train)
loo_mse = -cv.cv_results_["mean_test_score"]

predictions, test_mse = [], []
print(
    f"\n{'sigma':>5}  {'test MSE':>8}  {'LOO MSE':>8}  {'LOO MSE by refits':>17}"
)
for sigma, loo in zip(sigmas, loo_mse):
    reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=sigma).fit(
        X_train, y_train
    )
    predictions.append(reg.predict(X_test))
    test_mse.append(np.mean((predictions[-1] - f_test) ** 2))
    errors = []
    for i in range(n_samples):
        keep = np.arange(n_samples) != i
        refit = NadarayaWatsonRegressor(bandwidth=sigma).fit(
            X_train[keep], y_train[keep]
        )
        errors.append(refit.predict(X_train[i : i + 1])[0] - y_train[i])
    print(
        f"{sigma:5.1f}  {test_mse[-1]:8.4f}  {loo:8.4f}  {np.mean(np.square(errors)):17.4f}"
    )
print(
    f"\nbest sigma by leave-one-out: {cv.bandwidth_[0]}, "
    f"by test MSE: {sigmas[int(np.argmin(test_mse))]}"
)

# %%
fig, axes = plt.subplots(
    2, 2, figsize=(9, 6.6), sharex=True, sharey=True, constrained_layout=True
)
for ax, sigma, y_pred, mse, loo in zip(
    axes.flat, sigmas, predictions, test_mse, loo_mse
):
    ax.plot(x_test, f_test, color="black", linestyle="--", label="truth")
    ax.scatter(
        x_train,
        y_train,
        s=12,
        color="tab:gray",
        alpha=0.8,
        label="training points",
    )
    ax.plot(
        x_test,
        y_pred,
        color="tab:blue",
        linewidth=2,
        label="Nadaraya–Watson fit",
    )
    ax.set_title(
        f"σ = {sigma}: test MSE {mse:.3f}\nleave-one-out MSE {loo:.3f}"
    )
for ax in axes[1]:
    ax.set_xlabel("x")
for ax in axes[:, 0]:
    ax.set_ylabel("y")
axes[0, 0].legend(loc="upper right")
fig.suptitle("Gaussian kernel at four bandwidths")
plt.show()

# %%
# Bias and variance
# -----------------
#
# With the training inputs held fixed, a Nadaraya–Watson fit is linear in the targets,
# :math:`\hat f(q) = \sum_i \alpha_i(q)\, y_i`, so its expected squared error over new
# draws of the noise splits exactly into a squared bias and a variance:
#
# .. math::
#
#     \mathbb{E}\big[(\hat f(q) - f(q))^2\big]
#     = \Big(\sum_i \alpha_i(q) f(x_i) - f(q)\Big)^2
#     + \sigma_\varepsilon^2 \sum_i \alpha_i(q)^2 .
#
# The attention matrix gives both terms; we average them over the test grid, for a fine
# range of bandwidths. The leave-one-out error of the same range comes from one more
# exact leave-one-out search. Thin vertical lines mark the four bandwidths above, dots
# the minima.
sigma_grid = np.geomspace(0.03, 2, 40)
bias2, variance = [], []
for sigma in sigma_grid:
    reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=sigma).fit(
        X_train, y_train
    )
    _, attention = reg.predict(
        X_test, return_attention=True
    )  # (n_test, n_samples)
    bias2.append(np.mean((attention @ f(x_train) - f_test) ** 2))
    variance.append(noise_std**2 * np.mean((attention**2).sum(axis=1)))
bias2, variance = np.array(bias2), np.array(variance)
expected = bias2 + variance
loo_grid = (
    -NadarayaWatsonRegressorCV(
        bandwidths=sigma_grid, bandwidth_kinds=["fixed"], degree=0
    )
    .fit(X_train, y_train)
    .cv_results_["mean_test_score"]
)
best_expected, best_loo = np.argmin(expected), np.argmin(loo_grid)
print(
    f"\nsigma grid: {len(sigma_grid)} values from {sigma_grid[0]} to {sigma_grid[-1]}"
)
print(
    f"least expected test MSE: {expected[best_expected]:.4f} at sigma "
    f"{sigma_grid[best_expected]:.3f}"
)
print(
    f"least leave-one-out MSE: {loo_grid[best_loo]:.4f} at sigma {sigma_grid[best_loo]:.3f}"
    f" (minus the noise variance: {loo_grid[best_loo] - noise_std**2:.4f})"
)
print(f"squared bias is least at sigma {sigma_grid[np.argmin(bias2)]:.3f}")

fig, (ax1, ax2) = plt.subplots(
    1, 2, figsize=(9, 4), constrained_layout=True
)
ax1.plot(sigma_grid, bias2, label="squared bias")
ax1.plot(sigma_grid, variance, label="variance")
ax1.plot(sigma_grid, expected, color="black", label="expected test MSE (sum)")
ax1.plot(
    sigma_grid[best_expected], expected[best_expected], "o", color="black"
)
ax1.set_title("Expected test error against the truth")
ax1.set_yscale("log")
ax2.plot(sigma_grid, loo_grid, color="tab:red", label="leave-one-out MSE")
ax2.axhline(
    noise_std**2, color="tab:gray", linestyle=":", label="noise variance"
)
ax2.plot(sigma_grid[best_loo], loo_grid[best_loo], "o", color="tab:red")
ax2.set_title("Leave-one-out error on the noisy targets")
ax2.set_ylim(bottom=0)
for ax in (ax1, ax2):
    ax.set_xscale("log")
    ax.set_xlabel("bandwidth σ")
    ax.set_ylabel("mean squared error")
    for sigma in sigmas:
        ax.axvline(sigma, color="tab:gray", linewidth=0.5)
    ax.legend()
plt.show()

# %%
# Discussion
# ----------
#
# At :math:`\sigma = 0.1` each prediction averages a handful of targets: the curve
# follows the noise (high variance, low bias). At :math:`\sigma = 1` it averages targets
# from far away and flattens the hump of the function (low variance, high bias). The
# variance falls steadily as :math:`\sigma` grows; the squared bias grows, except at the
# smallest bandwidths, where the fit is close to a step function through the nearest
# training targets and a little smoothing first makes it a better interpolant. Their sum
# has a minimum: the bias–variance trade-off.
#
# The leave-one-out error predicts each training target from the others, so it includes
# the noise of that target: it estimates the error on a new noisy observation, which is
# larger than the error against the truth by roughly the noise variance. Its minimum,
# found from the training data alone, falls at a somewhat smaller :math:`\sigma` than the
# minimum of the expected test error here (the printed values), but inside the same flat
# valley, and among the four bandwidths of the first figure both choose
# :math:`\sigma = 0.2`. That is how :class:`~sklearn_nw.NadarayaWatsonRegressorCV` can
# choose a bandwidth without a held-out set.
