"""Uncertainty benchmark: the standard errors and intervals against the peers that compute
them (MAPIE's jackknife+, nprobust's ``lprobust``), and what they cost over a predict.

What it measures
----------------
1. ``jackknife``: ``NadarayaWatsonRegressor(kernel, bandwidth=h, degree).predict_interval``
   against MAPIE's ``CrossConformalRegressor(estimator, cv=LeaveOneOut(),
   method="plus")`` around the same estimator (n refits), at two confidence levels, on
   small problems (uniform inputs in 1 to 3 features, a sine target plus noise, float64):
   the largest difference of the bounds, and both times (fit plus intervals). Target: the
   same bounds to 1e-8.
2. ``lprobust``: ``predict_confidence_interval`` (conventional and robust bias-corrected,
   ``return_std=True``) against ``nprobust.lprobust`` in one feature (CCF 2018's first
   design, n points, 5 evaluation points): every kernel nprobust and the package share,
   p = 0 and 1, every ``vce``, b = h and b != h; the largest difference of the estimates
   and standard errors. Then the speed at ``--n-speed`` points and 30 evaluation points
   (p = 1, h = 0.2, b = 0.3), best of ``--repeats``. Targets: equal to 1e-8; no slower
   than nprobust in every configuration.
3. ``cost``: ``predict(X, return_std=True)`` (both kinds of residual variance) and
   ``predict_interval`` over a plain ``predict`` (n training points uniform in 2
   features, h the radius holding about 40 of them; the dense Gaussian route, a k-d tree
   and a cell list with the Epanechnikov kernel, local-linear fits (Gaussian, and
   Epanechnikov on a k-d tree), the adaptive route: balloon and sample-point
   Gaussian bandwidths at the 40th neighbor distance, and the 40 nearest keys at h),
   best of ``--repeats`` after a first call, with the training points' own pass kept at
   fit (``store_loo=True``) and run by each call (the default); the fits' seconds with
   and without it. Target (issue 27): at most 3 times, with ``store_loo=True``. Around
   it (reported, not in the target): the dense Gaussian route, local-linear fits and
   the cell list at 1,000 and 20,000 points in 2 features and 5,000 in 1 and 3.

4. ``margeff``: ``marginal_effects`` (degree 0 and 1, with and without ``return_std``)
   against statsmodels' ``KernelReg(reg_type="lc" | "ll", bw=h).fit()`` at ``--n-margeff``
   training points in 2 features (uniform, a sine plus a square plus noise), the training
   points as queries, fit plus effects, best of ``--repeats``: the largest difference of
   the local-linear slopes (statsmodels' "ll" marginal effects) and of the means. Its
   "lc" effects are no partial derivatives in several features (one number per query),
   so only the means are compared there. Target: the slopes equal to 1e-8.

A peer that is not installed (``pip install mapie nprobust-pkg``, the ``bench`` extras) is
reported as skipped; the package's own times are still measured.

Usage: ``python benchmarks/bench_uncertainty.py [--sections S ...] [--n-speed N]
[--n-cost N] [--n-queries M] [--n-margeff N] [--repeats R] [--out-dir DIR]``; writes
bench_uncertainty.json and .md (of the sections run only: a run of some sections replaces
the files of a full run; give ``--out-dir`` to keep them).
"""

import argparse
import importlib.util
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
from _common import (
    load_average,
    machine_info,
    machine_line,
    radius_holding,
    run_sections,
    timed,
)

from sklearn_nw import AdaptiveBandwidth, NadarayaWatsonClassifier, NadarayaWatsonRegressor

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SECTIONS = ("jackknife", "lprobust", "cost", "margeff")
# nprobust's kernel names and the package's.
NPROBUST_KERNELS = {"epa": "epanechnikov", "tri": "triangular", "uni": "tophat",
                    "gau": "gaussian"}
VCES = ("nn", "hc0", "hc1", "hc2", "hc3")
ADAPTIVE_K = 40  # the adaptive bandwidths' k in the cost section
JACKKNIFE_PROBLEMS = ((50, 1, "gaussian", 0.1, 0), (80, 2, "gaussian", 0.3, 0),
                      (60, 1, "epanechnikov", 0.15, 0), (100, 3, "gaussian", 0.5, 0),
                      (200, 1, "gaussian", 0.05, 0), (200, 1, "gaussian", 0.1, 1))


def _installed(module):
    return importlib.util.find_spec(module) is not None


