"""Smoke tests of the benchmarks: they run at a tiny size and write well-formed results.

Benchmarks are not tests: nothing here asserts a timing, only that every time is positive.
"""

import contextlib
import importlib
import importlib.util
import io
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
# The module each peer needs; a peer whose module is missing must be reported as skipped.
PEER_MODULES = {"sklearn_nw": "sklearn_nw", "sklearn_nw_compiled": "sklearn_nw",
                "textbook": "torch", "chunked": "torch", "compiled": "torch",
                "statsmodels": "statsmodels", "knn": "sklearn", "pykeops": "pykeops"}


def _installed(module):
    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="module")
def bench():
    """The benchmark modules, imported from benchmarks/ (their worker processes need it on
    sys.path too, hence the module-scoped path)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCHMARKS))
        yield importlib.import_module("bench_predict"), importlib.import_module("run")


def _quiet_run(module, out_dir, **kwargs):
    """A benchmark module's ``run_benchmark`` into ``out_dir``: its report, the folder and
    what it printed."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        report = module.run_benchmark(out_dir=out_dir, **kwargs)
    return report, out_dir, stdout.getvalue()


@pytest.fixture(scope="module")
def tiny_run(bench, tmp_path_factory):
    """One tiny run of every peer: the report it returns, its output folder and its stdout."""
    bench_predict, _ = bench
    # pykeops' own build cache: only the first run on a machine pays for the compile. The
    # compiled row compiles in each of its processes (seconds): one is enough here.
    return _quiet_run(bench_predict, tmp_path_factory.mktemp("bench_predict"), n_train=300,
                      n_queries=200, d=3, repeats=2, keops_cold=False, processes=2,
                      compiled_processes=1)


