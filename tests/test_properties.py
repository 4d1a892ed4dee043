"""Properties of Nadaraya-Watson attention, checked with hypothesis on small random problems.

Comparisons between two fits allow for what floating point cannot give:

- compact kernels get bandwidths that keep every point inside the support, so rounding
  differences between the fits cannot move a point across the boundary (the top-hat, which
  jumps there, is only used where that cannot matter);
- translation and weights-versus-repeats use coordinates on a 1/8 grid: with a cluster of
  spread 1e-75 and a query at distance 1 (u ~ 1e75) the log-weights are absorbed into the
  kernel logits, and shifting such a cluster by 5 merges its points.
"""

import warnings

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_nw import (
    EmptyNeighborhoodWarning,
    NadarayaWatsonClassifier,
    NadarayaWatsonRegressor,
)

SETTINGS = settings(max_examples=30, deadline=None, database=None)

SMOOTH = ["gaussian", "exponential"]
COMPACT = ["epanechnikov", "tricube", "cosine", "biweight", "triweight", "linear"]
KERNELS = SMOOTH + COMPACT
RTOL = 1e-9

coordinate = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False, allow_subnormal=False)
grid = st.integers(-24, 24).map(lambda k: k / 8.0)  # exact binary fractions in [-3, 3]
target = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False, allow_subnormal=False)


@st.composite
def problems(draw, kernels=KERNELS, min_n=1, max_n=10, coordinates=coordinate):
    """Training inputs X (n, d), targets y, queries Q, a kernel and a bandwidth vector.

    For a compact kernel the bandwidth exceeds 6 sqrt(d) (the largest possible distance
    between two points of [-3, 3]^d), so every training point is inside every query's
    support; the smooth kernels get any bandwidth in [0.5, 5].
    """
    n = draw(st.integers(min_n, max_n))
    d = draw(st.integers(1, 3))
    X = draw(arrays(np.float64, (n, d), elements=coordinates))
    y = draw(arrays(np.float64, (n,), elements=target))
    Q = draw(arrays(np.float64, (draw(st.integers(1, 5)), d), elements=coordinates))
    kernel = draw(st.sampled_from(kernels))
    if kernel in COMPACT:
        h = 6.0 * np.sqrt(d) * draw(arrays(np.float64, (d,), elements=st.floats(1.05, 3.0)))
    else:
        h = draw(arrays(np.float64, (d,), elements=st.floats(0.5, 5.0)))
    return X, y, Q, kernel, h


@SETTINGS
@given(
    X=arrays(np.float64, st.tuples(st.integers(2, 10), st.just(2)), elements=coordinate),
    Q=arrays(np.float64, st.tuples(st.integers(1, 5), st.just(2)), elements=coordinate),
    kernel=st.sampled_from(KERNELS + ["tophat", "constant"]),
    h=st.floats(1e-3, 10.0),
)
def test_attention_is_a_probability_distribution(X, Q, kernel, h, dense):
    assume(len(np.unique(X, axis=0)) >= 2)  # leave-one-out needs another location
    y = X[:, 0] - 2.0 * X[:, 1]
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        y_pred, A = reg.predict(Q, return_attention=True)
        loo = reg.attention_weights_
    for att, n_rows in ((A, len(Q)), (loo, len(X))):
        att = dense(att)
        assert att.shape == (n_rows, len(X))
        assert np.all(np.isfinite(att))
        assert np.all(att >= 0.0)
        assert_allclose(att.sum(axis=1), 1.0, rtol=1e-12)
    # A point leaves with every copy of itself.
    same_location = (X[:, None, :] == X[None, :, :]).all(-1)  # (n, n)
    assert np.all(dense(loo)[same_location] == 0.0)
    assert_allclose(y_pred, dense(A) @ y, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(problem=problems(min_n=2), data=st.data())
def test_permuting_training_rows_changes_nothing(problem, data, dense):
    X, y, Q, kernel, h = problem
    assume(len(np.unique(X, axis=0)) >= 2)  # for attention_weights_
    perm = np.array(data.draw(st.permutations(range(len(X)))))
    w = data.draw(arrays(np.float64, (len(X),), elements=st.floats(0.5, 3.0)))
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, y, sample_weight=w)
    permuted = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(
        X[perm], y[perm], sample_weight=w[perm])
    y_pred, A = reg.predict(Q, return_attention=True)
    y_perm, A_perm = permuted.predict(Q, return_attention=True)
    r = RTOL
    assert_allclose(y_perm, y_pred, rtol=r, atol=r * (1.0 + np.abs(y).max()))
    # Column k of the permuted fit is training row perm[k] of the original one.
    assert_allclose(dense(A_perm), dense(A)[:, perm], rtol=r, atol=1e-12)
    loo, loo_perm = dense(reg.attention_weights_), dense(permuted.attention_weights_)
    assert_allclose(loo_perm, loo[perm][:, perm], rtol=r, atol=1e-12)


