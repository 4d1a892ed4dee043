"""NadarayaWatsonClassifier against the loop oracle's weighted class frequencies; attention,
numerics and integration with scikit-learn."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import sklearn
from _oracle import COMPACT, PROFILES, nearest_index, nw_class_proba, nw_weights
from _state import assert_same_state, snapshot
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_nw import EmptyNeighborhoodWarning, NadarayaWatsonClassifier
from sklearn_nw.kernels import SymmetricBeta

H = np.array([0.45, 0.6])
CLASSES = np.array(["ant", "bee", "cat"])


def make_data(n=30, n_queries=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    Q = rng.uniform(0.1, 0.9, size=(n_queries, 2))
    # Classes that depend on the position, with some noise, as strings.
    score = X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)
    labels = CLASSES[np.digitize(score, [0.5, 1.0])]
    w = rng.uniform(0.5, 2.0, size=n)
    return X, labels, Q, w


@pytest.mark.parametrize("kernel", sorted(PROFILES))
def test_predict_proba_matches_oracle_every_kernel(kernel):
    X, labels, Q, w = make_data()
    clf = NadarayaWatsonClassifier(kernel=kernel, bandwidth=H).fit(X, labels, sample_weight=w)
    assert_array_equal(clf.classes_, CLASSES)
    expected = nw_class_proba(Q, X, labels, CLASSES, H, PROFILES[kernel], w)
    proba = clf.predict_proba(Q)
    assert proba.shape == (10, 3)
    assert proba.dtype == np.float64
    assert_allclose(proba, expected, rtol=1e-10, atol=1e-12)
    assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    # predict is the argmax of predict_proba, as a label from classes_.
    y_pred = clf.predict(Q)
    assert_array_equal(y_pred, clf.classes_[np.argmax(proba, axis=1)])
    gap = np.sort(expected, axis=1)[:, -1] - np.sort(expected, axis=1)[:, -2]
    clear = gap > 1e-9
    assert_array_equal(y_pred[clear], CLASSES[np.argmax(expected, axis=1)][clear])
    with np.errstate(divide="ignore"):
        assert_array_equal(clf.predict_log_proba(Q), np.log(proba))


def test_predict_log_proba_has_minus_inf_for_absent_classes():
    X = np.array([[0.0], [0.1], [0.2], [5.0], [5.1]])
    y = np.array([0, 0, 1, 2, 2])
    clf = NadarayaWatsonClassifier(kernel="epanechnikov", bandwidth=0.5).fit(X, y)
    expected = nw_class_proba([[0.05]], X, y, [0, 1, 2], 0.5, PROFILES["epanechnikov"])
    assert expected[0, 2] == 0.0
    assert_allclose(clf.predict_proba([[0.05]]), expected, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide-by-zero warning
        log_proba = clf.predict_log_proba([[0.05]])
    assert log_proba[0, 2] == -np.inf
    assert_allclose(log_proba[0, :2], np.log(expected[0, :2]), rtol=1e-12)


def test_integer_labels_and_two_classes():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(25, 2))
    y = np.where(X[:, 0] > 0.5, 7, -3)
    Q = rng.uniform(0.1, 0.9, size=(8, 2))
    clf = NadarayaWatsonClassifier(kernel="tricube", bandwidth=H).fit(X, y)
    assert_array_equal(clf.classes_, [-3, 7])
    expected = nw_class_proba(Q, X, y, [-3, 7], H, PROFILES["tricube"])
    assert_allclose(clf.predict_proba(Q), expected, rtol=1e-10, atol=1e-12)
    assert clf.predict(Q).dtype == y.dtype


def test_single_class():
    X = np.array([[0.0], [1.0], [2.0]])
    clf = NadarayaWatsonClassifier().fit(X, ["only"] * 3)
    assert_array_equal(clf.predict_proba([[0.5], [9.0]]), [[1.0], [1.0]])
    assert_array_equal(clf.predict([[0.5]]), ["only"])


# -- attention -----------------------------------------------------------------------------


def test_return_attention_dense():
    X, labels, Q, w = make_data(seed=2)
    clf = NadarayaWatsonClassifier(bandwidth=H).fit(X, labels, sample_weight=w)
    proba, A = clf.predict_proba(Q, return_attention=True)
    assert isinstance(A, np.ndarray)
    assert A.shape == (10, 30)
    assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12)
    assert_allclose(A, nw_weights(Q, X, H, PROFILES["gaussian"], w), rtol=1e-10, atol=1e-14)
    one_hot = (labels[:, None] == CLASSES[None, :]).astype(float)
    assert_allclose(proba, A @ one_hot, rtol=1e-12, atol=1e-14)
    y_pred, A2 = clf.predict(Q, return_attention=True)
    assert_array_equal(A2, A)
    assert_array_equal(y_pred, clf.predict(Q))


@pytest.mark.parametrize("kernel", ["epanechnikov", "tophat", "cosine"])
def test_return_attention_sparse(kernel):
    X, labels, Q, w = make_data(seed=3)
    clf = NadarayaWatsonClassifier(kernel=kernel, bandwidth=H).fit(X, labels, sample_weight=w)
    proba, A = clf.predict_proba(Q, return_attention=True)
    assert sp.issparse(A) and A.format == "csr"
    assert_allclose(A.toarray(), nw_weights(Q, X, H, PROFILES[kernel], w), rtol=1e-10, atol=1e-14)
    one_hot = (labels[:, None] == CLASSES[None, :]).astype(float)
    assert_allclose(proba, A @ one_hot, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kernel", ["gaussian", "biweight"])
def test_attention_weights(kernel, dense):
    X, labels, _, _ = make_data(n=20, seed=4)
    w = np.array([1, 2, 1, 1, 3, 1, 0, 1, 2, 1, 1, 1, 1, 4, 1, 1, 2, 1, 1, 1], dtype=float)
    h = 2.0 * H
    clf = NadarayaWatsonClassifier(kernel=kernel, bandwidth=h).fit(X, labels, sample_weight=w)
    A = clf.attention_weights_
    assert sp.issparse(A) == (kernel in COMPACT)
    A = dense(A)
    assert A.shape == (20, 20)
    expected = nw_weights(X, X, h, PROFILES[kernel], sample_weight=w, leave_one_out=True)
    assert_allclose(A, expected, rtol=1e-10, atol=1e-14)
    assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(np.diag(A)[w <= 1] == 0.0)


def test_attention_weights_before_fit():
    clf = NadarayaWatsonClassifier()
    with pytest.raises(NotFittedError):
        _ = clf.attention_weights_
    assert not hasattr(clf, "attention_weights_")


# -- numerics ------------------------------------------------------------------------------


def test_far_query_gets_nearest_class():
    X, labels, _, _ = make_data(seed=5)
    Q = np.array([[1e6, -1e6], [-4e5, 2e5]])
    clf = NadarayaWatsonClassifier(bandwidth=0.3).fit(X, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proba = clf.predict_proba(Q)
        y_pred = clf.predict(Q)
    nearest = labels[[nearest_index(q, X) for q in Q]]
    assert_array_equal(y_pred, nearest)
    assert_allclose(proba, (nearest[:, None] == CLASSES[None, :]).astype(float), atol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "linear"])
def test_tiny_bandwidth_is_nearest_neighbor(kernel):
    X, labels, Q, _ = make_data(seed=6)
    clf = NadarayaWatsonClassifier(kernel=kernel, bandwidth=1e-12).fit(X, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        y_pred = clf.predict(Q)
    assert_array_equal(y_pred, labels[[nearest_index(q, X) for q in Q]])


def test_query_outside_every_support_warns_and_gets_nearest_class():
    X, labels, _, _ = make_data(seed=7)
    Q = np.array([[0.5, 0.5], [-4.0, 9.0]])
    clf = NadarayaWatsonClassifier(kernel="triweight", bandwidth=0.5).fit(X, labels)
    with pytest.warns(EmptyNeighborhoodWarning, match="1 of 2 queries"):
        proba = clf.predict_proba(Q)
    assert np.all(np.isfinite(proba))
    expected_far = (labels[nearest_index(Q[1], X)] == CLASSES).astype(float)
    assert_allclose(proba[1], expected_far)
    assert_allclose(
        proba[:1], nw_class_proba(Q[:1], X, labels, CLASSES, 0.5, PROFILES["triweight"]),
        rtol=1e-10,
    )


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_float32(kernel):
    X, labels, Q, w = make_data(seed=8)
    clf64 = NadarayaWatsonClassifier(kernel=kernel, bandwidth=H).fit(X, labels, sample_weight=w)
    clf32 = NadarayaWatsonClassifier(kernel=kernel, bandwidth=H).fit(
        X.astype(np.float32), labels, sample_weight=w)
    proba32 = clf32.predict_proba(Q.astype(np.float32))
    assert proba32.dtype == np.float32
    assert_allclose(proba32, clf64.predict_proba(Q), rtol=1e-4, atol=1e-5)


def test_offset_data():
    X, labels, Q, _ = make_data(seed=9)
    offset = np.array([-1e5, 1e5])
    a = NadarayaWatsonClassifier(bandwidth=H).fit(X, labels).predict_proba(Q)
    b = NadarayaWatsonClassifier(bandwidth=H).fit(X + offset, labels).predict_proba(Q + offset)
    assert_allclose(b, a, rtol=1e-9, atol=1e-12)


# -- scikit-learn integration --------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn_nw.EmptyNeighborhoodWarning")
def test_grid_search_in_pipeline_picks_the_best_grid_point():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(60, 2)) * [1.0, 5.0]
    y = (X[:, 0] + 0.2 * X[:, 1] + 0.5 * rng.normal(size=60) > 0).astype(int)
    bandwidths = [0.3, 1.0, "scott"]
    kernels = ["gaussian", "epanechnikov"]
    cv = StratifiedKFold(n_splits=4, shuffle=True, random_state=0)
    scores = {}
    for bandwidth in bandwidths:
        for kernel in kernels:
            pipe = make_pipeline(StandardScaler(),
                                 NadarayaWatsonClassifier(kernel=kernel, bandwidth=bandwidth))
            scores[bandwidth, kernel] = cross_val_score(
                pipe, X, y, cv=cv, scoring="neg_log_loss"
            ).mean()
    best = max(scores, key=scores.get)
    ranked = sorted(scores.values())
    assert ranked[-1] - ranked[-2] > 1e-6
    search = GridSearchCV(
        make_pipeline(StandardScaler(), NadarayaWatsonClassifier()),
        {"nadarayawatsonclassifier__bandwidth": bandwidths,
         "nadarayawatsonclassifier__kernel": kernels},
        cv=cv,
        scoring="neg_log_loss",
    ).fit(X, y)
    assert search.best_params_ == {"nadarayawatsonclassifier__bandwidth": best[0],
                                   "nadarayawatsonclassifier__kernel": best[1]}


def test_grid_search_over_kernel_parameter():
    X, labels, _, _ = make_data(n=45, seed=11)
    search = GridSearchCV(
        NadarayaWatsonClassifier(bandwidth=2.0),
        {"kernel": [SymmetricBeta()], "kernel__power": [1, 2, 3]},
        cv=3,
    ).fit(X, labels)
    assert list(search.cv_results_["param_kernel__power"]) == [1, 2, 3]
    assert search.best_estimator_.kernel_.power == search.best_params_["kernel__power"]


def test_dataframe_sets_feature_names():
    X, labels, Q, _ = make_data(seed=12)
    clf = NadarayaWatsonClassifier(bandwidth=H).fit(pd.DataFrame(X, columns=["a", "b"]), labels)
    assert_array_equal(clf.feature_names_in_, ["a", "b"])
    proba = clf.predict_proba(pd.DataFrame(Q, columns=["a", "b"]))
    assert_allclose(
        proba, nw_class_proba(Q, X, labels, CLASSES, H, PROFILES["gaussian"]), rtol=1e-10
    )
    # pandas Series of labels
    clf = NadarayaWatsonClassifier(bandwidth=H).fit(X, pd.Series(labels))
    assert_array_equal(clf.classes_, CLASSES)


def _scaled_weighted_proba(X, labels, Q, w):
    scaler = StandardScaler().fit(X)
    clf = NadarayaWatsonClassifier(bandwidth=0.8)
    return clf.fit(scaler.transform(X), labels, sample_weight=w).predict_proba(scaler.transform(Q))


def test_sample_weight_through_pipeline_and_routing():
    X, labels, Q, w = make_data(seed=13)
    expected = _scaled_weighted_proba(X, labels, Q, w)
    pipe = make_pipeline(StandardScaler(), NadarayaWatsonClassifier(bandwidth=0.8))
    got = pipe.fit(X, labels, nadarayawatsonclassifier__sample_weight=w).predict_proba(Q)
    assert_allclose(got, expected, rtol=1e-12)
    assert not np.allclose(pipe.fit(X, labels).predict_proba(Q), expected, rtol=1e-6)
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = make_pipeline(
            StandardScaler().set_fit_request(sample_weight=False),
            NadarayaWatsonClassifier(bandwidth=0.8).set_fit_request(sample_weight=True),
        )
        got = pipe.fit(X, labels, sample_weight=w).predict_proba(Q)
    assert_allclose(got, expected, rtol=1e-12)


def test_pickle_round_trip():
    X, labels, Q, w = make_data(seed=14)
    clf = NadarayaWatsonClassifier(kernel="cosine", bandwidth=H).fit(X, labels, sample_weight=w)
    loaded = pickle.loads(pickle.dumps(clf))
    assert_array_equal(loaded.predict_proba(Q), clf.predict_proba(Q))
    assert_array_equal(loaded.predict(Q), clf.predict(Q))
    assert_array_equal(loaded.classes_, clf.classes_)


def test_user_arrays_not_modified_and_not_shared():
    X, labels, Q, w = make_data(seed=15)
    copies = [a.copy() for a in (X, labels, Q, w)]
    clf = NadarayaWatsonClassifier(kernel="tophat", bandwidth=H).fit(X, labels, sample_weight=w)
    before = clf.predict_proba(Q)
    clf.predict(Q, return_attention=True)
    clf.predict_log_proba(Q)
    _ = clf.attention_weights_
    for original, kept in zip((X, labels, Q, w), copies):
        assert_array_equal(original, kept)
    X[:] = 0.0
    labels[:] = "ant"
    w[:] = 1.0
    assert_array_equal(clf.predict_proba(Q), before)


def test_predict_does_not_change_the_estimator():
    X, labels, Q, w = make_data(seed=16)
    clf = NadarayaWatsonClassifier(kernel="epanechnikov", bandwidth=H).fit(
        X, labels, sample_weight=w
    )
    shallow, deep = snapshot(clf)
    clf.predict(Q)
    clf.predict_proba(Q, return_attention=True)
    clf.predict_log_proba(Q)
    clf.score(Q, clf.predict(Q))
    _ = clf.attention_weights_
    assert_same_state(clf, shallow, deep)