def test_json_has_machine_config_and_one_result_per_peer(bench, tiny_run):
    bench_predict, _ = bench
    report, out_dir, _ = tiny_run
    saved = json.loads((out_dir / "bench_predict.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert {"cpu", "cores", "ram_gib", "versions", "torch_threads"} <= set(saved["machine"])
    assert {"torch", "scikit-learn", "statsmodels", "pykeops"} <= set(saved["machine"]["versions"])
    assert saved["config"]["n_train"] == 300 and saved["config"]["d"] == 3
    assert len(saved["config"]["h"]) == 3
    assert [r["peer"] for r in saved["results"]] == list(bench_predict.PEERS)
    assert isinstance(saved["target"]["met"], bool)
    # The package's rows: the median of fresh processes, each one's time kept; their
    # spread is a target of its own.
    for r, processes in zip(saved["results"], (2, 1)):
        assert len(r["process_times_s"]) == processes and r["time_s"] in r["process_times_s"]
    assert saved["config"]["compiled_processes"] == 1
    times = saved["results"][0]["process_times_s"]
    spread = saved["process_target"]
    assert spread["spread"] == pytest.approx(max(times) / min(times))
    assert spread["processes"] == 2 and isinstance(spread["met"], bool)
    for r in saved["results"]:
        expected = "ok" if _installed(PEER_MODULES[r["peer"]]) else "skipped"
        assert r["status"] == expected, r.get("reason")


def test_times_are_positive_and_peers_agree(tiny_run):
    report, _, _ = tiny_run
    ok = [r for r in report["results"] if r["status"] == "ok"]
    for r in ok:
        assert r["time_s"] > 0 and all(t > 0 for t in r["times_s"])
        assert len(r["times_s"]) == r["repeats"] >= 1
        assert r["time_per_pair_s"] > 0 and r["ratio"] > 0
        assert 0 < r["n_queries"] <= 200 and 0 < r["n_train"] <= 300
        assert r["peak_extra_mb"] >= 0
        # Every peer computes the same Gaussian Nadaraya-Watson prediction.
        assert math.isfinite(r["max_abs_diff"]) and r["max_abs_diff"] < 1e-4
    compiled = [r for r in ok if r["peer"] in ("pykeops", "compiled")]
    assert all(r["compile_s"] > 0 for r in compiled)


def test_markdown_table_is_printed_and_saved(bench, tiny_run):
    bench_predict, _ = bench
    report, out_dir, stdout = tiny_run
    table = (out_dir / "bench_predict.md").read_text()
    assert stdout == table
    assert table.startswith(f"Machine: {report['machine']['cpu']}")
    assert "| peer | size run (queries × train) | time s |" in table
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(bench_predict.PEERS)
    assert "Target (sklearn_nw faster than every peer" in table
    assert "Target (sklearn_nw's time independent of the process" in table


def test_runner_finds_the_benchmarks(bench):
    _, run = bench
    assert BENCHMARKS / "bench_predict.py" in run.discover()
    assert run.discover(["predict"]) == [BENCHMARKS / "bench_predict.py"]
    with pytest.raises(SystemExit, match="no benchmark named"):
        run.discover(["no_such_benchmark"])


# -- _common: the one timing helper and the one problem builder ------------------------------
@pytest.fixture(scope="module")
def common(bench):
    return importlib.import_module("_common")


def test_timed_times_the_repeats_and_a_first_call_apart(common):
    calls = []

    def call():
        time.sleep(1e-4)
        calls.append(len(calls))
        return len(calls)

    timing = common.timed(call, 3, first_call=True)
    assert calls == [0, 1, 2, 3] and timing.result == 4
    assert len(timing.times) == 3 and min(timing.times) > 0 and timing.first > 0
    assert timing.best == min(timing.times)
    assert timing.median == sorted(timing.times)[1]
    first_only = common.timed(call, 0, first_call=True)
    assert first_only.times == [] and first_only.result == 5
    assert first_only.best == first_only.median == first_only.first > 0
    once = common.timed(call)
    assert len(once.times) == 1 and once.first is None and once.result == 6
    assert common.timed(call, 0) == ([], None, None) and len(calls) == 6


def test_make_problem_draws_what_its_parameters_say(common):
    X, y, Q = common.make_problem(50, 20, 3)
    assert (X.shape, y.shape, Q.shape) == ((50, 3), (50,), (20, 3))
    assert X.dtype == y.dtype == Q.dtype == np.float32
    X, y, Q = common.make_problem(400, 30, 2, dtype=np.float64, span=(-1.0, 3.0), noise=0,
                                  target=common.sine_wave_on_slope, seed=3)
    assert X.dtype == y.dtype == Q.dtype == np.float64
    assert -1 <= X.min() < 0 < 2 < X.max() <= 3 and -1 <= Q.min() and Q.max() <= 3
    assert np.array_equal(y, np.sin(6 * X[:, 0]) + X[:, 1])  # no noise drawn
    # The queries after the noise: the same inputs, other queries; the same seed, the
    # same arrays.
    X2, y2, Q2 = common.make_problem(400, 30, 2, span=(-1.0, 3.0), seed=3, queries_last=True)
    X3, y3, Q3 = common.make_problem(400, 30, 2, span=(-1.0, 3.0), seed=3, queries_last=True)
    assert np.array_equal(X2, X.astype(np.float32)) and not np.array_equal(Q2, Q)
    assert all(np.array_equal(a, b) for a, b in ((X2, X3), (y2, y3), (Q2, Q3)))
    assert common.make_problem(10, 0, 2)[2].shape == (0, 2)


def test_radius_holding_is_the_ball_of_that_volume(common):
    r = common.radius_holding(100, 10_000, 2)
    assert np.pi * r**2 * 10_000 == pytest.approx(100)
    r = common.radius_holding(50, 20_000, 3)
    assert 4 / 3 * np.pi * r**3 * 20_000 == pytest.approx(50)


def _old_problems(n, n_queries, d, seed):
    """Each benchmark's data as it was built before the benchmarks shared ``make_problem``
    (the replaced builders' code): name -> the arrays."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    Q = rng.standard_normal((n_queries, d)).astype(np.float32)
    y = np.sin(X).sum(1) + 0.1 * rng.standard_normal(n)
    common = (X, y.astype(np.float32), Q)
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    bandwidth = (X, np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.3 * rng.standard_normal(n))
    bandwidth_queries = np.random.default_rng(seed + 1).uniform(-2, 2, (n_queries, d))
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 2.5, size=(n, 2))
    Q = rng.uniform(0, 2.5, size=(n_queries, 2))
    compact = (X, np.sin(6 * X[:, 0]) + X[:, 1], Q)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    dask = (X, y, rng.standard_normal((n, d)))
    routes = {}
    for dtype in ("float64", "float32"):
        rng = np.random.default_rng(0)
        X = rng.uniform(size=(n, d)).astype(dtype)
        y = np.sin(6 * X[:, 0]) + X[:, 1]
        routes[dtype] = (X, y, rng.uniform(size=(1, d)).astype(dtype))
    rng = np.random.default_rng(100)
    X = rng.uniform(-2, 2, (300, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(300)
    X_test = rng.uniform(-2, 2, (2000, 2))
    synthetic = (X, y, X_test, np.sin(2 * X_test[:, 0]))
    return {"common": common, "bandwidth": bandwidth, "bandwidth_queries": bandwidth_queries,
            "compact": compact, "dask": dask, "routes": routes, "synthetic": synthetic}


@pytest.mark.parametrize("seed", [0, 7])
def test_every_benchmark_builds_the_data_its_results_were_measured_on(common, seed):
    n, n_queries, d = 200, 30, 4
    old = _old_problems(n, n_queries, d, seed)
    make = common.make_problem
    bench_bandwidth, bench_compact, bench_dask, bench_routes, bench_leave_one_out = (
        importlib.import_module(name) for name in ("bench_bandwidth", "bench_compact",
                                                   "bench_dask", "bench_routes",
                                                   "bench_leave_one_out"))
    new = {
        "common": make(n, n_queries, d, seed=seed),
        "bandwidth": make(n, 0, d, seed=seed, **bench_bandwidth.PROBLEM)[:2],
        "bandwidth_queries": make(n_queries, 0, d, seed=seed + 1, **bench_bandwidth.PROBLEM)[0],
        "compact": make(n, n_queries, 2, seed=seed, span=(0.0, 2.5), **bench_compact.PROBLEM),
        "dask": make(n, n, d, seed=seed, **bench_dask.PROBLEM),
        "routes": {dtype: make(n, 1, d, dtype=dtype, **bench_routes.PROBLEM)
                   for dtype in ("float64", "float32")},
        "synthetic": bench_leave_one_out._synthetic(),
    }
    new["routes"] = tuple(a for dtype in ("float64", "float32") for a in new["routes"][dtype])
    old["routes"] = tuple(a for dtype in ("float64", "float32") for a in old["routes"][dtype])
    for name, arrays in old.items():
        arrays = arrays if isinstance(arrays, tuple) else (arrays,)
        built = new[name] if isinstance(new[name], tuple) else (new[name],)
        assert len(built) == len(arrays), name
        for a, b in zip(arrays, built):
            assert a.dtype == b.dtype and np.array_equal(a, b), name


# -- bench_bandwidth -------------------------------------------------------------------------
TINY_BANDWIDTH = {"n_loo": 150, "n_irrelevant": 400, "n_queries": 100, "cv_sizes": (150,),
                  "n_grid": 4, "repeats": 2}


def _all_finite(values):
    return all(math.isfinite(v) for v in values)


@pytest.fixture(scope="module")
def bench_bandwidth(bench):
    """bench_bandwidth, imported while the ``bench`` fixture has benchmarks/ on sys.path."""
    return importlib.import_module("bench_bandwidth")


@pytest.fixture(scope="module")
def tiny_bandwidth_run(bench_bandwidth, tmp_path_factory):
    """One tiny run of every section: the report it returns, its output folder and stdout."""
    return _quiet_run(bench_bandwidth, tmp_path_factory.mktemp("bench_bandwidth"),
                      **TINY_BANDWIDTH)


def test_bandwidth_json_has_machine_config_sections_and_targets(bench_bandwidth,
                                                                tiny_bandwidth_run):
    report, out_dir, _ = tiny_bandwidth_run
    saved = json.loads((out_dir / "bench_bandwidth.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert {"cpu", "cores", "ram_gib", "versions", "torch_threads"} <= set(saved["machine"])
    assert saved["config"]["sections"] == list(bench_bandwidth.SECTIONS)
    assert list(saved["sections"]) == list(bench_bandwidth.SECTIONS)
    assert {"start", "end"} == set(saved["load_average"])
    # The run's targets are every section's targets, each met, not met or not evaluated.
    assert saved["targets"] == [t for s in saved["sections"].values() for t in s["targets"]]
    assert len(saved["targets"]) == (2 if _installed("statsmodels") else 1) + 2 + 2
    for t in saved["targets"]:
        assert t["section"] in bench_bandwidth.SECTIONS
        assert t["met"] in (True, False, None) and t["name"] and t["detail"]


def test_bandwidth_loo_section_compares_with_statsmodels(tiny_bandwidth_run):
    loo = tiny_bandwidth_run[0]["sections"]["loo"]
    assert loo["config"]["n"] == 150 and loo["config"]["d"] == 2
    nw, sm = loo["results"]
    assert (nw["method"], sm["method"]) == ("sklearn_nw", "statsmodels")
    assert nw["status"] == "ok" and len(nw["times_s"]) == nw["repeats"] == 2
    assert nw["time_s"] == min(nw["times_s"]) > 0 and nw["n_iter"] >= 1
    if not _installed("statsmodels"):
        assert sm["status"] == "skipped" and loo["targets"][0]["met"] is None
        return
    assert sm["status"] == "ok" and sm["time_s"] > 0
    for r in (nw, sm):
        assert len(r["bandwidth"]) == 2 and min(r["bandwidth"]) > 0
        assert math.isfinite(r["loo_mse"]) and r["loo_mse"] > 0
    assert loo["speed_ratio"] == pytest.approx(sm["time_s"] / nw["time_s"])
    assert isinstance(loo["targets"][0]["met"], bool)


def test_bandwidth_irrelevant_section_searches_the_oracle_grid(bench_bandwidth,
                                                               tiny_bandwidth_run):
    report = tiny_bandwidth_run[0]
    section = report["sections"]["irrelevant"]
    learned, oracle, best = section["learned"], section["oracle"], section["best_fixed"]
    assert len(learned["bandwidth"]) == section["config"]["d"] == 4
    assert learned["time_s"] > 0 and learned["ratio"] > 0
    assert len(oracle) == bench_bandwidth.ORACLE_A * len(bench_bandwidth.ORACLE_B)
    assert {r["b"] for r in oracle} == set(bench_bandwidth.ORACLE_B)
    assert _all_finite([learned["rmse"], *(r["rmse"] for r in oracle)])
    assert best["rmse"] == min(r["rmse"] for r in oracle)
    assert section["rmse_ratio"] == pytest.approx(learned["rmse"] / best["rmse"])
    # The time target compares with statsmodels' cv_ls time of section 1 in the same run.
    sm = report["sections"]["loo"]["results"][1]
    assert section["statsmodels_cv_ls_s"] == (sm["time_s"] if sm["status"] == "ok" else None)


def test_bandwidth_cv_section_checks_the_leave_one_out_argmin(tiny_bandwidth_run):
    section = tiny_bandwidth_run[0]["sections"]["cv"]
    results = section["results"]
    assert [(r["n"], r["task"], r["grid"]) for r in results] == [
        (150, "regression", "default"), (150, "classification", "default"),
        (150, "regression", "4 points"), (150, "classification", "4 points")]
    for r in results:
        # The default grid's search scores some of its 25 points (every fourth at least).
        g = r["n_grid"] if r["grid"] == "default" else 4
        assert 7 <= g <= 25 or r["grid"] != "default"
        assert len(r["cv_times_s"]) == len(r["gridsearch_times_s"]) == 2
        assert r["cv_time_s"] > 0 and r["gridsearch_time_s"] > 0 and r["ratio"] > 0
        assert r["n_grid"] == len(r["loo_loss"]) == g and _all_finite(r["loo_loss"])
        assert isinstance(r["chosen_is_loo_argmin"], bool)
        assert 0 <= r["chosen_index"] < g and 0 <= r["loo_argmin_index"] < g
        assert math.isfinite(r["max_abs_score_error"])


def test_bandwidth_markdown_is_printed_and_saved(bench_bandwidth, tiny_bandwidth_run):
    report, out_dir, stdout = tiny_bandwidth_run
    table = (out_dir / "bench_bandwidth.md").read_text()
    assert stdout == table
    assert table.startswith(f"Machine: {report['machine']['cpu']}")
    for number in range(1, 4):
        assert f"\n### {number}. " in table
    assert table.count("\n- Target (") == len(report["targets"])


def test_bandwidth_sections_run_alone(bench_bandwidth, tmp_path):
    """--sections runs only those; without section 1 the time target of section 2 is not
    evaluated."""
    with contextlib.redirect_stdout(io.StringIO()):
        bench_bandwidth.main(["--sections", "cv", "irrelevant", "--n-irrelevant", "300",
                              "--n-queries", "50", "--cv-sizes", "100", "--n-grid", "3",
                              "--repeats", "1", "--out-dir", str(tmp_path)])
    saved = json.loads((tmp_path / "bench_bandwidth.json").read_text())
    assert list(saved["sections"]) == ["irrelevant", "cv"]
    time_target = saved["sections"]["irrelevant"]["targets"][1]
    assert time_target["met"] is None and "section 1" in time_target["detail"]


def test_runner_finds_the_bandwidth_benchmark(bench):
    _, run = bench
    assert run.discover(["bandwidth"]) == [BENCHMARKS / "bench_bandwidth.py"]


# -- bench_accuracy --------------------------------------------------------------------------
# Two neighbor counts for the tuned KNN (its full grid is 15 x 2 candidates, each refitted
# on 5 inner folds of 5 outer ones: most of the tiny run's time).
TINY_ACCURACY = {"datasets": ("iris", "engel"), "max_samples": 60, "n_large": 300,
                 "randhie_rows": 300, "seeds": (0, 1), "knn_neighbors": (1, 5)}


@pytest.fixture(scope="module")
def bench_accuracy(bench):
    """bench_accuracy, imported while the ``bench`` fixture has benchmarks/ on sys.path."""
    return importlib.import_module("bench_accuracy")


@pytest.fixture(scope="module")
def tiny_accuracy_run(bench_accuracy, tmp_path_factory):
    """One tiny run of both sections: the report it returns, its output folder and stdout."""
    return _quiet_run(bench_accuracy, tmp_path_factory.mktemp("bench_accuracy"),
                      **TINY_ACCURACY)


def test_accuracy_section_scores_every_method(tiny_accuracy_run):
    section = tiny_accuracy_run[0]["sections"]["accuracy"]
    rows = {r["dataset"]: r for r in section["results"]}
    assert list(rows) == ["iris", "engel"]
    assert section["config"]["knn_neighbors"] == [1, 5]
    assert rows["iris"]["task"] == "classification" and rows["engel"]["task"] == "regression"
    # statsmodels' cv_ls runs on small regression data sets only.
    assert "statsmodels" not in rows["iris"]["methods"]
    assert ("statsmodels" in rows["engel"]["methods"]) == _installed("statsmodels")
    assert ("statsmodels_ll" in rows["engel"]["methods"]) == _installed("statsmodels")
    # R's locfit runs on the one-dimensional regression data sets, where R is installed.
    assert "locfit" not in rows["iris"]["methods"]
    assert ("locfit" in rows["engel"]["methods"]) == (section["config"]["locfit"].startswith(
        "ran"))
    for r in rows.values():
        assert r["status"] == "ok" and r["n"] == 60 < r["n_total"]
        for scores in r["methods"].values():
            assert len(scores["scores"]) == 5 and _all_finite(scores["scores"])
            assert scores["mean"] == pytest.approx(sum(scores["scores"]) / 5)
            assert scores["fit_time_s"] > 0 and isinstance(scores["warnings"], list)
        assert r["nw_minus_knn"] == pytest.approx(r["methods"]["nw_loo"]["mean"]
                                                  - r["methods"]["knn"]["mean"])
        assert r["cv_minus_knn"] == pytest.approx(r["methods"]["nw_cv"]["mean"]
                                                  - r["methods"]["knn"]["mean"])
    assert 0 <= rows["iris"]["methods"]["nw_loo"]["mean"] <= 1
    # What the CV estimator chose in each outer fold.
    assert len(rows["engel"]["nw_cv_chose"]) == 5 and rows["engel"]["nw_cv_chose"][0].endswith(
        ("d0", "d1", "d2"))


def test_large_section_compares_every_seed_with_the_exact_grid(tiny_accuracy_run):
    section = tiny_accuracy_run[0]["sections"]["large"]
    rows = section["results"]
    assert [r["problem"].split(",")[0] for r in rows] == ["randhie", "synthetic"]
    for r in rows:
        assert r["status"] == "ok" and r["seeds"] == [0, 1, 2, 3, 4]
        assert len(r["learned_scores"]) == 5 and _all_finite(r["learned_scores"])
        assert r["spread"] == pytest.approx(max(r["learned_scores"]) - min(r["learned_scores"]))
        assert r["worst_minus_grid"] == pytest.approx(min(r["learned_scores"])
                                                      - r["grid_score"])
        assert r["grid_time_s"] > 0 and min(r["learned_times_s"]) > 0
    assert [t["met"] in (True, False) for t in section["targets"]] == [True, True]


def test_seeds_section_repeats_the_comparison_at_other_seeds(tiny_accuracy_run):
    section = tiny_accuracy_run[0]["sections"]["seeds"]
    rows = {(r["dataset"], r["seed"]): r for r in section["results"]}
    assert sorted(rows) == [("engel", 0), ("engel", 1), ("iris", 0), ("iris", 1)]
    for r in rows.values():
        assert r["status"] == "ok" and _all_finite([r["nw_cv"], r["knn"], r["nw_cv_fixed"]])
        assert r["cv_minus_knn"] == pytest.approx(r["nw_cv"] - r["knn"])
        assert r["fixed_minus_knn"] == pytest.approx(r["nw_cv_fixed"] - r["knn"])
        assert min(r["nw_cv_fit_time_s"], r["knn_fit_time_s"], r["nw_cv_fixed_fit_time_s"]) > 0
    # Without the adaptive families, averaged over the seeds beside the default.
    for name in ("iris", "engel"):
        fixed = section["fixed_kinds"][name]
        assert fixed["fixed_minus_knn"] == pytest.approx(
            (rows[name, 0]["fixed_minus_knn"] + rows[name, 1]["fixed_minus_knn"]) / 2)
    # Issue 26's target on the mean differences: its verdict follows from them.
    mean = section["mean_cv_minus_knn"]
    (tabular,) = [t for t in section["targets"] if "issue 26" in t["name"]]
    assert tabular["met"] == (sum(d >= -0.005 for d in mean.values()) >= 0.8 * len(mean)
                              and min(mean.values()) >= -0.02)
    assert "| data set | default − KNN | fixed kinds − KNN |" in tiny_accuracy_run[2]
    for seed in (0, 1):
        diffs = [rows[name, seed]["cv_minus_knn"] for name in ("iris", "engel")]
        summary = section["per_seed"][seed]
        assert summary["n"] == 2 and summary["wins"] == sum(d >= -5e-4 for d in diffs)
        assert summary["worst_diff"] == min(diffs)
    for name in ("iris", "engel"):
        assert section["mean_cv_minus_knn"][name] == pytest.approx(
            (rows[name, 0]["cv_minus_knn"] + rows[name, 1]["cv_minus_knn"]) / 2)
    # Seed 0 is section 1's comparison; seed 1 draws other folds.
    accuracy = {r["dataset"]: r for r in tiny_accuracy_run[0]["sections"]["accuracy"]["results"]}
    for name in ("iris", "engel"):
        assert rows[name, 0]["nw_cv"] == pytest.approx(accuracy[name]["methods"]["nw_cv"]["mean"])
        assert rows[name, 0]["knn"] == pytest.approx(accuracy[name]["methods"]["knn"]["mean"])
    assert rows["engel", 1]["knn"] != accuracy["engel"]["methods"]["knn"]["mean"]


def test_local_section_compares_learned_local_linear_with_statsmodels(tiny_accuracy_run):
    section = tiny_accuracy_run[0]["sections"]["local"]
    rows = section["results"]
    if not _installed("statsmodels"):
        assert rows == []
        return
    # The regression data sets statsmodels takes; iris is a classification set.
    assert [r["dataset"] for r in rows] == ["engel"]
    (r,) = rows
    assert r["status"] == "ok" and (r["n"], r["d"]) == (60, 1)
    assert _all_finite([r["nw_loo_ll"], r["statsmodels_ll"], r["objective_nw"],
                        r["objective_statsmodels"]])
    assert r["nw_loo_ll_fit_time_s"] > 0 and r["statsmodels_ll_fit_time_s"] > 0
    assert len(r["bandwidth_nw"]) == len(r["bandwidth_statsmodels"]) == 1
    assert [t["met"] in (True, False) for t in section["targets"]] == [True, True]


def test_accuracy_markdown_is_printed_and_saved(tiny_accuracy_run):
    report, out_dir, stdout = tiny_accuracy_run
    table = (out_dir / "bench_accuracy.md").read_text()
    assert stdout == table
    saved = json.loads((out_dir / "bench_accuracy.json").read_text())
    assert saved == json.loads(json.dumps(report))
    for number in (1, 2, 3, 4):
        assert f"\n### {number}. " in table
    assert table.count("\n- Target (") == len(report["targets"])
    assert "| iris | classification (accuracy) | 60 of 150 × 4 |" in table


# -- bench_engine ----------------------------------------------------------------------------
# Two sizes and two kernels (each compiled in the run; every kernel's compiled loop against
# the eager engine is tests/test_compiled.py's).
TINY_ENGINE = {"sizes": (200, 400), "slope_from": 200, "n_knn": 500, "n_knn_queries": 50,
               "ks": (5, 50, 600), "repeats": 2, "n_kernels": 300,
               "kernels": ("epanechnikov",)}


@pytest.fixture(scope="module")
def bench_engine(bench):
    """bench_engine, imported while the ``bench`` fixture has benchmarks/ on sys.path."""
    return importlib.import_module("bench_engine")


@pytest.fixture(scope="module")
def tiny_engine_run(bench_engine, tmp_path_factory):
    """One tiny run of every section: the report it returns, its output folder and stdout."""
    return _quiet_run(bench_engine, tmp_path_factory.mktemp("bench_engine"), **TINY_ENGINE)


def test_engine_json_has_machine_config_sections_and_targets(bench_engine, tiny_engine_run):
    report, out_dir, _ = tiny_engine_run
    saved = json.loads((out_dir / "bench_engine.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert {"cpu", "cores", "ram_gib", "versions", "torch_threads"} <= set(saved["machine"])
    assert saved["config"]["sections"] == list(bench_engine.SECTIONS)
    assert list(saved["sections"]) == list(bench_engine.SECTIONS)
    assert {"start", "end"} == set(saved["load_average"])
    assert len(saved["targets"]) == 4  # scaling: eager and compiled
    for t in saved["targets"]:
        assert t["section"] in bench_engine.SECTIONS
        assert t["met"] in (True, False, None) and t["name"] and t["detail"]


def test_engine_scaling_section_times_each_size_and_plots(tiny_engine_run):
    report, out_dir, _ = tiny_engine_run
    section = report["sections"]["scaling"]
    assert section["config"]["sizes"] == [200, 400] and len(section["config"]["h"]) == 4
    assert [r["n"] for r in section["results"]] == [200, 400]
    for r in section["results"]:
        assert r["status"] == "ok", r.get("reason")
        assert r["n_train"] == r["n_queries"] == r["n"] and r["pairs"] == r["n"] ** 2
        assert len(r["times_s"]) == r["repeats"] == 2 and r["time_s"] == min(r["times_s"]) > 0
        assert r["ns_per_pair"] > 0 and r["peak_extra_mb"] >= 0
    # Two sizes from slope_from=200: a slope is fitted and both targets are evaluated.
    assert math.isfinite(section["slope"])
    assert all(isinstance(t["met"], bool) for t in section["targets"])
    # The peers run every size up to PEER_MAX_N (here both) for the plot, the
    # package's compiled path every size, with its own two targets.
    assert [(r["peer"], r["n"]) for r in section["peers"]] == [
        (p, n) for p in ("sklearn_nw_compiled", "chunked", "pykeops") for n in (200, 400)]
    assert [t["name"] for t in section["targets"]] == [
        "time linear in pairs", "memory of the largest size",
        "sklearn_nw_compiled: time linear in pairs",
        "sklearn_nw_compiled: memory of the largest size"]
    compiled = [r for r in section["peers"] if r["peer"] == "sklearn_nw_compiled"]
    assert all(r["compile_s"] > 0 and r["peak_extra_mb"] >= 0 for r in compiled)
    for r in section["peers"]:
        assert r["status"] == ("ok" if _installed(PEER_MODULES[r["peer"]]) else "skipped")
    assert section["plot"] == "bench_engine.png"
    assert (out_dir / "bench_engine.png").read_bytes().startswith(b"\x89PNG")


def test_engine_kernels_section_times_both_dense_paths(tiny_engine_run, bench_engine):
    section = tiny_engine_run[0]["sections"]["kernels"]
    assert [r["kernel"] for r in section["results"]] == list(TINY_ENGINE["kernels"])
    assert section["config"]["kernels"] == list(TINY_ENGINE["kernels"])
    for r in section["results"]:
        for path in ("brute", "compiled"):
            assert len(r[path]["times_s"]) == 3 and r[path]["time_s"] == min(r[path]["times_s"])
            assert r[path]["first_call_s"] > 0
        assert r["ratio"] == r["brute"]["time_s"] / r["compiled"]["time_s"]
        assert r["max_abs_diff"] < 1e-4  # float32, the same model on two paths
    assert section["targets"] == []
    table = (tiny_engine_run[1] / "bench_engine.md").read_text()
    assert "### 3. Dense paths per kernel" in table


def test_engine_knn_section_measures_the_error_against_full_attention(tiny_engine_run):
    section = tiny_engine_run[0]["sections"]["knn"]
    assert section["exact"]["time_s"] > 0
    rows = section["results"]
    assert [r["k"] for r in rows] == [5, 50, 600] and rows[-1]["k_used"] == 500
    for r in rows:
        assert r["time_s"] == min(r["times_s"]) > 0 and r["fit_time_s"] > 0
        assert 0 <= r["mean_abs_err"] <= r["max_abs_err"]
        assert 0 <= r["mean_mass_outside"] <= r["max_mass_outside"] <= 1
    # Every training point as a neighbor is the exact model.
    assert rows[-1]["max_abs_err"] < 1e-10 and rows[-1]["max_mass_outside"] < 1e-10


def test_engine_markdown_is_printed_and_saved(tiny_engine_run):
    report, out_dir, stdout = tiny_engine_run
    table = (out_dir / "bench_engine.md").read_text()
    assert stdout == table
    assert table.startswith(f"Machine: {report['machine']['cpu']}")
    for number in range(1, 4):
        assert f"\n### {number}. " in table
    assert table.count("\n- Target (") == len(report["targets"])
    assert "Load average (1 min)" in table


def test_engine_sections_run_alone(bench_engine, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        bench_engine.main(["--sections", "knn", "--n-knn", "300", "--n-knn-queries", "20",
                           "--ks", "3", "--repeats", "1", "--out-dir", str(tmp_path)])
    saved = json.loads((tmp_path / "bench_engine.json").read_text())
    assert list(saved["sections"]) == ["knn"] and saved["targets"] == []
    assert not (tmp_path / "bench_engine.png").exists()


def test_runner_finds_the_engine_benchmark(bench):
    _, run = bench
    assert run.discover(["engine"]) == [BENCHMARKS / "bench_engine.py"]


def test_leave_one_out_benchmark_runs(bench, tmp_path):
    module = importlib.import_module("bench_leave_one_out")
    report, out_dir, printed = _quiet_run(module, tmp_path, n=300, seeds=(0,), draws=1,
                                          estimators=2, knn_neighbors=(1, 5))
    saved = json.loads((out_dir / "bench_leave_one_out.json").read_text())
    assert saved == json.loads(json.dumps(report))
    randhie = saved["sections"]["randhie"]
    assert randhie["knn_neighbors"] == [1, 5]
    assert list(randhie["splits"]) == ["shuffled seed 0", "GroupKFold by input"]
    for split in randhie["splits"].values():
        scores = split["r2"]
        assert set(scores) == {"CV row", "CV input", "learned row", "learned input",
                               "KNN tuned", "training mean"}
        assert all(math.isfinite(v) for v in scores.values())
        # Each method's warnings, recorded rather than raised.
        assert set(split["warnings"]) == set(scores)
        assert all(isinstance(m, str) for w in split["warnings"].values() for m in w)
    assert randhie["splits"]["GroupKFold by input"]["repeated_test_share"] == 0.0
    assert randhie["shuffled_mean_r2"] == randhie["splits"]["shuffled seed 0"]["r2"]
    target = randhie["target"]
    assert target["gap"] == pytest.approx(randhie["shuffled_mean_r2"]["CV row"]
                                          - randhie["shuffled_mean_r2"]["KNN tuned"])
    assert isinstance(target["met"], bool)
    bootstrap = saved["sections"]["bootstrap"]
    assert set(bootstrap["draws"][0]) == {"rows, row", "rows, input", "weights, row"}
    # A draw as weights under the row rule is the draw as rows leaving inputs out.
    draw = bootstrap["draws"][0]
    assert draw["weights, row"]["h0"] == pytest.approx(draw["rows, input"]["h0"], rel=1e-6)
    assert set(bootstrap["bagging"]) == {"row", "input"}
    weights = saved["sections"]["weights"]
    # Scaling every weight leaves the learned bandwidth where it was, under either unit
    # (this is what the benchmark documents, not a timing).
    for unit in ("row", "input"):
        assert weights["x1.5"][unit]["h0"] == pytest.approx(weights["x1.0"][unit]["h0"])
    assert "## randhie" in printed and (out_dir / "bench_leave_one_out.md").exists()


# -- bench_compact ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bench_compact(bench):
    return importlib.import_module("bench_compact")


@pytest.fixture(scope="module")
def tiny_compact_run(bench_compact, tmp_path_factory):
    return _quiet_run(bench_compact, tmp_path_factory.mktemp("bench_compact"), n=6000,
                      n_queries=100, spans=(1.0, 2.0), repeats=2)


def test_compact_sweeps_the_neighborhood_size_against_radius_neighbors(tiny_compact_run):
    report, out_dir, _ = tiny_compact_run
    saved = json.loads((out_dir / "bench_compact.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert [p["span"] for p in report["sweep"]] == [1.0, 2.0]
    first, second = report["sweep"]
    assert first["reach"] == pytest.approx(np.pi * 0.05**2 * 6000)
    assert second["reach"] == pytest.approx(first["reach"] / 4)
    # The first span also times both trees; every span times auto and scikit-learn.
    assert [r["search"] for r in first["results"][:3]] == ["cell_list", "kd_tree", "ball_tree"]
    assert len(second["results"]) == 2
    for point in report["sweep"]:
        *ours, peer = point["results"]
        assert peer["method"].startswith("scikit-learn") and peer["n_nan"] == 0
        for r in point["results"]:
            assert len(r["times_s"]) == 2 and r["time_s"] == min(r["times_s"]) > 0
        for r in ours:
            assert r["ratio"] == pytest.approx(peer["time_s"] / r["time_s"])
            assert r["max_abs_diff"] < 1e-6  # the same estimate, up to rounding
    # Two speed targets (at the spans nearest ~8,000 and ~300 in reach) and the agreement.
    names = [t["name"] for t in report["targets"]]
    assert len(names) == 3 and "~8,000" in names[0] and "~300" in names[1]
    assert all(isinstance(t["met"], bool) for t in report["targets"])
    assert report["plot"] == "bench_compact.png"
    assert (out_dir / "bench_compact.png").read_bytes().startswith(b"\x89PNG")
    assert "| span s |" in (out_dir / "bench_compact.md").read_text()


def test_compact_epanechnikov_weights_take_both_distance_layouts(bench_compact):
    r = bench_compact.RADIUS
    dense = bench_compact.epanechnikov_weights(np.array([[0.0, r / 2], [r, 0.0]]))
    assert np.allclose(dense, [[1.0, 0.75], [0.0, 1.0]])
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = np.array([0.0, r / 2, r]), np.array([r / 2])
    weights = bench_compact.epanechnikov_weights(ragged)
    assert weights.dtype == object and len(weights) == 2
    assert np.allclose(weights[0], [1.0, 0.75, 0.0]) and np.allclose(weights[1], [0.75])


# -- bench_routes ----------------------------------------------------------------------------
def test_routes_times_a_one_row_predict_on_every_route(bench, tmp_path):
    bench_routes = importlib.import_module("bench_routes")
    report, out_dir, _ = _quiet_run(bench_routes, tmp_path, sizes=(600,), dims=(2, 5), calls=3)
    saved = json.loads((out_dir / "bench_routes.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert [(p["n_train"], p["d"]) for p in report["points"]] == [(600, 2), (600, 5)]
    routes = {r["route"] for p in report["points"] for r in p["rows"]}
    assert routes == {"dense", "cell_list", "radius", "k_nearest", "precomputed"}
    for point in report["points"]:
        for r in point["rows"]:
            assert r["time_s"] > 0 and r["peer_s"] > 0
            assert r["ratio"] == pytest.approx(r["time_s"] / r["peer_s"])
    (target,) = report["targets"]
    worst = max(r["ratio"] for p in report["points"] for r in p["rows"])
    assert target["met"] == (worst <= bench_routes.RATIO_TARGET)
    assert "| n | d | route |" in (out_dir / "bench_routes.md").read_text()


def test_bench_dask_runs_and_agrees(tmp_path):
    pytest.importorskip("distributed")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCHMARKS))
        bench_dask = importlib.import_module("bench_dask")
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            report = bench_dask.run_benchmark(sizes=(400,), repeats=1, out_dir=tmp_path)
    (row,) = report["sections"]["overhead"]["results"]
    for peer in ("local", "dask_1x2", "dask_2x1"):
        assert row[peer]["predict_s"] > 0 and row[peer]["fit_s"] > 0
    assert row["dask_2x1"]["max_abs_diff"] < 1e-10
    assert (tmp_path / "bench_dask.md").read_text().count("| 400 |") == 1


# -- bench_adaptive --------------------------------------------------------------------------
def test_adaptive_times_both_kinds_against_their_peers(bench, tmp_path):
    bench_adaptive = importlib.import_module("bench_adaptive")
    report, out_dir, stdout = _quiet_run(bench_adaptive, tmp_path, sizes=(300,), dims=(2, 3),
                                         n_queries=50, k=4, repeats=2)
    rows = report["sections"]["predict"]["results"]
    assert [(r["n"], r["d"]) for r in rows] == [(300, 2), (300, 3)]
    for r in rows:
        assert set(r["times_s"]) == {"balloon", "sample_point", "fixed", "knn"}
        assert min(r["times_s"].values()) > 0
        for kind in ("balloon", "sample_point"):
            t = r["times_s"]
            assert r[f"{kind}_over_fixed"] == pytest.approx(t[kind] / t["fixed"])
            assert r[f"{kind}_ns_per_pair"] == pytest.approx(t[kind] / (300 * 50) * 1e9)
    assert (out_dir / "bench_adaptive.md").read_text() == stdout


# -- bench_load ------------------------------------------------------------------------------
TINY_LOAD = {"datasets": ("iris",), "repeats": 1, "n_train": 300, "n_queries": 50,
             "k": 8, "reach": 20, "n_precomputed": 200, "n_search": 150, "n_compact": 6000,
             "n_compact_queries": 100, "reaches": (30, 300), "n_dense": 300, "d_dense": 3,
             "processes": 2}
ROUTE_NAMES = {"dense", "cell_list", "radius", "k_nearest", "adaptive", "precomputed"}


@pytest.fixture(scope="module")
def bench_load(bench):
    return importlib.import_module("bench_load")


@pytest.fixture(scope="module")
def tiny_load_run(bench_load, tmp_path_factory):
    """One tiny run of every section: the report it returns, its output folder and stdout."""
    return _quiet_run(bench_load, tmp_path_factory.mktemp("bench_load"), **TINY_LOAD)


def test_load_json_has_every_section_and_its_targets(bench_load, tiny_load_run):
    report, out_dir, stdout = tiny_load_run
    saved = json.loads((out_dir / "bench_load.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert list(saved["sections"]) == list(bench_load.SECTIONS)
    assert saved["targets"] == [t for s in saved["sections"].values() for t in s["targets"]]
    for t in saved["targets"]:
        assert t["met"] in (True, False, None) and t["name"] and t["detail"]
    assert (out_dir / "bench_load.md").read_text() == stdout
    for number in range(1, 5):
        assert f"\n### {number}. " in stdout
    assert stdout.count("\n- Target (") == len(report["targets"])
    # The 2.3 on two cores for the routes; the CV section keeps its 2.5.
    assert bench_load.ratio_target(2) == pytest.approx(2.5)
    assert bench_load.ratio_target(2, bench_load.ROUTE_MARGIN) == pytest.approx(2.3)


def test_load_times_the_cv_fits_idle_and_beside_a_busy_process(tiny_load_run):
    report, _, stdout = tiny_load_run
    section = report["sections"]["cv"]
    rows = section["results"]
    assert [r["dataset"] for r in rows] == ["iris"]
    for r in rows:
        for when in ("idle_s", "loaded_s"):
            assert set(r[when]) == {"nw_cv", "knn"} and min(r[when].values()) > 0
        assert r["nw_cv_loaded_over_idle"] == pytest.approx(
            r["loaded_s"]["nw_cv"] / r["idle_s"]["nw_cv"])
    assert [t["met"] in (True, False) for t in section["targets"]] == [True, True]
    assert "| iris | 120 × 4 |" in stdout


def test_load_times_every_route_and_search_idle_and_loaded(bench_load, tiny_load_run):
    section = tiny_load_run[0]["sections"]["routes"]
    rows = section["results"]
    assert [r["name"] for r in rows] == [*bench_load.ROUTES, *bench_load.SEARCHES]
    predicts = [r for r in rows if r["timed"] == "predict"]
    assert len(predicts) == len(bench_load.ROUTES)
    # Every route a prediction can take is among them.
    assert {r["route"] for r in predicts} == ROUTE_NAMES
    assert {r["route"] for r in rows if r["timed"] == "fit"} == {None}
    limit = section["config"]["ratio_target"]
    for r in rows:
        assert r["idle_s"] > 0 and r["loaded_s"] > 0
        assert r["loaded_over_idle"] == pytest.approx(r["loaded_s"] / r["idle_s"])
        assert r["met"] == (r["loaded_over_idle"] <= limit)
    assert [t["met"] for t in section["targets"]] == [r["met"] for r in rows]
    by_name = {r["name"]: r for r in rows}
    assert by_name["precomputed"]["n_train"] == 200
    assert by_name['bandwidth="loo"']["n_train"] == 150


def test_load_compares_the_compact_kernel_with_radius_neighbors(bench_load, tiny_load_run):
    section = tiny_load_run[0]["sections"]["compact"]
    rows = section["results"]
    assert [r["reach"] for r in rows] == [30, 300]
    for r in rows:
        # The span holds the reach: pi R^2 n / s^2 points within reach of a query.
        assert np.pi * bench_load.RADIUS**2 * 6000 / r["span"] ** 2 == pytest.approx(r["reach"])
        assert r["route"] in ROUTE_NAMES
        for when in ("idle", "loaded"):
            times = r[f"{when}_s"]
            assert set(times) == {"sklearn_nw", "scikit-learn"} and min(times.values()) > 0
            assert r[f"{when}_ratio"] == pytest.approx(times["scikit-learn"]
                                                       / times["sklearn_nw"])
    assert len(section["targets"]) == 4
    assert all(isinstance(t["met"], bool) for t in section["targets"])


def test_load_times_the_dense_predict_in_fresh_processes(tiny_load_run):
    section = tiny_load_run[0]["sections"]["processes"]
    r = section["results"]
    assert r["status"] == "ok" and len(r["process_times_s"]) == 2
    assert min(r["process_times_s"]) > 0
    assert r["spread"] == pytest.approx(max(r["process_times_s"]) / min(r["process_times_s"]))
    (target,) = section["targets"]
    assert isinstance(target["met"], bool)


def test_load_sections_run_alone(bench_load, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        bench_load.main(["--sections", "compact", "--n-compact", "2000",
                         "--n-compact-queries", "20", "--reaches", "50", "--repeats", "1",
                         "--out-dir", str(tmp_path)])
    saved = json.loads((tmp_path / "bench_load.json").read_text())
    assert list(saved["sections"]) == ["compact"] and len(saved["targets"]) == 2


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # statsmodels' cv_ls divides by 0
@pytest.mark.filterwarnings("ignore:After 0.17:FutureWarning")  # statsmodels RNG notice
def test_categorical_compares_with_statsmodels_and_the_one_hot_design(bench, tmp_path):
    pytest.importorskip("statsmodels")
    bench_categorical = importlib.import_module("bench_categorical")
    report, out_dir, printed = _quiet_run(bench_categorical, tmp_path, sizes=(40,),
                                          seeds=(0,), tables=("grunfeld",),
                                          knn_neighbors=(1, 5), fair_sizes=(60,))
    saved = json.loads((out_dir / "bench_categorical.json").read_text())
    assert saved == json.loads(json.dumps(report))
    speed = saved["sections"]["speed"]["results"][0]
    assert speed["n"] == 40 and speed["statsmodels"]["seconds"] > 0
    for kind in bench_categorical.KINDS:
        assert speed[kind]["median_s"] > 0 and len(speed[kind]["bandwidth"]) == 5
    assert 0 < speed["aitchison_aitken"]["loss"] < np.inf
    assert 0 < speed["statsmodels"]["loss"] < np.inf
    table = saved["sections"]["tables"]["results"][0]
    assert table["table"] == "grunfeld" and table["n"] == 220
    assert saved["sections"]["tables"]["config"]["knn_neighbors"] == [1, 5]
    assert set(table["score"]) == {"nw_native_li_racine", "nw_native_aitchison_aitken",
                                   "nw_onehot", "knn_tuned_onehot", "hgb_from_dtype"}
    sizes = saved["sections"]["fair_sizes"]["results"]
    assert [r["n"] for r in sizes] == [60] and sizes[0]["n_train"] == 48
    assert sizes[0]["nw_native_li_racine"]["fit_s"] > 0
    assert all(t > 0 for t in table["fold_fit_s"].values())
    assert len(saved["targets"]) == 5
    assert "fit within the tuned KNN" in saved["targets"][-2]["name"]
    assert "fair's first n rows" in saved["targets"][-1]["name"]
    assert "| grunfeld | 220 |" in printed and "| 60 |" in printed


def test_uncertainty_benchmark_runs_with_or_without_its_peers(bench, tmp_path):
    bench_uncertainty = importlib.import_module("bench_uncertainty")
    report, out_dir, printed = _quiet_run(
        bench_uncertainty, tmp_path, n_speed=300, n_cost=300, n_queries=50, repeats=1,
        jackknife_problems=bench_uncertainty.JACKKNIFE_PROBLEMS[:1], n_margeff=40,
        cost_neighbourhood=((200, 1),))
    saved = json.loads((out_dir / "bench_uncertainty.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert list(saved["sections"]) == list(bench_uncertainty.SECTIONS)
    jackknife = saved["sections"]["jackknife"]["results"][0]
    assert jackknife["ours_s"] > 0
    assert jackknife["mapie"]["status"] == ("ok" if _installed("mapie") else "skipped")
    lprobust = saved["sections"]["lprobust"]["results"]
    assert lprobust["compared"] == (80 if _installed("nprobust") else 0)
    assert len(lprobust["speed"]) == 4 and all(r["ours_s"] > 0 for r in lprobust["speed"])
    cost = saved["sections"]["cost"]["results"]
    assert [r["case"] for r in cost] == [
        "dense Gaussian", "k-d tree Epanechnikov", "cell list Epanechnikov", "local linear",
        "local linear, k-d tree Epanechnikov", "balloon Gaussian (k = 40)",
        "sample-point Gaussian (k = 40)", "k nearest Gaussian (k = 40)"]
    assert all(r["predict_s"] > 0 and r["predict_interval_s"] > 0 for r in cost)
    # With the state kept at fit and without it, and the fits' seconds both ways.
    assert all(r[k] > 0 for r in cost for k in (
        "fit_s", "fit_store_loo_s", "return_std_hc2_per_call_s", "predict_interval_per_call_s"))
    sets = saved["sections"]["cost"]["sets"]
    assert [r["case"] for r in sets] == ["dense Gaussian", "k-d tree Epanechnikov",
                                         "sample-point Gaussian (k = 40)",
                                         "k nearest Gaussian (k = 40)"]
    assert all(r["predict_set_lac_s"] > 0 and r["predict_set_aps_s"] > 0 for r in sets)
    around = saved["sections"]["cost"]["neighbourhood"]
    assert [(r["n"], r["d"], r["case"]) for r in around] == [
        (200, 1, "dense Gaussian"), (200, 1, "local linear"),
        (200, 1, "cell list Epanechnikov"), (200, 1, "sample-point Gaussian (k = 40)"),
        (300, 2, "sample-point Gaussian (k = 10)"), (300, 2, "sample-point Gaussian (k = 100)")]
    # The target's line and the neighbourhood's, each from its own rows.
    lines = saved["sections"]["cost"]["targets"]
    assert [t["name"] for t in lines][1] == "the same around it (other n, d and k)"
    ratios = [r[k] / r["predict_s"] for r in around
              for k in ("return_std_nn_s", "return_std_hc2_s", "predict_interval_s")]
    assert lines[1]["met"] == (max(ratios) <= 3.0)
    assert "| 200 × 1 | dense Gaussian |" in printed
    assert "| 200 × 1 | cell list Epanechnikov |" in printed
    margeff = saved["sections"]["margeff"]["results"]
    assert [r["degree"] for r in margeff] == [0, 1]
    assert all(r["ours_s"] > 0 and r["ours_std_s"] > 0 for r in margeff)
    assert margeff[1]["statsmodels"]["max_abs_diff_effects"] <= 1e-8
    assert len(saved["targets"]) == 6
    assert all(isinstance(t["met"], bool) or t["met"] is None for t in saved["targets"])
    assert (out_dir / "bench_uncertainty.md").read_text() == printed
    assert "| dense Gaussian |" in printed


def test_intervals_benchmark_measures_coverage_with_or_without_mapie(bench, tmp_path):
    bench_intervals = importlib.import_module("bench_intervals")
    report, out_dir, printed = _quiet_run(bench_intervals, tmp_path, datasets=("engel", "iris"),
                                          max_samples=60, n_speed=200, mapie_refits=1)
    saved = json.loads((out_dir / "bench_intervals.json").read_text())
    assert saved == json.loads(json.dumps(report))
    rows = {r["dataset"]: r for r in saved["sections"]["coverage"]["results"]}
    expected = {"engel": {"ours", "ours_cv+", "ours_cv"}
                | ({"mapie"} if _installed("mapie") else set()),
                "iris": {"ours_lac", "ours_aps", "ours_aps_randomized", "ours_cv_lac"}
                | ({"mapie_lac"} if _installed("mapie") else set())}
    for name, methods in expected.items():
        assert rows[name]["status"] == "ok" and set(rows[name]["methods"]) == methods
        for m in rows[name]["methods"].values():
            if m["covered"] is not None:  # None: every fold's choice refused
                assert 0 <= m["covered"] <= 1 and m["width"] >= 0
    # A set holds at most every class (a LAC set may be empty, an APS set never is).
    assert 0 <= rows["iris"]["methods"]["ours_lac"]["width"] <= 3
    assert 1 <= rows["iris"]["methods"]["ours_aps"]["width"] <= 3
    assert 0 <= rows["iris"]["methods"]["ours_aps_randomized"]["width"] <= 3
    jackknife, cv_plus, cv_estimators = saved["targets"]
    covered = [m["covered"] for r in rows.values() for k, m in r["methods"].items()
               if k.startswith("ours") and not k.startswith("ours_cv")]
    assert jackknife["met"] == (min(covered) >= 0.9)
    assert cv_plus["met"] == (rows["engel"]["methods"]["ours_cv+"]["covered"] >= 0.9)
    by_cv = [m["covered"] for r in rows.values() for k, m in r["methods"].items()
             if k in ("ours_cv", "ours_cv_lac") and m["covered"] is not None]
    assert cv_estimators["met"] == (bool(by_cv) and min(by_cv) >= 0.9)
    if _installed("mapie"):  # our CV+ on MAPIE's splits is MAPIE's CV+
        assert rows["engel"]["methods"]["mapie"]["max_difference_from_ours_cv+"] < 1e-6
    speed = saved["sections"]["speed"]["results"][0]
    assert speed["ours_s"] > 0
    assert speed["mapie"]["status"] == ("estimated" if _installed("mapie") else "skipped")
    # The refitting jackknife+: regression sets only; its "learned once" is section 1's
    # ours on the same folds.
    (refit,) = saved["sections"]["refit"]["results"]
    assert refit["dataset"] == "engel" and refit["status"] == "ok"
    once, again = refit["methods"]["learned_once"], refit["methods"]["learned_without_each_row"]
    assert once["covered"] == rows["engel"]["methods"]["ours"]["covered"]
    assert once["width"] == pytest.approx(rows["engel"]["methods"]["ours"]["width"])
    assert 0 <= again["covered"] <= 1 and again["width"] > 0
    assert "### 3. The jackknife+ of the learning procedure" in printed
    assert "### 1. Coverage at confidence 0.9" in printed


def test_coverage_benchmark_runs_with_or_without_nprobust(bench, tmp_path):
    bench_coverage = importlib.import_module("bench_coverage")
    report, out_dir, printed = _quiet_run(
        bench_coverage, tmp_path, replications=2, replications_multi=1, n=150,
        designs_1d=("ccf5",), designs_multi=("d2",), replications_nprobust=1)
    saved = json.loads((out_dir / "bench_coverage.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert list(saved["sections"]) == list(bench_coverage.SECTIONS)
    (one,) = saved["sections"]["one_feature"]["results"]
    assert one["points"] == pytest.approx([-0.95, -1 / 3, 0.0, 1 / 3, 0.95])
    for kind in ("robust", "conventional"):
        assert all(0 <= c <= 1 for c in one["ours"][kind]["coverage"])
        assert all(length > 0 for length in one["ours"][kind]["mean_length"])
    assert one["nprobust"]["status"] == ("ok" if _installed("nprobust") else "skipped")
    # Section 1's draws again: the same choices, and one bandwidth for every draw.
    (effect,) = saved["sections"]["selection_effect"]["results"]
    assert effect["chosen"]["robust"]["coverage"] == one["ours"]["robust"]["coverage"]
    assert effect["fixed"]["h"] > 0 and sum(effect["chosen"]["by_quartile"]["draws"]) == 2
    assert f"| ccf5 | fixed at {effect['fixed']['h']:.3f} | 2 |" in printed
    (two,) = saved["sections"]["several_features"]["results"]
    assert two["d"] == 2 and len(two["robust"]["coverage"]) == 3
    assert len(saved["targets"]) == 2
    assert all(isinstance(t["met"], bool) for t in saved["targets"])
    assert (out_dir / "bench_coverage.md").read_text() == printed
    assert "| ccf5 | -0.95 |" in printed
    assert "Fewer draws than issue 27 asks for**: 2 per design instead of 1,000" in printed
    # The markdown written again from the json is the same.
    (out_dir / "bench_coverage.md").unlink()
    bench_coverage.markdown_from(out_dir / "bench_coverage.json")
    assert (out_dir / "bench_coverage.md").read_text() == printed
    # One section run again beside the saved others: they stay, in their order.
    _quiet_run(bench_coverage, tmp_path, sections=("selection_effect",), replications=3,
               n=150, designs_1d=("ccf5",), keep_sections=True)
    again = json.loads((out_dir / "bench_coverage.json").read_text())
    assert list(again["sections"]) == list(bench_coverage.SECTIONS)
    assert again["sections"]["one_feature"] == saved["sections"]["one_feature"]
    assert again["sections"]["selection_effect"]["results"][0]["replications"] == 3
    assert len(again["targets"]) == 2
    assert "| ccf5 | -0.95 |" in (out_dir / "bench_coverage.md").read_text()


def test_coverage_designs_are_ccfs():
    bench_coverage = importlib.import_module("bench_coverage")
    # CCF 2018's model 5 at x = -1/3: sin(-pi/2) / (1 + 18 (1/9) 0) = -1; at 1/3:
    # sin(pi/2) / (1 + 18 (1/9) 2) = 1/5. Model 6 at -1 and 1: -1 / 1 and 1 / (1 + 4).
    assert bench_coverage.ccf5(np.array([-1 / 3, 1 / 3])) == pytest.approx([-1.0, 0.2])
    assert bench_coverage.ccf6(np.array([-1.0, 1.0])) == pytest.approx([-1.0, 1 / 5])
    assert bench_coverage.ccf1(np.array([0.0])) == pytest.approx([2.0])
    m = bench_coverage.product_design((bench_coverage.ccf5, bench_coverage.ccf6))
    assert m(np.array([[-1 / 3, -1.0]])) == pytest.approx([-1.0 * -1.0 + 0.5 / 3])


# -- bench_fit_time ----------------------------------------------------------------------------
def test_fit_time_benchmark_runs(bench, tmp_path):
    bench_fit_time = importlib.import_module("bench_fit_time")
    report, out_dir, stdout = _quiet_run(
        bench_fit_time, tmp_path, series=(60,), sizes=(), dims=(), loo_n=40,
        loo_queries=30, loo_degrees=(0,), with_co2=False)
    saved = json.loads((out_dir / "bench_fit_time.json").read_text())
    assert saved == json.loads(json.dumps(report))
    cv = saved["sections"]["cv"]
    names = [r["data"] for r in cv["results"]]
    assert names == ["series 60"]
    for r in cv["results"]:
        # 48 training rows: the ks up to 32, each weighting.
        assert r["ours_s"] > 0 and r["knn_s"] > 0 and r["knn_candidates"] == 12
        assert r["ratio"] == pytest.approx(r["ours_s"] / r["knn_s"])
        # The medians of three fits each, the first of ours reported apart.
        assert len(r["ours_times_s"]) == len(r["knn_times_s"]) == 3
        assert r["ours_s"] == np.median(r["ours_times_s"])
        assert r["knn_s"] == np.median(r["knn_times_s"])
        assert r["ours_first_s"] == r["ours_times_s"][0]
        assert r["ours_mse"] >= 0 and r["knn_mse"] >= 0
        # The fits with fewer families beside the default, against the same KNN time.
        assert set(r["variants"]) == set(bench_fit_time.VARIANTS)
        for v in r["variants"].values():
            assert v["s"] > 0 and v["mse"] >= 0
            assert v["ratio"] == pytest.approx(v["s"] / r["knn_s"])
    assert [t["met"] for t in cv["targets"]] == [r["ratio"] <= 1 for r in cv["results"]]
    assert "| data | default / KNN | fixed kinds / KNN |" in stdout
    loo = saved["sections"]["loo"]
    peers = [r["peer"] for r in loo["results"]]
    assert peers[0] == "ours, degree=0" and all(r["total_s"] > 0 for r in loo["results"])
    # kernelsmooth is optional: its rows and the target are there only when installed.
    if _installed("kernelsmooth"):
        assert "kernelsmooth KernelRegression" in peers
        assert isinstance(loo["targets"][0]["met"], bool)
    else:
        assert loo["config"]["kernelsmooth"] == "skipped" and loo["targets"][0]["met"] is None
        assert "kernelsmooth: skipped (not installed)." in stdout
    assert stdout == (out_dir / "bench_fit_time.md").read_text()
