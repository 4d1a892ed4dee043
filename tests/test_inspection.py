"""The displays of sklearn_nw.inspection: the attention heatmap (signed weights on a
diverging color map, a subset of a large training set), the bandwidth search of the CV
estimators, the loss curve of a learned bandwidth and the kernel profiles."""

import math

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from sklearn_nw import (
    LeaveOneOutBandwidth,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw.inspection import (
    AttentionDisplay,
    BandwidthSearchDisplay,
    KernelDisplay,
    LossCurveDisplay,
    UncertaintyBandDisplay,
)
from sklearn_nw.kernels import KERNELS

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.usefixtures("pyplot")


def _data():
    X = np.linspace(0, 5, 40)[:, None]
    return X, np.sin(X[:, 0])


def _noisy(n=60, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))
    y = 2 * np.sin(X[:, 0]) + X[:, 0] ** 0.8 + rng.normal(scale=0.5, size=n)
    return X, y


# -- AttentionDisplay ----------------------------------------------------------------------

def test_nonnegative_attention_is_drawn_on_a_sequential_map():
    import matplotlib.pyplot as plt

    X, y = _data()
    reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    display = AttentionDisplay.from_estimator(reg, X[::2])
    assert display.image_.get_cmap().name == "Reds"
    assert display.image_.get_array().shape == (20, 40)
    assert display.image_.get_array().min() >= 0
    plt.close(display.figure_)


def test_signed_equivalent_kernel_is_centered_on_zero():
    import matplotlib.pyplot as plt
    from matplotlib.colors import CenteredNorm, LogNorm

    X, y = _data()
    reg = NadarayaWatsonRegressor(bandwidth=0.6, degree=2).fit(X, y)
    _, attention = reg.predict(X[:5] - 0.3, return_attention=True)
    assert attention.min() < 0  # the boundary's equivalent kernel has negative weights
    display = AttentionDisplay(attention).plot()
    assert display.image_.get_cmap().name == "RdBu_r"
    assert isinstance(display.image_.norm, CenteredNorm)
    assert display.image_.norm.vcenter == 0.0
    plt.close(display.figure_)
    # A norm or a color map given by the user is kept.
    display = AttentionDisplay(np.abs(attention) + 1e-6).plot(cmap="viridis", norm=LogNorm())
    assert display.image_.get_cmap().name == "viridis"
    assert isinstance(display.image_.norm, LogNorm)
    plt.close(display.figure_)


def test_leave_one_out_attention_and_bad_sort_by():
    import matplotlib.pyplot as plt

    X, y = _data()
    reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    display = AttentionDisplay.from_estimator(reg)  # the training set on itself
    assert display.image_.get_array().shape == (40, 40)
    plt.close(display.figure_)
    with pytest.raises(ValueError, match="sort_by"):
        AttentionDisplay.from_estimator(reg, X, sort_by="prediction")


