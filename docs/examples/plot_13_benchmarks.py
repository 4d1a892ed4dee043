"""
===========================================
Benchmarks: speed against peers and scaling
===========================================

How fast are the dense sums of the package, how do they scale, and how do they compare
with other ways of computing the same Nadaraya-Watson prediction? This example draws the
results that the benchmarks of ``benchmarks/`` committed to ``benchmarks/results/``:

* ``bench_engine.json``: the time of a dense Gaussian predict against the number of
  (query, training point) pairs, for the eager engine and its peers;
* ``bench_predict.json``: one 20,000 × 20,000 predict by the package and by its peers,
  as ratios of their time to the package's;
* ``bench_compact.json``: a compact kernel on a million points in 2-D, searched on a cell
  list, against scikit-learn's ``RadiusNeighborsRegressor``.

The numbers were produced by ``make bench`` (``benchmarks/run.py``), not by this script,
which only reads and draws them. They were measured on the machine recorded in each JSON
file, printed below and named in each figure's title; on another machine, and on a
machine where other processes hold the cores, they differ.
"""

# Authors: the sklearn-nw developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Finding the results
# -------------------
#
# The results live in ``benchmarks/results/`` at the root of the repository. The script
# finds them from its own location (sphinx-gallery runs it from its folder with
# ``__file__`` defined) or, failing that, from the working directory.
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np


def find_results():
    try:
        starts = [Path(__file__).resolve().parent]
    except NameError:  # run line by line, e.g. in an interactive session
        starts = []
    starts.append(Path.cwd().resolve())
    for start in starts:
        for folder in (start, *start.parents):
            candidate = folder / "benchmarks" / "results"
            if (candidate / "bench_engine.json").is_file():
                return candidate
    raise FileNotFoundError(
        "benchmarks/results/ not found: run this example from a clone "
        "of the repository (the results are committed there)."
    )


results_dir = find_results()
engine = json.loads((results_dir / "bench_engine.json").read_text())
predict = json.loads((results_dir / "bench_predict.json").read_text())
compact = json.loads((results_dir / "bench_compact.json").read_text())


def machine_line(record):
    machine = record["machine"]
    # Three versions a line, within the page's column.
    items = [f"{name} {version}" for name, version in machine["versions"].items()]
    versions = ",\n    ".join(", ".join(items[i:i + 3]) for i in range(0, len(items), 3))
    return (
        f"{machine['cpu']}, {machine['cores']} cores, {machine['ram_gib']:.1f} GiB RAM, "
        f"torch threads {machine['torch_threads']};\n    {versions}"
    )


def machine_title(record):
    machine = record["machine"]
    return f"measured on {machine['cpu']}, {machine['cores']} cores"


for name, record in (
    ("bench_engine", engine),
    ("bench_predict", predict),
    ("bench_compact", compact),
):
    load = record.get("load_average")
    load = (
        f"; 1-minute load average {load['start']:.2f} at the start, {load['end']:.2f} at "
        f"the end"
        if load
        else ""
    )
    print(f"{name}: {machine_line(record)}{load}")

# %%
# Time against the number of pairs
# --------------------------------
#
# A dense prediction computes one kernel value per (query, training point) pair, so its
# time should grow linearly with their number: a line of slope 1 on a log-log plot. The
# eager engine (``compute="eager"``) is drawn with the package's compiled loop
# (``compute="compiled"``, its compile excluded) and two peers: chunked eager torch, what
# a careful torch user writes without this package, and pykeops' symbolic reduction on
# the CPU (its compile excluded), both run up to the size recorded as ``peer_max_n``.
scaling = engine["sections"]["scaling"]
config = scaling["config"]
print(
    f"\nscaling: n queries = n training points, d={config['d']}, {config['dtype']},\n"
    f"    {config['kernel']} kernel; repeats: {config['repeats']}"
)
curves = {
    "sklearn_nw_eager": [
        (r["pairs"], r["time_s"])
        for r in scaling["results"]
        if r["status"] == "ok"
    ]
}
for row in scaling["peers"]:
    if row["status"] == "ok":
        curves.setdefault(row["peer"], []).append(
            (row["n"] ** 2, row["time_s"])
        )
