"""Adaptive bandwidths: k-nearest-neighbor equivalence, the slow oracle, exact
leave-one-out against explicit refits, and the CV estimators' choice among kinds."""

import warnings

import numpy as np
import pytest
from _oracle import PROFILES, adaptive_weights, kth_distance
from numpy.testing import assert_allclose
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

from sklearn_nw import (
    AdaptiveBandwidth,
    EmptyNeighborhoodWarning,
    LocalFitWarning,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw._adaptive import smallest_sorted
from sklearn_nw.kernels import KERNELS

KINDS = ("balloon", "sample_point")
JUST_ABOVE_ONE = 1 + 1e-9


def _data(n=60, d=2, seed=0, grid=None):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    if grid:  # coordinates on a grid: many tied distances
        X = np.round(X * grid) / grid
    y = np.sin(4 * X[:, 0]) + X[:, -1] + 0.1 * rng.standard_normal(n)
    return X, y


# -- k nearest neighbors ------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 4, 13])
@pytest.mark.parametrize("algorithm", ["auto", "brute", "ball_tree"])
def test_tophat_balloon_is_k_nearest_neighbors(k, algorithm):
    X, y = _data(80, 3)
    Xq = np.random.default_rng(1).uniform(size=(40, 3))
    bandwidth = AdaptiveBandwidth(n_neighbors=k, scale=JUST_ABOVE_ONE, base=1.0)
    reg = NadarayaWatsonRegressor("tophat", bandwidth=bandwidth, algorithm=algorithm).fit(X, y)
    knn = KNeighborsRegressor(n_neighbors=k).fit(X, y)
    np.testing.assert_allclose(reg.predict(Xq), knn.predict(Xq), rtol=1e-12)
    # Training points are their own first neighbor, for both.
    np.testing.assert_allclose(reg.predict(X), knn.predict(X), rtol=1e-12)
    labels = (y > np.median(y)).astype(int) + (y > np.quantile(y, 0.8))
    clf = NadarayaWatsonClassifier("tophat", bandwidth=bandwidth).fit(X, labels)
    proba = KNeighborsClassifier(n_neighbors=k).fit(X, labels).predict_proba(Xq)
    np.testing.assert_array_equal(clf.predict_proba(Xq) == 0, proba == 0)
    np.testing.assert_allclose(clf.predict_proba(Xq), proba, rtol=1e-12)


def test_tophat_balloon_with_ties_averages_every_tied_point():
    # Grid coordinates: many queries have several training points at the k-th distance.
    # scikit-learn keeps some of them (its choice depends on the order of the rows); the
    # balloon gives each the same weight, which is KNeighborsRegressor with every point
    # within the k-th distance.
    X, y = _data(120, 2, grid=4)
    Xq = _data(60, 2, seed=3, grid=4)[0]
    k = 5
    reg = NadarayaWatsonRegressor(
        "tophat", bandwidth=AdaptiveBandwidth(n_neighbors=k, scale=JUST_ABOVE_ONE, base=1.0),
    ).fit(X, y)
    predictions = reg.predict(Xq)
    n_tied = 0
    for q, prediction in zip(Xq, predictions):
        distances = np.sqrt(((X - q) ** 2).sum(1))
        m = int(np.sum(distances <= np.sort(distances)[k - 1]))
        n_tied += m > k
        expected = KNeighborsRegressor(n_neighbors=m).fit(X, y).predict(q[None])[0]
        assert prediction == pytest.approx(expected, rel=1e-12)
        if m == k:
            knn = KNeighborsRegressor(n_neighbors=k).fit(X, y).predict(q[None])[0]
            assert prediction == pytest.approx(knn, rel=1e-12)
    assert n_tied > 10  # the data do have ties at the k-th distance


def test_integer_weights_count_as_repeated_rows():
    X, y = _data(40, 2)
    w = np.random.default_rng(2).integers(1, 4, len(y))
    Xq = _data(20, 2, seed=5)[0]
    for kind in KINDS:
        bandwidth = AdaptiveBandwidth(kind, n_neighbors=6, scale=0.7)
        weighted = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(X, y, sample_weight=w)
        repeated = NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(
            kind, n_neighbors=6, scale=0.7, base=weighted.bandwidth_)).fit(
            np.repeat(X, w, axis=0), np.repeat(y, w))
        np.testing.assert_allclose(weighted.predict(Xq), repeated.predict(Xq), rtol=1e-12)
    # The top-hat balloon on repeated rows is KNN on them (distinct points: no ties).
    tophat = NadarayaWatsonRegressor("tophat", bandwidth=AdaptiveBandwidth(
        n_neighbors=7, scale=JUST_ABOVE_ONE, base=1.0)).fit(X, y, sample_weight=w)
    knn = KNeighborsRegressor(n_neighbors=7).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    # KNN may split a repeated point at the k-th rank; only where it does not compare.
    kept = [i for i, q in enumerate(Xq)
            if _units_at_kth(X, w, q, 7) == 7]
    assert len(kept) > 5
    np.testing.assert_allclose(tophat.predict(Xq[kept]), knn.predict(Xq[kept]), rtol=1e-12)


