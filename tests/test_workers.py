"""The engine's one worker-thread scheme (:mod:`sklearn_nw._workers`): one persistent pool,
one torch thread per worker, tasks in order, reductions rounded as a loop rounds them."""

import multiprocessing
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from sklearn_nw import _workers
from sklearn_nw._adaptive import Adaptive, LeaveOneOutNeighbors
from sklearn_nw._engine_candidates import support_pairs_pool
from sklearn_nw._engine_loo import loo_loss
from sklearn_nw._workers import chunk_rows, on_workers, reduce_in_order
from sklearn_nw.kernels import get_kernel


@pytest.fixture
def two_threads():
    """Two torch threads in this thread for the test, the count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _ident_and_count(task, state):
    return threading.get_ident(), torch.get_num_threads(), task


def test_workers_are_kept_and_keep_one_torch_thread(two_threads):
    first = on_workers(range(8), _ident_and_count, "cpu")
    second = on_workers(range(8), _ident_and_count, "cpu")
    assert [task for _, _, task in second] == list(range(8))
    # One torch thread in each worker, also once the caller's count was set back after
    # the workers started (torch would set a thread up to the process's default then).
    assert {count for _, count, _ in first + second} == {1}
    assert torch.get_num_threads() == 2
    idents = {ident for ident, _, _ in first + second}
    assert threading.get_ident() not in idents
    # The same threads from one call to the next: no pool per call.
    assert {ident for ident, _, _ in second} <= {
        t.ident for t in threading.enumerate() if t.name.startswith("sklearn_nw_worker")}


def test_the_pool_grows_with_the_thread_count():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        barrier = threading.Barrier(3, timeout=30)

        def wait_for_all(task, _):
            barrier.wait()  # three tasks at once: three workers
            return threading.get_ident()

        assert len(set(on_workers(range(3), wait_for_all, "cpu"))) == 3
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_errors_are_raised_after_the_started_tasks_end(two_threads):
    ended = []

    def run(task, _):
        if task == 0:
            time.sleep(0.2)  # still running when task 1 fails
            ended.append(task)
            return task
        raise ValueError(f"task {task}")

    with pytest.raises(ValueError, match="task 1"):
        on_workers(range(6), run, "cpu")
    assert ended == [0]
    # The workers are still there for the next call.
    assert [t for _, _, t in on_workers(range(4), _ident_and_count, "cpu")] == [0, 1, 2, 3]


def test_nested_calls_run_inline_without_deadlock(two_threads):
    def outer(task, _):
        # From inside a worker: in that worker, one torch thread.
        inner = on_workers(range(4), _ident_and_count, "cpu")
        assert {ident for ident, _, _ in inner} == {threading.get_ident()}
        return sum(t for _, _, t in inner) + task

    assert on_workers(range(6), outer, "cpu") == [6 + t for t in range(6)]


def test_concurrent_callers_share_the_workers(two_threads):
    results = {}

    def caller(k):
        torch.set_num_threads(2)
        results[k] = on_workers(range(50), lambda t, _: (k, t * t), "cpu")

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == {k: [(k, t * t) for t in range(50)] for k in range(4)}


def test_reductions_commit_in_order_whichever_task_ends_first(two_threads):
    committed = []

    def compute(task, _):
        if task % 4 == 0:
            time.sleep(0.02)  # the next tasks end first
        return task

    reduce_in_order(range(20), compute, committed.append, "cpu")
    assert committed == list(range(20))


def test_reductions_raise_without_waiting_forever(two_threads):
    def compute(task, _):
        if task == 0:
            time.sleep(0.1)
            raise ValueError("task 0")
        return task

    committed = []
    start = time.perf_counter()
    with pytest.raises(ValueError, match="task 0"):
        reduce_in_order(range(40), compute, committed.append, "cpu")
    assert time.perf_counter() - start < 30
    assert committed == []  # nothing after the failed task is committed


@pytest.mark.parametrize("n_rows, row_bytes, working_memory, workers, cap_bytes", [
    (10_000, 80_000, 1024, None, None), (10_000, 8, 1, None, None), (5, 10, 1024, None, None),
    (100, 2**30, 1, None, None), (10_000, 80_000, 1024, 4, None), (10_000, 800, 1, 2, 4096),
    (100, 8, 1024, 2, None), (1_000, 8, 1024, 1, None)])
def test_chunk_rows(n_rows, row_bytes, working_memory, workers, cap_bytes):
    rows = chunk_rows(n_rows, row_bytes, working_memory, workers=workers, cap_bytes=cap_bytes)
    assert 1 <= rows <= n_rows
    at_once = workers or 1
    # The chunks held at once within the budget, each within the cap, unless one row is
    # already larger.
    assert rows * row_bytes * at_once <= working_memory * 2**20 or rows == 1
    assert cap_bytes is None or rows * row_bytes <= cap_bytes or rows == 1
    if workers is not None:  # two chunks per worker, or chunks of MIN_SHARED_ROWS
        n_chunks = -(-n_rows // rows)
        assert n_chunks >= 2 * workers or rows <= _workers.MIN_SHARED_ROWS


def test_chunk_rows_without_a_memory_bound():
    assert chunk_rows(1000) == 1000
    assert chunk_rows(1000, workers=2) == 250
    assert chunk_rows(40, workers=2) == 32


def _in_child(queue):
    torch.set_num_threads(2)
    queue.put(on_workers(range(6), lambda t, _: t + 1, "cpu"))


def test_a_forked_child_starts_its_own_workers(two_threads):
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    on_workers(range(4), _ident_and_count, "cpu")  # the parent's workers exist
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    try:
        assert queue.get(timeout=60) == [1, 2, 3, 4, 5, 6]
    finally:
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def _workers_alive():
    return [t for t in threading.enumerate() if t.name.startswith("sklearn_nw_worker")]


def test_stopped_workers_end_and_start_again_on_use(two_threads):
    on_workers(range(4), _ident_and_count, "cpu")
    assert _workers_alive()
    _workers._stop_workers()
    assert not _workers_alive()
    # The next call starts its workers again.
    assert [task for _, _, task in on_workers(range(4), _ident_and_count, "cpu")] == [
        0, 1, 2, 3]
    assert _workers_alive()


def test_the_workers_end_before_the_interpreter_does():
    # A worker still alive when the interpreter and torch tore their state down made the
    # process abort now and then ("terminate called without an active exception"). An
    # exit handler registered before the package's runs after it (last in, first out)
    # and sees none left.
    script = (
        "import atexit, threading\n"
        "atexit.register(lambda: print('alive at exit:', sorted(t.name for t in "
        "threading.enumerate() if t.name.startswith('sklearn_nw_worker'))))\n"
        "import numpy as np, torch\n"
        "from sklearn_nw._workers import on_workers\n"
        "torch.set_num_threads(2)\n"
        "print(len(on_workers(range(8), lambda task, state: task, 'cpu')))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["8", "alive at exit: []"]


# -- the engines' chunks on the workers: the bits of the calling thread alone --------------


def _on_one_then_two_threads(compute):
    before = torch.get_num_threads()
    try:
        results = []
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            results.append(compute())
        return results
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_leave_one_out_loss_and_gradient_on_workers_are_the_serial_bits(kernel):
    # Sixteen chunks of rows: their losses and gradients are added in the order of the
    # chunks whichever worker ends first, so the sums round as a loop over them does.
    rng = np.random.default_rng(0)
    x = torch.as_tensor(rng.uniform(size=(2000, 2)))
    v = torch.sin(6 * x[:, :1]) + 0.1 * torch.as_tensor(rng.standard_normal((2000, 1)))
    log_w = torch.zeros(2000, dtype=torch.float64)
    self_log_w = torch.full((2000,), -torch.inf, dtype=torch.float64)

    def compute():
        h = torch.tensor([0.3, 0.5], dtype=torch.float64, requires_grad=True)
        value = loo_loss(x, v, h, get_kernel(kernel), log_w, self_log_w,
                         loss="squared_error", backward=True)
        return value, h.grad.clone()

    (one, grad_one), (two, grad_two) = _on_one_then_two_threads(compute)
    assert one == two
    assert torch.equal(grad_one, grad_two)


def test_support_pairs_on_workers_are_the_serial_bits():
    rng = np.random.default_rng(1)
    n_keys, n_q, r = 50_000, 2_000, 2
    keys = torch.as_tensor(rng.uniform(size=(n_keys, r + 2)))  # coordinates, value, weight
    qs = torch.as_tensor(rng.uniform(size=(n_q, r)))
    lo = torch.as_tensor(rng.integers(0, n_keys - 400, size=(n_q, 1)))
    hi = lo + torch.as_tensor(rng.integers(1, 400, size=(n_q, 1)))
    kernel = get_kernel("epanechnikov")

    def compute():
        return support_pairs_pool(qs, keys, lo, hi, kernel, return_attention=True)

    one, two = _on_one_then_two_threads(compute)
    assert one[1].any() and not one[1].all()  # some queries with no key in reach (NaN)
    for a, b in zip((one[0], one[1], *one[2]), (two[0], two[1], *two[2])):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("kind", ["balloon", "sample_point"])
def test_adaptive_attention_in_blocks_of_rows_is_the_same(kind):
    # Blocks of rows on the workers on two threads, two blocks on one: a row's values do
    # not depend on the block it is computed in.
    rng = np.random.default_rng(2)
    points = torch.as_tensor(rng.uniform(size=(700, 2)))
    D = torch.cdist(points, points)
    W = torch.as_tensor(rng.uniform(0.5, 2.0, size=700))
    W[::50] = 0.0  # inputs that no row attends
    adaptive = Adaptive(kind, 5, 0.6)

    def compute():
        return LeaveOneOutNeighbors(D, W, 5).attention(adaptive, get_kernel("epanechnikov"), 2)

    (one, n_one), (two, n_two) = _on_one_then_two_threads(compute)
    assert n_one == n_two
    assert torch.equal(one, two)
    assert torch.all(one[:, ::50] == 0)
