"""The compiled dense path (compute="compiled"): a loop that torch.compile fuses.

Each configuration (kernel, dtype, number of coordinates and of value columns) compiles once
per process, a few seconds each, so these tests share a few configurations.
"""

import warnings

import numpy as np
import pytest
import torch
from _oracle import PROFILES, nearest_index, nw_class_proba, nw_predict
from numpy.testing import assert_allclose

from sklearn_nw import (
    EmptyNeighborhoodWarning,
    NadarayaWatsonClassifier,
    NadarayaWatsonRegressor,
    _compiled,
)
from sklearn_nw._compiled import CompilePolicy, using_policy
from sklearn_nw.bandwidth import LeaveOneOutBandwidth
from sklearn_nw.kernels import Kernel


def _data(n=150, d=2, n_queries=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, -1]
    w = rng.integers(0, 3, n).astype(float)  # zero weights included
    Q = rng.normal(size=(n_queries, d))
    return X, y, w, Q


@pytest.mark.parametrize("kernel", ["gaussian", "exponential", "epanechnikov", "tophat",
                                    "tricube", "constant"])
def test_compiled_agrees_with_the_oracle(kernel):
    X, y, w, Q = _data()
    h = np.array([0.9, 1.3])
    reg = NadarayaWatsonRegressor(kernel, bandwidth=h, compute="compiled")
    reg.fit(X, y, sample_weight=w)
    expected = nw_predict(Q, X, y, h, PROFILES[kernel], w)
    assert_allclose(reg.predict(Q), expected, rtol=1e-12, atol=1e-14)


def test_float32_accuracy_against_float64():
    X, y, w, Q = _data(n=3000, n_queries=600)  # several chunks, the last one padded
    h = np.array([0.3, 0.4])
    reg32 = NadarayaWatsonRegressor(bandwidth=h, compute="compiled")
    reg32.fit(X.astype(np.float32), y.astype(np.float32), sample_weight=w)
    pred32 = reg32.predict(Q.astype(np.float32))  # float32 weights, float64 targets
    pred64 = NadarayaWatsonRegressor(bandwidth=h).fit(X, y, sample_weight=w).predict(Q)
    assert np.abs(pred32 - pred64).max() < 1e-5


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_classifier_probabilities(kernel):
    X, y, w, Q = _data()
    labels = np.digitize(y, [-0.5, 0.5])  # 3 classes
    h = np.array([0.9, 1.3])
    clf = NadarayaWatsonClassifier(kernel, bandwidth=h, compute="compiled")
    proba = clf.fit(X, labels, sample_weight=w).predict_proba(Q)
    expected = nw_class_proba(Q, X, labels, [0, 1, 2], h, PROFILES[kernel], w)
    assert_allclose(proba, expected, rtol=1e-12, atol=1e-14)
    if kernel == "epanechnikov":  # no attention reaches a class: exactly 0, not a tiny number
        assert np.array_equal(proba == 0, expected == 0) and (expected == 0).any()


def test_memory_is_bounded_by_the_chunk():
    # Run the function eagerly instead of compiling it, recording what it is given: blocks
    # of at most one chunk of queries, and results of that size only.
    shapes = []

    def recording(function):
        def call(*args):
            shapes.append((tuple(args[0].shape), tuple(args[1].shape)))
            out = function(*args)
            shapes[-1] += (tuple(out.shape),)
            return out

        return call

    X, y, w, _ = _data()
    chunk = _compiled.QUERY_CHUNK["cpu"]
    Q = np.random.default_rng(2).normal(size=(2 * chunk + 7, 2))
    h = np.array([0.9, 1.3])
    reg = NadarayaWatsonRegressor(bandwidth=h, compute="compiled").fit(X, y, sample_weight=w)
    with using_policy(CompilePolicy(compile=recording)):
        assert_allclose(reg.predict(Q), nw_predict(Q, X, y, h, PROFILES["gaussian"], w),
                        rtol=1e-12)
    assert shapes == [((chunk, 2), (2, len(X)), (chunk, 2))] * 2 + [((7, 2), (2, len(X)), (7, 2))]
    # One query is sent as two: torch would compile again for a dimension of size 1.
    shapes.clear()
    with using_policy(CompilePolicy(compile=recording)):
        assert_allclose(reg.predict(Q[:1]), nw_predict(Q[:1], X, y, h, PROFILES["gaussian"], w),
                        rtol=1e-12)
    assert shapes == [((2, 2), (2, len(X)), (2, 2))]


