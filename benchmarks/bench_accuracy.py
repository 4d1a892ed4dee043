"""Accuracy benchmark: the estimators on real data against their peers, in one run.

What it measures
----------------
Three sections (``--sections``), float64 on the CPU, in this process.

1. ``accuracy``: data sets shipped with scikit-learn and statsmodels (``DATASETS``; larger
   ones subsampled to ``--max-samples``). 5-fold cross-validation (shuffled, seed 0) of
   ``make_pipeline(StandardScaler(), est)`` for: ``NadarayaWatson...(bandwidth="loo")``
   (``nw_loo``); the CV estimators with default arguments (``nw_cv``:
   ``NadarayaWatsonRegressorCV()``, which chooses among fixed, balloon and sample-point
   bandwidths and the degree of the local polynomials, and
   ``NadarayaWatsonClassifierCV()``, among the kinds of bandwidth, by exact leave-one-out);
   ``KNeighbors...`` tuned by an inner 5-fold GridSearchCV over ``KNN_NEIGHBORS`` x
   {"uniform", "distance"} (``knn``); for regression data sets with at most ``SM_MAX_N``
   samples and ``SM_MAX_D`` features statsmodels' ``KernelReg(bw="cv_ls")``, local-constant
   (``statsmodels``) and local-linear (``statsmodels_ll``); and on the one-dimensional
   regression data sets R's locfit (``locfit``: local-quadratic, nearest-neighbor bandwidth
   ``nn`` chosen among ``LOCFIT_NN`` by exact leave-one-out, ``fitted(fit, cv=TRUE)``),
   when ``Rscript`` and the locfit package are installed (Debian: ``r-cran-locfit``). Scores:
   mean R^2 (regression) or accuracy (classification) over the outer folds; fit times are
   the sum over the five outer fits (R's include starting R). Targets below; differences
   under ``TIE`` count as ties.
2. ``large``: the learned bandwidth above 4,096 samples. ``NadarayaWatsonRegressor(bandwidth=
   LeaveOneOutBandwidth(random_state=s))`` for s = 0..4 against the exact grid of
   ``NadarayaWatsonRegressorCV(bandwidth_kinds=["fixed"], degree=0)``, 5-fold R^2 on: the
   first 8,000 rows of statsmodels' randhie data (issue 11's example; its inputs repeat, so
   the descent sees its distinct ones) and the synthetic problem of bench_bandwidth with 2
   irrelevant inputs (``--n-large`` samples, 4 features: the minibatch path). Targets: the
   learned bandwidth's score within ``LARGE_MARGIN`` of the grid's or better for every seed,
   and its spread over the seeds at most ``LARGE_MARGIN``.

3. ``seeds``: section 1's comparison of the CV estimators with tuned KNN repeated at
   several seeds (``--seeds``, default 0-4: the outer folds' shuffle and the subsample of
   the larger data sets; seed 0 repeats section 1's), to see whether its target holds in
   the neighborhood of seed 0 or only there. Targets: section 1's at every seed, and on
   the mean difference over the seeds.

4. ``local``: learned bandwidths for local-linear fits. ``NadarayaWatsonRegressor(degree=1,
   bandwidth="loo")`` against statsmodels' ``KernelReg(reg_type="ll", bw="cv_ls")`` on the
   regression data sets statsmodels takes (``SM_MAX_N``, ``SM_MAX_D``): section 1's outer
   5-fold R^2 and fit times, and on the whole standardized data set the leave-one-out loss
   of the descent's own minimum (``selection="min"``) against that of statsmodels'
   bandwidth, under this package's leave-one-out fits and under statsmodels' ``cv_loo``.
   Targets: R^2 at least statsmodels' - ``PEER_MARGIN``, and a loss no higher than at
   statsmodels' bandwidth.

Targets are reported, never enforced. Warnings raised by the methods are recorded.

Usage: ``python benchmarks/bench_accuracy.py [--sections S ...] [--datasets D ...]
[--max-samples N] [--n-large N] [--seeds S ...] [--out-dir DIR] [--threads T]``; writes
bench_accuracy.json and .md.
"""

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch
from _common import (
    load_average,
    machine_info,
    machine_line,
    make_problem,
    recording,
    run_sections,
    timed,
    warning_lines,
)
from bench_bandwidth import (
    N_FOLDS,
    PROBLEM,
    KernelRegCV,
    _progress,
    _statsmodels_missing,
    _target,
)
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_validate
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_nw import (
    LeaveOneOutBandwidth,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)

SECTIONS = ("accuracy", "large", "seeds", "local")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
KNN_MARGIN = 0.03  # the learned bandwidth's margin below tuned KNN
CV_MARGIN = 0.01  # the CV estimators' margin below tuned KNN (issue 11)
CV_WINS = 11  # of the 14 default data sets
PEER_MARGIN = 0.005  # the CV estimators' margin below statsmodels' ll and locfit
TIE = 5e-4  # scores this close (equal at the 3 decimals shown) count as ties
# Issue 26's restatement on the mean over the seeds: >= tuned KNN - 0.005 on >= 80 % of the
# data sets, never more than 0.02 below, randhie within 0.01.
TABULAR_MARGIN, TABULAR_SHARE, TABULAR_FLOOR, RANDHIE_MARGIN = 0.005, 0.8, 0.02, 0.01
# The CV estimators without their adaptive families, beside the default at every seed
# (reported, not a target): what those families buy, and cost in fit time.
FIXED_KINDS = {"bandwidth_kinds": ["fixed"]}
LARGE_MARGIN = 0.005
KNN_NEIGHBORS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50)
# statsmodels' cv_ls is a Nelder-Mead search over O(n^2 d) leave-one-out sums in Python.
SM_MAX_N, SM_MAX_D = 500, 6
# locfit's nearest-neighbor fractions: each local fit uses this share of the data.
LOCFIT_NN = (0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0, 1.5)


