"""Prediction intervals and sets on real data: do they cover, how wide are they, and what do
they cost beside MAPIE.

What it measures
----------------
1. ``coverage``: on every data set of ``bench_accuracy.py`` (subsampled to
   ``--max-samples``, inputs standardized on each training fold), by shuffled outer
   5-fold CV at each of ``--seeds``: ``NadarayaWatsonRegressor(bandwidth="loo")
   .predict_interval`` (jackknife+) of each test row at confidence 0.9, and for the
   classification sets ``NadarayaWatsonClassifier(bandwidth="loo").predict_set`` (LAC,
   APS with the last label, randomized APS): the share of test targets covered, and the
   mean width (or set size). Beside them, MAPIE's CV+ around the same estimator
   (``CrossConformalRegressor`` / ``CrossConformalClassifier``, ``cv=5``: the bandwidth
   learned again on each of its folds). Ours holds the bandwidth learned on the whole
   training fold fixed in its leave-one-out fits, so its coverage is what this measures;
   ``ours_cv+`` is ``predict_interval(cv=...)`` on MAPIE's splits (the bandwidth learned
   again on each), whose bounds must equal MAPIE's (their largest difference is
   reported). Then the CV estimators at default arguments (``ours_cv``: jackknife+ of
   ``NadarayaWatsonRegressorCV()``; ``ours_cv_lac``: LAC sets of
   ``NadarayaWatsonClassifierCV()``) at what each chose on the training fold, folds
   whose choice has no jackknife+ counted and left out. Targets (issue 27): ours covers
   at least 0.90 on every data set (the mean over the seeds); so do ours_cv+ on every
   regression data set, and the CV estimators on every data set.
2. ``speed``: at n training points (``--n-speed``, 2 features, a sine plus noise),
   ``fit`` with ``bandwidth="loo"`` and ``predict_interval`` of 1,000 queries, against
   MAPIE's jackknife+ (``CrossConformalRegressor(cv=LeaveOneOut(), method="plus")``)
   around the same estimator, which learns the bandwidth again without each of the n
   rows: its time is that of ``--mapie-refits`` of those refits, timed, times n / refits
   (reported as an estimate, with the refits' spread).

3. ``refit``: the jackknife+ of the whole learning procedure, on the regression data sets
   whose training folds hold at most ``--refit-max-rows`` rows (default 310: each fit
   costs one bandwidth search per row): ``predict_interval(cv=LeaveOneOut())`` of
   ``NadarayaWatsonRegressor(bandwidth="loo")``, its bandwidth learned again without each
   training row (what MAPIE's ``CrossConformalRegressor(cv=LeaveOneOut(), method="plus")``
   computes around the estimator), beside the jackknife+ at the bandwidth learned on the
   whole training fold, on the same outer folds and seeds: coverage, width and seconds per
   fold. Reported, not a target: it measures how much of section 1's shortfall comes from
   holding the learned bandwidth fixed.

MAPIE (the ``bench`` extras) that is not installed is reported as skipped.

Usage: ``python benchmarks/bench_intervals.py [--sections S ...] [--datasets D ...]
[--max-samples N] [--seeds S ...] [--n-speed N] [--mapie-refits K] [--refit-max-rows N]
[--out-dir DIR]``;
writes bench_intervals.json and .md.
"""

import argparse
import importlib.util
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
from _common import load_average, machine_info, machine_line, recording, run_sections, timed
from bench_accuracy import DATASETS, DEFAULT_DATASETS, _load
from sklearn.base import clone
from sklearn.model_selection import KFold, LeaveOneOut
from sklearn.preprocessing import StandardScaler