def test_underflow_and_empty_support_take_the_careful_path():
    X, y, _, _ = _data()
    Q = X[:5] + 1e-3
    # Gaussian weights of 0 in float64 (|q - x|^2 / h^2 ~ 1e4): the nearest point's value.
    tiny = NadarayaWatsonRegressor(bandwidth=1e-5, compute="compiled").fit(X, y)
    assert_allclose(tiny.predict(Q), y[[nearest_index(q, X) for q in Q]], rtol=1e-12)
    # A compact kernel with no point in reach: the same fallback, with the warning.
    far = np.array([[50.0, 50.0]])
    compact = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.5, compute="compiled")
    with pytest.warns(EmptyNeighborhoodWarning):
        got = compact.fit(X, y).predict(far)
    assert_allclose(got, [y[nearest_index(far[0], X)]])


def test_learned_metric_and_many_outputs():
    X, y, w, Q = _data(d=3)
    # A learned low-rank projection: distances in 1 coordinate.
    full = NadarayaWatsonRegressor(
        bandwidth=LeaveOneOutBandwidth("full", n_components=1), compute="compiled"
    ).fit(X, y)
    brute = NadarayaWatsonRegressor(bandwidth=full.bandwidth, compute="eager").fit(X, y)
    assert full.projection_.shape == (3, 1)
    assert_allclose(full.predict(Q), brute.predict(Q), rtol=1e-12)
    # More value columns than the fused reductions take: one matrix product per chunk.
    Y = np.column_stack([np.sin(k * X[:, 0]) for k in range(20)])
    h = np.array([0.9, 1.3, 0.7])
    many = NadarayaWatsonRegressor(bandwidth=h, compute="compiled").fit(X, Y, sample_weight=w)
    expected = nw_predict(Q, X, Y, h, PROFILES["gaussian"], w)
    assert_allclose(many.predict(Q), expected, rtol=1e-12, atol=1e-14)


def test_precision_far_from_the_origin():
    # Explicit differences of centered coordinates: a shift of 1e6 costs only the rounding of
    # the shifted inputs themselves.
    X, y, _, Q = _data(d=5)
    reg = NadarayaWatsonRegressor("epanechnikov", bandwidth=2.5, compute="compiled")
    expected = reg.fit(X, y).predict(Q)
    assert_allclose(reg.fit(X + 1e6, y).predict(Q + 1e6), expected, atol=1e-8)


@pytest.mark.parametrize("params, named", [
    ({"n_neighbors": 3}, "n_neighbors=3"),
    ({"kernel": "epanechnikov", "algorithm": "kd_tree"}, "algorithm='kd_tree'"),
    ({"metric": "precomputed", "bandwidth": 1.0}, "metric='precomputed'"),
])
def test_compiled_refuses_restricted_attention(params, named):
    X, y, _, _ = _data()
    with pytest.raises(ValueError, match=f"compute='compiled'.*{named}"):
        NadarayaWatsonRegressor(compute="compiled", **params).fit(X, y)


def test_attention_and_leave_one_out_stay_on_the_eager_engine():
    X, y, w, Q = _data()
    reg = NadarayaWatsonRegressor(bandwidth=0.8, compute="compiled").fit(X, y, sample_weight=w)
    pred, attention = reg.predict(Q, return_attention=True)
    assert attention.shape == (len(Q), len(X))
    assert_allclose(pred, reg.predict(Q), rtol=1e-12)