def test_small_sets_are_shown_whole_without_a_note():
    X, y = _data()
    reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    Q = X[::-2].copy()  # queries in decreasing order
    display = AttentionDisplay.from_estimator(reg, Q)
    assert display.note_ is None and display.note_artist_ is None
    np.testing.assert_array_equal(display.key_indices_, np.argsort(y, kind="stable"))
    pred = reg.predict(Q)
    np.testing.assert_array_equal(display.query_indices_, np.argsort(pred, kind="stable"))
    assert len(display.ax_.texts) == 0


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])  # dense, sparse attention
def test_large_training_set_shows_every_mth_point_and_says_so(kernel, dense):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, (2000, 1))
    y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=2000)
    Q = np.linspace(0, 5, 601)[:, None]
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.3).fit(X, y)
    display = AttentionDisplay.from_estimator(reg, Q)  # max_keys = max_queries = 300
    # ceil(2000 / 300) = 7: every 7th training point by target, 286 of them; ceil(601 /
    # 300) = 3: every 3rd query by prediction, 201 of them.
    keys = np.argsort(y, kind="stable")[::7]
    pred, attention = reg.predict(Q, return_attention=True)
    queries = np.argsort(pred, kind="stable")[::3]
    np.testing.assert_array_equal(display.key_indices_, keys)
    np.testing.assert_array_equal(display.query_indices_, queries)
    assert len(keys) == 286 and len(queries) == 201
    np.testing.assert_allclose(display.image_.get_array(),
                               dense(attention)[np.ix_(queries, keys)])
    assert display.note_ == (
        "showing 286 of 2,000 training points (every 7th, sorted by target);\n"
        "201 of 601 queries (every 3rd, sorted by prediction);\n"
        "rows no longer sum to 1")
    assert display.note_artist_.get_text() == display.note_
    assert display.note_artist_ in display.ax_.texts
    # The axes count positions in the full order: 2,000 training points wide.
    left, right = display.image_.get_extent()[:2]
    assert left == -3.5 and right == (286 - 0.5) * 7
    # None shows all; a subset of queries alone keeps the rows' sums.
    display = AttentionDisplay.from_estimator(reg, Q, max_keys=None, max_queries=100)
    assert display.image_.get_array().shape == (86, 2000)  # every 7th of 601
    assert display.note_ == "showing 86 of 601 queries (every 7th, sorted by prediction)"


def test_subset_of_the_constructor_without_an_order_and_bad_max():
    attention = np.full((10, 50), 1 / 50)
    display = AttentionDisplay(attention).plot(max_keys=25)
    np.testing.assert_array_equal(display.key_indices_, np.arange(0, 50, 2))
    np.testing.assert_array_equal(display.query_indices_, np.arange(10))
    assert display.note_ == "showing 25 of 50 training points (every 2nd);\nrows no longer sum to 1"
    for bad in (0, 2.5, "300"):
        with pytest.raises(ValueError, match="max_keys must be a positive integer or None"):
            AttentionDisplay(attention).plot(max_keys=bad)


# -- BandwidthSearchDisplay -------------------------------------------------------------

def test_bandwidth_search_of_every_kind_and_degree():
    X, y = _noisy(seed=2)
    search = NadarayaWatsonRegressorCV().fit(X, y)
    results = search.cv_results_
    # On these data the one-standard-error rule keeps a simpler family than the best
    # score's: the marker must follow best_index_, not the highest score.
    assert search.best_index_ != np.argmax(results["mean_test_score"])
    display = BandwidthSearchDisplay.from_estimator(search)
    loss = -results["mean_test_score"]
    kind, degree = results["kind"], results["degree"]
    fixed = kind == "fixed"
    assert fixed.any() and (~fixed).any() and len(np.unique(degree)) > 1
    assert len(display.axes_) == 2 and display.ax_ is display.axes_[0]
    assert display.figure_ is display.axes_[0].figure
    assert display.ax_.get_ylabel() == "leave-one-out mean squared error"
    assert display.ax_.get_xlabel() == "bandwidth h"
    assert display.ax_.get_xscale() == "log" and display.axes_[1].get_xscale() == "log"
    assert display.axes_[1].get_xlabel().startswith("k nearest neighbors")
    # One line per degree of the fixed bandwidths, one per degree and kind of the others.
    n_fixed = len(np.unique(degree[fixed]))
    n_adaptive = len({(k, g) for k, g in zip(kind[~fixed], degree[~fixed])})
    assert len(display.lines_) == n_fixed + n_adaptive
    for line, g in zip(display.lines_, np.unique(degree[fixed])):
        rows = np.nonzero(fixed & (degree == g))[0]
        rows = rows[np.argsort(search.bandwidths_[rows, 0])]
        assert line in display.ax_.lines
        np.testing.assert_allclose(line.get_xdata(), search.bandwidths_[rows, 0])
        np.testing.assert_allclose(line.get_ydata(), loss[rows])
    # An adaptive line: the lowest loss over the scales at each k.
    line = display.lines_[n_fixed]
    assert line.get_label() == "balloon, degree 0"
    rows = (kind == "balloon") & (degree == 0)
    k = np.ma.getdata(results["n_neighbors"])
    ks = np.unique(k[rows])
    np.testing.assert_allclose(line.get_xdata(), ks)
    np.testing.assert_allclose(line.get_ydata(), [loss[rows & (k == v)].min() for v in ks])
    # The chosen candidate, from best_index_ and checked against best_params_/best_score_.
    best = search.best_index_
    assert -loss[best] == search.best_score_
    marker = display.best_marker_
    if kind[best] == "fixed":
        assert marker in display.axes_[0].lines
        assert marker.get_xdata()[0] == search.bandwidths_[best, 0]
        assert marker.get_xdata()[0] == search.best_params_["bandwidth"][0]
    else:
        assert marker in display.axes_[1].lines
        assert marker.get_xdata()[0] == search.best_params_["n_neighbors"]
    assert marker.get_ydata()[0] == -search.best_score_
    assert marker.get_label().startswith("chosen:")
    assert f"degree {search.best_params_['degree']}" in marker.get_label()