# -- data ------------------------------------------------------------------------------------
def _sklearn_data(loader):
    def load():
        from sklearn import datasets

        return getattr(datasets, loader)(return_X_y=True)

    return load


def _statsmodels_data(name, target, features):
    """Loader of a statsmodels data set: ``features`` columns and ``target``, a column name or
    a function of the data frame."""

    def load():
        import statsmodels.datasets

        frame = getattr(statsmodels.datasets, name).load_pandas().data
        y = frame[target] if isinstance(target, str) else target(frame)
        return frame[features].to_numpy(np.float64), np.asarray(y, dtype=np.float64)

    return load


STAR98 = ["LOWINC", "PERASIAN", "PERBLACK", "PERHISP", "PERMINTE", "AVYRSEXP", "AVSALK",
          "PERSPENK", "PTRATIO", "PCTAF", "PCTCHRT", "PCTYRRND"]  # without the interactions
FAIR = ["rate_marriage", "age", "yrs_married", "children", "religious", "educ", "occupation",
        "occupation_husb"]
RANDHIE = ["lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp"]
# name: (task, what is predicted from what, loader). Statsmodels' own endog and exog are kept
# except: engel (there the regression runs the wrong way round), ccard and star98 (a GLM
# design with squares and interactions, which a kernel method does not need), grunfeld (the
# categorical firm and the year left out), anes96 (the vote, binary, instead of the 7-level
# party identification) and fair (any affair, binary, as in statsmodels' logit example).
DATASETS = {
    "diabetes": ("regression", "scikit-learn: disease progression ~ 10 baseline variables",
                 _sklearn_data("load_diabetes")),
    "engel": ("regression", "statsmodels: food expenditure ~ income",
              _statsmodels_data("engel", "foodexp", ["income"])),
    "cancer": ("regression", "statsmodels: cancer deaths ~ population",
               _statsmodels_data("cancer", "cancer", ["population"])),
    "grunfeld": ("regression", "statsmodels: investment ~ firm value, capital",
                 _statsmodels_data("grunfeld", "invest", ["value", "capital"])),
    "ccard": ("regression", "statsmodels: credit card spending ~ age, income, owns home",
              _statsmodels_data("ccard", "AVGEXP", ["AGE", "INCOME", "OWNRENT"])),
    "statecrime": ("regression", "statsmodels: murder rate ~ urban, poverty, hs_grad, single",
                   _statsmodels_data("statecrime", "murder",
                                     ["urban", "poverty", "hs_grad", "single"])),
    "star98": ("regression", "statsmodels: share above the maths median ~ 12 school variables",
               _statsmodels_data("star98", lambda f: f["NABOVE"] / (f["NABOVE"] + f["NBELOW"]),
                                 STAR98)),
    "randhie": ("regression", "statsmodels: doctor visits ~ 9 insurance and health variables",
                _statsmodels_data("randhie", "mdvis", RANDHIE)),
    "iris": ("classification", "scikit-learn: species ~ 4 measurements",
             _sklearn_data("load_iris")),
    "wine": ("classification", "scikit-learn: cultivar ~ 13 chemical analyses",
             _sklearn_data("load_wine")),
    "breast_cancer": ("classification", "scikit-learn: malignant ~ 30 cell-nucleus features",
                      _sklearn_data("load_breast_cancer")),
    "digits": ("classification", "scikit-learn: digit ~ 8x8 pixels",
               _sklearn_data("load_digits")),
    "anes96": ("classification", "statsmodels: 1996 vote ~ 8 survey answers",
               _statsmodels_data("anes96", "vote", ["logpopul", "TVnews", "selfLR", "ClinLR",
                                                    "DoleLR", "age", "educ", "income"])),
    "fair": ("classification", "statsmodels: any affair ~ 8 marriage variables",
             _statsmodels_data("fair", lambda f: f["affairs"] > 0, FAIR)),
    # Too small for a 5-fold score that means much (test folds of 4-7 points): opt-in only.
    "stackloss": ("regression", "statsmodels: stack loss ~ air flow, water temp, acid",
                  _statsmodels_data("stackloss", "STACKLOSS",
                                    ["AIRFLOW", "WATERTEMP", "ACIDCONC"])),
    "longley": ("regression", "statsmodels: employment ~ 6 macroeconomic series",
                _statsmodels_data("longley", "TOTEMP",
                                  ["GNPDEFL", "GNP", "UNEMP", "ARMED", "POP", "YEAR"])),
    "copper": ("regression", "statsmodels: world copper consumption ~ 5 series",
               _statsmodels_data("copper", "WORLDCONSUMPTION",
                                 ["COPPERPRICE", "INCOMEINDEX", "ALUMPRICE", "INVENTORYINDEX",
                                  "TIME"])),
    "spector": ("classification", "statsmodels: grade improved ~ GPA, TUCE, PSI",
                _statsmodels_data("spector", "GRADE", ["GPA", "TUCE", "PSI"])),
}
TINY = ("stackloss", "longley", "copper", "spector")
DEFAULT_DATASETS = tuple(name for name in DATASETS if name not in TINY)


# -- R's locfit ----------------------------------------------------------------------------------
_LOCFIT_FIT = """
suppressMessages(library(locfit))
d <- read.csv(commandArgs(TRUE)[1])
nn <- as.numeric(strsplit(commandArgs(TRUE)[2], ",")[[1]])
loss <- sapply(nn, function(a) tryCatch({
  f <- locfit(y ~ lp(x, nn = a, deg = 2), data = d)
  mean((d$y - fitted(f, cv = TRUE))^2)
}, error = function(e) Inf, warning = function(w) Inf))
cat(nn[which.min(loss)])
"""
_LOCFIT_PREDICT = """
suppressMessages(library(locfit))
d <- read.csv(commandArgs(TRUE)[1])
q <- read.csv(commandArgs(TRUE)[2])
f <- locfit(y ~ lp(x, nn = as.numeric(commandArgs(TRUE)[3]), deg = 2), data = d)
cat(format(predict(f, newdata = data.frame(x = q$x)), digits = 17), sep = "\\n")
"""


