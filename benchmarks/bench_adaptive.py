"""Adaptive-bandwidth benchmark: what a prediction with a balloon or sample-point bandwidth
costs, against a fixed bandwidth and k nearest neighbors.

What it measures
----------------
One section, ``predict``: ``NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(kind,
n_neighbors=k))`` for both kinds, fitted on n training points (standard normal, d
features, float64, ``_common.make_problem``), predicting n_q queries, for each (n, d) of
``--sizes`` and ``--dims``; in the same run, on the same data: the fixed bandwidth's dense
route (``NadarayaWatsonRegressor(bandwidth=h)``, h Scott's rule, ``compute="eager"``) and
``KNeighborsRegressor(n_neighbors=k)`` (scikit-learn's tree search). Predict times are the
best of ``--repeats`` calls after a first one; ratios are the adaptive time over each
peer's. The adaptive route finds each query's k-th distance (balloon) and then sums over
every training point, so it costs what the dense sums cost plus one k-nearest search: no
target, the ratios are reported.

Usage: ``python benchmarks/bench_adaptive.py [--sizes N ...] [--dims D ...] [--n-queries M]
[--k K] [--repeats R] [--out-dir DIR]``; writes bench_adaptive.json and .md.
"""

import argparse
from pathlib import Path

import numpy as np
from _common import load_average, machine_info, machine_line, make_problem, run_sections, timed
from sklearn.neighbors import KNeighborsRegressor

from sklearn_nw import AdaptiveBandwidth, NadarayaWatsonRegressor

RESULTS_DIR = Path(__file__).resolve().parent / "results"
KINDS = ("balloon", "sample_point")


def section_predict(sizes=(2000, 20_000), dims=(2, 8), n_queries=2000, k=16, repeats=3):
    """Predict times of both adaptive kinds against a fixed bandwidth and KNN."""
    results = []
    for n in sizes:
        for d in dims:
            X, y, Q = (a.astype(np.float64) for a in make_problem(n, n_queries, d))
            models = {kind: NadarayaWatsonRegressor(
                bandwidth=AdaptiveBandwidth(kind, n_neighbors=k)).fit(X, y) for kind in KINDS}
            models["fixed"] = NadarayaWatsonRegressor(compute="eager").fit(X, y)
            models["knn"] = KNeighborsRegressor(n_neighbors=k).fit(X, y)
            times = {}
            for name, model in models.items():
                model.predict(Q[:10])  # first call: lazily built state, thread pools
                times[name] = timed(lambda model=model, Q=Q: model.predict(Q), repeats).best
            row = {"n": n, "d": d, "n_queries": n_queries, "k": k, "times_s": times}
            for kind in KINDS:
                row[f"{kind}_ns_per_pair"] = times[kind] / (n * n_queries) * 1e9
                row[f"{kind}_over_fixed"] = times[kind] / times["fixed"]
                row[f"{kind}_over_knn"] = times[kind] / times["knn"]
            results.append(row)
    return {"config": {"sizes": list(sizes), "dims": list(dims), "n_queries": n_queries,
                       "k": k, "repeats": repeats, "dtype": "float64"},
            "results": results, "targets": []}


def markdown_predict(result):
    c = result["config"]
    lines = [(f"### Adaptive bandwidths: predict, {c['n_queries']:,} queries, k = {c['k']}, "
              f"float64, best of {c['repeats']}"), "",
             ("| n × d | balloon s | sample-point s | fixed h s | KNN s | ns / pair (balloon, "
              "sample-point) | / fixed | / KNN |"), "|---|---|---|---|---|---|---|---|"]
    for r in result["results"]:
        t = r["times_s"]
        lines.append(
            f"| {r['n']:,} × {r['d']} | {t['balloon']:.3f} | {t['sample_point']:.3f} "
            f"| {t['fixed']:.3f} | {t['knn']:.3f} | {r['balloon_ns_per_pair']:.1f}, "
            f"{r['sample_point_ns_per_pair']:.1f} | {r['balloon_over_fixed']:.1f}, "
            f"{r['sample_point_over_fixed']:.1f} | {r['balloon_over_knn']:.1f}, "
            f"{r['sample_point_over_knn']:.1f} |")
    return lines + ["", ("Ratios: the adaptive kind's time over the fixed bandwidth's dense "
                         "route and over KNeighborsRegressor with the same k, in this run.")]


def run_benchmark(sizes=(2000, 20_000), dims=(2, 8), n_queries=2000, k=16, repeats=3,
                  out_dir=RESULTS_DIR):
    """Run the section, print its table, write the json and markdown; return the report."""
    report = {"machine": machine_info(), "config": {"device": "cpu"},
              "load_average": {"start": load_average()}, "sections": {}}
    chunks = [machine_line(report["machine"]) + "\n", "No targets: the ratios are reported.\n"]
    print("".join(chunks), end="", flush=True)
    runs = {"predict": (lambda: section_predict(sizes, dims, n_queries, k, repeats),
                        markdown_predict)}
    return run_sections("bench_adaptive", report, chunks, runs, out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--n-queries", type=int, default=2000)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run_benchmark(args.sizes, args.dims, args.n_queries, args.k, args.repeats, args.out_dir)


if __name__ == "__main__":
    main()