@SETTINGS
@given(problem=problems(min_n=2), data=st.data())
def test_permutation_classifier(problem, data):
    X, _, Q, kernel, h = problem
    labels = data.draw(arrays(np.int64, (len(X),), elements=st.integers(0, 2)))
    perm = np.array(data.draw(st.permutations(range(len(X)))))
    proba = NadarayaWatsonClassifier(kernel=kernel, bandwidth=h).fit(X, labels).predict_proba(Q)
    permuted = NadarayaWatsonClassifier(kernel=kernel, bandwidth=h).fit(X[perm], labels[perm])
    assert_allclose(permuted.predict_proba(Q), proba, rtol=RTOL, atol=RTOL)


@SETTINGS
@given(problem=problems(kernels=SMOOTH + ["epanechnikov", "tricube", "biweight"], coordinates=grid),
       data=st.data())
def test_integer_weights_equal_repeated_rows_regressor(problem, data):
    X, y, Q, kernel, _ = problem
    w = data.draw(arrays(np.int64, (len(X),), elements=st.integers(0, 3)))
    w[data.draw(st.integers(0, len(X) - 1))] += 1  # at least one row is kept
    weighted = NadarayaWatsonRegressor(kernel=kernel, bandwidth="scott")
    repeated = NadarayaWatsonRegressor(kernel=kernel, bandwidth="scott")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        got = weighted.fit(X, y, sample_weight=w).predict(Q)
        expected = repeated.fit(np.repeat(X, w, axis=0), np.repeat(y, w)).predict(Q)
    assert_allclose(weighted.bandwidth_, repeated.bandwidth_, rtol=1e-10)
    r = max(RTOL, 1e-8)
    assert_allclose(got, expected, rtol=r, atol=r * (1.0 + np.abs(y).max()))


@SETTINGS
@given(problem=problems(kernels=SMOOTH + ["epanechnikov", "cosine"], coordinates=grid),
       data=st.data())
def test_integer_weights_equal_repeated_rows_classifier(problem, data):
    X, _, Q, kernel, _ = problem
    labels = data.draw(arrays(np.int64, (len(X),), elements=st.integers(0, 2)))
    w = data.draw(arrays(np.int64, (len(X),), elements=st.integers(0, 3)))
    w[data.draw(st.integers(0, len(X) - 1))] += 1
    weighted = NadarayaWatsonClassifier(kernel=kernel, bandwidth="scott")
    repeated = NadarayaWatsonClassifier(kernel=kernel, bandwidth="scott")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        weighted.fit(X, labels, sample_weight=w)
        repeated.fit(np.repeat(X, w, axis=0), np.repeat(labels, w))
        got, expected = weighted.predict_proba(Q), repeated.predict_proba(Q)
    assert_allclose(weighted.bandwidth_, repeated.bandwidth_, rtol=1e-10)
    # Classes with zero total weight are absent from the repeated fit.
    assert set(repeated.classes_) <= set(weighted.classes_)
    columns = np.searchsorted(weighted.classes_, repeated.classes_)
    r = max(RTOL, 1e-8)
    assert_allclose(got[:, columns], expected, rtol=r, atol=r)
    assert_allclose(got.sum(axis=1), 1.0, rtol=1e-12)


