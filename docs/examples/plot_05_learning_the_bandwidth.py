"""
==========================================
Learning the bandwidth by gradient descent
==========================================

The bandwidth :math:`h` of a Nadaraya-Watson estimator can be learned like any other
parameter, by gradient descent on a loss. But not on the training (in-sample) loss: it
is minimized by :math:`h \\to 0`, where every training point attends only to itself and
predicts its own target exactly. This example shows that, shows the leave-one-out loss
(each point predicted without itself) that has a minimum at a useful bandwidth, and
learns the bandwidth on it with ``bandwidth="loo"``, following the descent with
:class:`~sklearn_nw.inspection.LossCurveDisplay`.
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The data
# --------
#
# Fifty training points :math:`x \sim U(0, 5)`, sorted, with targets
# :math:`y = 2 \sin(x) + x^{0.8} + \varepsilon`, :math:`\varepsilon \sim N(0, 0.5^2)`;
# and 1,000 test points drawn the same way, to measure the error on new data.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import mean_squared_error

from sklearn_nw import NadarayaWatsonRegressor, NadarayaWatsonRegressorCV
from sklearn_nw.inspection import BandwidthSearchDisplay, LossCurveDisplay


def f(x):
    return 2 * np.sin(x) + x**0.8


noise = 0.5  # standard deviation of the noise
rng = np.random.default_rng(0)
x_train = np.sort(rng.uniform(0, 5, 50))
y_train = f(x_train) + rng.normal(scale=noise, size=50)
x_test = np.sort(rng.uniform(0, 5, 1000))
y_test = f(x_test) + rng.normal(scale=noise, size=1000)
X_train, X_test = x_train[:, None], x_test[:, None]

# %%
# The in-sample loss falls to 0 as h shrinks
# ------------------------------------------
#
# For each bandwidth of a grid from 0.001 to 10, fit on the training set and measure
# the mean squared error on the same training set. The smaller the bandwidth, the more
# each training point's prediction is its own target, and the error goes to 0.
bandwidths = np.geomspace(1e-3, 10, 41)
in_sample = np.array(
    [
        mean_squared_error(
            y_train,
            NadarayaWatsonRegressor(bandwidth=h)
            .fit(X_train, y_train)
            .predict(X_train),
        )
        for h in bandwidths
    ]
)
print(
    f"in-sample MSE at h = {bandwidths[0]:g}: {in_sample[0]:.2e}; "
    f"at h = {bandwidths[-1]:g}: {in_sample[-1]:.3f}"
)
print(
    "the in-sample MSE never increases as h shrinks on this grid:",
    bool(np.all(np.diff(in_sample) >= 0)),
)

# %%
# The leave-one-out loss has an interior minimum
# ----------------------------------------------
#
# The leave-one-out loss predicts each training point from the others only, so a tiny
# bandwidth no longer lets a point copy its own target: it predicts it from its nearest
# neighbor, a noisy guess. Too large a bandwidth averages away the signal. In between
# lies the minimum. :class:`~sklearn_nw.NadarayaWatsonRegressorCV` computes the exact
# leave-one-out loss of every bandwidth of the grid (here fixed bandwidths only and
# Nadaraya-Watson, ``degree=0``), and
# :class:`~sklearn_nw.inspection.BandwidthSearchDisplay` draws it with the chosen
# bandwidth marked by a star; the in-sample curve is added to the same axes, and so is
# the grid's minimum (a black dot), which is *not* the chosen bandwidth (see the next
# section).
search = NadarayaWatsonRegressorCV(
    bandwidths=bandwidths, bandwidth_kinds=["fixed"], degree=0
).fit(X_train, y_train)
loo = -search.cv_results_["mean_test_score"]
best = int(np.argmin(loo))
display = BandwidthSearchDisplay.from_estimator(search)
display.lines_[0].set_label("leave-one-out MSE")
display.ax_.plot(bandwidths, in_sample, marker="o", markersize=3, color="C3",
                 label="in-sample (training) MSE")
display.ax_.plot(bandwidths[best], loo[best], "o", color="black", markersize=7,
                 label=f"least leave-one-out MSE: h = {bandwidths[best]:.3g}")
display.ax_.set_ylabel("mean squared error on the training set")
display.ax_.set_title("In-sample vs leave-one-out loss of the bandwidth")
display.ax_.legend(fontsize="medium")

print(f"leave-one-out MSE at h = {bandwidths[0]:g}: {loo[0]:.3f}; "
      f"at h = {bandwidths[-1]:g}: {loo[-1]:.3f}")
print(f"least leave-one-out MSE: {loo[best]:.3f} at h = {bandwidths[best]:.3g}")
print(f"chosen by the search:    {loo[search.best_index_]:.3f} "
      f"at h = {search.bandwidth_[0]:.3g}")

# %%
# Why the search chose a larger bandwidth: the one-standard-error rule
# --------------------------------------------------------------------
#
# The leave-one-out loss of 50 points is itself a noisy estimate. The CV estimators
# therefore do not take the grid's minimum by default (``selection="one_se"``): they
# take the *largest* bandwidth whose loss is within one standard error of the
# minimum's, since bandwidths the data cannot tell apart differ only in their noise and
# the smoother fit varies less from one training sample to another (Breiman's
# one-standard-error rule; see :ref:`ug_automatic`). The standard error is that of the
# per-sample differences between the two candidates' leave-one-out losses. Computed
# here by hand, with NumPy, for the Gaussian kernel:


def loo_squared_errors(h):
    """Each training point's squared error, predicted from the other 49."""
    weights = np.exp(-0.5 * ((x_train[:, None] - x_train[None, :]) / h) ** 2)
    np.fill_diagonal(weights, 0.0)
    return (y_train - weights @ y_train / weights.sum(axis=1)) ** 2