def _locfit_missing():
    """Why R's locfit cannot run, or None."""
    if shutil.which("Rscript") is None:
        return "Rscript not found (Debian: apt-get install r-base-core r-cran-locfit)"
    probe = subprocess.run(["Rscript", "-e", "library(locfit)"], capture_output=True, text=True)
    return None if probe.returncode == 0 else "R package locfit missing (r-cran-locfit)"


def _rscript(script, *args):
    """Run an R script with arguments; its standard output."""
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as f:
        f.write(script)
    try:
        done = subprocess.run(["Rscript", f.name, *map(str, args)], capture_output=True,
                              text=True, check=True)
    finally:
        os.unlink(f.name)
    return done.stdout


def _csv(columns):
    """The columns (name -> 1-D array) in a temporary CSV file; its path."""
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        names = list(columns)
        f.write(",".join(names) + "\n")
        for row in zip(*(columns[n] for n in names)):
            f.write(",".join(repr(float(v)) for v in row) + "\n")
    return f.name


class LocfitCV(RegressorMixin, BaseEstimator):
    """R's locfit on one feature, as a scikit-learn regressor: local-quadratic fits with a
    nearest-neighbor bandwidth (``nn``, the share of the data in each fit's window)
    chosen among ``LOCFIT_NN`` by exact leave-one-out (``fitted(fit, cv=TRUE)``)."""

    def fit(self, X, y):
        self.x_, self.y_ = np.asarray(X, dtype=np.float64)[:, 0], np.asarray(y, np.float64)
        data = _csv({"x": self.x_, "y": self.y_})
        try:
            self.nn_ = float(_rscript(_LOCFIT_FIT, data, ",".join(map(str, LOCFIT_NN))))
        finally:
            os.unlink(data)
        return self

    def predict(self, X):
        data, queries = _csv({"x": self.x_, "y": self.y_}), _csv({"x": np.asarray(X)[:, 0]})
        try:
            out = _rscript(_LOCFIT_PREDICT, data, queries, self.nn_)
        finally:
            os.unlink(data)
            os.unlink(queries)
        return np.array(out.split(), dtype=np.float64)


