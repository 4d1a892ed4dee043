"""Leave-one-out objective, learned bandwidths and the CV estimators."""

import itertools
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_nw import (
    EmptyNeighborhoodWarning,
    LeaveOneOutBandwidth,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw._engine_loo import loo_loss, squaring_chains
from sklearn_nw._scale import search_reference
from sklearn_nw._selection import search_fixed
from sklearn_nw.bandwidth import scott_bandwidth
from sklearn_nw.kernels import Gaussian, get_kernel

# The CV estimators' fixed grid alone (and for the regressor Nadaraya-Watson alone): the
# search these tests are about.
FIXED_KINDS = {"bandwidth_kinds": ["fixed"]}
FIXED = {**FIXED_KINDS, "degree": 0}


def _data(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(n)
    w = rng.integers(0, 4, n).astype(float)
    return X, y, w


def _refit_loo_predictions(make, X, y, w, method="predict", leave="location"):
    """Brute force: refit without each point, predict that point. ``leave="location"``
    (``leave_out="input"``) removes all the weight at the point's input, its copies
    included; ``"row"`` (``leave_out="row"``) the row alone; ``"unit"`` one unit of the
    point's own weight (the engine's ``self_log_w`` can pose each)."""
    preds = []
    for i in range(len(X)):
        w_i = w.copy()
        if leave == "row":
            w_i[i] = 0.0
        elif leave == "unit":
            w_i[i] -= min(w_i[i], 1.0)
        else:
            w_i[(X[i] == X).all(1)] = 0.0
        keep = w_i > 0
        model = make().fit(X[keep], y[keep], sample_weight=w_i[keep])
        preds.append(getattr(model, method)(X[i : i + 1])[0])
    return np.array(preds)


def _torch(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


def _loss_args(w):
    with np.errstate(divide="ignore"):
        return _torch(np.log(w)), _torch(np.log(np.maximum(w - 1, 0)))


@pytest.mark.parametrize("kernel", ["gaussian", "exponential", "biweight"])
def test_loo_loss_equals_refits_regression(kernel):
    X, y, w = _data()
    h = np.array([0.9, 1.4])
    preds = _refit_loo_predictions(
        lambda: NadarayaWatsonRegressor(kernel, bandwidth=h), X, y, w, leave="unit"
    )
    expected = np.sum(w * (preds - y) ** 2) / w.sum()
    log_w, self_log_w = _loss_args(w)
    got = loo_loss(_torch(X), _torch(y[:, None]), _torch(h), get_kernel(kernel), log_w,
                   self_log_w, loss="squared_error")
    assert got == pytest.approx(expected, rel=1e-10)


def test_loo_loss_equals_refits_classification():
    X, y, w = _data()
    labels = np.digitize(y, [-0.5, 0.5])  # three classes
    h = np.array([0.7, 1.0])
    proba = _refit_loo_predictions(
        lambda: NadarayaWatsonClassifier(bandwidth=h), X, labels, w, "predict_proba", "unit"
    )
    p_true = np.clip(proba[np.arange(len(X)), labels], np.finfo(float).eps, None)
    expected = -np.sum(w * np.log(p_true)) / w.sum()
    log_w, self_log_w = _loss_args(w)
    one_hot = np.eye(3)[labels]
    got = loo_loss(_torch(X), _torch(one_hot), _torch(h), Gaussian(), log_w, self_log_w,
                   loss="log_loss")
    assert got == pytest.approx(expected, rel=1e-10)


def test_attention_weights_are_the_loo_refits():
    X, y, w = _data(n=30)
    reg = NadarayaWatsonRegressor(bandwidth=0.8).fit(X, y, sample_weight=w)
    preds = _refit_loo_predictions(lambda: NadarayaWatsonRegressor(bandwidth=0.8), X, y, w)
    np.testing.assert_allclose(reg.attention_weights_ @ y, preds, rtol=1e-10)


def test_gradcheck_of_the_objective():
    X, y, w = _data(n=25)
    log_w, self_log_w = _loss_args(w)

    def objective(log_h):
        # Differentiable path without the chunked backward: build the loss as one graph.
        from sklearn_nw._engine import transform
        from sklearn_nw._engine_loo import loo_logits

        xs = transform(_torch(X), _torch(X).mean(0), log_h.exp())
        rows = torch.arange(len(X))
        a = torch.softmax(loo_logits(xs, xs, Gaussian(), log_w, self_log_w, rows), dim=1)
        return (w_t * (a @ _torch(y) - _torch(y)) ** 2).sum() / w_t.sum()

    w_t = _torch(w)
    log_h = _torch([0.1, -0.2]).requires_grad_()
    assert torch.autograd.gradcheck(objective, (log_h,))
    # The chunked backward that fit uses gives the same gradient.
    h = log_h.detach().exp().requires_grad_()
    loo_loss(_torch(X), _torch(y[:, None]), h, Gaussian(), log_w, self_log_w,
             loss="squared_error", backward=True, working_memory=0.001)
    h_ref = log_h.detach().exp().requires_grad_()
    log_h_ref = h_ref.log()
    objective(log_h_ref).backward()
    np.testing.assert_allclose(h.grad.numpy(), h_ref.grad.numpy(), rtol=1e-9)


def test_learned_bandwidth_matches_fine_grid_optimum_1d():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 6, (200, 1))
    y = np.sin(X[:, 0]) + 0.3 * rng.standard_normal(200)
    reg = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    fine = np.geomspace(0.02, 3, 400)
    losses = []
    for h in fine:
        a = NadarayaWatsonRegressor(bandwidth=h).fit(X, y).attention_weights_
        losses.append(np.mean((a @ y - y) ** 2))
    best = fine[int(np.argmin(losses))]
    assert reg.bandwidth_[0] == pytest.approx(best, rel=0.02)
    assert reg.loss_curve_[-1] <= np.min(losses) * (1 + 1e-4)
    assert reg.n_iter_ >= 1


def test_irrelevant_feature_gets_large_bandwidth():
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, (400, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(400)
    reg = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    assert reg.bandwidth_[2] > 10 * max(reg.bandwidth_[:2])


def test_one_se_rule_keeps_the_reference_when_classes_separate():
    # Standardized wine: per-feature bandwidths can make every left-out point's nearest
    # neighbor decide its class with certainty, a leave-one-out log-loss of 0 reached by
    # shrinking bandwidths without end. "min" takes it; "one_se" keeps the reference,
    # Scott's rule times one factor, whose loss is positive.
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    fits = {s: NadarayaWatsonClassifier(bandwidth=LeaveOneOutBandwidth(selection=s)).fit(X, y)
            for s in ("min", "one_se")}
    scott = scott_bandwidth(X)
    p_true = {s: (m.attention_weights_ @ np.eye(3)[y])[np.arange(len(y)), y]
              for s, m in fits.items()}
    loss = {s: -np.mean(np.log(np.clip(p, 1e-300, None))) for s, p in p_true.items()}
    assert loss["min"] < 1e-6 < loss["one_se"]
    assert np.ptp(fits["one_se"].bandwidth_ / scott) < 1e-9 * fits["one_se"].bandwidth_[0]
    assert np.ptp(fits["min"].bandwidth_ / scott) > 0.1


class _StubObjective:
    """Given per-row leave-one-out losses of (per-feature, reference) bandwidths."""

    def __init__(self, per_row, w):
        self.rows = torch.tensor(per_row, dtype=torch.float64)  # (2, m)
        self.log_w = torch.log(torch.tensor(w, dtype=torch.float64))
        self.baseline = 1.0

    def per_row(self, hs, rows):
        return self.rows


@pytest.mark.parametrize("gain, keep", [(0.3, True), (0.05, False), (-0.1, False)])
def test_one_se_rule_needs_a_gain_above_one_standard_error(gain, keep):
    # Per-row gains of mean `gain` and standard deviation 1 on 100 rows: SE = 0.1.
    noise = np.tile([1.0, -1.0], 50)
    per_row = np.stack([np.full(100, 2.0) - gain - noise, np.full(100, 2.0)])
    selector = LeaveOneOutBandwidth()
    h, h_reference = torch.tensor([0.1, 5.0], dtype=torch.float64), np.array([0.7, 0.7])
    chosen, loss = selector._against_reference(
        _StubObjective(per_row, np.ones(100)), h, h_reference, torch.arange(100))
    expected = (h, 2.0 - gain) if keep else (torch.tensor(h_reference), 2.0)
    np.testing.assert_allclose(chosen, expected[0])
    assert loss == pytest.approx(expected[1])
    # "min" keeps the lower mean loss whatever its noise; integer weights count as rows.
    chosen, _ = LeaveOneOutBandwidth(selection="min")._against_reference(
        _StubObjective(per_row, np.ones(100)), h, h_reference, torch.arange(100))
    np.testing.assert_allclose(chosen, h if gain > 0 else h_reference)
    doubled = np.repeat(per_row, 2, axis=1)
    twice, _ = selector._against_reference(
        _StubObjective(per_row, np.full(100, 2.0)), h, h_reference, torch.arange(100))
    repeated, _ = selector._against_reference(
        _StubObjective(doubled, np.ones(200)), h, h_reference, torch.arange(200))
    np.testing.assert_allclose(twice, repeated)


@pytest.mark.parametrize("form", ["isotropic", "full"])
def test_other_forms(form):
    X, y, _ = _data(n=150, d=3)
    reg = NadarayaWatsonRegressor(
        bandwidth=LeaveOneOutBandwidth(form, n_components=2 if form == "full" else None)
    ).fit(X, y)
    if form == "isotropic":
        assert np.ptp(reg.bandwidth_) == 0
        assert not hasattr(reg, "projection_")
    else:
        assert reg.projection_.shape == (3, 2)
        np.testing.assert_allclose(reg.bandwidth_, 1 / np.linalg.norm(reg.projection_, axis=1))
    # The fitted model predicts its own leave-one-out optimum, never worse than Scott's rule.
    loo = np.mean((reg.attention_weights_ @ y - y) ** 2)
    scott = NadarayaWatsonRegressor().fit(X, y)
    assert loo <= np.mean((scott.attention_weights_ @ y - y) ** 2)


def test_minibatch_is_deterministic_and_warns_without_convergence():
    X, y, _ = _data(n=300, d=2)
    selector = LeaveOneOutBandwidth(batch_size=32, max_iter=3, tol=0.0, random_state=0)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        a = NadarayaWatsonRegressor(bandwidth=selector).fit(X, y)
    with pytest.warns(ConvergenceWarning):
        b = NadarayaWatsonRegressor(bandwidth=selector).fit(X, y)
    np.testing.assert_array_equal(a.bandwidth_, b.bandwidth_)
    assert a.n_iter_ == 3


def test_weights_equal_repeated_rows_for_loo_leaving_out_inputs():
    # leave_out="input": a row leaves with its copies, so an integer weight is a repeated
    # row (under the default "row", a weight leaves whole where a copy leaves its twin).
    X, y, w = _data(n=150)
    w = w.astype(int)
    loo = LeaveOneOutBandwidth(leave_out="input")
    a = NadarayaWatsonRegressor(bandwidth=loo).fit(X, y, sample_weight=w)
    b = NadarayaWatsonRegressor(bandwidth=loo).fit(np.repeat(X, w, 0), np.repeat(y, w))
    assert a.loss_curve_[-1] == pytest.approx(b.loss_curve_[-1], rel=1e-9)
    np.testing.assert_allclose(a.bandwidth_, b.bandwidth_, rtol=1e-5)


@pytest.mark.parametrize(
    "X, y",
    [
        (np.arange(40.0).reshape(20, 2), np.full(20, 3.0)),  # constant y
        (np.array([[0.0], [1.0]]), np.array([0.0, 1.0])),  # two points
    ],
)
def test_degenerate_data_ends_finite_with_a_warning(X, y):
    with pytest.warns(ConvergenceWarning, match="does not depend on the bandwidth"):
        reg = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    assert np.all(np.isfinite(reg.bandwidth_)) and np.all(reg.bandwidth_ > 0)
    assert np.all(np.isfinite(reg.predict(X)))


def test_loo_needs_two_samples():
    with pytest.raises(ValueError, match="n_samples=1"):
        NadarayaWatsonRegressor(bandwidth="loo").fit([[1.0]], [1.0])
    # Copies of one input leave together: nothing is left to predict them.
    with pytest.raises(ValueError, match="at least 2 distinct training inputs"):
        NadarayaWatsonRegressor(bandwidth="loo").fit(np.ones((20, 2)), np.arange(20.0))


def test_verbose_shows_a_progress_bar(capsys):
    pytest.importorskip("tqdm")
    X, y, _ = _data(n=80)
    NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(verbose=1)).fit(X, y)
    assert "leave-one-out bandwidth" in capsys.readouterr().err


def test_verbose_logs_without_tqdm(monkeypatch, caplog):
    import builtins

    real_import = builtins.__import__

    def no_tqdm(name, *args, **kwargs):
        if name.startswith("tqdm"):
            raise ImportError("no tqdm here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    X, y, _ = _data(n=80)
    with caplog.at_level("INFO", logger="sklearn_nw.bandwidth"):
        NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(verbose=1)).fit(X, y)
    assert "leave-one-out bandwidth: iteration" in caplog.text


# -- the CV estimators ---------------------------------------------------------------------


def test_regressor_cv_picks_lowest_loo_loss():
    X, y, w = _data(n=50)
    grid = [0.05, 0.2, 0.5, 1.0, 3.0]
    cv = NadarayaWatsonRegressorCV(bandwidths=grid, degree=0).fit(X, y, sample_weight=w)
    losses = []
    for h in grid:
        preds = _refit_loo_predictions(
            lambda h=h: NadarayaWatsonRegressor(bandwidth=h), X, y, w
        )
        losses.append(np.sum(w * (preds - y) ** 2) / w.sum())
    np.testing.assert_allclose(-cv.cv_results_["mean_test_score"], losses, rtol=1e-10)
    assert cv.bandwidth_[0] == grid[int(np.argmin(losses))]
    assert cv.best_score_ == pytest.approx(-min(losses))
    np.testing.assert_allclose(
        cv.predict(X), NadarayaWatsonRegressor(bandwidth=cv.bandwidth_).fit(X, y, w).predict(X)
    )


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 2e-4)])
def test_default_grid_scores_equal_refits(dtype, rtol):
    # The default grid doubles the Gaussian coefficient every two points, so most of its
    # blocks are squares of others: check every point against brute-force refits, with
    # zero, unit and larger weights.
    X, y, w = _data(n=50, d=3)
    cv = NadarayaWatsonRegressorCV(**FIXED, selection="min").fit(X.astype(dtype), y,
                                                                 sample_weight=w)
    # The default grid's points every four (the Gaussian coefficient quadrupling: two
    # squarings), then the points around the best one.
    reference = search_reference(X.astype(dtype), w)
    default = np.geomspace(1 / 8, 8, 25)[:, None] * reference
    scored = [int(np.argmin(np.abs(np.log(default[:, 0] / h[0])))) for h in cv.bandwidths_]
    np.testing.assert_allclose(cv.bandwidths_, default[scored], rtol=1e-6)
    assert set(range(0, 25, 4)) <= set(scored) and len(scored) < 25
    best = scored[cv.best_index_]
    assert {best - 1, best + 1} & set(range(25)) <= set(scored)
    losses = []
    for h in cv.bandwidths_:
        preds = _refit_loo_predictions(
            lambda h=h: NadarayaWatsonRegressor(bandwidth=h), X, y, w
        )
        losses.append(np.sum(w * (preds - y) ** 2) / w.sum())
    np.testing.assert_allclose(-cv.cv_results_["mean_test_score"], losses, rtol=rtol)
    assert cv.best_index_ == int(np.argmin(losses))


