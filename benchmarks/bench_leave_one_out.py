"""What leaving one out means with sample weights and repeated inputs: the choice, measured.

The estimators leave a training point out with all the mass at its location (its whole
weight and every row with the same input; :mod:`sklearn_nw._leave_one_out`). The
alternative, removing one unit of the point's own weight, makes integer weights equal
repeated rows too, but a weight above 1 or a duplicated row leaves part of the point
predicting itself. Both are posed here on the same engine (``self_log_w``: ``-inf`` at
every distinct input, or ``log(max(w - 1, 0))`` at every row), so the comparison is of the
semantics alone.

What it measures
----------------
1. ``randhie``: statsmodels' RAND health insurance data, its first ``--n`` rows (8,000:
   1,101 distinct feature vectors), target ``mdvis``. Identical rows come in consecutive
   runs (rows 0 to 4 share one input), as one person's years would in a panel. Two outer
   5-fold splits: shuffled KFold (seed 0), where most test queries repeat a training input
   -- where leaving out the whole location costs -- and GroupKFold by input, where none
   does (a new person, say). Methods:
   ``StandardScaler`` + Nadaraya-Watson with the bandwidth learned by
   ``LeaveOneOutBandwidth`` (descent) and chosen on the CV estimators' default grid, under
   each semantics, and on the same grid by an inner shuffled 5-fold cross-validation
   (``NadarayaWatsonRegressorCV(cv=KFold(5, shuffle=True))``, which holds out rows, not
   locations); ``KNeighborsRegressor`` tuned by the same inner grid search, and the
   training mean. Scores: mean test R^2 over the folds, and the share of test rows whose
   input appears in the training fold; the distinct warnings of each method are recorded.
2. ``bootstrap``: n=300, d=2, ``y = sin(2 x0) + 0.3 noise``, X uniform on [-2, 2]^2;
   ``--draws`` bootstrap resamples. The learned bandwidth of x0 and the test MSE on 2,000
   fresh queries against the noise-free function, under each semantics, against the fit on
   the distinct rows.
3. ``weights``: the same data with unit weights and with every weight times 1.5; the
   learned bandwidth of x0 and the test MSE under each semantics.

Usage: ``python benchmarks/bench_leave_one_out.py [--sections S ...] [--n N] [--draws D]
[--out-dir DIR]``; writes bench_leave_one_out.json and .md.
"""

