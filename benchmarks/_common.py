"""What the benchmarks share: timing, reports, the machine, the problem, fresh-process peers.

Not a benchmark (``run.py`` runs only ``bench_*.py``): the ``bench_*.py`` scripts import from
here, and no script imports another. It holds

- ``timed``, ``verdict``, ``section_markdown``, ``load_average``, ``machine_info`` and
  ``machine_line``: wall times, target verdicts, markdown sections and the machine the run
  was on;
- ``make_problem``: standard normal float32 inputs and queries with a smooth noisy target;
- ``PREPARE``: the peers computing the same Gaussian Nadaraya-Watson prediction (the package
  by its compute paths, dense and chunked torch, ``torch.compile``, statsmodels, scikit-learn's
  k-nearest neighbors, pykeops), by name, each returning the call to time (bench_predict
  compares them, bench_engine's scaling section times some of them);
- ``PeakRSS``, ``measure`` and ``run_in_child``: one peer timed, with its peak extra resident
  memory, in a fresh process.
"""

import inspect
import json
import multiprocessing
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from importlib import metadata
from pathlib import Path

import numpy as np
import psutil
import torch

from sklearn_nw import NadarayaWatsonRegressor


# -- timing and reports --------------------------------------------------------------------
def timed(call, repeats):
    """Wall times of ``repeats`` calls, and the last call's result."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return times, result


def verdict(target):
    """``met``, ``NOT met`` or ``not evaluated`` for a target dict of the sectioned benchmarks."""
    return {True: "met", False: "NOT met", None: "not evaluated"}[target["met"]]


def section_markdown(result, to_markdown):
    """A section's markdown lines followed by one line per target, as one chunk of text."""
    targets = (f"- Target ({t['name']}): {verdict(t)} ({t['detail']})."
               for t in result["targets"])
    return "\n".join(["", *to_markdown(result), "", *targets]) + "\n"


def load_average():
    """The 1-minute load average (None where the OS has none: Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def machine_info():
    """CPU model, cores, RAM, Python and library versions, torch threads."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if os.path.exists("/proc/cpuinfo") else ""
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
              if line.startswith("model name")]
    versions = {}
    for package in ("torch", "scikit-learn", "statsmodels", "pykeops", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    cpu = models[0] if models else platform.processor() or platform.machine()
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "ram_gib": psutil.virtual_memory().total / 2**30, "python": platform.python_version(),
            "versions": versions, "torch_threads": torch.get_num_threads()}


def machine_line(m):
    """One markdown line describing the machine recorded by :func:`machine_info`."""
    versions = ", ".join(f"{k} {v or 'not installed'}" for k, v in m["versions"].items())
    return (f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']:.1f} GiB RAM; Python "
            f"{m['python']}, {versions}; torch threads {m['torch_threads']}.")