@SETTINGS
@given(problem=problems(coordinates=grid),
       shift=arrays(np.float64, (3,), elements=st.integers(-400, 400).map(lambda k: k / 8.0)))
def test_translation_invariance(problem, shift):
    X, y, Q, kernel, h = problem
    shift = shift[: X.shape[1]]
    y_pred = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, y).predict(Q)
    shifted = (
        NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X + shift, y).predict(Q + shift)
    )
    r = max(RTOL, 1e-9)
    assert_allclose(shifted, y_pred, rtol=r, atol=r * (1.0 + np.abs(y).max()))


@SETTINGS
@given(problem=problems())
def test_float32_agrees_with_float64(problem):
    X, y, Q, kernel, h = problem
    reg64 = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, y)
    reg32 = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X.astype(np.float32), y)
    got = reg32.predict(Q.astype(np.float32))
    assert got.dtype == np.float64  # the targets' dtype; the weights are float32
    assert_allclose(got, reg64.predict(Q), rtol=1e-3, atol=1e-3 * (1.0 + np.abs(y).max()))


@settings(max_examples=25, deadline=None, database=None)
@given(problem=problems(min_n=2, max_n=7))
def test_leave_one_out_equals_explicit_refits(problem, dense):
    X, y, _, kernel, h = problem
    assume(len(np.unique(X, axis=0)) >= 2)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, y)
    loo = dense(reg.attention_weights_) @ y
    for i in range(len(X)):
        keep = ~(X[i] == X).all(1)  # the point and every copy of it
        refit = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X[keep], y[keep])
        assert_allclose(loo[i], refit.predict(X[i : i + 1])[0], rtol=RTOL,
                        atol=RTOL * (1.0 + np.abs(y).max()))


@SETTINGS
@given(problem=problems(min_n=2))
def test_prediction_within_target_range(problem):
    # A convex combination of the targets.
    X, y, Q, kernel, h = problem
    y_pred = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, y).predict(Q)
    slack = 1e-12 * (1.0 + np.abs(y).max())
    assert np.all(y_pred >= y.min() - slack)
    assert np.all(y_pred <= y.max() + slack)
    # Constant targets are reproduced exactly up to rounding.
    const = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, np.full(len(X), 2.5))
    assert_array_equal(np.round(const.predict(Q), 12), 2.5)


@SETTINGS
@given(problem=problems(min_n=1, kernels=COMPACT), scale=st.floats(0.05, 0.5),
       data=st.data())
def test_every_search_of_a_compact_kernel_agrees(problem, scale, data, dense):
    # Bandwidths small enough that supports matter (some queries may have no point in
    # reach and fall back to their nearest points, ties averaged); the kernels are
    # continuous at the support's edge, so rounding there changes nothing.
    X, y, Q, kernel, h = problem
    h = h * scale
    w = data.draw(arrays(np.float64, (len(X),), elements=st.floats(0.5, 3.0)))
    results = []
    for algorithm in ("brute", "kd_tree", "ball_tree", "cell_list"):
        reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h, algorithm=algorithm)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            if algorithm != "brute":  # the searches run from any size when asked for
                reg.fit(X, y, sample_weight=w)
                assert reg.route_ != "dense"
            results.append(reg.fit(X, y, sample_weight=w).predict(Q, return_attention=True))
    (expected, A), others = results[0], results[1:]
    for got, B in others:
        assert_allclose(got, expected, rtol=1e-9, atol=1e-9 * (1.0 + np.abs(y).max()))
        assert_allclose(dense(B), dense(A), rtol=1e-9, atol=1e-12)
