"""Bandwidth benchmark: learned and cross-validated bandwidths against their peers, in one run.

What it measures
----------------
Three sections (``--sections``), all in float64 on the CPU, in this process. Before any timing
one small fit runs through each leave-one-out path (L-BFGS, minibatch Adam with KDTree
neighbors, the one-pass grid of the CV estimators, and statsmodels' ``cv_ls``), so that
one-time imports and first calls are not timed.

1. ``loo``: n=1,000, d=2, Gaussian kernel, X uniform on [-2, 2]^2,
   ``y = sin(2 x0) + x1**2 + 0.3 noise``. ``NadarayaWatsonRegressor(bandwidth="loo").fit``
   (best of ``--repeats``) against statsmodels' ``KernelReg(reg_type="lc", bw="cv_ls")``
   (once), which minimizes the same leave-one-out squared error. Both bandwidths are scored
   by the same exact leave-one-out MSE, ``attention_weights_ @ y`` against y.
   Targets: statsmodels / sklearn_nw time >= ``SPEED_TARGET``; sklearn_nw's leave-one-out
   MSE <= statsmodels' (to ``RTOL`` relative, rounding).
2. ``irrelevant``: n=100,000, d=4, the same target, so x2 and x3 are pure-noise inputs.
   ``LeaveOneOutBandwidth(random_state=0)`` (minibatches above 4096 samples) fitted once;
   the learned bandwidths, min(irrelevant) / max(relevant), and the RMSE of its predictions on
   5,000 fresh queries against the noise-free function. An oracle searches fixed bandwidths
   (a, a, b, ..., b) -- ``ORACLE_A`` values of a around the learned relevant ones times
   ``ORACLE_B`` -- by the RMSE on the same queries. Targets: RMSE learned / best fixed <=
   ``RMSE_TARGET``; fit time <= ``TIME_TARGET`` x statsmodels' time in section 1 (not
   evaluated when section 1 did not run).
3. ``cv``: n=2,000 and 5,000, d=3, two grids of per-feature multiples of Scott's rule: the
   CV estimators' default (``bandwidths=None``: 25 multiples from 1/8 to 8, ratio 2**(1/4),
   so the Gaussian coefficient doubles every second point and the engine squares blocks
   instead of exponentiating them) and ``--n-grid`` multiples over the same range (no
   doubling: one ``exp`` per grid point). ``NadarayaWatsonRegressorCV(bandwidths=grid).fit``
   (exact leave-one-out, one pass) against ``GridSearchCV(NadarayaWatsonRegressor(),
   {"bandwidth": grid}, cv=5).fit`` (refit included), both best of ``--repeats``; the same
   for the classifiers on three classes cut at the target's tertiles. Each grid point's
   leave-one-out loss (squared error, log-loss) is recomputed here from
   ``attention_weights_``, to check that the CV estimator chose its argmin. Targets (the
   default grid): GridSearchCV / CV estimator time >= ``CV_TARGET``; the argmin (both grids).
The accuracy of the estimators on real data sets, against tuned k-nearest neighbors,
statsmodels and R's locfit, is ``bench_accuracy.py``'s.

Targets are reported, never enforced. Warnings raised by the methods are recorded in the json,
and so is the 1-minute load average at the start and the end: on a shared machine a core
taken by another process stalls every parallel torch operation (tens of times slower), so
time on an idle machine, or with ``--threads 1``.

Usage: ``python benchmarks/bench_bandwidth.py [--sections S ...] [--n-loo N] [--n-irrelevant N]
[--n-queries M] [--cv-sizes N ...] [--n-grid G] [--repeats R] [--out-dir DIR]
[--threads T]``; writes bench_bandwidth.json and .md.
"""

import argparse
import inspect
import sys
from functools import partial
from itertools import product
from pathlib import Path

import numpy as np
import torch
from _common import (
    load_average,
    machine_info,
    machine_line,
    make_problem,
    recording,
    run_sections,
    timed,
    warning_lines,
)
from sklearn import config_context, get_config
from sklearn.base import BaseEstimator, RegressorMixin, is_classifier
from sklearn.model_selection import GridSearchCV

