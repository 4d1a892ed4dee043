"""Concurrent use: predictions from several threads leave process-wide settings as found."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from numpy.testing import assert_array_equal

from sklearn_nw import AdaptiveBandwidth, NadarayaWatsonClassifier, NadarayaWatsonRegressor
from sklearn_nw._engine import full_precision
from sklearn_nw.kernels import Kernel


@pytest.fixture
def medium_precision():
    """The user's choice of float32 matmul precision, restored after the test."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    yield
    torch.set_float32_matmul_precision(before)


def _run_together(functions):
    """Run the functions in threads released at once; their results, in order (a
    function's exception is raised here)."""
    barrier = threading.Barrier(len(functions))

    def run(function):
        barrier.wait()
        return function()

    with ThreadPoolExecutor(max_workers=len(functions)) as pool:
        futures = [pool.submit(run, function) for function in functions]
        return [future.result() for future in futures]


@pytest.mark.parametrize("n_threads", [4, 8])
def test_concurrent_predicts_leave_the_users_precision(medium_precision, n_threads):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)).astype(np.float32)
    y = (X[:, 0] + np.sin(X[:, 1])).astype(np.float32)
    Q = rng.normal(size=(300, 3)).astype(np.float32)
    # The eager engine, whose results are the same bits on every call ("auto" may move a
    # configuration to the compiled loop between calls, equal only to rounding).
    models = [
        NadarayaWatsonRegressor(bandwidth=0.5, algorithm="brute", compute="eager").fit(X, y),
        NadarayaWatsonRegressor("epanechnikov", bandwidth=1.5, algorithm="brute",
                                compute="eager").fit(X, y),
        NadarayaWatsonClassifier(bandwidth=0.5, algorithm="brute",
                                 compute="eager").fit(X, y > 0),
    ]
    methods = [m.predict for m in models[:2]] + [models[2].predict_proba]
    expected = [method(Q) for method in methods]
    assert torch.get_float32_matmul_precision() == "medium"
    for trial in range(10):
        calls = [methods[i % len(methods)] for i in range(n_threads)]
        results = _run_together([lambda call=call: call(Q) for call in calls])
        assert torch.get_float32_matmul_precision() == "medium", f"trial {trial}"
        for i, result in enumerate(results):
            assert_array_equal(result, expected[i % len(methods)])


def test_settings_are_held_until_the_last_computation_ends(medium_precision):
    # Two computations that overlap without nesting, as two threads' do: the first to end
    # must not restore the user's setting under the second, nor the second leave "highest".
    first, second = full_precision(), full_precision()
    first.__enter__()
    assert torch.get_float32_matmul_precision() == "highest"
    second.__enter__()
    first.__exit__(None, None, None)
    assert torch.get_float32_matmul_precision() == "highest"
    second.__exit__(None, None, None)
    assert torch.get_float32_matmul_precision() == "medium"


def test_settings_already_highest_are_left_alone():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        with full_precision():
            assert torch.get_float32_matmul_precision() == "highest"
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(before)


class _CountingKernel(Kernel):
    """The Cauchy profile, recording the thread that evaluates it and torch's thread count
    there."""

    def __init__(self):
        self.seen = []

    def log_profile_sq(self, u2):
        self.seen.append((threading.get_ident(), torch.get_num_threads()))
        return -torch.log1p(u2)


