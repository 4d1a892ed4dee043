"""Dask benchmark: sklearn_nw.dask against the local estimator, with 1 and 2 workers.

What it measures
----------------
One section, ``overhead``: the Gaussian regressor, float64, d = ``--d`` features, n
training points and n queries for each n of ``--sizes`` (default 20,000, 50,000 and
100,000). Peers, in this process and on this machine:

- ``local``: :class:`sklearn_nw.NadarayaWatsonRegressor` (torch's threads: every core);
- ``dask_1x2``: :class:`sklearn_nw.dask.NadarayaWatsonRegressor` on a LocalCluster of one
  worker process with 2 threads, the data in 2 blocks;
- ``dask_2x1``: two worker processes with one thread each, the data in 2 blocks each:
  what one more worker buys over one with the same cores.

dask's nanny starts workers with ``OMP_NUM_THREADS=1``, so torch computes on one thread
per task there: the cluster's parallelism is its tasks.

Predict times: the first call after fit and the best of ``--repeats`` more (``compute()``
included); fit times (statistics, shards on the workers). Each dask prediction is checked
against the local one (max absolute difference). The bytes sent per (query block, shard)
task are computed from the shapes: the queries (b x d float64) to the shard's worker and
the partial sums (b x (t + 3) float64) back. No targets (the issue asks for the overhead
and the gain, reported as ratios).

Usage: ``python benchmarks/bench_dask.py [--sizes N ...] [--d D] [--repeats R]
[--out-dir DIR]``; writes bench_dask.json and .md.
"""

import argparse
import warnings
from pathlib import Path

import numpy as np
from _common import load_average, machine_info, machine_line, make_problem, run_sections, timed

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CLUSTERS = {"dask_1x2": (1, 2), "dask_2x1": (2, 1)}  # name -> (workers, threads each)


def sine_of_first(X):
    """``sin(x0)``: the target depends on the first feature only."""
    return np.sin(X[:, 0])


# Standard normal inputs and queries, sin(x0) plus noise of scale 0.1, float64, the queries
# drawn after the noise: ``make_problem(n, n, d, **PROBLEM)``.
PROBLEM = {"target": sine_of_first, "noise": 0.1, "dtype": np.float64, "queries_last": True}


def _times(fitted, predicted):
    """The fit's time, the first predict's after it and the best of the repeated ones."""
    return {"fit_s": fitted.best, "first_predict_s": predicted.first,
            "predict_s": predicted.best}


def _local(X, y, Q, repeats):
    from sklearn_nw import NadarayaWatsonRegressor

    fitted = timed(lambda: NadarayaWatsonRegressor().fit(X, y))
    predicted = timed(lambda: fitted.result.predict(Q), repeats, first_call=True)
    return _times(fitted, predicted), predicted.result


def _dask(X, y, Q, repeats, workers, threads, expected):
    import dask.array as da
    import distributed

    from sklearn_nw.dask import NadarayaWatsonRegressor

    with distributed.LocalCluster(n_workers=workers, threads_per_worker=threads,
                                  processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        blocks = 2 * workers
        chunks = -(-len(X) // blocks)
        Xd = da.from_array(X, chunks=(chunks, X.shape[1])).persist()
        Qd = da.from_array(Q, chunks=(-(-len(Q) // blocks), Q.shape[1])).persist()
        fitted = timed(lambda: NadarayaWatsonRegressor().fit(Xd, y))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # dask's notes on graph sizes
            predicted = timed(lambda: fitted.result.predict(Qd).compute(), repeats,
                              first_call=True)
        b = -(-len(Q) // blocks)
        return {**_times(fitted, predicted), "shards": fitted.result.n_shards_,
                "query_blocks": blocks,
                "max_abs_diff": float(np.abs(predicted.result - expected).max()),
                "bytes_to_shard_per_task": b * X.shape[1] * 8,
                "bytes_back_per_task": b * (1 + 3) * 8}


def run_overhead(sizes, d, repeats):
    rows = []
    for n in sizes:
        X, y, Q = make_problem(n, n, d, **PROBLEM)
        local, expected = _local(X, y, Q, repeats)
        row = {"n": n, "d": d, "local": local}
        for name, (workers, threads) in CLUSTERS.items():
            print(f"  n={n} {name}", flush=True)
            row[name] = _dask(X, y, Q, repeats, workers, threads, expected)
        rows.append(row)
    return {"config": {"sizes": sizes, "d": d, "repeats": repeats}, "results": rows,
            "targets": []}


def overhead_markdown(result):
    lines = [
        "### Dask: sklearn_nw.dask against the local estimator (Gaussian, float64, "
        f"d = {result['config']['d']}, n training points and n queries)",
        "",
        "| n | local predict s | 1 worker x 2 threads s | 2 workers x 1 thread s | "
        "overhead 1x2 / local | gain 2x1 over 1x2 | first predict s (local / 1x2 / 2x1) | "
        "fit s (local / 1x2 / 2x1) | max abs diff | bytes per task (to / back) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["results"]:
        loc, one, two = r["local"], r["dask_1x2"], r["dask_2x1"]
        lines.append(
            f"| {r['n']:,} | {loc['predict_s']:.2f} | {one['predict_s']:.2f} | "
            f"{two['predict_s']:.2f} | {one['predict_s'] / loc['predict_s']:.2f}x | "
            f"{one['predict_s'] / two['predict_s']:.2f}x | "
            f"{loc['first_predict_s']:.2f} / {one['first_predict_s']:.2f} / "
            f"{two['first_predict_s']:.2f} | {loc['fit_s']:.2f} / {one['fit_s']:.2f} / "
            f"{two['fit_s']:.2f} | {max(one['max_abs_diff'], two['max_abs_diff']):.1e} | "
            f"{one['bytes_to_shard_per_task']:,} / {one['bytes_back_per_task']:,} |")
    lines += ["", "Times are wall seconds on this machine; predict is the best of the repeats "
              "after a first call, `compute()` included. The dask runs pool every query block "
              "against every shard (2 blocks per worker) and merge the partial sums by a tree "
              "reduction."]
    return lines


def run_benchmark(sizes=(20_000, 50_000, 100_000), d=4, repeats=2, out_dir=RESULTS_DIR):
    machine = machine_info()
    report = {"machine": machine, "load_average": {"start": load_average()}, "sections": {}}
    chunks = [machine_line(machine) + "\nNo targets: the overhead and the gain are reported.\n"]
    runs = {"overhead": (lambda: run_overhead(list(sizes), d, repeats), overhead_markdown)}
    return run_sections("bench_dask", report, chunks, runs, out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[20_000, 50_000, 100_000])
    parser.add_argument("--d", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run_benchmark(args.sizes, args.d, args.repeats, args.out_dir)


if __name__ == "__main__":
    main()