from sklearn_nw import (
    LeaveOneOutBandwidth,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw.bandwidth import scott_bandwidth

SECTIONS = ("loo", "irrelevant", "cv")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
NOISE = 0.3
N_RELEVANT = 2  # the target depends on x0 and x1 only
RTOL = 1e-9  # "<=" between two converged optimizers of one loss, up to rounding
SPEED_TARGET = 100.0
TIME_TARGET = 2.0
RMSE_TARGET = 1.10
CV_TARGET = 2.0
# The oracle of section 2: a from half the smallest to twice the largest learned relevant
# bandwidth; b from about the data's width (x is uniform on [-2, 2]) to "feature ignored".
ORACLE_A = 8
ORACLE_B = (0.5, 2.0, 10.0, 1e3)
N_FOLDS = 5


# -- data ------------------------------------------------------------------------------------
def truth(X):
    """The noise-free regression function: features from x2 on are irrelevant."""
    return np.sin(2 * X[:, 0]) + X[:, 1] ** 2


# X uniform on [-2, 2]^d and ``truth(X)`` plus Gaussian noise of scale ``NOISE``, float64:
# ``make_problem(n, 0, d, seed=seed, **PROBLEM)``.
PROBLEM = {"span": (-2.0, 2.0), "target": truth, "noise": NOISE, "dtype": np.float64}


def _progress(message):
    print(message, file=sys.stderr, flush=True)


def loo_loss(model, y):
    """Exact leave-one-out loss of a fitted Nadaraya-Watson model from its leave-one-out
    attention: mean squared error for a regressor, log-loss for a classifier (probabilities
    clipped at machine epsilon, as the CV estimators do)."""
    n = len(y)
    # The dense (n, n) attention is asked for on purpose: allow it whatever its size.
    with config_context(working_memory=max(get_config()["working_memory"], 2 * n * n / 2**17)):
        attention = model.attention_weights_  # (n, n)
    if is_classifier(model):
        onehot = y[:, None] == model.classes_  # (n, c)
        proba = attention @ onehot.astype(np.float64)  # (n, c)
        return float(-np.log(np.clip(proba[onehot], np.finfo(np.float64).eps, None)).mean())
    return float(np.mean((attention @ y - y) ** 2))


def rmse(pred, truth_values):
    return float(np.sqrt(np.mean((pred - truth_values) ** 2)))


class KernelRegCV(RegressorMixin, BaseEstimator):
    """statsmodels' ``KernelReg`` with ``bw="cv_ls"``, local-constant (``reg_type="lc"``)
    or local-linear (``"ll"``), as a scikit-learn regressor (every feature continuous; a
    fixed seed avoids statsmodels >= 0.15's FutureWarning)."""

    def __init__(self, reg_type="lc"):
        self.reg_type = reg_type

    def fit(self, X, y):
        from statsmodels.nonparametric.kernel_regression import KernelReg

        seed = {"rng": 0} if "rng" in inspect.signature(KernelReg).parameters else {}
        self.model_ = KernelReg(endog=np.asarray(y, dtype=np.float64), exog=X,
                                var_type="c" * X.shape[1], reg_type=self.reg_type, bw="cv_ls",
                                **seed)
        # cv_ls searches unconstrained (Nelder-Mead) and can return negative bandwidths;
        # its Gaussian kernel is even and the 1/h factors cancel, so h acts as |h|.
        self.bandwidth_ = np.abs(np.asarray(self.model_.bw, dtype=np.float64))
        return self

    def predict(self, X):
        return self.model_.fit(X)[0]


def _statsmodels_missing():
    """Why statsmodels cannot run, or None."""
    try:
        import statsmodels.nonparametric.kernel_regression  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def warm_up(sections):
    """One small fit through each path the sections time, so that one-time imports and
    first calls are not timed."""
    X, y, _ = make_problem(600, 0, 3, seed=99, **PROBLEM)
    labels = (y > np.median(y)).astype(int)
    NadarayaWatsonRegressor(bandwidth="loo").fit(X[:100], y[:100])  # full-batch L-BFGS
    minibatch = LeaveOneOutBandwidth(batch_size=64, n_neighbors=32, max_iter=3, random_state=0)
    NadarayaWatsonRegressor(bandwidth=minibatch).fit(X, y).predict(X[:10])  # Adam, KDTree
    NadarayaWatsonRegressorCV(bandwidths=3).fit(X[:100], y[:100])
    NadarayaWatsonClassifierCV(bandwidths=3).fit(X[:100], labels[:100])
    if "loo" in sections and _statsmodels_missing() is None:
        KernelRegCV().fit(X[:30, :2], y[:30])


def _target(section, name, met, detail):
    return {"section": section, "name": name, "met": met, "detail": detail}


# -- 1. the learned bandwidth against statsmodels' cv_ls ---------------------------------------
def section_loo(n=1000, d=2, repeats=3, seed=0):
    """The learned bandwidth and statsmodels' cv_ls on one problem: times, bandwidths and the
    exact leave-one-out MSE of each."""
    X, y, _ = make_problem(n, 0, d, seed=seed, **PROBLEM)
    caught = set()
    with recording(caught):
        times, nw, _ = timed(lambda: NadarayaWatsonRegressor(bandwidth="loo").fit(X, y),
                             repeats)
        results = [{"method": "sklearn_nw", "status": "ok", "repeats": repeats,
                    "times_s": times, "time_s": min(times), "n_iter": int(nw.n_iter_),
                    "bandwidth": nw.bandwidth_.tolist(), "loo_mse": loo_loss(nw, y)}]
        missing = _statsmodels_missing()
        if missing:
            results.append({"method": "statsmodels", "status": "skipped", "reason": missing})
        else:
            times, sm, _ = timed(lambda: KernelRegCV().fit(X, y))
            h = sm.bandwidth_
            results.append({"method": "statsmodels", "status": "ok", "repeats": 1,
                            "times_s": times, "time_s": times[0], "bandwidth": h.tolist(),
                            "loo_mse": loo_loss(NadarayaWatsonRegressor(bandwidth=h).fit(X, y),
                                                y)})
    report = {"config": {"n": n, "d": d, "noise": NOISE, "seed": seed},
              "results": results, "warnings": sorted(caught)}
    nw_r, sm_r = results
    if sm_r["status"] == "ok":
        report["speed_ratio"] = sm_r["time_s"] / nw_r["time_s"]
        report["loo_mse_rel_diff"] = (nw_r["loo_mse"] - sm_r["loo_mse"]) / sm_r["loo_mse"]
        report["targets"] = [
            _target("loo", f"statsmodels cv_ls / sklearn_nw fit time >= {SPEED_TARGET:g}",
                    report["speed_ratio"] >= SPEED_TARGET, f"{report['speed_ratio']:.0f}x"),
            _target("loo", "sklearn_nw's leave-one-out MSE <= statsmodels'",
                    report["loo_mse_rel_diff"] <= RTOL,
                    f"relative difference {report['loo_mse_rel_diff']:+.1e}")]
    else:
        report["targets"] = [_target("loo", "comparison with statsmodels", None,
                                     f"statsmodels skipped: {sm_r['reason']}")]
    return report


def markdown_loo(report):
    c = report["config"]
    lines = [(f"### 1. Learned bandwidth vs statsmodels cv_ls (n={c['n']:,}, d={c['d']}, "
              f"Gaussian, noise {c['noise']})"), "",
             "| method | fit time s | bandwidth | exact leave-one-out MSE |", "|---|---|---|---|"]
    names = {"sklearn_nw": 'sklearn_nw `bandwidth="loo"`',
             "statsmodels": 'statsmodels `KernelReg(reg_type="lc", bw="cv_ls")`'}
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"| {names[r['method']]} | {r['status']}: {r['reason']} | | |")
            continue
        runs = f"best of {r['repeats']}" if r["repeats"] > 1 else "1 run"
        iters = f", {r['n_iter']} iterations" if "n_iter" in r else ""
        h = ", ".join(f"{v:.4f}" for v in r["bandwidth"])
        lines.append(f"| {names[r['method']]} ({runs}{iters}) | {r['time_s']:.3f} | {h} "
                     f"| {r['loo_mse']:.6f} |")
    if "speed_ratio" in report:
        lines += ["", (f"Speed ratio statsmodels / sklearn_nw: {report['speed_ratio']:.0f}x; "
                       "leave-one-out MSE, sklearn_nw relative to statsmodels: "
                       f"{report['loo_mse_rel_diff']:+.1e}.")]
    return lines + warning_lines({"section 1": report["warnings"]})


