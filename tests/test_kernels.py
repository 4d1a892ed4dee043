"""Kernel profiles against their textbook formulas, the registry, parameters and callables."""

import math

import numpy as np
import pytest
import torch
from _oracle import nw_predict
from sklearn.base import clone

from sklearn_nw import NadarayaWatsonRegressor
from sklearn_nw.kernels import (
    KERNELS,
    Biweight,
    CallableKernel,
    Cosine,
    Epanechnikov,
    Exponential,
    Kernel,
    Linear,
    SymmetricBeta,
    Tophat,
    get_kernel,
)

# A grid of scaled distances with the support boundary and points just either side of it.
U = np.sort(np.concatenate([np.linspace(0.0, 3.0, 301), [1.0 - 1e-9, 1.0, 1.0 + 1e-9, 7.5]]))
INSIDE = U <= 1.0
BELOW = np.clip(1.0 - U**2, 0.0, None)  # 1 - u^2 inside the support, 0 outside

FORMULAS = {
    "gaussian": np.exp(-(U**2) / 2.0),
    "epanechnikov": np.where(INSIDE, 1.0 - U**2, 0.0),
    "tophat": np.where(INSIDE, 1.0, 0.0),
    "boxcar": np.where(INSIDE, 1.0, 0.0),
    "uniform": np.where(INSIDE, 1.0, 0.0),
    "linear": np.maximum(0.0, 1.0 - U),
    "triangular": np.maximum(0.0, 1.0 - U),
    "tricube": np.where(INSIDE, np.clip(1.0 - U**3, 0.0, None) ** 3, 0.0),
    "triweight": np.where(INSIDE, BELOW**3, 0.0),
    "biweight": np.where(INSIDE, BELOW**2, 0.0),
    "quartic": np.where(INSIDE, BELOW**2, 0.0),
    "cosine": np.where(U < 1.0, np.cos(np.pi * np.minimum(U, 1.0) / 2.0), 0.0),
    "exponential": np.exp(-U),
    "laplacian": np.exp(-U),
    "constant": np.ones_like(U),
}
COMPACT = {
    "epanechnikov", "tophat", "boxcar", "uniform", "linear", "triangular", "tricube",
    "triweight", "biweight", "quartic", "cosine",
}
ALIASES = [
    ("boxcar", "tophat"), ("uniform", "tophat"), ("triangular", "linear"),
    ("quartic", "biweight"), ("laplacian", "exponential"),
]


def test_every_registered_name_is_covered():
    assert set(FORMULAS) == set(KERNELS)


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_profile_matches_textbook_formula(name):
    kernel = get_kernel(name)
    expected = FORMULAS[name]
    # The numpy entry point, the torch profile, and the log-profile the engine uses.
    got_numpy = kernel(U)
    assert isinstance(got_numpy, np.ndarray)
    np.testing.assert_allclose(got_numpy, expected, rtol=1e-12, atol=1e-14)
    u = torch.tensor(U, dtype=torch.float64)
    np.testing.assert_allclose(kernel.profile(u).numpy(), expected, rtol=1e-12, atol=1e-14)
    from_log = torch.exp(kernel.log_profile_sq(u * u)).numpy()
    np.testing.assert_allclose(from_log, expected, rtol=1e-12, atol=1e-14)
    # The direct profile of squared distances (the compact kernels' neighbor path).
    direct = kernel.profile_sq(u * u).numpy()
    np.testing.assert_allclose(direct, expected, rtol=1e-12, atol=1e-14)
    if name in COMPACT:
        assert np.all(got_numpy[U > 1.0] == 0.0)
        assert np.all(got_numpy[U < 1.0] > 0.0)


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_profile_in_float32(name):
    kernel = get_kernel(name)
    # 1 +- 1e-9 round to 1 in float32: leave them out.
    keep = (np.abs(U - 1.0) > 1e-6) | (U == 1.0)
    u = torch.tensor(U[keep], dtype=torch.float32)
    got = kernel.profile(u)
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), FORMULAS[name][keep], rtol=1e-5, atol=1e-6)


