"""
==============
Classification
==============

:class:`~sklearn_nw.NadarayaWatsonClassifier` pools one-hot class labels with the same
kernel attention as the regressor: the probability of class :math:`c` at a query is the
kernel-weighted frequency of :math:`c` among the training points, and ``predict``
returns the most probable class. This example draws the decision regions and class
probabilities of a three-class problem in two dimensions for a small and a large fixed
bandwidth, and for the bandwidth that :class:`~sklearn_nw.NadarayaWatsonClassifierCV`
chooses by exact leave-one-out, and compares their accuracies on held-out data.
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The data
# --------
#
# Two interleaved half moons and a third class, a round cluster next to the tips of both
# moons; half of the points are held out for testing.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs, make_moons
from sklearn.inspection import DecisionBoundaryDisplay
from sklearn.model_selection import train_test_split

from sklearn_nw import NadarayaWatsonClassifier, NadarayaWatsonClassifierCV

X_moons, y_moons = make_moons(n_samples=300, noise=0.25, random_state=0)
X_blob, _ = make_blobs(
    n_samples=150, centers=[[2.0, 1.2]], cluster_std=0.35, random_state=0
)
X = np.vstack([X_moons, X_blob])
y = np.concatenate([y_moons, np.full(len(X_blob), 2)])
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.5, stratify=y, random_state=0
)

# %%
# Three classifiers
# -----------------
#
# A bandwidth of 0.03, much smaller than the spacing of the points in places; one of 1,
# the radius of the moons; and the candidate chosen by
# :class:`~sklearn_nw.NadarayaWatsonClassifierCV` with its default arguments, which
# searches fixed bandwidths (multiples of Scott's rule) and adaptive ones
# (:class:`~sklearn_nw.AdaptiveBandwidth`, balloon and sample-point) and keeps the one
# of least leave-one-out log-loss.
cv = NadarayaWatsonClassifierCV().fit(X_train, y_train)
print("NadarayaWatsonClassifierCV chose:")
for key, value in cv.best_params_.items():
    print(f"  {key}: {np.round(value, 3) if key == 'bandwidth' else value}")

classifiers = {
    "bandwidth = 0.03": NadarayaWatsonClassifier(bandwidth=0.03).fit(
        X_train, y_train
    ),
    "bandwidth = 1": NadarayaWatsonClassifier(bandwidth=1.0).fit(
        X_train, y_train
    ),
    "NadarayaWatsonClassifierCV": cv,
}
print(f"\n{'model':>28}  {'train accuracy':>14}  {'test accuracy':>13}")
for name, clf in classifiers.items():
    print(
        f"{name:>28}  {clf.score(X_train, y_train):14.3f}  "
        f"{clf.score(X_test, y_test):13.3f}"
    )

# %%
# Decision regions
# ----------------
#
# Each point of the plane is colored by its most probable class, the more intensely the
# higher that probability (``response_method="predict_proba"``; white where the
# classifier hesitates). Training points are drawn as circles, test points as triangles.
colors = ["tab:blue", "tab:orange", "tab:green"]


def draw_points(ax):
    for label, color in enumerate(colors):
        for points, marker, size, part in ((X_train, "o", 14, "train"),
                                           (X_test, "^", 18, "test")):
            labels = y_train if part == "train" else y_test
            ax.scatter(*points[labels == label].T, s=size, color=color, marker=marker,
                       edgecolor="black", linewidth=0.5, label=f"class {label} ({part})")


fig, axes = plt.subplots(1, 3, figsize=(9, 3.8), sharex=True, sharey=True,
                         layout="constrained")
for (name, clf), ax in zip(classifiers.items(), axes):
    DecisionBoundaryDisplay.from_estimator(
        clf, X, response_method="predict_proba", multiclass_colors=colors,
        plot_method="pcolormesh", grid_resolution=80, eps=0.5, alpha=0.5, ax=ax,
        xlabel="$x_1$")
    draw_points(ax)
    ax.set_title(f"{name}\ntest accuracy {clf.score(X_test, y_test):.3f}")
axes[0].set_ylabel("$x_2$")
handles, labels = axes[0].get_legend_handles_labels()
fig.legend(handles, labels, loc="outside lower center", ncols=3)
plt.show()

# %%
# Probabilities of one class
# --------------------------
#
# The probability of the third class alone (``class_of_interest=2``): how sharply it
# falls from 1 to 0 across the boundary is the bandwidth's doing.
fig, axes = plt.subplots(1, 3, figsize=(9, 3.4), sharex=True, sharey=True,
                         layout="constrained")
for (name, clf), ax in zip(classifiers.items(), axes):
    proba = DecisionBoundaryDisplay.from_estimator(
        clf, X, response_method="predict_proba", class_of_interest=2,
        plot_method="contourf", levels=np.linspace(0, 1, 11), cmap="Greens",
        grid_resolution=80, eps=0.5, ax=ax, xlabel="$x_1$")
    draw_points(ax)
    ax.set_title(name)
axes[0].set_ylabel("$x_2$")
fig.colorbar(proba.surface_, ax=axes, label="P(class 2)", shrink=0.9)
plt.show()

# %%
# Discussion
# ----------
#
# With the small bandwidth each query is dominated by its nearest training point: the
# training accuracy is perfect, the regions break into islands around single points, and
# the probabilities jump from 0 to 1 (a one-nearest-neighbor classifier in the limit).
# With the large bandwidth each query averages over much of a moon: the regions are
# smooth but the curved boundary between the moons is lost, and the probabilities stay
# far from 1 wherever two classes are within reach. Leave-one-out, which needs no
# held-out data, chose an adaptive (balloon) bandwidth here, the printed k and c: a
# query's bandwidth is a fraction of its distance to its k-th nearest training point, so
# it adapts to the local density of the points. It gives the highest test accuracy of
# the three (see the table). Far from all the data, a fixed Gaussian bandwidth gives the
# class of the nearest points, not the prior: the attention is normalized over the
# training points whatever their distance, and the weight of the nearest ones dominates
# more and more.