# -- 2. irrelevant features at n=100,000 ------------------------------------------------------
def section_irrelevant(n=100_000, d=4, n_queries=5000, seed=0, statsmodels_s=None):
    """The learned diagonal bandwidth with irrelevant features, against the best fixed
    bandwidth of an oracle grid, on fresh queries scored against the noise-free function."""
    X, y, _ = make_problem(n, 0, d, seed=seed, **PROBLEM)
    Q = make_problem(n_queries, 0, d, seed=seed + 1, **PROBLEM)[0]  # fresh inputs
    f = truth(Q)
    caught = set()
    with recording(caught):
        selector = LeaveOneOutBandwidth(random_state=0)
        times, model, _ = timed(lambda: NadarayaWatsonRegressor(bandwidth=selector).fit(X, y))
        predict_times, pred, _ = timed(lambda: model.predict(Q))
        h = model.bandwidth_
        relevant, irrelevant = h[:N_RELEVANT], h[N_RELEVANT:]
        a_grid = np.geomspace(relevant.min() / 2, relevant.max() * 2, ORACLE_A)

        def oracle_search():
            oracle = []
            for a in a_grid:
                for b in ORACLE_B:
                    hab = np.r_[np.full(N_RELEVANT, a), np.full(d - N_RELEVANT, b)]
                    fixed = NadarayaWatsonRegressor(bandwidth=hab).fit(X, y)
                    oracle.append({"a": float(a), "b": b, "rmse": rmse(fixed.predict(Q), f)})
            return oracle

        search = timed(oracle_search)
        oracle, oracle_s = search.result, search.best
    best = min(oracle, key=lambda r: r["rmse"])
    learned = {"time_s": times[0], "predict_time_s": predict_times[0], "n_iter": int(model.n_iter_),
               "bandwidth": h.tolist(), "ratio": float(irrelevant.min() / relevant.max()),
               "rmse": rmse(pred, f)}
    report = {"config": {"n": n, "d": d, "n_queries": n_queries, "noise": NOISE, "seed": seed,
                         "relevant_features": list(range(N_RELEVANT)),
                         "selector": "LeaveOneOutBandwidth(random_state=0)",
                         "oracle_a": a_grid.tolist(), "oracle_b": list(ORACLE_B)},
              "learned": learned, "oracle": oracle, "oracle_search_s": oracle_s,
              "best_fixed": {**best, "at_grid_edge": best["a"] in (a_grid[0], a_grid[-1])},
              "rmse_ratio": learned["rmse"] / best["rmse"], "warnings": sorted(caught),
              "statsmodels_cv_ls_s": statsmodels_s}
    report["targets"] = [
        _target("irrelevant", f"RMSE learned / best fixed (a, a, b, b) <= {RMSE_TARGET:g}",
                report["rmse_ratio"] <= RMSE_TARGET, f"{report['rmse_ratio']:.3f}")]
    name = f"fit time <= {TIME_TARGET:g} x statsmodels cv_ls time of section 1"
    if statsmodels_s is None:
        report["targets"].append(_target("irrelevant", name, None,
                                         "not evaluated: section 1 did not run statsmodels"))
    else:
        report["targets"].append(_target(
            "irrelevant", name, learned["time_s"] <= TIME_TARGET * statsmodels_s,
            f"{learned['time_s']:.1f} s vs {TIME_TARGET:g} x {statsmodels_s:.1f} s"))
    return report


