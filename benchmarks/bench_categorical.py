"""Categorical and ordered features, measured: the learned mixed bandwidth against
statsmodels' ``KernelReg(bw="cv_ls")``, and native categorical kernels against the one-hot
design on tables with categorical columns.

What it measures
----------------
1. ``speed``: a table of ``n`` rows (``--sizes``) with 2 continuous, 2 unordered (3 and 4
   categories) and 1 ordered (5 ranks) feature, ``y = sin(2 x1) + x2 + 0.5 u1 - 0.3 [u2 = 2]
   + 0.2 o1 + 0.3 noise``. The seconds of ``NadarayaWatsonRegressor(bandwidth="loo")``'s
   fit (each categorical kernel; the first fit in this process apart, then the median of
   3) against ``KernelReg(var_type="ccuuo", reg_type="lc", bw="cv_ls")`` (one fit;
   Aitchison-Aitken and Wang-van Ryzin, as ``categorical_kernel="aitchison_aitken"``),
   and each one's leave-one-out loss at its bandwidth (statsmodels' ``cv_loo``: the same
   objective). Target (issue 26): ours >= 100x faster at n=500.
2. ``tables``: statsmodels' bundled tables with categorical or ordered columns, outer
   shuffled ``KFold(5)`` at each seed of ``--seeds``, the mean test score (R^2, or
   accuracy) over the folds and seeds, and the seconds of one fold's fit:

   - ``grunfeld`` (220 rows): log investment from log value, log capital, year and the
     firm (unordered, 10);
   - ``fair`` (the first ``--n-fair`` of 6,366 rows): affairs from age, years married,
     children, rate_marriage, religious and educ (ordered), occupation and the
     husband's (unordered);
   - ``anes96`` (944 rows, classification): the 1996 vote from log population, TV news
     days, age, and the ordered self/Clinton/Dole placements, party identification,
     education and income;
   - ``modechoice`` (840 rows, classification): whether the mode was chosen, from the
     mode (unordered, 4), the terminal time, the in-vehicle cost and time, the
     generalized cost, household income and party size.

   Methods: ``NadarayaWatson*CV()`` on the table with its categorical columns as pandas
   categoricals (native; each ``categorical_kernel``); the same estimator on the one-hot
   design (unordered one-hot, ordered as their ranks, all standardized); a
   ``KNeighbors*`` tuned by ``GridSearchCV`` (k and weights) on that design; and
   ``HistGradientBoosting*(categorical_features="from_dtype")``. Targets (issue 26):
   native >= one-hot on the mean over the tables; the CV estimator >= the tuned KNN -
   0.005 on >= 80% of the tables, never more than 0.02 below.

3. ``fair_sizes``: around the table's fair, one fold's fit on fair's first n rows at each
   n of ``--fair-sizes`` (default 750, 3,000, 4,000, 5,000 and all 6,366): the native CV estimator
   against the tuned KNN (the fit-time target in its neighborhood).

Usage: ``python benchmarks/bench_categorical.py [--sections S ...] [--sizes N ...]
[--seeds S ...] [--n-fair N] [--tables T ...] [--fair-sizes N ...] [--out-dir DIR]``;
writes bench_categorical.json and .md.
"""

import argparse
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from _common import (
    load_average,
    machine_info,
    machine_line,
    recording,
    run_sections,
    timed,
)
from bench_accuracy import KNN_NEIGHBORS
from sklearn.base import clone, is_classifier
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from sklearn_nw import (
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)

SECTIONS = ("speed", "tables", "fair_sizes")
# fair's first n rows around the table's 1,500 (6,366: all of them); 4,000 and 5,000 put
# 3,200 and 4,000 rows in the fold's training part, below the 4,096 up to which the grid's
# center is learned on every row and the adaptive families are searched.
FAIR_SIZES = (750, 3000, 4000, 5000, 6366)
RESULTS_DIR = Path(__file__).resolve().parent / "results"
KINDS = ("li_racine", "aitchison_aitken")
TABLES = ("grunfeld", "fair", "anes96", "modechoice")


# -- 1. the learned bandwidth against statsmodels' cv_ls -----------------------------------


def _mixed(n, seed=0):
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.uniform(size=n)
    u1, u2, o1 = rng.integers(0, 3, n), rng.integers(0, 4, n), rng.integers(0, 5, n)
    y = (np.sin(2 * x1) + x2 + 0.5 * u1 - 0.3 * (u2 == 2) + 0.2 * o1
         + rng.normal(scale=0.3, size=n))
    X = pd.DataFrame({"x1": x1, "x2": x2, "u1": pd.Categorical(u1), "u2": pd.Categorical(u2),
                      "o1": pd.Categorical(o1, categories=range(5), ordered=True)})
    return X, np.column_stack([x1, x2, u1, u2, o1]).astype(float), y


