"""Attention restricted to neighbors: tree search for compact kernels, k-nearest attention."""

import warnings

import numpy as np
import pytest
from _oracle import PROFILES, nw_predict
from numpy.testing import assert_allclose

from sklearn_nw import (
    EmptyNeighborhoodWarning,
    NadarayaWatsonClassifier,
    NadarayaWatsonRegressor,
)
from sklearn_nw._cells import CellList

COMPACT = ["epanechnikov", "tophat", "tricube", "biweight", "cosine", "linear"]


def _data(n=400, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(6 * X[:, 0]) + X[:, -1]
    w = rng.integers(0, 3, n).astype(float)
    Q = rng.uniform(0, 1, (60, d))
    return X, y, w, Q


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree", "cell_list"])
def test_tree_search_agrees_with_the_oracle(kernel, algorithm):
    X, y, w, Q = _data()
    h = np.array([0.2, 0.3])
    reg = NadarayaWatsonRegressor(kernel, bandwidth=h, algorithm=algorithm)
    reg.fit(X, y, sample_weight=w)
    assert reg.route_ != "dense"
    assert_allclose(reg.predict(Q), nw_predict(Q, X, y, h, PROFILES[kernel], w), rtol=1e-10)


@pytest.mark.parametrize("kernel", ["epanechnikov", "tophat"])
def test_switching_paths_changes_nothing(kernel):
    X, y, w, Q = _data(n=6000)
    outputs = []
    for algorithm in ["brute", "kd_tree", "ball_tree", "cell_list", "auto"]:
        reg = NadarayaWatsonRegressor(kernel, bandwidth=0.05, algorithm=algorithm)
        outputs.append(reg.fit(X, y, sample_weight=w).predict(Q, return_attention=True))
    # "auto" searches the cells of a compact kernel's support from 5,000 points in 2-D.
    assert isinstance(NadarayaWatsonRegressor(kernel, bandwidth=0.05).fit(X, y).key_set_.index,
                      CellList)
    for pred, attention in outputs[1:]:
        assert_allclose(pred, outputs[0][0], rtol=1e-12)
        assert abs(attention - outputs[0][1]).max() < 1e-12
        assert attention.nnz == outputs[0][1].nnz
    # The compiled dense loop (predictions only: attention maps are computed eagerly).
    compiled = NadarayaWatsonRegressor(kernel, bandwidth=0.05, compute="compiled")
    assert_allclose(compiled.fit(X, y, sample_weight=w).predict(Q), outputs[0][0], rtol=1e-12)


@pytest.mark.parametrize("d", [1, 3, 5])
def test_cell_list_in_other_dimensions(d):
    # Up to three dimensions the cells bin every coordinate; above, the three widest
    # (here the last three, stretched), which still finds every point in reach.
    X, y, w, Q = _data(n=3000, d=d, seed=d)
    X[:, -min(d, 3):] *= 3.0
    h = np.full(d, 0.15)
    reg = NadarayaWatsonRegressor("biweight", bandwidth=h, algorithm="cell_list")
    reg.fit(X, y, sample_weight=w)
    assert isinstance(reg.key_set_.index, CellList)
    assert_allclose(reg.key_set_.index.axes, np.arange(d)[-3:])
    brute = NadarayaWatsonRegressor("biweight", bandwidth=h, algorithm="brute")
    brute.fit(X, y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        assert_allclose(reg.predict(Q), brute.predict(Q), rtol=1e-12)


def test_cell_list_classifier_and_data_too_spread_for_cells():
    X, y, w, Q = _data(n=5000)
    labels = np.digitize(y, [0.3, 1.0])
    clf = NadarayaWatsonClassifier("epanechnikov", bandwidth=0.03).fit(X, labels, w)
    assert isinstance(clf.key_set_.index, CellList)
    brute = NadarayaWatsonClassifier("epanechnikov", bandwidth=0.03, algorithm="brute")
    brute.fit(X, labels, w)
    proba, attention = clf.predict_proba(Q, return_attention=True)
    expected, expected_attention = brute.predict_proba(Q, return_attention=True)
    assert_allclose(proba, expected, rtol=1e-12, atol=1e-15)
    assert abs(attention - expected_attention).max() < 1e-12
    # 1e19 cells of the support would overflow the cell numbers: "auto" takes a tree,
    # an explicit cell list says why it cannot.
    X[0] = [1e9, 1e9]
    auto = NadarayaWatsonRegressor("epanechnikov", bandwidth=1e-5).fit(X, y)
    assert auto.route_ == "radius" and auto.key_set_.index.algorithm == "kd_tree"
    with pytest.raises(ValueError, match="too many cells"):
        NadarayaWatsonRegressor("epanechnikov", bandwidth=1e-5, algorithm="cell_list").fit(X, y)


def test_cell_list_cannot_find_k_nearest():
    X, y, _, _ = _data()
    with pytest.raises(ValueError, match="cell_list.*n_neighbors"):
        NadarayaWatsonRegressor(n_neighbors=3, algorithm="cell_list").fit(X, y)


@pytest.mark.parametrize("params", [{"algorithm": "cell_list"}, {"compute": "compiled"}])
def test_incompatible_parameters_are_refused_before_the_bandwidth_search(params, monkeypatch):
    from sklearn_nw import LeaveOneOutBandwidth

    def no_search(*args, **kwargs):
        raise AssertionError("the bandwidth search ran before the parameters were checked")

    monkeypatch.setattr(LeaveOneOutBandwidth, "select", no_search)
    X, y, _, _ = _data()
    with pytest.raises(ValueError, match=f"{next(iter(params.values()))}.*n_neighbors"):
        NadarayaWatsonRegressor(bandwidth="loo", n_neighbors=3, **params).fit(X, y)


@pytest.mark.parametrize("algorithm", ["kd_tree", "cell_list"])
def test_tree_fallback_for_queries_out_of_reach(algorithm):
    X, y, _, _ = _data()
    Q = np.array([[0.5, 0.5], [5.0, 5.0]])
    reg = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.1, algorithm=algorithm).fit(X, y)
    with pytest.warns(EmptyNeighborhoodWarning, match="1 of 2 queries"):
        pred, attention = reg.predict(Q, return_attention=True)
    nearest = np.argmin(((X - Q[1]) ** 2).sum(1))
    assert pred[1] == pytest.approx(y[nearest])
    assert attention[[1]].toarray()[0, nearest] == 1.0


@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
@pytest.mark.parametrize("offset", [0.0, 100.0])
def test_tree_fallback_keeps_a_lattices_ties(algorithm, offset):
    # Queries near halfway between lattice points (and near the cells' centers), out of a
    # compact kernel's reach under an anisotropic bandwidth: the nearest keys are those
    # of the raw differences, every tie, as the dense fallback finds them; the trees'
    # distances of scaled points rounded near-ties the other way (predictions off by up
    # to 3.0). The fits without each row (the jackknife's residuals) alike.
    X = np.stack(np.meshgrid(np.arange(5.0), np.arange(4.0)), -1).reshape(-1, 2)
    X = X * np.array([0.3, 1.0]) + offset
    y = np.arange(len(X), dtype=float) % 7
    Q = np.vstack([X[:-1] + np.array([0.15, 0.0]), X[:-1] + np.array([0.15, 0.5])])
    h = np.array([0.021 * 0.3, 0.021 * 3.0])
    kwargs = {"kernel": "epanechnikov", "bandwidth": h}
    dense = NadarayaWatsonRegressor(**kwargs, algorithm="brute").fit(X, y)
    tree = NadarayaWatsonRegressor(**kwargs, algorithm=algorithm).fit(X, y)
    assert tree.route_ == "radius"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        # The dense fallback by hand: the nearest keys by raw differences, every tie.
        d2 = (((Q[:, None] - X[None]) / (h / h.max())) ** 2).sum(-1)
        nearest = d2 == d2.min(1, keepdims=True)
        np.testing.assert_allclose(dense.predict(Q), (nearest @ y) / nearest.sum(1),
                                   rtol=1e-15)
        np.testing.assert_array_equal(tree.predict(Q), dense.predict(Q))
        np.testing.assert_array_equal(tree._leave_one_out_predictions(),
                                      dense._leave_one_out_predictions())


def test_k_nearest_attention_error_is_the_mass_beyond_k():
    X, y, _, Q = _data()
    h = np.array([0.1, 0.1])
    full, attention = NadarayaWatsonRegressor(bandwidth=h).fit(X, y).predict(
        Q, return_attention=True
    )
    for k in [5, 30, 100]:
        got, knn_attention = NadarayaWatsonRegressor(bandwidth=h, n_neighbors=k).fit(X, y).predict(
            Q, return_attention=True
        )
        # The k nearest in the scaled metric, found here by sorting.
        order = np.argsort((((Q[:, None] - X[None]) / h) ** 2).sum(-1), axis=1)[:, :k]
        inside = np.take_along_axis(attention, order, axis=1).sum(1)  # full mass on them
        bound = 2 * (1 - inside) * np.abs(y).max()
        assert np.all(np.abs(got - full) <= bound + 1e-12)
        assert np.all(np.diff(knn_attention.indptr) == k)
        assert_allclose(knn_attention.sum(1), 1.0)
    # All the points: exactly the full attention.
    everything = NadarayaWatsonRegressor(bandwidth=h, n_neighbors=len(X)).fit(X, y)
    assert_allclose(everything.predict(Q), full, rtol=1e-10)


def test_k_nearest_classifier_and_weights():
    X, y, w, Q = _data()
    labels = np.where(y > 0.8, "high", "low")
    # k counts units of sample weight: all of them is the full attention.
    clf = NadarayaWatsonClassifier(bandwidth=0.2, n_neighbors=int(w.sum())).fit(X, labels, w)
    full = NadarayaWatsonClassifier(bandwidth=0.2).fit(X, labels, w)
    assert_allclose(clf.predict_proba(Q), full.predict_proba(Q), rtol=1e-10)
    assert np.array_equal(clf.predict(Q), full.predict(Q))


def test_n_neighbors_must_be_positive():
    X, y, _, _ = _data(n=20)
    with pytest.raises(ValueError, match="n_neighbors"):
        NadarayaWatsonRegressor(n_neighbors=0).fit(X, y)
    with pytest.raises(ValueError, match="algorithm"):
        NadarayaWatsonRegressor(algorithm="cover_tree").fit(X, y)


@pytest.mark.parametrize("k", [1, 4, 25])
def test_k_nearest_integer_weights_equal_repeated_rows(k):
    X, y, w, Q = _data(n=120)
    w = w.astype(int)
    weighted = NadarayaWatsonRegressor(bandwidth=0.2, n_neighbors=k).fit(X, y, sample_weight=w)
    repeated = NadarayaWatsonRegressor(bandwidth=0.2, n_neighbors=k).fit(
        np.repeat(X, w, axis=0), np.repeat(y, w)
    )
    assert_allclose(weighted.predict(Q), repeated.predict(Q), rtol=1e-10)


def test_k_nearest_with_fractional_weights_looks_further():
    X, y, _, Q = _data(n=200)
    w = np.full(len(X), 0.25)
    # 8 units of weight 0.25 each: the 32 nearest points, equally weighted.
    reg = NadarayaWatsonRegressor("constant", bandwidth=0.5, n_neighbors=8)
    got = reg.fit(X, y, sample_weight=w).predict(Q)
    order = np.argsort(((Q[:, None] - X[None]) ** 2).sum(-1), axis=1)[:, :32]
    assert_allclose(got, y[order].mean(1), rtol=1e-10)


@pytest.mark.parametrize("algorithm", ["brute", "cell_list"])
def test_compact_paths_keep_precision_far_from_the_origin(algorithm):
    # Five dimensions take |q|^2 + |x|^2 - 2 q.x: centered on the keys, a shift of 1e6
    # costs only the rounding of the shifted inputs themselves (~1e-10).
    X, y, _, Q = _data(n=500, d=5)
    near = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.6, algorithm=algorithm)
    far = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.6, algorithm=algorithm)
    expected = near.fit(X, y).predict(Q)
    assert_allclose(far.fit(X + 1e6, y).predict(Q + 1e6), expected, atol=1e-8)