def markdown_irrelevant(report):
    c, r, best = report["config"], report["learned"], report["best_fixed"]
    k = N_RELEVANT

    def fmt(h):
        return ", ".join(f"{v:.3g}" for v in h[:k]) + " / " + ", ".join(f"{v:.3g}" for v in h[k:])

    edge = " (at the edge of the a grid)" if best["at_grid_edge"] else ""
    grid = f"{len(c['oracle_a'])} × {len(c['oracle_b'])}"
    fixed = [best["a"]] * k + [best["b"]] * (c["d"] - k)
    return [
        (f"### 2. Irrelevant features (n={c['n']:,}, d={c['d']}, y depends on x0, x1 only; "
         f"RMSE on {c['n_queries']:,} fresh queries against the noise-free function)"), "",
        ("| bandwidth | fit time s | h (relevant / irrelevant) | min irrelevant / max relevant "
         "| RMSE |"), "|---|---|---|---|---|",
        (f"| learned, `{c['selector']}` ({r['n_iter']} iterations, 1 run) | {r['time_s']:.2f} "
         f"| {fmt(r['bandwidth'])} | {r['ratio']:.1f} | {r['rmse']:.4f} |"),
        (f"| best fixed (a, a, b, b) of a {grid} grid (oracle){edge} | – | {fmt(fixed)} "
         f"| {best['b'] / best['a']:.1f} | {best['rmse']:.4f} |"), "",
        (f"RMSE learned / best fixed: {report['rmse_ratio']:.3f}. Prediction of the learned "
         f"model took {r['predict_time_s']:.2f} s; the oracle search "
         f"{report['oracle_search_s']:.0f} s."),
        *warning_lines({"section 2": report["warnings"]})]


