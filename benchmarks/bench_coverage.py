"""Coverage benchmark: a Monte Carlo of the confidence intervals of
``predict_confidence_interval`` (robust bias-corrected and conventional) on the designs of
Calonico, Cattaneo and Farrell (2018), with the package's own bandwidth, beside nprobust's
``lprobust`` with its own.

What it measures
----------------
The designs are those of CCF 2018's replication code (``simuls_functions.R``, models 5, 6
and 1): ``y = m(x) + e``, x uniform on [-1, 1], e standard normal (their ``s2.pob = 1``),
n = 500, with

- ``ccf5``: m(x) = sin(3 pi x / 2) / (1 + 18 x^2 (sgn(x) + 1)) (the paper's main design),
- ``ccf6``: m(x) = sin(pi x / 2) / (1 + 2 x^2 (sgn(x) + 1)),
- ``ccf1``: m(x) = sin(4 x) + 2 exp(-64 x^2).

1. ``one_feature``: in each of ``--replications`` draws, ``NadarayaWatsonRegressorCV(
   kernel="epanechnikov", degree=1, bandwidth_kinds=["fixed"], selection="min")`` (its
   default grid, exact leave-one-out, the minimum of the loss; ``residual_variance="nn"``),
   then
   ``predict_confidence_interval`` at 95% (b = h), robust bias-corrected and
   conventional, at 5 points: -1/3, 0, 1/3 (interior, CCF's) and -0.95, 0.95 (within h
   of a boundary whenever h > 0.05: the share of draws where it is is reported). On the
   same draws, ``nprobust.lprobust(y, x, eval, p=1, kernel="epa", vce="nn")`` with its
   own default bandwidth (``h=None``: ``bwselect="imse-dpi"`` for several points, one h
   for all five), both of its intervals, on the first ``--replications-nprobust`` draws
   (all by default; it costs about twice the package's time per draw). Coverage is the
   share of draws whose interval holds m(x); also the mean length. Targets (issue 27):
   RBC coverage in [0.93, 0.97] at every point of every design.
2. ``several_features``: the same estimator in d = 2 and 3 (``ccf5 x ccf6`` and
   ``ccf5 x ccf6 x ccf1``: the product of the 1-D designs in each feature, plus the
   smooth interaction 0.5 (x1 x2 + ... + x_{d-1} x_d)), x uniform on [-1, 1]^d, n = 500,
   ``--replications-multi`` draws, interior points (t, ..., t) for t in -1/3, 0, 1/3.
   Target: RBC coverage at least 0.92 at every point.

3. ``selection_effect`` (reported, no target): where section 1's coverage goes. On the
   same draws of the 1-D designs, the package's intervals by the quartile of the
   bandwidth leave-one-out chose in each draw, and the same local-linear fit's at one
   bandwidth for every draw (the median of those choices), which no draw's noise moves.
   Run alone with ``--keep-sections``, it joins the saved report's other sections.

``--selection one_se`` takes the estimator's default rule instead, the smoothest bandwidth
within one standard error of the minimum: a bandwidth chosen for prediction, wider than the
minimum (twice it on ``ccf6``), whose bias the robust interval does not remove.

Each draw's generator is seeded by (design, replication): a run repeats exactly. The
Monte Carlo standard error of a coverage near 0.95 is sqrt(0.95 * 0.05 / R) (0.007 at
R = 1,000). nprobust not installed (``pip install nprobust-pkg``) is reported as skipped.

Usage: ``python benchmarks/bench_coverage.py [--sections S ...] [--replications R]
[--replications-multi R] [--replications-nprobust R] [--n N] [--selection min|one_se]
[--out-dir DIR] [--keep-sections]``; writes
bench_coverage.json and .md.
"""

import argparse
import importlib.util
import json
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
from _common import (
    load_average,
    machine_info,
    machine_line,
    run_sections,
    section_markdown,
    summary_markdown,
    timed,
)
from scipy.stats import norm