def test_bandwidth_search_of_a_classifier_scored_by_accuracy():
    X, y = _noisy()
    search = NadarayaWatsonClassifierCV(bandwidth_kinds=["fixed"], scoring="accuracy").fit(
        X, y > 2)
    display = BandwidthSearchDisplay.from_estimator(search)
    score = search.cv_results_["mean_test_score"]
    assert len(display.axes_) == 1 and len(display.lines_) == 1
    assert display.ax_.get_ylabel() == "leave-one-out score (accuracy)"
    assert display.lines_[0].get_label() == "fixed bandwidth"
    order = np.argsort(search.bandwidths_[:, 0])
    np.testing.assert_allclose(display.lines_[0].get_ydata(), score[order])  # not negated
    assert display.best_marker_.get_xdata()[0] == search.bandwidth_[0]
    assert display.best_marker_.get_ydata()[0] == search.best_score_
    # The default leave-one-out score of the classifier is its negative log-loss.
    search = NadarayaWatsonClassifierCV(bandwidth_kinds=["fixed"]).fit(X, y > 2)
    display = BandwidthSearchDisplay.from_estimator(search)
    assert display.ax_.get_ylabel() == "leave-one-out log-loss"
    assert display.best_marker_.get_ydata()[0] == -search.best_score_
    # A splitter's score.
    search = NadarayaWatsonRegressorCV(bandwidths=5, cv=3, degree=0).fit(X, y)
    display = BandwidthSearchDisplay.from_estimator(search)
    assert display.ax_.get_ylabel() == "mean test score (R²)"


def test_bandwidth_search_axis_labels_with_several_features():
    X, y = _noisy(d=2)
    search = NadarayaWatsonRegressorCV(bandwidths=7, bandwidth_kinds=["fixed"], degree=0)
    display = BandwidthSearchDisplay.from_estimator(search.fit(X, y))
    assert display.ax_.get_xlabel() == (
        "bandwidth of the first feature (the others in proportion)")
    grid = [[0.3, 1.0], [0.6, 0.5], [1.2, 2.0]]
    search = NadarayaWatsonRegressorCV(bandwidths=grid, degree=0).fit(X, y)
    display = BandwidthSearchDisplay.from_estimator(search)
    assert display.ax_.get_xlabel() == "bandwidth of the first feature"
    np.testing.assert_allclose(display.lines_[0].get_xdata(), [0.3, 0.6, 1.2])
    best = search.best_index_
    assert display.best_marker_.get_xdata()[0] == grid[best][0]