def _smoothest_within_one_se(per_sample, w, smoothness):
    """The test's own one-standard-error rule: per-sample losses (G, n) with weights;
    the smoothest candidate whose mean loss exceeds the best one's by at most the
    standard error of the per-sample differences."""
    best = int(np.argmin(per_sample @ w))
    within = []
    for g in range(len(per_sample)):
        diff = per_sample[g] - per_sample[best]
        mean = np.sum(w * diff) / w.sum()
        if mean <= np.sqrt(np.sum(w * (diff - mean) ** 2)) / w.sum():
            within.append(g)
    return max(within, key=lambda g: smoothness[g])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_se_takes_the_smoothest_bandwidth_within_one_standard_error(seed):
    X, y, w = _data(n=40, d=2, seed=seed)
    grid = np.geomspace(0.05, 3.0, 12)
    cv = NadarayaWatsonRegressorCV(bandwidths=grid, **FIXED).fit(X, y, sample_weight=w)
    per_sample = np.array([
        (_refit_loo_predictions(lambda h=h: NadarayaWatsonRegressor(bandwidth=h),
                                X, y, w) - y) ** 2 for h in grid])  # (G, n)
    expected = _smoothest_within_one_se(per_sample, w, grid)
    assert cv.best_index_ == expected
    np.testing.assert_array_equal(cv.bandwidth_, [grid[expected]] * 2)
    assert cv.best_score_ == pytest.approx(-per_sample[expected] @ w / w.sum(), rel=1e-9)
    # Same scores and ranks as the best-point choice; only the choice differs.
    best = NadarayaWatsonRegressorCV(bandwidths=grid, **FIXED, selection="min").fit(
        X, y, sample_weight=w)
    assert best.best_index_ == int(np.argmin(per_sample @ w))
    for key in ("mean_test_score", "rank_test_score"):
        np.testing.assert_array_equal(cv.cv_results_[key], best.cv_results_[key])


