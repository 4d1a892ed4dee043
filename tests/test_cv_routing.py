"""Metadata routing and user scorers of the CV estimators: ``sample_weight`` and ``groups``
reach the estimator, the scorer and the splitter as in scikit-learn's RidgeCV, and a plain
``scorer(estimator, X, y)`` callable is called without metadata it does not take."""

import warnings
from contextvars import ContextVar

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.metrics import make_scorer, mean_squared_error
from sklearn.model_selection import GroupKFold
from sklearn.utils.metadata_routing import MetadataRouter

from sklearn_nw import (
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
    _cv,
)
from sklearn_nw._selection import Training
from sklearn_nw._selection_grid import BandwidthGridSearch

BANDWIDTHS = (0.1, 0.3, 1.0, 3.0)
N_SPLITS = 3


def make_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 6, (n, 1))
    y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=n)
    # Heavy weights on the right half, where the noise-free curve is hardest to follow.
    sample_weight = np.where(X[:, 0] > 3, 5.0, 1.0)
    groups = np.arange(n) % 6
    return X, y, sample_weight, groups


def plain_scorer(estimator, X, y):
    """A user scorer that takes no metadata."""
    return -float(np.mean((estimator.predict(X) - y) ** 2))


def recording_scorer(request=None):
    """A weighted-MSE scorer (``make_scorer``) and the list of weights it was called with."""
    received = []

    def weighted_mse(y_true, y_pred, sample_weight=None):
        received.append(None if sample_weight is None else np.asarray(sample_weight))
        return mean_squared_error(y_true, y_pred, sample_weight=sample_weight)

    scorer = make_scorer(weighted_mse, greater_is_better=False)
    if request is not None:
        scorer = scorer.set_score_request(sample_weight=request)
    return scorer, received


def cv_estimator(classifier, **params):
    if not classifier:
        params.setdefault("degree", 0)  # routing is the same at every degree
    cls = NadarayaWatsonClassifierCV if classifier else NadarayaWatsonRegressorCV
    return cls(bandwidths=BANDWIDTHS, **params)


def targets(y, classifier):
    return (y > 0).astype(int) if classifier else y


@pytest.mark.parametrize("cv", [None, N_SPLITS])
@pytest.mark.parametrize("classifier", [False, True])
def test_routing_enabled_without_metadata(classifier, cv):
    """With routing on and nothing passed, fit works and chooses as with routing off."""
    X, y, _, _ = make_data()
    y = targets(y, classifier)
    expected = cv_estimator(classifier, cv=cv).fit(X, y)
    with sklearn.config_context(enable_metadata_routing=True):
        est = cv_estimator(classifier, cv=cv).fit(X, y)
    assert_allclose(est.cv_results_["mean_test_score"], expected.cv_results_["mean_test_score"])
    assert_allclose(est.bandwidth_, expected.bandwidth_)


@pytest.mark.parametrize("cv", [None, N_SPLITS])
@pytest.mark.parametrize("classifier", [False, True])
def test_routing_enabled_with_sample_weight_default_scoring(classifier, cv):
    """With routing on, sample_weight needs no request on the default scoring (as RidgeCV)
    and gives the same search as with routing off."""
    X, y, sample_weight, _ = make_data()
    y = targets(y, classifier)
    expected = cv_estimator(classifier, cv=cv).fit(X, y, sample_weight=sample_weight)
    with sklearn.config_context(enable_metadata_routing=True):
        est = cv_estimator(classifier, cv=cv).fit(X, y, sample_weight=sample_weight)
    assert_allclose(est.cv_results_["mean_test_score"], expected.cv_results_["mean_test_score"])
    assert_allclose(est.sample_weight_, sample_weight)