def test_bandwidth_search_errors():
    import matplotlib.pyplot as plt

    X, y = _noisy()
    with pytest.raises(ValueError, match="has no bandwidth search"):
        BandwidthSearchDisplay.from_estimator(NadarayaWatsonRegressor().fit(X, y))
    with pytest.raises(NotFittedError):
        BandwidthSearchDisplay.from_estimator(NadarayaWatsonRegressorCV())
    search = NadarayaWatsonRegressorCV(degree=0).fit(X, y)  # fixed and adaptive
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="drawn on 2 axes; got 1"):
        BandwidthSearchDisplay.from_estimator(search, ax=ax)
    _, axes = plt.subplots(1, 2)
    display = BandwidthSearchDisplay.from_estimator(search, ax=axes)
    assert list(display.axes_) == list(axes)


# -- LossCurveDisplay --------------------------------------------------------------------

def test_loss_curve_of_a_learned_bandwidth():
    X, y = _noisy()
    reg = NadarayaWatsonRegressor(bandwidth="loo").fit(X, y)
    display = LossCurveDisplay.from_estimator(reg)
    np.testing.assert_array_equal(display.line_.get_ydata(), reg.loss_curve_)
    np.testing.assert_array_equal(display.line_.get_xdata(),
                                  np.arange(1, len(reg.loss_curve_) + 1))
    assert display.ax_.get_ylabel() == "leave-one-out mean squared error"
    assert display.ax_.get_xlabel() == "evaluation of the loss"
    assert display.ax_.get_title() == (
        f"{len(reg.loss_curve_)} evaluations, {reg.n_iter_} iterations")
    clf = NadarayaWatsonClassifier(bandwidth=LeaveOneOutBandwidth("isotropic")).fit(X, y > 2)
    display = LossCurveDisplay.from_estimator(clf)
    assert display.ax_.get_ylabel() == "leave-one-out log-loss"
    np.testing.assert_array_equal(display.line_.get_ydata(), clf.loss_curve_)


def test_loss_curve_errors():
    X, y = _noisy()
    with pytest.raises(ValueError, match=r"no learned bandwidth .*bandwidth=0\.3"):
        LossCurveDisplay.from_estimator(NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y))
    with pytest.raises(ValueError, match="no learned bandwidth .*grid search"):
        LossCurveDisplay.from_estimator(
            NadarayaWatsonRegressorCV(bandwidths=5, bandwidth_kinds=["fixed"], degree=0)
            .fit(X, y))
    with pytest.raises(NotFittedError):
        LossCurveDisplay.from_estimator(NadarayaWatsonRegressor(bandwidth="loo"))


# -- KernelDisplay -----------------------------------------------------------------------

def test_every_registered_kernel_is_drawn_once():
    display = KernelDisplay.from_kernels()
    classes = list(dict.fromkeys(KERNELS.values()))  # aliases share a class
    assert len(classes) == 10
    assert len(display.lines_) == len(classes)
    u = display.lines_[0].get_xdata()
    assert u.min() == -3.0 and u.max() == 3.0
    for kernel_class in classes:
        profile = kernel_class()(np.abs(u))
        drawn = [line for line in display.lines_
                 if np.allclose(line.get_ydata(), profile, atol=1e-12)]
        assert len(drawn) == 1, kernel_class.__name__
        names = [name for name, c in KERNELS.items() if c is kernel_class]
        title = drawn[0].axes.get_title()
        assert title.split(" (")[0] == names[0]
        assert all(alias in title for alias in names[1:])
        # Compact kernels: dotted lines at the support.
        edges = sorted(line.get_xdata()[0] for line in drawn[0].axes.lines
                       if line is not drawn[0])
        assert edges == ([-1.0, 1.0] if math.isfinite(kernel_class.support) else [])
    visible = [ax for ax in display.axes_.ravel() if ax.get_visible()]
    assert len(visible) == len(classes) and display.axes_.shape == (2, 5)
    assert display.figure_ is visible[0].figure