def _units_at_kth(X, w, q, k):
    """Units of weight within the k-th (repeated-rows) distance of q."""
    distances = np.sqrt(((X - q) ** 2).sum(1))
    kth = kth_distance(q, X, np.ones(X.shape[1]), k, w)
    return w[distances <= kth].sum()


# -- the slow oracle -----------------------------------------------------------------------


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("kind", KINDS)
def test_every_kernel_matches_the_oracle(kernel, kind, dense):
    X, y = _data(30, 2)
    Xq = _data(12, 2, seed=7)[0]
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(y))
    w[3] = 0.0
    h = np.array([0.3, 0.6])
    reg = NadarayaWatsonRegressor(kernel, bandwidth=AdaptiveBandwidth(
        kind, n_neighbors=4, scale=1.3, base=h))
    with warnings.catch_warnings():
        # Compact kernels: queries with no one in reach.
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        reg.fit(X, y, sample_weight=w)
        prediction, attention = reg.predict(Xq, return_attention=True)
    expected = adaptive_weights(Xq, X, h, PROFILES[kernel], kind, 4, 1.3, w)
    np.testing.assert_allclose(dense(attention), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(prediction, expected @ y, rtol=1e-9)
    if kind == "sample_point":
        key_h = [1.3 * kth_distance(x, X, h, 4, w, skip_location=True) for x in X]
        np.testing.assert_allclose(reg.key_bandwidths_, key_h, rtol=1e-12)
    assert reg.bandwidth_kind_ == kind
    assert (reg.bandwidth_neighbors_, reg.bandwidth_scale_) == (4, 1.3)
    assert reg.route_ == "adaptive"


def test_multi_output_and_classifier_match_the_oracle():
    X, y = _data(40, 2)
    Y = np.column_stack([y, y**2])
    Xq = _data(10, 2, seed=8)[0]
    bandwidth = AdaptiveBandwidth("sample_point", n_neighbors=5, scale=0.8, base=1.0)
    expected = adaptive_weights(Xq, X, np.ones(2), PROFILES["gaussian"], "sample_point", 5,
                                0.8)
    reg = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(X, Y)
    np.testing.assert_allclose(reg.predict(Xq), expected @ Y, rtol=1e-9)
    labels = np.array(["a", "b", "c"])[(y > 0.5).astype(int) + (y > 1.2)]
    clf = NadarayaWatsonClassifier(bandwidth=bandwidth).fit(X, labels)
    onehot = (labels[:, None] == clf.classes_).astype(float)
    np.testing.assert_allclose(clf.predict_proba(Xq), expected @ onehot, rtol=1e-9)


# -- exact leave-one-out --------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tophat", "exponential"])
@pytest.mark.parametrize("kind", KINDS)
def test_leave_one_out_equals_refitting_without_the_point(kernel, kind, dense):
    # Duplicated inputs, integer and zero weights: each location leaves with every copy.
    X, y = _data(36, 2, grid=10)
    X[5], X[9] = X[3], X[3]
    w = np.random.default_rng(6).integers(1, 4, len(y)).astype(float)
    w[7] = 0.0
    bandwidth = AdaptiveBandwidth(kind, n_neighbors=5, scale=JUST_ABOVE_ONE, base=1.0)
    with warnings.catch_warnings():
        # Compact kernels: rows left out with no one else in reach.
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        model = NadarayaWatsonRegressor(kernel, bandwidth=bandwidth).fit(X, y, w)
        attention = dense(model.attention_weights_)
        for i in range(len(y)):
            out = ~np.all(X == X[i], axis=1)
            refit = NadarayaWatsonRegressor(kernel, bandwidth=bandwidth).fit(
                X[out], y[out], w[out])
            _, row = refit.predict(X[i:i + 1], return_attention=True)
            expected = np.zeros(len(y))
            expected[out] = dense(row)[0]
            np.testing.assert_allclose(attention[i], expected, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_local_linear_leave_one_out_equals_refits(kind):
    X, y = _data(40, 1)
    bandwidth = AdaptiveBandwidth(kind, n_neighbors=6, scale=1.5)
    model = NadarayaWatsonRegressor(bandwidth=bandwidth, degree=1).fit(X, y)
    loo = model.attention_weights_ @ y
    refits = [NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(
        kind, n_neighbors=6, scale=1.5, base=model.bandwidth_), degree=1).fit(
        np.delete(X, i, 0), np.delete(y, i)).predict(X[i:i + 1])[0] for i in range(len(y))]
    np.testing.assert_allclose(loo, refits, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_cv_leave_one_out_scores_are_those_of_refits(kind):
    X, y = _data(30, 2)
    cv = NadarayaWatsonRegressorCV(bandwidth_kinds=[kind], degree=0).fit(X, y)
    results = cv.cv_results_
    for i in (0, 7, len(results["kind"]) - 1):
        bandwidth = AdaptiveBandwidth(kind, n_neighbors=int(results["n_neighbors"][i]),
                                      scale=float(results["scale"][i]),
                                      base=cv.bandwidths_[i])
        loo = [NadarayaWatsonRegressor(bandwidth=bandwidth).fit(
            np.delete(X, j, 0), np.delete(y, j)).predict(X[j:j + 1])[0]
            for j in range(len(y))]
        mse = np.mean((np.array(loo) - y) ** 2)
        assert results["mean_test_score"][i] == pytest.approx(-mse, rel=1e-9)
    best = cv.best_index_
    assert cv.best_params_ == {"bandwidth": cv.bandwidth_, "kind": kind,
                               "n_neighbors": results["n_neighbors"][best],
                               "scale": results["scale"][best], "degree": 0}


@pytest.mark.parametrize("kind", KINDS)
def test_cv_scores_of_a_compact_kernel_fall_back_as_refits_do(kind):
    # At scale "auto" a compact kernel's support ends at the k-th neighbor: with k = 1 no
    # other input carries weight, and the row takes its nearest input(s), as a refit
    # without it predicts (not a uniform average of every input).
    X, y = _data(30, 2)
    cv = NadarayaWatsonRegressorCV(kernel="epanechnikov", bandwidth_kinds=[kind],
                                   degree=0).fit(X, y)
    results = cv.cv_results_
    assert 1 in set(results["n_neighbors"].compressed())
    for i in range(len(results["kind"])):
        bandwidth = AdaptiveBandwidth(kind, n_neighbors=int(results["n_neighbors"][i]),
                                      scale=float(results["scale"][i]),
                                      base=cv.bandwidths_[i])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            loo = [NadarayaWatsonRegressor("epanechnikov", bandwidth=bandwidth).fit(
                np.delete(X, j, 0), np.delete(y, j)).predict(X[j:j + 1])[0]
                for j in range(len(y))]
        mse = np.mean((np.array(loo) - y) ** 2)
        assert results["mean_test_score"][i] == pytest.approx(-mse, rel=1e-9), i


# -- the CV estimators' choice ----------------------------------------------------------------


def test_default_cv_searches_every_kind_and_says_which_won():
    X, y = _data(120, 2)
    reg = NadarayaWatsonRegressorCV().fit(X, y)
    kinds = reg.cv_results_["kind"]
    assert set(kinds) == {"fixed", "balloon", "sample_point"}
    assert np.ma.is_masked(reg.cv_results_["n_neighbors"][kinds == "fixed"][0])
    assert reg.best_params_["kind"] == reg.bandwidth_kind_ == kinds[reg.best_index_]
    assert reg.cv_results_["rank_test_score"].min() == 1
    labels = (y > np.median(y)).astype(int)
    clf = NadarayaWatsonClassifierCV().fit(X, labels)
    assert set(clf.cv_results_["kind"]) == {"fixed", "balloon", "sample_point"}
    # The classifier's default leave-one-out score is the negative log-loss: here better
    # than a coin's.
    assert -np.log(2) < clf.best_score_ < 0


def test_adaptive_candidates_reach_a_small_optimum():
    # Dense where y varies fast, sparse where it is flat: a k-nearest bandwidth wins, and
    # its best scale lies below the initial candidates.
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.uniform(0, 1, 300), rng.uniform(1, 10, 60)])[:, None]
    y = np.where(X[:, 0] < 1, np.sin(40 * X[:, 0]), 0.0) + 0.05 * rng.standard_normal(360)
    reg = NadarayaWatsonRegressorCV(bandwidth_kinds=["balloon"]).fit(X, y)
    assert reg.bandwidth_kind_ == "balloon"
    best = reg.cv_results_["scale"][reg.best_index_]
    scales = reg.cv_results_["scale"]
    assert scales.min() < best < scales.max()  # an interior point, after extending