import argparse
import json
import warnings
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from _common import (
    load_average,
    machine_info,
    machine_line,
    make_problem,
    recording,
    timed,
    warning_lines,
)
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_nw import (
    LeaveOneOutBandwidth,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw._engine_loo import loo_grid_pool
from sklearn_nw._leave_one_out import leave_one_out_set
from sklearn_nw._scale import search_reference
from sklearn_nw.kernels import Gaussian

SECTIONS = ("randhie", "bootstrap", "weights")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
SEMANTICS = ("location", "unit")
KNN_NEIGHBORS = (1, 2, 3, 5, 8, 12, 20, 30, 50, 80)
GRID = np.geomspace(1 / 8, 8, 25)  # the CV estimators' default multiples


def _leave_one_out(X, y, w, semantics):
    """The leave-one-out set: the distinct inputs each leaving itself out, or the rows each
    keeping w - 1."""
    if semantics == "location":
        return leave_one_out_set(X, y[:, None], w)
    with np.errstate(divide="ignore"):
        return SimpleNamespace(X=X, values=y[:, None], log_weight=np.log(w),
                               self_log_weight=np.log(np.maximum(w - 1.0, 0.0)))


def _loo_tensors(X, y, w, semantics):
    """Keys, values, log weights and self log weights of leave-one-out, as float64
    tensors."""
    loo = _leave_one_out(X, y, w, semantics)
    parts = (loo.X, loo.values, loo.log_weight, loo.self_log_weight)
    return [torch.tensor(np.asarray(p), dtype=torch.float64) for p in parts]


def learned_bandwidth(X, y, w, semantics):
    """``LeaveOneOutBandwidth`` under one semantics (targets centered and scaled, as the
    regressor pools them)."""
    offset = np.average(y, weights=w)
    scale = np.abs(y - offset).max() or 1.0
    loo = _leave_one_out(X, (y - offset) / scale, w, semantics)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = LeaveOneOutBandwidth(random_state=0).learn(
            loo, Gaussian(), loss="squared_error", h_start=search_reference(X, w))
    return result.bandwidth


def grid_bandwidth(X, y, w, semantics):
    """The CV estimators' default grid, scored under one semantics."""
    grid = GRID[:, None] * search_reference(X, w)
    x, v, log_w, self_log_w = _loo_tensors(X, y, w, semantics)
    pooled = loo_grid_pool(x, v, torch.tensor(grid), Gaussian(), log_w, self_log_w)
    weight = log_w.exp()
    loss = (((pooled - v) ** 2).sum(2) * weight).sum(1)  # (G,)
    return grid[int(torch.argmin(loss))]


def fit_predict(X, y, w, X_test, semantics, search):
    scaler = StandardScaler().fit(X)
    Xs = scaler.transform(X)
    h = search(Xs, y, w, semantics)
    model = NadarayaWatsonRegressor(bandwidth=h).fit(Xs, y, sample_weight=w)
    return model.predict(scaler.transform(X_test)), h


def _fit_predict_model(model, X, y, X_test):
    return model.fit(X, y).predict(X_test)


def _randhie_scores(X, y, splits):
    """Mean test R^2 of each method over ``splits``, its per-fold scores, seconds, the
    distinct warnings it raised, and the share of test rows whose input appears in the
    training fold."""
    rows = {f"{kind} {s}": [] for kind in ("descent", "grid") for s in SEMANTICS}
    rows.update({"grid, shuffled 5-fold CV": [], "KNN tuned": [], "training mean": []})
    repeated, seconds = [], dict.fromkeys(rows, 0.0)
    warned = {k: set() for k in rows}
    for train, test in splits:
        X_train, y_train, X_test, y_test = X[train], y[train], X[test], y[test]
        w = np.ones(len(train))
        seen = {r.tobytes() for r in X_train}
        repeated.append(np.mean([r.tobytes() in seen for r in X_test]))
        for kind, search in (("descent", learned_bandwidth), ("grid", grid_bandwidth)):
            for s in SEMANTICS:
                with recording(warned[f"{kind} {s}"]):
                    run = timed(partial(fit_predict, X_train, y_train, w, X_test, s, search))
                seconds[f"{kind} {s}"] += run.best
                rows[f"{kind} {s}"].append(r2_score(y_test, run.result[0]))
        inner = KFold(5, shuffle=True, random_state=0)
        kfold = make_pipeline(StandardScaler(), NadarayaWatsonRegressorCV(cv=inner))
        knn = GridSearchCV(make_pipeline(StandardScaler(), KNeighborsRegressor()),
                           {"kneighborsregressor__n_neighbors": KNN_NEIGHBORS,
                            "kneighborsregressor__weights": ["uniform", "distance"]}, cv=inner)
        for name, model in (("grid, shuffled 5-fold CV", kfold), ("KNN tuned", knn)):
            with recording(warned[name]):
                run = timed(partial(_fit_predict_model, model, X_train, y_train, X_test))
            seconds[name] += run.best
            rows[name].append(r2_score(y_test, run.result))
        rows["training mean"].append(r2_score(y_test, np.full(len(test), y_train.mean())))
    return {"repeated_test_share": float(np.mean(repeated)),
            "r2": {k: float(np.mean(v)) for k, v in rows.items()},
            "r2_folds": {k: [float(x) for x in v] for k, v in rows.items()},
            "seconds": seconds, "warnings": {k: sorted(v) for k, v in warned.items()}}


def section_randhie(args):
    from statsmodels.datasets import randhie

    data = randhie.load_pandas().data.iloc[: args.n]
    X = data.drop(columns="mdvis").to_numpy(dtype=np.float64)
    y = data["mdvis"].to_numpy(dtype=np.float64)
    _, location = np.unique(X, axis=0, return_inverse=True)
    return {
        "n": args.n, "n_distinct": len(np.unique(X, axis=0)),
        # Queries at training inputs (most of them), as a shuffled split gives them.
        "shuffled": _randhie_scores(X, y, KFold(5, shuffle=True, random_state=0).split(X)),
        # Queries at new inputs: every row of an input in the same fold.
        "new_inputs": _randhie_scores(X, y, GroupKFold(5).split(X, groups=location.ravel())),
    }


def _truth(X):
    return np.sin(2 * X[:, 0])


def _synthetic(n=300, seed=100):
    """Inputs uniform on [-2, 2]^2, ``sin(2 x0)`` plus noise of scale 0.3, 2,000 test inputs
    drawn after the noise, and the noise-free function there."""
    X, y, X_test = make_problem(n, 2000, 2, seed=seed, span=(-2.0, 2.0), target=_truth,
                                noise=0.3, dtype=np.float64, queries_last=True)
    return X, y, X_test, _truth(X_test)


def _score(X, y, w, X_test, truth, semantics):
    h = learned_bandwidth(X, y, w, semantics)
    pred = NadarayaWatsonRegressor(bandwidth=h).fit(X, y, sample_weight=w).predict(X_test)
    return {"h0": float(h[0]), "mse": float(mean_squared_error(truth, pred))}


def section_bootstrap(args):
    X, y, X_test, truth = _synthetic()
    out = {"distinct": {s: _score(X, y, np.ones(len(X)), X_test, truth, s) for s in SEMANTICS},
           "draws": []}
    for seed in range(args.draws):
        rows = np.random.default_rng(seed).integers(0, len(X), len(X))
        draw = {}
        for s in SEMANTICS:
            try:
                draw[s] = _score(X[rows], y[rows], np.ones(len(X)), X_test, truth, s)
            except (IndexError, RuntimeError, ValueError) as exc:  # L-BFGS on NaN losses
                draw[s] = {"error": f"{type(exc).__name__}: {exc}"}
        out["draws"].append(draw)
    return out


def section_weights(args):
    X, y, X_test, truth = _synthetic()
    return {f"x{scale}": {s: _score(X, y, np.full(len(X), scale), X_test, truth, s)
                          for s in SEMANTICS} for scale in (1.0, 1.5)}


def markdown(report):
    lines = ["# Leave-one-out with weights and repeated inputs", "",
             machine_line(report["machine"]), ""]
    sections = report["sections"]
    if "randhie" in sections:
        r = sections["randhie"]
        a, b = r["shuffled"], r["new_inputs"]
        lines += [(f"## randhie: first {r['n']} rows ({r['n_distinct']} distinct inputs), "
                  "mean test R^2 over 5 folds"), "",
                  (f"Shuffled KFold: {100 * a['repeated_test_share']:.1f}% of test rows repeat "
                  f"a training input; GroupKFold by input: "
                  f"{100 * b['repeated_test_share']:.1f}%."), "",
                  "| method | shuffled KFold | GroupKFold by input | seconds (both) |",
                  "|---|---|---|---|"]
        lines += [f"| {k} | {a['r2'][k]:.4f} | {b['r2'][k]:.4f} | "
                  f"{a['seconds'][k] + b['seconds'][k]:.1f} |" for k in a["r2"]]
        lines += warning_lines({f"{split}, {k}": w for split, scores in
                                (("shuffled KFold", a), ("GroupKFold by input", b))
                                for k, w in scores["warnings"].items()})
        lines.append("")
    if "bootstrap" in sections:
        b = sections["bootstrap"]
        lines += ["## bootstrap resamples (n=300): learned h of x0 and test MSE", "",
                  "| data | location: h0 | location: MSE | unit: h0 | unit: MSE |",
                  "|---|---|---|---|---|"]
        for name, row in [("distinct rows", b["distinct"])] + [
                (f"draw {i}", d) for i, d in enumerate(b["draws"])]:
            cells = []
            for s in SEMANTICS:
                cells += ([row[s]["error"], ""] if "error" in row[s]
                          else [f"{row[s]['h0']:.4g}", f"{row[s]['mse']:.4g}"])
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    if "weights" in sections:
        lines += ["## every weight times 1.5 (n=300)", "",
                  "| weights | location: h0 | location: MSE | unit: h0 | unit: MSE |",
                  "|---|---|---|---|---|"]
        for name, row in sections["weights"].items():
            cells = [f"{row[s][k]:.4g}" for s in SEMANTICS for k in ("h0", "mse")]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def run_benchmark(sections=SECTIONS, n=8000, draws=6, out_dir=RESULTS_DIR):
    """Run ``sections``; write bench_leave_one_out.json and .md into ``out_dir``, print the
    markdown and return the report."""
    args = argparse.Namespace(n=n, draws=draws)
    report = {"machine": machine_info(), "load_average": {"start": load_average()},
              "sections": {}}
    for name in sections:
        report["sections"][name] = globals()[f"section_{name}"](args)
    report["load_average"]["end"] = load_average()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench_leave_one_out.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / "bench_leave_one_out.md").write_text(markdown(report) + "\n")
    print(markdown(report))
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--draws", type=int, default=6)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run_benchmark(args.sections, args.n, args.draws, args.out_dir)


if __name__ == "__main__":
    main()