def test_a_default_grid_goes_on_past_an_edge_holding_the_optimum():
    # A short period: the leave-one-out optimum lies far below 1/8 of Scott's rule.
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, (400, 1))
    y = np.sin(2 * np.pi * X[:, 0]) + 0.2 * rng.standard_normal(400)
    cv = NadarayaWatsonRegressorCV(**FIXED).fit(X, y)
    reference = search_reference(X, np.ones(len(X)))  # the default grid's unit
    assert 0 < cv.best_index_ < len(cv.bandwidths_) - 1  # an interior optimum
    assert cv.bandwidth_[0] < reference[0] / 8
    # Points of the default grid's lattice (its ratio 2**(1/4) continued), ascending; the
    # best one's neighbors one step away.
    steps = 4 * np.log2(cv.bandwidths_[1:, 0] / cv.bandwidths_[:-1, 0])
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-9)
    assert np.all(np.round(steps) >= 1)
    np.testing.assert_allclose(steps[cv.best_index_ - 1 : cv.best_index_ + 1], 1.0)
    refits = _refit_loo_predictions(
        lambda: NadarayaWatsonRegressor(bandwidth=cv.bandwidth_), X, y, np.ones(400))
    assert cv.best_score_ == pytest.approx(-np.mean((refits - y) ** 2), rel=1e-10)
    assert 1 - np.mean((refits - y) ** 2) / np.var(y) > 0.8
    # A given grid is the user's: not extended.
    given = NadarayaWatsonRegressorCV(bandwidths=[0.5, 1.0, 2.0], degree=0).fit(X, y)
    assert len(given.bandwidths_) == 3 and given.best_index_ == 0


