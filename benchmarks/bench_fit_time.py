"""Fit-time benchmark: what the CV estimator's default fit and the learned bandwidth cost,
against the peers a user would otherwise fit (issue 26, "no fit-time cliffs").

What it measures
----------------
Section ``cv``: ``NadarayaWatsonRegressorCV().fit`` with its defaults (the default grid
with its edge extension, ``bandwidth_kinds="auto"``, ``degree="auto"``: local polynomials
where the exact leave-one-out grid admits them) against a tuned k-nearest-neighbors
regressor, ``GridSearchCV(make_pipeline(StandardScaler(), KNeighborsRegressor()),
{"n_neighbors": 9 values, "weights": 2 values}, cv=3)`` (18 candidates, 3 folds), on the
same training set, in the same run. Data sets: 1-D series of ``--series`` points (x the
time index, a smooth trend plus a seasonal term of period 52 and noise: the optimum
bandwidth lies far below the default grid's center, Scott's rule), statsmodels' weekly
``co2`` (2,225 values after dropping NaN, x the time index) when statsmodels is
installed, and standard normal inputs in ``--dims`` features at ``--sizes`` points with
a smooth target (``sum_of_sines``: the optimum near Scott's rule) and a fast wave
(``sine_wave_on_slope``: below it). Each fit is timed three times in a row and the
medians compared (one fit of the same data varies by 20-50 % from call to call on a
shared machine); our first fit, the process's first of that data, is shown beside them.
20 % of the rows, drawn at random, are held out and each model's test MSE is reported
beside its time. Target per row: our median fit takes at most the KNN search's (ratio <= 1).
Beside it (not a target), the same fits with fewer families: fixed bandwidths only
(``bandwidth_kinds=["fixed"]``, local polynomials kept) and Nadaraya-Watson's fixed
bandwidths alone (``degree=0`` too), their time over the KNN's and their test MSE.

Section ``loo``: ``NadarayaWatsonRegressor(bandwidth="loo", degree=1)`` and
``bandwidth="loo"`` (degree 0) fitted on 3,000 points in 2 features (uniform on [-1, 1],
``sine_wave_on_slope`` plus noise 0.3), predicting 20,000 queries, against
kernelsmooth's ``LocalLinearRegression()`` and ``KernelRegression()`` (its
Nadaraya-Watson; both choose a Gaussian bandwidth by least-squares cross-validation,
``bandwidth="lscv"``, in Cython), fit plus predict, with each one's test MSE against the
noise-free target. Target: ours at least twice as fast as kernelsmooth's counterpart;
"skipped" when kernelsmooth is not installed.

The machine is shared while the benchmark runs: the load average at the start and the
end is recorded, and only the ratios within one run mean something.

Usage: ``python benchmarks/bench_fit_time.py [--series N ...] [--sizes N ...] [--dims D
...] [--loo-n N] [--loo-queries M] [--sections cv loo] [--out-dir DIR]``; writes
bench_fit_time.json and .md.
"""

import argparse
import importlib.util
import time
from pathlib import Path

import numpy as np
from _common import (
    load_average,
    machine_info,
    machine_line,
    make_problem,
    run_sections,
    sine_wave_on_slope,
    sum_of_sines,
    timed,
)
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_nw import NadarayaWatsonRegressor, NadarayaWatsonRegressorCV

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# The tuned KNN's grid: 9 k x 2 weightings = 18 candidates, 3 folds (on fewer training
# rows than the largest k, the ks that fit: knn_grid).
KNN_NEIGHBORS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
KNN_WEIGHTS = ("uniform", "distance")
KNN_FOLDS = 3
PERIOD = 52  # the series' seasonal period, in points (weekly data, a yearly season)
LOO_TARGET = 2.0  # ours at least this many times faster than kernelsmooth's
# The default fit with fewer families, timed beside it (reported, not a target): what the
# adaptive families, and the local polynomials with them, cost and buy.
VARIANTS = {"fixed kinds": {"bandwidth_kinds": ["fixed"]},
            "Nadaraya-Watson, fixed": {"bandwidth_kinds": ["fixed"], "degree": 0}}


def timed_with_cpu(call, repeats=1):
    """:func:`~_common.timed` of ``repeats`` calls and the CPU seconds of this process's
    threads per call (less sensitive than wall time to a machine shared with others)."""
    start = time.process_time()
    timing = timed(call, repeats)
    return timing, (time.process_time() - start) / repeats


