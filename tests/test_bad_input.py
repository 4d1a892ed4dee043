"""Every documented error, with its message, and user data left alone on the error paths."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.exceptions import NotFittedError

from sklearn_nw import NadarayaWatsonClassifier, NadarayaWatsonRegressor
from sklearn_nw.kernels import KERNELS

ESTIMATORS = [NadarayaWatsonRegressor, NadarayaWatsonClassifier]


def make_data(Estimator, n=8):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    if Estimator is NadarayaWatsonClassifier:
        y = np.array([0, 1] * (n // 2))
    else:
        y = rng.normal(size=n)
    return X, y


def with_value(a, index, value):
    a = np.array(a, dtype=np.float64)
    a[index] = value
    return a


# -- X and y -------------------------------------------------------------------------------


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize(
    "value, message",
    [(np.nan, "Input X contains NaN"), (np.inf, "Input X contains infinity"),
     (-np.inf, "Input X contains infinity")],
)
def test_non_finite_X(Estimator, value, message):
    X, y = make_data(Estimator)
    bad = with_value(X, (3, 1), value)
    with pytest.raises(ValueError, match=message):
        Estimator().fit(bad, y)
    est = Estimator().fit(X, y)
    with pytest.raises(ValueError, match=message):
        est.predict(bad)
    if Estimator is NadarayaWatsonClassifier:
        with pytest.raises(ValueError, match=message):
            est.predict_proba(bad)


@pytest.mark.parametrize("value, message",
                         [(np.nan, "Input y contains NaN"), (np.inf, "Input y contains infinity")])
@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_non_finite_y(Estimator, value, message):
    X, y = make_data(Estimator)
    with pytest.raises(ValueError, match=message):
        Estimator().fit(X, with_value(y, 2, value))


def test_non_finite_y_multi_output():
    X, y = make_data(NadarayaWatsonRegressor)
    Y = np.column_stack([y, y])
    with pytest.raises(ValueError, match="Input y contains NaN"):
        NadarayaWatsonRegressor().fit(X, with_value(Y, (5, 1), np.nan))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_empty_X(Estimator):
    with pytest.raises(ValueError, match=r"Found array with 0 sample\(s\) \(shape=\(0, 2\)\)"):
        Estimator().fit(np.empty((0, 2)), np.empty(0))
    X, y = make_data(Estimator)
    with pytest.raises(ValueError, match=r"Found array with 0 feature\(s\) \(shape=\(8, 0\)\)"):
        Estimator().fit(np.empty((8, 0)), y)
    est = Estimator().fit(X, y)
    with pytest.raises(ValueError, match=r"Found array with 0 sample\(s\)"):
        est.predict(np.empty((0, 2)))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_wrong_dimensions(Estimator):
    X, y = make_data(Estimator)
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array instead"):
        Estimator().fit(X[:, 0], y)
    with pytest.raises(ValueError, match="Found array with dim 3"):
        Estimator().fit(X[:, :, None], y)
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[8, 7\]"):
        Estimator().fit(X, y[:7])


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_wrong_n_features_at_predict(Estimator):
    X, y = make_data(Estimator)
    est = Estimator().fit(X, y)
    name = Estimator.__name__
    with pytest.raises(ValueError, match=f"X has 3 features, but {name} is expecting 2 features"):
        est.predict(np.ones((4, 3)))
    with pytest.raises(ValueError, match=f"X has 1 features, but {name} is expecting 2 features"):
        est.predict(np.ones((4, 1)))
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array instead"):
        est.predict(np.ones(2))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_string_X(Estimator):
    _, y = make_data(Estimator)
    X = [["a", "b"]] * 8
    with pytest.raises(ValueError, match="could not convert string to float: 'a'"):
        Estimator().fit(X, y)
    est = Estimator().fit(*make_data(Estimator))
    with pytest.raises(ValueError, match="could not convert string to float"):
        est.predict([["1.0", "oops"]])


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("to_sparse", [sp.csr_matrix, sp.csr_array, sp.coo_array])
def test_sparse_X(Estimator, to_sparse):
    X, y = make_data(Estimator)
    message = "Sparse data was passed for X, but dense data is required"
    with pytest.raises(TypeError, match=message):
        Estimator().fit(to_sparse(X), y)
    est = Estimator().fit(X, y)
    with pytest.raises(TypeError, match=message):
        est.predict(to_sparse(X))


def test_regressor_string_targets():
    X, _ = make_data(NadarayaWatsonRegressor)
    with pytest.raises(ValueError, match="could not convert string to float"):
        NadarayaWatsonRegressor().fit(X, ["a"] * 8)


def test_classifier_continuous_targets():
    X, y = make_data(NadarayaWatsonRegressor)
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        NadarayaWatsonClassifier().fit(X, y)


# -- parameters ----------------------------------------------------------------------------


BANDWIDTH_RANGE = r"The 'bandwidth' parameter of \w+ must be a float in the range \(0.0, inf\)"


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize(
    "bandwidth, message",
    [
        (0.0, BANDWIDTH_RANGE + ".*Got 0.0 instead"),
        (-1.0, BANDWIDTH_RANGE + ".*Got -1.0 instead"),
        (np.nan, BANDWIDTH_RANGE + ".*Got nan instead"),
        (np.inf, BANDWIDTH_RANGE),
        ("wide", r"The 'bandwidth' parameter .*a str among .*'scott'.*Got 'wide' instead"),
        ([1.0, 0.0], r"bandwidth must be positive; got \[1.0, 0.0\]"),
        ([1.0, -2.0], r"bandwidth must be positive"),
        ([np.nan, 1.0], r"bandwidth must be finite; got \[nan, 1.0\]"),
        ([1.0, np.inf], r"bandwidth must be finite"),
        ([1.0, 2.0, 3.0], r"one value per feature \(shape \(2,\)\); got shape \(3,\)"),
        ([1.0], r"one value per feature \(shape \(2,\)\); got shape \(1,\)"),
        (np.ones((2, 2)), r"one value per feature \(shape \(2,\)\); got shape \(2, 2\)"),
    ],
)
def test_bad_bandwidth(Estimator, bandwidth, message):
    X, y = make_data(Estimator)
    with pytest.raises(ValueError, match=message):
        Estimator(bandwidth=bandwidth).fit(X, y)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_unknown_kernel_name_lists_valid_names(Estimator):
    X, y = make_data(Estimator)
    with pytest.raises(ValueError, match=r"The 'kernel' parameter .* must be a str among") as info:
        Estimator(kernel="gausian").fit(X, y)
    message = str(info.value)
    assert "Got 'gausian' instead" in message
    for name in KERNELS:
        assert f"'{name}'" in message


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_kernel_of_wrong_type(Estimator):
    X, y = make_data(Estimator)
    with pytest.raises(ValueError, match=r"The 'kernel' parameter .*Kernel' or a callable. Got 3"):
        Estimator(kernel=3).fit(X, y)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_bad_sample_weight(Estimator):
    X, y = make_data(Estimator)
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        Estimator().fit(X, y, sample_weight=with_value(np.ones(8), 4, -0.5))
    with pytest.raises(
        ValueError, match="Sample weights must contain at least one non-zero number"
    ):
        Estimator().fit(X, y, sample_weight=np.zeros(8))
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(7,\), expected \(8,\)"):
        Estimator().fit(X, y, sample_weight=np.ones(7))
    with pytest.raises(ValueError, match="Input sample_weight contains NaN"):
        Estimator().fit(X, y, sample_weight=with_value(np.ones(8), 0, np.nan))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_requested_without_cuda(Estimator, device):
    X, y = make_data(Estimator)
    with pytest.raises(
        ValueError, match=f"device='{device}' was requested but CUDA is not available"
    ):
        Estimator(device=device).fit(X, y)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_invalid_device(Estimator):
    X, y = make_data(Estimator)
    with pytest.raises(ValueError, match="device='nonsense' is not a valid torch device"):
        Estimator(device="nonsense").fit(X, y)
    with pytest.raises(
        ValueError, match=r"The 'device' parameter of \w+ must be an instance of 'str'"
    ):
        Estimator(device=0).fit(X, y)


# -- state ---------------------------------------------------------------------------------


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_unfitted(Estimator):
    X, _ = make_data(Estimator)
    est = Estimator()
    methods = ["predict"]
    if Estimator is NadarayaWatsonClassifier:
        methods += ["predict_proba", "predict_log_proba"]
    for method in methods:
        with pytest.raises(
            NotFittedError, match=f"This {Estimator.__name__} instance is not fitted yet"
        ):
            getattr(est, method)(X)
    with pytest.raises(NotFittedError):
        _ = est.attention_weights_


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_attention_weights_need_two_samples(Estimator):
    X, y = make_data(Estimator)
    message = "attention_weights_ needs at least 2 distinct training inputs with positive"
    est = Estimator().fit(X[:1], y[:1])
    with pytest.raises(ValueError, match=f"{message}.*n_samples=1 "):
        _ = est.attention_weights_
    w = np.zeros(8)
    w[2] = 3.0
    est = Estimator().fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match=message):
        _ = est.attention_weights_
    # Copies of one input are one location: nothing is left once it is left out.
    est = Estimator().fit(np.repeat(X[:1], 4, axis=0), np.repeat(y[:1], 4))
    with pytest.raises(ValueError, match=message):
        _ = est.attention_weights_


def _failing_fits(Estimator):
    """(description, X, y, sample_weight, estimator) whose fit raises after or during validation."""
    X, y = make_data(Estimator)
    w = np.linspace(0.5, 2.0, 8)
    return [
        ("nan X", with_value(X, (0, 0), np.nan), y, w, Estimator()),
        ("negative weight", X, y, with_value(w, 1, -1.0), Estimator()),
        ("bandwidth length", X, y, w, Estimator(bandwidth=[1.0, 2.0, 3.0])),
        ("bandwidth sign", X, y, w, Estimator(bandwidth=[1.0, -2.0])),
        ("cuda", X, y, w, Estimator(device="cuda:99")),
        ("device", X, y, w, Estimator(device="nonsense")),
        ("kernel", X, y, w, Estimator(kernel=lambda u: -u)),
    ]


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_user_data_unchanged_on_error(Estimator):
    for description, X, y, w, est in _failing_fits(Estimator):
        copies = [a.copy() for a in (X, y, w)]
        with pytest.raises((ValueError, TypeError)):
            est.fit(X, y, sample_weight=w)
        for original, kept in zip((X, y, w), copies):
            np.testing.assert_array_equal(original, kept, err_msg=description)
    X, y = make_data(Estimator)
    est = Estimator().fit(X, y)
    for bad in (with_value(X, (1, 1), np.inf), np.ones((3, 5))):
        kept = bad.copy()
        with pytest.raises(ValueError):
            est.predict(bad)
        np.testing.assert_array_equal(bad, kept)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_failed_predict_leaves_the_estimator_usable(Estimator):
    X, y = make_data(Estimator)
    est = Estimator().fit(X, y)
    before = est.predict(X)
    with pytest.raises(ValueError):
        est.predict(with_value(X, (0, 0), np.nan))
    np.testing.assert_array_equal(est.predict(X), before)


# -- numbers of other types, and the bandwidth buffer --------------------------------------


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_fraction_bandwidth_is_a_real_number(Estimator):
    from fractions import Fraction

    X, y = make_data(Estimator)
    expected = Estimator(bandwidth=0.5).fit(X, y).predict(X)
    est = Estimator(bandwidth=Fraction(1, 2)).fit(X, y)
    assert est.bandwidth_.dtype == np.float64
    np.testing.assert_array_equal(est.bandwidth_, [0.5, 0.5])
    np.testing.assert_array_equal(est.predict(X), expected)
    per_feature = Estimator(bandwidth=[Fraction(1, 2), Fraction(3, 2)]).fit(X, y)
    np.testing.assert_array_equal(per_feature.bandwidth_, [0.5, 1.5])
    with pytest.raises(ValueError, match=BANDWIDTH_RANGE + r".*Got Fraction\(0, 1\) instead"):
        Estimator(bandwidth=Fraction(0)).fit(X, y)


NOT_NUMBERS = "bandwidth must be a real number or an array of real numbers; got "


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize(
    "bandwidth, message",
    [
        (["wide", "narrow"], NOT_NUMBERS + r"\['wide', 'narrow'\]"),
        ([1.0, None], NOT_NUMBERS + r"\[1.0, None\]"),
        ([1.0, 2.0j], NOT_NUMBERS + r"\[1.0, 2j\]"),
        ([True, False], NOT_NUMBERS + r"\[True, False\]"),
        ([1.0, [2.0]], NOT_NUMBERS + r"\[1.0, \[2.0\]\]"),
    ],
)
def test_bandwidth_that_is_not_numbers_is_named(Estimator, bandwidth, message):
    X, y = make_data(Estimator)
    with pytest.raises(ValueError, match=message):
        Estimator(bandwidth=bandwidth).fit(X, y)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("value", [True, False, np.True_])
def test_boolean_n_neighbors_and_bandwidth_are_rejected(Estimator, value):
    X, y = make_data(Estimator)
    with pytest.raises(
        ValueError,
        match=r"The 'n_neighbors' parameter of \w+ must be an int in the range \[1, inf\) "
              rf"or None. Got {value!r} instead",
    ):
        Estimator(n_neighbors=value).fit(X, y)
    with pytest.raises(ValueError, match=BANDWIDTH_RANGE + rf".*Got {value!r} instead"):
        Estimator(bandwidth=value).fit(X, y)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_fitted_bandwidth_is_not_the_users_buffer(Estimator):
    X, y = make_data(Estimator)
    h = np.empty(2)
    models = []
    for value in (0.5, 1.0, 2.0):  # one buffer, refilled for each fit
        h[:] = value
        models.append(Estimator(bandwidth=h).fit(X, y))
    for model, value in zip(models, (0.5, 1.0, 2.0)):
        np.testing.assert_array_equal(model.bandwidth_, [value, value])
    model = Estimator(bandwidth=np.array([0.5, 0.7])).fit(X, y)
    model.bandwidth_ *= 2
    np.testing.assert_array_equal(model.get_params()["bandwidth"], [0.5, 0.7])


# -- warnings and progress -------------------------------------------------------------------


def test_empty_neighborhood_warning_repeats_and_says_so():
    import warnings

    from sklearn_nw import EmptyNeighborhoodWarning

    X = np.array([[0.0], [1.0], [2.0]])
    est = NadarayaWatsonRegressor("epanechnikov", bandwidth=0.1).fit(X, [0.0, 1.0, 2.0])
    for _ in range(2):  # every call, as scikit-learn's own warnings
        with pytest.warns(EmptyNeighborhoodWarning, match="1 of 1 queries"):
            est.predict([[10.0]])
    # The docstring says so, and how to silence it; its recipe works.
    doc = " ".join(EmptyNeighborhoodWarning.__doc__.split())
    assert "issued on every call" in doc
    assert 'warnings.simplefilter("ignore", EmptyNeighborhoodWarning)' in doc
    assert 'warnings.filterwarnings("ignore", category=EmptyNeighborhoodWarning)' in doc
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        est.predict([[10.0]])


def test_verbose_without_tqdm_writes_progress_to_stderr(monkeypatch, capsys):
    import sys

    from sklearn_nw.bandwidth import LeaveOneOutBandwidth

    monkeypatch.setitem(sys.modules, "tqdm", None)  # "import tqdm" now raises ImportError
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    X, y = make_data(NadarayaWatsonRegressor, n=40)
    NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth(verbose=1)).fit(X, y)
    err = capsys.readouterr().err
    assert "leave-one-out bandwidth: iteration 1/" in err
    assert "loss=" in err
    # Quiet by default.
    NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth()).fit(X, y)
    assert capsys.readouterr().err == ""


# -- messages that say what is refused and what works (issue 24, item 13) ------------------


def test_compiled_local_polynomials_say_what_is_refused_and_what_works():
    X, y = make_data(NadarayaWatsonRegressor, n=20)
    with pytest.raises(ValueError, match="degree=1") as info:
        NadarayaWatsonRegressor(bandwidth=0.5, degree=1, compute="compiled").fit(X, y)
    message = str(info.value)
    assert "compute='compiled'" in message
    assert "compute='auto' or 'eager'" in message  # what would work
    # The bandwidth is not what is refused.
    assert "bandwidth" not in message.split(".", 1)[1]
