"""The unit leave-one-out leaves out (``leave_out``): a row (the default) or every row at an
input, checked against explicit refits on data whose inputs repeat, for every family the
CV estimators search and for the learned bandwidth's descent."""

import warnings

import numpy as np
import pytest
import torch

from sklearn_nw import (
    AdaptiveBandwidth,
    EmptyNeighborhoodWarning,
    LeaveOneOutBandwidth,
    LocalFitWarning,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)


def _table(seed=0):
    """A small table whose inputs repeat: 12 distinct inputs, 36 rows, some whole rows
    duplicated (same input, target and weight) and others at a shared input with other
    targets (tied in distance from every query: the k nearest share their last units
    among them), and weights that are not all 1."""
    rng = np.random.default_rng(seed)
    inputs = rng.normal(size=(12, 2))
    X = inputs[rng.integers(0, 12, 30)]
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
            # rows, or a compact kernel reaches no key (the documented local-constant
            # and nearest-key fallbacks, which leave-one-out takes too).
            warnings.simplefilter("ignore", LocalFitWarning)
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            out.append(getattr(model, method)(X[i : i + 1])[0])
    return np.array(out)


def _assert_scores_are_refits(cv, X, y, w, leave_out, picks=7):
    """Every few of ``cv``'s candidates (``picks`` spread over its grid): its score
    against the weighted loss of refits without each unit."""
    params = cv.cv_results_["params"]
    for i in np.unique(np.linspace(0, len(params) - 1, picks).astype(int)):
        plain = {**params[i], "bounded": cv.bounded, "kernel": cv.kernel}
        if cv.n_neighbors is not None:
            plain["n_neighbors"] = cv.n_neighbors
            plain.pop("kind")
            model = lambda p=plain: NadarayaWatsonRegressor(**p)
        else:
            model = lambda p=plain: _plain(p)
        preds = _refit_predictions(model, X, y, w, leave_out)
        loss = np.sum(w * (preds - y) ** 2) / w.sum()
        np.testing.assert_allclose(-cv.cv_results_["mean_test_score"][i], loss,
                                   rtol=1e-9, err_msg=str(params[i]))


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
    X, y, w = _table()
    cv = NadarayaWatsonRegressorCV(leave_out=leave_out, bounded=False, **search).fit(
        X, y, sample_weight=w)
    # Every candidate of a few families (the searches hold dozens).
    _assert_scores_are_refits(cv, X, y, w, leave_out)


def _three_rows_at_each_input(seed=0):
    """12 inputs, each holding three rows of different targets and unit weight: under
    leave_out="input" a key stands for rows of several targets, and every row of a key
    carries the same share of its attention."""
    rng = np.random.default_rng(seed)
    X = np.repeat(rng.normal(size=(12, 2)), 3, axis=0)
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(scale=0.5, size=len(X))
    return X, y, np.ones(len(y))


@pytest.mark.parametrize("search", [
    {"degree": 1},
    {"degree": 2, "bandwidth_kinds": ["fixed"]},
    {"degree": 1, "n_neighbors": 8},
    {"degree": 1, "bandwidth_kinds": ["sample_point"]},
])
def test_bounded_scores_of_inputs_take_their_rows_range(search):
    # A bounded local fit keeps within the targets of the rows that carry its weight:
    # under leave_out="input" those of each key's rows, not their mean (a narrower
    # range than any refit's).
    X, y, w = _three_rows_at_each_input()
    cv = NadarayaWatsonRegressorCV(leave_out="input", bounded=True, **search).fit(X, y)
    _assert_scores_are_refits(cv, X, y, w, "input", picks=6)


@pytest.mark.parametrize("degree", [1, 2])
def test_bounded_learned_loss_of_inputs_takes_their_rows_range(degree):
    X, y, w = _three_rows_at_each_input(1)
    reg = NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(leave_out="input"),
                                  degree=degree, bounded=True).fit(X, y)
    h = reg.bandwidth_
    preds = _refit_predictions(
        lambda: NadarayaWatsonRegressor(bandwidth=h, degree=degree, bounded=True),
        X, y, w, "input")
    np.testing.assert_allclose(reg.loss_curve_[-1], np.mean((preds - y) ** 2), rtol=1e-8)


@pytest.mark.parametrize("degree", [0, 1])
def test_sample_point_keys_do_not_count_their_own_copies(degree):
    # Whole rows copied (input, target and weight; no input shared otherwise, as a
    # bootstrap drawn as rows has them): a sample-point key's bandwidth counts other
    # locations only, not its own copies (they made k = 1 a bandwidth of 0).
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(10, 2)), rng.normal(size=10)
    X, y = np.vstack([X, X[:6]]), np.concatenate([y, y[:6]])
    w = np.ones(len(y))
    cv = NadarayaWatsonRegressorCV(bandwidth_kinds=["sample_point"], degree=degree,
                                   bounded=False).fit(X, y)
    _assert_scores_are_refits(cv, X, y, w, "row", picks=5)