def test_a_default_grid_probes_below_a_local_minimum_near_scotts_rule():
    # A seasonal series (period 52 points): the leave-one-out loss has a local minimum
    # near Scott's rule (the trend) and its global one a few points wide (the season);
    # the default grid and its extensions stop at the local one.
    rng = np.random.default_rng(0)
    n = 4000
    X = np.arange(n, dtype=float)[:, None]
    y = 2 * (X[:, 0] / n) ** 2 + 3 * np.sin(2 * np.pi * X[:, 0] / 52) \
        + 0.5 * rng.standard_normal(n)
    cv = NadarayaWatsonRegressorCV(**FIXED).fit(X, y)
    reference = search_reference(X, np.ones(n))[0]
    h, scores = cv.bandwidths_[:, 0], cv.cv_results_["mean_test_score"]
    grid = np.flatnonzero((h > reference / 8 * (1 - 1e-9)) & (h < reference * 8 * (1 + 1e-9)))
    assert 7 <= len(grid) < 25  # every fourth point of the default grid, at least
    first = grid[np.argmax(scores[grid])]  # the default grid's best: interior, near Scott
    assert first not in (grid.min(), grid.max()) and h[first] > reference / 4
    assert cv.bandwidth_[0] < reference / 32 and cv.best_score_ > scores[first] + 1.0
    assert len(np.unique(h)) == len(h)  # no bandwidth scored twice
    # The grid's ratio around the optimum, and it is a fine given grid's (every 2**(1/8)
    # from the points' spacing to Scott's rule) to within one step of the default grid.
    fine = NadarayaWatsonRegressorCV(
        bandwidths=np.geomspace(1.0, reference, int(8 * np.log2(reference)) + 1),
        **FIXED).fit(X, y)
    assert fine.bandwidth_[0] / 2**0.25 <= cv.bandwidth_[0] <= fine.bandwidth_[0] * 2**0.25
    assert cv.best_score_ >= fine.best_score_ - 0.005 * abs(fine.best_score_)
    # Its neighbors one step of the default grid's ratio away scored.
    near = np.sort(h[np.abs(np.log2(h / cv.bandwidth_[0])) < 0.25 + 1e-9])
    np.testing.assert_allclose(near, cv.bandwidth_[0] * 2.0 ** np.array([-0.25, 0, 0.25]),
                               rtol=1e-12)


def _degree_grid(cv, degree):
    """The sorted bandwidths (one feature) and scores of one degree's candidates."""
    of = cv.cv_results_["degree"] == degree
    h = cv.bandwidths_[of, 0]
    order = np.argsort(h)
    return h[order], cv.cv_results_["mean_test_score"][of][order]


@pytest.mark.parametrize("slope", [0.0, 3.0])
def test_a_local_polynomial_grid_is_placed_around_nadaraya_watsons_best(slope):
    # The degree-1 grid is the default grid from half the best degree-0 bandwidth on
    # (to 8 times Scott's rule), and goes on past an end holding its best point: with a
    # steep trend, Nadaraya-Watson's boundary bias keeps its bandwidth small while a line
    # fits best at ever wider ones.
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (300, 1))
    y = slope * X[:, 0] + np.sin(4 * X[:, 0]) * (slope == 0) + 0.3 * rng.standard_normal(300)
    cv = NadarayaWatsonRegressorCV(**FIXED_KINDS, selection="min").fit(X, y)
    reference = search_reference(X, np.ones(len(X)))[0]
    h0, scores0 = _degree_grid(cv, 0)
    best0 = h0[np.argmax(scores0)]
    assert best0 > reference / 4
    # On the default grid's lattice (its points and their continuation at its ratio).
    k0 = 4 * np.log2(best0 / (reference / 8))
    assert abs(k0 - round(k0)) < 1e-9
    top = 8 * reference
    h1, scores1 = _degree_grid(cv, 1)
    k = 4 * np.log2(h1 / best0)  # degree 1's points in the default grid's steps
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)
    k, above = np.round(k).astype(int), round(4 * np.log2(top / best0))
    # From half the best degree-0 bandwidth (no probes below) to the default grid's end,
    # every fourth point from the end scored, the points around the best one too.
    assert k.min() == -4 and set(range(above, -5, -4)) | {-4} <= set(k)
    assert len(k) < k.max() - k.min() + 1  # not every point
    best1 = int(np.argmax(scores1))
    if slope == 0:
        assert -4 < k[best1] < above
    else:  # extended upwards until its best point is interior (or 4 times)
        assert k[best1] > above and k.max() > above
    assert k[best1] == k.max() or k[best1 + 1] == k[best1] + 1
    assert k[best1 - 1] == k[best1] - 1
    # Each point's score is its own: the same as a given grid of those bandwidths (to
    # rounding: one feature's blocks of rows span keys as their grid points' windows do).
    given = NadarayaWatsonRegressorCV(bandwidths=h1, **FIXED_KINDS, degree=1).fit(X, y)
    np.testing.assert_allclose(given.cv_results_["mean_test_score"], scores1, rtol=1e-10)
    # A given grid is the user's for every degree.
    grid = [0.05, 0.1, 0.2]
    fixed = NadarayaWatsonRegressorCV(bandwidths=grid, **FIXED_KINDS).fit(X, y)
    for degree in (0, 1, 2):
        np.testing.assert_array_equal(_degree_grid(fixed, degree)[0], grid)