def test_given_kernels_on_one_axes_and_errors():
    import matplotlib.pyplot as plt

    from sklearn_nw.kernels import SymmetricBeta

    _, ax = plt.subplots()
    display = KernelDisplay.from_kernels(["linear", "epanechnikov"], ax=ax)
    assert [line.axes for line in display.lines_] == [ax, ax]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["linear", "epanechnikov"]
    u = display.lines_[0].get_xdata()
    assert u.min() == -1.5  # 1.5 times the support of compact kernels
    at_half = np.argmin(np.abs(u - 0.5))
    assert display.lines_[0].get_ydata()[at_half] == pytest.approx(1 - abs(u[at_half]))
    assert display.lines_[1].get_ydata()[at_half] == pytest.approx(1 - u[at_half] ** 2)
    display = KernelDisplay.from_kernels([SymmetricBeta(power=3)], u_max=2.0)
    assert display.axes_[0, 0].get_title() == "SymmetricBeta(power=3)"
    assert display.lines_[0].get_xdata().max() == 2.0
    _, axes = plt.subplots(1, 2)
    with pytest.raises(ValueError, match="3 kernels need 3 axes"):
        KernelDisplay.from_kernels(["gaussian", "linear", "cosine"], ax=axes)
    with pytest.raises(ValueError, match="Unknown kernel"):
        KernelDisplay.from_kernels(["epanechikov"])


def test_attention_figure_takes_a_tight_layout_afterwards():
    # The display's own figure has no layout engine, as scikit-learn's displays: a
    # caller's tight_layout() (the demo's) must still work with the color bar.
    X = np.linspace(0, 5, 40)[:, None]
    reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, np.sin(X[:, 0]))
    display = AttentionDisplay.from_estimator(reg, X[::2])
    display.figure_.tight_layout()
    assert display.colorbar_ is not None


# -- one kernel, no kernel, pipelines (issue 24, item 13) -----------------------------------


@pytest.mark.parametrize("kernel, title", [
    ("gaussian", "gaussian"), (KERNELS["gaussian"](), "Gaussian()")])
def test_kernel_display_takes_one_kernel_as_a_list_of_one(kernel, title):
    display = KernelDisplay.from_kernels(kernel)
    assert display.names == [title]
    np.testing.assert_allclose(display.profiles, np.exp(-display.u**2 / 2)[None], rtol=1e-12)


def test_kernel_display_of_no_kernel_is_an_error():
    with pytest.raises(ValueError, match="at least one kernel"):
        KernelDisplay.from_kernels([])


def _pipeline_data():
    rng = np.random.default_rng(5)
    X = rng.normal(loc=[3.0, -1.0], scale=[2.0, 0.5], size=(30, 2))
    y = np.sin(X[:, 0]) + X[:, 1]
    return X, y, rng.normal(loc=[3.0, -1.0], scale=[2.0, 0.5], size=(7, 2))


def _gaussian_attention(Q, X, h):
    """Nadaraya-Watson weights in plain numpy (the oracle)."""
    d2 = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    w = np.exp(-d2 / (2 * h * h))
    return w / w.sum(1, keepdims=True)


def test_attention_display_of_a_pipeline_transforms_the_queries():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, Q = _pipeline_data()
    pipe = make_pipeline(StandardScaler(), NadarayaWatsonRegressor(bandwidth=0.4)).fit(X, y)
    scaled = (X - X.mean(0)) / X.std(0)
    shown = {"sort_by": None, "max_queries": None, "max_keys": None}
    display = AttentionDisplay.from_estimator(pipe, Q, **shown)
    expected = _gaussian_attention((Q - X.mean(0)) / X.std(0), scaled, 0.4)
    np.testing.assert_allclose(display.attention, expected, rtol=1e-9)
    # No queries: the leave-one-out attention of the training set, in the scaled space.
    loo = _gaussian_attention(scaled, scaled, 0.4) * (1 - np.eye(len(X)))
    loo /= loo.sum(1, keepdims=True)
    display = AttentionDisplay.from_estimator(pipe, **shown)
    np.testing.assert_allclose(display.attention, loo, rtol=1e-9)
    # Sorted by target: the keys in the order of the training targets.
    display = AttentionDisplay.from_estimator(pipe, Q, max_queries=None, max_keys=None)
    np.testing.assert_array_equal(display.key_order, np.argsort(y, kind="stable"))