def seasonal_series(n, seed=0):
    """A 1-D series of ``n`` points: x the time index, y a smooth trend plus a seasonal
    term of period ``PERIOD`` and Gaussian noise (co2-like: the best bandwidth is a few
    points, the default grid centers on Scott's rule, about n^0.8 / 3 points)."""
    rng = np.random.default_rng(seed)
    x = np.arange(n, dtype=np.float64)
    y = (2.0 * (x / n) ** 2 + 3.0 * np.sin(2 * np.pi * x / PERIOD)
         + 0.5 * rng.standard_normal(n))
    return x[:, None], y


def co2_series():
    """statsmodels' weekly co2 (NaN dropped), x the time index; None without statsmodels."""
    if importlib.util.find_spec("statsmodels") is None:
        return None
    from statsmodels.datasets import co2

    y = co2.load_pandas().data["co2"].dropna().to_numpy(dtype=np.float64)
    return np.arange(len(y), dtype=np.float64)[:, None], y


def data_sets(series, sizes, dims, with_co2=True):
    """``(name, optimum, X, y)`` of every data set the ``cv`` section fits."""
    sets = [(f"series {n:,}", "far below the grid", *seasonal_series(n)) for n in series]
    co2 = co2_series() if with_co2 else None
    if co2 is not None:
        sets.append(("co2 (statsmodels)", "far below the grid", *co2))
    for d in dims:
        for n in sizes:
            for target, optimum in ((sum_of_sines, "near Scott's rule"),
                                    (sine_wave_on_slope, "below Scott's rule")):
                if target is sine_wave_on_slope and d < 2:
                    continue
                X, y, _ = make_problem(n, 0, d, dtype=np.float64, target=target)
                sets.append((f"{target.__name__} {n:,} x {d}", optimum, X, y))
    return sets


def knn_grid(n_train):
    """The KNN's candidates on ``n_train`` rows: every k of ``KNN_NEIGHBORS`` that the
    smallest fold's training part holds, each weighting."""
    rows = n_train - -(-n_train // KNN_FOLDS)  # the smallest training part of the folds
    return {"kneighborsregressor__n_neighbors": [k for k in KNN_NEIGHBORS if k <= rows],
            "kneighborsregressor__weights": list(KNN_WEIGHTS)}


def tuned_knn(n_train):
    """The KNN peer: scaled inputs, k and weighting tuned by 3-fold GridSearchCV."""
    return GridSearchCV(make_pipeline(StandardScaler(), KNeighborsRegressor()),
                        knn_grid(n_train), cv=KNN_FOLDS)


def section_cv(series=(1000, 5000, 20_000), sizes=(1000, 5000), dims=(1, 2, 3, 8),
               with_co2=True, repeats=3):
    """Default CV fit times against a tuned KNN's GridSearchCV, with test MSEs: the
    median of ``repeats`` fits of each (the first fit of ours beside it: on this
    machine the same fit varies by 20-50 % from one call to the next)."""
    results = []
    for name, optimum, X, y in data_sets(series, sizes, dims, with_co2):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2,
                                                            random_state=0)
        training = (X_train, y_train)
        ours, ours_cpu = timed_with_cpu(
            lambda training=training: NadarayaWatsonRegressorCV().fit(*training), repeats)
        knn, knn_cpu = timed_with_cpu(
            lambda training=training: tuned_knn(len(training[0])).fit(*training), repeats)
        model = ours.result
        n_knn = len(knn.result.cv_results_["params"])
        variants = {}
        for variant, params in VARIANTS.items():
            fitted, _ = timed_with_cpu(
                lambda training=training, params=params:
                NadarayaWatsonRegressorCV(**params).fit(*training), repeats)
            variants[variant] = {"s": fitted.median, "ratio": fitted.median / knn.median,
                                 "mse": float(np.mean((fitted.result.predict(X_test)
                                                       - y_test) ** 2))}
        results.append({
            "data": name, "optimum": optimum, "n_train": len(X_train), "d": X.shape[1],
            "ours_s": ours.median, "knn_s": knn.median, "ratio": ours.median / knn.median,
            "ours_first_s": ours.times[0], "ours_times_s": ours.times,
            "knn_times_s": knn.times,
            "ours_cpu_s": ours_cpu, "knn_cpu_s": knn_cpu,
            "ours_mse": float(np.mean((model.predict(X_test) - y_test) ** 2)),
            "knn_mse": float(np.mean((knn.result.predict(X_test) - y_test) ** 2)),
            "candidates": len(model.cv_results_["params"]), "knn_candidates": n_knn,
            "degree": int(model.degree_), "bandwidth": np.ravel(model.bandwidth_).tolist(),
            "kind": str(model.cv_results_.get("kind", ["fixed"] * (model.best_index_ + 1))[
                model.best_index_]),
            "variants": variants,
        })
    targets = [{"name": f"default CV fit within the tuned KNN's time, {r['data']}",
                "met": r["ratio"] <= 1.0,
                "detail": f"{r['ours_s']:.2f} s against {r['knn_s']:.2f} s, ratio "
                          f"{r['ratio']:.1f}"} for r in results]
    return {"config": {"series": list(series), "sizes": list(sizes), "dims": list(dims),
                       "co2": with_co2,
                       "period": PERIOD, "knn_grid": {"n_neighbors": list(KNN_NEIGHBORS),
                                                      "weights": list(KNN_WEIGHTS)},
                       "knn_folds": KNN_FOLDS, "test_size": 0.2, "dtype": "float64",
                       "repeats": repeats, "variants": VARIANTS},
            "results": results, "targets": targets}