def test_a_grid_anchored_below_the_default_one_is_probed_above():
    # An anchor below the default grid (a series' Nadaraya-Watson bandwidth, a point of
    # the default grid's lattice): the grid spans half to 8 times it; a local optimum
    # there, and the best score far above (a global polynomial), found by one probe at
    # the default grid's end, then extended past it and the points below its best scored.
    calls = []

    def score(grid):  # (G, 1) multiples of a unit reference
        m = grid[:, 0]
        calls.append(m)
        values = np.where(m > 1.0, 10.0 + np.log(m), -np.log(m / anchor) ** 2)
        return values, {"mean_test_score": values}, None

    anchor = 2.0**-7  # 1/8 of the reference, 16 steps of 2**(1/4) below
    family = search_fixed(score, None, np.ones(1), anchor=anchor)
    m = family.grid[:, 0]
    k = 4 * np.log2(m / anchor)  # in steps of the grid's ratio from the anchor
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)
    k = np.round(k).astype(int)
    assert np.all(np.diff(k) > 0) and sum(map(len, calls)) == len(k)  # each once
    # Every fourth point of half to 8 times the anchor first, then the probe at 8.
    np.testing.assert_array_equal(np.round(4 * np.log2(calls[0] / anchor)), [-4, 0, 4, 8, 12])
    np.testing.assert_allclose(calls[1], [8.0], rtol=1e-12)
    # The probe beats the grid: the three points below it, then extended upwards 4 times
    # (the score grows with m), every fourth point and the end, the three points below
    # the best each time.
    probe = round(4 * np.log2(8.0 / anchor))
    assert set(k) == {-4, 0, 4, 8, 12, *range(probe - 3, probe + 1),
                      *(probe + e for e in range(4, 33) if e % 8 not in (1, 2, 3))}
    assert np.argmax(family.scores) == len(m) - 1

    # An optimum the probe does not beat: the probe alone, the points around the optimum.
    def peaked(grid):
        values = -np.log(grid[:, 0] / anchor) ** 2
        return values, {"mean_test_score": values}, None

    family = search_fixed(peaked, None, np.ones(1), anchor=anchor)
    k = np.round(4 * np.log2(family.grid[:, 0] / anchor)).astype(int)
    np.testing.assert_array_equal(k, [*range(-4, 5), 8, 12, probe])
    # An anchor within the default grid: the default grid's points from half of it on,
    # no probe above.
    family = search_fixed(score, None, np.ones(1), anchor=1.0)
    assert family.grid[:, 0].min() == pytest.approx(0.5, rel=1e-12)
    assert family.grid[:, 0].max() >= 8 * (1 - 1e-9)


def test_a_default_grid_is_searched_up_to_a_margin_of_standard_errors():
    # A candidate's standard error grows with its distance from the best: one far
    # above it can be within one standard error where nearer ones are not. The default
    # grid is scored every four points first (steps k = 0, 4, ..., 24 of 2**(1/4)),
    # then every point between the best and the first point more than SE_MARGIN
    # standard errors short of it: here the best at k = 8, k = 12 within 3 standard
    # errors (not one), k = 14 within one (the choice), k = 16 beyond 3.
    from sklearn_nw._selection import SE_MARGIN, smoothest_within_one_se

    gain = {9: (20, 10), 10: (40, 20), 11: (60, 30), 12: (300, 120), 13: (310, 150),
            14: (320, 330), 15: (330, 100), 16: (500, 100)}  # k: (mean, se) short of k = 8
    z = np.tile([1.0, -1.0], 50)  # mean 0, standard deviation 1: se = the scale given
    calls = []

    def score(grid):
        k = np.round(4 * np.log2(grid[:, 0] * 8)).astype(int)
        calls.append(k)
        mean, se = np.array([gain.get(j, (1000 + 100 * abs(j - 8), 1.0)) if j != 8
                             else (0.0, 0.0) for j in k]).T
        samples = -(mean[:, None] + se[:, None] * np.sqrt(len(z)) * z)  # (G, m)
        return samples.mean(1), {"mean_test_score": samples.mean(1)}, (samples, np.ones(len(z)))

    assert 60 <= SE_MARGIN * 30 and 300 <= SE_MARGIN * 120 and 500 > SE_MARGIN * 100
    family = search_fixed(score, None, np.ones(1))
    k = np.concatenate(calls)
    assert len(set(k)) == len(k)  # each once
    np.testing.assert_array_equal(calls[0], [0, 4, 8, 12, 16, 20, 24])
    assert set(k) == {0, 4, *range(5, 17), 20, 24}  # nothing above k = 16 but the grid's
    chosen = smoothest_within_one_se(family)
    assert k[np.argsort(k)][chosen] == 14
    # The best point only (selection="min"): the points on either side of it.
    calls.clear()
    search_fixed(score, None, np.ones(1), selection="min")
    assert set(np.concatenate(calls)) == {0, 4, 8, 12, 16, 20, 24, 5, 6, 7, 9, 10, 11}


def test_squaring_chains_of_gaussian_coefficients():
    default = [1 / m**2 for m in np.geomspace(1 / 8, 8, 25)]
    chains = squaring_chains(default, max_depth=10)
    # Two interleaved chains of eleven points (ten squarings each), then what is left.
    assert [len(c) for c in chains] == [11, 11, 2, 1]
    assert sorted(g for c in chains for g, _ in c) == list(range(25))
    for chain in chains:
        for (parent, _), (g, k) in itertools.pairwise(chain):
            assert default[g] == pytest.approx(2**k * default[parent], rel=1e-12)
    # Coefficients four times apart are two squarings; the depth limit starts new chains.
    assert squaring_chains([1.0, 4.0, 16.0], max_depth=3) == [[(0, 0), (1, 2)], [(2, 0)]]
    # No doubling in the grid: every point is computed from exp.
    assert squaring_chains([1.0, 1.5, 2.5], max_depth=10) == [[(0, 0)], [(1, 0)], [(2, 0)]]


def test_per_feature_grid_and_classifier_cv():
    X, y, _ = _data(n=50)
    labels = np.where(y > 0, "up", "down")
    grid = [[0.3, 0.3], [0.3, 5.0], [5.0, 0.3]]
    cv = NadarayaWatsonClassifierCV(bandwidths=grid).fit(X, labels)
    accuracies, losses = [], []
    for h in grid:
        proba = _refit_loo_predictions(
            lambda h=h: NadarayaWatsonClassifier(bandwidth=np.array(h)), X, labels,
            np.ones(len(X)), "predict_proba",
        )
        true = np.searchsorted(cv.classes_, labels)
        accuracies.append(np.mean(proba.argmax(1) == true))
        losses.append(-np.mean(np.log(np.maximum(proba[np.arange(len(X)), true],
                                                 np.finfo(np.float64).eps))))
    # The default score is the negative leave-one-out log-loss.
    np.testing.assert_allclose(-cv.cv_results_["mean_test_score"], losses, rtol=1e-10)
    np.testing.assert_array_equal(cv.bandwidth_, grid[int(np.argmin(losses))])
    assert len(set(accuracies)) > 1  # the grid's points differ


def test_cv_with_splitter_matches_gridsearchcv():
    X, y, _ = _data(n=80)
    grid = [0.1, 0.4, 1.0]
    folds = KFold(4, shuffle=True, random_state=0)
    cv = NadarayaWatsonRegressorCV(bandwidths=grid, cv=folds, degree=0).fit(X, y)
    scores = [cross_val_score(NadarayaWatsonRegressor(bandwidth=h), X, y, cv=folds).mean()
              for h in grid]
    np.testing.assert_allclose(cv.cv_results_["mean_test_score"], scores)
    assert cv.bandwidth_[0] == grid[int(np.argmax(scores))]