class _UserGaussian(Kernel):
    def log_profile_sq(self, u2):
        return -0.5 * u2


class _CountingPolicy(CompilePolicy):
    """A compile policy that counts the calls of the compiled loop."""

    calls = 0

    def sums(self, *args, **kwargs):
        self.calls += 1
        return super().sums(*args, **kwargs)


def test_auto_compiles_once_eager_time_reaches_the_compile_time():
    policy = _CountingPolicy(compile_seconds=1e9)
    with using_policy(policy):
        _check_auto_compiles(policy, spy=policy)


def _check_auto_compiles(policy, spy):
    X, y, w, _ = _data()
    chunk = _compiled.QUERY_CHUNK["cpu"]
    Q = np.random.default_rng(1).normal(size=(chunk, 2))
    reg = NadarayaWatsonRegressor(bandwidth=0.8).fit(X, y, sample_weight=w)
    expected = reg.predict(Q)
    reg.predict(Q)
    assert spy.calls == 0
    # Each eager call of the configuration is counted: its time and its pairs.
    key = _compiled.config_key(reg.kernel_, torch.float64, "cpu", 2, 2)
    seconds, pairs = policy.eager[key]
    assert pairs == 2 * chunk * len(X) and seconds > 0
    # Once that time, and the next call's at the same rate, reaches a compile's: compiled.
    policy.compile_seconds = 1.5 * seconds
    assert_allclose(reg.predict(Q), expected, rtol=1e-12)
    assert spy.calls == 1
    reg.predict(Q)
    assert spy.calls == 2  # compiled: used from now on
    reg.predict(Q[:10])
    assert spy.calls == 2  # but not for calls smaller than a chunk
    # Compiled calls are timed too (not the one that compiled): once the loop is slower
    # per pair than the eager engine (made to look very fast here), "auto" leaves it.
    assert policy.timed[key][1] == chunk * len(X)
    policy.eager[key] = (1e-30, 10**12)
    assert_allclose(reg.predict(Q), expected, rtol=1e-12)
    assert spy.calls == 2
    # Other configurations keep their own account; user kernels and compute="eager" never.
    NadarayaWatsonRegressor(bandwidth=0.8).fit(X, np.column_stack([y, y])).predict(Q)
    NadarayaWatsonRegressor(_UserGaussian(), bandwidth=0.8).fit(X, y).predict(Q)
    NadarayaWatsonRegressor(bandwidth=0.8, compute="eager").fit(X, y).predict(Q)
    assert spy.calls == 2
    # A first call that is estimated to take longer than a compile compiles at once.
    policy.eager_rate = 1.0
    NadarayaWatsonRegressor(bandwidth=0.8).fit(X, np.column_stack([y, y, y])).predict(Q)
    assert spy.calls == 3


def _broken(function):
    """A compile that fails at the first call, as a missing C++ compiler does."""

    def call(*args):
        raise RuntimeError("no C++ compiler")

    return call


def _refusing(function):
    """A torch.compile that refuses at once, as on a Python that Dynamo does not support."""
    raise RuntimeError("Dynamo is not supported on this Python")


@pytest.mark.parametrize("compile_, message", [(_broken, "no C.. compiler"),
                                               (_refusing, "Dynamo is not supported")])
