"""
=================================
Tables with categorical columns
=================================

Real tables mix numbers with categories: an occupation, a religion rating, the number of
years married. This example fits :class:`~sklearn_nw.NadarayaWatsonRegressorCV` on such a
table three ways and compares them on the same cross-validation folds:

- **native**: the categorical columns as pandas categoricals, each with its own kernel
  and smoothing :math:`\\lambda`, searched with the continuous bandwidths by exact
  leave-one-out (:ref:`categorical`);
- **one-hot**: the same estimator after one-hot encoding the unordered columns, keeping
  the ordered ones as their ranks, and standardizing everything;
- :class:`~sklearn.ensemble.HistGradientBoostingRegressor` with
  ``categorical_features="from_dtype"``, which reads the same DataFrame.

The data are the first 1,500 rows of statsmodels' ``fair`` table (a 1974 survey of
women): the time spent in extramarital affairs against age, years married, children,
how they rate their marriage, how religious they are, their education (ordered), and
their occupation and their husband's (unordered).
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The table
# ---------
#
# Ordered columns become ordered pandas categoricals (their kernel then measures the
# distance between ranks); the occupations become unordered ones.
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import statsmodels.api as sm
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from sklearn_nw import NadarayaWatsonRegressorCV

n_rows = 1500
# sphinx_gallery_start_ignore
# The test suite runs the examples quickly: on fewer rows.
import os  # noqa: E402

if os.environ.get("SKLEARN_NW_EXAMPLES_QUICK") == "1":
    n_rows = 150
# sphinx_gallery_end_ignore
data = sm.datasets.fair.load_pandas().data.iloc[:n_rows]
X = data[["age", "yrs_married", "children"]].astype(float)
for column in ("rate_marriage", "religious", "educ"):
    values = data[column].astype(int)
    X[column] = pd.Categorical(values, categories=sorted(values.unique()), ordered=True)
for column in ("occupation", "occupation_husb"):
    X[column] = pd.Categorical(data[column].astype(int))
y = data["affairs"].to_numpy()
print(X.dtypes)

# %%
# Three models, the same folds
# ----------------------------
one_hot = make_pipeline(
    ColumnTransformer([
        ("onehot", OneHotEncoder(sparse_output=False, handle_unknown="ignore"),
         ["occupation", "occupation_husb"]),
        ("ranks", "passthrough", ["rate_marriage", "religious", "educ"]),
        ("numbers", "passthrough", ["age", "yrs_married", "children"]),
    ]),
    StandardScaler(),
    NadarayaWatsonRegressorCV(),
)
models = {
    "native categorical": NadarayaWatsonRegressorCV(),
    "one-hot + scaled": one_hot,
    "HistGradientBoosting": HistGradientBoostingRegressor(
        categorical_features="from_dtype", random_state=0),
}
folds = KFold(5, shuffle=True, random_state=0)
scores, seconds = {}, {}
for name, model in models.items():
    start = time.perf_counter()
    scores[name] = cross_val_score(model, X, y, cv=folds)
    seconds[name] = time.perf_counter() - start
    print(f"{name:22s} R^2 {scores[name].mean():.3f} +- {scores[name].std():.3f} "
          f"({seconds[name]:.1f} s for 5 folds)")

# %%
# The scores, fold by fold
# ------------------------
fig, ax = plt.subplots(figsize=(7, 4))
for i, s in enumerate(scores.values()):
    ax.scatter(np.full(len(s), i), s, color="0.6", zorder=2)
    ax.errorbar(i, s.mean(), yerr=s.std(), fmt="o", color=f"C{i}", capsize=6, zorder=3)
ax.set_xticks(range(len(scores)), list(scores))
ax.set_ylabel("test R$^2$ (5 folds)")
ax.set_title("fair: native categorical kernels against a one-hot design")
fig.tight_layout()

# %%
# What the native model chose
# ---------------------------
#
# ``bandwidth_`` holds a bandwidth for each continuous column and the smoothing
# :math:`\lambda` of each categorical one: 0 uses only rows of the query's own category,
# 1 ignores the column.
native = NadarayaWatsonRegressorCV().fit(X, y)
for column, value in zip(X.columns, native.bandwidth_):
    kind = "lambda" if native.is_categorical_[X.columns.get_loc(column)] else "h"
    print(f"{column:16s} {kind:6s} {value:.3g}")
print("degree of the local polynomial:", native.degree_)
