"""The unit leave-one-out leaves out (``leave_out``): a row (the default) or every row at an
input, checked against explicit refits on data whose inputs repeat, for every family the
CV estimators search and for the learned bandwidth's descent."""

import warnings

import numpy as np
import pytest

from sklearn_nw import (
    AdaptiveBandwidth,
    LeaveOneOutBandwidth,
    LocalFitWarning,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)


def _table(seed=0, copies_only=False):
    """A small table whose inputs repeat: 12 distinct inputs, 36 rows, some whole rows
    duplicated (same input, target and weight) and others at a shared input with other
    targets, and weights that are not all 1. ``copies_only``: 30 distinct inputs, and
    whole rows duplicated only (the k nearest then never split rows of one input with
    different targets, a tie the refits break in their own order)."""
    rng = np.random.default_rng(seed)
    inputs = rng.normal(size=(12, 2))
    X = rng.normal(size=(30, 2)) if copies_only else inputs[rng.integers(0, 12, 30)]
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(scale=0.3, size=30)
    w = rng.choice([1.0, 1.0, 2.0, 0.5], size=30)
    X, y, w = np.vstack([X, X[:6]]), np.concatenate([y, y[:6]]), np.concatenate([w, w[:6]])
    return X, y, w


def _refit_predictions(make, X, y, w, leave_out, method="predict"):
    """Each row predicted by a refit without it (``"row"``) or without every row at its
    input (``"input"``)."""
    out = []
    for i in range(len(X)):
        keep = np.ones(len(X), bool)
        if leave_out == "row":
            keep[i] = False
        else:
            keep &= ~(X == X[i]).all(1)
        model = make().fit(X[keep], y[keep], sample_weight=w[keep])
        with warnings.catch_warnings():
            # A local fit at a small candidate bandwidth is singular for some left-out
            # rows (the documented local-constant fallback, which leave-one-out takes too).
            warnings.simplefilter("ignore", LocalFitWarning)
            out.append(getattr(model, method)(X[i : i + 1])[0])
    return np.array(out)


def _plain(params):
    """The plain regressor of one of a CV estimator's candidates."""
    params = dict(params)
    kind = params.pop("kind")
    if kind != "fixed":
        params["bandwidth"] = AdaptiveBandwidth(
            kind, n_neighbors=params.pop("n_neighbors"), scale=params.pop("scale"),
            base=params["bandwidth"])
    return NadarayaWatsonRegressor(**params)


@pytest.mark.parametrize("leave_out", ["row", "input"])
@pytest.mark.parametrize("search", [
    {"degree": 0},
    {"degree": 1},
    {"degree": 2, "bandwidth_kinds": ["fixed"]},
    {"degree": 0, "n_neighbors": 5},
    {"degree": 1, "n_neighbors": 8},
    {"degree": 0, "bandwidth_kinds": ["balloon", "sample_point"]},
])
def test_cv_scores_equal_refits_of_every_family(leave_out, search):
    X, y, w = _table(copies_only="n_neighbors" in search)
    cv = NadarayaWatsonRegressorCV(leave_out=leave_out, bounded=False, **search).fit(
        X, y, sample_weight=w)
    params = cv.cv_results_["params"]
    # Every candidate of a few families (the searches hold dozens).
    picks = np.unique(np.linspace(0, len(params) - 1, 7).astype(int))
    for i in picks:
        plain = {**params[i]}
        if "n_neighbors" in search:
            plain["n_neighbors"] = search["n_neighbors"]
            plain.pop("kind")
            model = lambda p=plain: NadarayaWatsonRegressor(**p)
        else:
            model = lambda p=plain: _plain(p)
        preds = _refit_predictions(model, X, y, w, leave_out)
        loss = np.sum(w * (preds - y) ** 2) / w.sum()
        np.testing.assert_allclose(-cv.cv_results_["mean_test_score"][i], loss,
                                   rtol=1e-9, err_msg=str(params[i]))