def _peer_versions():
    versions = {}
    for package in ("mapie", "nprobust-pkg"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _ccf_design(n, seed, noise):
    """CCF 2018's first design: m(x) = sin(3 pi x / 2) / (1 + 18 x^2 (sgn(x) + 1)), x
    uniform on [-1, 1]."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n)
    m = np.sin(3 * np.pi * x / 2) / (1 + 18 * x**2 * (np.sign(x) + 1))
    return x, m + noise * rng.normal(size=n)


def section_jackknife(problems=JACKKNIFE_PROBLEMS, levels=(0.8, 0.9)):
    """predict_interval against MAPIE's jackknife+ by n refits."""
    have_mapie = _installed("mapie")
    results = []
    for seed, (n, d, kernel, h, degree) in enumerate(problems):
        rng = np.random.default_rng(seed)
        X = rng.uniform(0, 1, (n, d))
        y = np.sin(6 * X.sum(1)) + 0.3 * rng.normal(size=n)
        Q = rng.uniform(0, 1, (40, d))
        est = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h, degree=degree,
                                      bounded=bool(degree))
        ours = timed(lambda est=est, X=X, y=y, Q=Q:
                     est.fit(X, y).predict_interval(Q, confidence_level=list(levels))[1])
        row = {"n": n, "d": d, "kernel": kernel, "h": h, "degree": degree,
               "ours_s": ours.best, "mapie": {"status": "skipped"}}
        if have_mapie:
            from mapie.regression import CrossConformalRegressor
            from sklearn.model_selection import LeaveOneOut

            def mapie_run(est=est, X=X, y=y, Q=Q):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = CrossConformalRegressor(est, confidence_level=list(levels),
                                                    cv=LeaveOneOut(), method="plus")
                    model.fit_conformalize(X, y)
                    return model.predict_interval(Q, aggregate_point_predictions=None)[1]

            theirs = timed(mapie_run)
            row["mapie"] = {"status": "ok", "seconds": theirs.best,
                            "max_abs_diff": float(np.abs(ours.result - theirs.result).max())}
        results.append(row)
    diffs = [r["mapie"]["max_abs_diff"] for r in results if r["mapie"]["status"] == "ok"]
    target = {"name": "jackknife+ bounds equal MAPIE's to 1e-8",
              "met": (max(diffs) <= 1e-8) if diffs else None,
              "detail": (f"largest difference {max(diffs):.1e} over {len(diffs)} problems"
                         if diffs else "MAPIE not installed")}
    return {"config": {"levels": list(levels), "n_queries": 40}, "results": results,
            "targets": [target]}