@pytest.mark.parametrize("kernel", ["epanechnikov", "tophat"])
def test_adaptive_keys_keeping_no_weight_do_not_attend_to_themselves(kernel):
    # Some rows copied, others alone (leave_out="row": a key keeps its copies' weight on
    # itself, none for a row alone); at c = 1/4 a compact kernel reaches no other key,
    # and a row alone fell back on itself (its logit the lowest float instead of -inf).
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(12, 2)), rng.normal(size=12)
    X, y = np.vstack([X, X[:9]]), np.concatenate([y, y[:9]])
    w = np.ones(len(y))
    cv = NadarayaWatsonRegressorCV(kernel=kernel, bandwidth_kinds=["balloon", "sample_point"],
                                   degree=0, bounded=False).fit(X, y)
    _assert_scores_are_refits(cv, X, y, w, "row", picks=8)


@pytest.mark.parametrize("search", [
    {"degree": 0, "bandwidth_kinds": ["fixed"]},
    {"degree": 1, "bandwidth_kinds": ["fixed"]},
    {"degree": 2, "bandwidth_kinds": ["fixed"]},
])
@pytest.mark.parametrize("d", [1, 2])
def test_nearest_key_fallback_keeps_a_lattices_ties(search, d):
    # Integer inputs, the smallest candidates below their spacing: a row left out has no
    # key in a compact kernel's reach and falls back on its nearest others, every tie of
    # their raw differences, as a refit's does (scaled or centered coordinates rounded
    # the ties apart: the smallest candidate scored 85.8 against refits' 25.8).
    rng = np.random.default_rng(0)
    X = (np.arange(30.0)[:, None] if d == 1 else
         np.stack(np.meshgrid(np.arange(6.0), np.arange(5.0)), -1).reshape(-1, 2))
    y = X.sum(1) % 3 + 0.3 * rng.normal(size=len(X))
    w = np.ones(len(y))
    cv = NadarayaWatsonRegressorCV(kernel="epanechnikov", bounded=False,
                                   bandwidths=np.array([0.3, 0.45, 0.8, 1.5, 3.0])[:, None]
                                   * np.ones(d), **search).fit(X, y)
    _assert_scores_are_refits(cv, X, y, w, "row", picks=5)


def test_learned_loss_keeps_a_lattices_ties():
    # The descent's start grid and sweep at bandwidths below the spacing: the fallback.
    X = np.stack(np.meshgrid(np.arange(6.0), np.arange(5.0)), -1).reshape(-1, 2)
    y = X.sum(1) % 3 + 0.3 * np.random.default_rng(1).normal(size=len(X))
    from sklearn_nw._leave_one_out import leave_one_out_set
    from sklearn_nw._loo_objective import Objective
    from sklearn_nw.kernels import get_kernel

    loo = leave_one_out_set(X, y[:, None], np.ones(len(y)), leave_out="row")
    tensor = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))
    objective = Objective(tensor(loo.X), tensor(loo.values), tensor(loo.log_weight),
                          tensor(loo.self_log_weight), get_kernel("epanechnikov"),
                          "squared_error", 1024)
    h = np.array([[0.4, 0.45], [0.7, 0.7]])
    losses = objective.grid(h, torch.arange(len(y)))
    for h_g, loss in zip(h, losses):
        preds = _refit_predictions(lambda h_g=h_g: NadarayaWatsonRegressor(
            kernel="epanechnikov", bandwidth=h_g), X, y, np.ones(len(y)), "row")
        np.testing.assert_allclose(loss, np.mean((preds - y) ** 2), rtol=1e-9)


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