@pytest.mark.parametrize("leave_out", ["row", "input"])
def test_classifier_scores_equal_refits(leave_out):
    X, y, w = _table()
    labels = (y > np.median(y)).astype(int)
    grid = [0.2, 0.6, 2.0]
    clf = NadarayaWatsonClassifierCV(bandwidths=grid, leave_out=leave_out).fit(
        X, labels, sample_weight=w)
    from sklearn_nw import NadarayaWatsonClassifier

    for i, h in enumerate(grid):
        proba = _refit_predictions(lambda h=h: NadarayaWatsonClassifier(bandwidth=h), X,
                                   labels, w, leave_out, "predict_proba")
        hit = np.maximum(proba[np.arange(len(X)), labels], np.finfo(np.float64).eps)
        np.testing.assert_allclose(-clf.cv_results_["mean_test_score"][i],
                                   -np.sum(w * np.log(hit)) / w.sum(), rtol=1e-9)


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("leave_out", ["row", "input"])
def test_learned_loss_is_the_loss_of_refits(degree, leave_out):
    X, y, w = _table(1)
    reg = NadarayaWatsonRegressor(
        bandwidth=LeaveOneOutBandwidth(leave_out=leave_out), degree=degree,
        bounded=False).fit(X, y, sample_weight=w)
    h = reg.bandwidth_
    preds = _refit_predictions(
        lambda: NadarayaWatsonRegressor(bandwidth=h, degree=degree, bounded=False),
        X, y, w, leave_out)
    np.testing.assert_allclose(reg.loss_curve_[-1], np.sum(w * (preds - y) ** 2) / w.sum(),
                               rtol=1e-8)


def test_the_rules_differ_only_where_inputs_repeat():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 3))
    y = np.sin(X[:, 0]) + rng.normal(scale=0.2, size=60)
    w = rng.uniform(0.5, 2.0, 60)
    by_row = NadarayaWatsonRegressorCV(leave_out="row").fit(X, y, sample_weight=w)
    by_input = NadarayaWatsonRegressorCV(leave_out="input").fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(by_row.cv_results_["mean_test_score"],
                                  by_input.cv_results_["mean_test_score"])
    # Where they repeat, the row rule lets the rows at a query's input predict it.
    X_rep, y_rep, w_rep = _table()
    scores = [NadarayaWatsonRegressorCV(bandwidths=[0.05], degree=0, leave_out=rule).fit(
        X_rep, y_rep, sample_weight=w_rep).best_score_ for rule in ("row", "input")]
    assert scores[0] != scores[1]


def test_scaling_every_weight_changes_nothing_under_the_row_rule():
    X, y, w = _table()
    # Fixed bandwidths: adaptive ones count weights as rows (k nearest units).
    a = NadarayaWatsonRegressorCV(degree=0, bandwidth_kinds=["fixed"]).fit(
        X, y, sample_weight=w)
    b = NadarayaWatsonRegressorCV(degree=0, bandwidth_kinds=["fixed"]).fit(
        X, y, sample_weight=3.0 * w)
    np.testing.assert_allclose(a.cv_results_["mean_test_score"],
                               b.cv_results_["mean_test_score"], rtol=1e-12)


@pytest.mark.parametrize("make", [
    lambda v: NadarayaWatsonRegressorCV(leave_out=v),
    lambda v: NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(leave_out=v)),
])
def test_an_unknown_unit_is_refused(make):
    X, y, _ = _table()
    with pytest.raises(ValueError, match="leave_out"):
        make("group").fit(X, y)


def test_local_descent_past_the_full_batch_names_the_keys():
    # The local polynomials' learned bandwidth descends on the full batch only: past
    # 4,096 leave-one-out keys (here distinct rows) it says so and what to use instead.
    X = np.linspace(0.0, 1.0, 4097)[:, None]
    y = np.sin(6 * X[:, 0])
    with pytest.raises(ValueError, match=r"up to 4096 leave-one-out keys .* got 4097 keys"):
        NadarayaWatsonRegressor(bandwidth="loo", degree=1).fit(X, y)
