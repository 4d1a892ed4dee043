"""The engine's worker threads: one pool, one torch thread per worker. Torch only.

Each of torch's parallel operations on the CPU is an OpenMP region that ends in a barrier
waiting for every thread of its team. Whenever another process holds a core, each barrier
can wait out a scheduler time slice, so a call made of many short operations slows by far
more than the share of the CPU it lost (measured on 2 cores: a 20,000 x 20,000 predict
took 0.3 s alone and 1.2 to 12 s beside another busy process). Work cut into tasks that
run on threads of one torch thread each has no barrier between the tasks, and a worker
stalled by another process only leaves its tasks to the others.

Three rules, for every route and every leave-one-out engine:

- :func:`on_workers` runs tasks on the workers, started on first use and kept for the
  process (a pool started per call costs milliseconds, more than a small search);
- :func:`serial_if_small` keeps calls of few pairs on the calling thread alone;
- :func:`chunk_rows` sizes the chunks of rows.
"""

import atexit
import contextlib
import math
import os
import queue
import threading

import torch

# Calls of at most this many (query, key) pairs run on the calling thread alone: one thread
# does them in well under a millisecond, and each of torch's parallel regions ends in a
# barrier that waits for every thread of the team, so whenever another process holds a
# core a one-row predict waits out scheduler time slices (measured on 2 cores beside a
# busy process: a one-row Gaussian predict over 50,000 keys in 38 ms instead of 1.5 ms).
SERIAL_MAX_PAIRS = 2**18
# A block that stays in cache: the passes over a (chunk, n) block are memory bound, and a
# block that fits in L2/L3 makes them several times faster.
CACHE_BYTES = 4 * 2**20
# A chunk of attention rows and the passes over it outside the engine (numpy, or torch
# operations on whole blocks) within this: blocks of fresh memory far larger cost their
# page faults at every pass and run several times slower.
PASS_BYTES = 32 * 2**20
# Rows a chunk keeps at least when :func:`chunk_rows` cuts rows into two chunks per worker:
# below, each chunk's fixed costs (Python, the operations' set-up) outweigh its work.
MIN_SHARED_ROWS = 32


