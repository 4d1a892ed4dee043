"""Categorical and ordered features: statsmodels' KernelReg and an explicit product kernel
as oracles, exact leave-one-out against refits, the spellings of
``categorical_features``, and the errors."""

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import KFold

from sklearn_nw import (
    AdaptiveBandwidth,
    LeaveOneOutBandwidth,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw._leave_one_out import input_queries


def _table(n=120, seed=0):
    """Two continuous features, two unordered and one ordered categorical (every category
    on at least two rows), as a DataFrame and as statsmodels' numbers."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.uniform(size=n)
    u1, u2, o1 = (np.arange(n) % 3, rng.permutation(np.arange(n) % 4),
                  rng.permutation(np.arange(n) % 5))
    y = (np.sin(2 * x1) + x2 + 0.5 * u1 - 0.4 * (u2 == 2) + 0.2 * o1
         + rng.normal(scale=0.3, size=n))
    X = pd.DataFrame({"x1": x1, "x2": x2,
                      "u1": pd.Categorical(np.array(["a", "b", "c"])[u1]),
                      "u2": pd.Categorical(u2),
                      "o1": pd.Categorical(o1, categories=range(5), ordered=True)})
    return X, np.column_stack([x1, x2, u1, u2, o1]).astype(float), y


def _product_kernel(Q, X, bandwidth, kind):
    """The weights (m, n) of the product kernel, written out: Gaussian on columns 0-1,
    the unordered kernel on 2-3 (3 and 4 categories seen), the ordered one on 4."""
    h, lam = np.asarray(bandwidth[:2]), np.asarray(bandwidth[2:])
    u = (Q[:, None, :2] - X[None, :, :2]) / h
    w = np.exp(-0.5 * (u**2).sum(-1))
    for j, c in ((2, 3), (3, 4)):
        same = Q[:, None, j] == X[None, :, j]
        lj = lam[j - 2]
        w = w * (np.where(same, 1.0, lj) if kind == "li_racine"
                 else np.where(same, 1 - lj, lj / (c - 1)))
    dist = np.abs(Q[:, None, 4] - X[None, :, 4])
    lo = lam[2]
    w = w * (lo**dist if kind == "li_racine"
             else np.where(dist == 0, 1 - lo, 0.5 * (1 - lo) * lo**dist))
    return w


BANDWIDTH = [0.4, 0.2, 0.3, 0.5, 0.6]


@pytest.mark.filterwarnings("ignore:After 0.17:FutureWarning")  # statsmodels RNG notice
def test_equals_statsmodels_kernelreg_local_constant():
    KernelReg = pytest.importorskip(
        "statsmodels.nonparametric.kernel_regression").KernelReg
    X, Xn, y = _table()
    reg = NadarayaWatsonRegressor(bandwidth=BANDWIDTH, categorical_kernel="aitchison_aitken")
    reg.fit(X, y)
    expected = KernelReg(y, Xn, var_type="ccuuo", reg_type="lc", bw=BANDWIDTH).fit(Xn[:40])[0]
    np.testing.assert_allclose(reg.predict(X.iloc[:40]), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(reg.bandwidth_, BANDWIDTH)
    np.testing.assert_array_equal(reg.is_categorical_, [False, False, True, True, True])


@pytest.mark.parametrize("kind", ["li_racine", "aitchison_aitken"])
def test_equals_the_product_kernel(kind):
    X, Xn, y = _table()
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    reg = NadarayaWatsonRegressor(bandwidth=BANDWIDTH, categorical_kernel=kind)
    pred, attention = reg.fit(X, y, sample_weight=w).predict(X, return_attention=True)
    weights = _product_kernel(Xn, Xn, BANDWIDTH, kind) * w
    expected = weights / weights.sum(1, keepdims=True)
    np.testing.assert_allclose(attention, expected, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(pred, expected @ y, rtol=1e-9)


@pytest.mark.parametrize("route", ["compiled", "k_nearest"])
def test_every_gaussian_route_computes_the_product_kernel(route):
    X, Xn, y = _table()
    params = ({"compute": "compiled"} if route == "compiled" else {"n_neighbors": 10})
    reg = NadarayaWatsonRegressor(bandwidth=BANDWIDTH, **params).fit(X, y)
    weights = _product_kernel(Xn[:40], Xn, BANDWIDTH, "li_racine")
    if route == "k_nearest":  # the 10 largest weights: the nearest in the joint metric
        weights = np.where(weights >= np.sort(weights, 1)[:, -10:-9], weights, 0.0)
    expected = weights @ y / weights.sum(1)
    assert reg.route_ == ("dense" if route == "compiled" else "k_nearest")
    np.testing.assert_allclose(reg.predict(X.iloc[:40]), expected, rtol=1e-12)


@pytest.mark.parametrize("degree", [1, 2])
def test_local_polynomials_are_in_the_continuous_features(degree):
    X, Xn, y = _table()
    reg = NadarayaWatsonRegressor(bandwidth=BANDWIDTH, degree=degree).fit(X, y)
    weights = _product_kernel(Xn[:20], Xn, BANDWIDTH, "li_racine")
    expected = []
    for q, w in zip(Xn[:20], weights):
        u = Xn[:, :2] - q[:2]  # the continuous features only (np's rule)
        terms = [np.ones(len(u)), u[:, 0], u[:, 1]]
        if degree == 2:
            terms += [u[:, 0] ** 2, u[:, 0] * u[:, 1], u[:, 1] ** 2]
        design = np.column_stack(terms)
        beta = np.linalg.solve(design.T @ (w[:, None] * design), design.T @ (w * y))
        expected.append(beta[0])
    np.testing.assert_allclose(reg.predict(X.iloc[:20]), expected, rtol=1e-8)


@pytest.mark.parametrize("make", [
    lambda: NadarayaWatsonRegressor(degree=1),
    lambda: NadarayaWatsonRegressor(degree=2, bandwidth="loo"),
    lambda: NadarayaWatsonRegressorCV(degree=1),
    lambda: NadarayaWatsonRegressorCV(degree=2, bandwidth_kinds=["fixed"]),
])
def test_local_polynomials_without_a_continuous_feature_are_refused(make):
    # Polynomials in the continuous features (np's rule), of which there are none: a
    # clear error at fit (degree 1 failed deep in the moments with an IndexError).
    X, _, y = _table()
    with pytest.raises(ValueError, match="every feature is categorical"):
        make().fit(X[["u1", "u2", "o1"]], y)
    # degree="auto" takes Nadaraya-Watson there.
    assert NadarayaWatsonRegressorCV().fit(X[["u1", "u2", "o1"]], y).degree_ == 0


def test_classifier_equals_the_product_kernel():
    X, Xn, y = _table()
    labels = np.where(y > np.median(y), "high", "low")
    clf = NadarayaWatsonClassifier(bandwidth=BANDWIDTH).fit(X, labels)
    weights = _product_kernel(Xn[:30], Xn, BANDWIDTH, "li_racine")
    expected = (weights @ (labels[:, None] == clf.classes_)) / weights.sum(1, keepdims=True)
    np.testing.assert_allclose(clf.predict_proba(X.iloc[:30]), expected, rtol=1e-9)


@pytest.mark.filterwarnings("ignore:After 0.17:FutureWarning")  # statsmodels RNG notice
def test_statsmodels_leave_one_out_objective_equals_ours():
    KernelReg = pytest.importorskip(
        "statsmodels.nonparametric.kernel_regression").KernelReg
    X, Xn, y = _table(n=80)
    bandwidth = [0.5, 0.3, 0.2, 0.4, 0.5]
    model = KernelReg(y, Xn, var_type="ccuuo", reg_type="lc", bw=bandwidth)
    expected = model.cv_loo(np.asarray(bandwidth), model._est_loc_constant)  # a mean
    cv = NadarayaWatsonRegressorCV(bandwidths=[bandwidth],
                                   categorical_kernel="aitchison_aitken").fit(X, y)
    np.testing.assert_allclose(-cv.best_score_, expected, rtol=1e-9)


@pytest.mark.filterwarnings("ignore:After 0.17:FutureWarning")  # statsmodels RNG notice
def test_learned_loss_is_at_most_statsmodels_cv_ls():
    KernelReg = pytest.importorskip(
        "statsmodels.nonparametric.kernel_regression").KernelReg
    X, Xn, y = _table(n=60, seed=1)
    model = KernelReg(y, Xn, var_type="ccuuo", reg_type="lc", bw="cv_ls")
    theirs = model.cv_loo(model.bw, model._est_loc_constant)  # a mean
    reg = NadarayaWatsonRegressor(bandwidth="loo",
                                  categorical_kernel="aitchison_aitken").fit(X, y)
    assert reg.loss_curve_[-1] <= theirs * (1 + 1e-9)


def _refit_loss(X, y, w, bandwidth, kind, degree=0):
    """The weighted leave-one-row-out squared error of explicit refits."""
    errors = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        reg = NadarayaWatsonRegressor(bandwidth=bandwidth, categorical_kernel=kind,
                                      degree=degree)
        reg.fit(X.iloc[keep], y[keep], sample_weight=w[keep])
        errors.append((reg.predict(X.iloc[[i]])[0] - y[i]) ** 2)
    return float(np.average(errors, weights=w))


@pytest.mark.parametrize("kind, degree", [("li_racine", 0), ("aitchison_aitken", 0),
                                          ("li_racine", 1)])
def test_learned_loss_and_cv_scores_equal_refits(kind, degree):
    X, _, y = _table(n=48, seed=2)
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(y))
    reg = NadarayaWatsonRegressor(
        bandwidth=LeaveOneOutBandwidth(n_grid=5, max_iter=200), categorical_kernel=kind,
        degree=degree)
    reg.fit(X, y, sample_weight=w)
    # Every category is on several rows: a refit keeps them all (a category seen once
    # would change the Aitchison-Aitken c of its refit).
    np.testing.assert_allclose(
        reg.loss_curve_[-1], _refit_loss(X, y, w, reg.bandwidth_, kind, degree), rtol=1e-8)
    cv = NadarayaWatsonRegressorCV(bandwidths=[BANDWIDTH], categorical_kernel=kind,
                                   degree=degree, bounded=False)
    cv.fit(X, y, sample_weight=w)
    np.testing.assert_allclose(-cv.best_score_,
                               _refit_loss(X, y, w, BANDWIDTH, kind, degree), rtol=1e-9)


def test_a_learned_bandwidth_ignores_an_irrelevant_category():
    rng = np.random.default_rng(5)
    n = 300
    x = rng.uniform(-2, 2, n)
    X = pd.DataFrame({"x": x, "noise": pd.Categorical(rng.integers(0, 4, n)),
                      "signal": pd.Categorical(rng.integers(0, 3, n))})
    y = np.sin(2 * x) + 1.5 * X["signal"].cat.codes.to_numpy() + rng.normal(0, 0.2, n)
    reg = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    lam = reg.bandwidth_[1:]
    assert lam[0] > 0.5 and lam[1] < 0.05, lam


def test_spellings_of_categorical_features_agree():
    X, Xn, y = _table()
    plain = pd.DataFrame(X)
    for column in ("u1", "u2"):  # object and integer columns, not pandas categoricals
        plain[column] = np.asarray(X[column]).astype(object if column == "u1" else int)
    plain["o1"] = Xn[:, 4].astype(int)
    bandwidth = [0.4, 0.2, 0.3, 0.5, 0.6]
    expected = NadarayaWatsonRegressor(
        bandwidth=bandwidth, categorical_features=[2, 3, 4]).fit(Xn, y).predict(Xn)
    for spec in ([2, 3, 4], [False, False, True, True, True], ["u1", "u2", "o1"]):
        reg = NadarayaWatsonRegressor(bandwidth=bandwidth, categorical_features=spec)
        np.testing.assert_allclose(reg.fit(plain, y).predict(plain), expected, rtol=1e-12)
    # None: the codes are numbers, a different model.
    numbers = NadarayaWatsonRegressor(bandwidth=bandwidth, categorical_features=None)
    assert not np.allclose(numbers.fit(Xn, y).predict(Xn), expected)
    assert numbers.is_categorical_ is None


def test_an_ordered_categorical_gets_the_ordered_kernel():
    X, Xn, y = _table()
    as_unordered = X.assign(o1=pd.Categorical(Xn[:, 4].astype(int)))
    ordered = NadarayaWatsonRegressor(bandwidth=BANDWIDTH).fit(X, y)
    unordered = NadarayaWatsonRegressor(bandwidth=BANDWIDTH).fit(as_unordered, y)
    assert not np.allclose(ordered.predict(X), unordered.predict(as_unordered))


def test_an_unseen_category_is_different_from_every_key():
    X, Xn, y = _table()
    query = X.iloc[:5].copy()
    query["u1"] = pd.Categorical(["z"] * 5)
    reg = NadarayaWatsonRegressor(bandwidth=BANDWIDTH).fit(X, y)
    Q = Xn[:5].copy()
    Q[:, 2] = -1  # matches no key
    weights = _product_kernel(Q, Xn, BANDWIDTH, "li_racine")
    np.testing.assert_allclose(reg.predict(query), weights @ y / weights.sum(1), rtol=1e-9)


def test_every_spelling_of_a_query_category_finds_its_key():
    # Fit on categories in an unsorted order; query them as that dtype, as the dtype with
    # its categories reordered, as plain integers (one unseen), and as objects.
    X, Xn, y = _table()
    X = X.assign(u2=pd.Categorical(Xn[:, 3].astype(int), categories=[3, 1, 0, 2]))
    reg = NadarayaWatsonRegressor(bandwidth=BANDWIDTH).fit(X, y)
    Q = Xn[:8].copy()
    Q[-1, 3] = -1  # the unseen value 7 matches no key
    u2 = np.append(Xn[:7, 3].astype(int), 7)
    expected = _product_kernel(Q, Xn, BANDWIDTH, "li_racine") @ y
    expected /= _product_kernel(Q, Xn, BANDWIDTH, "li_racine").sum(1)
    same = X.iloc[:7]
    np.testing.assert_allclose(reg.predict(same), expected[:7], rtol=1e-9)
    reordered = same.assign(u2=pd.Categorical(Xn[:7, 3].astype(int), categories=[0, 1, 2, 3]))
    np.testing.assert_allclose(reg.predict(reordered), expected[:7], rtol=1e-9)
    for column in (u2, u2.astype(float), u2.astype(object)):
        query = X.iloc[:8].assign(u2=column)
        np.testing.assert_allclose(reg.predict(query), expected, rtol=1e-9)


def test_the_bandwidth_round_trips_and_the_fit_pickles():
    X, _, y = _table()
    cv = NadarayaWatsonRegressorCV(bandwidths=7).fit(X, y)
    assert set(cv.cv_results_["degree"]) == {0, 1, 2}  # two continuous features
    plain = NadarayaWatsonRegressor(bandwidth=cv.bandwidth_, degree=cv.degree_,
                                    bounded=True).fit(X, y)
    np.testing.assert_allclose(plain.predict(X), cv.predict(X), rtol=1e-10)
    assert np.all((cv.bandwidth_[2:] >= 0) & (cv.bandwidth_[2:] <= 1))
    np.testing.assert_array_equal(cv.cv_results_["params"][cv.best_index_]["bandwidth"],
                                  cv.bandwidth_)
    again = pickle.loads(pickle.dumps(cv))
    np.testing.assert_array_equal(again.predict(X), cv.predict(X))


def test_cv_with_a_splitter_and_the_classifier():
    X, _, y = _table()
    cv = NadarayaWatsonRegressorCV(bandwidths=5, cv=KFold(3), degree=0).fit(X, y)
    assert cv.cv_results_["mean_test_score"].shape == (5,)
    assert np.all((cv.bandwidth_[2:] >= 0) & (cv.bandwidth_[2:] <= 1))
    labels = (y > np.median(y)).astype(int)
    clf = NadarayaWatsonClassifierCV(bandwidths=5).fit(X, labels)
    assert clf.score(X, labels) > 0.7


def test_the_user_data_is_not_modified():
    X, _, y = _table()
    before = X.copy()
    NadarayaWatsonRegressor(bandwidth="loo").fit(X, y).predict(X)
    pd.testing.assert_frame_equal(X, before)


@pytest.mark.parametrize("params, match", [
    ({"kernel": "epanechnikov"}, "Gaussian kernel"),
    ({"bandwidth": AdaptiveBandwidth()}, None),
    ({"bandwidth": 0.5}, "one value per feature"),
    ({"bandwidth": [0.4, 0.2, 1.5, 0.5, 0.6]}, r"lambda of the LiRacine kernel, in \[0, 1\]"),
    ({"bandwidth": [0.4, 0.2, 0.3, 0.5, 0.6], "categorical_kernel": "aitchison_aitken"},
     None),
    ({"bandwidth": [0.4, 0.2, 0.9, 0.5, 0.6], "categorical_kernel": "aitchison_aitken"},
     r"in \[0, 0.666667\]"),
    ({"bandwidth": LeaveOneOutBandwidth(form="full")}, "form='full'"),
])
def test_refused_combinations(params, match):
    X, _, y = _table()
    reg = NadarayaWatsonRegressor(**params)
    if match is None:
        reg.fit(X, y)
        return
    with pytest.raises(ValueError, match=match):
        reg.fit(X, y)


@pytest.mark.parametrize("missing", [
    pd.Series(["a", pd.NA] * 60, dtype="string"),  # pandas' nullable strings
    pd.Series(["a", pd.NA] * 60, dtype=object),
    pd.Series([1, pd.NA] * 60, dtype="Int64"),
    pd.Categorical(["a", np.nan] * 60),
])
def test_every_spelling_of_missing_is_refused_as_missing(missing):
    X, Xn, y = _table()
    with pytest.raises(ValueError, match="Categorical feature 2 has missing values"):
        NadarayaWatsonRegressor(bandwidth=BANDWIDTH, categorical_features=[2]).fit(
            X.assign(u1=missing), y)
    # The same column as numpy: an object array holding pandas' NA, or None.
    column = np.array(["a", pd.NA if isinstance(missing, pd.Series) else None] * 60,
                      dtype=object)
    Xo = Xn.astype(object)
    Xo[:, 2] = column
    with pytest.raises(ValueError, match="Categorical feature 2 has missing values"):
        NadarayaWatsonRegressor(bandwidth=BANDWIDTH, categorical_features=[2]).fit(Xo, y)


def test_bad_categorical_input():
    X, Xn, y = _table()
    with pytest.raises(ValueError, match="missing values"):
        NadarayaWatsonRegressor(bandwidth=BANDWIDTH).fit(
            X.assign(u1=pd.Categorical(["a", None] * 60)), y)
    with pytest.raises(ValueError, match="needs X as a pandas DataFrame"):
        NadarayaWatsonRegressor(categorical_features=["u1"]).fit(Xn, y)
    with pytest.raises(ValueError, match="not columns of X"):
        NadarayaWatsonRegressor(categorical_features=["nope"]).fit(X, y)
    with pytest.raises(ValueError, match=r"indices must be in \[0, 4\]"):
        NadarayaWatsonRegressor(categorical_features=[7]).fit(Xn, y)
    reg = NadarayaWatsonRegressor(bandwidth=BANDWIDTH).fit(X, y)
    with pytest.raises(ValueError, match="Ordered feature 4 has values"):
        reg.predict(X.assign(o1=pd.Categorical([9] * 120, categories=[9], ordered=True)))


# -- adaptive bandwidths: the continuous features' neighbors and bandwidths, the
# categories' factor kept


def _kth_distance(points, queries, w, k, other_locations=False):
    """Per query, written out: the distance at which the nearest points (at another
    location than the query, with ``other_locations``) hold k units of weight."""
    out = []
    for q in queries:
        d = np.sqrt(((points - q) ** 2).sum(1))
        order = np.argsort(d, kind="stable")
        if other_locations:
            order = order[d[order] > 0]
        out.append(d[order][np.searchsorted(np.cumsum(w[order]), k * (1 - 1e-9))])
    return np.array(out)


@pytest.mark.parametrize("categorical_kernel", ["li_racine", "aitchison_aitken"])
@pytest.mark.parametrize("kind", ["balloon", "sample_point"])
def test_adaptive_bandwidths_measure_the_continuous_features(kind, categorical_kernel):
    X, numbers, y = _table(n=90, seed=5)
    w = np.random.default_rng(7).uniform(0.5, 2.0, len(y))
    Q, q_numbers = X.iloc[:25].copy(), numbers[:25].copy()
    Q["u2"] = Q["u2"].cat.add_categories([7])  # a category not seen at fit
    Q.loc[Q.index[:4], "u2"], q_numbers[:4, 3] = 7, 7
    k, c = 6, 0.7
    reg = NadarayaWatsonRegressor(
        bandwidth=AdaptiveBandwidth(kind, n_neighbors=k, scale=c, base=BANDWIDTH),
        categorical_kernel=categorical_kernel).fit(X, y, sample_weight=w)
    # Written out: the Gaussian of the continuous features at the adaptive bandwidth
    # (their own k-th neighbor distances, the categories not in them), times the
    # categories' factor at their lambda (the continuous part of _product_kernel at an
    # infinite bandwidth).
    keys, queries = numbers[:, :2] / BANDWIDTH[:2], q_numbers[:, :2] / BANDWIDTH[:2]
    d = np.sqrt(((queries[:, None] - keys[None]) ** 2).sum(-1))  # (m, n)
    factor = _product_kernel(q_numbers, numbers, [1e150, 1e150, *BANDWIDTH[2:]],
                             categorical_kernel)
    if kind == "balloon":
        h = c * _kth_distance(keys, queries, w, k)[:, None]
        weights = w * np.exp(-0.5 * (d / h) ** 2)
    else:
        h = c * _kth_distance(keys, keys, w, k, other_locations=True)
        weights = w * h**-2.0 * np.exp(-0.5 * (d / h) ** 2)  # r = 2 coordinates
    weights *= factor
    np.testing.assert_allclose(reg.predict(Q), weights @ y / weights.sum(1), rtol=1e-12)


@pytest.mark.parametrize("degree", [0, 1])
def test_adaptive_leave_one_out_with_categorical_features_equals_refits(degree):
    X, _, y = _table(n=40, seed=6)
    w = np.random.default_rng(8).uniform(0.5, 2.0, len(y))
    cv = NadarayaWatsonRegressorCV(bandwidth_kinds=["balloon", "sample_point"],
                                   degree=degree, bounded=False).fit(X, y, sample_weight=w)
    results = cv.cv_results_
    for kind in ("balloon", "sample_point"):
        # Its smallest and largest k, and the best.
        candidates = np.flatnonzero(results["kind"] == kind)
        ks = results["n_neighbors"][candidates]
        for i in {candidates[np.argmin(ks)], candidates[np.argmax(ks)],
                  candidates[np.argmax(results["mean_test_score"][candidates])]}:
            bandwidth = AdaptiveBandwidth(
                kind, n_neighbors=int(results["n_neighbors"][i]),
                scale=float(results["scale"][i]),
                base=np.asarray(results["param_bandwidth"][i], dtype=float))
            np.testing.assert_allclose(
                -results["mean_test_score"][i],
                _refit_loss(X, y, w, bandwidth, "li_racine", degree), rtol=1e-8)
    assert cv.bandwidth_kind_ in ("balloon", "sample_point")


def test_adaptive_bandwidths_need_a_continuous_feature():
    X, _, y = _table(n=40)
    X = X[["u1", "u2", "o1"]]
    for est in (NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth()),
                NadarayaWatsonRegressorCV(bandwidth_kinds=["balloon"])):
        with pytest.raises(ValueError, match="every feature is categorical"):
            est.fit(X, y)
    # The CV estimator's default families fall back to fixed bandwidths.
    assert NadarayaWatsonRegressorCV().fit(X, y).bandwidth_kind_ == "fixed"


@pytest.mark.parametrize("kind", ["balloon", "sample_point"])
def test_adaptive_attention_weights_equal_refits(kind):
    # attention_weights_: each training point's attention without it, as a refit's.
    X, _, y = _table(n=40, seed=5)
    bandwidth = AdaptiveBandwidth(kind, n_neighbors=5, scale=0.7, base=BANDWIDTH)
    attention = np.asarray(NadarayaWatsonRegressor(bandwidth=bandwidth).fit(X, y)
                           .attention_weights_)
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        refit = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(X[keep], y[keep])
        _, row = refit.predict(X.iloc[[i]], return_attention=True)
        np.testing.assert_allclose(attention[i], np.insert(np.asarray(row)[0], i, 0.0),
                                   rtol=0, atol=1e-14)


@pytest.mark.parametrize("kind", ["li_racine", "aitchison_aitken"])
@pytest.mark.parametrize("leave_out", ["row", "input"])
def test_the_odds_sweep_in_one_pass_equals_each_candidate(kind, leave_out):
    # The descent's sweep of a categorical feature's odds: every candidate from one pass
    # (the attention without the feature, pooled per category) equals its own pass.
    import torch

    from sklearn_nw._loo_objective import _ODDS_SWEEP, Objective

    X, _, y = _table(n=90, seed=3)
    X, y = pd.concat([X, X.iloc[:60]]), np.concatenate([y, y[:60] + 0.5])  # repeated inputs
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    reg = NadarayaWatsonRegressor(bandwidth=BANDWIDTH, categorical_kernel=kind)
    reg.fit(X, y, sample_weight=w)
    loo = reg._training(reg._values(), classifier=False).leave_one_out_set("a test",
                                                                           leave_out)
    t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))
    settings = (reg.kernel_, "squared_error", 1024)
    objective = Objective(t(loo.X), t(loo.values), t(loo.log_weight),
                          t(loo.self_log_weight), *settings, categorical=reg._categorical,
                          polynomial_columns=loo.polynomial_columns)
    rows = torch.arange(len(loo.X))
    # Under the row rule, also with the inputs as keys and the distinct rows as queries.
    by_input = input_queries(loo)
    assert (by_input is None) == (leave_out == "input")
    if by_input is not None:
        x, v, log_w, self_log_w, key, terms = by_input.tensors(t)
        queries = Objective(x, v, log_w, self_log_w, *settings, queries=(key, terms),
                            categorical=reg._categorical,
                            polynomial_columns=loo.polynomial_columns)
    for j in (2, 3, 4):
        candidates = np.repeat(reg._scales[None], len(_ODDS_SWEEP), axis=0)
        candidates[:, j] = _ODDS_SWEEP
        expected = objective.grid(candidates, rows)
        np.testing.assert_allclose(objective.odds_losses(j, candidates, rows), expected,
                                   rtol=1e-12)
        if by_input is not None:
            np.testing.assert_allclose(queries.odds_losses(j, candidates, rows), expected,
                                       rtol=1e-12)
            np.testing.assert_allclose(queries.grid(candidates, rows), expected,
                                       rtol=1e-12)


def test_the_grid_center_of_a_large_set_is_learned_on_a_subsample(monkeypatch):
    # Above FULL_BATCH_MAX rows the CV grid's center is learned full batch on
    # _CENTER_ROWS of them (seed 0); the grid's points are multiples of it.
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    import sklearn_nw._selection_grid as selection_grid

    monkeypatch.setattr(selection_grid, "FULL_BATCH_MAX", 100)
    monkeypatch.setattr(selection_grid, "_CENTER_ROWS", 60)
    X, _, y = _table(n=120, seed=2)
    cv = NadarayaWatsonRegressorCV(bandwidth_kinds=["fixed"], degree=0).fit(X, y)
    keep = np.sort(np.random.default_rng(0).choice(120, 60, replace=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        center = NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(
            tol=selection_grid._CENTER_TOL)).fit(X.iloc[keep], y[keep]).bandwidth_
        everyone = NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(
            tol=selection_grid._CENTER_TOL)).fit(X, y).bandwidth_
    grid = np.array([np.asarray(p, dtype=float) for p in cv.cv_results_["param_bandwidth"]])
    # The continuous features' bandwidths keep the center's ratio (the odds move too).
    np.testing.assert_allclose(grid[:, 0] / grid[:, 1], center[0] / center[1], rtol=1e-6)
    assert not np.isclose(everyone[0] / everyone[1], center[0] / center[1], rtol=1e-3)


def _monomials(u, degree):
    """[1, u_k, u_k u_l (k <= l)] up to ``degree``."""
    out = [1.0] + (list(u) if degree >= 1 else [])
    if degree >= 2:
        out += [u[k] * u[m] for k in range(len(u)) for m in range(k, len(u))]
    return np.array(out)


def _mixed_bias_corrected(Xn, y, Q, h, b, degree, vce, J=3):
    """Conventional and bias-corrected estimates and standard errors from the
    definitions (as lprobust, in several features): the product kernel's weights at
    ``h`` and at ``b`` (one value per feature, lambda at the categorical ones), the
    polynomials in the two continuous features in units of h; ``"nn"`` compares a window
    point with its nearest others at the distance whose Gaussian is the product kernel,
    ``sqrt(-2 log K)``."""
    p, h_c = degree, np.asarray(h[:2])
    K_h, K_b = _product_kernel(Q, Xn, h, "li_racine"), _product_kernel(Q, Xn, b, "li_racine")
    with np.errstate(divide="ignore"):
        between = np.sqrt(-2 * np.log(_product_kernel(Xn, Xn, h, "li_racine")))  # (n, n)
    rows = []
    for q, kh, kb in zip(Q, K_h, K_b):
        U = (Xn[:, :2] - q[:2]) / h_c
        win = np.flatnonzero((kh > 0) | (kb > 0))
        zp = np.array([_monomials(U[i], p) for i in win])
        zq = np.array([_monomials(U[i], p + 1) for i in win])
        P, m = zp.shape[1], len(win)
        Gp_inv = np.linalg.inv((kh[win, None] * zp).T @ zp)
        Gq_inv = np.linalg.inv((kb[win, None] * zq).T @ zq)
        beta_p = Gp_inv @ (kh[win, None] * zp).T @ y[win]
        beta_q = Gq_inv @ (kb[win, None] * zq).T @ y[win]
        moments = (kh[win, None] * zp).T @ zq[:, P:]
        l_cl = (Gp_inv @ (kh[win, None] * zp).T)[0]
        l_bc = (Gp_inv @ ((kh[win, None] * zp).T
                          - moments @ (Gq_inv @ (kb[win, None] * zq).T)[P:]))[0]
        if vce == "nn":
            r_h = np.empty(m)
            for a, i in enumerate(win):
                others = win[win != i]
                reach = np.sort(between[i, others])[min(J, m - 1) - 1]
                near = others[between[i, others] <= reach]
                r_h[a] = np.sqrt(len(near) / (len(near) + 1)) * (y[i] - y[near].mean())
            r_b = r_h
        else:
            leverage = kh[win] * np.einsum("ip,pq,iq->i", zp, Gp_inv, zp)
            scale = {"hc0": 1.0, "hc3": 1 / (1 - leverage)}[vce]
            r_h, r_b = scale * (y[win] - zp @ beta_p), scale * (y[win] - zq @ beta_q)
        rows.append([l_cl @ y[win], l_bc @ y[win], np.sqrt(np.sum(l_cl**2 * r_h**2)),
                     np.sqrt(np.sum(l_bc**2 * r_b**2))])
    return np.array(rows).T  # tau_cl, tau_bc, se_cl, se_rb


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("variance", ["nn", "hc0", "hc3"])
@pytest.mark.parametrize("bias_bandwidth", [None, 0.7, [0.5, 0.35, 0.2, 0.6, 0.4]])
def test_bias_corrected_intervals_with_categorical_features(degree, variance,
                                                             bias_bandwidth):
    # np's rule: the polynomials in the continuous features, the categories' kernel on
    # the weights (at the fit's lambda, or at those of a bias bandwidth given per
    # feature as bandwidth_ is).
    X, Xn, y = _table(n=90, seed=6)
    model = NadarayaWatsonRegressor(bandwidth=BANDWIDTH, degree=degree,
                                    residual_variance=variance).fit(X, y)
    b = (BANDWIDTH if bias_bandwidth is None
         else [bias_bandwidth] * 2 + BANDWIDTH[2:] if np.ndim(bias_bandwidth) == 0
         else bias_bandwidth)
    expected = _mixed_bias_corrected(Xn, y, Xn[:12], BANDWIDTH, b, degree, variance)
    for k, correction in enumerate(["conventional", "robust"]):
        center, _, std = model.predict_confidence_interval(
            X.iloc[:12], bias_correction=correction, bias_bandwidth=bias_bandwidth,
            return_std=True)
        np.testing.assert_allclose(center, expected[k], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(std, expected[2 + k], rtol=1e-8)


@pytest.mark.parametrize("bias_bandwidth", [-1.0, [0.5, 0.3], [0.5, 0.3, 0.2, 0.6, 2.0],
                                            "wide"])
def test_bias_bandwidth_with_categorical_features_refuses_bad_values(bias_bandwidth):
    X, _, y = _table(n=60)
    model = NadarayaWatsonRegressor(bandwidth=BANDWIDTH, degree=1).fit(X, y)
    with pytest.raises(ValueError, match="bias_bandwidth must be"):
        model.predict_confidence_interval(X.iloc[:3], bias_bandwidth=bias_bandwidth)


def test_jackknife_plus_on_the_k_nearest_with_categorical_features_equals_refits():
    # The k nearest in the product kernel's metric: without one of them a query's fit
    # takes the next one in, as the refit on the other rows (their categories) does.
    import math

    X, _, y = _table(n=36, seed=4)
    make = lambda: NadarayaWatsonRegressor(bandwidth=BANDWIDTH, n_neighbors=6)
    _, intervals = make().fit(X, y).predict_interval(X.iloc[:5], confidence_level=0.75)
    n = len(y)
    fits, residuals = np.empty((5, n)), np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        refit = make().fit(X.iloc[keep], y[keep])
        fits[:, i] = refit.predict(X.iloc[:5])
        residuals[i] = abs(y[i] - refit.predict(X.iloc[[i]])[0])
    low = np.sort(fits - residuals, 1)[:, math.floor(0.25 * (n + 1)) - 1]
    high = np.sort(fits + residuals, 1)[:, math.ceil(0.75 * (n + 1)) - 1]
    np.testing.assert_allclose(intervals[:, 0, 0], low, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(intervals[:, 1, 0], high, rtol=1e-10, atol=1e-12)
