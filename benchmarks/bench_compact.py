"""Compact kernels against scikit-learn's RadiusNeighborsRegressor, at every neighborhood size.

What it measures
----------------
``--n`` training points (default 1,000,000) uniform in [0, s]^2 for each span s of
``--spans``, ``y = sin(6 x0) + x1``, the Epanechnikov kernel at bandwidth ``RADIUS`` = 0.05,
``--n-queries`` uniform queries in the same square (default 10,000), float64. The span sets
the neighborhood size: about ``pi RADIUS^2 n / s^2`` training points within reach of a
query, from ~7,850 (s = 1) down to ~80 (s = 10). For each span, fit + predict (best of
``--repeats``) of ``NadarayaWatsonRegressor("epanechnikov", bandwidth=RADIUS)`` with
``algorithm="auto"`` (the cell list at this size and dimension) and of scikit-learn's
``RadiusNeighborsRegressor(radius=RADIUS, weights=epanechnikov_weights)``, which gives each
neighbor the same weight ``1 - (d / RADIUS)**2``; at the first span also the k-d tree and
ball tree searches (``algorithm="kd_tree"``, ``"ball_tree"``).

Targets: scikit-learn / sklearn_nw (auto) time >= ``SPEED_TARGET`` at the spans nearest to
~8,000 and to ~300 points within reach (``TARGET_REACH``), and the same predictions (max
|difference| <= ``DIFF_TARGET``) at every span. The sweep is plotted (time and ratio against
the points within reach) to bench_compact.png.

Usage: ``python benchmarks/bench_compact.py [--n N] [--n-queries M] [--spans S ...]
[--repeats R] [--out-dir DIR]``; writes bench_compact.json, .md and .png.
"""

import argparse
import warnings
from pathlib import Path

import numpy as np
from _common import (
    load_average,
    machine_info,
    make_problem,
    sine_wave_on_slope,
    timed,
    write_report,
)
from sklearn.neighbors import RadiusNeighborsRegressor

from sklearn_nw import NadarayaWatsonRegressor

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RADIUS = 0.05
SPANS = (1.0, 1.5, 2.5, 5.0, 10.0)
TARGET_REACH = (8000, 300)  # the neighborhood sizes the speed target is measured at
SPEED_TARGET = 2.0
DIFF_TARGET = 1e-6
# With ``span=(0, s)``: inputs and queries uniform in [0, s]^2, y = sin(6 x0) + x1, float64.
PROBLEM = {"target": sine_wave_on_slope, "noise": 0.0, "dtype": np.float64}


def epanechnikov_weights(dist):
    """scikit-learn neighbor weights ``1 - (d / RADIUS)**2`` for the distances it passes: a
    2-d array (k neighbors) or an object array of per-query arrays (radius neighbors)."""
    dist = np.asarray(dist)
    if dist.dtype != object:
        return 1.0 - (dist / RADIUS) ** 2
    weights = np.empty(len(dist), dtype=object)
    for i, row in enumerate(dist):
        weights[i] = 1.0 - (np.asarray(row, dtype=np.float64) / RADIUS) ** 2
    return weights


def _search(model):
    """The search a fitted model's predict uses."""
    if isinstance(model, RadiusNeighborsRegressor):
        return model._fit_method
    if model.route_ == "radius":
        return model.key_set_.index.algorithm
    return model.route_


def _methods(first):
    methods = {"sklearn_nw auto": lambda: NadarayaWatsonRegressor("epanechnikov",
                                                                  bandwidth=RADIUS)}
    if first:
        for algorithm in ("kd_tree", "ball_tree"):
            methods[f"sklearn_nw {algorithm}"] = (
                lambda a=algorithm: NadarayaWatsonRegressor("epanechnikov", bandwidth=RADIUS,
                                                            algorithm=a))
    methods["scikit-learn RadiusNeighborsRegressor"] = lambda: RadiusNeighborsRegressor(
        radius=RADIUS, weights=epanechnikov_weights)
    return methods


def measure_span(n, n_queries, span, repeats, first):
    """Every method at one span: times, the search used, differences to scikit-learn."""
    X, y, Q = make_problem(n, n_queries, 2, span=(0.0, span), **PROBLEM)
    results, preds = [], {}
    for name, make in _methods(first).items():
        fitted = {}

        def call(make=make, fitted=fitted):
            fitted["model"] = make().fit(X, y)
            return fitted["model"].predict(Q)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            times, pred, _ = timed(call, repeats)
        preds[name] = np.asarray(pred, dtype=np.float64)
        results.append({"method": name, "search": _search(fitted["model"]),
                        "times_s": times, "time_s": min(times),
                        "n_nan": int(np.isnan(preds[name]).sum()),
                        "warnings": sorted({f"{w.category.__name__}: {w.message}"
                                            for w in caught})})
    peer = results[-1]
    for r in results[:-1]:
        diff = np.abs(preds[r["method"]] - preds[peer["method"]])
        r["max_abs_diff"] = float(np.nanmax(diff)) if np.isfinite(diff).any() else None
        r["ratio"] = peer["time_s"] / r["time_s"]  # scikit-learn time / this time
    reach = np.pi * RADIUS**2 * n / span**2  # expected training points within reach
    return {"span": span, "reach": reach, "results": results}