def test_loo_scoring_uses_the_scorer():
    X, y, _ = _data(n=60)
    cv = NadarayaWatsonRegressorCV(bandwidths=[0.2, 1.0], degree=0,
                                   scoring="neg_mean_absolute_error")
    cv.fit(X, y)
    for h, score in zip([0.2, 1.0], cv.cv_results_["mean_test_score"]):
        a = NadarayaWatsonRegressor(bandwidth=h).fit(X, y).attention_weights_
        assert score == pytest.approx(-np.mean(np.abs(a @ y - y)), rel=1e-10)


@pytest.mark.parametrize(
    "bandwidths, match",
    [
        ([], "must not be empty"),
        ([0.5, 0.0], "positive"),
        ([0.5, -1.0], "positive"),
        ([[0.5, 1.0, 2.0]], "n_features=2"),
    ],
)
def test_cv_bad_grids(bandwidths, match):
    X, y, _ = _data(n=20)
    with pytest.raises(ValueError, match=match):
        NadarayaWatsonRegressorCV(bandwidths=bandwidths, degree=0).fit(X, y)


def test_bad_selector_parameters():
    X, y, _ = _data(n=20)
    with pytest.raises(ValueError, match="max_iter"):
        NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(max_iter=0)).fit(X, y)
    with pytest.raises(ValueError, match="form"):
        NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth("banana")).fit(X, y)


def test_grid_search_over_bandwidth_kernel_and_kernel_parameters():
    from sklearn_nw.kernels import SymmetricBeta

    X, y, _ = _data(n=90)
    pipe = make_pipeline(StandardScaler(), NadarayaWatsonRegressor())
    folds = KFold(3, shuffle=True, random_state=0)
    grid = [
        {"nadarayawatsonregressor__bandwidth": [0.3, 1.0, "scott"],
         "nadarayawatsonregressor__kernel": ["gaussian", "epanechnikov"]},
        {"nadarayawatsonregressor__kernel": [SymmetricBeta()],
         "nadarayawatsonregressor__kernel__power": [1.0, 3.0],
         "nadarayawatsonregressor__bandwidth": [2.0]},
    ]
    with warnings.catch_warnings():
        # The narrower Epanechnikov candidates leave some test queries with no one in reach.
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        search = GridSearchCV(pipe, grid, cv=folds).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and len(scores) == 8
    best = search.cv_results_["params"][int(np.argmax(scores))]
    assert search.best_params_ == best


# -- weights, duplicates, units and kernels without a slope --------------------------------