labels = {
    "sklearn_nw_eager": 'sklearn-nw, compute="eager"',
    "sklearn_nw_compiled": 'sklearn-nw, compute="compiled" (compile excluded)',
    "chunked": "chunked eager torch",
    "pykeops": "pykeops, CPU (compile excluded)",
}
print(
    f"{'peer':<22}"
    + "".join(f"{int(np.sqrt(p)):>11,}" for p, _ in curves["sklearn_nw_eager"])
    + "   (seconds, by n)"
)
for peer, points in curves.items():
    times = dict(points)
    print(
        f"{peer:<22}"
        + "".join(
            f"{times[p]:11.4f}" if p in times else f"{'':>11}"
            for p, _ in curves["sklearn_nw_eager"]
        )
    )
print(
    f"fitted slope of the eager engine from n = {config['slope_from']:,}: "
    f"{scaling['slope']:.3f}"
)

fig, ax = plt.subplots(figsize=(8, 5.5), constrained_layout=True)
for peer, points in curves.items():
    pairs, times = np.array(sorted(points)).T
    own = peer.startswith("sklearn_nw")
    ax.loglog(
        pairs,
        times,
        "o-" if own else "s:",
        lw=2 if own else 1.5,
        label=labels.get(peer, peer),
    )
pairs, times = np.array(curves["sklearn_nw_eager"]).T
ax.loglog(
    pairs,
    times[-1] * pairs / pairs[-1],
    "k--",
    lw=1,
    label="slope 1 (time proportional to pairs)",
)
ax.set_xlabel("query-training pairs (n queries × n training points)")
ax.set_ylabel("predict time (s)")
ax.set_title(
    f"Dense Gaussian predict, d={config['d']}, {config['dtype']}\n"
    f"{machine_title(engine)}"
)
ax.legend()
plt.show()

# %%
# Below about ten million pairs the fixed costs of a call dominate and the curves bend;
# above, the eager engine's time is proportional to the number of pairs (the fitted
# slope printed above), and so are its peers'.
#
# One predict against the peers
# -----------------------------
#
# ``bench_predict.json`` times one predict of 20,000 queries against 20,000 training
# points (d=8, float32, the Gaussian kernel at Scott's bandwidth) by the package and by
# peers computing the same prediction with the same bandwidths: the textbook dense
# softmax (the whole matrix in memory), chunked eager torch, the same chunks compiled by
# ``torch.compile``, statsmodels' ``KernelReg``, scikit-learn's ``KNeighborsRegressor``
# with every training point a neighbor and Gaussian weights, and pykeops. The slowest
# peers ran on a subset of the queries, and their ratio is per pair (marked
# extrapolated). Compile times are excluded from the times and shown apart.
config = predict["config"]
rows = [row for row in predict["results"] if row["status"] == "ok"]
print(
    f"\npredict: {config['n_queries']:,} queries × {config['n_train']:,} training points, "
    f"d={config['d']}, {config['dtype']}"
)
print(
    f"{'peer':<22}{'queries run':>12}{'time s':>9}{'ratio':>9}{'compile s':>11}"
    f"{'peak extra MB':>15}"
)
for row in rows:
    compile_s = (
        f"{row['compile_s']:.1f}" if row["compile_s"] is not None else ""
    )
    note = "  (extrapolated)" if row["extrapolated"] else ""
    print(
        f"{row['peer']:<22}{row['n_queries']:>12,}{row['time_s']:9.3f}{row['ratio']:9.2f}"
        f"{compile_s:>11}{row['peak_extra_mb']:15.0f}{note}"
    )

fig, ax = plt.subplots(figsize=(9, 5), constrained_layout=True)
rows = sorted(rows, key=lambda row: row["ratio"])
positions = np.arange(len(rows))[::-1]
colors = [
    "tab:blue" if row["peer"].startswith("sklearn_nw") else "tab:gray"
    for row in rows
]
ax.barh(positions, [row["ratio"] for row in rows], color=colors, alpha=0.85)
for position, row in zip(positions, rows):
    text = f"{row['ratio']:.2f}×, {row['time_s']:.2f} s"
    if row["extrapolated"]:
        text += f"\non {row['n_queries']:,} queries, extrapolated"
    if row["compile_s"] is not None:
        text += f", + {row['compile_s']:.1f} s compile"
    ax.text(row["ratio"] * 1.1, position, text, va="center")