def markdown_jackknife(result):
    lines = ["### Jackknife+ against MAPIE's CrossConformalRegressor(cv=LeaveOneOut(), "
             "method=\"plus\"), 40 queries, levels "
             + ", ".join(str(v) for v in result["config"]["levels"]), "",
             "| n | d | kernel | h | degree | ours s | MAPIE s | MAPIE / ours | max abs diff |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["results"]:
        m = r["mapie"]
        theirs = (f"{m['seconds']:.3f} | {m['seconds'] / r['ours_s']:.1f} | "
                  f"{m['max_abs_diff']:.1e}" if m["status"] == "ok" else "skipped | | ")
        lines.append(f"| {r['n']} | {r['d']} | {r['kernel']} | {r['h']} | {r['degree']} | "
                     f"{r['ours_s']:.3f} | {theirs} |")
    return lines


def section_lprobust(n=300, n_speed=10_000, repeats=3):
    """predict_confidence_interval against nprobust.lprobust: equality, then speed."""
    have = _installed("nprobust")
    ev = np.array([-0.9, -0.5, 0.0, 0.3, 0.8])
    x, y = _ccf_design(n, 0, 0.2)
    worst, compared = 0.0, 0
    if have:
        from nprobust import lprobust
    for kern, name in NPROBUST_KERNELS.items():
        for p in (0, 1):
            for vce in VCES:
                for h, b in ((0.3, 0.3), (0.3, 0.5)):
                    model = NadarayaWatsonRegressor(kernel=name, bandwidth=h, degree=p,
                                                    residual_variance=vce).fit(x[:, None], y)
                    kw = {"bias_bandwidth": None if b == h else b, "return_std": True}
                    tau_us, _, se_us = model.predict_confidence_interval(
                        ev[:, None], bias_correction="conventional", **kw)
                    tau_bc, _, se_rb = model.predict_confidence_interval(ev[:, None], **kw)
                    if not have:
                        continue
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        est = lprobust(y, x, eval=ev, p=p, h=h, b=b, kernel=kern,
                                       vce=vce).Estimate
                    worst = max(worst, float(max(
                        np.abs(tau_us - est["tau.us"]).max(), np.abs(tau_bc - est["tau.bc"]).max(),
                        np.abs(se_us - est["se.us"]).max(), np.abs(se_rb - est["se.rb"]).max())))
                    compared += 1
    speed = []
    x, y = _ccf_design(n_speed, 1, 0.3)
    ev30 = np.linspace(-0.9, 0.9, 30)
    for kern in ("epa", "gau"):
        for vce in ("hc2", "nn"):
            model = NadarayaWatsonRegressor(kernel=NPROBUST_KERNELS[kern], bandwidth=0.2,
                                            degree=1, residual_variance=vce).fit(x[:, None], y)
            ours = timed(lambda model=model: model.predict_confidence_interval(
                ev30[:, None], bias_bandwidth=0.3, return_std=True), repeats, first_call=True)
            row = {"kernel": kern, "vce": vce, "ours_s": ours.best, "nprobust_s": None}
            if have:
                def theirs(kern=kern, vce=vce):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        return lprobust(y, x, eval=ev30, p=1, h=0.2, b=0.3, kernel=kern,
                                        vce=vce)
                row["nprobust_s"] = timed(theirs, repeats, first_call=True).best
                row["ratio"] = row["nprobust_s"] / row["ours_s"]
            speed.append(row)
    ratios = [r["ratio"] for r in speed if r["nprobust_s"] is not None]
    targets = [
        {"name": "estimates and standard errors equal lprobust's to 1e-8",
         "met": (worst <= 1e-8) if compared else None,
         "detail": (f"largest difference {worst:.1e} over {compared} configurations"
                    if compared else "nprobust not installed")},
        {"name": f"no slower than lprobust at n = {n_speed:,}, 30 points",
         "met": (min(ratios) >= 1.0) if ratios else None,
         "detail": (f"nprobust's time over ours from {min(ratios):.2f} to {max(ratios):.2f}"
                    if ratios else "nprobust not installed")}]
    return {"config": {"n": n, "n_speed": n_speed, "repeats": repeats, "p": [0, 1],
                       "vce": list(VCES), "kernels": list(NPROBUST_KERNELS)},
            "results": {"max_abs_diff": worst if compared else None, "compared": compared,
                        "speed": speed},
            "targets": targets}


def markdown_lprobust(result):
    c, r = result["config"], result["results"]
    diff = (f"{r['max_abs_diff']:.1e} over {r['compared']} configurations"
            if r["compared"] else "not compared (nprobust not installed)")
    lines = ["### Confidence intervals against nprobust's lprobust (one feature, CCF design 1)",
             "", f"Largest difference of the estimates and standard errors (conventional and "
             f"robust bias-corrected), n = {c['n']}, 5 points: {diff}.", "",
             f"Speed at n = {c['n_speed']:,}, 30 points, p = 1, h = 0.2, b = 0.3, best of "
             f"{c['repeats']}:", "", "| kernel | vce | ours s | nprobust s | nprobust / ours |",
             "|---|---|---|---|---|"]
    for s in r["speed"]:
        theirs = (f"{s['nprobust_s']:.3f} | {s['ratio']:.2f}" if s["nprobust_s"] is not None
                  else "skipped | ")
        lines.append(f"| {s['kernel']} | {s['vce']} | {s['ours_s']:.3f} | {theirs} |")
    return lines


def _cost_problem(n, d, n_queries):
    """Uniform inputs in d features, a sine of the first plus noise, and a bandwidth
    holding about 40 training points around a point."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, d))
    y = np.sin(6 * X[:, 0]) + 0.3 * rng.normal(size=n)
    return X, y, rng.uniform(size=(n_queries, d)), float(radius_holding(40, n, d))


def _recorded(params):
    """Estimator parameters as the JSON results hold them (a bandwidth object's repr)."""
    return {k: v if isinstance(v, (int, float, str)) else repr(v) for k, v in params.items()}


def _cost_row(case, params, X, y, Q, repeats):
    """Seconds of a plain predict, return_std (nn, hc2) and predict_interval, with the
    training points' state kept at fit (``store_loo=True``) and computed by each call;
    and of the fits with and without it."""
    plain = NadarayaWatsonRegressor(**params)
    stored = NadarayaWatsonRegressor(**params, store_loo=True)
    row = {"case": case, "params": _recorded(params),
           "fit_s": timed(lambda: plain.fit(X, y), repeats).best,
           "fit_store_loo_s": timed(lambda: stored.fit(X, y), repeats).best}
    for model, tag in ((stored, ""), (plain, "_per_call")):
        model.predict(Q[:10])  # first call: lazily built state, thread pools
        for variance in ("nn", "hc2"):
            model.set_params(residual_variance=variance)
            row[f"return_std_{variance}{tag}_s"] = timed(
                lambda m=model: m.predict(Q, return_std=True), repeats).best
        row[f"predict_interval{tag}_s"] = timed(
            lambda m=model: m.predict_interval(Q), repeats).best
    row["predict_s"] = timed(lambda: stored.predict(Q), repeats).best
    return row


def section_cost(n=5000, n_queries=5000, repeats=3,
                 neighbourhood=((1000, 2), (20_000, 2), (5000, 1), (5000, 3))):
    """return_std and predict_interval over a plain predict, on eight routes; and, around
    that configuration, the dense routes and the cell list at other n and d
    (``neighbourhood``)."""
    X, y, Q, h = _cost_problem(n, 2, n_queries)
    cases = {"dense Gaussian": {"bandwidth": h, "compute": "eager"},
             "k-d tree Epanechnikov": {"bandwidth": h, "kernel": "epanechnikov",
                                       "algorithm": "kd_tree"},
             "cell list Epanechnikov": {"bandwidth": h, "kernel": "epanechnikov",
                                        "algorithm": "cell_list"},
             "local linear": {"bandwidth": h, "degree": 1},
             "local linear, k-d tree Epanechnikov": {
                 "bandwidth": h, "degree": 1, "kernel": "epanechnikov",
                 "algorithm": "kd_tree"},
             # The adaptive route: k = 40 nearest, as many as the fixed h holds.
             "balloon Gaussian (k = 40)": {
                 "bandwidth": AdaptiveBandwidth("balloon", n_neighbors=ADAPTIVE_K)},
             "sample-point Gaussian (k = 40)": {
                 "bandwidth": AdaptiveBandwidth("sample_point", n_neighbors=ADAPTIVE_K)},
             # The k nearest keys at the fixed h (about as many as h holds).
             "k nearest Gaussian (k = 40)": {"bandwidth": h, "n_neighbors": ADAPTIVE_K}}
    results = [_cost_row(case, params, X, y, Q, repeats) for case, params in cases.items()]
    sample_point = lambda k: ((f"sample-point Gaussian (k = {k})",
                               {"bandwidth": AdaptiveBandwidth("sample_point", n_neighbors=k)}))
    around = []
    for n_around, d in neighbourhood:
        Xa, ya, Qa, ha = _cost_problem(n_around, d, n_queries)
        for case, params in (("dense Gaussian", {"bandwidth": ha, "compute": "eager"}),
                             ("local linear", {"bandwidth": ha, "degree": 1}),
                             ("cell list Epanechnikov", {"bandwidth": ha,
                                                         "kernel": "epanechnikov",
                                                         "algorithm": "cell_list"}),
                             sample_point(ADAPTIVE_K)):
            around.append({"n": n_around, "d": d,
                           **_cost_row(case, params, Xa, ya, Qa, repeats)})
    # The sample-point bandwidth at other k, on the target's points.
    for k in (10, 100):
        around.append({"n": n, "d": 2, **_cost_row(*sample_point(k), X, y, Q, repeats)})
    keys = ("return_std_nn_s", "return_std_hc2_s", "predict_interval_s")
    ratios = {k: [r[k] / r["predict_s"] for r in results] for k in keys}
    target = {"name": "return_std and predict_interval at most 3x a plain predict "
                      "(store_loo=True)",
              "met": max(max(v) for v in ratios.values()) <= 3.0,
              "detail": "; ".join(f"{k[:-2]} from {min(v):.1f}x to {max(v):.1f}x"
                                  for k, v in ratios.items())}
    above = [f"{r['n']:,} x {r['d']} {r['case']} {k[:-2]} {r[k] / r['predict_s']:.1f}x"
             for r in around for k in keys if r[k] / r["predict_s"] > 3.0]
    around_target = {"name": "the same around it (other n, d and k)", "met": not above,
                     "detail": "; ".join(above) if above else "every row within 3x"}
    # The classifier's conformal sets beside predict_proba (reported, not a target).
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))  # three classes
    sets = []
    for case in ("dense Gaussian", "k-d tree Epanechnikov", "sample-point Gaussian (k = 40)",
                 "k nearest Gaussian (k = 40)"):
        params = {k: v for k, v in cases[case].items() if k != "degree"}
        model = NadarayaWatsonClassifier(**params, store_loo=True).fit(X, labels)
        model.predict_proba(Q[:10])
        row = {"case": case, "params": _recorded(params),
               "predict_proba_s": timed(lambda m=model: m.predict_proba(Q), repeats).best}
        for score in ("lac", "aps"):
            row[f"predict_set_{score}_s"] = timed(
                lambda m=model, score=score: m.predict_set(Q, conformity_score=score),
                repeats).best
        sets.append(row)
    return {"config": {"n": n, "n_queries": n_queries, "d": 2, "h": h, "repeats": repeats},
            "results": results, "sets": sets, "neighbourhood": around,
            "targets": [target, around_target]}