# -- 3. CV estimators against GridSearchCV ------------------------------------------------------
def section_cv(sizes=(2000, 5000), d=3, n_grid=20, repeats=3, seed=0):
    """The exact leave-one-out CV estimators against 5-fold GridSearchCV over the same grid;
    whether they chose the grid point of least leave-one-out loss."""
    results, caught = [], set()
    for n in sizes:
        X, y, _ = make_problem(n, 0, d, seed=seed, **PROBLEM)
        labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))  # three balanced classes
        grids = {"default": None,
                 f"{n_grid} points": np.geomspace(1 / 8, 8, n_grid)[:, None] * scott_bandwidth(X)}
        tasks = (("regression", y, NadarayaWatsonRegressorCV, NadarayaWatsonRegressor),
                 ("classification", labels, NadarayaWatsonClassifierCV, NadarayaWatsonClassifier))
        for (grid_name, bandwidths), (task, target, cv_class, plain) in product(grids.items(),
                                                                               tasks):
            _progress(f"cv: n={n:,} {task}, {grid_name} grid")
            with recording(caught):
                # The fixed grid alone, at degree 0: the same candidates as GridSearchCV's.
                fixed = {"bandwidth_kinds": ["fixed"], "selection": "min"}
                if task == "regression":
                    fixed["degree"] = 0
                est = cv_class(bandwidths=bandwidths, **fixed)
                cv_times = timed(partial(est.fit, X, target), repeats).times
                grid = est.bandwidths_  # (G, d)
                gs = GridSearchCV(plain(), {"bandwidth": list(grid)}, cv=N_FOLDS)
                gs_times = timed(partial(gs.fit, X, target), repeats).times
                models = [plain(bandwidth=h).fit(X, target) for h in grid]
                loss = np.array([loo_loss(model, target) for model in models])
                score = -loss  # the default scores: squared error, log-loss
            best = int(np.argmax(score))
            results.append({
                "n": n, "task": task, "grid": grid_name, "n_grid": len(grid),
                "cv_times_s": cv_times, "cv_time_s": min(cv_times),
                "gridsearch_times_s": gs_times, "gridsearch_time_s": min(gs_times),
                "ratio": min(gs_times) / min(cv_times), "chosen_index": int(est.best_index_),
                "loo_argmin_index": best, "gridsearch_index": int(gs.best_index_),
                "chosen_is_loo_argmin": bool(np.array_equal(est.bandwidth_, grid[best])),
                "loo_loss": loss.tolist(),
                "max_abs_score_error": float(np.abs(est.cv_results_["mean_test_score"]
                                                    - score).max())})
    report = {"config": {"sizes": list(sizes), "d": d, "n_grid": n_grid, "repeats": repeats,
                         "grids": {"default": "NadarayaWatson...CV(bandwidths=None).bandwidths_"
                                              ": the points of scott_bandwidth(X) * "
                                              "geomspace(1/8, 8, 25) its search scored",
                                   f"{n_grid} points": "scott_bandwidth(X) * geomspace(1/8, 8, "
                                                       f"{n_grid})"},
                         "gridsearch": f"GridSearchCV(cv={N_FOLDS}), refit included",
                         "classes": "target cut at its tertiles"},
              "results": results, "warnings": sorted(caught)}
    slow = [f"n={r['n']:,} {r['task']} ({r['ratio']:.1f}x)" for r in results
            if r["grid"] == "default" and r["ratio"] < CV_TARGET]
    wrong = [f"n={r['n']:,} {r['task']} {r['grid']} grid" for r in results
             if not r["chosen_is_loo_argmin"]]
    report["targets"] = [
        _target("cv", f"GridSearchCV / CV estimator fit time >= {CV_TARGET:g} (default grid)",
                not slow, "below: " + ", ".join(slow) if slow else
                f"smallest {min(r['ratio'] for r in results if r['grid'] == 'default'):.1f}x"),
        _target("cv", "CV estimator chose the grid point of best leave-one-out score "
                "(regressor: squared error; classifier: log-loss)",
                not wrong, "not for: " + ", ".join(wrong) if wrong else "every case")]
    return report