def test_profile_values_by_hand():
    # A few numbers worked out by hand at u = 0.5.
    assert get_kernel("epanechnikov")(0.5) == pytest.approx(0.75)
    assert get_kernel("biweight")(0.5) == pytest.approx(0.5625)
    assert get_kernel("triweight")(0.5) == pytest.approx(0.421875)
    assert get_kernel("tricube")(0.5) == pytest.approx((7 / 8) ** 3)
    assert get_kernel("linear")(0.5) == pytest.approx(0.5)
    assert get_kernel("cosine")(0.5) == pytest.approx(math.sqrt(2) / 2)
    assert get_kernel("gaussian")(2.0) == pytest.approx(math.exp(-2.0))
    assert get_kernel("exponential")(2.0) == pytest.approx(math.exp(-2.0))
    assert get_kernel("tophat")(1.0) == 1.0
    assert get_kernel("tophat")(1.0 + 1e-12) == 0.0


@pytest.mark.parametrize("alias, name", ALIASES)
def test_aliases_resolve_to_the_same_class(alias, name):
    assert KERNELS[alias] is KERNELS[name]
    assert type(get_kernel(alias)) is type(get_kernel(name))


def test_names_resolve_to_their_classes():
    assert isinstance(get_kernel("epanechnikov"), Epanechnikov)
    assert isinstance(get_kernel("boxcar"), Tophat)
    assert isinstance(get_kernel("triangular"), Linear)
    assert isinstance(get_kernel("quartic"), Biweight)
    assert isinstance(get_kernel("laplacian"), Exponential)
    assert isinstance(get_kernel("cosine"), Cosine)


def test_get_kernel_returns_a_fresh_object():
    kernel = SymmetricBeta(power=2.0)
    resolved = get_kernel(kernel)
    assert resolved is not kernel
    assert resolved.get_params() == {"power": 2.0}
    assert get_kernel("gaussian") is not get_kernel("gaussian")


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_support(name):
    kernel = get_kernel(name)
    if name in COMPACT:
        assert kernel.support == 1.0
        assert kernel.is_compact
    else:
        assert kernel.support == math.inf
        assert not kernel.is_compact


def test_unknown_name_lists_valid_names():
    with pytest.raises(
        ValueError, match="Unknown kernel 'gausian'. Valid kernel names are"
    ) as info:
        get_kernel("gausian")
    for name in KERNELS:
        assert name in str(info.value)


def test_not_a_kernel_is_rejected():
    with pytest.raises(
        TypeError, match="kernel must be a kernel name, a Kernel instance or a callable"
    ):
        get_kernel(3.0)


@pytest.mark.parametrize("power", [0.0, 0.5, 1.0, 2.0, 3.0, 4.5])
def test_symmetric_beta_matches_formula(power):
    expected = np.where(INSIDE, BELOW**power, 0.0)
    np.testing.assert_allclose(SymmetricBeta(power=power)(U), expected, rtol=1e-12, atol=1e-14)
    u2 = torch.tensor(U**2, dtype=torch.float64)
    np.testing.assert_allclose(SymmetricBeta(power=power).profile_sq(u2).numpy(), expected,
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("power, name", [(0, "tophat"), (1, "epanechnikov"), (2, "biweight"),
                                         (3, "triweight")])
def test_symmetric_beta_special_cases(power, name):
    np.testing.assert_allclose(
        SymmetricBeta(power=power)(U), FORMULAS[name], rtol=1e-12, atol=1e-14
    )
    assert SymmetricBeta(power=power).support == 1.0


def test_symmetric_beta_parameters_and_clone():
    kernel = SymmetricBeta()
    assert kernel.get_params() == {"power": 1.0}
    assert kernel.set_params(power=3.0) is kernel
    assert kernel.power == 3.0
    np.testing.assert_allclose(kernel(U), FORMULAS["triweight"], rtol=1e-12, atol=1e-14)
    copy = clone(kernel)
    assert copy is not kernel
    assert copy.get_params() == {"power": 3.0}
    # Through an estimator: nested parameters as a grid search sees them.
    reg = NadarayaWatsonRegressor(kernel=SymmetricBeta(power=2.0))
    assert reg.get_params()["kernel__power"] == 2.0
    reg.set_params(kernel__power=4.0)
    assert reg.kernel.power == 4.0
    assert clone(reg).get_params()["kernel__power"] == 4.0


def test_symmetric_beta_negative_power_rejected():
    with pytest.raises(ValueError, match="'power' parameter of SymmetricBeta"):
        get_kernel(SymmetricBeta(power=-1.0))
    X = np.linspace(0.0, 1.0, 8)[:, None]
    with pytest.raises(ValueError, match="'power' parameter of SymmetricBeta"):
        NadarayaWatsonRegressor(kernel=SymmetricBeta(power=-0.5)).fit(X, X[:, 0])


def test_symmetric_beta_fitted_kernel_is_a_copy():
    kernel = SymmetricBeta(power=2.0)
    X = np.linspace(0.0, 1.0, 8)[:, None]
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.5).fit(X, X[:, 0])
    assert reg.kernel_ is not kernel
    kernel.set_params(power=7.0)
    assert reg.kernel_.power == 2.0


