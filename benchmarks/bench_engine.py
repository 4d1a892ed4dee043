"""Engine benchmark: how dense, tree and k-nearest predictions scale, and what they cost.

What it measures
----------------
Three sections (``--sections``), on the CPU; compact kernels against
RadiusNeighborsRegressor are bench_compact.py's.

1. ``scaling``: ``NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h,
   compute="eager").fit(X, y).predict(Q)`` (the eager engine: ``"auto"`` would compile
   inside the largest call, see below) in float32 with ``n_queries = n_train = n`` for each of
   ``--sizes`` (default 1,000 to 100,000), d=4, standard normal data (``_common.make_problem``),
   one fixed h: Scott's rule of the largest training set. Each size runs in a fresh process
   (``_common.run_in_child``): the best of ``SMALL_REPEATS`` timed calls, then the peak
   extra resident memory in a call of its own; the sizes from ``ONE_RUN_FROM`` on run once,
   timed and sampled together. Targets: the slope of log time against log (query-key pairs)
   over the sizes from ``--slope-from`` (default 10,000) is within ``SLOPE_TOLERANCE`` of 1
   (linear in n_queries x n_train); the largest size stays under ``MEMORY_TARGET_MB`` extra.
   The plot of time against pairs (log-log, with a line of slope 1) goes to bench_engine.png,
   with the ``SCALING_PEERS`` of ``_common.PREPARE`` timed the same way: the package's compiled
   path (``compute="compiled"``, compile excluded) at every size, with the same two
   targets, and chunked eager torch and pykeops up to ``PEER_MAX_N``.
2. ``knn``: n=``--n-knn`` training points, d=4, standard normal, float64, the Gaussian kernel at
   Scott's bandwidth, ``--n-knn-queries`` queries. For each of ``--ks``, the predict time (best
   of ``--repeats``; the fit, which builds the tree, is timed apart) with ``n_neighbors=k``, the
   max and mean |prediction - exact prediction| (the exact model attends to every training
   point) and the mean attention mass the exact model puts outside each query's k nearest
   training points (from ``predict(Q, return_attention=True)``, a dense matrix). No target.
3. ``kernels``: 20,000 queries × 20,000 training points (``--n-kernels``), d=8, float32,
   each of ``KERNEL_NAMES`` at Scott's bandwidth (times ``COMPACT_WIDEN`` for compact
   kernels): predict (best of 3) on the eager engine (``compute="eager"``) and on the
   compiled loop (``compute="compiled"``; its first call, on 256 queries, compiles and is
   shown apart), and the largest difference of their predictions. No target.

Targets are reported, never enforced. The 1-minute load average at the start and the end is
recorded: on a shared machine a core taken by another process stalls every parallel torch
operation, so time on an idle machine, or with ``--threads 1`` (which also reaches the
fresh processes of section 1).

Usage: ``python benchmarks/bench_engine.py [--sections S ...] [--sizes N ...] [--slope-from N]
[--n-knn N] [--n-knn-queries M] [--ks K ...]
[--n-kernels N] [--repeats R] [--out-dir DIR] [--threads T]``; writes bench_engine.json, .md
and .png.
"""

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from _common import (
    PeakRSS,
    load_average,
    machine_info,
    machine_line,
    make_problem,
    run_in_child,
    section_markdown,
    timed,
    warning_lines,
)

from sklearn_nw import NadarayaWatsonRegressor
from sklearn_nw.bandwidth import scott_bandwidth

SECTIONS = ("scaling", "knn", "kernels")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
SIZES = (1000, 3000, 10_000, 30_000, 100_000)
SLOPE_FROM = 10_000
SMALL_REPEATS = 2  # section 1: best of this many below ONE_RUN_FROM
ONE_RUN_FROM = 100_000
SLOPE_TOLERANCE = 0.15
MEMORY_TARGET_MB = 1024.0
KS = (10, 30, 100, 300, 1000)
# Section 3: the dense paths per kernel; the compact kernels' bandwidth is Scott's rule times
# COMPACT_WIDEN, so that (almost) every query has training points inside the support in d=8.
KERNEL_NAMES = ("gaussian", "exponential", "epanechnikov", "tricube")
COMPACT_WIDEN = 5.0
# Section 1 also times these peers (_common.PREPARE), up to this size, for the plot.
SCALING_PEERS = ("sklearn_nw_compiled", "chunked", "pykeops")
OWN_PEERS = ("sklearn_nw_compiled",)  # the package's other path: every size
PEER_MAX_N = 30_000