@pytest.mark.parametrize("degree, bounded", [(0, False), (1, False)])
@pytest.mark.parametrize("leave_out", ["row", "input"])
def test_learned_loss_is_the_loss_of_refits(degree, bounded, leave_out):
    X, y, w = _table(1)
    reg = NadarayaWatsonRegressor(
        bandwidth=LeaveOneOutBandwidth(leave_out=leave_out), degree=degree,
        bounded=bounded).fit(X, y, sample_weight=w)
    h = reg.bandwidth_
    preds = _refit_predictions(
        lambda: NadarayaWatsonRegressor(bandwidth=h, degree=degree, bounded=bounded),
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
    # Fixed bandwidths: adaptive ones count weights as rows (k nearest units). The best
    # candidate: the one-standard-error rule counts weights as repeated samples, and
    # the candidates a default grid's search scores follow its choice.
    a = NadarayaWatsonRegressorCV(degree=0, bandwidth_kinds=["fixed"], selection="min").fit(
        X, y, sample_weight=w)
    b = NadarayaWatsonRegressorCV(degree=0, bandwidth_kinds=["fixed"], selection="min").fit(
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


def _objectives(X, values, w, kernel):
    """The row rule's leave-one-out objective two ways: keys the distinct rows (each
    keeping its copies' weight), and keys the distinct inputs with the distinct rows as
    their queries (what the descent uses where inputs repeat)."""
    import torch

    from sklearn_nw._leave_one_out import QueryTerms, input_queries, leave_one_out_set
    from sklearn_nw._loo_objective import Objective

    loss = "log_loss" if values.shape[1] > 1 else "squared_error"
    t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))
    loo = leave_one_out_set(X, values, w, leave_out="row")
    by_row = Objective(t(loo.X), t(loo.values), t(loo.log_weight), t(loo.self_log_weight),
                       kernel, loss, 1.0)
    q = input_queries(loo)
    assert q is not None and len(q.keys.weight) < len(q.key)  # inputs repeat here
    by_input = Objective(
        t(q.keys.X), t(q.keys.values), t(q.keys.log_weight), t(q.keys.self_log_weight),
        kernel, loss, 1.0, queries=(torch.as_tensor(q.key), QueryTerms(
            t(q.log_weight), t(q.self_log_weight), t(q.own_values - q.keys.values[q.key]),
            t(q.values), t(q.row_log_weight))))
    return by_row, by_input


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "laplacian"])
@pytest.mark.parametrize("classes", [0, 3])
def test_inputs_as_keys_give_the_distinct_rows_loss_and_gradient(kernel, classes):
    import torch

    from sklearn_nw._loo_objective import coordinate_sweep
    from sklearn_nw.kernels import get_kernel

    X, y, w = _table(2)
    X = np.vstack([X, X[:3] + 5.0])  # rows alone at inputs of no kernel mass (fallback)
    y, w = np.concatenate([y, y[:3]]), np.concatenate([w, [0.0, 1.0, 3.0]])
    values = (y[:, None] if not classes else
              np.eye(classes)[np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))])
    by_row, by_input = _objectives(X, values, w, get_kernel(kernel))
    rows = [torch.nonzero(o.log_w.exp() > 0)[:, 0] for o in (by_row, by_input)]
    # The same rows, in their own orders: compare the sums and the sorted per-row losses.
    # The smallest: far from the keys' center in units of h, the sums are redone from
    # exact differences, shifted by each row's largest logit; every row's prediction is
    # what stays at its input (or its nearest input's mean), the loss flat.
    for h in ([0.05, 0.08], [0.4, 0.9], [3.0, 2.0], [1e-7, 2e-7]):
        losses, grads = [], []
        for objective, r in zip((by_row, by_input), rows):
            metric = torch.tensor(h, dtype=torch.float64, requires_grad=True)
            losses.append(objective.loss(metric, r, backward=True))
            grads.append(metric.grad.numpy())
        # Two orders of summation, whose rounding depends on the machine: 4.2e-12 apart
        # on an AVX-512 one, within 1e-12 on the earlier CI machines.
        np.testing.assert_allclose(losses[0], losses[1], rtol=1e-10)
        if h[0] < 1e-6:
            # The distinct rows' gradient is rounding there: its products of weights
            # with coordinates 1/h cancel at other rows of the same input (distance 0).
            np.testing.assert_array_equal(grads[1], 0.0)
            continue
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-9, atol=1e-12 * abs(
            grads[0]).max())
    hs = np.array([[0.05, 0.08], [0.4, 0.9], [3.0, 2.0], [0.3, 0.02]])
    np.testing.assert_allclose(by_row.grid(hs, rows[0]), by_input.grid(hs, rows[1]),
                               rtol=1e-12)
    # A grid of multiples of one vector (the starting grid: one pass for all of them).
    multiples = np.geomspace(1 / 8, 8, 13)[:, None] * np.array([0.3, 0.5])
    np.testing.assert_allclose(by_row.grid(multiples, rows[0]),
                               by_input.grid(multiples, rows[1]), rtol=1e-12)
    per_row = [np.sort(o.per_row(hs, r).numpy(), axis=1) for o, r in zip((by_row, by_input),
                                                                           rows)]
    # Distinct rows of equal loss weights: by_row has one per distinct row as by_input.
    np.testing.assert_allclose(per_row[0], per_row[1], rtol=1e-10, atol=1e-14)
    # The coordinate sweep, on its kept distances, takes the same steps.
    start = np.array([0.4, 0.9])
    loss = float(by_row.grid(start[None], rows[0])[0])
    swept = [coordinate_sweep(o, start, loss, r) for o, r in zip((by_row, by_input), rows)]
    np.testing.assert_allclose(swept[0][0], swept[1][0], rtol=1e-12)
    np.testing.assert_allclose(swept[0][1], swept[1][1], rtol=1e-12)


@pytest.mark.parametrize("kernel", ["epanechnikov", "laplacian"])
def test_learned_loss_of_other_kernels_is_the_loss_of_refits(kernel):
    X, y, w = _table(1)
    reg = NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(), kernel=kernel).fit(
        X, y, sample_weight=w)
    with warnings.catch_warnings():
        # A compact kernel's refit leaves a row with no key in reach: its nearest keys
        # (the fallback the leave-one-out loss takes too).
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        preds = _refit_predictions(
            lambda: NadarayaWatsonRegressor(bandwidth=reg.bandwidth_, kernel=kernel), X, y,
            w, "row")
    np.testing.assert_allclose(reg.loss_curve_[-1], np.sum(w * (preds - y) ** 2) / w.sum(),
                               rtol=1e-8)