from sklearn_nw import (
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SECTIONS = ("coverage", "speed", "refit")
# Training folds of at most this many rows get the refitting jackknife+ (section 3).
REFIT_MAX_ROWS = 310
LEVEL = 0.9
COVERAGE_TARGET = 0.9
# Our CV+ splits: MAPIE's for cv=5, random_state=0 (its check_cv shuffles a KFold).
CV_PLUS_SPLITS = KFold(5, shuffle=True, random_state=0)
# The classification sets: each name's predict_set arguments (randomized APS draws its
# shares from seed 0 on every fold).
SCORES = {"lac": {"conformity_score": "lac"}, "aps": {"conformity_score": "aps"},
          "aps_randomized": {"conformity_score": "aps", "include_last_label": "randomized"}}


def _mapie_version():
    try:
        return metadata.version("mapie")
    except metadata.PackageNotFoundError:
        return None


def _have_mapie():
    return importlib.util.find_spec("mapie") is not None


# -- 1. coverage on real data ------------------------------------------------------------------
def _regression_fold(X_train, y_train, X_test, y_test, have_mapie):
    """Coverage and widths of ours and MAPIE's CV+ on one outer fold."""
    ours = NadarayaWatsonRegressor(bandwidth="loo").fit(X_train, y_train)
    start = time.perf_counter()
    _, bounds = ours.predict_interval(X_test, confidence_level=LEVEL)
    seconds = time.perf_counter() - start
    low, high = bounds[:, 0, 0], bounds[:, 1, 0]
    row = {"ours": {"covered": float(np.mean((low <= y_test) & (y_test <= high))),
                    "width": float(np.mean(high - low)), "interval_s": seconds}}
    # CV+ on MAPIE's splits for cv=5, random_state=0: the bandwidth learned on each.
    start = time.perf_counter()
    _, cv_bounds = ours.predict_interval(X_test, confidence_level=LEVEL, cv=CV_PLUS_SPLITS)
    seconds = time.perf_counter() - start
    low, high = cv_bounds[:, 0, 0], cv_bounds[:, 1, 0]
    row["ours_cv+"] = {"covered": float(np.mean((low <= y_test) & (y_test <= high))),
                       "width": float(np.mean(high - low)), "interval_s": seconds}
    # The CV estimator at default arguments: jackknife+ at what it chose (an adaptive
    # bandwidth's neighbor distances moving without each row as its refits move them).
    row["ours_cv"] = _refused_or(lambda: _covered_interval(
        NadarayaWatsonRegressorCV().fit(X_train, y_train), X_test, y_test))
    if have_mapie:
        from mapie.regression import CrossConformalRegressor

        theirs = CrossConformalRegressor(NadarayaWatsonRegressor(bandwidth="loo"),
                                         confidence_level=LEVEL, cv=5, method="plus",
                                         random_state=0)
        theirs.fit_conformalize(X_train, y_train)
        bounds = theirs.predict_interval(X_test)[1][:, :, 0]  # (q, 2)
        low, high = bounds.T
        row["mapie"] = {"covered": float(np.mean((low <= y_test) & (y_test <= high))),
                        "width": float(np.mean(high - low)),
                        # How far our CV+ is from MAPIE's on the same splits.
                        "max_difference_from_ours_cv+": float(
                            np.max(np.abs(bounds - cv_bounds[:, :, 0])))}
    return row


def _covered_interval(model, X_test, y_test):
    start = time.perf_counter()
    _, bounds = model.predict_interval(X_test, confidence_level=LEVEL)
    seconds = time.perf_counter() - start
    low, high = bounds[:, 0, 0], bounds[:, 1, 0]
    return {"covered": float(np.mean((low <= y_test) & (y_test <= high))),
            "width": float(np.mean(high - low)), "interval_s": seconds}


def _aggregate(key, values):
    """Over the folds: the largest of a largest difference, the count of refused folds,
    else the mean over the folds computed (None if none was)."""
    if key.startswith("max_"):
        return float(np.max(values))
    if key == "refused":
        return float(np.sum(values))
    computed = [v for v in values if not np.isnan(v)]
    return float(np.mean(computed)) if computed else None


def _refused_or(measure):
    """``measure()`` with ``refused`` 0, or no coverage and ``refused`` 1 where the fitted
    model's intervals are not computed (local polynomials under a sample-point bandwidth)."""
    try:
        return {**measure(), "refused": 0.0}
    except NotImplementedError:
        return {"covered": np.nan, "width": np.nan, "interval_s": np.nan, "refused": 1.0}


def _classification_fold(X_train, y_train, X_test, y_test, have_mapie):
    """Coverage and set sizes of ours (LAC, APS, randomized APS) and MAPIE's CV+ (LAC) on
    one fold."""
    ours = NadarayaWatsonClassifier(bandwidth="loo").fit(X_train, y_train)
    row = {}
    for score, arguments in SCORES.items():
        start = time.perf_counter()
        _, sets = ours.predict_set(X_test, confidence_level=LEVEL, random_state=0,
                                   **arguments)
        seconds = time.perf_counter() - start
        sets = sets[:, :, 0]
        held = sets[np.arange(len(y_test)), np.searchsorted(ours.classes_, y_test)]
        row[f"ours_{score}"] = {"covered": float(np.mean(held)),
                                "width": float(sets.sum(1).mean()), "interval_s": seconds}
    cv_model = NadarayaWatsonClassifierCV().fit(X_train, y_train)
    _, sets = cv_model.predict_set(X_test, confidence_level=LEVEL)
    held = sets[np.arange(len(y_test)), np.searchsorted(cv_model.classes_, y_test), 0]
    row["ours_cv_lac"] = {"covered": float(np.mean(held)),
                          "width": float(sets[:, :, 0].sum(1).mean()), "refused": 0.0}
    if have_mapie:
        from mapie.classification import CrossConformalClassifier

        theirs = CrossConformalClassifier(NadarayaWatsonClassifier(bandwidth="loo"),
                                          confidence_level=LEVEL, cv=5,
                                          conformity_score="lac", random_state=0)
        theirs.fit_conformalize(X_train, y_train)
        sets = theirs.predict_set(X_test)[1][:, :, 0]
        held = sets[np.arange(len(y_test)), y_test]
        row["mapie_lac"] = {"covered": float(np.mean(held)),
                            "width": float(sets.sum(1).mean())}
    return row


def _scaled_folds(name, max_samples, seeds, run, warned, refuse=None):
    """``run(X_train, y_train, X_test, y_test)`` on every outer fold of data set ``name``
    at each of ``seeds``, the inputs standardized on the training fold, the warnings
    collected into ``warned``: ``(folds, n, n_total, skipped)``, ``skipped`` the reason
    (and the rest None) where the data set does not load or ``refuse`` (of the largest
    training fold's rows) gives one."""
    folds = []
    for seed in seeds:
        try:
            with recording(warned):
                X, y, n_total, outer = _load(name, max_samples, seed)
        except (ImportError, OSError, ValueError) as exc:
            return None, None, None, repr(exc)
        reason = None if refuse is None else refuse(max(len(train)
                                                        for train, _ in outer.split(X, y)))
        if reason:
            return None, None, None, reason
        for train, test in outer.split(X, y):
            scaler = StandardScaler().fit(X[train])
            with recording(warned):
                folds.append(run(scaler.transform(X[train]), y[train],
                                 scaler.transform(X[test]), y[test]))
    return folds, len(y), n_total, None


def section_coverage(datasets=DEFAULT_DATASETS, max_samples=2000, seeds=(0,)):
    have_mapie = _have_mapie()
    results = []
    for name in datasets:
        print(f"coverage: {name}", file=sys.stderr, flush=True)
        task = DATASETS[name][0]
        fold = _regression_fold if task == "regression" else _classification_fold
        warned = set()
        folds, n, n_total, skipped = _scaled_folds(
            name, max_samples, seeds, lambda *data, fold=fold: fold(*data, have_mapie), warned)
        if skipped:
            results.append({"dataset": name, "status": "skipped", "reason": skipped})
            continue
        # The mean over the folds (the largest, of a largest difference; the count of
        # refused folds; the mean over the others).
        methods = {m: {k: _aggregate(k, [f[m][k] for f in folds]) for k in folds[0][m]}
                   for m in folds[0]}
        results.append({"dataset": name, "task": task, "status": "ok", "n": n,
                        "n_total": n_total, "methods": methods, "warnings": sorted(warned)})
    ok = [r for r in results if r["status"] == "ok"]
    jackknife = ["ours", *(f"ours_{s}" for s in SCORES)]
    cv_targets = [_coverage_target(
        ok, ["ours_cv", "ours_cv_lac"], f"jackknife+ and LAC sets of the CV estimators at "
                                        f"default arguments cover >= {COVERAGE_TARGET} at "
                                        f"confidence {LEVEL} on every data set (mean over "
                                        f"seeds {list(seeds)}, the folds computed)")]
    targets = [_coverage_target(
        ok, jackknife, f"jackknife+ and conformal sets (at the bandwidth learned on the "
                       f"training fold) cover >= {COVERAGE_TARGET} at confidence {LEVEL} on "
                       f"every data set (mean over seeds {list(seeds)})"),
               _coverage_target(
        ok, ["ours_cv+"], f"CV+ (the bandwidth learned again on each of 5 splits) covers >= "
                          f"{COVERAGE_TARGET} at confidence {LEVEL} on every regression "
                          f"data set (mean over seeds {list(seeds)})")] + cv_targets
    return {"config": {"datasets": list(datasets), "max_samples": max_samples,
                       "seeds": list(seeds), "confidence_level": LEVEL,
                       "mapie": _mapie_version()},
            "results": results, "targets": targets}


def _coverage_target(results, methods, name):
    """A target: each of ``methods`` (where a data set has it) covers at least
    ``COVERAGE_TARGET``; the lowest with its data set."""
    own = [(r["methods"][m]["covered"], r["dataset"], m)
           for r in results for m in methods
           if m in r["methods"] and r["methods"][m]["covered"] is not None]
    lowest = min(own, default=None)
    return {"name": name, "met": bool(own) and lowest[0] >= COVERAGE_TARGET,
            "detail": (f"lowest {lowest[0]:.3f} ({lowest[1]}, {lowest[2]}), "
                       f"{len({d for _, d, _ in own})} data sets" if own else "no data set ran")}


def markdown_coverage(result):
    c = result["config"]
    lines = [f"### 1. Coverage at confidence {c['confidence_level']} by outer 5-fold CV "
             f"(seeds {c['seeds']}, at most {c['max_samples']} rows)", "",
             "Regression: share of test targets inside the interval, and its mean width (in "
             "the target's units). Classification: share of test labels in the set, and its "
             "mean size. Ours: `bandwidth=\"loo\"` learned on the training fold, held fixed "
             "(jackknife+ / LAC and APS sets), and `ours_cv+`: `predict_interval(cv=...)` on "
             "MAPIE's 5 splits, the bandwidth learned on each; MAPIE: CV+ with 5 folds, the "
             "bandwidth learned on each (the largest difference of its bounds from "
             "`ours_cv+` on any fold below the table). `ours_cv` and `ours_cv_lac`: the "
             "jackknife+ and LAC sets of `NadarayaWatsonRegressorCV()` and "
             "`NadarayaWatsonClassifierCV()` at what each chose on the training fold (folds "
             "whose choice has no jackknife+, local polynomials under a sample-point "
             "bandwidth, are counted and left out).", "",
             "| data set | n | method | coverage | width or size |", "|---|---|---|---|---|"]
    for r in result["results"]:
        if r["status"] != "ok":
            lines.append(f"| {r['dataset']} | | skipped: {r['reason'][:60]} | | |")
            continue
        for method, m in r["methods"].items():
            refused = (f" ({m['refused']:.0f} folds refused)" if m.get("refused")
                       else "")
            if m["covered"] is None:
                lines.append(f"| {r['dataset']} | {r['n']} | {method}{refused} | | |")
                continue
            lines.append(f"| {r['dataset']} | {r['n']} | {method}{refused} | "
                         f"{m['covered']:.3f} | {m['width']:.4g} |")
    differences = [r["methods"]["mapie"]["max_difference_from_ours_cv+"]
                   for r in result["results"]
                   if r["status"] == "ok" and "mapie" in r.get("methods", {})]
    if differences:
        lines += ["", f"Largest difference between MAPIE's CV+ bounds and `ours_cv+` on the "
                      f"same splits, over every fold and data set: {max(differences):.3g}."]
    return lines


# -- 2. speed against MAPIE's jackknife+ -------------------------------------------------------
def _speed_problem(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)
    return X, y, rng.uniform(-2, 2, (1000, 2))


def section_speed(n=5000, mapie_refits=5):
    X, y, Q = _speed_problem(n)
    estimator = NadarayaWatsonRegressor(bandwidth="loo")
    ours = timed(lambda: clone(estimator).fit(X, y).predict_interval(Q, LEVEL))
    row = {"n": n, "n_queries": len(Q), "ours_s": ours.best, "mapie": {"status": "skipped"}}
    if _have_mapie():
        # MAPIE's jackknife+ fits the estimator once on all rows and once without each of
        # them; the refits are timed on the first rows left out.
        refits = []
        for i in range(mapie_refits):
            keep = np.arange(n) != i
            refits.append(timed(lambda keep=keep: clone(estimator).fit(X[keep], y[keep])).best)
        row["mapie"] = {"status": "estimated", "refits_timed": mapie_refits,
                        "refit_s": refits, "seconds": float(np.mean(refits) * (n + 1))}
    ratio = (row["mapie"]["seconds"] / ours.best if "seconds" in row["mapie"] else None)
    row["ratio"] = ratio
    return {"config": {"n": n, "mapie_refits": mapie_refits}, "results": [row],
            "targets": []}


def markdown_speed(result):
    r = result["results"][0]
    lines = [f"### 2. Time of jackknife+ intervals: fit and {r['n_queries']:,} queries, "
             f"n = {r['n']:,}, 2 features", "",
             "| ours s | MAPIE jackknife+ s | MAPIE / ours |", "|---|---|---|"]
    m = r["mapie"]
    if "seconds" in m:
        spread = f"{min(m['refit_s']):.3f}-{max(m['refit_s']):.3f}"
        lines.append(f"| {r['ours_s']:.3f} | {m['seconds']:.0f} (estimated: {r['n'] + 1:,} "
                     f"fits at {spread} s each, {m['refits_timed']} timed) | "
                     f"{r['ratio']:.0f}x |")
    else:
        lines.append(f"| {r['ours_s']:.3f} | skipped | |")
    return lines


# -- 3. the jackknife+ of the learning procedure ---------------------------------------------
def _refit_fold(X_train, y_train, X_test, y_test):
    """Coverage, width and seconds of the jackknife+ at the bandwidth learned on the
    training fold, and of the jackknife+ whose fits without each row learn it again."""
    ours = NadarayaWatsonRegressor(bandwidth="loo").fit(X_train, y_train)
    row = {}
    for method, cv in (("learned_once", None), ("learned_without_each_row", LeaveOneOut())):
        start = time.perf_counter()
        _, bounds = ours.predict_interval(X_test, confidence_level=LEVEL, cv=cv)
        seconds = time.perf_counter() - start
        low, high = bounds[:, 0, 0], bounds[:, 1, 0]
        row[method] = {"covered": float(np.mean((low <= y_test) & (y_test <= high))),
                       "width": float(np.mean(high - low)), "interval_s": seconds}
    return row


def section_refit(datasets=DEFAULT_DATASETS, max_samples=2000, seeds=(0,),
                  max_rows=REFIT_MAX_ROWS):
    """Section 3 on the regression data sets whose training folds hold at most
    ``max_rows`` rows; the others are reported as skipped."""
    results = []
    for name in datasets:
        if DATASETS[name][0] != "regression":
            continue
        print(f"refit: {name}", file=sys.stderr, flush=True)
        warned = set()
        folds, n, _, skipped = _scaled_folds(
            name, max_samples, seeds, _refit_fold, warned,
            refuse=lambda rows: (f"training folds of {rows} rows > {max_rows}"
                                 if rows > max_rows else None))
        if skipped:
            results.append({"dataset": name, "status": "skipped", "reason": skipped})
            continue
        methods = {m: {k: float(np.mean([f[m][k] for f in folds])) for k in folds[0][m]}
                   for m in folds[0]}
        results.append({"dataset": name, "status": "ok", "n": n, "methods": methods,
                        "warnings": sorted(warned)})
    return {"config": {"datasets": list(datasets), "max_samples": max_samples,
                       "seeds": list(seeds), "confidence_level": LEVEL,
                       "max_rows": max_rows},
            "results": results, "targets": []}


def markdown_refit(result):
    c = result["config"]
    lines = [f"### 3. The jackknife+ of the learning procedure (regression, training folds of "
             f"at most {c['max_rows']} rows; seeds {c['seeds']}, confidence "
             f"{c['confidence_level']})", "",
             "`NadarayaWatsonRegressor(bandwidth=\"loo\")` on each outer training fold: its "
             "jackknife+ at the bandwidth learned on the whole fold (section 1's `ours`), "
             "and `predict_interval(X, cv=LeaveOneOut())`, whose fit without each training "
             "row learns the bandwidth again without it (the exact jackknife+ of the "
             "procedure, as MAPIE's with a refit per row). Mean over the folds and seeds; "
             "seconds of one fold's intervals.", "",
             "| data set | n | learned once: coverage | width | learned without each row: "
             "coverage | width | seconds (once, without each row) |",
             "|---|---|---|---|---|---|---|"]
    computed = []
    for r in result["results"]:
        if r["status"] != "ok":
            lines.append(f"| {r['dataset']} | | skipped: {r['reason'][:60]} | | | | |")
            continue
        once, again = r["methods"]["learned_once"], r["methods"]["learned_without_each_row"]
        computed.append((again["covered"], r["dataset"], once["covered"]))
        lines.append(f"| {r['dataset']} | {r['n']} | {once['covered']:.3f} | "
                     f"{once['width']:.4g} | {again['covered']:.3f} | {again['width']:.4g} | "
                     f"{once['interval_s']:.3f}, {again['interval_s']:.1f} |")
    if computed:
        low = min(computed)
        lines += ["", f"Learned again without each row, the lowest coverage: {low[0]:.3f} "
                      f"({low[1]}; {low[2]:.3f} at the bandwidth learned once); learned "
                      f"once, the lowest on the same data sets: "
                      f"{min(c[2] for c in computed):.3f}."]
    warned = {r["dataset"]: r["warnings"] for r in result["results"] if r.get("warnings")}
    if warned:
        lines += ["", "Warnings raised:",
                  *(f"- {name}: {'; '.join(w)}" for name, w in warned.items())]
    return lines


# -- the whole run ---------------------------------------------------------------------------
def run_benchmark(sections=SECTIONS, datasets=DEFAULT_DATASETS, max_samples=2000, seeds=(0,),
                  n_speed=5000, mapie_refits=5, out_dir=RESULTS_DIR,
                  refit_max_rows=REFIT_MAX_ROWS):
    """Run the chosen sections, print each table, write the json and markdown; return the
    report."""
    report = {"machine": machine_info(),
              "config": {"device": "cpu", "dtype": "float64", "mapie": _mapie_version()},
              "load_average": {"start": load_average()}, "sections": {}}
    chunks = [machine_line(report["machine"]) + "\n",
              f"MAPIE {report['config']['mapie'] or 'not installed'}. Targets are reported, "
              "never enforced.\n"]
    print("".join(chunks), end="", flush=True)
    runs = {"coverage": (lambda: section_coverage(datasets, max_samples, seeds),
                         markdown_coverage),
            "speed": (lambda: section_speed(n_speed, mapie_refits), markdown_speed),
            "refit": (lambda: section_refit(datasets, max_samples, seeds, refit_max_rows),
                      markdown_refit)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # MAPIE's own deprecations
        return run_sections("bench_intervals", report, chunks,
                            {name: runs[name] for name in SECTIONS if name in sections},
                            out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS),
                        default=list(DEFAULT_DATASETS))
    parser.add_argument("--max-samples", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--n-speed", type=int, default=5000)
    parser.add_argument("--mapie-refits", type=int, default=5)
    parser.add_argument("--refit-max-rows", type=int, default=REFIT_MAX_ROWS)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run_benchmark(args.sections, args.datasets, args.max_samples, args.seeds, args.n_speed,
                  args.mapie_refits, args.out_dir, args.refit_max_rows)


if __name__ == "__main__":
    main()