# -- the problem -----------------------------------------------------------------------------
def make_problem(n_train, n_queries, d, seed=0):
    """Standard normal inputs and queries, a smooth target with noise, all float32."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_train, d)).astype(np.float32)
    Q = rng.standard_normal((n_queries, d)).astype(np.float32)
    y = np.sin(X).sum(1) + 0.1 * rng.standard_normal(n_train)
    return X, y.astype(np.float32), Q


# -- the peers: each imports what it needs and returns the call to time ---------------------
def _sklearn_nw(X, y, Q, h, keops_cold, compute="auto"):
    model = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h, compute=compute)
    return lambda: model.fit(X, y).predict(Q)


def _sklearn_nw_compiled(X, y, Q, h, keops_cold):
    model = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h, compute="compiled")
    start = time.perf_counter()
    model.fit(X, y).predict(Q[:256])

    def call():
        return model.fit(X, y).predict(Q)

    call.compile_s = time.perf_counter() - start
    return call


def _textbook(X, y, Q, h, keops_cold):
    def call():
        x, q = (torch.from_numpy(a / h.astype(np.float32)) for a in (X, Q))  # (n, d), (n_q, d)
        dist = torch.cdist(q, x)  # (n_q, n)
        attention = torch.softmax(-0.5 * dist**2, dim=1)  # (n_q, n)
        return (attention @ torch.from_numpy(y)).numpy()  # (n_q,)

    return call


def _chunk(qc, x, x2, y1):
    """One chunk of queries (b, d) against all keys: logits by addmm, an in-place
    max-subtracted exp, one product with [y, 1]; returns the (b,) predictions."""
    logits = torch.addmm(x2, qc, x.T, alpha=-2.0)  # (b, n): |x|^2 - 2 q.x
    logits.mul_(-0.5)  # the row constant -|q|^2 / 2 cancels in the softmax
    logits.sub_(logits.amax(1, keepdim=True)).exp_()
    num_den = logits @ y1  # (b, 2)
    return num_den[:, 0] / num_den[:, 1]


def _chunked(X, y, Q, h, keops_cold, chunk=_chunk):
    """The plain eager torch way without the full matrix: query chunks of 1,024 rows,
    addmm for the squared distances, an in-place max-subtracted exp, one matmul."""

    def call(queries=Q):
        x, q = (torch.from_numpy(a / h.astype(np.float32)) for a in (X, queries))
        y1 = torch.stack([torch.from_numpy(y), torch.ones(len(y))], dim=1)  # (n, 2)
        x2 = (x * x).sum(1)  # (n,)
        return torch.cat([chunk(q[s : s + 1024], x, x2, y1)
                          for s in range(0, len(q), 1024)]).numpy()

    return call


def _compiled(X, y, Q, h, keops_cold):
    """``_chunk`` through ``torch.compile``; one full chunk compiles it (timed apart). A last
    chunk of another size may recompile once inside the timed calls (dynamic shapes)."""
    call = _chunked(X, y, Q, h, keops_cold, chunk=torch.compile(_chunk))
    start = time.perf_counter()
    call(Q[:1024])
    call.compile_s = time.perf_counter() - start
    return call


def _statsmodels(X, y, Q, h, keops_cold):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    # A seed (used only by bandwidth searches) avoids statsmodels >= 0.15's FutureWarning.
    seed = {"rng": 0} if "rng" in inspect.signature(KernelReg).parameters else {}
    X64, y64, Q64 = (a.astype(np.float64) for a in (X, y, Q))  # statsmodels' own dtype

    def call():
        reg = KernelReg(y64, X64, var_type="c" * X.shape[1], reg_type="lc", bw=h, **seed)
        return reg.fit(Q64)[0]

    return call


def _knn(X, y, Q, h, keops_cold):
    from sklearn.neighbors import KNeighborsRegressor

    def call():
        x, q = (a / h.astype(np.float32) for a in (X, Q))
        # Every training point is a neighbor, weighted by the Gaussian of its scaled distance.
        knn = KNeighborsRegressor(n_neighbors=len(x), weights=lambda u: np.exp(-0.5 * u**2))
        return knn.fit(x, y).predict(q)

    return call


def _pykeops(X, y, Q, h, keops_cold):
    import pykeops
    from pykeops.torch import LazyTensor

    pykeops.set_verbose(False)
    if keops_cold:
        build = tempfile.mkdtemp(prefix="keops-bench-")
        pykeops.set_build_folder(build)

    def call(queries=Q):
        q = LazyTensor(torch.from_numpy(queries / h.astype(np.float32))[:, None, :])  # (n_q, 1, d)
        x = LazyTensor(torch.from_numpy(X / h.astype(np.float32))[None, :, :])  # (1, n, d)
        v = LazyTensor(torch.from_numpy(y)[None, :, None])  # (1, n, 1)
        logits = -0.5 * ((q - x) ** 2).sum(-1)  # (n_q, n), symbolic
        return logits.sumsoftmaxweight(v, dim=1)[:, 0].numpy()  # (n_q,)

    start = time.perf_counter()
    call(Q[:8])
    call.compile_s = time.perf_counter() - start
    if keops_cold:
        shutil.rmtree(build, ignore_errors=True)
    return call


PREPARE = {"sklearn_nw": _sklearn_nw, "sklearn_nw_compiled": _sklearn_nw_compiled,
           # the eager engine whatever the size (bench_engine's scaling series)
           "sklearn_nw_eager": partial(_sklearn_nw, compute="eager"),
           "textbook": _textbook, "chunked": _chunked,
           "compiled": _compiled, "statsmodels": _statsmodels, "knn": _knn,
           "pykeops": _pykeops}


# -- measuring one peer in its own process -------------------------------------------------
def _max_rss_bytes():
    """Lifetime peak RSS of this process (0 where ``resource`` is missing: Windows)."""
    try:
        import resource
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


class PeakRSS:
    """Peak growth of this process's resident set over its size at entry, in ``extra_mb``.

    A thread samples the RSS every 2 ms; if the block set a new lifetime peak, ``ru_maxrss``
    gives it exactly, spikes between samples included.
    """

    def __enter__(self):
        self._process, self._stop = psutil.Process(), threading.Event()
        self._baseline = self._peak = self._process.memory_info().rss
        self._max_before = _max_rss_bytes()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.002):
            self._peak = max(self._peak, self._process.memory_info().rss)

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()
        peak = max(self._peak, self._process.memory_info().rss)
        max_after = _max_rss_bytes()
        if max_after > self._max_before:
            peak = max(peak, max_after)
        self.extra_mb = (peak - self._baseline) / 2**20


def measure(peer, X, y, Q, h, repeats, keops_cold=True):
    """Time ``repeats`` calls of one peer and their peak extra memory (run in a child)."""
    try:
        call = PREPARE[peer](X, y, Q, h, keops_cold)
    except ImportError as exc:
        return {"peer": peer, "status": "skipped", "reason": str(exc)}
    # Time first, then measure memory in a run of its own: the 2 ms RSS sampler competes
    # for the CPU and would slow the timed calls (the slow peers, run once, do both at once).
    times = []
    for _ in range(repeats if repeats > 1 else 0):
        start = time.perf_counter()
        pred = call()
        times.append(time.perf_counter() - start)
    with PeakRSS() as memory:
        start = time.perf_counter()
        pred = call()
        if not times:
            times.append(time.perf_counter() - start)
    return {"peer": peer, "status": "ok", "n_train": X.shape[0], "n_queries": Q.shape[0],
            "repeats": repeats, "times_s": times, "time_s": min(times),
            "peak_extra_mb": memory.extra_mb, "compile_s": getattr(call, "compile_s", None),
            "pred": np.asarray(pred, dtype=np.float64).ravel()}


def _context():
    """Fresh processes; forked from a server that has already imported the heavy modules."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["sklearn_nw", "numpy", "psutil"])
        return context
    return multiprocessing.get_context("spawn")