def test_small_calls_compute_on_one_thread_and_restore_the_count():
    # Calls too small to share run on the calling thread alone, without OpenMP's barriers:
    # beside a busy process, each parallel region of a one-row predict would wait out a
    # scheduler time slice.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 2))
    model = NadarayaWatsonRegressor(_CountingKernel(), bandwidth=0.3,
                                    compute="eager").fit(X, X[:, 0])
    kernel = model.kernel_  # the fitted copy
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        kernel.seen.clear()
        model.predict(X[:3])  # 15,000 pairs
        assert kernel.seen and set(kernel.seen) == {(threading.get_ident(), 1)}
        assert torch.get_num_threads() == 2
        model.predict(rng.normal(size=(400, 2)))  # 2 x 10^6 pairs: shared by two threads
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_on_workers_keeps_the_order_raises_and_restores_the_count():
    from sklearn_nw._engine import on_workers

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        seen = []

        def run(task, state):
            seen.append((threading.get_ident(), torch.get_num_threads(), state))
            return task * task

        assert on_workers(range(9), run, "cpu", init=list) == [t * t for t in range(9)]
        assert {count for _, count, _ in seen} == {1}  # one torch thread per worker
        assert threading.get_ident() not in {ident for ident, _, _ in seen}
        # Each worker's own state.
        assert len({id(state) for _, _, state in seen}) == len({i for i, _, _ in seen})
        assert torch.get_num_threads() == 2

        def fail(task, _):
            if task == 5:
                raise ValueError("task 5")
            return task

        with pytest.raises(ValueError, match="task 5"):
            on_workers(range(9), fail, "cpu")
        assert torch.get_num_threads() == 2
        # One worker at most: the calling thread.
        seen.clear()
        on_workers(range(3), run, "cpu", max_workers=1)
        assert {ident for ident, _, _ in seen} == {threading.get_ident()}
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("kinds, n", [(["fixed"], 2500), (["balloon", "sample_point"], 700)])
def test_leave_one_out_grids_on_workers_equal_one_thread(kinds, n):
    # The grids' candidates (adaptive) or chunks (fixed, enough of them for two workers
    # at this n) go to worker threads: the same scores as on the calling thread alone.
    from sklearn_nw import NadarayaWatsonClassifierCV, NadarayaWatsonRegressorCV

    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    y = X[:, 0] + 0.3 * rng.normal(size=n)
    before = torch.get_num_threads()
    try:
        results = {}
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            reg = NadarayaWatsonRegressorCV(bandwidth_kinds=kinds, degree=0).fit(X, y)
            clf = NadarayaWatsonClassifierCV(bandwidth_kinds=kinds).fit(X, y > 0)
            results[n_threads] = (reg.cv_results_["mean_test_score"],
                                  clf.cv_results_["mean_test_score"])
            assert torch.get_num_threads() == n_threads
        for one, two in zip(results[1], results[2]):
            np.testing.assert_allclose(one, two, rtol=1e-12)
    finally:
        torch.set_num_threads(before)


def test_local_polynomial_grids_on_workers_equal_one_thread():
    # The local fits of the leave-one-out grid run in blocks of rows on worker threads:
    # the same scores as on the calling thread alone.
    from sklearn_nw import NadarayaWatsonRegressorCV

    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 2))
    y = X[:, 0] ** 2 + 0.3 * rng.normal(size=150)
    before = torch.get_num_threads()
    try:
        scores = {}
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            for degree in (1, 2):
                reg = NadarayaWatsonRegressorCV(bandwidth_kinds=["fixed", "balloon"],
                                                degree=degree).fit(X, y)
                scores[n_threads, degree] = reg.cv_results_["mean_test_score"]
            assert torch.get_num_threads() == n_threads
        for degree in (1, 2):
            np.testing.assert_allclose(scores[1, degree], scores[2, degree], rtol=1e-12)
    finally:
        torch.set_num_threads(before)


_INTERVAL_ROUTES = {
    "dense": {"bandwidth": 0.3},  # the windows of the moves
    "kd_tree": {"bandwidth": 0.3, "kernel": "epanechnikov", "algorithm": "kd_tree"},
    "local_linear": {"bandwidth": 0.4, "degree": 1},
    "local_quadratic_tree": {"bandwidth": 0.5, "degree": 2, "kernel": "tricube"},
    "balloon": {"bandwidth": AdaptiveBandwidth("balloon", n_neighbors=15)},
    "sample_point": {"bandwidth": AdaptiveBandwidth("sample_point", n_neighbors=15)},
}


@pytest.mark.parametrize("route", list(_INTERVAL_ROUTES))
def test_intervals_and_sets_on_workers_equal_one_thread(route):
    # The jackknife+ bounds and the conformal sets of chunks of queries go to worker
    # threads (each chunk's bounds written to its own rows): the same as on the calling
    # thread alone, at two confidence levels, with enough queries for several chunks.
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(400, 2))
    y = np.sin(3 * X[:, 0]) + 0.3 * rng.normal(size=400)
    labels = np.digitize(y, [-0.5, 0.5])
    Q = rng.uniform(-1.1, 1.1, size=(300, 2))
    params = _INTERVAL_ROUTES[route]
    reg = NadarayaWatsonRegressor(**params).fit(X, y)
    clf = (None if "degree" in params
           else NadarayaWatsonClassifier(**params).fit(X, labels))
    before = torch.get_num_threads()
    try:
        results = {}
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            out = [*reg.predict_interval(Q, confidence_level=[0.8, 0.9])]
            if clf is not None:
                for score in ("lac", "aps"):
                    out += clf.predict_set(Q, confidence_level=[0.8, 0.9],
                                           conformity_score=score)
            results[n_threads] = out
            assert torch.get_num_threads() == n_threads
        for one, two in zip(results[1], results[2], strict=True):
            if one.dtype == bool or one.dtype.kind in "OU":
                assert_array_equal(one, two)
            else:
                np.testing.assert_allclose(one, two, rtol=1e-12, atol=1e-12)
    finally:
        torch.set_num_threads(before)