def _progress(message):
    print(f"[bench_engine] {message}", file=sys.stderr, flush=True)


def _target(name, met, detail):
    return {"name": name, "met": met, "detail": detail}


# -- 1. scaling of dense predict ---------------------------------------------------------------
def section_scaling(sizes=SIZES, slope_from=SLOPE_FROM, d=4, out_dir=RESULTS_DIR):
    """Each size in a fresh process; the log-log slope over the large sizes; the plot."""
    sizes = sorted(sizes)
    X_all, y_all, Q_all = make_problem(sizes[-1], sizes[-1], d)
    h = scott_bandwidth(X_all)  # one bandwidth for every size: only n changes
    results = []
    for n in sizes:
        _progress(f"scaling: n = {n:,}")
        repeats = SMALL_REPEATS if n < ONE_RUN_FROM else 1
        r = run_in_child("sklearn_nw_eager", X_all[:n], y_all[:n], Q_all[:n], h, repeats,
                         True)
        r.pop("pred", None)
        r.pop("compile_s", None)
        if r["status"] == "ok":
            r["pairs"] = n * n
            r["ns_per_pair"] = r["time_s"] / r["pairs"] * 1e9
            r["memory_measured"] = "separate call" if repeats > 1 else "during the timed call"
        results.append({"n": n, **r})
    peers = []
    for peer, n in ((p, n) for p in SCALING_PEERS for n in sizes
                    if n <= PEER_MAX_N or p in OWN_PEERS):
        _progress(f"scaling: {peer}, n = {n:,}")
        # pykeops reuses its build cache: the compile is excluded from the timing anyway.
        repeats = SMALL_REPEATS if n < ONE_RUN_FROM else 1
        r = run_in_child(peer, X_all[:n], y_all[:n], Q_all[:n], h, repeats, False)
        peers.append({"peer": peer, "n": n, "status": r["status"], "time_s": r.get("time_s"),
                      "peak_extra_mb": r.get("peak_extra_mb"),
                      "compile_s": r.get("compile_s"), "reason": r.get("reason")})
    ok = [r for r in results if r["status"] == "ok"]
    fitted = [r for r in ok if r["n"] >= slope_from]
    slope, targets = _linearity_targets("", results, slope_from)
    for peer in OWN_PEERS:
        series = [{**r, "pairs": r["n"] ** 2} for r in peers if r["peer"] == peer]
        targets += _linearity_targets(f"{peer}: ", series, slope_from)[1]
    plot = _plot_scaling(ok, fitted, peers, Path(out_dir) / "bench_engine.png")
    config = {"sizes": sizes, "d": d, "dtype": "float32", "kernel": "gaussian",
              "bandwidth": "scott of the largest training set", "h": h.tolist(),
              "repeats": f"best of {SMALL_REPEATS} below n = {ONE_RUN_FROM:,}, else 1 run",
              "slope_from": slope_from, "peers": list(SCALING_PEERS),
              "peer_max_n": PEER_MAX_N}
    return {"config": config, "results": results, "peers": peers, "slope": slope,
            "plot": plot, "targets": targets}


def _linearity_targets(prefix, results, slope_from):
    """The log-log slope of time against pairs over the sizes from ``slope_from``, and the
    two targets (linear time, memory of the largest size) of one series."""
    fitted = [r for r in results if r["status"] == "ok" and r["n"] >= slope_from]
    slope = None
    if len(fitted) >= 2:
        slope = float(np.polyfit(np.log([r["pairs"] for r in fitted]),
                                 np.log([r["time_s"] for r in fitted]), 1)[0])
    largest = results[-1]
    fitted_sizes = ", ".join(f"{r['n']:,}" for r in fitted)
    slope_detail = (f"slope {slope:.3f} over n = {fitted_sizes}, target 1 ± {SLOPE_TOLERANCE}"
                    if slope is not None else
                    f"fewer than 2 sizes >= {slope_from:,} ran")
    memory_ok = largest["status"] == "ok" and largest["peak_extra_mb"] < MEMORY_TARGET_MB
    memory_detail = (f"{largest['peak_extra_mb']:.0f} MB extra at {largest['n']:,} × "
                     f"{largest['n']:,}, target < {MEMORY_TARGET_MB:.0f} MB"
                     if largest["status"] == "ok" else f"n = {largest['n']:,} did not run")
    return slope, [
        _target(f"{prefix}time linear in pairs", None if slope is None
                else abs(slope - 1) <= SLOPE_TOLERANCE, slope_detail),
        _target(f"{prefix}memory of the largest size", memory_ok, memory_detail),
    ]