@pytest.mark.parametrize("cv", [None, N_SPLITS])
def test_routed_sample_weight_reaches_requesting_scorer(cv):
    """A scorer that requests sample_weight gets the weights (the test folds' with a
    splitter); one that declines gets none, and scores differently."""
    X, y, sample_weight, _ = make_data()
    with sklearn.config_context(enable_metadata_routing=True):
        scorer, received = recording_scorer(request=True)
        weighted = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0, cv=cv, scoring=scorer)
        weighted.fit(X, y, sample_weight=sample_weight)
        scorer_off, received_off = recording_scorer(request=False)
        unweighted = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0, cv=cv,
                                               scoring=scorer_off)
        unweighted.fit(X, y, sample_weight=sample_weight)
    n_calls = len(BANDWIDTHS) * (1 if cv is None else N_SPLITS)
    assert len(received) == len(received_off) == n_calls
    assert all(w is not None for w in received)
    assert all(w is None for w in received_off)
    # Every row is scored once per bandwidth, with its own weight.
    assert_allclose(sum(w.sum() for w in received), len(BANDWIDTHS) * sample_weight.sum())
    assert not np.allclose(weighted.cv_results_["mean_test_score"],
                           unweighted.cv_results_["mean_test_score"])


def test_routing_requires_request_on_user_scorer():
    """As in RidgeCV: weights passed to a scorer that did not say whether it wants them."""
    X, y, sample_weight, _ = make_data()
    scorer, _ = recording_scorer()
    est = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0, cv=N_SPLITS, scoring=scorer)
    with sklearn.config_context(enable_metadata_routing=True), \
            pytest.raises(sklearn.exceptions.UnsetMetadataPassedError, match="score"):
        est.fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("classifier", [False, True])
def test_groups_routed_to_splitter(classifier):
    """``groups`` reaches a splitter that requests it: the same search as on its splits."""
    X, y, _, groups = make_data()
    y = targets(y, classifier)
    splits = list(GroupKFold(N_SPLITS).split(X, y, groups))
    expected = cv_estimator(classifier, cv=splits).fit(X, y)
    with sklearn.config_context(enable_metadata_routing=True):
        est = cv_estimator(classifier, cv=GroupKFold(N_SPLITS)).fit(X, y, groups=groups)
        with pytest.raises(ValueError, match="groups"):
            cv_estimator(classifier, cv=GroupKFold(N_SPLITS)).fit(X, y)
    for key in ["mean_test_score"] + [f"split{i}_test_score" for i in range(N_SPLITS)]:
        assert_allclose(est.cv_results_[key], expected.cv_results_[key])
    # Routed metadata is not fitted state, and fit leaves the parameters alone.
    assert not any(value is groups for value in vars(est).values())
    assert est.get_params()["cv"].__class__ is GroupKFold
    clone(est)


def test_metadata_nobody_consumes_raises():
    """As in RidgeCV: ``groups`` with a splitter that does not use them."""
    X, y, _, groups = make_data()
    est = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0, cv=N_SPLITS)
    with sklearn.config_context(enable_metadata_routing=True), \
            pytest.raises(TypeError, match="not routed to any object"):
        est.fit(X, y, groups=groups)


@pytest.mark.parametrize("cv", [None, N_SPLITS])
def test_extra_params_without_routing_raise(cv):
    """Metadata other than sample_weight and groups (fit's own, see test_groups.py) needs
    routing."""
    X, y, _, groups = make_data()
    est = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0, cv=cv)
    with pytest.raises(ValueError, match="enable_metadata_routing=True"):
        est.fit(X, y, other=groups)


def test_groups_to_a_splitter_that_ignores_them_warn_without_routing():
    """As GridSearchCV without routing: groups go to the splitter, and KFold says it
    ignores them."""
    X, y, _, groups = make_data()
    est = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0, cv=N_SPLITS)
    with pytest.warns(UserWarning, match="groups parameter is ignored by KFold"):
        est.fit(X, y, groups=groups)


@pytest.mark.parametrize("classifier", [False, True])
def test_get_metadata_routing(classifier):
    """A router: the estimator's own fit, the scorer's score and the splitter's split."""
    est = cv_estimator(classifier, cv=GroupKFold(N_SPLITS))
    with sklearn.config_context(enable_metadata_routing=True):
        routing = est.get_metadata_routing()
        assert isinstance(routing, MetadataRouter)
        assert routing.consumes("fit", ["groups", "sample_weight", "other"]) == {
            "groups", "sample_weight"}
        scorer, _ = recording_scorer(request=True)
        routing = cv_estimator(classifier, scoring=scorer).get_metadata_routing()
        assert routing.consumes("fit", ["groups", "sample_weight"]) == {"sample_weight"}


