"""Leave-one-group-out through ``groups`` given to ``fit``: the exact leave-one-out of the
CV estimators (``cv=None``) and the learned bandwidth's loss leave each row's whole group
out, checked against explicit ``LeaveOneGroupOut`` refits and a loss written out here;
groups of one row, or of one input, are the two ``leave_out`` units; a bootstrap drawn as
rows is the distinct rows again when its copies are groups or weights; what is not
supported says so; ``groups`` are requested and routed as scikit-learn's metadata."""

import math
import warnings

import numpy as np
import pytest
import sklearn
import torch
from numpy.testing import assert_allclose
from sklearn.exceptions import UnsetMetadataPassedError
from sklearn.model_selection import GroupKFold, KFold, LeaveOneGroupOut, cross_validate

from sklearn_nw import (
    EmptyNeighborhoodWarning,
    LeaveOneOutBandwidth,
    LocalFitWarning,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw._engine_loo import loo_loss
from sklearn_nw.kernels import get_kernel

BANDWIDTHS = (0.15, 0.4, 1.0, 2.5)


def _table(n=36, d=1, seed=0, classes=False):
    """Inputs that repeat (some rows at one input with other targets), weights not all 1,
    and 7 groups that cut across inputs."""
    rng = np.random.default_rng(seed)
    inputs = rng.uniform(0, 6, (n - 8, d))
    X = np.vstack([inputs, inputs[:8]])
    y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=n)
    if classes:
        y = np.where(y > 0, "up", "down")
    w = rng.choice([1.0, 2.0, 0.5], size=n)
    groups = rng.integers(0, 7, n)
    return X, y, w, groups


def _group_refit_score(make, X, y, w, groups, classifier=False):
    """Minus the weighted mean loss of each row predicted by a refit without its group
    (scikit-learn's LeaveOneGroupOut), squared error or log-loss."""
    losses = np.empty(len(X))
    for train, test in LeaveOneGroupOut().split(X, y, groups):
        model = make().fit(X[train], y[train], sample_weight=w[train])
        with warnings.catch_warnings():
            # The documented fallbacks, which leave-one-out takes too: the nearest
            # training rows of a query with no kernel mass, a singular local fit's
            # Nadaraya-Watson value.
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            warnings.simplefilter("ignore", LocalFitWarning)
            if classifier:
                proba = model.predict_proba(X[test])
                hit = model.classes_[None, :] == y[test][:, None]
                losses[test] = -np.log(proba[hit])
            else:
                losses[test] = (model.predict(X[test]) - y[test]) ** 2
    return -np.average(losses, weights=w)


@pytest.mark.parametrize("case", [
    {"d": 1, "kernel": "gaussian"},  # isotropic Gaussian grid (squaring chains)
    {"d": 2, "kernel": "gaussian", "per_feature": True},  # hand-written Gaussian pass
    {"d": 1, "kernel": "epanechnikov"},  # generic logits, nearest fallback at 0.15
    {"d": 1, "kernel": "gaussian", "degree": 1},  # local-linear fits
    {"d": 1, "kernel": "gaussian", "degree": 2, "bounded": True},  # bounded quadratic fits
    {"d": 1, "kernel": "gaussian", "classes": True},  # log-loss
])
def test_cv_scores_equal_leave_one_group_out_refits(case):
    classifier = case.get("classes", False)
    X, y, w, groups = _table(d=case["d"], classes=classifier)
    bandwidths = (np.array([[0.3, 1.0], [0.6, 0.5], [1.5, 2.0]]) if case.get("per_feature")
                  else BANDWIDTHS)
    if classifier:
        cv = NadarayaWatsonClassifierCV(bandwidths, kernel=case["kernel"])

        def make(h):
            return NadarayaWatsonClassifier(bandwidth=h, kernel=case["kernel"])
    else:
        degree, bounded = case.get("degree", 0), case.get("bounded", False)
        cv = NadarayaWatsonRegressorCV(bandwidths, kernel=case["kernel"], degree=degree,
                                       bounded=bounded)

        def make(h):
            return NadarayaWatsonRegressor(bandwidth=h, kernel=case["kernel"], degree=degree,
                                           bounded=bounded)
    cv.fit(X, y, sample_weight=w, groups=groups)
    expected = [_group_refit_score(lambda h=h: make(h), X, y, w, groups, classifier)
                for h in bandwidths]
    assert_allclose(cv.cv_results_["mean_test_score"], expected, rtol=1e-10)
    # Not the row rule's scores: the groups change them.
    rows = type(cv)(**cv.get_params()).fit(X, y, sample_weight=w)
    assert np.abs(rows.cv_results_["mean_test_score"] - expected).max() > 1e-3