def section_speed(args):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    rows = []
    for n in args.sizes:
        X, Xn, y = _mixed(n)
        row = {"n": n}
        for kind in KINDS:
            fit = partial(NadarayaWatsonRegressor(bandwidth="loo",
                                                  categorical_kernel=kind).fit, X, y)
            timing = timed(fit, 3, first_call=True)
            row[kind] = {"first_s": timing.first, "median_s": timing.median,
                         "loss": float(timing.result.loss_curve_[-1]),
                         "bandwidth": timing.result.bandwidth_.tolist()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # statsmodels' RNG notice
            timing = timed(partial(KernelReg, y, Xn, var_type="ccuuo", reg_type="lc",
                                   bw="cv_ls"))
            model = timing.result
            row["statsmodels"] = {"seconds": timing.best,
                                  "loss": float(np.ravel(model.cv_loo(
                                      model.bw, model._est_loc_constant))[0]),
                                  "bandwidth": np.asarray(model.bw).tolist()}
        row["speedup"] = row["statsmodels"]["seconds"] / row["aitchison_aitken"]["median_s"]
        rows.append(row)
    at_500 = [r for r in rows if r["n"] == 500]
    targets = [{"name": "learned mixed bandwidth >= 100x faster than KernelReg(bw='cv_ls') "
                        "at n=500 (ccuuo)",
                "value": at_500[0]["speedup"] if at_500 else None, "goal": 100.0,
                "met": bool(at_500[0]["speedup"] >= 100) if at_500 else None,
                "detail": (f"{at_500[0]['speedup']:.0f}x" if at_500 else "n=500 not run")}]
    return {"config": {"sizes": list(args.sizes)}, "results": rows, "targets": targets}


def _speed_markdown(r):
    lines = ["| n | ours (li_racine) s | ours (aitchison_aitken) s | first fit s | "
             "KernelReg cv_ls s | speed-up | loss ours (AA) | loss statsmodels |",
             "|---|---|---|---|---|---|---|---|"]
    for row in r["results"]:
        a, s = row["aitchison_aitken"], row["statsmodels"]
        lines.append(f"| {row['n']} | {row['li_racine']['median_s']:.3f} | "
                     f"{a['median_s']:.3f} | {a['first_s']:.3f} | {s['seconds']:.1f} | "
                     f"{row['speedup']:.0f}x | {a['loss']:.9f} | {s['loss']:.9f} |")
    return lines


# -- 2. tables with categorical columns -----------------------------------------------------


def _grunfeld():
    import statsmodels.api as sm

    df = sm.datasets.grunfeld.load_pandas().data
    X = pd.DataFrame({"log_value": np.log(df["value"]), "log_capital": np.log(df["capital"]),
                      "year": df["year"].astype(float),
                      "firm": pd.Categorical(df["firm"].astype(str))})
    return X, np.log(df["invest"]).to_numpy()


def _fair(n):
    import statsmodels.api as sm

    df = sm.datasets.fair.load_pandas().data.iloc[:n]
    X = pd.DataFrame({c: df[c].astype(float) for c in ("age", "yrs_married", "children")})
    for c in ("rate_marriage", "religious", "educ"):
        X[c] = pd.Categorical(df[c].astype(int), categories=sorted(df[c].astype(int).unique()),
                              ordered=True)
    for c in ("occupation", "occupation_husb"):
        X[c] = pd.Categorical(df[c].astype(int))
    return X, df["affairs"].to_numpy()


def _anes96():
    import statsmodels.api as sm

    df = sm.datasets.anes96.load_pandas().data
    X = pd.DataFrame({c: df[c].astype(float) for c in ("logpopul", "TVnews", "age")})
    for c in ("selfLR", "ClinLR", "DoleLR", "PID", "educ", "income"):
        values = df[c].astype(int)
        X[c] = pd.Categorical(values, categories=sorted(values.unique()), ordered=True)
    return X, df["vote"].astype(int).to_numpy()


def _modechoice():
    import statsmodels.api as sm

    df = sm.datasets.modechoice.load_pandas().data
    X = pd.DataFrame({c: df[c].astype(float)
                      for c in ("ttme", "invc", "invt", "gc", "hinc", "psize")})
    X["mode"] = pd.Categorical(df["mode"].astype(int))
    return X, df["choice"].astype(int).to_numpy()


def _one_hot_design(X):
    """Unordered categoricals one-hot, ordered ones as their ranks, then standardized."""
    unordered = [c for c in X.columns if isinstance(X[c].dtype, pd.CategoricalDtype)
                 and not X[c].dtype.ordered]
    ordered = [c for c in X.columns if isinstance(X[c].dtype, pd.CategoricalDtype)
               and X[c].dtype.ordered]
    numbers = [c for c in X.columns if c not in unordered + ordered]
    encode = ColumnTransformer([
        ("onehot", OneHotEncoder(sparse_output=False, handle_unknown="ignore"), unordered),
        ("ranks", "passthrough", ordered),
        ("numbers", "passthrough", numbers)])
    return make_pipeline(encode, StandardScaler())


def _methods(X, classifier, knn_neighbors):
    nw = NadarayaWatsonClassifierCV if classifier else NadarayaWatsonRegressorCV
    knn = KNeighborsClassifier() if classifier else KNeighborsRegressor()
    hgb = (HistGradientBoostingClassifier if classifier
           else HistGradientBoostingRegressor)(categorical_features="from_dtype",
                                               random_state=0)
    grid = {"kneighborsregressor__n_neighbors" if not classifier
            else "kneighborsclassifier__n_neighbors": list(knn_neighbors)}
    weights_key = next(iter(grid)).replace("n_neighbors", "weights")
    grid[weights_key] = ["uniform", "distance"]
    return {
        **{f"nw_native_{kind}": nw(categorical_kernel=kind) for kind in KINDS},
        "nw_onehot": make_pipeline(_one_hot_design(X), nw()),
        "knn_tuned_onehot": GridSearchCV(make_pipeline(_one_hot_design(X), knn), grid,
                                         cv=KFold(5, shuffle=True, random_state=0)),
        "hgb_from_dtype": hgb,
    }


def section_tables(args):
    tables = {"grunfeld": (_grunfeld, False), "fair": (partial(_fair, args.n_fair), False),
              "anes96": (_anes96, True), "modechoice": (_modechoice, True)}
    results, targets = [], []
    for name in args.tables:
        load, classifier = tables[name]
        X, y = load()
        methods = _methods(X, classifier, args.knn_neighbors)
        scores = {m: [] for m in methods}
        seconds = {m: [] for m in methods}
        warned = {m: set() for m in methods}
        for seed in args.seeds:
            for train, test in KFold(5, shuffle=True, random_state=seed).split(X):
                for m, model in methods.items():
                    model = clone(model)
                    with recording(warned[m]):
                        timing = timed(partial(model.fit, X.iloc[train], y[train]))
                        scores[m].append(model.score(X.iloc[test], y[test]))
                    seconds[m].append(timing.best)
        row = {"table": name, "n": len(y), "task": "classification" if classifier
               else "regression",
               "score": {m: float(np.mean(s)) for m, s in scores.items()},
               "fold_fit_s": {m: float(np.median(s)) for m, s in seconds.items()},
               "warnings": {m: sorted(w) for m, w in warned.items() if w}}
        assert is_classifier(methods["nw_onehot"]) == classifier
        results.append(row)
    native = np.mean([r["score"]["nw_native_li_racine"] for r in results])
    onehot = np.mean([r["score"]["nw_onehot"] for r in results])
    gaps = [r["score"]["nw_native_li_racine"] - r["score"]["knn_tuned_onehot"]
            for r in results]
    targets.append({"name": "native categorical (li_racine) >= one-hot design, mean over "
                            "tables", "value": float(native - onehot), "goal": 0.0,
                    "met": bool(native >= onehot),
                    "detail": f"native {native:.4f}, one-hot {onehot:.4f}"})
    share = float(np.mean([g >= -0.005 for g in gaps]))
    targets.append({"name": "CV estimator (native) >= tuned KNN - 0.005 on >= 80% of the "
                            "tables, never more than 0.02 below",
                    "value": share, "goal": 0.8,
                    "met": bool(share >= 0.8 and min(gaps) >= -0.02),
                    "detail": f"{100 * share:.0f}% of the tables; largest shortfall "
                              f"{-min(gaps):.4f}"})
    slow = [f"{r['table']} ({r['fold_fit_s']['nw_native_li_racine']:.2f} s against "
            f"{r['fold_fit_s']['knn_tuned_onehot']:.2f} s)" for r in results
            if r["fold_fit_s"]["nw_native_li_racine"] > r["fold_fit_s"]["knn_tuned_onehot"]]
    targets.append({"name": "CV estimator (native) fit within the tuned KNN's GridSearchCV "
                            "(median fold) on every table (issue 26, item 3)",
                    "value": float(len(slow)), "goal": 0.0, "met": not slow,
                    "detail": "slower on " + ", ".join(slow) if slow
                              else f"{len(results)} tables"})
    return {"config": {"seeds": list(args.seeds), "n_fair": args.n_fair,
                       "knn_neighbors": list(args.knn_neighbors),
                       "tables": list(args.tables)},
            "results": results, "targets": targets}


def section_fair_sizes(args):
    """The tables' fit-time target around its ``fair`` configuration: one fold (the first
    of ``KFold(5, shuffle=True, random_state=0)``) of the native CV estimator and the
    tuned KNN on fair's first n rows, each n of ``--fair-sizes``."""
    rows = []
    for n in args.fair_sizes:
        X, y = _fair(n)
        methods = _methods(X, False, args.knn_neighbors)
        train, test = next(KFold(5, shuffle=True, random_state=0).split(X))
        row = {"n": len(y), "n_train": len(train)}
        for m in ("nw_native_li_racine", "knn_tuned_onehot"):
            model = clone(methods[m])
            with recording(set()):
                timing = timed(partial(model.fit, X.iloc[train], y[train]))
                row[m] = {"fit_s": timing.best,
                          "score": float(model.score(X.iloc[test], y[test]))}
        rows.append(row)
    slow = [f"n = {r['n']} ({r['nw_native_li_racine']['fit_s']:.2f} s against "
            f"{r['knn_tuned_onehot']['fit_s']:.2f} s)" for r in rows
            if r["nw_native_li_racine"]["fit_s"] > r["knn_tuned_onehot"]["fit_s"]]
    targets = [{"name": "CV estimator (native) fit within the tuned KNN's on fair's first n "
                        "rows, every n (one fold; issue 26, item 3)",
                "value": float(len(slow)), "goal": 0.0, "met": not slow,
                "detail": "slower at " + ", ".join(slow) if slow
                          else f"{len(rows)} sizes"}]
    return {"config": {"fair_sizes": list(args.fair_sizes),
                       "knn_neighbors": list(args.knn_neighbors)},
            "results": rows, "targets": targets}


def _fair_sizes_markdown(r):
    lines = ["Around the table's fair (its first 1,500 rows): one fold's fit on fair's "
             "first n rows (80 % of them), seconds, and the fold's test R^2.", "",
             "| n | ours s | tuned KNN s | ours / KNN | R^2 ours | R^2 KNN |",
             "|---|---|---|---|---|---|"]
    for row in r["results"]:
        ours, knn = row["nw_native_li_racine"], row["knn_tuned_onehot"]
        lines.append(f"| {row['n']:,} | {ours['fit_s']:.2f} | {knn['fit_s']:.2f} | "
                     f"{ours['fit_s'] / knn['fit_s']:.2f} | {ours['score']:.4f} | "
                     f"{knn['score']:.4f} |")
    return lines


def _tables_markdown(r):
    methods = list(r["results"][0]["score"])
    lines = ["Mean test score (R^2 or accuracy) over 5 folds x seeds "
             f"{r['config']['seeds']}; median seconds of one fold's fit in brackets.", "",
             "| table | n | " + " | ".join(methods) + " |",
             "|---|---|" + "---|" * len(methods)]
    for row in r["results"]:
        lines.append(f"| {row['table']} | {row['n']} | " + " | ".join(
            f"{row['score'][m]:.4f} ({row['fold_fit_s'][m]:.2f} s)" for m in methods) + " |")
    for row in r["results"]:
        for m, w in row["warnings"].items():
            lines.append(f"\nWarnings of {m} on {row['table']}: " + "; ".join(w))
    return lines


def run_benchmark(sections=SECTIONS, sizes=(250, 500), seeds=(0, 1, 2, 3, 4), n_fair=1500,
                  tables=TABLES, out_dir=RESULTS_DIR, knn_neighbors=KNN_NEIGHBORS,
                  fair_sizes=FAIR_SIZES):
    """``knn_neighbors``: the tuned KNN's grid of ``n_neighbors`` (the smoke test's tiny run
    takes a shorter one)."""
    args = argparse.Namespace(sizes=tuple(sizes), seeds=tuple(seeds), n_fair=n_fair,
                              tables=tuple(tables), knn_neighbors=tuple(knn_neighbors),
                              fair_sizes=tuple(fair_sizes))
    report = {"machine": machine_info(), "sections": {},
              "load_average": {"start": load_average()}}
    runs = {"speed": (partial(section_speed, args), _speed_markdown),
            "tables": (partial(section_tables, args), _tables_markdown),
            "fair_sizes": (partial(section_fair_sizes, args), _fair_sizes_markdown)}
    chunks = [machine_line(report["machine"]) + "\n",
              "Targets are reported, never enforced.\n"]
    print("".join(chunks), end="", flush=True)
    return run_sections("bench_categorical", report, chunks,
                        {s: runs[s] for s in sections}, out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=SECTIONS)
    parser.add_argument("--sizes", nargs="+", type=int, default=[250, 500])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--n-fair", type=int, default=1500)
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=TABLES)
    parser.add_argument("--fair-sizes", nargs="+", type=int, default=list(FAIR_SIZES))
    parser.add_argument("--out-dir", default=str(RESULTS_DIR))
    args = parser.parse_args(argv)
    run_benchmark(args.sections, args.sizes, args.seeds, args.n_fair, args.tables,
                  args.out_dir, fair_sizes=args.fair_sizes)


if __name__ == "__main__":
    main()