def _extended_past_the_grid(reg, kind):
    """Whether the cv_results_ of an adaptive ``kind`` hold a k or c off the base grid."""
    of_kind = reg.cv_results_["kind"] == kind
    ks = np.asarray(reg.cv_results_["n_neighbors"][of_kind])
    scales = np.asarray(reg.cv_results_["scale"][of_kind])
    return bool((ks > 64).any() or not set(scales) <= {0.25, 0.5, 1.0})


def _best_of(reg, kind):
    return reg.cv_results_["mean_test_score"][reg.cv_results_["kind"] == kind].max()


def test_an_adaptive_family_goes_past_its_grid_only_while_it_leads():
    # A smooth target on a normal sample: the fixed bandwidths win, and each adaptive
    # family's best lies at its largest k (alone, it walks on towards k = n).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(300)
    alone = NadarayaWatsonRegressorCV(degree=0, bandwidth_kinds=["balloon"]).fit(X, y)
    assert _extended_past_the_grid(alone, "balloon")
    reg = NadarayaWatsonRegressorCV(degree=0).fit(X, y)
    for kind in ("balloon", "sample_point"):
        assert _best_of(reg, kind) < _best_of(reg, "fixed")
        assert not _extended_past_the_grid(reg, kind)
    # Dense and sparse parts: the balloon beats the fixed bandwidths with its best at the
    # largest c, and goes past it; the sample point, at its largest c too, trails the
    # balloon and stops there.
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 0.05, 250), rng.standard_cauchy(50)])[:, None]
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(300)
    reg = NadarayaWatsonRegressorCV(degree=0).fit(X, y)
    assert _best_of(reg, "fixed") < _best_of(reg, "sample_point") < _best_of(reg, "balloon")
    assert _extended_past_the_grid(reg, "balloon")
    assert not _extended_past_the_grid(reg, "sample_point")
    sample_point = reg.cv_results_["kind"] == "sample_point"
    best = np.argmax(np.where(sample_point, reg.cv_results_["mean_test_score"], -np.inf))
    assert reg.cv_results_["scale"][best] == 1.0  # an edge it would have gone past