def chunk_rows(n_rows, row_bytes=0, working_memory=None, *, workers=None, cap_bytes=None):
    """Rows per chunk (at least 1) for chunks of ``row_bytes`` per row.

    Each chunk is at most ``cap_bytes`` (a cache-sized block, or a block beyond which
    larger ones run no faster). Without ``workers`` one chunk at a time fits in
    ``working_memory`` MiB (None: no bound). With ``workers``, the chunks that many
    threads hold at once fit in it, and there are at least two chunks per worker (of
    ``MIN_SHARED_ROWS`` rows or more): a worker stalled by another process then leaves its
    share to the others.
    """
    at_once = 1 if workers is None else workers
    budget = math.inf if working_memory is None else working_memory * 2**20 / at_once
    if cap_bytes is not None:
        budget = min(budget, cap_bytes)
    rows = n_rows if math.isinf(budget) else int(budget) // max(1, row_bytes)
    rows = max(1, min(n_rows, rows))
    if workers is not None:
        rows = min(rows, max(MIN_SHARED_ROWS, -(-n_rows // (2 * workers))))
    return rows


def n_workers(device):
    """The workers a call on ``device`` shares its chunks among: torch's thread count on
    the CPU (that of the calling thread: 1 inside a worker or a small call), else 1."""
    return torch.get_num_threads() if torch.device(device).type == "cpu" else 1


def worth_sharing(n_chunks, device):
    """Whether ``n_chunks`` chunks go to the workers: at least two per worker. Fewer run
    on the calling thread, whose team of threads splits each one."""
    workers = n_workers(device)
    return workers > 1 and n_chunks >= 2 * workers


@contextlib.contextmanager
def serial_if_small(n_pairs, device):
    """Run the block on one thread when it computes at most ``SERIAL_MAX_PAIRS`` pairs
    on the CPU. OpenMP's and MKL's thread counts are per thread: this thread's only
    (torch also keeps it as the default of threads started meanwhile; restored after)."""
    n_threads = torch.get_num_threads()
    if torch.device(device).type != "cpu" or n_pairs > SERIAL_MAX_PAIRS or n_threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n_threads)


def on_workers(tasks, run, device, *, init=None, max_workers=None):
    """``[run(task, state) for task in tasks]``, in order, on the workers.

    As many workers as torch has threads in the calling thread (at most ``max_workers``)
    take the tasks in order, the next one as each is done, each with one torch thread and
    its own ``state = init()`` (None without ``init``). The first exception of a task is
    raised here, once the tasks already started have ended. The calling thread's own
    thread count is left as it is.

    In the calling thread off the CPU, with one worker, for one task, and from inside a
    worker: a task never waits for tasks queued behind it.
    """
    tasks = list(tasks)
    n_threads = torch.get_num_threads()
    workers = min(n_threads, len(tasks), max_workers or n_threads)
    if workers <= 1 or torch.device(device).type != "cpu" or _in_worker():
        state = init() if init is not None else None
        return [run(task, state) for task in tasks]
    call = _Call(tasks, run, init)
    _POOL.submit(call, workers, n_threads)
    return call.results()


def reduce_in_order(tasks, compute, commit, device, *, init=None, max_workers=None):
    """``for task in tasks: commit(compute(task, state))``, the computations on the
    workers (as :func:`on_workers`) and the commits in the order of the tasks, each as
    soon as those before it are in: a reduction (a sum of losses, a gradient) rounded as
    the loop rounds it, whichever worker ends first.

    A computed part waits for its commit while at most ``2 * workers`` tasks are ahead of
    the next one to commit: memory stays bounded when one worker stalls. The commits run
    one at a time, on any of the threads.
    """
    tasks = list(tasks)
    order = _InOrder(commit, 2 * max(1, torch.get_num_threads()))

    def run(indexed, state):
        i, task = indexed
        try:
            part = compute(task, state)
        except BaseException:
            order.fail()
            raise
        order.put(i, part)

    on_workers(enumerate(tasks), run, device, init=init, max_workers=max_workers)


class _InOrder:
    """Commits of indexed parts in index order; parts more than ``ahead`` past the next
    one wait."""

    def __init__(self, commit, ahead):
        self.commit, self.ahead = commit, ahead
        self.next = 0
        self.pending = {}
        self.failed = False
        self.changed = threading.Condition()

    def put(self, i, part):
        with self.changed:
            # The part at self.next is being computed, or committed here: no deadlock.
            self.changed.wait_for(lambda: self.failed or i - self.next < self.ahead)
            if self.failed:  # a task before failed: its exception is the call's
                return
            self.pending[i] = part
            try:
                while self.next in self.pending:
                    self.commit(self.pending.pop(self.next))
                    self.next += 1
            except BaseException:
                self.failed = True
                raise
            finally:
                self.changed.notify_all()

    def fail(self):
        with self.changed:
            self.failed = True
            self.changed.notify_all()


_local = threading.local()


def _in_worker():
    return getattr(_local, "in_worker", False)


_UNSET = object()


class _Call:
    """The tasks of one :func:`on_workers` call, shared by the workers that take part."""

    def __init__(self, tasks, run, init):
        self.tasks, self.run, self.init = tasks, run, init
        self.out = [None] * len(tasks)
        self.next = 0  # the next task to take
        self.running = 0  # tasks taken and not ended
        self.done = 0
        self.errors = []
        self.changed = threading.Condition()

    def take_part(self):
        """Run the call's next tasks until none is left or one has failed; never raises."""
        state = _UNSET
        while True:
            with self.changed:
                if self.errors or self.next == len(self.tasks):
                    return
                i = self.next
                self.next += 1
                self.running += 1
            try:
                if state is _UNSET:
                    state = self.init() if self.init is not None else None
                result = self.run(self.tasks[i], state)
            except BaseException as exc:  # re-raised in the calling thread
                with self.changed:
                    self.errors.append(exc)
                    self.running -= 1
                    if self._ended():
                        self.changed.notify_all()
                return
            with self.changed:
                self.out[i] = result
                self.running -= 1
                self.done += 1
                if self._ended():
                    self.changed.notify_all()

    def _ended(self):
        """Every task done, or one failed and none is still running."""
        return self.done == len(self.tasks) or (self.errors and not self.running)

    def results(self):
        """The results in order, once every task has ended (or a task's exception)."""
        with self.changed:
            try:
                self.changed.wait_for(self._ended)
            except BaseException as exc:  # interrupted: no task starts any more
                self.errors.append(exc)
                raise
        if self.errors:
            raise self.errors[0]
        return self.out


class _Pool:
    """Worker threads started on first use and kept for the process, as many as the
    largest thread count a call has asked for; each takes part in the calls queued, in
    order."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = queue.SimpleQueue()
        self.size = 0
        self.threads = []

    def submit(self, call, workers, n_threads):
        """Queue ``call`` for ``workers`` workers; the caller has ``n_threads`` torch
        threads."""
        if self.size < workers:
            self._grow(workers, n_threads)
        for _ in range(workers):
            self.calls.put(call)

    def _grow(self, size, n_threads):
        with self.lock:
            started = []
            while self.size < size:
                ready = threading.Event()
                thread = threading.Thread(target=self._work, args=(ready,), daemon=True,
                                          name=f"sklearn_nw_worker_{self.size}")
                thread.start()
                self.threads.append(thread)
                started.append(ready)
                self.size += 1
            for ready in started:
                ready.wait()
            if started:
                # The workers' torch.set_num_threads(1) is also torch's default for threads
                # that set themselves up later: the caller's count again, as found.
                torch.set_num_threads(n_threads)

    def _work(self, ready):
        _local.in_worker = True
        # torch sets a thread up on its first parallel operation, to the process's default
        # count: done first, or it would undo the count set here.
        torch.get_num_threads()
        # OpenMP's and MKL's thread counts are per thread: this one's, once.
        torch.set_num_threads(1)
        ready.set()
        while (call := self.calls.get()) is not None:
            call.take_part()

    def stop(self):
        """End the workers (each takes a ``None`` and returns) and wait for them."""
        with self.lock:
            for _ in self.threads:
                self.calls.put(None)
            for thread in self.threads:
                thread.join(timeout=10)
            self.threads, self.size = [], 0


_POOL = _Pool()


@atexit.register
def _stop_workers():
    """At exit, before the interpreter and torch's own static state are torn down: a
    worker thread still alive then (blocked on the queue, holding torch's per-thread
    state) made the process abort now and then ("terminate called without an active
    exception", exit status 134, about one exit in eight after a learned bandwidth)."""
    _POOL.stop()


def _forget_workers():
    """A forked child has none of the parent's threads: it starts its own on first use."""
    global _POOL
    _POOL = _Pool()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)
