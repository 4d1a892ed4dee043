"""Small calls on every route: a one-row predict against KNeighborsRegressor's.

What it measures
----------------
For each training size of ``--sizes`` (default 2,000, 10,000 and 50,000) and each dimension
of ``--dims`` (default 2 and 5): inputs uniform in [0, 1]^d, ``y = sin(6 x0) + x1``,
float64 (``--dtype float32`` for single precision), and one uniform query row. The time of
``predict`` on that row (the median of ``--calls`` calls after a warm-up, the model fitted
once; its calls interleaved with the peer's, so that both see the same state of the
machine) for every route a prediction can take (``route_``):

- ``dense``: the Gaussian at Scott's bandwidth; the Epanechnikov with ``algorithm="brute"``;
  the classifier (Gaussian, three classes);
- ``cell_list``, and ``radius`` on a k-d tree and on a ball tree: the Epanechnikov;
- ``k_nearest``: the Gaussian with ``n_neighbors=5`` on a k-d tree and by brute force;
- ``precomputed``: the Gaussian on the dense distance matrix of the training points (at the
  smallest size only: the matrix is n x n).

The Epanechnikov's bandwidth holds about ``REACH`` training points within reach of a query
(a compact kernel with none in reach falls back to the nearest point, another cost). The
peer is scikit-learn's ``KNeighborsRegressor()`` (5 neighbors, ``algorithm="auto"``) on the
same data and row (for ``precomputed``: with ``metric="precomputed"`` on the same distances).
Target: every route's time at most ``RATIO_TARGET`` times the peer's. ``compute="auto"``
computes calls this small eagerly; the compiled loop serves calls of 256 queries or more.

Usage: ``python benchmarks/bench_routes.py [--sizes N ...] [--dims D ...] [--calls C]
[--out-dir DIR]``; writes bench_routes.json and .md.
"""

import argparse
import warnings
from pathlib import Path

import numpy as np
from _common import (
    load_average,
    machine_info,
    make_problem,
    radius_holding,
    sine_wave_on_slope,
    timed,
    write_report,
)
from sklearn.metrics import pairwise_distances
from sklearn.neighbors import KNeighborsRegressor

from sklearn_nw import NadarayaWatsonClassifier, NadarayaWatsonRegressor
from sklearn_nw.bandwidth import scott_bandwidth

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SIZES = (2000, 10_000, 50_000)
DIMS = (2, 5)
CALLS = 200
REACH = 100  # training points within reach of a query, for the compact kernel
RATIO_TARGET = 2.0
# Inputs and the query uniform in [0, 1]^d, y = sin(6 x0) + x1, no noise; with the dtype:
# ``make_problem(n, 1, d, dtype=dtype, **PROBLEM)``.
PROBLEM = {"span": (0.0, 1.0), "target": sine_wave_on_slope, "noise": 0.0}


def _median_calls(call, peer, n_calls):
    """Median times of ``call`` and of ``peer``, their calls interleaved (call, peer, call,
    ...) so that both see the same state of the machine (clock, caches, other load)."""
    call(), peer()  # warm-up: first-call costs (imports, allocations) are not a small call's
    times = np.empty((n_calls, 2))
    for i in range(n_calls):
        for j, f in enumerate((call, peer)):
            times[i, j] = timed(f).best
    return tuple(float(t) for t in np.median(times, axis=0))


def _models(X, d, n):
    h, r = scott_bandwidth(X), radius_holding(REACH, n, d)
    return {
        "dense, Gaussian": NadarayaWatsonRegressor(bandwidth=h),
        "dense, Epanechnikov (brute)": NadarayaWatsonRegressor(
            "epanechnikov", bandwidth=r, algorithm="brute"),
        "dense, classifier": NadarayaWatsonClassifier(bandwidth=h),
        "cell_list": NadarayaWatsonRegressor("epanechnikov", bandwidth=r,
                                             algorithm="cell_list"),
        "radius, kd_tree": NadarayaWatsonRegressor("epanechnikov", bandwidth=r,
                                                   algorithm="kd_tree"),
        "radius, ball_tree": NadarayaWatsonRegressor("epanechnikov", bandwidth=r,
                                                     algorithm="ball_tree"),
        "k_nearest, kd_tree": NadarayaWatsonRegressor(bandwidth=h, n_neighbors=5,
                                                      algorithm="kd_tree"),
        "k_nearest, brute": NadarayaWatsonRegressor(bandwidth=h, n_neighbors=5,
                                                    algorithm="brute"),
    }