from sklearn_nw import NadarayaWatsonRegressor, NadarayaWatsonRegressorCV

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SECTIONS = ("one_feature", "several_features", "selection_effect")
LEVEL = 0.95
INTERIOR = (-1 / 3, 0.0, 1 / 3)
BOUNDARY = (-0.95, 0.95)
TARGET_1D = (0.93, 0.97)
TARGET_MULTI = 0.92
ISSUE_DRAWS = 1000  # the draws per design issue 27 asks for


def ccf5(x):
    return np.sin(3 * np.pi * x / 2) / (1 + 18 * x**2 * (np.sign(x) + 1))


def ccf6(x):
    return np.sin(np.pi * x / 2) / (1 + 2 * x**2 * (np.sign(x) + 1))


def ccf1(x):
    return np.sin(4 * x) + 2 * np.exp(-64 * x**2)


DESIGNS_1D = {"ccf5": ccf5, "ccf6": ccf6, "ccf1": ccf1}
DESIGNS_MULTI = {"d2": (ccf5, ccf6), "d3": (ccf5, ccf6, ccf1)}


def product_design(parts):
    """m(x) = prod_j parts[j](x_j) + 0.5 sum_j x_j x_{j+1}."""
    def m(X):
        out = np.prod([f(X[:, j]) for j, f in enumerate(parts)], axis=0)
        return out + 0.5 * np.sum(X[:, :-1] * X[:, 1:], axis=1)
    return m


def draw(seed, n, d, m):
    """Inputs uniform on [-1, 1]^d and targets m(X) plus standard normal noise."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    return X, m(X) + rng.normal(size=n)


def estimator(selection="min"):
    """The package's own choice: a local-linear fit whose bandwidth is chosen by exact
    leave-one-out over the default grid (its minimum, or the one-standard-error rule)."""
    return NadarayaWatsonRegressorCV(kernel="epanechnikov", degree=1,
                                     bandwidth_kinds=["fixed"], selection=selection)


def _one_line(obj):
    return " ".join(repr(obj).split())


def _tally(truth, intervals):
    """Per point: 1 where [low, high] holds the truth, and the interval's length (R, k)."""
    low, high = intervals[..., 0], intervals[..., 1]
    return (low <= truth) & (truth <= high), high - low


def _summary(hits, lengths):
    hits, lengths = np.asarray(hits, dtype=float), np.asarray(lengths, dtype=float)
    return {"coverage": np.nanmean(hits, 0).tolist(),
            "mean_length": np.nanmean(lengths, 0).tolist()}


def _ours(X, y, points, selection):
    model = estimator(selection).fit(X, y)
    out = {}
    for kind in ("robust", "conventional"):
        _, intervals = model.predict_confidence_interval(points, confidence_level=LEVEL,
                                                         bias_correction=kind)
        out[kind] = intervals[:, :, 0]  # (k, 2)
    return model.bandwidth_, out


def _nprobust(x, y, points):
    from nprobust import lprobust

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = lprobust(y, x, eval=points, p=1, kernel="epa", vce="nn").Estimate
    z = norm.ppf(0.5 + LEVEL / 2)
    out = {}
    for kind, center, se in (("robust", "tau.bc", "se.rb"), ("conventional", "tau.us", "se.us")):
        c, s = np.asarray(est[center], float), np.asarray(est[se], float)
        out[kind] = np.stack([c - z * s, c + z * s], axis=1)
    return np.asarray(est["h"], float), out


def _progress(label, r, replications, seconds):
    if (r + 1) % 100 == 0 or r + 1 == replications:
        print(f"  {label}: {r + 1}/{replications} draws, {seconds:.0f} s", file=sys.stderr,
              flush=True)