@pytest.mark.parametrize("cv", [None, N_SPLITS])
def test_plain_callable_scorer(cv):
    """``scorer(estimator, X, y)`` without sample_weight: no error and no warning."""
    X, y, _, _ = make_data()
    est = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0, cv=cv, scoring=plain_scorer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.fit(X, y)
    assert np.all(np.isfinite(est.cv_results_["mean_test_score"]))
    if cv is None:  # the same numbers as an explicit scorer of the leave-one-out predictions
        scorer, _ = recording_scorer()
        reference = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0,
                                              scoring=scorer).fit(X, y)
        assert_allclose(est.cv_results_["mean_test_score"],
                        reference.cv_results_["mean_test_score"])


@pytest.mark.parametrize("cv", [None, N_SPLITS])
def test_plain_callable_scorer_with_sample_weight_warns(cv):
    """Weights given to a scorer that cannot take them: scikit-learn's warning, not an error,
    with or without a splitter."""
    X, y, sample_weight, _ = make_data()
    est = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0, cv=cv, scoring=plain_scorer)
    with pytest.warns(UserWarning, match="does not support sample_weight"):
        est.fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("cv", [None, N_SPLITS])
def test_scorer_gets_sample_weight_only_when_given(cv):
    """Without routing a scorer that accepts sample_weight gets the user's weights (the test
    folds' with a splitter), and none (not ones) when none were given."""
    X, y, sample_weight, _ = make_data()
    scorer, received = recording_scorer()
    est = NadarayaWatsonRegressorCV(bandwidths=BANDWIDTHS, degree=0, cv=cv, scoring=scorer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.fit(X, y, sample_weight=sample_weight)
    assert all(w is not None for w in received)
    assert_allclose(sum(w.sum() for w in received), len(BANDWIDTHS) * sample_weight.sum())
    received.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.fit(X, y)
    assert received and all(w is None for w in received)


@pytest.mark.parametrize("cv", [None, N_SPLITS])
@pytest.mark.parametrize("classifier", [False, True])
def test_search_is_a_strategy_used_through_select(classifier, cv, monkeypatch):
    """The CV estimators subclass the plain ones and hand their fit a grid search, as
    RidgeCV composes _RidgeGCV or GridSearchCV: no hook is overridden, no metadata is
    passed through module state, and the strategy's ``select(training)`` alone chooses
    what the estimator chose."""
    Plain = NadarayaWatsonClassifier if classifier else NadarayaWatsonRegressor
    Estimator = NadarayaWatsonClassifierCV if classifier else NadarayaWatsonRegressorCV
    assert Estimator.__bases__ == (Plain,)
    assert not {"_fit_bandwidth", "_targets", "_loo_predictions"} & set(vars(Estimator))
    assert not any(isinstance(value, ContextVar) for value in vars(_cv).values())

    trainings = []
    select = BandwidthGridSearch.select

    def spy(search, training):
        trainings.append(training)
        return select(search, training)

    monkeypatch.setattr(BandwidthGridSearch, "select", spy)
    X, y, sample_weight, _ = make_data()
    y = targets(y, classifier)
    est = cv_estimator(classifier, cv=cv).fit(X, y, sample_weight=sample_weight)
    (training,) = trainings
    assert isinstance(training, Training)
    assert_allclose(training.X, est.X_fit_)
    np.testing.assert_array_equal(training.y, y)
    assert_allclose(training.sample_weight, sample_weight)

    search = BandwidthGridSearch(BANDWIDTHS, cv=cv, estimator=Plain(),
                                  params={"sample_weight": sample_weight})
    choice = search.select(training)
    np.testing.assert_array_equal(choice.bandwidth, est.bandwidth_)
    np.testing.assert_array_equal(choice.report["bandwidths_"], est.bandwidths_)
    assert choice.report["best_index_"] == est.best_index_
    assert choice.report["best_score_"] == est.best_score_
    np.testing.assert_array_equal(choice.report["cv_results_"]["mean_test_score"],
                                  est.cv_results_["mean_test_score"])