def _bootstrap(seed, n=300):
    rng = np.random.default_rng(100)
    X = rng.uniform(-2, 2, (n, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(n)
    rows = np.random.default_rng(seed).integers(0, n, n)
    return X, y, rows


@pytest.mark.parametrize("seed", [4, 7, 8, 11])  # 0.23x to 0.007x before
def test_bootstrap_resample_equals_its_weights_and_does_not_collapse(seed):
    # A bootstrap drawn as rows, fitted leaving out inputs, equals the same draw passed
    # as weights under the default row rule: either way a point's copies never predict
    # it (the docs' advice for resampled data).
    X, y, rows = _bootstrap(seed)
    by_input = LeaveOneOutBandwidth(leave_out="input")
    resampled = NadarayaWatsonRegressor(bandwidth=by_input).fit(X[rows], y[rows])
    counts = np.bincount(rows, minlength=len(X)).astype(float)
    weighted = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y, sample_weight=counts)
    np.testing.assert_allclose(resampled.bandwidth_, weighted.bandwidth_, rtol=1e-6)
    full = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    # The relevant feature's bandwidth stays near the one learned on the distinct rows
    # (somewhat wider: a resample holds about 63% of them). It fell up to 150x when
    # duplicates predicted each other.
    assert 0.8 < resampled.bandwidth_[0] / full.bandwidth_[0] < 2.5
    assert np.all(np.isfinite(resampled.loss_curve_))


@pytest.mark.parametrize("Estimator", [NadarayaWatsonRegressor, NadarayaWatsonClassifier])
def test_scaling_all_weights_changes_no_learned_bandwidth(Estimator):
    X, y, w = _data(n=120)
    if Estimator is NadarayaWatsonClassifier:
        y = (y > 0).astype(int)
    w = w + 1.0
    a = Estimator(bandwidth="loo").fit(X, y, sample_weight=w)
    b = Estimator(bandwidth="loo").fit(X, y, sample_weight=1.5 * w)
    np.testing.assert_allclose(b.bandwidth_, a.bandwidth_, rtol=1e-6)
    np.testing.assert_allclose(b.loss_curve_[-1], a.loss_curve_[-1], rtol=1e-9)
    # Adaptive bandwidths count weights as rows: scaling them changes the k nearest.
    cv_a = (NadarayaWatsonClassifierCV if Estimator is NadarayaWatsonClassifier
            else NadarayaWatsonRegressorCV)(bandwidth_kinds=["fixed"]).fit(
        X, y, sample_weight=w)
    cv_b = type(cv_a)(bandwidth_kinds=["fixed"]).fit(X, y, sample_weight=1.5 * w)
    assert cv_b.best_index_ == cv_a.best_index_
    np.testing.assert_allclose(cv_b.cv_results_["mean_test_score"],
                               cv_a.cv_results_["mean_test_score"], rtol=1e-9)


def test_balanced_class_weights_are_scale_free():
    X, y, _ = _data(n=90)
    labels = np.digitize(y, [-0.5, 0.5])
    from sklearn.utils.class_weight import compute_sample_weight

    balanced = compute_sample_weight("balanced", labels)
    a = NadarayaWatsonClassifierCV(**FIXED_KINDS).fit(X, labels, sample_weight=balanced)
    b = NadarayaWatsonClassifierCV(**FIXED_KINDS).fit(X, labels, sample_weight=7.0 * balanced)
    assert a.best_index_ == b.best_index_
    np.testing.assert_allclose(a.cv_results_["mean_test_score"],
                               b.cv_results_["mean_test_score"], rtol=1e-9)


@pytest.mark.parametrize("unit", [1e-200, 1e-170, 1e-20, 1e77, 1e250])
def test_bandwidths_do_not_depend_on_the_unit_of_y(unit):
    X, y, w = _data(n=80)
    reference = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "constant targets" warning, no overflow
        scaled = NadarayaWatsonRegressor(bandwidth="loo").fit(X, unit * y, sample_weight=w)
        cv = NadarayaWatsonRegressorCV(**FIXED).fit(X, unit * y, sample_weight=w)
    np.testing.assert_allclose(scaled.bandwidth_, reference.bandwidth_, rtol=1e-6)
    cv_reference = NadarayaWatsonRegressorCV(**FIXED).fit(X, y, sample_weight=w)
    assert cv.best_index_ == cv_reference.best_index_
    np.testing.assert_allclose(cv.predict(X) / unit, cv_reference.predict(X), rtol=1e-9)
    if 1e-150 < unit < 1e150:  # the squared errors themselves are floats
        np.testing.assert_allclose(scaled.loss_curve_ / unit**2, reference.loss_curve_,
                                   rtol=1e-6)
        np.testing.assert_allclose(cv.best_score_ / unit**2, cv_reference.best_score_,
                                   rtol=1e-6)


@pytest.mark.parametrize("leave_out, leave", [("row", "row"), ("input", "location")])
def test_cv_scores_are_the_row_losses_with_duplicates(leave_out, leave):
    # Default scores are the rows' weighted loss, each row left out alone or with the
    # other rows at its input.
    X, y, w = _data(n=40)
    X = np.vstack([X, X[:10], X[:3]])
    y = np.concatenate([y, y[:10] + 0.5, y[:3]])  # other targets at repeated inputs
    w = np.concatenate([w, np.ones(10), w[:3]])  # and copies of whole rows
    grid = [0.1, 0.4, 1.5]
    cv = NadarayaWatsonRegressorCV(bandwidths=grid, degree=0, leave_out=leave_out).fit(
        X, y, sample_weight=w)
    losses = []
    for h in grid:
        preds = _refit_loo_predictions(lambda h=h: NadarayaWatsonRegressor(bandwidth=h),
                                       X, y, w, leave=leave)
        losses.append(np.sum(w * (preds - y) ** 2) / w.sum())
    np.testing.assert_allclose(-cv.cv_results_["mean_test_score"], losses, rtol=1e-10)
    labels = (y > 0).astype(int)
    clf = NadarayaWatsonClassifierCV(bandwidths=grid, leave_out=leave_out).fit(
        X, labels, sample_weight=w)
    log_losses = []
    for h in grid:
        proba = _refit_loo_predictions(lambda h=h: NadarayaWatsonClassifier(bandwidth=h),
                                       X, labels, w, "predict_proba", leave=leave)
        # Clipped at float64's eps, as sklearn.metrics.log_loss clips.
        hit = np.maximum(proba[np.arange(len(X)), labels], np.finfo(np.float64).eps)
        log_losses.append(-np.sum(w * np.log(hit)) / w.sum())
    np.testing.assert_allclose(-clf.cv_results_["mean_test_score"], log_losses, rtol=1e-10)


@pytest.mark.parametrize("kernel", ["tophat", "boxcar", "uniform", "symmetric_beta_0", "step"])
def test_kernels_without_a_gradient_learn_on_exact_grids(kernel):
    from sklearn_nw.kernels import SymmetricBeta

    kernel = {"symmetric_beta_0": SymmetricBeta(0),
              "step": lambda u: (u <= 1).double()}.get(kernel, kernel)
    X, y, _ = _data(n=150)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth="loo").fit(X, y)
    assert reg.n_iter_ >= 1 and np.all(np.diff(reg.loss_curve_) <= 0)
    # Never worse than the best of the exact grids it was refined from.
    cv = NadarayaWatsonRegressorCV(kernel=kernel, bandwidths=np.geomspace(0.05, 3, 40),
                                   degree=0).fit(X, y)
    assert reg.loss_curve_[-1] <= -cv.best_score_ * (1 + 1e-9)
    with pytest.raises(ValueError, match="form='full'.*has no gradient"):
        NadarayaWatsonRegressor(kernel=kernel,
                                bandwidth=LeaveOneOutBandwidth(form="full")).fit(X, y)


def test_cv_grid_is_not_the_users_array():
    X, y, _ = _data(n=40)
    grid = np.array([[0.2, 0.3], [0.5, 0.6], [1.0, 1.2]])  # per-feature vectors
    cv = NadarayaWatsonRegressorCV(bandwidths=grid, degree=0).fit(X, y)
    before = cv.bandwidth_.copy()
    grid *= 100
    np.testing.assert_array_equal(cv.bandwidth_, before)
    cv.bandwidths_ *= 2
    np.testing.assert_array_equal(cv.get_params()["bandwidths"], grid)


@pytest.mark.parametrize("log_h", [-30.0, -40.0, -50.0])
def test_gaussian_loo_loss_stays_exact_at_tiny_bandwidths_with_near_duplicates(log_h):
    # The fused |q|^2 + |x|^2 - 2 q.x logits lose every digit far from the keys' center in
    # units of h; the loss was NaN from h ~ e^-30 on with near-duplicate inputs.
    rng = np.random.default_rng(7)
    X = rng.uniform(5.0, 6.0, (60, 2))
    X[1] = X[0] + 1e-9
    X[3] = X[2] + 1e-12
    y = rng.standard_normal(60)
    h = torch.full((2,), float(np.exp(log_h)), dtype=torch.float64, requires_grad=True)
    log_w, self_log_w = _torch(np.zeros(60)), _torch(np.full(60, -np.inf))
    value = loo_loss(_torch(X), _torch(y[:, None]), h, Gaussian(), log_w, self_log_w,
                     loss="squared_error", backward=True)
    # At such bandwidths each point's prediction is its nearest other point's target.
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    assert value == pytest.approx(np.mean((y[d2.argmin(1)] - y) ** 2), rel=1e-12)
    assert torch.isfinite(h.grad).all()


def test_a_non_finite_loss_stops_the_descent_at_the_best_point(monkeypatch):
    # L-BFGS's line search died with an IndexError on a NaN loss.
    from sklearn_nw._loo_objective import Objective

    X, y, _ = _data(n=80)
    reference = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    exact, calls = Objective.loss, []

    def nan_after_two(self, metric, rows, backward=False):
        calls.append(1)
        return exact(self, metric, rows, backward) if len(calls) <= 2 else float("nan")

    monkeypatch.setattr(Objective, "loss", nan_after_two)
    with pytest.warns(ConvergenceWarning, match="not finite"):
        reg = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    assert np.all(np.isfinite(reg.bandwidth_)) and np.all(np.isfinite(reg.loss_curve_))
    # Never worse than where the descent started.
    assert reg.loss_curve_[-1] <= reference.loss_curve_[0] * (1 + 1e-9)