ax.set_xscale("log")
ax.set_xlim(0.5, max(row["ratio"] for row in rows) * 500)
ax.axvline(1, color="k", lw=0.8)
peer_labels = {
    "sklearn_nw": 'sklearn-nw, compute="auto"',
    "sklearn_nw_compiled": 'sklearn-nw, compute="compiled"',
    "textbook": "textbook dense softmax (torch)",
    "chunked": "chunked eager torch",
    "compiled": "chunked torch, torch.compile",
    "statsmodels": "statsmodels KernelReg",
    "knn": "KNeighborsRegressor, all neighbors",
    "pykeops": "pykeops, CPU",
}
ax.set_yticks(
    positions, [peer_labels.get(row["peer"], row["peer"]) for row in rows]
)
ax.set_xlabel(
    'time / time of sklearn-nw (compute="auto"), per query-training pair'
)
ax.set_title(
    f"Predict, {config['n_queries']:,} × {config['n_train']:,}, d={config['d']}, "
    f"{config['dtype']}, Gaussian\n{machine_title(predict)}"
)
plt.show()

# %%
# Every peer takes longer than the package's default engine on this benchmark, several
# of them by an order of magnitude or more. The package's own compiled loop is drawn
# beside them; whether it beats the eager engine for the Gaussian depends on the
# machine, since the eager engine computes the Gaussian's logits as one matrix product:
compiled = next(
    row for row in predict["results"] if row["peer"] == "sklearn_nw_compiled"
)
print(
    f"compute='compiled' / compute='auto' for the Gaussian: {compiled['ratio']:.2f}"
    f" ({'slower' if compiled['ratio'] > 1 else 'faster'} on this machine)"
)

# %%
# A compact kernel on a million points
# ------------------------------------
#
# A compact kernel (here the Epanechnikov) gives weight only to the training points
# within one bandwidth of a query, so its predict need not visit the others.
# ``bench_compact.json`` times fit + predict on a million training points in 2-D and
# 10,000 queries as the number of training points within reach of a query varies (the
# points spread over a wider square), for the package's default search (a cell list in
# low dimensions) and for scikit-learn's ``RadiusNeighborsRegressor``; at the densest
# setting also for the package's k-d and ball tree searches.
config = compact["config"]
print(
    f"\ncompact: {config['n_train']:,} training points, {config['n_queries']:,} queries, "
    f"d={config['d']},\n    {config['dtype']}, {config['kernel']} at bandwidth "
    f"{config['bandwidth']}; {config['timed']}"
)
by_method = {}
for sweep in compact["sweep"]:
    for row in sweep["results"]:
        by_method.setdefault(row["method"], []).append(
            (sweep["reach"], row["time_s"])
        )
        ratio = f"{row['ratio']:.2f}" if row.get("ratio") is not None else "-"
        print(
            f"within reach {sweep['reach']:7,.0f}  {row['method']:<34}"
            f" {row['time_s']:7.3f} s  scikit-learn / this {ratio}"
        )

fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), constrained_layout=True)
ax = axes[0]
for method, points in by_method.items():
    reach, times = np.array(sorted(points)).T
    ax.loglog(
        reach,
        times,
        "o-" if len(points) > 1 else "D",
        color="tab:gray" if method.startswith("scikit-learn") else None,
        label=method,
    )
ax.set_xlabel("training points within reach of a query")
ax.set_ylabel("fit + predict time (s)")
ax.set_title("Time")
ax.legend()

ax = axes[1]
reach, ratios = np.array(
    sorted(
        (sweep["reach"], row["ratio"])
        for sweep in compact["sweep"]
        for row in sweep["results"]
        if row["method"] == "sklearn_nw auto"
    )
).T
ax.semilogx(reach, ratios, "o-", color="tab:blue")
ax.axhline(1, color="k", lw=0.8)
ax.set_ylim(0, ratios.max() * 1.15)
ax.set_xlabel("training points within reach of a query")
ax.set_ylabel("RadiusNeighborsRegressor time / sklearn-nw time")
ax.set_title("Speed-up of the default search")
fig.suptitle(
    f"{config['kernel'].capitalize()} kernel, {config['n_train']:,} training points, "
    f"d={config['d']}, {config['dtype']}; {machine_title(compact)}"
)
plt.show()

# %%
# The cell list is faster than ``RadiusNeighborsRegressor`` at every density of this
# sweep (the ratios printed above); the package's tree searches, which spend their time
# in the same radius query as scikit-learn's, are about as fast as it. To measure on
# your own machine, run ``make bench`` (or ``python benchmarks/run.py engine``, ...) on
# an otherwise idle machine: the benchmarks rewrite these JSON files and the tables of
# ``benchmarks/results/*.md``.