def _plot_scaling(ok, fitted, peers, path):
    """Time against query-key pairs, log-log, with a line of slope 1 and the peers' times;
    the file name or None."""
    if not ok:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = np.array([r["pairs"] for r in ok], dtype=float)
    times = np.array([r["time_s"] for r in ok])
    anchor = fitted or ok  # the slope-1 line goes through the geometric mean of these
    log_p0 = np.mean(np.log([r["pairs"] for r in anchor]))
    log_t0 = np.mean(np.log([r["time_s"] for r in anchor]))
    grid = np.array([pairs.min(), pairs.max()])
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.loglog(pairs, times, "o-", label="sklearn_nw eager engine (float32, d=4)")
    ax.loglog(grid, np.exp(log_t0 + np.log(grid) - log_p0), "k--", lw=1, label="slope 1")
    labels = {"sklearn_nw_compiled": "sklearn_nw compiled (compile excluded)",
              "chunked": "chunked eager torch", "pykeops": "pykeops (CPU, compile excluded)"}
    for peer in SCALING_PEERS:
        done = [r for r in peers if r["peer"] == peer and r["status"] == "ok"]
        if done:
            ax.loglog([float(r["n"]) ** 2 for r in done], [r["time_s"] for r in done],
                      "o-" if peer in OWN_PEERS else "s:", label=labels.get(peer, peer))
    for r in ok:
        ax.annotate(f"n={r['n']:,}", (r["pairs"], r["time_s"]), textcoords="offset points",
                    xytext=(5, -12), fontsize=8)
    ax.set_xlabel("query-key pairs (n_queries × n_train)")
    ax.set_ylabel("fit + predict time (s)")
    ax.set_title("Gaussian Nadaraya-Watson, n_queries = n_train = n")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def markdown_scaling(result):
    lines = ["### 1. Scaling of dense predict (the eager engine, `compute=\"eager\"`)", "",
             (f"Gaussian, float32, d={result['config']['d']}, n_queries = n_train = n, one "
              f"h (Scott's rule at n = {result['config']['sizes'][-1]:,}); each size in a "
              "fresh process."), "",
             "| n | pairs | runs | time s | ns / pair | peak extra MB (measured) |",
             "|---|---|---|---|---|---|"]
    for r in result["results"]:
        if r["status"] != "ok":
            lines.append(f"| {r['n']:,} | {r['status']}: {r['reason']} | | | | |")
            continue
        runs = f"best of {r['repeats']}" if r["repeats"] > 1 else "1 run"
        lines.append(f"| {r['n']:,} | {r['pairs']:.1e} | {runs} | {r['time_s']:.3f} "
                     f"| {r['ns_per_pair']:.2f} | {r['peak_extra_mb']:.0f} "
                     f"({r['memory_measured']}) |")
    peers = result.get("peers", [])
    if peers:
        lines += ["", ("Peers in the same run (each size in a fresh process, best of "
                       f"{SMALL_REPEATS} below n = {ONE_RUN_FROM:,}; ratio = peer time / "
                       "sklearn_nw eager time; compiles excluded):"), "",
                  "| peer | n | time s | ratio | peak extra MB |", "|---|---|---|---|---|"]
        ours = {r["n"]: r["time_s"] for r in result["results"] if r["status"] == "ok"}
        for r in peers:
            if r["status"] != "ok":
                lines.append(f"| {r['peer']} | {r['n']:,} | {r['status']}: {r['reason']} | | |")
                continue
            ratio = f"{r['time_s'] / ours[r['n']]:.2f}" if r["n"] in ours else "–"
            name = r["peer"] + (f" (+{r['compile_s']:.1f} s compile)" if r["compile_s"] else "")
            lines.append(f"| {name} | {r['n']:,} | {r['time_s']:.3f} | {ratio} "
                         f"| {r['peak_extra_mb']:.0f} |")
    if result["plot"]:
        lines += ["", (f"Plot: {result['plot']} (time against pairs, log-log, line of slope 1, "
                       "the peers dotted).")]
    return lines