def _targets(sweep):
    """The speed target at the spans nearest to each of TARGET_REACH, the agreement at all."""
    targets = []
    for wanted in TARGET_REACH:
        point = min(sweep, key=lambda p: abs(np.log(p["reach"] / wanted)))
        auto = point["results"][0]
        targets.append({
            "name": f"at least {SPEED_TARGET:g}x faster than RadiusNeighborsRegressor at "
                    f"~{wanted:,} points within reach",
            "met": auto["ratio"] >= SPEED_TARGET,
            "detail": f"{auto['ratio']:.2f}x at {point['reach']:,.0f} points within reach "
                      f"(span {point['span']:g}), target >= {SPEED_TARGET:g}x"})
    worst = max((p["results"][0]["max_abs_diff"] or np.inf) for p in sweep)
    nan = sum(p["results"][-1]["n_nan"] for p in sweep)
    targets.append({"name": "same predictions", "met": worst <= DIFF_TARGET and nan == 0,
                    "detail": f"max |diff| {worst:.1e} over the sweep, {nan} scikit-learn NaN, "
                              f"target <= {DIFF_TARGET:g}"})
    return targets


def _plot(sweep, path):
    """Fit + predict time and the ratio against the points within reach."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reach = [p["reach"] for p in sweep]
    ours = [p["results"][0]["time_s"] for p in sweep]
    theirs = [p["results"][-1]["time_s"] for p in sweep]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.loglog(reach, ours, "o-", label="sklearn_nw (algorithm='auto')")
    left.loglog(reach, theirs, "s:", label="RadiusNeighborsRegressor")
    left.set_xlabel("training points within reach of a query")
    left.set_ylabel("fit + predict time (s)")
    left.legend(fontsize=8)
    right.semilogx(reach, [t / o for t, o in zip(theirs, ours)], "o-")
    right.axhline(SPEED_TARGET, color="k", ls="--", lw=1, label=f"target {SPEED_TARGET:g}x")
    right.set_xlabel("training points within reach of a query")
    right.set_ylabel("RadiusNeighborsRegressor time / sklearn_nw time")
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("Epanechnikov, 2-D, fit + predict", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def to_markdown(result):
    c = result["config"]
    lines = ["### Compact kernel against RadiusNeighborsRegressor, by neighborhood size", "",
             (f"{c['n_train']:,} training points uniform in [0, s]^2, y = sin(6 x0) + x1, "
              f"Epanechnikov at bandwidth {c['bandwidth']}, {c['n_queries']:,} uniform "
              f"queries, float64; fit + predict, best of {c['repeats']}; plot: "
              f"{result['plot']}."), "",
             "| span s | points within reach | method | search | time s "
             "| scikit-learn / this | max \\|diff\\| |",
             "|---|---|---|---|---|---|---|"]
    warned = {}
    for p in result["sweep"]:
        for r in p["results"]:
            ratio = f"{r['ratio']:.2f}" if "ratio" in r else "1.00"
            diff = r.get("max_abs_diff")
            lines.append(f"| {p['span']:g} | {p['reach']:,.0f} | {r['method']} | "
                         f"{r['search']} | {r['time_s']:.3f} | {ratio} | "
                         f"{'–' if diff is None else f'{diff:.1e}'} |")
            if r["warnings"]:
                warned[f"{r['method']} (span {p['span']:g})"] = r["warnings"]
    if warned:
        lines += ["", "Warnings raised:",
                  *(f"- {label}: {'; '.join(w)}" for label, w in warned.items())]
    return lines


def run_benchmark(n=1_000_000, n_queries=10_000, spans=SPANS, repeats=2, out_dir=RESULTS_DIR):
    """Sweep the spans, write the json, markdown and plot; return the report."""
    out_dir = Path(out_dir)
    report = {"machine": machine_info(), "load_average": {"start": load_average()}}
    sweep = []
    for i, span in enumerate(spans):
        sweep.append(measure_span(n, n_queries, span, repeats, first=i == 0))
        auto, peer = sweep[-1]["results"][0], sweep[-1]["results"][-1]
        print(f"span {span:g}: {sweep[-1]['reach']:,.0f} within reach, sklearn_nw "
              f"{auto['time_s']:.3f} s, RadiusNeighborsRegressor {peer['time_s']:.3f} s",
              flush=True)
    result = {"config": {"n_train": n, "n_queries": n_queries, "d": 2, "dtype": "float64",
                         "kernel": "epanechnikov", "bandwidth": RADIUS, "spans": list(spans),
                         "repeats": repeats, "timed": "fit + predict"},
              "sweep": sweep, "targets": _targets(sweep),
              "plot": _plot(sweep, out_dir / "bench_compact.png")}
    return write_report("bench_compact", report, result, to_markdown, out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="training points")
    parser.add_argument("--n-queries", type=int, default=10_000, help="queries")
    parser.add_argument("--spans", type=float, nargs="+", default=list(SPANS),
                        help="sides of the square the points fill")
    parser.add_argument("--repeats", type=int, default=2, help="best of this many")
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run_benchmark(args.n, args.n_queries, args.spans, args.repeats, args.out_dir)


if __name__ == "__main__":
    main()