def test_compile_failure(compile_, message):
    X, y, _, Q = _data()
    forced = NadarayaWatsonRegressor(bandwidth=0.8, compute="compiled").fit(X, y)
    with using_policy(CompilePolicy(compile=compile_)):
        with pytest.raises(_compiled.CompileError, match=message):
            forced.predict(Q)
        with pytest.raises(_compiled.CompileError, match=message):  # remembered, not retried
            forced.predict(Q)
    # "auto" (which compiles for calls of a chunk or more) warns once and stays eager.
    Q = np.random.default_rng(3).normal(size=(_compiled.QUERY_CHUNK["cpu"], 2))
    auto = NadarayaWatsonRegressor(bandwidth=0.8).fit(X, y)
    with using_policy(CompilePolicy(compile_seconds=0.0, compile=compile_)):
        with pytest.warns(UserWarning, match="eager engine"):
            got = auto.predict(Q)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert_allclose(auto.predict(Q), got)
    assert_allclose(got, nw_predict(Q, X, y, [0.8, 0.8], PROFILES["gaussian"]), rtol=1e-12)


# -- the cache of compiled configurations ----------------------------------------------------


class _Scaled(Kernel):
    """A Gaussian of width ``scale``, with a repr that hides the parameter."""

    def __init__(self, scale=1.0, table=None):
        self.scale = scale
        self.table = table

    def log_profile_sq(self, u2):
        return -0.5 * u2 / self.scale**2

    def __repr__(self):
        return "_Scaled()"


def test_config_key_follows_the_class_and_the_parameters_not_the_repr():
    def key(kernel):
        return _compiled.config_key(kernel, torch.float64, "cpu", 2, 2)

    # Equal parameters (a clone, as every fit makes) share a key; unhashable ones included.
    table = np.arange(3.0)
    assert key(_Scaled(2.0, table)) == key(_Scaled(2.0, table.copy()))
    assert key(_Scaled(2.0, [1, [2]])) == key(_Scaled(2.0, [1, [2]]))
    # Other parameters, or another class of the same name and text, do not.
    assert key(_Scaled(2.0)) != key(_Scaled(3.0))
    assert key(_Scaled(2.0, table)) != key(_Scaled(2.0, table + 1))

    class Bump(Kernel):
        def log_profile_sq(self, u2):
            return -u2

    first = Bump()

    class Bump(Kernel):  # the same name, as a notebook cell run again defines it
        def log_profile_sq(self, u2):
            return -2.0 * u2

    assert repr(first) == repr(Bump())
    assert key(first) != key(Bump())
    hash(key(_Scaled(2.0, table)))  # a dictionary key


def test_a_redefined_kernel_class_is_compiled_anew():
    # A notebook cell that defines a kernel class, edited and run again: the same name and
    # repr, another profile. The second fit must not run the first class's compiled loop.
    with using_policy(CompilePolicy()) as policy:
        _check_redefined_kernel(policy)


def _check_redefined_kernel(policy):
    X, y, _, Q = _data(n=20, d=1, n_queries=5)

    class Bump(Kernel):
        def log_profile_sq(self, u2):
            return -0.5 * u2

    NadarayaWatsonRegressor(Bump(), bandwidth=0.5, compute="compiled").fit(X, y).predict(Q)

    class Bump(Kernel):  # the cell edited and run again
        def log_profile_sq(self, u2):
            return -2.0 * u2 * u2

    got = NadarayaWatsonRegressor(Bump(), bandwidth=0.5, compute="compiled").fit(X, y)
    expected = NadarayaWatsonRegressor(Bump(), bandwidth=0.5, compute="eager").fit(X, y)
    assert_allclose(got.predict(Q), expected.predict(Q), rtol=1e-12)
    assert len(policy.compiled) == 2


class _CompilableUserGaussian(_UserGaussian):
    compilable = True


def test_whether_auto_may_compile_is_a_kernel_capability():
    X, y, _, _ = _data()
    device = torch.device("cpu")
    for kernel, expected in [("gaussian", True), ("tricube", True), (_UserGaussian(), False),
                             (_CompilableUserGaussian(), True),
                             (lambda u: torch.exp(-u), False)]:
        reg = NadarayaWatsonRegressor(kernel, bandwidth=0.8).fit(X, y)
        keys = reg.key_set_
        assert (keys.route.compile_key(keys, device) is not None) == expected, kernel