def markdown_cv(result):
    c = result["config"]
    lines = [("### Default `NadarayaWatsonRegressorCV().fit` against a tuned KNN "
              f"(GridSearchCV, {len(c['knn_grid']['n_neighbors']) * len(c['knn_grid']['weights'])}"
              f" candidates, cv={c['knn_folds']})"), "",
             ("| data | optimum | n train × d | ours s | KNN s | ours / KNN | target | "
              "ours first fit s | CPU s (ours, KNN) | candidates | chosen (degree, kind, h) "
              "| test MSE ours | test MSE KNN |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["results"]:
        h = ", ".join(f"{v:.3g}" for v in r["bandwidth"])
        lines.append(
            f"| {r['data']} | {r['optimum']} | {r['n_train']:,} × {r['d']} | "
            f"{r['ours_s']:.2f} | {r['knn_s']:.2f} | {r['ratio']:.1f} | "
            f"{'met' if r['ratio'] <= 1 else 'NOT met'} | {r['ours_first_s']:.2f} | "
            f"{r['ours_cpu_s']:.2f}, {r['knn_cpu_s']:.2f} | {r['candidates']} | "
            f"{r['degree']}, {r['kind']}, {h} | {r['ours_mse']:.4g} | {r['knn_mse']:.4g} |")
    lines += ["", (f"Each fit timed {c['repeats']} times in a row, the median "
                   "shown (wall seconds; the first of ours beside it, the process's "
                   "first fit of that data; CPU seconds of the process's threads per "
                   "fit), on 80 % of the rows (the rest is the test set). Target: "
                   "ours / KNN <= 1 in median wall time.")]
    if not all("variants" in r for r in result["results"]):
        return lines
    names = list(c["variants"])
    lines += ["", ("What the default's families cost: the same fits with fewer families "
                   "(" + "; ".join(f"`{n}`: `NadarayaWatsonRegressorCV("
                                   + ", ".join(f"{k}={v!r}" for k, v in c["variants"][n].items())
                                   + ")`" for n in names)
                   + "), median wall seconds over the KNN's of the same run, and test MSE."),
              "",
              "| data | default / KNN | " + " | ".join(f"{n} / KNN" for n in names)
              + " | test MSE default | " + " | ".join(f"test MSE {n}" for n in names)
              + " | test MSE KNN |",
              "|---|" + "---|" * (2 * len(names) + 3)]
    for r in result["results"]:
        v = r["variants"]
        lines.append(f"| {r['data']} | {r['ratio']:.1f} | "
                     + " | ".join(f"{v[n]['ratio']:.1f}" for n in names)
                     + f" | {r['ours_mse']:.4g} | "
                     + " | ".join(f"{v[n]['mse']:.4g}" for n in names)
                     + f" | {r['knn_mse']:.4g} |")
    return lines


def loo_problem(n=3000, n_queries=20_000, seed=0):
    """The learned-bandwidth section's data: uniform on [-1, 1]^2, a fast wave on a
    slope plus noise 0.3; the queries' noise-free targets."""
    X, y, Q = make_problem(n, n_queries, 2, seed=seed, dtype=np.float64, span=(-1, 1),
                           target=sine_wave_on_slope, noise=0.3)
    return X, y, Q, sine_wave_on_slope(Q)


def section_loo(n=3000, n_queries=20_000, degrees=(1, 0), repeats=3):
    """Learned bandwidths of ``degrees`` (fit + predict) against kernelsmooth's
    least-squares CV, each the best of ``repeats`` calls in this process (one call's
    time moved by 30 % from run to run)."""
    X, y, Q, truth = loo_problem(n, n_queries)
    peers = {f"ours, degree={p}": (lambda p=p: NadarayaWatsonRegressor(bandwidth="loo",
                                                                       degree=p))
             for p in degrees}
    kernelsmooth = importlib.util.find_spec("kernelsmooth") is not None
    if kernelsmooth:
        import kernelsmooth as ks

        peers["kernelsmooth LocalLinearRegression"] = ks.LocalLinearRegression
        peers["kernelsmooth KernelRegression"] = ks.KernelRegression
    results = []
    for name, make in peers.items():
        fit, fit_cpu = timed_with_cpu(lambda make=make: make().fit(X, y), repeats)
        predict, predict_cpu = timed_with_cpu(lambda fit=fit: fit.result.predict(Q),
                                              repeats)
        results.append({"peer": name, "fit_s": fit.best, "predict_s": predict.best,
                        "total_s": fit.best + predict.best, "cpu_s": fit_cpu + predict_cpu,
                        "mse": float(np.mean((predict.result - truth) ** 2))})
    by_peer = {r["peer"]: r for r in results}
    targets = []
    for ours, theirs in (("ours, degree=1", "kernelsmooth LocalLinearRegression"),
                         ("ours, degree=0", "kernelsmooth KernelRegression")):
        if ours not in by_peer:
            continue
        if theirs not in by_peer:
            targets.append({"name": f"{ours} at least {LOO_TARGET:g}x faster than {theirs}",
                            "met": None, "detail": "skipped: kernelsmooth is not installed"})
            continue
        speedup = by_peer[theirs]["total_s"] / by_peer[ours]["total_s"]
        targets.append({"name": f"{ours} at least {LOO_TARGET:g}x faster than {theirs}",
                        "met": speedup >= LOO_TARGET,
                        "detail": f"{by_peer[ours]['total_s']:.2f} s against "
                                  f"{by_peer[theirs]['total_s']:.2f} s, {speedup:.2f}x"})
    return {"config": {"n_train": n, "d": 2, "n_queries": n_queries, "noise": 0.3,
                       "degrees": list(degrees), "repeats": repeats,
                       "kernelsmooth": "installed" if kernelsmooth else "skipped"},
            "results": results, "targets": targets}


def markdown_loo(result):
    c = result["config"]
    lines = [(f"### Learned bandwidth: fit on {c['n_train']:,} × {c['d']} and predict "
              f"{c['n_queries']:,} queries (best of {c.get('repeats', 1)} calls each)"), "",
             ("| peer | fit s | predict s | total s | CPU s (fit + predict) | test MSE "
              "(noise-free target) |"),
             "|---|---|---|---|---|---|"]
    for r in result["results"]:
        lines.append(f"| {r['peer']} | {r['fit_s']:.2f} | {r['predict_s']:.2f} | "
                     f"{r['total_s']:.2f} | {r['cpu_s']:.2f} | {r['mse']:.5f} |")
    if c["kernelsmooth"] == "skipped":
        lines += ["", "kernelsmooth: skipped (not installed)."]
    return lines


def run_benchmark(series=(1000, 5000, 20_000), sizes=(1000, 5000), dims=(1, 2, 3, 8),
                  loo_n=3000, loo_queries=20_000, sections=("cv", "loo"),
                  out_dir=RESULTS_DIR, loo_degrees=(1, 0), with_co2=True):
    """Run the sections, print their tables, write the json and markdown; return the
    report."""
    report = {"machine": machine_info(), "config": {"device": "cpu"},
              "load_average": {"start": load_average()}, "sections": {}}
    chunks = [machine_line(report["machine"]) + "\n",
              ("The machine may be shared (see the load average below): the ratios within "
               "one run matter, not the seconds.\n")]
    print("".join(chunks), end="", flush=True)
    runs = {"cv": (lambda: section_cv(series, sizes, dims, with_co2), markdown_cv),
            "loo": (lambda: section_loo(loo_n, loo_queries, loo_degrees), markdown_loo)}
    runs = {k: v for k, v in runs.items() if k in sections}
    return run_sections("bench_fit_time", report, chunks, runs, out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, nargs="+", default=[1000, 5000, 20_000])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--dims", type=int, nargs="+", default=[1, 2, 3, 8])
    parser.add_argument("--loo-n", type=int, default=3000)
    parser.add_argument("--loo-queries", type=int, default=20_000)
    parser.add_argument("--sections", nargs="+", choices=["cv", "loo"], default=["cv", "loo"])
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run_benchmark(args.series, args.sizes, args.dims, args.loo_n, args.loo_queries,
                  args.sections, args.out_dir)


if __name__ == "__main__":
    main()