@pytest.mark.parametrize("make", ["ridge", "pipeline of ridge"])
def test_attention_display_of_another_estimator_is_a_type_error(make):
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, Q = _pipeline_data()
    estimator = Ridge() if make == "ridge" else make_pipeline(StandardScaler(), Ridge())
    with pytest.raises(TypeError, match="NadarayaWatsonRegressor or NadarayaWatsonClassifier"):
        AttentionDisplay.from_estimator(estimator.fit(X, y), Q)


# -- UncertaintyBandDisplay ----------------------------------------------------------------

def _curve(n=80, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    return X, np.sin(3 * X[:, 0]) + X[:, -1] * (d > 1) + rng.normal(scale=0.3, size=n)


def test_uncertainty_bands_are_the_estimators_intervals_on_the_grid():
    from matplotlib.collections import PolyCollection

    X, y = _curve()
    reg = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=0.4, degree=1).fit(X, y)
    display = UncertaintyBandDisplay.from_estimator(reg, X, y, bias_correction="both",
                                                    confidence_level=0.9, grid_resolution=15)
    grid = np.linspace(X.min(), X.max(), 15)
    np.testing.assert_array_equal(display.grid, grid)
    np.testing.assert_allclose(display.line_.get_ydata(), reg.predict(grid[:, None]))
    for kind in ("robust", "conventional"):
        _, expected = reg.predict_confidence_interval(grid[:, None], 0.9, bias_correction=kind)
        np.testing.assert_allclose(display.confidence_bands[kind], expected[:, :, 0])
        assert isinstance(display.confidence_bands_[kind], PolyCollection)
    _, expected = reg.predict_interval(grid[:, None], 0.9)
    np.testing.assert_allclose(display.prediction_band, expected[:, :, 0])
    # The drawn band is the stored one: its polygon runs along both bounds.
    vertices = display.prediction_band_.get_paths()[0].vertices
    assert np.isclose(vertices[:, 1].min(), expected[:, 0, 0].min())
    assert np.isclose(vertices[:, 1].max(), expected[:, 1, 0].max())
    assert display.scatter_.get_offsets().shape == (80, 2)
    labels = [t.get_text() for t in display.ax_.get_legend().get_texts()]
    assert "90% confidence band (robust bias-corrected)" in labels
    assert "90% prediction band (jackknife+)" in labels
    assert display.figure_ is display.ax_.figure


def test_uncertainty_bands_along_one_feature_hold_the_others_at_their_medians(pyplot):
    X, y = _curve(d=2)
    reg = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=0.6, degree=1).fit(X, y)
    _, ax = pyplot.subplots()
    display = UncertaintyBandDisplay.from_estimator(reg, X, y, feature=1, grid_resolution=10,
                                                    prediction_band=False, ax=ax)
    assert display.ax_ is ax and display.prediction_band_ is None
    queries = np.column_stack([np.full(10, np.median(X[:, 0])),
                               np.linspace(X[:, 1].min(), X[:, 1].max(), 10)])
    np.testing.assert_allclose(display.prediction, reg.predict(queries))
    np.testing.assert_allclose(display.confidence_bands["robust"],
                               reg.predict_confidence_interval(queries)[1][:, :, 0])
    assert display.held_at == {"feature 0": pytest.approx(np.median(X[:, 0]))}
    assert "held at feature 0 = " in ax.get_title()
    assert ax.get_xlabel() == "feature 1"
    # Other values given; the chosen feature's entry is ignored.
    display = UncertaintyBandDisplay.from_estimator(reg, X, feature=1, held_at=[0.25, 99.0],
                                                    grid_resolution=10, bias_correction=None,
                                                    prediction_band=False)
    queries[:, 0] = 0.25
    np.testing.assert_allclose(display.line_.get_ydata(), reg.predict(queries))
    assert display.confidence_bands_ == {} and display.scatter_ is None


