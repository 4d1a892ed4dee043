r"""
===============================================================
On the unit sphere the Gaussian kernel is dot-product attention
===============================================================

A transformer's attention scores a query ``q`` against keys ``x_i`` by their dot
products, ``softmax_i(q . x_i / tau)`` with a temperature ``tau``. Nadaraya-Watson with
the Gaussian kernel scores them by their distances. When every query and key has unit
norm the two are the same thing, because

.. math::

    \lVert q - x \rVert^2 = \lVert q \rVert^2 + \lVert x \rVert^2 - 2\, q \cdot x
    = 2 - 2\, q \cdot x .

The Gaussian profile of :mod:`sklearn_nw.kernels` is ``k(u) = exp(-u**2 / 2)`` with
``u = ||q - x|| / h``, so the logit of key ``i`` is

.. math::

    -\frac{\lVert q - x_i \rVert^2}{2 h^2} = \frac{q \cdot x_i}{h^2} - \frac{1}{h^2},

and the constant ``-1 / h**2`` is the same for every key, so the softmax drops it:
Nadaraya-Watson attention with bandwidth ``h`` is dot-product attention with temperature
``tau = h**2``. This example checks it numerically, finds the temperature by fitting it
instead of deriving it, and shows how the bandwidth sharpens the attention as a function
of the angle between query and key.
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The identity, checked
# ---------------------
#
# Keys on the unit sphere in 3-D and a few unit-norm queries. The attention returned by
# :meth:`~sklearn_nw.NadarayaWatsonRegressor.predict` is compared with
# ``scipy.special.softmax(Q @ X.T / h**2)`` computed directly.
import matplotlib.pyplot as plt
import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import softmax

from sklearn_nw import NadarayaWatsonRegressor


def unit_rows(A):
    return A / np.linalg.norm(A, axis=1, keepdims=True)


rng = np.random.default_rng(0)
X = unit_rows(rng.normal(size=(300, 3)))  # keys
y = rng.normal(
    size=len(X)
)  # values (any will do: the attention does not see them)
Q = unit_rows(rng.normal(size=(20, 3)))  # queries

bandwidths = [0.1, 0.3, 1.0, 3.0]
for h in bandwidths:
    reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h).fit(X, y)
    y_pred, attention = reg.predict(Q, return_attention=True)
    dot_product = softmax(Q @ X.T / h**2, axis=1)
    print(
        f"h = {h:<4} tau = h**2 = {h**2:<6.4g}"
        f" max |attention - softmax(Q X^T / tau)| {np.abs(attention - dot_product).max():.1e}"
        f"\n{'':24} max |prediction - softmax(.) @ y| {np.abs(y_pred - dot_product @ y).max():.1e}"
    )

# %%
# The differences are rounding errors of float64. The identity needs equal norms: with
# keys of different lengths the distance adds ``-||x_i||**2 / (2 h**2)`` to each logit,
# which penalises long keys, while dot-product attention favors them.
X_unnormalized = X * rng.uniform(0.5, 1.5, size=(len(X), 1))
h = 0.3
reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h).fit(
    X_unnormalized, y
)
_, attention = reg.predict(Q, return_attention=True)
dot_product = softmax(Q @ X_unnormalized.T / h**2, axis=1)
print(
    f"keys of norms 0.5 to 1.5, h = {h}: max |difference| = "
    f"{np.abs(attention - dot_product).max():.2f}"
)

# %%
# The temperature, fitted
# -----------------------
#
# Instead of trusting the algebra, search for the temperature ``tau`` that makes
# ``softmax(Q X^T / tau)`` closest to the estimator's attention, for bandwidths over two
# decades, and compare it with ``h**2``.
fit_bandwidths = np.geomspace(0.1, 10, 9)
fitted_tau = []
for h in fit_bandwidths:
    reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h).fit(X, y)
    _, attention = reg.predict(Q, return_attention=True)

    def gap(log_tau, attention=attention):
        return np.abs(
            softmax(Q @ X.T / np.exp(log_tau), axis=1) - attention
        ).sum()

    result = minimize_scalar(
        gap,
        bounds=(np.log(1e-4), np.log(1e4)),
        method="bounded",
        options={"xatol": 1e-10},
    )
    fitted_tau.append(np.exp(result.x))
fitted_tau = np.array(fitted_tau)
ratio = fitted_tau / fit_bandwidths**2
print(
    f"fitted tau / h**2 over h in [{fit_bandwidths[0]:g}, {fit_bandwidths[-1]:g}]: "
    f"{ratio.min():.6f} to {ratio.max():.6f} (max |ratio - 1| = {np.abs(ratio - 1).max():.1e})"
)

# %%
# A transformer's scaled dot-product attention, ``softmax(q . k / sqrt(d))`` with
# vectors of dimension ``d``, is therefore, for vectors of one common norm, Gaussian
# Nadaraya-Watson with bandwidth ``h = d ** (1 / 4)``:
for d in (64, 128):
    print(
        f"d = {d}: temperature sqrt(d) = {np.sqrt(d):.2f}, bandwidth d**(1/4) = {d**0.25:.3f}"
    )

# %%
# Attention as a function of the angle
# ------------------------------------
#
# In 2-D the keys lie on the unit circle and a key's attention depends only on its angle
# ``theta`` to the query: ``q . x = cos(theta)``, so the weight is proportional to
# ``exp(cos(theta) / h**2)``, a von Mises density in ``theta`` with concentration
# ``1 / h**2``. Small bandwidths attend to a narrow arc; large ones spread the attention
# over the whole circle.
angles = np.sort(rng.uniform(-np.pi, np.pi, 120))
X_circle = np.column_stack([np.cos(angles), np.sin(angles)])
y_circle = np.sin(2 * angles)
query = np.array([[1.0, 0.0]])  # at angle 0
curve_bandwidths = [0.2, 0.4, 0.8, 1.6]

# The first panel on its own row, so that the text stays legible in the page's
# column.
fig, mosaic = plt.subplot_mosaic([["a", "a"], ["b", "c"]], figsize=(9, 7.6), layout="constrained")
axes = [mosaic["a"], mosaic["b"], mosaic["c"]]

reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=0.4).fit(
    X_circle, y_circle
)
_, attention = reg.predict(query, return_attention=True)
ax = axes[0]
points = ax.scatter(
    X_circle[:, 0], X_circle[:, 1], c=attention[0], cmap="viridis", s=30
)
ax.scatter(
    *query[0],
    marker="*",
    s=300,
    c="tab:red",
    edgecolor="k",
    label="query",
    zorder=3,
)
ax.set_aspect("equal")
ax.set_xlabel("$x_1$")
ax.set_ylabel("$x_2$")
ax.set_title("Keys on the circle, one query (h = 0.4)")
ax.legend(loc="lower left")
fig.colorbar(points, ax=ax, label="attention weight")

ax = axes[1]
theta = np.linspace(-np.pi, np.pi, 400)
for h, color in zip(curve_bandwidths, plt.cm.plasma(np.linspace(0, 0.8, 4))):
    reg = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h).fit(
        X_circle, y_circle
    )
    _, attention = reg.predict(query, return_attention=True)
    # The same weights, written as dot-product attention on the same keys.
    dot_product = softmax(X_circle @ query[0] / h**2)
    ax.plot(
        np.degrees(angles),
        attention[0],
        "o",
        ms=4,
        color=color,
        label=f"h = {h}  (tau = {h**2:.2f})",
    )
    ax.plot(np.degrees(angles), dot_product, "-", lw=1, color=color)
ax.set_xlabel("angle between query and key (degrees)")
ax.set_ylabel("attention weight")
ax.set_title("Estimator (dots), softmax(q . x / h$^2$) (lines)")
ax.legend()

ax = axes[2]
ax.loglog(
    fit_bandwidths, fit_bandwidths**2, "-", color="0.5", label=r"$\tau = h^2$"
)
ax.loglog(
    fit_bandwidths,
    fitted_tau,
    "o",
    color="tab:blue",
    label=r"fitted $\tau$ (closest softmax)",
)
ax.set_xlabel("Gaussian bandwidth h")
ax.set_ylabel(r"dot-product temperature $\tau$")
ax.set_title("Temperature that matches the attention")
ax.legend()
plt.show()

# %%
# The temperature fitted to the estimator's attention lies on ``tau = h**2`` over the
# whole range. Halving the bandwidth divides the temperature by four: the attention of
# a Gaussian Nadaraya-Watson estimator on normalized inputs is the attention of a
# transformer head whose queries and keys are the raw inputs, with no learned
# projections (the learned metric of :class:`~sklearn_nw.LeaveOneOutBandwidth` with
# ``form="full"`` adds one, shared by queries and keys).