def test_cv_with_a_splitter_searches_adaptive_kinds_with_gridsearchcv():
    X, y = _data(60, 2)
    # The smallest bandwidths leave some degree-1 split fits singular: said once.
    with pytest.warns(LocalFitWarning, match="such warnings from the candidates' fits"):
        reg = NadarayaWatsonRegressorCV(bandwidth_kinds=["fixed", "balloon"], cv=3).fit(X, y)
    assert {"fixed", "balloon"} == set(reg.cv_results_["kind"])
    assert "split2_test_score" in reg.cv_results_
    reg.predict(X[:3])


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("params, match", [
    ({"kind": "knn"}, "kind"),
    ({"n_neighbors": 0}, "n_neighbors"),
    ({"scale": -1.0}, "scale"),
    ({"scale": float("inf")}, "scale"),
    ({"base": "median"}, "base"),
])
def test_bad_adaptive_parameters(params, match):
    X, y = _data(20, 2)
    with pytest.raises(ValueError, match=match):
        NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(**params)).fit(X, y)


def test_too_few_neighbors_is_an_error_naming_them():
    # n_neighbors is capped at what the training set holds, but not below one unit of
    # weight (see test_n_neighbors_beyond_the_training_set_is_capped).
    X, y = _data(6, 2)
    with pytest.raises(ValueError, match="n_neighbors=1 needs k units.* only 0.6"):
        NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(n_neighbors=9)).fit(
            X, y, np.full(6, 0.1))
    with pytest.raises(ValueError, match="n_neighbors=1 needs k units.* other locations"):
        NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth("sample_point", n_neighbors=6)).fit(
            np.repeat(X[:1], 6, axis=0), y)


@pytest.mark.parametrize("params", [
    {"n_neighbors": 3}, {"compute": "compiled"}, {"algorithm": "cell_list"},
    {"metric": "precomputed"},
])
def test_adaptive_refuses_what_it_cannot_serve(params):
    X, y = _data(20, 2)
    with pytest.raises(ValueError, match="AdaptiveBandwidth"):
        NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(), **params).fit(X, y)


def test_cv_refuses_adaptive_kinds_with_n_neighbors_and_unknown_kinds():
    X, y = _data(20, 2)
    with pytest.raises(ValueError, match="searches adaptive bandwidths"):
        NadarayaWatsonRegressorCV(bandwidth_kinds=["balloon"], n_neighbors=3).fit(X, y)
    with pytest.raises(ValueError, match="bandwidth_kinds must be"):
        NadarayaWatsonRegressorCV(bandwidth_kinds=["ballon"]).fit(X, y)
    # "auto" with n_neighbors searches fixed bandwidths only.
    reg = NadarayaWatsonRegressorCV(n_neighbors=3).fit(X, y)
    assert reg.bandwidth_kind_ == "fixed" and "kind" not in reg.cv_results_