def _lattice(seed=4):
    rng = np.random.default_rng(seed)
    X = np.round(rng.uniform(0, 2, (150, 2)) * 4) / 4
    y = rng.normal(size=len(X))
    Q = np.vstack([np.round(rng.uniform(0, 2, (30, 2)) * 8) / 8, X[:10]])
    return X, y, Q


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize("weighted", [False, True])
def test_k_nearest_ties_share_the_last_units(algorithm, k, weighted):
    # Inputs on a lattice: the keys exactly as far from a query as its k-th share what
    # is left of the k units in proportion to their weights, whatever order the search
    # meets them in (one order or another held different keys, and so did refits).
    X, y, Q = _lattice()
    w = np.random.default_rng(5).choice([0.5, 1.0, 2.0], len(X)) if weighted else None
    reg = NadarayaWatsonRegressor("constant", bandwidth=1.0, n_neighbors=k,
                                  algorithm=algorithm)
    got = reg.fit(X, y, sample_weight=w).predict(Q)
    w = np.ones(len(X)) if w is None else w
    d2 = ((Q[:, None] - X[None]) ** 2).sum(-1)  # exact here: multiples of 1/8
    expected = []
    for row in d2:
        levels = np.unique(row)
        nearer = np.cumsum([w[row == d].sum() for d in levels])  # through each distance
        at = np.searchsorted(nearer, k)  # the distance completing k units
        share = np.where(row < levels[at], w, 0.0)
        tie = row == levels[at]
        share[tie] = w[tie] * (k - (nearer[at] - w[tie].sum())) / w[tie].sum()
        expected.append(share @ y / share.sum())
    assert_allclose(got, expected, rtol=1e-12)
    # Some ties straddle the k-th nearest: the test is about them.
    kth, after = np.sort(d2, axis=1)[:, k - 1], np.sort(d2, axis=1)[:, k]
    assert np.any(kth == after)


