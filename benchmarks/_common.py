"""What the benchmarks share: timing, reports, the machine, the problem, fresh-process peers.

Not a benchmark (``run.py`` runs only ``bench_*.py``): the ``bench_*.py`` scripts import from
here (and bench_accuracy, bench_load reuse a few named pieces of the benchmark whose data or
peer they share). It holds

- ``timed`` (the one timing helper: repeated calls, an optional first call timed apart, their
  best and median), ``recording``, ``warning_lines``, ``verdict``, ``section_markdown``,
  ``load_average``, ``machine_info`` and ``machine_line``: wall times, the warnings raised,
  target verdicts, markdown sections and the machine the run was on;
- ``make_problem`` (the one problem builder: standard normal or uniform inputs and queries,
  a target function with Gaussian noise, a dtype, a seed), its target functions and
  ``radius_holding``, the radius that holds a number of uniform points;
- ``PREPARE``: the peers computing the same Gaussian Nadaraya-Watson prediction (the package
  by its compute paths, dense and chunked torch, ``torch.compile``, statsmodels, scikit-learn's
  k-nearest neighbors, pykeops), by name, each returning the call to time (bench_predict
  compares them, bench_engine's scaling section times some of them);
- ``PeakRSS``, ``measure`` and ``run_in_child``: one peer timed, with its peak extra resident
  memory, in a fresh process.
"""

import contextlib
import inspect
import json
import math
import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

import numpy as np
import psutil
import torch

from sklearn_nw import NadarayaWatsonRegressor


# -- timing and reports --------------------------------------------------------------------
class Timing(NamedTuple):
    """What :func:`timed` measured.

    Attributes
    ----------
    times : list of float
        Wall seconds of each repeated call.
    result : object
        The last call's result (None when nothing was called).
    first : float or None
        Wall seconds of the first call, made before the repeats and not one of them (None
        unless asked for).
    """

    times: list
    result: object
    first: float = None

    @property
    def best(self):
        """The least time of the repeated calls (the first call's without repeats)."""
        return min(self.times) if self.times else self.first

    @property
    def median(self):
        """The median time of the repeated calls (the first call's without repeats): a stall
        shows in the median, not in the best call."""
        return statistics.median(self.times) if self.times else self.first


def _wall_time(call):
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def timed(call, repeats=1, *, first_call=False):
    """Wall times of ``repeats`` calls of ``call`` and the last one's result.

    With ``first_call``, one call before them is timed apart: a compile, lazily built state
    or first-touch allocations are not what a repeated call costs.

    Parameters
    ----------
    call : callable
        Called without arguments.
    repeats : int, default=1
        The calls timed in ``times`` (0: none).
    first_call : bool, default=False
        Whether one call before them is made and timed as ``first``.

    Returns
    -------
    timing : Timing
        ``times``, ``result``, ``first`` and their ``best`` and ``median``.
    """
    first = result = None
    if first_call:
        first, result = _wall_time(call)
    times = []
    for _ in range(repeats):
        seconds, result = _wall_time(call)
        times.append(seconds)
    return Timing(times, result, first)