def test_learned_base_with_degree_is_the_local_fits_learned_bandwidth():
    X, y = _data(40, 2)
    adaptive = NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(base="loo"), degree=1)
    learned = NadarayaWatsonRegressor(bandwidth="loo", degree=1).fit(X, y).bandwidth_
    assert_allclose(adaptive.fit(X, y).bandwidth_, learned, rtol=1e-12)
    constant = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y).bandwidth_
    assert not np.allclose(learned, constant, rtol=1e-3)


def test_compact_kernel_attention_is_sparse_and_gaussian_dense():
    X, y = _data(50, 2)
    for kernel, sparse in (("epanechnikov", True), ("gaussian", False)):
        reg = NadarayaWatsonRegressor(kernel, bandwidth=AdaptiveBandwidth(n_neighbors=5)).fit(
            X, y)
        _, attention = reg.predict(X[:4], return_attention=True)
        assert hasattr(attention, "toarray") is sparse
        assert hasattr(reg.attention_weights_, "toarray") is sparse


# -- k capped at what the training set holds (issue 24, item 14) ---------------------------


def _neighbors_held(X, sample_weight, kind):
    """The documented cap, written out: the weight left when the heaviest location
    (balloon), or the two heaviest (sample-point), are left out; at least 1."""
    locations = {}
    for x, w in zip(map(tuple, X), sample_weight):
        locations[x] = locations.get(x, 0.0) + w
    heaviest = sorted(locations.values(), reverse=True)
    left_out = heaviest[0] + (heaviest[1] if kind == "sample_point" else 0.0)
    return max(1, int(np.floor(sum(sample_weight) - left_out + 1e-9)))


@pytest.mark.parametrize("kind", KINDS)
def test_n_neighbors_beyond_the_training_set_is_capped(kind):
    X, y = _data(10, 2, seed=3)
    X[7] = X[2]  # one location of two rows
    w = np.array([1, 2, 1, 1, 3, 1, 1, 1, 1, 1], dtype=float)
    k = _neighbors_held(X, w, kind)
    assert k == {"balloon": 10, "sample_point": 8}[kind]  # 13 units; locations of 3, 2, 2
    bandwidth = AdaptiveBandwidth(kind, n_neighbors=50, scale=0.7, base=1.0)
    reg = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(X, y, w)
    assert reg.bandwidth_neighbors_ == k
    assert bandwidth.n_neighbors == 50  # the parameter is not overwritten
    Q = np.random.default_rng(4).uniform(size=(15, 2))
    expected = adaptive_weights(Q, X, np.ones(2), PROFILES["gaussian"], kind, k, 0.7, w) @ y
    assert_allclose(reg.predict(Q), expected, rtol=1e-10)
    # Leave-one-out keeps that k (a refit on fewer rows would cap it lower): each
    # location left out, the oracle on the other rows.
    loo = reg.attention_weights_ @ y
    for i in range(len(y)):
        out = ~np.all(X == X[i], axis=1)
        if kind == "balloon":  # (the oracle would also find every key's d_k)
            h = 0.7 * kth_distance(X[i], X[out], np.ones(2), k, w[out])
            u = np.linalg.norm(X[out] - X[i], axis=1) / h
            weights = w[out] * np.exp(-u * u / 2)
            weights = weights[None] / weights.sum()
        else:
            weights = adaptive_weights(X[i:i + 1], X[out], np.ones(2),
                                       PROFILES["gaussian"], kind, k, 0.7, w[out])
        assert_allclose(loo[i], (weights @ y[out])[0], rtol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_n_neighbors_within_the_training_set_is_kept(kind):
    X, y = _data(10, 2, seed=3)
    reg = NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(kind, n_neighbors=4)).fit(X, y)
    assert reg.bandwidth_neighbors_ == 4


# -- Issue 24, second round: a training row whose distances overflow (item 13) ------------