# -- 4. accuracy on real data -------------------------------------------------------------------
def _knn_search(task, n_train, neighbors=KNN_NEIGHBORS):
    """KNN in a scaling pipeline, tuned by an inner 5-fold grid search (``neighbors`` up to
    the smallest inner training fold)."""
    regression = task == "regression"
    pipe = make_pipeline(StandardScaler(),
                         KNeighborsRegressor() if regression else KNeighborsClassifier())
    inner_train = n_train - -(-n_train // N_FOLDS)
    step = pipe.steps[-1][0]
    grid = {f"{step}__n_neighbors": [k for k in neighbors if k <= inner_train],
            f"{step}__weights": ["uniform", "distance"]}
    inner = (KFold if regression else StratifiedKFold)(N_FOLDS, shuffle=True, random_state=0)
    return GridSearchCV(pipe, grid, cv=inner)


def _chosen(model):
    """What a fitted CV estimator chose, in a few characters."""
    p = model.best_params_
    kind = {"fixed": "fixed", "balloon": "balloon", "sample_point": "sample-point"}[p["kind"]]
    if "n_neighbors" in p:
        kind += f" {p['n_neighbors']}/{p['scale']:g}"
    return kind + (f" d{p['degree']}" if "degree" in p else "")


def _load(name, max_samples, seed):
    """A data set as benchmarked: X, y (class codes for a classifier), its full size, and
    the outer splitter; data sets above ``max_samples`` are subsampled with ``seed``, the
    outer folds shuffled with it."""
    task, _, load = DATASETS[name]
    X, y = load()
    n_total = len(y)
    if n_total > max_samples:
        keep = np.sort(np.random.default_rng(seed).choice(n_total, max_samples, replace=False))
        X, y = X[keep], y[keep]
    regression = task == "regression"
    if not regression:
        y = np.unique(y, return_inverse=True)[1]
    outer = (KFold if regression else StratifiedKFold)(N_FOLDS, shuffle=True,
                                                       random_state=seed)
    return X, y, n_total, outer


def section_accuracy(datasets=DEFAULT_DATASETS, max_samples=2000, seed=0,
                     knn_neighbors=KNN_NEIGHBORS):
    """Outer 5-fold scores of NW with a learned bandwidth, tuned KNN and statsmodels' cv_ls."""
    results = []
    sm_missing, locfit_missing = _statsmodels_missing(), _locfit_missing()
    for name in datasets:
        task, description, _ = DATASETS[name]
        _progress(f"accuracy: {name}")
        load_warnings = set()
        try:
            with recording(load_warnings):
                X, y, n_total, outer = _load(name, max_samples, seed)
        except (ImportError, OSError, ValueError) as exc:
            results.append({"dataset": name, "status": "skipped", "reason": repr(exc)})
            continue
        regression = task == "regression"
        n_train = len(y) - -(-len(y) // N_FOLDS)  # the smallest outer training fold
        nw = NadarayaWatsonRegressor if regression else NadarayaWatsonClassifier
        # The CV estimator: the regressor also chooses local-linear or -quadratic fits.
        # The CV estimators with default arguments: every kind of bandwidth (and for the
        # regressor the degree) chosen by exact leave-one-out.
        nw_cv = NadarayaWatsonRegressorCV() if regression else NadarayaWatsonClassifierCV()
        methods = {"nw_loo": make_pipeline(StandardScaler(), nw(bandwidth="loo")),
                   "nw_cv": make_pipeline(StandardScaler(), nw_cv),
                   "knn": _knn_search(task, n_train, knn_neighbors)}
        small = len(y) <= SM_MAX_N and X.shape[1] <= SM_MAX_D
        if regression and small and sm_missing is None:
            methods["statsmodels"] = make_pipeline(StandardScaler(), KernelRegCV())
            methods["statsmodels_ll"] = make_pipeline(StandardScaler(), KernelRegCV("ll"))
        if regression and X.shape[1] == 1 and locfit_missing is None:
            methods["locfit"] = make_pipeline(StandardScaler(), LocfitCV())
        scores = {}
        for method, estimator in methods.items():
            method_warnings = set()
            with recording(method_warnings):
                cv = cross_validate(estimator, X, y, cv=outer,
                                    return_estimator=method == "nw_cv")
            if method == "nw_cv":
                cv_estimators = cv["estimator"]
            scores[method] = {"scores": cv["test_score"].tolist(),
                              "mean": float(cv["test_score"].mean()),
                              "fit_time_s": float(cv["fit_time"].sum()),
                              "warnings": sorted(method_warnings)}
        row = {"dataset": name, "status": "ok", "task": task, "description": description,
               "nw_cv_chose": [_chosen(pipe[-1]) for pipe in cv_estimators],
               "score": "R^2" if regression else "accuracy", "n": len(y), "n_total": n_total,
               "d": X.shape[1], "methods": scores,
               "nw_minus_knn": scores["nw_loo"]["mean"] - scores["knn"]["mean"],
               "cv_minus_knn": scores["nw_cv"]["mean"] - scores["knn"]["mean"],
               "load_warnings": sorted(load_warnings)}
        if "statsmodels" in scores:
            row["nw_minus_statsmodels"] = scores["nw_loo"]["mean"] - scores["statsmodels"]["mean"]
        for peer in ("statsmodels_ll", "locfit"):
            if peer in scores:
                row[f"cv_minus_{peer}"] = scores["nw_cv"]["mean"] - scores[peer]["mean"]
        results.append(row)
    report = {"config": {"datasets": list(datasets), "max_samples": max_samples,
                         "folds": f"{N_FOLDS}-fold (Stratified)KFold, shuffled, seed {seed}",
                         "knn_neighbors": list(knn_neighbors),
                         "statsmodels_limits": {"max_n": SM_MAX_N, "max_d": SM_MAX_D},
                         "locfit_nn": list(LOCFIT_NN),
                         "locfit": locfit_missing or "ran on the one-dimensional regression "
                                                     "data sets"},
              "results": results}
    ok = [r for r in results if r["status"] == "ok"]
    wins = sum(r["nw_minus_knn"] >= -TIE for r in ok)
    worst = min(ok, key=lambda r: r["nw_minus_knn"], default=None)
    with_sm = [r for r in ok if "nw_minus_statsmodels" in r]
    below_sm = [f"{r['dataset']} ({r['nw_minus_statsmodels']:+.3f})" for r in with_sm
                if r["nw_minus_statsmodels"] < -TIE]
    cv_wins = sum(r["cv_minus_knn"] >= -TIE for r in ok)
    cv_worst = min(ok, key=lambda r: r["cv_minus_knn"], default=None)
    slower = [f"{r['dataset']} ({r['methods']['nw_cv']['fit_time_s']:.1f} s vs "
              f"{r['methods']['knn']['fit_time_s']:.1f} s)" for r in ok
              if r["methods"]["nw_cv"]["fit_time_s"] > r["methods"]["knn"]["fit_time_s"]]
    report["targets"] = [
        _target("accuracy", f"NW CV (default arguments) >= KNN on at least {CV_WINS} of 14 "
                f"data sets, never below by more than {CV_MARGIN:g} (issue 11)",
                cv_wins >= min(CV_WINS, len(ok)) and cv_worst["cv_minus_knn"] >= -CV_MARGIN
                if ok else None,
                f"{cv_wins} of {len(ok)}, worst {cv_worst['dataset']} "
                f"({cv_worst['cv_minus_knn']:+.3f})" if ok else "none"),
        _target("accuracy", "NW CV fit time <= tuned KNN's on every data set (issue 11)",
                not slower if ok else None,
                "slower on: " + ", ".join(slower) if slower else f"{len(ok)} data sets")]
    for peer, label in (("statsmodels_ll", "statsmodels KernelReg(reg_type='ll', cv_ls)"),
                        ("locfit", "R locfit (local-quadratic, nn by leave-one-out)")):
        rows = [r for r in ok if f"cv_minus_{peer}" in r]
        below = [f"{r['dataset']} ({r[f'cv_minus_{peer}']:+.3f})" for r in rows
                 if r[f"cv_minus_{peer}"] < -PEER_MARGIN]
        report["targets"].append(_target(
            "accuracy", f"NW CV >= {label} to within {PEER_MARGIN:g} (issue 11)",
            not below if rows else None,
            ("below on: " + ", ".join(below) if below else f"{len(rows)} data sets")
            if rows else "ran on none"))
    report["targets"] += [
        _target("accuracy", "NW loo >= KNN on most data sets", 2 * wins > len(ok) if ok else None,
                f"{wins} of {len(ok)}, ties within {TIE:g} included"),
        _target("accuracy", f"NW loo never below KNN by more than {KNN_MARGIN:g}",
                worst["nw_minus_knn"] >= -KNN_MARGIN if worst else None,
                f"worst {worst['dataset']} ({worst['nw_minus_knn']:+.3f})" if worst else "none"),
        _target("accuracy", f"NW loo never below statsmodels cv_ls by more than {TIE:g}",
                not below_sm if with_sm else None,
                ("below on: " + ", ".join(below_sm) if below_sm else
                 f"{len(with_sm)} data sets") if with_sm else "statsmodels ran on none")]
    return report


def markdown_accuracy(report):
    c = report["config"]
    lines = [(f"### 1. Accuracy on real data ({c['folds']}; mean R^2 or accuracy over the "
              "folds; inputs standardized)"), "",
             ("| data set | task (score) | n × d | NW CV | KNN tuned | CV − KNN | NW loo "
              "| loo − KNN | statsmodels lc | statsmodels ll | locfit | NW CV chose (per fold) |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"| {r['dataset']} | {r['status']}: {r['reason']} "
                         "| | | | | | | | | | |")
            continue
        m = r["methods"]
        size = f"{r['n']:,}" + (f" of {r['n_total']:,}" if r["n"] < r["n_total"] else "")
        peers = " | ".join(f"{m[k]['mean']:.3f}" if k in m else "–"
                           for k in ("statsmodels", "statsmodels_ll", "locfit"))
        lines.append(f"| {r['dataset']} | {r['task']} ({r['score']}) | {size} × {r['d']} "
                     f"| {m['nw_cv']['mean']:.3f} | {m['knn']['mean']:.3f} "
                     f"| {r['cv_minus_knn']:+.3f} | {m['nw_loo']['mean']:.3f} "
                     f"| {r['nw_minus_knn']:+.3f} | {peers} | {', '.join(r['nw_cv_chose'])} |")
    lines += ["", "Fit time, seconds, summed over the five outer folds:", "",
              "| data set | NW CV | KNN tuned | NW loo | statsmodels lc | statsmodels ll "
              "| locfit |", "|---|---|---|---|---|---|---|"]
    ok = [r for r in report["results"] if r["status"] == "ok"]
    for r in ok:
        m = r["methods"]
        times = " | ".join(f"{m[k]['fit_time_s']:.1f}" if k in m else "–"
                           for k in ("nw_cv", "knn", "nw_loo", "statsmodels",
                                     "statsmodels_ll", "locfit"))
        lines.append(f"| {r['dataset']} | {times} |")
    lines += ["", "Data sets: " + "; ".join(f"{r['dataset']}: {r['description']}" for r in ok)
              + ".", "", ("NW CV chose: the kind of bandwidth (fixed, balloon k/c, "
                          "sample-point k/c) and for the regressor the degree (d0, d1, d2).")]
    return lines + warning_lines({f"{r['dataset']} {method}": m["warnings"]
                                   for r in ok for method, m in r["methods"].items()})


# -- 3. the same comparison at other seeds -----------------------------------------------------
def section_seeds(datasets=DEFAULT_DATASETS, max_samples=2000, seeds=(0, 1, 2, 3, 4),
                  section_one=None, knn_neighbors=KNN_NEIGHBORS):
    """Section 1's comparison of the CV estimators with tuned KNN at several seeds (the
    outer folds' shuffle and the subsample of the larger data sets; seed 0 is section 1's):
    does the target hold in the neighborhood of seed 0, or only there? Also the mean
    difference over the seeds. ``section_one``: section 1's report when it ran in the same
    call, whose seed-0 scores and fit times are taken rather than computed again."""
    results = []
    known = {r["dataset"]: r for r in (section_one or {}).get("results", [])
             if r["status"] == "ok" and max_samples == section_one["config"]["max_samples"]}
    for seed in seeds:
        for name in datasets:
            task = DATASETS[name][0]
            _progress(f"seeds: {seed} {name}")
            try:
                with recording(set()):
                    X, y, _, outer = _load(name, max_samples, seed)
            except (ImportError, OSError, ValueError) as exc:
                results.append({"seed": seed, "dataset": name, "status": "skipped",
                                "reason": repr(exc)})
                continue
            regression = task == "regression"
            n_train = len(y) - -(-len(y) // N_FOLDS)
            nw = NadarayaWatsonRegressorCV if regression else NadarayaWatsonClassifierCV
            row = {"seed": seed, "dataset": name, "status": "ok"}
            methods = {"nw_cv": make_pipeline(StandardScaler(), nw()),
                       "knn": _knn_search(task, n_train, knn_neighbors),
                       "nw_cv_fixed": make_pipeline(StandardScaler(), nw(**FIXED_KINDS))}
            if seed == 0 and name in known:  # section 1's run of the default and the KNN
                for method in ("nw_cv", "knn"):
                    row[method] = known[name]["methods"][method]["mean"]
                    row[f"{method}_fit_time_s"] = known[name]["methods"][method]["fit_time_s"]
                    del methods[method]
            for method, estimator in methods.items():
                with recording(set()):
                    cv = cross_validate(estimator, X, y, cv=outer)
                row[method] = float(cv["test_score"].mean())
                row[f"{method}_fit_time_s"] = float(cv["fit_time"].sum())
            row["cv_minus_knn"] = row["nw_cv"] - row["knn"]
            row["fixed_minus_knn"] = row["nw_cv_fixed"] - row["knn"]
            results.append(row)
    ok = [r for r in results if r["status"] == "ok"]
    per_seed = {}
    for seed in seeds:
        rows = [r for r in ok if r["seed"] == seed]
        if rows:
            worst = min(rows, key=lambda r: r["cv_minus_knn"])
            per_seed[seed] = {"wins": sum(r["cv_minus_knn"] >= -TIE for r in rows),
                              "n": len(rows), "worst": worst["dataset"],
                              "worst_diff": worst["cv_minus_knn"],
                              "slower": [r["dataset"] for r in rows
                                         if r["nw_cv_fit_time_s"] > r["knn_fit_time_s"]]}
    mean, fixed = {}, {}
    for name in datasets:
        rows = [r for r in ok if r["dataset"] == name]
        if len(rows) == len(seeds):
            mean[name] = float(np.mean([r["cv_minus_knn"] for r in rows]))
            fixed[name] = {key: float(np.mean([r[field] for r in rows])) for key, field in (
                ("fixed_minus_knn", "fixed_minus_knn"),
                ("fit_time_s", "nw_cv_fit_time_s"),
                ("fixed_fit_time_s", "nw_cv_fixed_fit_time_s"))}
    report = {"config": {"seeds": list(seeds), "datasets": list(datasets),
                         "max_samples": max_samples, "fixed_kinds": FIXED_KINDS},
              "results": results, "per_seed": per_seed, "mean_cv_minus_knn": mean,
              "fixed_kinds": fixed}
    held = [s for s, p in per_seed.items()
            if p["wins"] >= min(CV_WINS, p["n"]) and p["worst_diff"] >= -CV_MARGIN]
    mean_wins = sum(d >= -TIE for d in mean.values())
    mean_worst = min(mean, key=mean.get, default=None)
    report["targets"] = [
        _target("seeds", f"section 1's target (>= KNN on {CV_WINS} of 14, never below by "
                f"more than {CV_MARGIN:g}) at every seed", len(held) == len(per_seed)
                if per_seed else None,
                "; ".join(f"seed {s}: {p['wins']} of {p['n']}, worst {p['worst']} "
                          f"({p['worst_diff']:+.3f})" for s, p in per_seed.items())),
        _target("seeds", "the same target on the mean difference over the seeds",
                mean_wins >= min(CV_WINS, len(mean)) and mean[mean_worst] >= -CV_MARGIN
                if mean else None,
                f"{mean_wins} of {len(mean)}, worst {mean_worst} ({mean[mean_worst]:+.3f})"
                if mean else "none"),
        _tabular_target(mean)]
    return report


def _tabular_target(mean):
    """Issue 26's accuracy target on the mean differences over the seeds ``mean``
    (data set -> CV - KNN)."""
    if not mean:
        return _target("seeds", "issue 26's target on the mean over the seeds", None, "none")
    close = [name for name, d in mean.items() if d >= -TABULAR_MARGIN]
    worst = min(mean, key=mean.get)
    met = (len(close) >= TABULAR_SHARE * len(mean) and mean[worst] >= -TABULAR_FLOOR
           and mean.get("randhie", 0.0) >= -RANDHIE_MARGIN)
    detail = (f"{len(close)} of {len(mean)} at or above KNN - {TABULAR_MARGIN:g}, worst "
              f"{worst} ({mean[worst]:+.4f})"
              + (f", randhie {mean['randhie']:+.4f}" if "randhie" in mean else ""))
    return _target("seeds", (f"CV estimators >= tuned KNN - {TABULAR_MARGIN:g} on >= "
                             f"{TABULAR_SHARE:.0%} of the data sets, never more than "
                             f"{TABULAR_FLOOR:g} below, randhie within {RANDHIE_MARGIN:g} "
                             "(issue 26, mean over the seeds)"), met, detail)


def markdown_seeds(report):
    seeds = report["config"]["seeds"]
    ok = [r for r in report["results"] if r["status"] == "ok"]
    by = {(r["dataset"], r["seed"]): r for r in ok}
    mean = report["mean_cv_minus_knn"]
    lines = [("### 3. The CV estimators against tuned KNN at several seeds (the outer "
              "folds' shuffle and the subsample of the larger sets; seed 0 is section 1's; "
              "CV − KNN)"), "",
             "| data set | " + " | ".join(f"seed {s}" for s in seeds) + " | mean |",
             "|---|" + "---|" * (len(seeds) + 1)]
    for name in report["config"]["datasets"]:
        cells = [f"{by[name, s]['cv_minus_knn']:+.3f}" if (name, s) in by else "–"
                 for s in seeds]
        cells.append(f"{mean[name]:+.3f}" if name in mean else "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    per_seed = report["per_seed"]
    mean_wins = sum(d >= -TIE for d in mean.values())
    lines.append("| **at or above KNN** | " + " | ".join(
        f"{per_seed[s]['wins']} of {per_seed[s]['n']}" if s in per_seed else "–"
        for s in seeds) + f" | {mean_wins} of {len(mean)} |")
    lines.append("| NW CV fit slower than KNN's on | " + " | ".join(
        (", ".join(per_seed[s]["slower"]) or "none") if s in per_seed else "–"
        for s in seeds) + " | |")
    fixed = report.get("fixed_kinds", {})
    if fixed:
        params = ", ".join(f"{k}={v!r}" for k, v in report["config"]["fixed_kinds"].items())
        lines += ["", (f"Without the adaptive families (`{params}`; local polynomials kept), "
                       "beside the default, at the same seeds and folds (reported, not a "
                       "target): the mean over the seeds of CV − KNN, and of the five "
                       "folds' fit seconds."), "",
                  "| data set | default − KNN | fixed kinds − KNN | default fit s | "
                  "fixed kinds fit s |", "|---|---|---|---|---|"]
        for name, f in fixed.items():
            lines.append(f"| {name} | {mean[name]:+.4f} | {f['fixed_minus_knn']:+.4f} | "
                         f"{f['fit_time_s']:.2f} | {f['fixed_fit_time_s']:.2f} |")
        lines.append(f"| **mean** | {np.mean(list(mean.values())):+.4f} | "
                     f"{np.mean([f['fixed_minus_knn'] for f in fixed.values()]):+.4f} | "
                     f"{np.mean([f['fit_time_s'] for f in fixed.values()]):.2f} | "
                     f"{np.mean([f['fixed_fit_time_s'] for f in fixed.values()]):.2f} |")
    return lines


# -- 2. the learned bandwidth above 4,096 samples ----------------------------------------------
def section_large(n_synthetic=20_000, randhie_rows=8000, seeds=range(5), seed=0):
    """5-fold R^2 of the learned bandwidth for several seeds against the exact grid, on the
    first rows of randhie and on a synthetic problem with irrelevant inputs."""
    problems = {}
    try:
        X, y = DATASETS["randhie"][2]()
        problems[f"randhie, first {randhie_rows:,} rows"] = (X[:randhie_rows], y[:randhie_rows])
    except (ImportError, OSError, ValueError) as exc:
        problems[f"randhie, first {randhie_rows:,} rows"] = exc
    problems[f"synthetic, {n_synthetic:,} × 4 (2 irrelevant)"] = make_problem(
        n_synthetic, 0, 4, seed=seed, **PROBLEM)[:2]
    results, caught = [], set()
    outer = KFold(N_FOLDS, shuffle=True, random_state=seed)
    for name, data in problems.items():
        if isinstance(data, Exception):
            results.append({"problem": name, "status": "skipped", "reason": repr(data)})
            continue
        X, y = data
        _progress(f"large: {name}")
        n_distinct = len(np.unique(X, axis=0))

        def score(estimator, X=X, y=y):
            with recording(caught):
                cv = timed(lambda: cross_validate(make_pipeline(StandardScaler(), estimator),
                                                  X, y, cv=outer))
            return float(cv.result["test_score"].mean()), cv.best

        grid, grid_s = score(NadarayaWatsonRegressorCV(bandwidth_kinds=["fixed"], degree=0))
        learned = [score(NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(random_state=s)))
                   for s in seeds]
        scores = [s for s, _ in learned]
        results.append({"problem": name, "status": "ok", "n": len(y), "d": X.shape[1],
                        "n_distinct": n_distinct, "grid_score": grid, "grid_time_s": grid_s,
                        "seeds": list(seeds), "learned_scores": scores,
                        "learned_times_s": [t for _, t in learned],
                        "worst_minus_grid": min(scores) - grid,
                        "spread": max(scores) - min(scores)})
    ok = [r for r in results if r["status"] == "ok"]
    report = {"config": {"folds": f"{N_FOLDS}-fold KFold, shuffled, seed {seed}",
                         "grid": "NadarayaWatsonRegressorCV(bandwidth_kinds=['fixed'], degree=0)",
                         "learned": "NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth("
                                    "random_state=s))"},
              "results": results, "warnings": sorted(caught)}
    report["targets"] = [
        _target("large", f"learned bandwidth >= exact grid - {LARGE_MARGIN:g} for every seed",
                all(r["worst_minus_grid"] >= -LARGE_MARGIN for r in ok) if ok else None,
                "; ".join(f"{r['problem']}: worst {r['worst_minus_grid']:+.4f}" for r in ok)),
        _target("large", f"spread over the seeds <= {LARGE_MARGIN:g}",
                all(r["spread"] <= LARGE_MARGIN for r in ok) if ok else None,
                "; ".join(f"{r['problem']}: {r['spread']:.4f}" for r in ok))]
    return report


def markdown_large(report):
    c = report["config"]
    lines = [(f"### 2. The learned bandwidth above 4,096 samples ({c['folds']}; R^2, inputs "
              "standardized)"), "",
             "| problem | n × d | distinct inputs | exact grid | learned, seeds 0-4 | worst − grid "
             "| spread | fit s grid / learned (mean) |", "|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"| {r['problem']} | {r['status']}: {r['reason']} | | | | | | |")
            continue
        lines.append(f"| {r['problem']} | {r['n']:,} × {r['d']} | {r['n_distinct']:,} "
                     f"| {r['grid_score']:.4f} "
                     f"| {' '.join(f'{s:.4f}' for s in r['learned_scores'])} "
                     f"| {r['worst_minus_grid']:+.4f} | {r['spread']:.4f} "
                     f"| {r['grid_time_s']:.1f} / {np.mean(r['learned_times_s']):.1f} |")
    return lines + ["", ("The descent runs full-batch L-BFGS up to 4,096 leave-one-out keys "
                         "(the distinct rows under the default leave_out='row': each training "
                         "fold of randhie's first 8,000 rows holds about 3,430 of them at about "
                         "1,090 inputs, which its sums run over), and minibatch Adam above "
                         "(the synthetic problem).")] + warning_lines(
        {"large": report["warnings"]})


# -- 4. learned bandwidths for local-linear fits ----------------------------------------------
def section_local(datasets=DEFAULT_DATASETS, max_samples=2000, seed=0):
    """The local-linear regressor with a learned bandwidth against statsmodels'
    ``KernelReg(reg_type="ll", bw="cv_ls")`` on the regression data sets statsmodels takes:
    section 1's outer 5-fold R^2 and fit times, and on the whole standardized data set the
    leave-one-out loss at the descent's minimum and at statsmodels' bandwidth, under this
    package's leave-one-out fits and under statsmodels' ``cv_loo``."""
    results = []
    missing = _statsmodels_missing()
    for name in datasets:
        task = DATASETS[name][0]
        if task != "regression":
            continue
        try:
            with recording(set()):
                X, y, _, outer = _load(name, max_samples, seed)
        except (ImportError, OSError, ValueError) as exc:
            results.append({"dataset": name, "status": "skipped", "reason": repr(exc)})
            continue
        if missing is not None or len(y) > SM_MAX_N or X.shape[1] > SM_MAX_D:
            continue
        _progress(f"local: {name}")
        row = {"dataset": name, "status": "ok", "n": len(y), "d": X.shape[1]}
        methods = {"nw_loo_ll": NadarayaWatsonRegressor(degree=1, bandwidth="loo"),
                   "statsmodels_ll": KernelRegCV("ll")}
        caught = set()
        for method, estimator in methods.items():
            with recording(caught):
                cv = cross_validate(make_pipeline(StandardScaler(), estimator), X, y,
                                    cv=outer)
            row[method] = float(cv["test_score"].mean())
            row[f"{method}_fit_time_s"] = float(cv["fit_time"].sum())
        # The descent's own minimum (selection="min": not replaced by the one-parameter
        # reference) against statsmodels', on the whole standardized data set.
        Z = StandardScaler().fit_transform(X)
        with recording(caught):
            ours = NadarayaWatsonRegressor(degree=1, bandwidth=LeaveOneOutBandwidth(
                selection="min")).fit(Z, y).bandwidth_
            theirs = KernelRegCV("ll").fit(Z, y)
            for who, h in (("nw", ours), ("statsmodels", theirs.bandwidth_)):
                row[f"objective_{who}"] = -NadarayaWatsonRegressorCV(
                    [h], bandwidth_kinds=["fixed"], degree=1, bounded=False).fit(
                    Z, y).best_score_
                row[f"statsmodels_objective_{who}"] = float(np.squeeze(
                    theirs.model_.cv_loo(h, theirs.model_._est_loc_linear)))
        row["bandwidth_nw"] = ours.tolist()
        row["bandwidth_statsmodels"] = theirs.bandwidth_.tolist()
        row["warnings"] = sorted(caught)
        results.append(row)
    ok = [r for r in results if r["status"] == "ok"]
    report = {"config": {"folds": f"{N_FOLDS}-fold KFold, shuffled, seed {seed} (section 1's)",
                         "nw": "NadarayaWatsonRegressor(degree=1, bandwidth='loo')",
                         "statsmodels": "KernelReg(reg_type='ll', bw='cv_ls')"},
              "results": results}
    report["targets"] = [
        _target("local", f"NW loo (degree 1) >= statsmodels ll cv_ls - {PEER_MARGIN:g}",
                all(r["nw_loo_ll"] >= r["statsmodels_ll"] - PEER_MARGIN for r in ok)
                if ok else None,
                "; ".join(f"{r['dataset']} {r['nw_loo_ll'] - r['statsmodels_ll']:+.3f}"
                          for r in ok)),
        _target("local", "the descent's leave-one-out loss <= the same loss at statsmodels' "
                "bandwidth (+ 1e-6 relative)",
                all(r["objective_nw"] <= r["objective_statsmodels"] * (1 + 1e-6) for r in ok)
                if ok else None,
                "; ".join(f"{r['dataset']} {r['objective_nw'] / r['objective_statsmodels']:.6f}"
                          for r in ok))]
    return report


def markdown_local(report):
    c = report["config"]
    lines = [(f"### 4. Learned bandwidths for local-linear fits ({c['folds']}; R^2, inputs "
              f"standardized): `{c['nw']}` against statsmodels' `{c['statsmodels']}`"), "",
             "| data set | n × d | NW ll loo | statsmodels ll | difference | loss ratio, ours "
             "| loss ratio, statsmodels' | fit s NW / statsmodels |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"| {r['dataset']} | {r['status']}: {r['reason']} |" + " |" * 6)
            continue
        ours = r["objective_nw"] / r["objective_statsmodels"]
        theirs = r["statsmodels_objective_nw"] / r["statsmodels_objective_statsmodels"]
        lines.append(f"| {r['dataset']} | {r['n']} × {r['d']} | {r['nw_loo_ll']:.3f} "
                     f"| {r['statsmodels_ll']:.3f} "
                     f"| {r['nw_loo_ll'] - r['statsmodels_ll']:+.3f} "
                     f"| {ours:.6f} | {theirs:.6f} "
                     f"| {r['nw_loo_ll_fit_time_s']:.2f} / {r['statsmodels_ll_fit_time_s']:.2f} |")
    return lines + ["", ("Loss ratios: the mean squared leave-one-out error on the whole "
                         "standardized data set at the descent's own minimum "
                         "(`LeaveOneOutBandwidth(selection='min')`) over the same at "
                         "statsmodels' cv_ls bandwidth; below 1, ours is lower. *Ours*: this "
                         "package's leave-one-out local fits (the CV regressor's exact grid at "
                         "each bandwidth), *statsmodels'*: its `cv_loo`. They differ only where "
                         "a left-out point's local design is singular: ours then keeps the "
                         "Nadaraya-Watson value, statsmodels solves.")] + warning_lines(
        {r["dataset"]: r["warnings"] for r in report["results"] if r.get("warnings")})


# -- the whole run ---------------------------------------------------------------------------
def run_benchmark(sections=SECTIONS, datasets=DEFAULT_DATASETS, max_samples=2000,
                  n_large=20_000, randhie_rows=8000, out_dir=RESULTS_DIR,
                  seeds=(0, 1, 2, 3, 4), knn_neighbors=KNN_NEIGHBORS):
    """Run the chosen sections, print each table as it is done, write the json and markdown;
    return the report. ``knn_neighbors``: the tuned KNN's grid of ``n_neighbors`` (the
    smoke test's tiny run takes a shorter one)."""
    sections = [s for s in SECTIONS if s in sections]
    report = {"machine": machine_info(),
              "config": {"sections": sections, "dtype": "float64", "device": "cpu"},
              "load_average": {"start": load_average()}, "sections": {}}
    chunks = [machine_line(report["machine"]) + "\n",
              "Targets are reported, never enforced.\n"]
    print("".join(chunks), end="", flush=True)
    runs = {"accuracy": (lambda: section_accuracy(datasets, max_samples,
                                                  knn_neighbors=knn_neighbors),
                         markdown_accuracy),
            "large": (lambda: section_large(n_large, randhie_rows), markdown_large),
            "seeds": (lambda: section_seeds(datasets, max_samples, seeds,
                                            report["sections"].get("accuracy"),
                                            knn_neighbors),
                      markdown_seeds),
            "local": (lambda: section_local(datasets, max_samples), markdown_local)}
    return run_sections("bench_accuracy", report, chunks,
                        {name: runs[name] for name in sections}, out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help="1 accuracy, 2 large, 3 seeds, 4 local (default: all)")
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS),
                        default=list(DEFAULT_DATASETS),
                        help=f"section 1 (default: all but the tiny {', '.join(TINY)})")
    parser.add_argument("--max-samples", type=int, default=2000,
                        help="section 1: larger data sets are subsampled to this")
    parser.add_argument("--n-large", type=int, default=20_000,
                        help="section 2: samples of the synthetic problem")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4],
                        help="section 3: the seeds")
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's own choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    run_benchmark(args.sections, args.datasets, args.max_samples, n_large=args.n_large,
                  out_dir=args.out_dir, seeds=args.seeds)


if __name__ == "__main__":
    main()