def section_one_feature(replications=1000, n=500, designs=tuple(DESIGNS_1D),
                        replications_nprobust=None, selection="min"):
    """Coverage in one feature: the package's intervals and nprobust's, on the same draws
    (nprobust on the first ``replications_nprobust`` of them)."""
    have = importlib.util.find_spec("nprobust") is not None
    n_np = replications if replications_nprobust is None else min(replications,
                                                                   replications_nprobust)
    points = np.array([*BOUNDARY[:1], *INTERIOR, *BOUNDARY[1:]])
    results = []
    for k, name in enumerate(designs):
        m = DESIGNS_1D[name]
        truth = m(points)
        tallies = {"ours": {"robust": ([], []), "conventional": ([], [])},
                   "nprobust": {"robust": ([], []), "conventional": ([], [])}}
        h_ours, h_np, failures = [], [], {"ours": 0, "nprobust": 0}
        seconds = {"ours": 0.0, "nprobust": 0.0}
        for r in range(replications):
            X, y = draw([1, k, r], n, 1, lambda X, m=m: m(X[:, 0]))
            runs = [("ours", lambda X=X, y=y: _ours(X, y, points[:, None], selection))]
            if have and r < n_np:
                runs.append(("nprobust", lambda X=X, y=y: _nprobust(X[:, 0], y, points)))
            for who, call in runs:
                try:
                    t = timed(call)
                except (ValueError, np.linalg.LinAlgError):
                    failures[who] += 1
                    continue
                seconds[who] += t.best
                h, intervals = t.result
                (h_ours if who == "ours" else h_np).append(float(np.mean(h)))
                for kind, iv in intervals.items():
                    hit, length = _tally(truth, iv)
                    tallies[who][kind][0].append(hit)
                    tallies[who][kind][1].append(length)
            _progress(name, r, replications, sum(seconds.values()))
        row = {"design": name, "points": points.tolist(), "truth": truth.tolist(),
               "replications": replications, "failures": failures,
               "seconds": seconds,
               "ours": {kind: _summary(*t) for kind, t in tallies["ours"].items()},
               "h_ours_mean": float(np.mean(h_ours)),
               "h_ours_quartiles": np.percentile(h_ours, [25, 50, 75]).tolist(),
               "boundary_within_h": float(np.mean(np.asarray(h_ours) > 1 - BOUNDARY[1])),
               "nprobust": {"status": "skipped"}}
        if have:
            row["nprobust"] = {"status": "ok", "replications": n_np, "h_mean": float(np.mean(h_np)),
                               **{kind: _summary(*t) for kind, t in tallies["nprobust"].items()}}
        results.append(row)
    low, high = TARGET_1D
    rbc = [(r["design"], p, c) for r in results
           for p, c in zip(r["points"], r["ours"]["robust"]["coverage"])]
    worst = min(rbc, key=lambda t: min(t[2] - low, high - t[2]))
    target = {"name": f"RBC coverage of nominal 95% intervals in [{low}, {high}] at 5 points "
                      f"(3 interior, 2 within h of a boundary) of {len(results)} designs, "
                      f"n = {n}, {replications:,} draws",
              "met": all(low <= c <= high for _, _, c in rbc),
              "detail": (f"from {min(c for *_, c in rbc):.3f} to {max(c for *_, c in rbc):.3f}; "
                         f"farthest from the band: {worst[0]} at x = {worst[1]:.2f}, "
                         f"{worst[2]:.3f}")}
    return {"config": {"n": n, "replications": replications, "level": LEVEL,
                       "replications_nprobust": n_np,
                       "estimator": _one_line(estimator(selection)),
                       "nprobust": "lprobust(y, x, eval, p=1, kernel='epa', vce='nn')"},
            "results": results, "targets": [target]}


def _fewer_draws(replications, what):
    """A line saying that a run has fewer draws than issue 27's, if it has."""
    if replications >= ISSUE_DRAWS:
        return []
    return [f"**Fewer draws than issue 27 asks for**: {replications:,} {what} instead of "
            f"{ISSUE_DRAWS:,} (a run cut to the time it had), so the coverage is known to "
            "about +-" + f"{2 * np.sqrt(LEVEL * (1 - LEVEL) / replications):.3f} (two "
            "Monte Carlo standard errors) around 0.95.", ""]