@pytest.mark.parametrize("kind", KINDS)
def test_leave_one_out_with_a_row_whose_distances_overflow(kind):
    n = 50  # the oracle below is cubic in it
    X, y = _data(n, 1, seed=5)
    X[0] = 1e160  # its distances to the others overflow float64
    reg = NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(kind, scale=1.0, base=0.1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        attention = reg.fit(X, y).attention_weights_
    assert all(issubclass(w.category, EmptyNeighborhoodWarning) for w in caught)
    assert_allclose(attention.sum(1), 1.0, rtol=1e-12)
    if kind == "balloon":
        # Row 0, left out: every other point is as far from it (to float64 precision).
        assert_allclose(attention[0], np.r_[0.0, np.full(n - 1, 1 / (n - 1))], rtol=1e-12)
    # The others never reach it: the oracle on the rest, each row left out.
    for i in range(1, n):
        rest = np.setdiff1d(np.arange(1, n), [i])
        expected = adaptive_weights(X[i:i + 1], X[rest], np.full(1, 0.1),
                                    PROFILES["gaussian"], kind, 10, 1.0)[0]
        assert attention[i, 0] == 0.0
        assert_allclose(attention[i, rest], expected, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scale", [0.01, 0.5, 4.0])
@pytest.mark.parametrize("keeps_self", [False, True])
def test_pooled_leave_one_out_attention_is_the_attention_times_the_values(
        kind, scale, keeps_self):
    # The CV grid's pooled path (weights as powers of 2, each row's sum by a product)
    # against the attention's softmax rows times the values: at scale 0.01 every row's
    # weights underflow (below 2^-1000) and it takes the softmax path; zero weights,
    # repeated inputs and a row's own copies (leave_out="row") on the way.
    import torch

    from sklearn_nw._adaptive import Adaptive, LeaveOneOutNeighbors
    from sklearn_nw.kernels import get_kernel

    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    X[10] = X[11]
    Xt = torch.as_tensor(X)
    D = torch.cdist(Xt, Xt, compute_mode="donot_use_mm_for_euclid_dist")
    W = torch.as_tensor(rng.integers(1, 4, 60).astype(float))
    W[5] = 0.0
    kept = W * 0.5 if keeps_self else None
    values = torch.as_tensor(rng.normal(size=(60, 3)))
    neighbors = LeaveOneOutNeighbors(D, W, 8, kept)
    candidate = Adaptive(kind, 4, scale)
    attention, n_empty = neighbors.attention(candidate, get_kernel("gaussian"), 2)
    pooled, n_pooled_empty = neighbors.attention(candidate, get_kernel("gaussian"), 2,
                                                 values=values)
    assert n_empty == n_pooled_empty == 0
    assert torch.isfinite(pooled).all()
    assert_allclose(pooled.numpy(), (attention @ values).numpy(), rtol=1e-12, atol=1e-14)


def test_candidates_pooled_together_equal_each_attention_times_the_values():
    # The CV grid pools every candidate on a block of rows at once (weights below 2^-1022
    # flushed to 0, rows of small sums by the softmax): each candidate's result is its
    # attention's softmax rows times the values. The data spread over 60 units with
    # candidates of small and large k and c, so that weights fall in the flushed band,
    # rows keep sums both above and below the fast path's floor, and some rows' sums
    # underflow. The neighbors found for k = 8 are reached to k = 16 on the way: those
    # kept serve it as freshly found ones do.
    import torch

    from sklearn_nw._adaptive import Adaptive, LeaveOneOutNeighbors
    from sklearn_nw.kernels import get_kernel

    rng = np.random.default_rng(7)
    X = np.concatenate([rng.normal(size=(50, 2)), rng.normal(size=(30, 2)) * 0.02 + 30])
    X[10] = X[11]
    Xt = torch.as_tensor(X)
    D = torch.cdist(Xt, Xt, compute_mode="donot_use_mm_for_euclid_dist")
    W = torch.as_tensor(rng.integers(1, 4, len(X)).astype(float))
    W[5] = 0.0
    values = torch.as_tensor(rng.normal(size=(len(X), 2)))
    kernel = get_kernel("gaussian")
    neighbors = LeaveOneOutNeighbors(D, W, 8).reach(16)
    fresh = LeaveOneOutNeighbors(D, W, 16)
    candidates = [Adaptive(kind, k, c) for kind in KINDS for k in (1, 4, 16)
                  for c in (0.05, 0.5, 2.0)]
    pooled = neighbors.pooled(candidates, kernel, 2, values)  # (G, L, t)
    flushed = 0
    for candidate, result in zip(candidates, pooled):
        attention, _ = fresh.attention(candidate, kernel, 2)
        assert_allclose(result.numpy(), (attention @ values).numpy(), rtol=1e-12,
                        atol=1e-14)
        if candidate.kind == "balloon":  # the logits in bits, unshifted
            h = candidate.scale * fresh._kth(candidate.n_neighbors)
            bits = (-0.5 * D**2 / h[:, None] ** 2 + torch.log(W)) / np.log(2.0)
            flushed += int(((bits < -1022) & (bits > -1075)).sum())
    assert flushed > 0


@pytest.mark.parametrize("flushing", [True, False])
@pytest.mark.parametrize("data", ["synthetic", "iris"])
@pytest.mark.parametrize("keeps_self", [False, True])
def test_scales_that_halve_pool_as_squared_weights_as_each_attention_does(
        data, keeps_self, flushing):
    # Candidates of one kind and k whose scales halve take their weights from the
    # largest scale's by squaring, each one's own pairs (a row's own key and its copies,
    # the sample-point keys whose bandwidth a left-out row changes, its own among them)
    # set again: each equal to its attention's softmax rows times the values, for
    # weights 1 to 3 and 0, repeated inputs, tied distances (iris's distinct inputs, one
    # of them twice), small and large k, and scales from 1/16 (rows whose weights
    # underflow, by the softmax) to 4, halving, quartering and not; subnormal weights
    # flushed by the CPU (x86) or, where it cannot, thresholded.
    import contextlib

    import torch
    from sklearn.datasets import load_iris

    import sklearn_nw._adaptive as adaptive
    from sklearn_nw._adaptive import Adaptive, LeaveOneOutNeighbors
    from sklearn_nw.kernels import get_kernel

    rng = np.random.default_rng(13)
    if data == "iris":
        X, W = np.unique(load_iris().data, axis=0, return_counts=True)
        X, W = X / X.std(0), torch.as_tensor(W.astype(float))
    else:
        X = np.concatenate([np.round(rng.normal(size=(70, 3)) * 4) / 4,
                            rng.normal(size=(20, 3)) * 0.05 + 5])
        X[10] = X[11] = X[12]
        W = torch.as_tensor(rng.integers(1, 4, len(X)).astype(float))
        W[[5, 80]] = 0.0
    Xt = torch.as_tensor(X)
    D = torch.cdist(Xt, Xt, compute_mode="donot_use_mm_for_euclid_dist")
    kept = torch.where(W >= 2.0, W - 1.0, 0.0) if keeps_self else None
    values = torch.as_tensor(rng.normal(size=(len(X), 2)))
    kernel = get_kernel("gaussian")
    candidates = [Adaptive(kind, k, c) for kind in KINDS for k in (1, 6, 24)
                  for c in (4.0, 2.0, 1.0, 0.5, 0.3, 0.25, 0.0625)]
    chained = []
    original = adaptive.LeaveOneOutNeighbors._chain_into

    def recorded(self, chain, *args):
        chained.extend(chain.members)
        return original(self, chain, *args)

    @contextlib.contextmanager
    def not_flushing():
        yield False

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(adaptive.LeaveOneOutNeighbors, "_chain_into", recorded)
        if not flushing:
            patch.setattr(adaptive, "_subnormals_as_zero", not_flushing)
        neighbors = LeaveOneOutNeighbors(D, W, 24, kept)
        pooled = neighbors.pooled(candidates, kernel, X.shape[1], values)
    # Again on the same neighbors, in the workspaces the first call gave back.
    again = neighbors.pooled(candidates[::-1], kernel, X.shape[1], values)
    assert_allclose(again.numpy()[::-1], pooled.numpy(), rtol=1e-15, atol=0)
    # 4 -> 2 -> 1 (weights to the 16th power at most), 0.25 -> 0.0625; 0.5 and 0.3 alone
    assert {candidates[i].scale for i in chained} == {4.0, 2.0, 1.0, 0.25, 0.0625}
    fresh = LeaveOneOutNeighbors(D, W, 24, kept)
    for candidate, result in zip(candidates, pooled):
        attention, _ = fresh.attention(candidate, kernel, X.shape[1])
        assert_allclose(result.numpy(), (attention @ values).numpy(), rtol=1e-12,
                        atol=1e-14)


@pytest.mark.parametrize("kernel_name", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("keeps_self", [False, True])
def test_windows_of_one_feature_pool_as_every_key_does(kernel_name, keeps_self):
    # With one feature the pooled rows sum over the window of keys whose weight counts
    # (the inputs sorted): equal to the sums over every key, for both kinds, small and
    # large k and c, a dense cluster beside a sparse stretch (the sample-point keys'
    # bandwidths differing a hundredfold), repeated inputs, zero weights and a key's own
    # copies (leave_out="row"). Blocks of 100 rows (their size follows the threads
    # otherwise), whose windows leave keys out.
    import torch

    import sklearn_nw._adaptive as adaptive
    from sklearn_nw._adaptive import Adaptive, LeaveOneOutNeighbors
    from sklearn_nw.kernels import get_kernel

    rng = np.random.default_rng(11)
    x = np.sort(np.concatenate([rng.normal(size=900), rng.uniform(3.0, 300.0, 900)]))
    x[100:104] = x[100]  # repeated inputs
    x = torch.as_tensor(x)
    D = torch.cdist(x[:, None], x[:, None], compute_mode="donot_use_mm_for_euclid_dist")
    W = torch.as_tensor(rng.choice([1.0, 2.0, 0.5], len(x)))
    W[[5, 950]] = 0.0
    kept = torch.where(W >= 2.0, 1.0, 0.0).double() if keeps_self else None
    values = torch.as_tensor(np.column_stack([np.sin(x.numpy()), x.numpy()]))
    kernel = get_kernel(kernel_name)
    candidates = [Adaptive(kind, k, c) for kind in KINDS for k in (1, 4, 32)
                  for c in (0.25, 1.0, 2.0)]
    every_key = LeaveOneOutNeighbors(D, W, 32, kept).pooled(candidates, kernel, 1, values)
    windowed = LeaveOneOutNeighbors(D, W, 32, kept, positions=x)
    widths = []
    original = adaptive.LeaveOneOutNeighbors._windows

    def recorded(self, plan, kernel, step):
        windows = original(self, plan, kernel, step)
        widths.extend(window.stop - window.start for window in windows)
        return windows

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(adaptive.LeaveOneOutNeighbors, "_windows", recorded)
        patch.setattr(windowed, "_step", lambda: 100)
        pooled = windowed.pooled(candidates, kernel, 1, values)
    assert len(widths) == 18 * len(candidates) and np.median(widths) < len(x) / 2
    assert_allclose(pooled.numpy(), every_key.numpy(), rtol=1e-12, atol=1e-14)


def test_neighbors_of_points_keep_squares_alone_where_their_roots_are_the_distances():
    # of_points keeps the squared distances alone (one (L, L) matrix) where every
    # distance is its square's root: the neighbors, k-th distances, attentions and
    # pooled values are then those of the distances given, bit for bit (ties and
    # repeated inputs included). Points a subnormal square apart, or far enough apart
    # for a square to overflow, keep the distances.
    import torch

    from sklearn_nw._adaptive import Adaptive, LeaveOneOutNeighbors
    from sklearn_nw.kernels import get_kernel

    rng = np.random.default_rng(5)
    X = np.round(rng.normal(size=(80, 2)) * 4) / 4  # ties
    X[3] = X[4]
    points = torch.as_tensor(X)
    W = torch.as_tensor(rng.integers(1, 3, len(X)).astype(float))
    D = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")
    values = torch.as_tensor(rng.normal(size=(len(X), 2)))
    squares = LeaveOneOutNeighbors.of_points(points, W, 8)
    given = LeaveOneOutNeighbors(D, W, 8)
    assert squares.D is None
    for kernel in (get_kernel("gaussian"), get_kernel("epanechnikov")):
        for candidate in (Adaptive("balloon", 3, 0.5), Adaptive("sample_point", 5, 1.0)):
            for a, b in ((squares.attention(candidate, kernel, 2)[0],
                          given.attention(candidate, kernel, 2)[0]),
                         (squares.pooled([candidate], kernel, 2, values),
                          given.pooled([candidate], kernel, 2, values))):
                np.testing.assert_array_equal(a.numpy(), b.numpy())
    for k in (1, 3, 8):
        np.testing.assert_array_equal(squares._kth(k, True).numpy(),
                                      given._kth(k, True).numpy())
    near = points.clone()
    near[6, :], near[7, :] = 0.0, 0.0
    near[7, 0] = 1e-160
    far = points.clone()
    far[7, 0] = 1e160
    for kept in (near, far):
        assert LeaveOneOutNeighbors.of_points(kept, W, 8).D is not None


@pytest.mark.parametrize("m", [1, 7, 40, 50])
def test_smallest_sorted_is_a_sorted_head(m):
    """Each row's m smallest entries ascending, as a sort of the row has them, and
    columns holding them: every column below the m-th value, each once (which of the
    columns tied at the m-th value: any), with infinite entries and many ties."""
    import torch

    rng = np.random.default_rng(0)
    block = rng.integers(0, 12, (30, 50)).astype(np.float64)  # many ties
    block[rng.random(block.shape) < 0.2] = np.inf
    values, indices = smallest_sorted(torch.from_numpy(block.copy()), m)
    values, indices = values.numpy(), indices.numpy()
    np.testing.assert_array_equal(values, np.sort(block, axis=1)[:, :m])
    np.testing.assert_array_equal(np.take_along_axis(block, indices, 1), values)
    for row, columns, found in zip(block, indices, values):
        assert len(set(columns)) == m
        assert set(np.flatnonzero(row < found[-1])) <= set(columns)
