"""
===============================================================
Against k nearest neighbors, Gaussian processes and statsmodels
===============================================================

Nadaraya-Watson regression sits between k nearest neighbors (a local average with a hard
window) and Gaussian process regression (a smoother fitted by marginal likelihood), and
statsmodels' ``KernelReg`` is the classical implementation of the same estimator. This
example compares them on scikit-learn's diabetes data (442 patients, 10 features, a
disease progression score one year later): the 5-fold cross-validated R² and the time
each takes to fit.

Every model is a pipeline whose first step standardizes the features, so that the
distance-based models see them on one scale:

* :class:`~sklearn_nw.NadarayaWatsonRegressorCV` with its default arguments: fixed,
  balloon and sample-point bandwidths and the degree of local polynomials, all chosen by
  exact leave-one-out;
* :class:`~sklearn_nw.NadarayaWatsonRegressor` with ``bandwidth="loo"``: one bandwidth
  per feature, learned by gradient descent on the leave-one-out error;
* :class:`~sklearn.neighbors.KNeighborsRegressor` tuned by
  :class:`~sklearn.model_selection.GridSearchCV` over ``n_neighbors`` and ``weights``;
* :class:`~sklearn.gaussian_process.GaussianProcessRegressor` with an RBF plus a white
  noise kernel, ``normalize_y=True``;
* statsmodels' ``KernelReg``, local constant (``reg_type="lc"``, Nadaraya-Watson) and
  local linear (``"ll"``), wrapped in a small scikit-learn estimator.
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The data
# --------
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.datasets import load_diabetes
from sklearn.feature_selection import SelectFromModel
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.linear_model import Lars
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import validate_data
from statsmodels.nonparametric.kernel_regression import KernelReg
from threadpoolctl import threadpool_limits

from sklearn_nw import NadarayaWatsonRegressor, NadarayaWatsonRegressorCV

X, y = load_diabetes(return_X_y=True)
# sphinx_gallery_start_ignore
# The test suite sets SKLEARN_NW_EXAMPLES_QUICK=1: it then runs on the first 120 rows only.
import os  # noqa: E402

if os.environ.get("SKLEARN_NW_EXAMPLES_QUICK") == "1":
    X, y = X[:120], y[:120]
# sphinx_gallery_end_ignore
print(f"{X.shape[0]} samples, {X.shape[1]} features")

# %%
# statsmodels as a scikit-learn estimator
# ---------------------------------------
#
# ``KernelReg`` takes the data in its constructor and predicts with ``fit``; a tiny
# wrapper gives it scikit-learn's ``fit`` / ``predict``. Its ``bw="cv_ls"`` selects one
# bandwidth per feature by leave-one-out least squares, as ``bandwidth="loo"`` does, with
# Nelder-Mead over pure-Python loops, and on the ten features of this data one fit takes
# far longer than the whole of this example. Two compromises keep the example short,
# and both are said in the results:
#
# * ``cv_ls`` runs on the two features that enter the LARS path first
#   (:class:`~sklearn.linear_model.Lars`, refitted inside each training fold, so no
#   test row is seen); the learned ``bandwidth="loo"`` is run on the same two features
#   for a like-for-like comparison.
# * On all ten features statsmodels gets its normal-reference rule of thumb,
#   ``h_j = 1.06 sigma_j n^(-1 / (4 + d))`` (``KernelReg`` treats any string but
#   ``"cv_ls"`` as AIC selection, so the rule is computed here and passed as numbers).


class KernelRegRegressor(RegressorMixin, BaseEstimator):
    """statsmodels' ``KernelReg`` for continuous features, as a scikit-learn regressor.

    ``bw`` is ``"cv_ls"``, ``"normal_reference"`` (computed here) or an array.
    """

    def __init__(self, reg_type="lc", bw="cv_ls"):
        self.reg_type = reg_type
        self.bw = bw

    def fit(self, X, y):
        X, y = validate_data(self, X, y, y_numeric=True)
        n, d = X.shape
        bw = self.bw
        if isinstance(bw, str) and bw == "normal_reference":
            bw = 1.06 * X.std(axis=0) * n ** (-1 / (4 + d))
        with warnings.catch_warnings():
            # statsmodels >= 0.15 warns that its default random generator will change; the
            # generator only draws subsamples for its "efficient" bandwidths, unused here.
            warnings.filterwarnings("ignore", "After 0.17", FutureWarning)
            self.kernel_reg_ = KernelReg(
                y, X, var_type="c" * d, reg_type=self.reg_type, bw=bw
            )
        self.bandwidth_ = np.abs(self.kernel_reg_.bw)
        return self

    def predict(self, X):
        X = validate_data(self, X, reset=False)
        return self.kernel_reg_.fit(X)[0]


def first_lars_features(k):
    """A selector of the k features that enter scikit-learn's LARS path first."""
    return SelectFromModel(
        Lars(n_nonzero_coefs=k), threshold=-np.inf, max_features=k
    )