def markdown_cv(report):
    c = report["config"]
    lines = [(f"### 3. CV estimators (exact leave-one-out) vs GridSearchCV (d={c['d']}, "
              f"per-feature multiples of Scott's rule, best of {c['repeats']})"),
             "",
             ("| n | task | grid | CV estimator s | GridSearchCV(cv=5) s | ratio | chose the "
              "leave-one-out best | max \\|score − refit score\\| |"),
             "|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        lines.append(f"| {r['n']:,} | {r['task']} | {r['grid']} ({r['n_grid']}) "
                     f"| {r['cv_time_s']:.3f} | {r['gridsearch_time_s']:.3f} "
                     f"| {r['ratio']:.1f} "
                     f"| {str(r['chosen_is_loo_argmin']).lower()} (index {r['chosen_index']}) "
                     f"| {r['max_abs_score_error']:.1e} |")
    return lines + ["", ("The default grid (25 multiples from 1/8 to 8) doubles the Gaussian "
                         "coefficient every second point, so most of its kernel blocks are "
                         "squares of earlier ones; a grid without that structure pays one "
                         "`exp` per point.")] + warning_lines({"section 3": report["warnings"]})


# -- the whole run ---------------------------------------------------------------------------
def run_benchmark(sections=SECTIONS, n_loo=1000, n_irrelevant=100_000, n_queries=5000,
                  cv_sizes=(2000, 5000), n_grid=20, repeats=3, out_dir=RESULTS_DIR):
    """Run the chosen sections, print each table as it is done, write the json and markdown;
    return the report."""
    sections = [s for s in SECTIONS if s in sections]
    report = {"machine": machine_info(),
              "config": {"sections": sections, "dtype": "float64", "device": "cpu",
                         "kernel": "gaussian", "repeats": repeats,
                         "warm_up": "one small fit per timed path before any timing"},
              "load_average": {"start": load_average()}, "sections": {}}
    chunks = [machine_line(report["machine"]) + "\n",
              ("Timed in one process, float64 on the CPU, after one small warm-up fit through "
               "each timed path (one-time imports and first calls excluded). Targets are "
               "reported, never enforced.\n")]
    print("".join(chunks), end="", flush=True)
    with recording(set()):
        warm_up(sections)
    runs = {"loo": (lambda: section_loo(n_loo, repeats=repeats), markdown_loo),
            "irrelevant": (lambda: section_irrelevant(n_irrelevant, n_queries=n_queries,
                                                      statsmodels_s=_statsmodels_s(report)),
                           markdown_irrelevant),
            "cv": (lambda: section_cv(cv_sizes, n_grid=n_grid, repeats=repeats), markdown_cv)}
    return run_sections("bench_bandwidth", report, chunks,
                        {name: runs[name] for name in sections}, out_dir)


def _statsmodels_s(report):
    """statsmodels' cv_ls time in section 1 of this run, if it ran."""
    loo = report["sections"].get("loo")
    sm = [r for r in loo["results"] if r["method"] == "statsmodels"] if loo else []
    return sm[0]["time_s"] if sm and sm[0]["status"] == "ok" else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help="1 loo, 2 irrelevant, 3 cv (default: all)")
    parser.add_argument("--n-loo", type=int, default=1000, help="section 1 samples")
    parser.add_argument("--n-irrelevant", type=int, default=100_000, help="section 2 samples")
    parser.add_argument("--n-queries", type=int, default=5000, help="section 2 fresh queries")
    parser.add_argument("--cv-sizes", type=int, nargs="+", default=[2000, 5000],
                        help="section 3 sample sizes")
    parser.add_argument("--n-grid", type=int, default=20, help="section 3 grid points")
    parser.add_argument("--repeats", type=int, default=3, help="for the cheap timed calls")
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's own choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    run_benchmark(args.sections, args.n_loo, args.n_irrelevant, args.n_queries, args.cv_sizes,
                  args.n_grid, args.repeats, args.out_dir)


if __name__ == "__main__":
    main()
