"""Smoke tests of the benchmarks: they run at a tiny size and write well-formed results.

Benchmarks are not tests: nothing here asserts a timing, only that every time is positive.
"""

import contextlib
import importlib
import importlib.util
import io
import json
import math
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
# The module each peer needs; a peer whose module is missing must be reported as skipped.
PEER_MODULES = {"sklearn_nw": "sklearn_nw", "textbook": "torch", "statsmodels": "statsmodels",
                "knn": "sklearn", "pykeops": "pykeops"}


def _installed(module):
    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="module")
def bench():
    """The benchmark modules, imported from benchmarks/ (their worker processes need it on
    sys.path too, hence the module-scoped path)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCHMARKS))
        yield importlib.import_module("bench_predict"), importlib.import_module("run")


@pytest.fixture(scope="module")
def tiny_run(bench, tmp_path_factory):
    """One tiny run of every peer: the report it returns, its output folder and its stdout."""
    bench_predict, _ = bench
    out_dir = tmp_path_factory.mktemp("bench_predict")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        # pykeops' own build cache: only the first run on a machine pays for the compile.
        report = bench_predict.run_benchmark(n_train=300, n_queries=200, d=3, repeats=2,
                                             out_dir=out_dir, keops_cold=False)
    return report, out_dir, stdout.getvalue()


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
    keops = [r for r in ok if r["peer"] == "pykeops"]
    assert all(r["compile_s"] > 0 for r in keops)


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


def test_runner_finds_the_benchmarks(bench):
    _, run = bench
    assert BENCHMARKS / "bench_predict.py" in run.discover()
    assert run.discover(["predict"]) == [BENCHMARKS / "bench_predict.py"]
    with pytest.raises(SystemExit, match="no benchmark named"):
        run.discover(["no_such_benchmark"])