def test_categorical_features_leave_groups_out():
    """Categorical features (embedded keys, a smoothing per category) take the groups
    too: the search's scores are LeaveOneGroupOut refits' on the frame."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 40
    frame = pd.DataFrame({"x": rng.uniform(0, 6, n),
                          "c": pd.Categorical(rng.choice(["a", "b", "c"], n))})
    y = np.sin(frame["x"].to_numpy()) + (frame["c"] == "a") + rng.normal(scale=0.3, size=n)
    w = np.ones(n)
    groups = rng.integers(0, 6, n)
    cv = NadarayaWatsonRegressorCV(bandwidths=4, degree=0).fit(frame, y, groups=groups)
    expected = []
    for params in cv.cv_results_["params"]:
        losses = np.empty(n)
        for train, test in LeaveOneGroupOut().split(frame, y, groups):
            model = NadarayaWatsonRegressor(bandwidth=params["bandwidth"]).fit(
                frame.iloc[train], y[train], sample_weight=w[train])
            losses[test] = (model.predict(frame.iloc[test]) - y[test]) ** 2
        expected.append(-losses.mean())
    assert_allclose(cv.cv_results_["mean_test_score"], expected, rtol=1e-10)


def _explicit_group_loss(X, y, w, groups, h, profile):
    """The weighted leave-one-group-out squared error of Nadaraya-Watson with per-feature
    bandwidths ``h``, written out: row i attends every row outside its group."""
    u2 = (((X[:, None, :] - X[None, :, :]) / h) ** 2).sum(-1)  # (n, n)
    K = profile(u2) * w[None, :] * (groups[:, None] != groups[None, :])
    pred = K @ y / K.sum(1)
    return float(np.average((pred - y) ** 2, weights=w))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_loss_and_gradient_equal_explicit_leave_one_group_out(kernel):
    """The engine's loss and its gradient in the bandwidths (the Gaussian's written out
    by hand, autograd's for the others) against the loss written out above and its
    central differences."""
    X, y, w, groups = _table(d=2)
    X = X[:28]  # distinct rows: the keys are the rows
    y, w, groups = y[:28], w[:28], groups[:28]
    profiles = {"gaussian": lambda u2: np.exp(-0.5 * u2),
                "epanechnikov": lambda u2: np.clip(1 - u2, 0, None)}
    h0 = np.array([1.3, 2.1])
    h = torch.tensor(h0, requires_grad=True)
    with np.errstate(divide="ignore"):
        log_w = torch.tensor(np.log(w))
    no_self = torch.full((len(X),), -math.inf, dtype=torch.float64)  # (n,)
    value = loo_loss(torch.tensor(X), torch.tensor(y)[:, None], h, get_kernel(kernel),
                     log_w, no_self, loss="squared_error", backward=True,
                     group=torch.tensor(groups))
    explicit = _explicit_group_loss(X, y, w, groups, h0, profiles[kernel])
    assert_allclose(value, explicit, rtol=1e-10)
    step = 1e-6
    numeric = [(_explicit_group_loss(X, y, w, groups, h0 + step * e, profiles[kernel])
                - _explicit_group_loss(X, y, w, groups, h0 - step * e, profiles[kernel]))
               / (2 * step) for e in np.eye(2)]
    assert_allclose(h.grad.numpy(), numeric, rtol=1e-5)


def test_learned_bandwidth_minimizes_leave_one_group_out():
    """The learned bandwidth's final loss is the explicit leave-one-group-out loss there,
    and no point of a fine grid around it is lower."""
    X, y, w, groups = _table()
    reg = NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(form="isotropic")).fit(
        X, y, sample_weight=w, groups=groups)
    h = reg.bandwidth_[0]

    def explicit(h):
        return _explicit_group_loss(X, y, w, groups, np.array([h]),
                                    lambda u2: np.exp(-0.5 * u2))

    assert_allclose(reg.loss_curve_[-1], explicit(h), rtol=1e-8)
    fine = h * np.geomspace(0.8, 1.25, 41)
    assert explicit(h) <= min(explicit(f) for f in fine) * (1 + 1e-7)
    # The row rule learns another bandwidth on these repeated inputs.
    rows = NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(form="isotropic")).fit(
        X, y, sample_weight=w)
    assert not np.isclose(rows.bandwidth_[0], h, rtol=1e-3)


def test_learned_local_linear_loss_is_leave_one_group_out():
    """The local-linear descent's final loss is that of LeaveOneGroupOut refits at the
    learned bandwidth."""
    X, y, w, groups = _table()
    reg = NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(form="isotropic"),
                                  degree=1).fit(X, y, sample_weight=w, groups=groups)
    refits = _group_refit_score(
        lambda: NadarayaWatsonRegressor(bandwidth=reg.bandwidth_, degree=1), X, y, w, groups)
    assert_allclose(reg.loss_curve_[-1], -refits, rtol=1e-8)


def _repeated_inputs(seed=1):
    """Rows that are all distinct, at inputs that repeat (other targets there)."""
    X, y, w, _ = _table(d=2, seed=seed)  # two features: the sweep's kept distances
    return X, y, w


@pytest.mark.parametrize("unit", ["row", "input"])
def test_groups_of_one_row_or_one_input_are_the_leave_out_units(unit):
    X, y, w = _repeated_inputs()
    assert len(np.unique(np.column_stack([X, y, w]), axis=0)) == len(X)
    groups = (np.arange(len(X)) if unit == "row"
              else np.unique(X, axis=0, return_inverse=True)[1].reshape(-1))
    cv_groups = NadarayaWatsonRegressorCV(BANDWIDTHS, degree=0).fit(
        X, y, sample_weight=w, groups=groups)
    cv_unit = NadarayaWatsonRegressorCV(BANDWIDTHS, degree=0, leave_out=unit).fit(
        X, y, sample_weight=w)
    assert_allclose(cv_groups.cv_results_["mean_test_score"],
                    cv_unit.cv_results_["mean_test_score"], rtol=1e-12)
    learned_groups = NadarayaWatsonRegressor(bandwidth="loo").fit(
        X, y, sample_weight=w, groups=groups)
    learned_unit = NadarayaWatsonRegressor(
        bandwidth=LeaveOneOutBandwidth(leave_out=unit)).fit(X, y, sample_weight=w)
    # One loss (its keys summed in another order under groups: the descent stops within
    # its tolerance, a flat minimum where h differs by ~1e-6).
    assert_allclose(learned_groups.loss_curve_[-1], learned_unit.loss_curve_[-1],
                    rtol=1e-9)
    assert_allclose(learned_groups.bandwidth_, learned_unit.bandwidth_, rtol=1e-4)


def test_bootstrap_copies_as_groups_or_weights_give_the_distinct_rows_answer():
    """A bootstrap drawn as rows: passed as groups (each original row one group) or as
    integer weights of the distinct rows, the row rule's answer on the distinct rows;
    the copies left in as rows (each seeing its twins) score otherwise."""
    rng = np.random.default_rng(3)
    X0 = rng.uniform(0, 6, (30, 1))
    y0 = np.sin(X0[:, 0]) + rng.normal(scale=0.3, size=30)
    draw = rng.integers(0, 30, 30)
    counts = np.bincount(draw, minlength=30)
    drawn = counts > 0
    X_rows, y_rows = X0[draw], y0[draw]
    fits = {
        "groups": lambda est: est.fit(X_rows, y_rows, groups=draw),
        "weights": lambda est: est.fit(X0[drawn], y0[drawn], sample_weight=counts[drawn]),
        "rows": lambda est: est.fit(X_rows, y_rows),
    }
    learned = {k: fit(NadarayaWatsonRegressor(bandwidth="loo")).bandwidth_
               for k, fit in fits.items()}
    assert_allclose(learned["groups"], learned["weights"], rtol=1e-8)
    scores = {k: fit(NadarayaWatsonRegressorCV(BANDWIDTHS, degree=0)).cv_results_[
        "mean_test_score"] for k, fit in fits.items()}
    assert_allclose(scores["groups"], scores["weights"], rtol=1e-12)
    assert not np.allclose(scores["rows"], scores["weights"])


def test_groups_without_leaving_out_are_ignored():
    """A given bandwidth leaves nothing out: the fit does not depend on groups (still
    validated)."""
    X, y, w, groups = _table()
    with_groups = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y, sample_weight=w,
                                                              groups=groups)
    without = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y, sample_weight=w)
    assert_allclose(with_groups.predict(X), without.predict(X), rtol=0, atol=0)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y, groups=groups[:-1])


@pytest.mark.parametrize("groups, error, match", [
    (lambda g: g[:-1], ValueError, "inconsistent numbers of samples"),
    (lambda g: np.column_stack([g, g]), ValueError, "groups must be 1-D"),
    (lambda g: np.where(g == 0, np.nan, g), ValueError, "NaN"),
    (lambda g: np.where(g == 0, None, "a").astype(object), TypeError, "sortable"),
    (lambda g: np.zeros_like(g), ValueError, "at least two groups"),
])
@pytest.mark.parametrize("learned", [False, True])
def test_bad_groups(groups, error, match, learned):
    X, y, _, g = _table()
    est = (NadarayaWatsonRegressor(bandwidth="loo") if learned
           else NadarayaWatsonRegressorCV(BANDWIDTHS, degree=0))
    with pytest.raises(error, match=match):
        est.fit(X, y, groups=groups(g))


@pytest.mark.parametrize("est, match", [
    (NadarayaWatsonRegressorCV(BANDWIDTHS, degree=0, n_neighbors=5),
     r"k-nearest model \(n_neighbors=5\) is not supported"),
    (NadarayaWatsonRegressorCV(degree=0, bandwidth_kinds=["fixed", "balloon"]),
     "adaptive bandwidths is not supported"),
    (NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(batch_size=8)),
     r"neighbor lists \(n_neighbors='auto'\)"),
])
def test_unsupported_combinations_raise(est, match):
    X, y, _, groups = _table()
    with pytest.raises(NotImplementedError, match=match):
        est.fit(X, y, groups=groups)


@pytest.mark.parametrize("est", [
    NadarayaWatsonRegressorCV(BANDWIDTHS, degree=0, leave_out="input"),
    NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(leave_out="input")),
])
def test_groups_with_the_input_unit_raise(est):
    X, y, _, groups = _table()
    with pytest.raises(ValueError, match="leave_out='input' is another"):
        est.fit(X, y, groups=groups)


def test_dask_estimators_refuse_groups():
    dask_nw = pytest.importorskip("sklearn_nw.dask")
    X, y, _, groups = _table()
    with pytest.raises(TypeError, match="groups"):
        dask_nw.NadarayaWatsonRegressor(bandwidth="loo").fit(X, y, groups=groups)


def test_splitter_gets_groups_without_routing():
    """As GridSearchCV without routing: groups go to the splitter's split."""
    X, y, _, groups = _table()
    splits = list(GroupKFold(3).split(X, y, groups))
    expected = NadarayaWatsonRegressorCV(BANDWIDTHS, degree=0, cv=splits).fit(X, y)
    est = NadarayaWatsonRegressorCV(BANDWIDTHS, degree=0, cv=GroupKFold(3)).fit(
        X, y, groups=groups)
    assert_allclose(est.cv_results_["mean_test_score"],
                    expected.cv_results_["mean_test_score"])