errors_best = loo_squared_errors(bandwidths[best])
for g in range(best, len(bandwidths)):
    gain = loo_squared_errors(bandwidths[g]) - errors_best  # (50,)
    standard_error = gain.std() / np.sqrt(len(gain))
    print(f"h = {bandwidths[g]:6.3f}: loss {loo[g]:.3f}, "
          f"{gain.mean():+.3f} over the minimum, standard error {standard_error:.3f}")
    if gain.mean() > standard_error:
        break

# %%
# The last bandwidth within one standard error is the search's choice. With
# ``selection="min"`` the CV estimator takes the minimum instead:
least = NadarayaWatsonRegressorCV(
    bandwidths=bandwidths, bandwidth_kinds=["fixed"], degree=0, selection="min"
).fit(X_train, y_train)
print(f'selection="one_se" (default): h = {search.bandwidth_[0]:.3g}')
print(f'selection="min":              h = {least.bandwidth_[0]:.3g}')

# %%
# Learning the bandwidth on the leave-one-out loss
# ------------------------------------------------
#
# ``bandwidth="loo"`` (:class:`~sklearn_nw.LeaveOneOutBandwidth` with its defaults)
# learns it by gradient descent on that leave-one-out loss, with torch autograd: it
# starts from the best point of a coarse exact grid of multiples of Scott's rule, then
# runs L-BFGS. ``loss_curve_`` holds the loss at each evaluation of the descent (line
# searches included, so it need not fall at every step).
model = NadarayaWatsonRegressor(bandwidth="loo").fit(X_train, y_train)
display = LossCurveDisplay.from_estimator(model)
display.ax_.set_title(
    f"Leave-one-out descent: {model.n_iter_} iterations, "
    f"{len(model.loss_curve_)} evaluations"
)
print(f"learned bandwidth h = {model.bandwidth_[0]:.4f} after {model.n_iter_} iterations")
print(f"leave-one-out MSE {model.loss_curve_[0]:.4f} at the start, "
      f"{model.loss_curve_.min():.4f} at the best evaluation")

# %%
# The descent minimizes the loss: with one feature it lands next to the grid's minimum,
# not at the one-standard-error choice. (With several features
# :class:`~sklearn_nw.LeaveOneOutBandwidth` applies the rule in its own way: per-feature
# bandwidths are kept only if they beat a single scaled rule of thumb by more than one
# standard error.)

# %%
# On new data
# -----------
#
# The bandwidths chosen by leave-one-out, learned or from the grid by either rule,
# predict the test set well; the bandwidth that minimizes the in-sample loss (the
# smallest of the grid) interpolates the training noise and does much worse. The noise
# variance is the lowest test MSE any model can expect. The one-standard-error choice
# need not predict this test set better than the minimum: it trades a little of the fit
# for a smoother curve that varies less with the training sample.
tiny = bandwidths[int(np.argmin(in_sample))]
tiny_model = NadarayaWatsonRegressor(bandwidth=tiny).fit(X_train, y_train)
print(f"noise variance: {noise**2:.3f}")
for name, fitted in (
    (f"learned h = {model.bandwidth_[0]:.3f}", model),
    (f"grid, one-SE rule h = {search.bandwidth_[0]:.3f}", search),
    (f"grid, minimum h = {least.bandwidth_[0]:.3f}", least),
    (f"in-sample optimal h = {tiny:g}", tiny_model),
):
    print(
        f"{name:>28}: test MSE {mean_squared_error(y_test, fitted.predict(X_test)):.3f}"
    )

fig, ax = plt.subplots(layout="constrained")
ax.scatter(x_train, y_train, s=15, color="0.5", label="training data")
ax.plot(x_test, f(x_test), color="black", label="2 sin(x) + x^0.8")
ax.plot(
    x_test,
    model.predict(X_test),
    label=f"learned h = {model.bandwidth_[0]:.3f}",
)
ax.plot(
    x_test,
    tiny_model.predict(X_test),
    linewidth=0.8,
    label=f"in-sample optimal h = {tiny:g}",
)
ax.set_xlabel("x")
ax.set_ylabel("y")
ax.set_title("Predictions on the test inputs")
ax.legend()
