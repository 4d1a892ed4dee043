"""Fixtures shared by the test modules.

Warnings: setup.cfg turns the package's own warnings (and scikit-learn's
ConvergenceWarning) into errors, so a test that provokes one asserts it with
``pytest.warns``, or filters it where it is a by-product of what the test checks.
"""

import os

import pytest
import scipy.sparse as sp
import threadpoolctl
import torch


def _dense(A):
    return A.toarray() if sp.issparse(A) else A


@pytest.fixture(scope="session")
def dense():
    """A function that returns an attention matrix (or any matrix) as a dense array,
    whether the estimator returned it sparse (compact kernels, k nearest) or dense.

    Session-scoped, so hypothesis tests may take it too."""
    return _dense


@pytest.fixture
def pyplot():
    """matplotlib.pyplot on the Agg backend (skips without matplotlib); the figures the
    test opened are closed after it."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


@pytest.fixture(scope="session")
def local_cluster():
    """A function that starts a ``distributed.LocalCluster`` (keyword arguments passed on)
    without a dashboard, its scheduler's HTTP server on a free local port: given no address,
    distributed binds port 8787, and warns (leaking a socket) when another cluster holds
    it."""
    distributed = pytest.importorskip("distributed")

    def start(**kwargs):
        return distributed.LocalCluster(
            dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            **kwargs)

    return start


def pytest_configure(config):
    """Under pytest-xdist, each worker computes on its share of the cores (torch's
    threads, and the OpenMP and BLAS pools of scikit-learn and numpy, e.g. a gallery
    example's HistGradientBoosting): workers that each start a team of threads as wide
    as the machine would take turns on every core, each parallel region waiting for a
    thread descheduled by another worker. Tests of the thread settings set their own
    counts."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        share = max(1, torch.get_num_threads() // int(workers))
        torch.set_num_threads(share)
        threadpoolctl.threadpool_limits(limits=share)  # kept for the session


# The files that take longest (seconds of one run on 2 cores, measured with --durations=0:
# test_common 120, test_dask 100, test_benchmarks 120, test_docs 25), first. `make test`
# runs whole files on each pytest-xdist worker (--dist loadfile) in this order
# (--no-loadscope-reorder): a worker takes the next file when it is done, so the long files
# start first and the short ones even out the end. The Dask and benchmark files start
# processes of their own (clusters, fresh interpreters, a busy process): listed one after
# the other, one worker takes both in turn, and they never run beside each other.
LONGEST_FIRST = ("test_common.py", "test_dask.py", "test_benchmarks.py", "test_docs.py",
                 "test_cv_memory.py", "test_local_poly.py", "test_uncertainty.py")


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file, and among the others, holds