# %%
# The models
# ----------
knn_grid = {
    "n_neighbors": [1, 2, 3, 5, 7, 10, 15, 20, 30, 40, 50],
    "weights": ["uniform", "distance"],
}
models = {
    "NadarayaWatsonRegressorCV()": NadarayaWatsonRegressorCV(),
    'NadarayaWatsonRegressor(bandwidth="loo")': NadarayaWatsonRegressor(
        bandwidth="loo"
    ),
    "KNeighborsRegressor, GridSearchCV": GridSearchCV(
        KNeighborsRegressor(), knn_grid
    ),
    "GaussianProcessRegressor, RBF + WhiteKernel": GaussianProcessRegressor(
        RBF() + WhiteKernel(), normalize_y=True
    ),
    'KernelReg("lc"), rule of thumb': KernelRegRegressor(
        "lc", bw="normal_reference"
    ),
    'KernelReg("ll"), rule of thumb': KernelRegRegressor(
        "ll", bw="normal_reference"
    ),
    'NadarayaWatsonRegressor(bandwidth="loo"), 2 LARS features': (
        first_lars_features(2),
        NadarayaWatsonRegressor(bandwidth="loo"),
    ),
    'KernelReg("lc", bw="cv_ls"), 2 LARS features': (
        first_lars_features(2),
        KernelRegRegressor("lc", bw="cv_ls"),
    ),
}

# %%
# Cross-validation
# ----------------
#
# The same five shuffled folds for every model. ``fit_time`` is the mean time of one
# fit on four fifths of the data (its bandwidth or hyperparameter search included).
#
# Every model runs on one thread (``threadpoolctl``, a dependency of scikit-learn, limits
# BLAS and OpenMP, torch's threads included). On data this small a parallel region has
# little work to share, and on a machine where other processes hold the cores its
# threads wait for each other: on the shared machine this example was written on, a fit
# of the Gaussian process or of ``bandwidth="loo"`` then took many times longer with
# two threads than with one.
cv = KFold(n_splits=5, shuffle=True, random_state=0)
results = {}
start = time.perf_counter()
with threadpool_limits(limits=1):
    for name, steps in models.items():
        steps = steps if isinstance(steps, tuple) else (steps,)
        pipeline = make_pipeline(StandardScaler(), *steps)
        results[name] = cross_validate(pipeline, X, y, cv=cv, scoring="r2")
print(
    f"cross-validation of every model: {time.perf_counter() - start:.1f} s\n"
)

print(f"{'R2 mean':>8} {'R2 std':>7} {'fit s':>7} {'predict s':>10}  model")
for name, scores in results.items():
    print(
        f"{scores['test_score'].mean():8.3f} {scores['test_score'].std():7.3f}"
        f" {scores['fit_time'].mean():7.3f} {scores['score_time'].mean():10.3f}  {name}"
    )

# %%
# Who wins
# --------
#
# Each model's mean R² against that of :class:`~sklearn_nw.NadarayaWatsonRegressorCV`,
# with the number of folds (of five) on which it scored higher; and statsmodels on two
# LARS features against the learned bandwidth on the same two.
reference = "NadarayaWatsonRegressorCV()"
reference_scores = results[reference]["test_score"]
for name, scores in results.items():
    if name == reference:
        continue
    difference = scores["test_score"].mean() - reference_scores.mean()
    folds = int((scores["test_score"] > reference_scores).sum())
    verdict = "beats" if difference > 0 else "trails"
    print(f"{name}\n    {verdict} {reference} by {abs(difference):.3f}"
          f" (higher on {folds} of 5 folds)")