def _cost_cells(r):
    """A cost row's cells: predict's seconds, the fits', then the ratios over predict
    with the state kept at fit and computed by each call."""
    t = r["predict_s"]
    ratio = lambda key: f"{r[key] / t:.1f}x"
    return (f"{t:.3f} | {r['fit_s']:.3f} | {r['fit_store_loo_s']:.3f} | "
            f"{ratio('return_std_nn_s')} | {ratio('return_std_hc2_s')} | "
            f"{ratio('predict_interval_s')} | {ratio('return_std_hc2_per_call_s')} | "
            f"{ratio('predict_interval_per_call_s')} |")


_COST_HEADER = ("predict s | fit s | fit s (store_loo) | return_std (nn) | "
                "return_std (hc2) | predict_interval | per call: return_std (hc2) | "
                "per call: predict_interval |")


def markdown_cost(result):
    c = result["config"]
    lines = [f"### Cost over a plain predict: {c['n']:,} training points, {c['n_queries']:,} "
             f"queries, 2 features (uniform), h = {c['h']:.4f} (about 40 points within h), best "
             f"of {c['repeats']}", "",
             "With `store_loo=True` the training points' own pass (their in-sample fits and "
             "weights, their fits without themselves) runs once, at fit; without it (the "
             "default, \"per call\") every call runs it. The fits' seconds beside.", "",
             f"| case | {_COST_HEADER}", "|---|---|---|---|---|---|---|---|---|"]
    for r in result["results"]:
        lines.append(f"| {r['case']} | {_cost_cells(r)}")
    lines += ["", "The classifier on the same points (three classes, the targets' terciles, "
              "`store_loo=True`): conformal sets over `predict_proba` (reported beside the "
              "target, not in it).",
              "", "| case | predict_proba s | predict_set (LAC) | predict_set (APS) |",
              "|---|---|---|---|"]
    for r in result.get("sets", []):
        t = r["predict_proba_s"]
        lines.append(f"| {r['case']} | {t:.3f} | {r['predict_set_lac_s'] / t:.1f}x | "
                     f"{r['predict_set_aps_s'] / t:.1f}x |")
    lines += ["", f"Around it: {c['n_queries']:,} queries, other training sizes and "
              "features (about 40 points within h), and the sample-point bandwidth at "
              "other k on the target's points.",
              "", f"| n × d | case | {_COST_HEADER}", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result.get("neighbourhood", []):
        lines.append(f"| {r['n']:,} × {r['d']} | {r['case']} | {_cost_cells(r)}")
    return lines


def section_margeff(n=500, repeats=3):
    """marginal_effects against statsmodels' KernelReg(...).fit(), 2 features."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1] ** 2 + 0.3 * rng.normal(size=n)
    h = [0.1, 0.15]
    have_statsmodels = _installed("statsmodels")
    results = []
    for degree, reg_type in ((0, "lc"), (1, "ll")):
        est = NadarayaWatsonRegressor(bandwidth=h, degree=degree)
        est.fit(X, y).marginal_effects(X[:10])  # first call: thread pools
        ours = timed(lambda est=est: est.fit(X, y).marginal_effects(X), repeats)
        ours_std = timed(lambda est=est: est.fit(X, y).marginal_effects(X, return_std=True),
                         repeats)
        row = {"degree": degree, "reg_type": reg_type, "ours_s": ours.best,
               "ours_std_s": ours_std.best, "statsmodels": {"status": "skipped"}}
        if have_statsmodels:
            from statsmodels.nonparametric.kernel_regression import KernelReg

            def theirs_run(reg_type=reg_type):
                with warnings.catch_warnings():  # its default random state's FutureWarning
                    warnings.simplefilter("ignore", FutureWarning)
                    return KernelReg(y, X, var_type="cc", reg_type=reg_type, bw=h).fit()

            theirs = timed(theirs_run, repeats)
            mean, mfx = theirs.result
            row["statsmodels"] = {
                "status": "ok", "seconds": theirs.best,
                "max_abs_diff_mean": float(np.abs(est.predict(X) - mean).max()),
                "max_abs_diff_effects": (float(np.abs(ours.result - mfx).max())
                                         if degree else None)}
        results.append(row)
    slopes = [r["statsmodels"]["max_abs_diff_effects"] for r in results
              if r["degree"] and r["statsmodels"]["status"] == "ok"]
    target = {"name": "local-linear marginal effects equal statsmodels' ll to 1e-8",
              "met": (max(slopes) <= 1e-8) if slopes else None,
              "detail": (f"largest difference {max(slopes):.1e}" if slopes
                         else "statsmodels not installed")}
    return {"config": {"n": n, "d": 2, "h": h, "repeats": repeats}, "results": results,
            "targets": [target]}


def markdown_margeff(result):
    c = result["config"]
    lines = [f"### Marginal effects against statsmodels' KernelReg(...).fit(): {c['n']} "
             f"training points (also the queries), 2 features, h = {c['h']}, fit plus "
             f"effects, best of {c['repeats']}", "",
             "| degree (statsmodels) | ours s | with return_std s | statsmodels s | "
             "statsmodels / ours | max abs diff of the means | of the effects |",
             "|---|---|---|---|---|---|---|"]
    for r in result["results"]:
        m = r["statsmodels"]
        if m["status"] == "ok":
            effects = ("not comparable" if m["max_abs_diff_effects"] is None
                       else f"{m['max_abs_diff_effects']:.1e}")
            theirs = (f"{m['seconds']:.3f} | {m['seconds'] / r['ours_s']:.1f} | "
                      f"{m['max_abs_diff_mean']:.1e} | {effects}")
        else:
            theirs = "skipped | | | "
        lines.append(f"| {r['degree']} ({r['reg_type']}) | {r['ours_s']:.3f} | "
                     f"{r['ours_std_s']:.3f} | {theirs} |")
    return lines


def run_benchmark(sections=SECTIONS, n_speed=10_000, n_cost=5000, n_queries=5000, repeats=3,
                  jackknife_problems=JACKKNIFE_PROBLEMS, out_dir=RESULTS_DIR, n_margeff=500,
                  cost_neighbourhood=((1000, 2), (20_000, 2), (5000, 1), (5000, 3))):
    """Run the chosen sections, print each table, write the json and markdown; return the
    report. ``cost_neighbourhood``: the (n, d) the cost section measures around its own."""
    peers = _peer_versions()
    report = {"machine": machine_info(),
              "config": {"device": "cpu", "dtype": "float64", "peers": peers},
              "load_average": {"start": load_average()}, "sections": {}}
    chunks = [machine_line(report["machine"]) + "\n",
              "Peers: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in peers.items())
              + ". Targets are reported, never enforced.\n"]
    print("".join(chunks), end="", flush=True)
    runs = {"jackknife": (lambda: section_jackknife(jackknife_problems), markdown_jackknife),
            "lprobust": (lambda: section_lprobust(n_speed=n_speed, repeats=repeats),
                         markdown_lprobust),
            "cost": (lambda: section_cost(n_cost, n_queries, repeats, cost_neighbourhood),
                     markdown_cost),
            "margeff": (lambda: section_margeff(n_margeff, repeats), markdown_margeff)}
    return run_sections("bench_uncertainty", report, chunks,
                        {name: runs[name] for name in SECTIONS if name in sections}, out_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--n-speed", type=int, default=10_000)
    parser.add_argument("--n-cost", type=int, default=5000)
    parser.add_argument("--n-queries", type=int, default=5000)
    parser.add_argument("--n-margeff", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run_benchmark(args.sections, args.n_speed, args.n_cost, args.n_queries, args.repeats,
                  out_dir=args.out_dir, n_margeff=args.n_margeff)


if __name__ == "__main__":
    main()