# -- 2. k-nearest attention error -----------------------------------------------------------
def section_knn(n=20_000, n_queries=2000, ks=KS, d=4, repeats=2):
    """Predictions restricted to the k nearest against the exact, full-attention ones."""
    X, y, Q = (a.astype(np.float64) for a in make_problem(n, n_queries, d))
    h = scott_bandwidth(X)
    _progress("knn: exact")
    exact_model = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h).fit(X, y)
    exact_times = timed(lambda: exact_model.predict(Q), repeats).times
    with PeakRSS() as memory:
        exact, attention = exact_model.predict(Q, return_attention=True)  # (n_q, n) dense
    attention = np.asarray(attention)
    results = []
    for k in ks:
        _progress(f"knn: k = {k}")
        k_used = min(k, n)
        fit_times, model, _ = timed(
            lambda k=k_used: NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h,
                                                     n_neighbors=k).fit(X, y))
        times, pred, _ = timed(lambda model=model: model.predict(Q), repeats)
        err = np.abs(pred - exact)
        # The k nearest points in the scaled metric are the k largest Gaussian weights.
        top_mass = np.partition(attention, n - k_used, axis=1)[:, n - k_used:].sum(1)  # (n_q,)
        outside = np.clip(1.0 - top_mass, 0.0, None)
        results.append({"k": k, "k_used": k_used, "fit_time_s": fit_times[0], "repeats": repeats,
                        "times_s": times, "time_s": min(times),
                        "max_abs_err": float(err.max()), "mean_abs_err": float(err.mean()),
                        "mean_mass_outside": float(outside.mean()),
                        "max_mass_outside": float(outside.max())})
    del attention
    config = {"n_train": n, "n_queries": n_queries, "d": d, "dtype": "float64",
              "kernel": "gaussian", "bandwidth": "scott", "h": h.tolist(), "ks": list(ks),
              "repeats": repeats}
    exact_row = {"time_s": min(exact_times), "times_s": exact_times,
                 "attention_extra_mb": memory.extra_mb}
    return {"config": config, "exact": exact_row, "results": results, "targets": []}


def markdown_knn(result):
    c, exact = result["config"], result["exact"]
    lines = ["### 2. k-nearest attention error", "",
             (f"{c['n_train']:,} training points, d={c['d']}, standard normal, float64, "
              f"Gaussian at Scott's bandwidth, {c['n_queries']:,} queries; predict best of "
              f"{c['repeats']}; error against the exact (full-attention) prediction. Exact "
              f"predict: {exact['time_s']:.3f} s."), "",
             ("| k | fit s | predict s | max \\|err\\| | mean \\|err\\| "
              "| mean mass outside k nearest | max mass outside |"),
             "|---|---|---|---|---|---|---|"]
    for r in result["results"]:
        lines.append(f"| {r['k']:,} | {r['fit_time_s']:.3f} | {r['time_s']:.3f} "
                     f"| {r['max_abs_err']:.1e} | {r['mean_abs_err']:.1e} "
                     f"| {r['mean_mass_outside']:.1e} | {r['max_mass_outside']:.1e} |")
    return lines


# -- 3. dense paths per kernel ----------------------------------------------------------------
def section_kernels(n=20_000, d=8, repeats=3, kernels=KERNEL_NAMES):
    """Eager engine against the compiled loop, each kernel, the same fitted model."""
    X, y, Q = make_problem(n, n, d)
    h_scott = scott_bandwidth(X)
    results = []
    for kernel in kernels:
        compact = NadarayaWatsonRegressor(kernel).fit(X[:2], y[:2]).kernel_.is_compact
        h = h_scott * (COMPACT_WIDEN if compact else 1.0)
        row = {"kernel": kernel, "bandwidth_factor": COMPACT_WIDEN if compact else 1.0}
        predictions = {}
        for algorithm in ("brute", "compiled"):
            _progress(f"kernels: {kernel}, {algorithm}")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                # The rows keep their historical names: "brute" is the eager engine.
                compute = "eager" if algorithm == "brute" else "compiled"
                model = NadarayaWatsonRegressor(kernel, bandwidth=h, compute=compute)
                model.fit(X, y)
                # The compiled loop compiles on this first call, not in the timed ones.
                first = timed(lambda model=model: model.predict(Q[:256])).best
                times, predictions[algorithm], _ = timed(
                    lambda model=model: model.predict(Q), repeats)
            # torch's compiler stack warns about its own deprecated internals: not ours.
            warned = {f"{w.category.__name__}: {str(w.message)[:200]}" for w in caught
                      if not issubclass(w.category, DeprecationWarning)}
            row[algorithm] = {"time_s": min(times), "times_s": times,
                              "first_call_s": first, "warnings": sorted(warned)}
        row["ratio"] = row["brute"]["time_s"] / row["compiled"]["time_s"]
        row["max_abs_diff"] = float(np.abs(predictions["brute"] - predictions["compiled"]).max())
        results.append(row)
    config = {"n_train": n, "n_queries": n, "d": d, "dtype": "float32", "repeats": repeats,
              "kernels": list(kernels), "compact_widen": COMPACT_WIDEN}
    return {"config": config, "results": results, "targets": []}