loo_2 = results['NadarayaWatsonRegressor(bandwidth="loo"), 2 LARS features']
statsmodels_2 = results['KernelReg("lc", bw="cv_ls"), 2 LARS features']
print(
    f"\non the same 2 features, statsmodels' cv_ls minus the learned bandwidth:\n    "
    f"{statsmodels_2['test_score'].mean() - loo_2['test_score'].mean():+.3f} R2, "
    f"its fit {statsmodels_2['fit_time'].mean() / loo_2['fit_time'].mean():.0f} times "
    "as long"
)

# %%
# Scores and fit times
# --------------------
names = list(results)
means = np.array([results[name]["test_score"].mean() for name in names])
stds = np.array([results[name]["test_score"].std() for name in names])
fit_times = np.array([results[name]["fit_time"].mean() for name in names])
colors = [
    "tab:blue"
    if name.startswith("NadarayaWatson")
    else "tab:green"
    if name.startswith("KernelReg")
    else "tab:gray"
    for name in names
]

fig, ax = plt.subplots(figsize=(9, 5.5), constrained_layout=True)
positions = np.arange(len(names))[::-1]
left = -0.25  # a worse score is drawn to the edge and labelled there
ax.barh(
    positions,
    np.maximum(means, left),
    xerr=np.where(means > left, stds, 0),
    color=colors,
    alpha=0.8,
    capsize=3,
)
for position, mean, std, fit_time in zip(positions, means, stds, fit_times):
    label = f"R² {mean:.3f}, fit {1000 * fit_time:.0f} ms"
    if mean <= left:
        label += " (bar off scale)"
    # Placed 8 points to the right of the error bar's cap, clear of it.
    ax.annotate(label, (max(mean + std, 0) if mean > left else 0, position),
                xytext=(8, 0), textcoords="offset points", va="center")
ax.set_yticks(positions, names)
ax.set_xlim(left, 1.0)
ax.axvline(0, color="k", lw=0.8)
ax.set_xlabel(
    "R² (5-fold cross-validation, mean ± standard deviation over folds)"
)
# Over the whole figure: the axes' centre is off to the right of the model names.
fig.suptitle(f"Diabetes data ({X.shape[0]} samples): scores and mean fit time per fold")
fig.legend(
    handles=[
        plt.Rectangle((0, 0), 1, 1, color=c, alpha=0.8)
        for c in ("tab:blue", "tab:gray", "tab:green")
    ],
    labels=["sklearn-nw", "scikit-learn", "statsmodels"],
    loc="outside lower center",
    ncols=3,
)
plt.show()

# %%
# What the numbers say
# --------------------
#
# On the full data (the quick run of the test suite uses 150 rows and says less):
#
# * **A peer wins at the top, narrowly.** The Gaussian process with an RBF and a white
#   noise kernel scores a hair above :class:`~sklearn_nw.NadarayaWatsonRegressorCV`, on
#   three of the five folds: the two are tied well within the spread between folds, and
#   the Gaussian process fits faster here. Its marginal likelihood tunes one length
#   scale and the noise level; the CV estimator searches bandwidths of three kinds and
#   local polynomials by leave-one-out.
# * Tuned k nearest neighbors trails the CV estimator on every fold.
# * The learned per-feature bandwidth (``bandwidth="loo"``) on all ten features trails
#   the tuned k nearest neighbors as well: ten bandwidths fitted to the leave-one-out
#   error of 354 rows do worse on new rows than the CV estimator's choice among a few
#   families of candidates.
# * statsmodels' ``KernelReg`` with its normal-reference rule of thumb trails every
#   tuned model; its local-linear fit with the same narrow windows in ten dimensions is
#   no better than predicting the mean (R² near 0, with a large spread between folds).
# * On the same two features, statsmodels' ``cv_ls`` and ``bandwidth="loo"`` fit the
#   same estimator by the same criterion and score alike (the difference printed
#   above); the descent on the torch gradient fits tens of times faster than
#   Nelder-Mead over Python loops.
#
# The fit times are those of this run, on one thread; on another machine they differ,
# and so may their order for the fastest models.