@pytest.mark.parametrize("make", [
    lambda: NadarayaWatsonRegressorCV(BANDWIDTHS, degree=0),
    lambda: NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(form="isotropic")),
])
def test_cross_validate_routes_groups(make):
    """With routing on, cross_validate passes groups to a fit that requests them, which
    uses them as a direct fit on each training part does; unrequested, scikit-learn
    refuses them."""
    X, y, _, groups = _table()
    outer = KFold(3, shuffle=True, random_state=0)
    with sklearn.config_context(enable_metadata_routing=True):
        result = cross_validate(make().set_fit_request(groups=True), X, y, cv=outer,
                                params={"groups": groups}, return_estimator=True)
        with pytest.raises(UnsetMetadataPassedError, match="groups"):
            cross_validate(make(), X, y, cv=outer, params={"groups": groups})
    for fitted, (train, _) in zip(result["estimator"], outer.split(X)):
        direct = make().fit(X[train], y[train], groups=groups[train])
        without = make().fit(X[train], y[train])
        assert_allclose(fitted.bandwidth_, direct.bandwidth_, rtol=1e-12)
        if hasattr(direct, "cv_results_"):
            assert_allclose(fitted.cv_results_["mean_test_score"],
                            direct.cv_results_["mean_test_score"], rtol=1e-12)
            assert not np.allclose(fitted.cv_results_["mean_test_score"],
                                   without.cv_results_["mean_test_score"])
        else:
            assert not np.allclose(fitted.bandwidth_, without.bandwidth_)