def run_in_child(peer, X, y, Q, h, repeats, keops_cold):
    """:func:`measure` in a fresh process; a crash is reported as a failed peer."""
    with ProcessPoolExecutor(max_workers=1, mp_context=_context()) as pool:
        future = pool.submit(measure, peer, X, y, Q, h, repeats, keops_cold)
        try:
            return future.result()
        except (BrokenProcessPool, MemoryError, RuntimeError) as exc:  # e.g. out of memory
            return {"peer": peer, "status": "failed", "reason": repr(exc)}



def write_report(name, report, result, to_markdown, out_dir):
    """Add ``result`` (one section: config, results, targets) and the end load average to
    ``report``; print and write ``<name>.md`` (the machine, the section, the load) and
    ``<name>.json``; return the report."""
    report.update(result)
    report["load_average"]["end"] = load_average()
    text = (machine_line(report["machine"]) + "\nTargets are reported, never enforced.\n"
            + section_markdown(result, to_markdown)
            + f"\nLoad average (1 min) at the start {report['load_average']['start']}, at the "
              f"end {report['load_average']['end']}.\n")
    print(text, end="", flush=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / f"{name}.md").write_text(text)
    return report


def run_sections(name, report, chunks, runs, out_dir):
    """Run the sections ``runs`` (section name -> (run, to_markdown)) in order into
    ``report["sections"]``, printing each one's markdown as it is done after ``chunks``
    (what was printed already); then every target, their counts and the load average;
    write ``<name>.json`` and ``<name>.md``; return the report."""
    for section, (run, to_markdown) in runs.items():
        print(f"section {section}", file=sys.stderr, flush=True)
        result = report["sections"][section] = run()
        chunk = section_markdown(result, to_markdown)
        chunks.append(chunk)
        print(chunk, end="", flush=True)
    report["targets"] = [t for s in report["sections"].values() for t in s["targets"]]
    report["load_average"]["end"] = load_average()
    counts = {v: sum(verdict(t) == v for t in report["targets"])
              for v in ("met", "NOT met", "not evaluated")}
    load = report["load_average"]
    summary = ("\nTargets: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".\n"
               + (f"\nLoad average (1 min) at the start {load['start']:.2f}, at the end "
                  f"{load['end']:.2f}, on {report['machine']['cores']} cores: the timings "
                  "mean something only on an otherwise idle machine (a busy core can stall "
                  "every parallel torch operation).\n" if load["start"] is not None else ""))
    chunks.append(summary)
    print(summary, end="", flush=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / f"{name}.md").write_text("".join(chunks))
    return report