# -- callables -----------------------------------------------------------------------------


def exp_profile(u):
    return torch.exp(-u)


def test_callable_is_wrapped():
    kernel = get_kernel(exp_profile)
    assert isinstance(kernel, CallableKernel)
    assert kernel.func is exp_profile
    assert kernel.support == math.inf
    assert kernel.get_params() == {"func": exp_profile, "support": math.inf}
    np.testing.assert_allclose(kernel(U), np.exp(-U), rtol=1e-12)


def test_callable_kernel_in_estimator_matches_oracle():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(20, 2))
    y = rng.normal(size=20)
    Q = rng.uniform(size=(7, 2))
    h = np.array([0.3, 0.6])
    reg = NadarayaWatsonRegressor(kernel=exp_profile, bandwidth=h).fit(X, y)
    assert isinstance(reg.kernel_, CallableKernel)
    assert reg.kernel is exp_profile  # the parameter is left as given
    expected = nw_predict(Q, X, y, h, lambda u: math.exp(-u))
    np.testing.assert_allclose(reg.predict(Q), expected, rtol=1e-10, atol=1e-12)


def test_callable_with_support_matches_oracle():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(25, 1))
    y = rng.normal(size=25)
    Q = rng.uniform(0.1, 0.9, size=(6, 1))
    kernel = CallableKernel(lambda u: torch.clamp(1.0 - u * u, min=0.0), support=1.0)
    assert kernel.is_compact
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.4).fit(X, y)
    expected = nw_predict(Q, X, y, 0.4, lambda u: max(0.0, 1.0 - u * u))
    np.testing.assert_allclose(reg.predict(Q), expected, rtol=1e-10, atol=1e-12)


def negative_profile(u):
    return 1.0 - u


def shape_profile(u):
    return u.sum()


def numpy_profile(u):
    return np.exp(-u.numpy())


def raising_profile(u):
    raise RuntimeError("boom")


def zero_profile(u):
    return torch.zeros_like(u)


def nan_profile(u):
    return torch.full_like(u, math.nan)


@pytest.mark.parametrize(
    "func, error, message",
    [
        (negative_profile, ValueError, "must return finite, non-negative weights"),
        (nan_profile, ValueError, "must return finite, non-negative weights"),
        (shape_profile, TypeError, "must return a torch tensor of the same shape"),
        (numpy_profile, TypeError, "must return a torch tensor of the same shape.*got ndarray"),
        (raising_profile, TypeError, "kernel callable failed on a torch tensor.*boom"),
        (zero_profile, ValueError, "zero weight everywhere"),
    ],
)
def test_bad_callable_fails_at_fit(func, error, message):
    X = np.linspace(0.0, 1.0, 8)[:, None]
    reg = NadarayaWatsonRegressor(kernel=func)  # constructing is fine
    with pytest.raises(error, match=message):
        reg.fit(X, X[:, 0])
    assert not hasattr(reg, "X_fit_")


# -- subclasses ----------------------------------------------------------------------------


def test_subclass_without_profile_is_rejected():
    with pytest.raises(TypeError, match="must implement profile or log_profile_sq"):

        class Empty(Kernel):
            support = 1.0


class HalfCircle(Kernel):
    """Implements only ``profile``: ``log_profile_sq`` comes from the base class."""

    support = 1.0

    def profile(self, u):
        return torch.sqrt(torch.clamp(1.0 - u * u, min=0.0))


class Cauchy(Kernel):
    """Implements only ``log_profile_sq``: ``profile`` comes from the base class."""

    def log_profile_sq(self, u2):
        return -torch.log1p(u2)


def test_subclass_defaults_are_consistent():
    np.testing.assert_allclose(HalfCircle()(U), np.sqrt(BELOW), rtol=1e-12, atol=1e-14)
    log_k = HalfCircle().log_profile_sq(torch.tensor(U**2)).numpy()
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(log_k, np.log(np.sqrt(BELOW)), rtol=1e-12)
    np.testing.assert_allclose(Cauchy()(U), 1.0 / (1.0 + U**2), rtol=1e-12)