def test_a_vanishing_starting_gradient_starts_the_descent_cleanly():
    # scikit-learn's sample-weight checks' 12 points on a 3 x 4 lattice: the gradient
    # at the start is ~1e-177, whose square underflows; the first step's length was
    # 0 / 0 (a RuntimeWarning, then NaN parameters handed to L-BFGS-B).
    X = np.array([[i, j] for i in (1, 2, 3) for j in (1, 2, 3, 4)], dtype=float)
    y = np.array([1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2], dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    assert np.all(np.isfinite(reg.bandwidth_)) and np.all(reg.bandwidth_ > 0)
    assert np.all(np.isfinite(reg.predict(X)))


# -- local polynomials in the CV estimators ---------------------------------------------


@pytest.mark.parametrize("degree", [1, 2])
def test_cv_scores_local_polynomials_by_exact_leave_one_out(degree):
    X, y, w = _data(n=50, d=2)
    X[3] = X[4]  # a repeated input leaves with all its rows
    grid = [0.3, 0.6, 1.2]
    cv = NadarayaWatsonRegressorCV(bandwidths=grid, degree=degree).fit(X, y, sample_weight=w)
    losses = []
    for h in grid:
        # The CV estimator's local fits are bounded by default, in its leave-one-out too.
        preds = _refit_loo_predictions(
            lambda h=h: NadarayaWatsonRegressor(bandwidth=h, degree=degree, bounded=True),
            X, y, w)
        losses.append(np.sum(w * (preds - y) ** 2) / w.sum())
    np.testing.assert_allclose(-cv.cv_results_["mean_test_score"], losses, rtol=1e-9)
    assert cv.best_index_ == int(np.argmin(losses))
    plain = NadarayaWatsonRegressor(bandwidth=cv.bandwidth_, degree=degree, bounded=True)
    np.testing.assert_allclose(cv.predict(X), plain.fit(X, y, w).predict(X))


def test_cv_with_a_splitter_fits_local_polynomials():
    X, y, _ = _data(n=60, d=2)
    grid = [0.3, 0.6, 1.2]
    cv = NadarayaWatsonRegressorCV(bandwidths=grid, degree=1, cv=3).fit(X, y)
    search = GridSearchCV(NadarayaWatsonRegressor(degree=1, bounded=True),
                          {"bandwidth": [np.array([h, h]) for h in grid]}, cv=3).fit(X, y)
    np.testing.assert_allclose(cv.cv_results_["mean_test_score"],
                               search.cv_results_["mean_test_score"], rtol=1e-12)


@pytest.mark.parametrize("cv", [None, 3])
def test_auto_degree_keeps_the_best_candidate_of_every_degree(cv):
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (120, 1))
    y = 4 * X[:, 0] + np.sin(3 * X[:, 0]) + 0.05 * rng.standard_normal(120)  # a trend
    model = NadarayaWatsonRegressorCV(bandwidths=[0.05, 0.1, 0.2, 0.4], degree="auto",
                                      cv=cv, selection="min").fit(X, y)
    degrees = model.cv_results_["degree"]
    np.testing.assert_array_equal(degrees, np.repeat([0, 1, 2], 4))
    scores = model.cv_results_["mean_test_score"]
    assert model.best_index_ == int(np.argmax(scores))
    assert model.degree_ == degrees[model.best_index_] > 0  # the trend needs a slope
    np.testing.assert_array_equal(model.bandwidth_, model.bandwidths_[model.best_index_])
    for degree in (0, 1, 2):  # each degree's scores are its own search's
        alone = NadarayaWatsonRegressorCV(bandwidths=[0.05, 0.1, 0.2, 0.4], degree=degree,
                                          cv=cv).fit(X, y)
        np.testing.assert_allclose(scores[degrees == degree],
                                   alone.cv_results_["mean_test_score"], rtol=1e-12)
    plain = NadarayaWatsonRegressor(bandwidth=model.bandwidth_, degree=model.degree_,
                                    bounded=True)
    np.testing.assert_allclose(model.predict(X), plain.fit(X, y).predict(X))


def test_auto_degree_keeps_a_higher_degree_only_past_one_standard_error():
    from sklearn_nw._selection import Family, one_standard_error

    w = np.ones(100)
    rng = np.random.default_rng(0)
    base = rng.normal(size=100)

    def run(shift, noise):  # one grid point: scores per sample, and their mean
        per_sample = (base + shift + noise * rng.normal(size=100))[None, :]
        return Family(per_sample.mean(1), {}, np.ones((1, 1)), (per_sample, w), [None])

    # A small mean gain, much noisier than itself: not taken; a clear gain is.
    assert one_standard_error([run(0.0, 0.0), run(0.01, 1.0)]) == 0
    assert one_standard_error([run(0.0, 0.0), run(0.5, 0.1)]) == 1
    # Compared with the degree kept so far, not only with degree 0.
    assert one_standard_error([run(0.0, 0.0), run(0.5, 0.1), run(0.52, 1.0)]) == 1


def test_one_se_orders_adaptive_candidates_by_k_times_c():
    from sklearn_nw._adaptive import Adaptive
    from sklearn_nw._selection import Family, smoothest_within_one_se

    rng = np.random.default_rng(0)
    base = rng.normal(size=200)
    candidates = [Adaptive("balloon", 4, 1.0), Adaptive("balloon", 16, 0.25),
                  Adaptive("balloon", 8, 1.0), Adaptive("balloon", 64, 0.25)]

    def family(*shifts):  # per-sample scores: the best, then noisy or clearly worse
        per_sample = np.stack([base + s + (0.5 * rng.normal(size=200) if s > -1 else 0)
                               for s in shifts])
        return Family(per_sample.mean(1), {}, np.ones((4, 1)),
                      (per_sample, np.ones(200)), candidates)

    # k c = 4, 4, 8, 16: the largest within one standard error of the best is taken.
    assert smoothest_within_one_se(family(0.0, -0.01, -0.01, -5.0)) == 2
    # k c ties go to the larger k.
    assert smoothest_within_one_se(family(0.0, -0.01, -5.0, -5.0)) == 1
    # A clear loss is never within one standard error.
    assert smoothest_within_one_se(family(0.0, -5.0, -5.0, -5.0)) == 0
    # Without per-sample scores, the best.
    run = family(0.0, -0.01, -0.01, -5.0)._replace(samples=None)
    assert smoothest_within_one_se(run) == int(np.argmax(run.scores))