def test_uncertainty_bands_of_the_cv_estimator_and_named_features():
    pd = pytest.importorskip("pandas")
    X, y = _curve(n=60)
    frame = pd.DataFrame({"dose": X[:, 0]})
    reg = NadarayaWatsonRegressorCV(kernel="epanechnikov", degree=1,
                                    bandwidth_kinds=["fixed"]).fit(frame, y)
    display = UncertaintyBandDisplay.from_estimator(reg, frame, y, feature="dose",
                                                    grid_resolution=8)
    grid = pd.DataFrame({"dose": np.linspace(X.min(), X.max(), 8)})
    np.testing.assert_allclose(display.confidence_bands["robust"],
                               reg.predict_confidence_interval(grid)[1][:, :, 0])
    np.testing.assert_allclose(display.prediction_band,
                               reg.predict_interval(grid, 0.95)[1][:, :, 0])
    assert display.ax_.get_xlabel() == "dose"


@pytest.mark.parametrize("kwargs, match", [
    ({"feature": 1}, "feature must be an index in \\[0, 1\\)"),
    ({"feature": "dose"}, "not a name of the estimator's feature_names_in_"),
    ({"feature": 0.0}, "feature must be an index"),
    ({"bias_correction": "bootstrap"}, "bias_correction must be one of"),
    ({"grid_resolution": 1}, "grid_resolution must be an integer of at least 2"),
    ({"confidence_level": [0.9, 0.95]}, "confidence_level must be one number"),
    ({"confidence_level": 1.5}, "confidence_level must be a number in \\(0, 1\\)"),
    ({"held_at": [0.0, 1.0]}, "held_at must hold 1 finite values"),
])
def test_uncertainty_band_display_refuses_bad_arguments(kwargs, match):
    X, y = _curve(n=30)
    reg = NadarayaWatsonRegressor(bandwidth=0.5, degree=1).fit(X, y)
    with pytest.raises(ValueError, match=match):
        UncertaintyBandDisplay.from_estimator(reg, X, y, **kwargs)


def test_uncertainty_band_display_refuses_other_estimators_and_data():
    X, y = _curve(n=30)
    with pytest.raises(TypeError, match="needs a fitted NadarayaWatsonRegressor"):
        UncertaintyBandDisplay.from_estimator(
            NadarayaWatsonClassifier(bandwidth=0.5).fit(X, y > 0), X)
    with pytest.raises(NotFittedError):
        UncertaintyBandDisplay.from_estimator(NadarayaWatsonRegressor(), X)
    two = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="draws one target; this estimator was fitted on 2"):
        UncertaintyBandDisplay.from_estimator(two, X)
    reg = NadarayaWatsonRegressor(bandwidth=0.5, degree=2).fit(X, y)
    with pytest.raises(ValueError, match="y has 29 values for 30 rows"):
        UncertaintyBandDisplay.from_estimator(reg, X, y[1:])
    with pytest.raises(ValueError, match="X has 2 features; the estimator was fitted on 1"):
        UncertaintyBandDisplay.from_estimator(reg, np.hstack([X, X]))
    # degree=2 has no confidence interval: the estimator's own error, and the prediction
    # band alone without it.
    with pytest.raises(NotImplementedError, match="degree=2"):
        UncertaintyBandDisplay.from_estimator(reg, X)
    display = UncertaintyBandDisplay.from_estimator(reg, X, bias_correction=None,
                                                    grid_resolution=5)
    assert display.prediction_band.shape == (5, 2)