@pytest.mark.parametrize("k", [2, 5])
def test_k_nearest_integer_weights_equal_repeated_rows_on_a_lattice(k):
    # Ties at the k-th: a key of weight 2 and its two copies hold the same.
    X, y, Q = _lattice()
    w = np.random.default_rng(6).integers(1, 4, len(X))
    weighted = NadarayaWatsonRegressor(bandwidth=0.5, n_neighbors=k).fit(X, y, sample_weight=w)
    repeated = NadarayaWatsonRegressor(bandwidth=0.5, n_neighbors=k).fit(
        np.repeat(X, w, axis=0), np.repeat(y, w))
    assert_allclose(weighted.predict(Q), repeated.predict(Q), rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
def test_nearest_lists_go_on_past_a_tie_at_their_end(algorithm):
    # The two first points hold the unit of weight asked, the second tied with the third:
    # the list takes both, and they share the half left.
    from sklearn_nw._search import TreeSearch, nearest_shares

    points = np.array([[1.0, 0.0], [0.0, 2.0], [-2.0, 0.0], [0.0, -3.0], [5.0, 5.0]])
    weight = np.array([0.5, 0.5, 0.5, 1.0, 1.0])
    dist, ind, w, _ = TreeSearch(points, algorithm).nearest_holding(
        np.zeros((1, 2)), weight, 1.0, first=2)
    assert dist.tolist() == [[1.0, 2.0, 2.0]]
    assert sorted(ind[0, 1:].tolist()) == [1, 2]
    assert_allclose(nearest_shares(dist, w, 1.0), [[0.5, 0.25, 0.25]])


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_k_nearest_over_repeated_inputs_searches_each_input_once(kernel):
    # Rows repeating inputs (other targets, other weights): the route searches the
    # distinct inputs, each holding its rows' summed weight, and hands each row its part;
    # the same predictions and attention as searching the rows.
    rng = np.random.default_rng(7)
    X = np.round(rng.normal(size=(60, 2)), 1)
    X = np.vstack([X, X[rng.integers(0, 60, 240)]])
    y = rng.normal(size=len(X))
    w = rng.choice([0.5, 1.0, 3.0], len(X))
    Q = np.vstack([rng.normal(size=(40, 2)), X[:10]])
    model = NadarayaWatsonRegressor(kernel, bandwidth=0.6, n_neighbors=12).fit(
        X, y, sample_weight=w)
    route = model.key_set_.route
    assert route.inputs is not None and len(route.inputs.weight) < len(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        merged, attention = model.predict(Q, return_attention=True)
        # The fits without each row too (jackknife+ intervals, the rows' own).
        intervals = model.predict_interval(Q, confidence_level=[0.5, 0.9])[1]
        own = model._fits_without_each_row(y)
        route.inputs = None  # search the rows themselves
        rows, by_rows = model.predict(Q, return_attention=True)
        assert_allclose(model.predict_interval(Q, confidence_level=[0.5, 0.9])[1],
                        intervals, rtol=1e-12, atol=1e-12)
        assert_allclose(model._fits_without_each_row(y), own, rtol=1e-12, atol=1e-12)
    assert_allclose(merged, rows, rtol=1e-12, atol=1e-14)
    assert_allclose(attention.toarray(), by_rows.toarray(), rtol=1e-12, atol=1e-15)


def test_k_nearest_own_fits_over_repeated_inputs_with_rows_of_no_weight():
    # Rows of no weight (the first and the last among them) are no keys: their fits
    # without themselves are the fits with every key, as refits without them give.
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(80, 2)), 1)
    X = np.vstack([X, X[:30]])
    y = rng.normal(size=len(X))
    w = rng.choice([0.0, 1.0, 2.0], len(X))
    w[[0, -1]] = 0.0

    def make():
        return NadarayaWatsonRegressor(bandwidth=0.5, n_neighbors=6)

    model = make().set_params(store_loo=True).fit(X, y, sample_weight=w)
    assert model.key_set_.route.inputs is not None
    refits = [make().fit(np.delete(X, i, 0), np.delete(y, i), sample_weight=np.delete(w, i))
              .predict(X[i : i + 1])[0] for i in range(len(y))]
    assert_allclose(model.loo_prediction_, refits, rtol=1e-12, atol=1e-12)