@pytest.mark.parametrize(
    "kernel, profile",
    [
        (HalfCircle(), lambda u: math.sqrt(max(0.0, 1.0 - u * u))),
        (Cauchy(), lambda u: 1.0 / (1.0 + u * u)),
    ],
)
def test_subclass_in_estimator_matches_oracle(kernel, profile):
    rng = np.random.default_rng(2)
    X = rng.uniform(size=(30, 2))
    y = rng.normal(size=30)
    Q = rng.uniform(0.2, 0.8, size=(8, 2))
    h = np.array([0.5, 0.7])
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=h).fit(X, y)
    np.testing.assert_allclose(reg.predict(Q), nw_predict(Q, X, y, h, profile), rtol=1e-10)


# -- the types a kernel returns ------------------------------------------------------------


def float32_tophat(u):
    return (u <= 1.0).float()


def bool_tophat(u):
    return u <= 1.0


def int_tophat(u):
    return (u <= 1.0).int()


@pytest.mark.parametrize("func", [float32_tophat, bool_tophat, int_tophat])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_callable_result_is_cast_to_the_input_dtype(func, dtype):
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(30, 2)).astype(dtype)
    y = rng.normal(size=30).astype(dtype)
    Q = rng.uniform(0.2, 0.8, size=(6, 2)).astype(dtype)
    reg = NadarayaWatsonRegressor(kernel=func, bandwidth=0.6).fit(X, y)
    pred = reg.predict(Q)
    expected = nw_predict(Q, X, y, 0.6, lambda u: float(u <= 1.0))
    np.testing.assert_allclose(pred, expected, rtol=1e-5 if dtype == np.float32 else 1e-10)
    u = torch.linspace(0.0, 2.0, 5, dtype=torch.float64)
    assert CallableKernel(func).profile(u).dtype == torch.float64


class NumpyLogProfile(Kernel):
    def log_profile_sq(self, u2):
        return -0.5 * u2.numpy()


class NumpyProfile(Kernel):
    def profile(self, u):
        return np.exp(-u.numpy())


class ScalarProfile(Kernel):
    def profile(self, u):
        return torch.exp(-u).sum()


class Float32LogProfile(Kernel):
    def log_profile_sq(self, u2):
        return (-0.5 * u2).float()


class Float64LogProfile(Kernel):
    """Right on float64 inputs, wrong on float32 ones."""

    def log_profile_sq(self, u2):
        return -0.5 * u2.double()


class RaisingProfile(Kernel):
    def profile(self, u):
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    "kernel, message",
    [
        (NumpyLogProfile(), r"NumpyLogProfile\(\)\.log_profile_sq returned ndarray"),
        (NumpyProfile(), r"NumpyProfile\(\)\.profile returned ndarray"),
        (ScalarProfile(), r"ScalarProfile\(\)\.profile returned a tensor of shape \(\)"),
        (
            Float32LogProfile(),
            r"returned a tensor of shape \(31,\) and torch\.float32 for a torch\.float64",
        ),
        (
            Float64LogProfile(),
            r"returned a tensor of shape \(31,\) and torch\.float64 for a torch\.float32",
        ),
        (RaisingProfile(), r"RaisingProfile\(\)\.profile failed on a torch tensor.*boom"),
    ],
)
def test_bad_subclass_fails_at_fit_with_a_message(kernel, message):
    X = np.linspace(0.0, 1.0, 8)[:, None]
    if isinstance(kernel, Float64LogProfile):  # probed in the dtype of the data
        X = X.astype(np.float32)
    reg = NadarayaWatsonRegressor(kernel=kernel, bandwidth=0.5)
    with pytest.raises(TypeError, match=message) as info:
        reg.fit(X, X[:, 0])
    assert "torch tensor of the input's shape and dtype" in str(info.value)
    assert not hasattr(reg, "X_fit_")


def test_good_subclasses_and_builtins_pass_the_probe():
    for kernel in [HalfCircle(), Cauchy(), SymmetricBeta(2.5), *(k() for k in KERNELS.values())]:
        get_kernel(kernel)
    # A kernel that only computes in float64 serves float64 data.
    X = np.linspace(0.0, 1.0, 8)[:, None]
    NadarayaWatsonRegressor(kernel=Float64LogProfile(), bandwidth=0.5).fit(X, X[:, 0]).predict(X)