def _percent(v):
    return f"{v:.3f}"


def markdown_one_feature(result):
    c = result["config"]
    mc = np.sqrt(LEVEL * (1 - LEVEL) / c["replications"])
    mc_np = np.sqrt(LEVEL * (1 - LEVEL) / c["replications_nprobust"])
    lines = [f"### One feature: CCF 2018 designs, n = {c['n']}, {c['replications']:,} draws, "
             f"nominal {LEVEL:.0%}", "", *_fewer_draws(c["replications"], "per design"),
             f"Ours: `{c['estimator']}`, then `predict_confidence_interval` (b = h). "
             f"nprobust: `{c['nprobust']}` with its own bandwidth, on the first "
             f"{c['replications_nprobust']:,} of the same draws. Monte Carlo standard error of "
             f"a coverage near 0.95: {mc:.3f} ({mc_np:.3f} for nprobust).", "",
             "| design | x | RBC cover | RBC length | conv. cover | conv. length | "
             "nprobust RBC | nprobust conv. | nprobust RBC length |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["results"]:
        o, p = r["ours"], r["nprobust"]
        for i, x in enumerate(r["points"]):
            theirs = (f"{_percent(p['robust']['coverage'][i])} | "
                      f"{_percent(p['conventional']['coverage'][i])} | "
                      f"{p['robust']['mean_length'][i]:.3f}" if p["status"] == "ok"
                      else "skipped | skipped | ")
            lines.append(f"| {r['design']} | {x:.2f} | {_percent(o['robust']['coverage'][i])} | "
                         f"{o['robust']['mean_length'][i]:.3f} | "
                         f"{_percent(o['conventional']['coverage'][i])} | "
                         f"{o['conventional']['mean_length'][i]:.3f} | {theirs} |")
    lines += ["", "| design | our h: mean (quartiles) | draws with h > 0.05 (x = +-0.95 within "
              "h of a boundary) | nprobust h: mean | failed draws (ours, nprobust) | "
              "seconds (ours, nprobust) |", "|---|---|---|---|---|---|"]
    for r in result["results"]:
        q = ", ".join(f"{v:.3f}" for v in r["h_ours_quartiles"])
        theirs = f"{r['nprobust']['h_mean']:.3f}" if r["nprobust"]["status"] == "ok" else "skipped"
        lines.append(f"| {r['design']} | {r['h_ours_mean']:.3f} ({q}) | "
                     f"{r['boundary_within_h']:.3f} | {theirs} | {r['failures']['ours']}, "
                     f"{r['failures']['nprobust']} | {r['seconds']['ours']:.0f}, "
                     f"{r['seconds']['nprobust']:.0f} |")
    return lines


def _at_fixed_bandwidth(X, y, points, h):
    """Both intervals (k, 2) of section 1's local-linear fit at a bandwidth ``h`` given,
    not chosen on the draw."""
    model = NadarayaWatsonRegressor(kernel="epanechnikov", degree=1, bandwidth=h).fit(X, y)
    return {kind: model.predict_confidence_interval(
                points, confidence_level=LEVEL, bias_correction=kind)[1][:, :, 0]
            for kind in ("robust", "conventional")}


def _by_quartile(h, hits):
    """RBC coverage (4, k) of the draws by the quartile of the bandwidth each chose (None
    for a quartile without draws), the quartiles' edges (3,) and their draws (4,)."""
    h, hits = np.asarray(h), np.asarray(hits, dtype=float)
    edges = np.percentile(h, [25, 50, 75])
    group = np.digitize(h, edges)  # 0..3
    return {"edges": edges.tolist(),
            "draws": [int(np.sum(group == g)) for g in range(4)],
            "robust_coverage": [np.mean(hits[group == g], 0).tolist()
                                if np.any(group == g) else None for g in range(4)]}


def section_selection_effect(replications=1000, n=500, designs=tuple(DESIGNS_1D),
                             selection="min"):
    """Section 1's draws: the package's RBC coverage by the quartile of the bandwidth it
    chose, and both intervals at one bandwidth for every draw (the median of its
    choices)."""
    points = np.array([*BOUNDARY[:1], *INTERIOR, *BOUNDARY[1:]])
    results = []
    for k, name in enumerate(designs):
        m = DESIGNS_1D[name]
        truth = m(points)
        draws = [draw([1, k, r], n, 1, lambda X, m=m: m(X[:, 0])) for r in range(replications)]
        chosen, hits, failures = [], [], 0
        start = time.perf_counter()
        for X, y in draws:
            try:
                h, intervals = _ours(X, y, points[:, None], selection)
            except (ValueError, np.linalg.LinAlgError):
                failures += 1
                continue
            chosen.append(float(np.mean(h)))
            hits.append(_tally(truth, intervals["robust"])[0])
        h_fixed = float(np.median(chosen))
        fixed = {"robust": ([], []), "conventional": ([], [])}
        for X, y in draws:
            for kind, iv in _at_fixed_bandwidth(X, y, points[:, None], h_fixed).items():
                hit, length = _tally(truth, iv)
                fixed[kind][0].append(hit)
                fixed[kind][1].append(length)
        print(f"  {name}: {replications} draws, {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)
        results.append({"design": name, "points": points.tolist(),
                        "replications": replications, "failures": failures,
                        "seconds": time.perf_counter() - start,
                        "chosen": {"robust": {"coverage": np.mean(hits, 0).tolist()},
                                   "by_quartile": _by_quartile(chosen, hits)},
                        "fixed": {"h": h_fixed,
                                  **{kind: _summary(*t) for kind, t in fixed.items()}}})
    return {"config": {"n": n, "replications": replications, "level": LEVEL,
                       "estimator": _one_line(estimator(selection))},
            "results": results, "targets": []}


def markdown_selection_effect(result):
    c = result["config"]
    results = result["results"]
    points = results[0]["points"] if results else []
    lines = [f"### Where the coverage goes: one feature, n = {c['n']}, "
             f"{c['replications']:,} draws (section 1's), nominal {LEVEL:.0%}", "",
             *_fewer_draws(c["replications"], "per design"),
             f"RBC coverage of `{c['estimator']}` (bandwidth chosen on each draw) by the "
             "quartile of the bandwidth it chose, and of the same local-linear fit "
             "(`NadarayaWatsonRegressor(kernel='epanechnikov', degree=1)`) at one bandwidth "
             "for every draw, the median of those choices, which no draw's noise moves "
             "(its conventional interval's coverage beside). Monte Carlo standard error of "
             "a coverage near 0.95 over a quartile's draws: "
             f"{np.sqrt(LEVEL * (1 - LEVEL) / max(1, c['replications'] // 4)):.3f}.", "",
             "| design | bandwidth | draws | "
             + " | ".join(f"RBC cover at {x:.2f}" for x in points) + " |",
             "|---|---|---|" + "---|" * len(points)]
    for r in results:
        f, q = r["fixed"], r["chosen"]["by_quartile"]
        lines.append(f"| {r['design']} | fixed at {f['h']:.3f} | {r['replications']:,} | "
                     + " | ".join(_percent(v) for v in f["robust"]["coverage"]) + " |")
        lines.append(f"| {r['design']} | fixed at {f['h']:.3f}, conventional | "
                     f"{r['replications']:,} | "
                     + " | ".join(_percent(v) for v in f["conventional"]["coverage"]) + " |")
        lines.append(f"| {r['design']} | chosen on each draw | "
                     f"{r['replications'] - r['failures']:,} | "
                     + " | ".join(_percent(v) for v in r["chosen"]["robust"]["coverage"])
                     + " |")
        bounds = [None, *q["edges"], None]
        for g in range(4):
            low, high = bounds[g], bounds[g + 1]
            span = (f"below {high:.3f}" if low is None else f"above {low:.3f}"
                    if high is None else f"{low:.3f} to {high:.3f}")
            covered = q["robust_coverage"][g] or [None] * len(points)
            lines.append(f"| {r['design']} | chosen, {span} | {q['draws'][g]:,} | "
                         + " | ".join("–" if v is None else _percent(v) for v in covered)
                         + " |")
    return lines


def section_several_features(replications=300, n=500, designs=tuple(DESIGNS_MULTI),
                             selection="min"):
    """Coverage in 2 and 3 features at interior points."""
    results = []
    for k, name in enumerate(designs):
        parts = DESIGNS_MULTI[name]
        d = len(parts)
        m = product_design(parts)
        points = np.repeat(np.asarray(INTERIOR)[:, None], d, axis=1)  # (3, d)
        truth = m(points)
        tallies = {"robust": ([], []), "conventional": ([], [])}
        bandwidths, failures, seconds = [], 0, 0.0
        for r in range(replications):
            X, y = draw([2, k, r], n, d, m)
            try:
                t = timed(lambda X=X, y=y, points=points: _ours(X, y, points, selection))
            except (ValueError, np.linalg.LinAlgError):
                failures += 1
                continue
            seconds += t.best
            h, intervals = t.result
            bandwidths.append(np.asarray(h, float))
            for kind, iv in intervals.items():
                hit, length = _tally(truth, iv)
                tallies[kind][0].append(hit)
                tallies[kind][1].append(length)
            _progress(name, r, replications, seconds)
        results.append({"design": name, "d": d, "points": INTERIOR, "truth": truth.tolist(),
                        "replications": replications, "failures": failures,
                        "seconds": seconds,
                        "h_mean": np.mean(bandwidths, 0).tolist(),
                        **{kind: _summary(*t) for kind, t in tallies.items()}})
    cover = [c for r in results for c in r["robust"]["coverage"]]
    target = {"name": f"RBC coverage at interior points at least {TARGET_MULTI} in d = "
                      + " and ".join(str(r["d"]) for r in results)
                      + f", n = {n}, {replications:,} draws",
              "met": min(cover) >= TARGET_MULTI,
              "detail": f"from {min(cover):.3f} to {max(cover):.3f}"}
    return {"config": {"n": n, "replications": replications, "level": LEVEL,
                       "estimator": _one_line(estimator(selection))},
            "results": results, "targets": [target]}


def markdown_several_features(result):
    c = result["config"]
    mc = np.sqrt(LEVEL * (1 - LEVEL) / c["replications"])
    lines = [f"### Several features: products of the CCF designs plus 0.5 (x1 x2 + ...), "
             f"n = {c['n']}, {c['replications']:,} draws, nominal {LEVEL:.0%}", "",
             *_fewer_draws(c["replications"], "per design"),
             f"Ours: `{c['estimator']}`; points (t, ..., t). Monte Carlo standard error of a "
             f"coverage near 0.95: {mc:.3f}. nprobust works in one feature only.", "",
             "| design | d | t | m | RBC cover | RBC length | conv. cover | conv. length |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["results"]:
        for i, t in enumerate(r["points"]):
            lines.append(f"| {r['design']} | {r['d']} | {t:.2f} | {r['truth'][i]:.3f} | "
                         f"{_percent(r['robust']['coverage'][i])} | "
                         f"{r['robust']['mean_length'][i]:.3f} | "
                         f"{_percent(r['conventional']['coverage'][i])} | "
                         f"{r['conventional']['mean_length'][i]:.3f} |")
    lines += ["", "| design | mean h per feature | failed draws | seconds |", "|---|---|---|---|"]
    for r in result["results"]:
        h = ", ".join(f"{v:.3f}" for v in r["h_mean"])
        lines.append(f"| {r['design']} | {h} | {r['failures']} | {r['seconds']:.0f} |")
    return lines


def run_benchmark(sections=SECTIONS, replications=1000, replications_multi=300, n=500,
                  designs_1d=tuple(DESIGNS_1D), designs_multi=tuple(DESIGNS_MULTI),
                  replications_nprobust=None, selection="min", out_dir=RESULTS_DIR,
                  keep_sections=False):
    """Run the chosen sections, print each table, write the json and markdown; return the
    report. With ``keep_sections`` the saved report's other sections (in ``out_dir``) are
    kept beside them, the markdown written again from the whole."""
    try:
        version = metadata.version("nprobust-pkg")
    except metadata.PackageNotFoundError:
        version = None
    report = {"machine": machine_info(),
              "config": {"device": "cpu", "dtype": "float64",
                         "peers": {"nprobust-pkg": version}},
              "load_average": {"start": load_average()}, "sections": {}}
    chunks = _header(report)
    print("".join(chunks), end="", flush=True)
    runs = {"one_feature": (lambda: section_one_feature(replications, n, designs_1d,
                                                          replications_nprobust, selection),
                            markdown_one_feature),
            "several_features": (lambda: section_several_features(replications_multi, n,
                                                                  designs_multi, selection),
                                 markdown_several_features),
            "selection_effect": (lambda: section_selection_effect(replications, n,
                                                                  designs_1d, selection),
                                 markdown_selection_effect)}
    saved = Path(out_dir) / "bench_coverage.json"
    kept = (json.loads(saved.read_text())["sections"] if keep_sections and saved.exists()
            else {})
    report = run_sections("bench_coverage", report, chunks,
                          {name: runs[name] for name in SECTIONS if name in sections}, out_dir)
    if kept:  # the saved sections not run again, in the order of SECTIONS
        every = {**kept, **report["sections"]}
        report["sections"] = {name: every[name] for name in SECTIONS if name in every}
        report["targets"] = [t for s in report["sections"].values() for t in s["targets"]]
        saved.write_text(json.dumps(report, indent=2) + "\n")
        markdown_from(saved)
    return report


def _header(report):
    version = report["config"]["peers"]["nprobust-pkg"]
    return [machine_line(report["machine"]) + "\n",
            f"Peers: nprobust-pkg {version or 'not installed'}. Targets are reported, never "
            "enforced.\n"]


MARKDOWN = {"one_feature": markdown_one_feature, "several_features": markdown_several_features,
            "selection_effect": markdown_selection_effect}


def markdown_from(json_path):
    """Write the markdown of a saved report again (the same tables, from its json)."""
    json_path = Path(json_path)
    report = json.loads(json_path.read_text())
    chunks = [*_header(report),
              *(section_markdown(result, MARKDOWN[name])
                for name, result in report["sections"].items()),
              summary_markdown(report)]
    json_path.with_suffix(".md").write_text("".join(chunks))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--replications-multi", type=int, default=300)
    parser.add_argument("--replications-nprobust", type=int, default=None,
                        help="nprobust on the first R draws only (default: all)")
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--selection", choices=("min", "one_se"), default="min",
                        help="the CV estimator's rule for the bandwidth (default: the "
                             "minimum of the leave-one-out loss)")
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--markdown-from", type=Path, default=None, metavar="JSON",
                        help="only write the markdown of a saved report again")
    parser.add_argument("--keep-sections", action="store_true",
                        help="keep the saved report's sections that are not run")
    args = parser.parse_args(argv)
    if args.markdown_from is not None:
        markdown_from(args.markdown_from)
        return
    run_benchmark(args.sections, args.replications, args.replications_multi, args.n,
                  replications_nprobust=args.replications_nprobust,
                  selection=args.selection, out_dir=args.out_dir,
                  keep_sections=args.keep_sections)


if __name__ == "__main__":
    main()