def markdown_kernels(result):
    c = result["config"]
    lines = ["### 3. Dense paths per kernel: eager engine and compiled loop", "",
             (f"{c['n_queries']:,} queries × {c['n_train']:,} training points, d={c['d']}, "
              f"standard normal, float32; bandwidth Scott's rule (× {c['compact_widen']:g} for "
              f"the compact kernels); predict, best of {c['repeats']}, the compile (a first "
              "call on 256 queries) excluded and shown apart."), "",
             ("| kernel | eager s | compiled s | first compiled call s "
              "| eager / compiled | max \\|diff\\| |"),
             "|---|---|---|---|---|---|"]
    for r in result["results"]:
        lines.append(f"| {r['kernel']} | {r['brute']['time_s']:.3f} "
                     f"| {r['compiled']['time_s']:.3f} | {r['compiled']['first_call_s']:.1f} "
                     f"| {r['ratio']:.2f} | {r['max_abs_diff']:.1e} |")
    return lines + warning_lines({f"{r['kernel']} {a}": r[a]["warnings"]
                                   for r in result["results"] for a in ("brute", "compiled")})


# -- the whole run ---------------------------------------------------------------------------
def run_benchmark(sections=SECTIONS, sizes=SIZES, slope_from=SLOPE_FROM, n_knn=20_000,
                  n_knn_queries=2000, ks=KS,
                  repeats=2, out_dir=RESULTS_DIR, n_kernels=20_000, kernels=KERNEL_NAMES):
    """Run the chosen sections, print each table as it is done, write the json, markdown and
    plot; return the report."""
    sections = [s for s in SECTIONS if s in sections]
    out_dir = Path(out_dir)
    report = {"machine": machine_info(),
              "config": {"sections": sections, "device": "cpu", "repeats": repeats},
              "load_average": {"start": load_average()}, "sections": {}}
    chunks = [machine_line(report["machine"]) + "\n",
              "Targets are reported, never enforced.\n"]
    print("".join(chunks), end="", flush=True)
    runs = {"scaling": (lambda: section_scaling(sizes, slope_from, out_dir=out_dir),
                        markdown_scaling),
            "knn": (lambda: section_knn(n_knn, n_knn_queries, ks, repeats=repeats),
                    markdown_knn),
            "kernels": (lambda: section_kernels(n_kernels, kernels=kernels),
                        markdown_kernels)}
    for name in sections:
        run, to_markdown = runs[name]
        result = report["sections"][name] = run()
        chunk = section_markdown(result, to_markdown)
        chunks.append(chunk)
        print(chunk, end="", flush=True)
    report["targets"] = [{"section": name, **t} for name, s in report["sections"].items()
                         for t in s["targets"]]
    report["load_average"]["end"] = load_end = load_average()
    load_start = report["load_average"]["start"]
    if load_start is not None:
        summary = (f"\nLoad average (1 min) at the start {load_start:.2f}, at the end "
                   f"{load_end:.2f}, on {report['machine']['cores']} cores: the timings mean "
                   "something only on an otherwise idle machine.\n")
        chunks.append(summary)
        print(summary, end="", flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench_engine.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / "bench_engine.md").write_text("".join(chunks))
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help="1 scaling, 2 knn, 3 kernels (default: all)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="section 1: n_queries = n_train = n")
    parser.add_argument("--slope-from", type=int, default=SLOPE_FROM,
                        help="section 1: fit the log-log slope over sizes from this n")
    parser.add_argument("--n-knn", type=int, default=20_000, help="section 2 samples")
    parser.add_argument("--n-knn-queries", type=int, default=2000, help="section 2 queries")
    parser.add_argument("--ks", type=int, nargs="+", default=list(KS),
                        help="section 2 numbers of neighbors")
    parser.add_argument("--n-kernels", type=int, default=20_000,
                        help="section 3 samples and queries")
    parser.add_argument("--repeats", type=int, default=2, help="section 2")
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's own choice)")
    args = parser.parse_args(argv)
    if args.threads:
        # The fresh processes of section 1 read it when their forkserver starts torch.
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        torch.set_num_threads(args.threads)
    run_benchmark(args.sections, args.sizes, args.slope_from, args.n_knn, args.n_knn_queries,
                  args.ks,
                  args.repeats, args.out_dir, args.n_kernels)


if __name__ == "__main__":
    main()