@contextlib.contextmanager
def recording(into):
    """Collect the distinct warnings of the block into the set ``into`` instead of raising."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    into.update(f"{w.category.__name__}: {str(w.message)[:200]}" for w in caught)


def warning_lines(warned):
    """Markdown lines listing the warnings recorded per label, if any."""
    warned = {label: w for label, w in warned.items() if w}
    if not warned:
        return []
    return ["", "Warnings raised:", *(f"- {label}: {'; '.join(w)}" for label, w in warned.items())]


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
def sum_of_sines(X):
    """``sin(x0) + ... + sin(x_{d-1})``: smooth in every feature."""
    return np.sin(X).sum(1)


def sine_wave_on_slope(X):
    """``sin(6 x0) + x1``: a fast wave along x0 on a slope along x1 (two features or more)."""
    return np.sin(6 * X[:, 0]) + X[:, 1]


def make_problem(n_train, n_queries, d, *, seed=0, dtype=np.float32, span=None,
                 target=sum_of_sines, noise=0.1, queries_last=False):
    """Inputs, targets and queries of a synthetic regression problem: every benchmark's.

    The inputs (n_train, d) and the queries (n_queries, d) are drawn from one generator:
    standard normal, or uniform on ``span``. The targets are ``target(X)`` of the inputs in
    ``dtype``, plus ``noise`` times standard normal draws. The draws come in the order
    inputs, queries, noise (inputs, noise, queries with ``queries_last``): a benchmark's
    arrays are bit-identical from one run, and one version, to the next.

    Parameters
    ----------
    n_train, n_queries, d : int
        The rows of the inputs and of the queries (0: an empty (0, d) array), the features.
    seed : int, default=0
        The seed of ``numpy.random.default_rng``.
    dtype : numpy dtype or str, default=np.float32
        Of the inputs, the queries and the targets (the draws are float64, then cast).
    span : (float, float) or None, default=None
        Uniform inputs and queries on ``[low, high]^d``; None: standard normal.
    target : callable, default=sum_of_sines
        The noise-free function of the inputs, an (n,) array from an (n, d) one.
    noise : float, default=0.1
        The scale of the Gaussian noise on the targets; 0 draws none.
    queries_last : bool, default=False
        Draw the queries after the noise instead of before it.

    Returns
    -------
    X : ndarray of shape (n_train, d)
    y : ndarray of shape (n_train,)
    Q : ndarray of shape (n_queries, d)
    """
    rng = np.random.default_rng(seed)

    def draw(n):
        if span is None:
            return rng.standard_normal((n, d)).astype(dtype)
        return rng.uniform(span[0], span[1], (n, d)).astype(dtype)

    X = draw(n_train)
    Q = None if queries_last else draw(n_queries)
    y = target(X)
    if noise:
        y = y + noise * rng.standard_normal(n_train)
    if queries_last:
        Q = draw(n_queries)
    return X, y.astype(dtype), Q


def radius_holding(reach, n, d):
    """The radius of the ball that holds about ``reach`` of ``n`` points uniform in the unit
    cube [0, 1]^d (away from its faces)."""
    ball = math.pi ** (d / 2) / math.gamma(d / 2 + 1)  # volume of the unit d-ball
    return (reach / (n * ball)) ** (1 / d)


# -- the peers: each imports what it needs and returns the call to time ---------------------
def _sklearn_nw(X, y, Q, h, keops_cold, compute="auto"):
    model = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h, compute=compute)
    return lambda: model.fit(X, y).predict(Q)


def _sklearn_nw_compiled(X, y, Q, h, keops_cold):
    model = NadarayaWatsonRegressor(kernel="gaussian", bandwidth=h, compute="compiled")
    compile_s = timed(lambda: model.fit(X, y).predict(Q[:256])).best

    def call():
        return model.fit(X, y).predict(Q)

    call.compile_s = compile_s
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
    call.compile_s = timed(lambda: call(Q[:1024])).best
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

    call.compile_s = timed(lambda: call(Q[:8])).best
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
    times = timed(call, repeats if repeats > 1 else 0).times
    with PeakRSS() as memory:
        last = timed(call)
    times = times or last.times
    pred = last.result
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


def summary_markdown(report):
    """The closing lines of a sectioned report: the targets' counts and the load average."""
    counts = {v: sum(verdict(t) == v for t in report["targets"])
              for v in ("met", "NOT met", "not evaluated")}
    load = report["load_average"]
    return ("\nTargets: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".\n"
            + (f"\nLoad average (1 min) at the start {load['start']:.2f}, at the end "
               f"{load['end']:.2f}, on {report['machine']['cores']} cores: the timings "
               "mean something only on an otherwise idle machine (a busy core can stall "
               "every parallel torch operation).\n" if load["start"] is not None else ""))


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
    summary = summary_markdown(report)
    chunks.append(summary)
    print(summary, end="", flush=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / f"{name}.md").write_text("".join(chunks))
    return report