def measure(n, d, n_calls, with_precomputed, dtype="float64"):
    X, y, q = make_problem(n, 1, d, dtype=dtype, **PROBLEM)
    labels = np.digitize(y, [0.3, 1.0])
    knn = KNeighborsRegressor().fit(X, y)
    rows = []
    for name, model in _models(X, d, n).items():
        model.fit(X, labels if name == "dense, classifier" else y)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            seconds, peer = _median_calls(lambda m=model: m.predict(q),
                                          lambda: knn.predict(q), n_calls)
        rows.append({"route": model.route_, "model": name, "time_s": seconds,
                     "peer_s": peer, "ratio": seconds / peer, "warned": bool(caught)})
    if with_precomputed:
        D, Dq = pairwise_distances(X), pairwise_distances(q, X)
        model = NadarayaWatsonRegressor(bandwidth=float(scott_bandwidth(X).mean()),
                                        metric="precomputed").fit(D, y)
        peer_model = KNeighborsRegressor(metric="precomputed").fit(D, y)
        seconds, peer_p = _median_calls(lambda: model.predict(Dq),
                                        lambda: peer_model.predict(Dq), n_calls)
        rows.append({"route": model.route_, "model": "precomputed, Gaussian",
                     "time_s": seconds, "peer_s": peer_p, "ratio": seconds / peer_p,
                     "warned": False})
    return {"n_train": n, "d": d, "rows": rows}


def to_markdown(result):
    c = result["config"]
    lines = ["### One-row predict on every route", "",
             (f"Inputs uniform in [0, 1]^d, {c['dtype']}; one query row; the median of "
              f"{c['calls']} calls after a warm-up, each call of the model followed by one "
              f"of the peer. Epanechnikov bandwidth: about {REACH} training points within "
              "reach. Peer: KNeighborsRegressor() on the same data and row."),
             "", "| n | d | route | model | time ms | KNeighborsRegressor ms | ratio |",
             "|---|---|---|---|---|---|---|"]
    for point in result["points"]:
        for r in point["rows"]:
            lines.append(f"| {point['n_train']:,} | {point['d']} | {r['route']} | "
                         f"{r['model']} | {r['time_s'] * 1e3:.3f} | {r['peer_s'] * 1e3:.3f} | "
                         f"{r['ratio']:.2f} |")
    return lines


def run_benchmark(sizes=SIZES, dims=DIMS, calls=CALLS, out_dir=RESULTS_DIR, dtype="float64"):
    out_dir = Path(out_dir)
    report = {"machine": machine_info(), "load_average": {"start": load_average()}}
    points = [measure(n, d, calls, with_precomputed=n == min(sizes), dtype=dtype)
              for n in sizes for d in dims]
    rows = [(p, r) for p in points for r in p["rows"]]
    worst_point, worst = max(rows, key=lambda pr: pr[1]["ratio"])
    target = {"name": f"every route's one-row predict at most {RATIO_TARGET:g}x "
                      "KNeighborsRegressor's",
              "met": worst["ratio"] <= RATIO_TARGET,
              "detail": f"worst {worst['ratio']:.2f}x: {worst['model']} at "
                        f"n={worst_point['n_train']:,}, d={worst_point['d']}"}
    result = {"config": {"sizes": list(sizes), "dims": list(dims), "calls": calls,
                         "reach": REACH, "dtype": dtype},
              "points": points, "targets": [target]}
    return write_report("bench_routes", report, result, to_markdown, out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--dims", type=int, nargs="+", default=list(DIMS))
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    args = parser.parse_args(argv)
    run_benchmark(args.sizes, args.dims, args.calls, args.out_dir, args.dtype)


if __name__ == "__main__":
    main()
