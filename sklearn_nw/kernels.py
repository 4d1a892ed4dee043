"""Radial kernels for Nadaraya-Watson attention.

A kernel is the profile ``k(u)`` of a radial smoothing kernel, a function of the scaled
distance ``u = ||(q - x) / h|| >= 0``. Normalizing constants are irrelevant: the
Nadaraya-Watson weights ``k(u_i) / sum_j k(u_j)`` do not see them, so every profile here is
scaled to ``k(0) = 1``.

The engine works with the log-profile of the *squared* distance, ``log k(sqrt(u2))``: it
avoids square roots for the kernels that are polynomials in ``u**2`` and lets attention be
normalized with log-sum-exp. Kernels are :class:`~sklearn.base.BaseEstimator` objects so that
``clone``, ``get_params`` and grid searches (``kernel__power``) see their parameters.
"""

import math
from numbers import Real
from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval

__all__ = [
    "KERNELS",
    "Biweight",
    "CallableKernel",
    "Constant",
    "Cosine",
    "Epanechnikov",
    "Exponential",
    "Gaussian",
    "Kernel",
    "Linear",
    "SymmetricBeta",
    "Tophat",
    "Tricube",
    "Triweight",
    "get_kernel",
    # Kernels of categorical and ordered features.
    "CATEGORICAL_KERNELS",
    "AitchisonAitken",
    "CategoricalKernel",
    "LiRacine",
    "LiRacineOrdered",
    "WangVanRyzin",
]


# Both helpers keep gradients finite (autograd learns bandwidths through them): the branch
# that torch.where discards must not be inf, or 0 * inf makes a NaN gradient.


def _log1p_neg(t):
    """``log(1 - t)`` for ``t < 1``, ``-inf`` from 1 on (outside the support)."""
    inside = t < 1.0
    return torch.where(inside, torch.log1p(-torch.where(inside, t, 0.0)), -math.inf)


def _sqrt(u2):
    """Square root with a finite gradient at 0 (distances of a point to itself)."""
    return torch.sqrt(u2.clamp(min=torch.finfo(u2.dtype).tiny))


class Kernel(BaseEstimator):
    """Base class of radial kernel profiles.

    Subclasses implement :meth:`log_profile_sq` (preferred: it is what the engine calls) or
    :meth:`profile`; each has a default written in terms of the other.

    Read more in the :ref:`User Guide <ug_kernels>`.

    Attributes
    ----------
    support : float
        Support radius in scaled distance: ``k(u) = 0`` for ``u > support``. ``1.0`` for
        the compact kernels, ``inf`` otherwise. The engine uses it to return sparse
        attention and to detect queries with no training point in reach.
    quadratic_coef : float or None
        ``c`` when ``log k(u) = -c * u**2`` (the Gaussian family), which lets the engine fuse
        the distance computation into one matrix product; ``None`` otherwise.
    compilable : bool
        Whether ``algorithm="auto"`` may compile the kernel into the fused loop of
        :mod:`sklearn_nw._compiled` (``compute="compiled"`` compiles any kernel): its
        profile is plain torch arithmetic that :func:`torch.compile` traces. True for the
        named kernels; a subclass that qualifies may say so.
    decreasing : bool
        Whether the profile never increases with the distance (its largest value is
        ``k(0)``), which bounds every attention weight by a key at the query's own
        location (the jackknife+ of ``predict_interval`` uses it). True for the named
        kernels; a subclass that qualifies may say so.
    """

    support = math.inf
    quadratic_coef = None
    compilable = False
    decreasing = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.profile is Kernel.profile and cls.log_profile_sq is Kernel.log_profile_sq:
            raise TypeError(f"{cls.__name__} must implement profile or log_profile_sq.")

    def profile(self, u):
        """Kernel profile ``k(u)`` on scaled distances ``u >= 0`` (a torch tensor)."""
        return torch.exp(self.log_profile_sq(u * u))

    def log_profile_sq(self, u2):
        """``log k(sqrt(u2))`` on squared scaled distances; ``-inf`` where ``k`` is zero."""
        return torch.log(self.profile(torch.sqrt(u2)))

    def profile_sq(self, u2):
        """``k(sqrt(u2))`` on squared scaled distances: the direct weights the engine uses
        for compact kernels, whose values stay in [0, 1] (no log space needed)."""
        return torch.exp(self.log_profile_sq(u2))

    def profile_sq_(self, u2):
        """:meth:`profile_sq` written over ``u2`` (a block the engine reuses); returns it."""
        return u2.copy_(self.profile_sq(u2))

    def __call__(self, u):
        """Evaluate the profile; accepts a tensor or an array-like and returns the same kind."""
        if isinstance(u, torch.Tensor):
            return self.profile(u)
        u = torch.as_tensor(np.asarray(u, dtype=np.float64))
        return self.profile(u).numpy()

    @property
    def is_compact(self):
        """Whether the kernel vanishes outside a finite radius."""
        return math.isfinite(self.support)


class Gaussian(Kernel):
    """Gaussian kernel, ``k(u) = exp(-u**2 / 2)``.

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    quadratic_coef = 0.5
    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        return -0.5 * u2


class Exponential(Kernel):
    """Exponential (Laplacian) kernel, ``k(u) = exp(-u)``.

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        return -_sqrt(u2)


class Constant(Kernel):
    """Constant kernel, ``k(u) = 1``: plain (weighted) averaging, the baseline.

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        return torch.zeros_like(u2)


class Tophat(Kernel):
    """Top-hat (boxcar, uniform) kernel, ``k(u) = 1`` for ``u <= 1``, else 0.

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    support = 1.0
    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        return torch.where(u2 <= 1.0, 0.0, -math.inf).to(u2.dtype)

    def profile_sq(self, u2):
        return (u2 <= 1.0).to(u2.dtype)

    def profile_sq_(self, u2):
        return u2.le_(1.0)


def _one_minus_clipped(u2, power, in_place=False):
    """``max(0, 1 - u2) ** power`` (``power`` > 0), the symmetric beta profiles, written
    over ``u2`` with ``in_place``."""
    k = u2.neg_().add_(1.0) if in_place else torch.sub(1.0, u2)
    k.clamp_(min=0.0)
    return k if power == 1 else k.pow_(power)


class Epanechnikov(Kernel):
    """Epanechnikov kernel, ``k(u) = 1 - u**2`` for ``u <= 1``, else 0.

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    support = 1.0
    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        return _log1p_neg(u2)

    def profile_sq(self, u2):
        return _one_minus_clipped(u2, 1)

    def profile_sq_(self, u2):
        return _one_minus_clipped(u2, 1, in_place=True)


class Biweight(Kernel):
    """Biweight (quartic) kernel, ``k(u) = (1 - u**2)**2`` for ``u <= 1``, else 0.

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    support = 1.0
    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        return 2.0 * _log1p_neg(u2)

    def profile_sq(self, u2):
        return _one_minus_clipped(u2, 2)

    def profile_sq_(self, u2):
        return _one_minus_clipped(u2, 2, in_place=True)


class Triweight(Kernel):
    """Triweight kernel, ``k(u) = (1 - u**2)**3`` for ``u <= 1``, else 0.

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    support = 1.0
    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        return 3.0 * _log1p_neg(u2)

    def profile_sq(self, u2):
        return _one_minus_clipped(u2, 3)

    def profile_sq_(self, u2):
        return _one_minus_clipped(u2, 3, in_place=True)


class Linear(Kernel):
    """Linear (triangular) kernel, ``k(u) = 1 - u`` for ``u <= 1``, else 0.

    Some attention tutorials call this kernel "Epanechikov"; the Epanechnikov kernel is
    ``1 - u**2`` (:class:`Epanechnikov`).

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    support = 1.0
    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        return _log1p_neg(_sqrt(u2))


class Tricube(Kernel):
    """Tricube kernel, ``k(u) = (1 - u**3)**3`` for ``u <= 1``, else 0.

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    support = 1.0
    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        return 3.0 * _log1p_neg(u2 * _sqrt(u2))


class Cosine(Kernel):
    """Cosine kernel, ``k(u) = cos(pi * u / 2)`` for ``u < 1``, else 0.

    Read more in the :ref:`User Guide <ug_kernels>`.
    """

    support = 1.0
    compilable = True
    decreasing = True

    def log_profile_sq(self, u2):
        u = _sqrt(u2)
        inside = u < 1.0
        log_cos = torch.log(torch.cos((0.5 * math.pi) * torch.where(inside, u, 0.0)))
        return torch.where(inside, log_cos, -math.inf)


class SymmetricBeta(Kernel):
    """Symmetric beta family, ``k(u) = (1 - u**2)**power`` for ``u <= 1``, else 0.

    ``power=0`` is the top-hat kernel, 1 Epanechnikov, 2 biweight, 3 triweight; ``power``
    can be tuned by grid search as ``kernel__power``.

    Read more in the :ref:`User Guide <ug_kernels>`.

    Parameters
    ----------
    power : float, default=1.0
        Non-negative exponent.
    """

    support = 1.0
    decreasing = True
    _parameter_constraints: ClassVar[dict] = {"power": [Interval(Real, 0, None, closed="left")]}

    def __init__(self, power=1.0):
        self.power = power

    def log_profile_sq(self, u2):
        if self.power == 0:
            return Tophat().log_profile_sq(u2)
        return float(self.power) * _log1p_neg(u2)

    def profile_sq(self, u2):
        if self.power == 0:
            return Tophat().profile_sq(u2)
        return _one_minus_clipped(u2, float(self.power))

    def profile_sq_(self, u2):
        if self.power == 0:
            return Tophat().profile_sq_(u2)
        return _one_minus_clipped(u2, float(self.power), in_place=True)


class CallableKernel(Kernel):
    """A kernel from a user function of the scaled distance.

    Read more in the :ref:`User Guide <ug_kernels>`.

    Parameters
    ----------
    func : callable
        Maps a torch tensor of scaled distances ``u >= 0`` to a tensor of the same shape of
        non-negative weights; its result is cast to the dtype of ``u`` (so ``u <= 1``, a
        boolean tensor, is the top-hat kernel). It must be written with torch operations (it
        runs on the estimator's device and dtype) and be picklable (a module-level function,
        not a lambda) if the fitted estimator is to be pickled.
    support : float, default=inf
        Radius beyond which ``func`` is zero, if any.
    """

    def __init__(self, func, support=math.inf):
        self.func = func
        self.support = support

    def profile(self, u):
        k = self.func(u)
        # A boolean, integer or float32 result is a fine profile; the engine needs u's dtype.
        return k.to(u.dtype) if isinstance(k, torch.Tensor) else k

    def log_profile_sq(self, u2):
        return torch.log(self.profile(torch.sqrt(u2)))


KERNELS = {
    "gaussian": Gaussian,
    "epanechnikov": Epanechnikov,
    "tophat": Tophat,
    "boxcar": Tophat,
    "uniform": Tophat,
    "linear": Linear,
    "triangular": Linear,
    "tricube": Tricube,
    "triweight": Triweight,
    "biweight": Biweight,
    "quartic": Biweight,
    "cosine": Cosine,
    "exponential": Exponential,
    "laplacian": Exponential,
    "constant": Constant,
}
"""Registry of named kernels (with aliases): name -> Kernel class."""


_BUILT_IN = frozenset(KERNELS.values()) | {SymmetricBeta}


def _probe(kernel, method, arg):
    """Call one method of a user kernel on a probe tensor; a TypeError that says what it
    returned unless it is a tensor of the input's shape and dtype."""
    if isinstance(kernel, CallableKernel):
        name, expected = "The kernel callable", (
            "It must map a tensor u >= 0 to a tensor of non-negative weights.")
    else:
        name, expected = f"{kernel!r}.{method}", (
            "It must return a torch tensor of the input's shape and dtype.")
    try:
        out = getattr(kernel, method)(arg.clone())
    except Exception as exc:
        raise TypeError(f"{name} failed on a torch tensor of scaled distances "
                        f"({arg.dtype}): {exc!r}. {expected}") from exc
    if not isinstance(out, torch.Tensor):
        got = f"{type(out).__name__} with shape {getattr(out, 'shape', None)}"
    elif out.shape != arg.shape or out.dtype != arg.dtype:
        got = f"a tensor of shape {tuple(out.shape)} and {out.dtype}"
    else:
        return out
    if isinstance(kernel, CallableKernel):  # its result is cast to u's dtype: shape counts
        raise TypeError(
            "The kernel callable must return a torch tensor of the same shape as its input; "
            f"got {got} for shape {tuple(arg.shape)}."
        )
    raise TypeError(f"{name} returned {got} for a {arg.dtype} tensor of shape "
                    f"{tuple(arg.shape)}. {expected}")


def _check_user_kernel(kernel, dtypes):
    """Probe a user kernel (a callable or a :class:`Kernel` subclass) once, so that a bad
    one fails at fit with a message, not deep in predict: in each of ``dtypes``, each
    method the engine calls must return a tensor of its input's shape and dtype, and the
    profile must be finite, non-negative and somewhere positive."""
    if isinstance(kernel, CallableKernel):
        methods = ["profile"]
    else:  # the methods the class writes first: the others are derived from them
        methods = sorted(["profile", "log_profile_sq", "profile_sq", "profile_sq_"],
                         key=lambda m: getattr(type(kernel), m) is getattr(Kernel, m))
    for dtype in dtypes:
        u = torch.linspace(0.0, 3.0, 31, dtype=dtype)  # (31,)
        for method in methods:
            _probe(kernel, method, u if method == "profile" else u * u)
    profile = kernel.profile(torch.linspace(0.0, 3.0, 31, dtype=torch.float64))  # (31,)
    what = "The kernel callable" if isinstance(kernel, CallableKernel) else f"The kernel {kernel!r}"
    if not bool(torch.isfinite(profile).all()) or bool((profile < 0).any()):
        raise ValueError(
            f"{what} must return finite, non-negative weights; "
            f"on u = 0, 0.1, ..., 3 it returned {profile.tolist()}."
        )
    if not bool((profile > 0).any()):
        raise ValueError(f"{what} returned zero weight everywhere on u in [0, 3].")


def get_kernel(kernel, dtype=None):
    """Resolve a kernel specification to a fresh :class:`Kernel` object.

    Parameters
    ----------
    kernel : str, Kernel or callable
        A name from :data:`KERNELS`, a :class:`Kernel` (cloned), or a function of the
        scaled-distance tensor (wrapped in :class:`CallableKernel`). A kernel of the user's
        (a callable or a subclass) is probed once on a few distances.
    dtype : torch.dtype or numpy dtype, default=None
        The dtype the kernel will compute in (the probe's); None probes float32 and
        float64.

    Raises
    ------
    TypeError
        If a kernel of the user's fails, or returns anything but a torch tensor of its
        input's shape and dtype (a callable's result is cast to that dtype).
    ValueError
        If its profile is negative, not finite, or zero everywhere on ``[0, 3]``.

    Returns
    -------
    kernel : Kernel

    Examples
    --------
    >>> from sklearn_nw.kernels import get_kernel
    >>> get_kernel("boxcar")
    Tophat()
    >>> float(get_kernel("epanechnikov")(0.5))
    0.75
    """
    from sklearn.base import clone

    if isinstance(kernel, str):
        try:
            return KERNELS[kernel.lower()]()
        except KeyError:
            valid = ", ".join(sorted(KERNELS))
            raise ValueError(
                f"Unknown kernel {kernel!r}. Valid kernel names are: {valid}.") from None
    if isinstance(kernel, Kernel):
        kernel = clone(kernel)
        if isinstance(kernel, SymmetricBeta):
            kernel._validate_params()
    elif callable(kernel):
        kernel = CallableKernel(kernel)
    else:
        raise TypeError(
            "kernel must be a kernel name, a Kernel instance or a callable; "
            f"got {type(kernel).__name__}."
        )
    if type(kernel) not in _BUILT_IN:
        if dtype is not None and not isinstance(dtype, torch.dtype):  # a numpy dtype
            dtype = torch.float32 if np.dtype(dtype) == np.float32 else torch.float64
        _check_user_kernel(kernel, (torch.float64, torch.float32) if dtype is None else (dtype,))
    return kernel


# -- kernels of categorical and ordered features --------------------------------------------


class CategoricalKernel(BaseEstimator):
    """Base class of the kernels of a categorical (or ordered) feature with smoothing
    ``lambda``, as statsmodels' ``KernelReg`` and R's np have them.

    Nadaraya-Watson weights are ratios, so a kernel matters only through
    ``L(q, x) / L(q, q)``, which every kernel here writes as ``rho ** D(q, x) * m(q, x)``:
    ``D`` counts a mismatch (unordered) or the distance between ranks (ordered), ``rho``
    in [0, 1] is the weight of one mismatch (or rank) relative to a match
    (:meth:`ratio`), and ``m`` is a fixed factor (Wang and van Ryzin's 1/2 for any
    mismatch; 1 otherwise). With a continuous kernel whose log-profile is ``-c u**2``
    (the Gaussian) the product kernel is then that kernel on the continuous features and
    on an embedding of the categories (one-hot for a mismatch, "thermometer" codes for
    ranks), which is how the estimators compute it (:mod:`sklearn_nw._categorical`).

    Read more in the :ref:`User Guide <categorical>`.

    Attributes
    ----------
    ordered : bool
        Whether the kernel is for ordered features.
    mismatch_factor : float
        ``m`` of any two different categories (1 for none).
    """

    ordered = False
    mismatch_factor = 1.0

    def max_smoothing(self, n_levels):
        """The largest ``lambda``: where ``rho`` reaches 1 and the feature is ignored."""
        return 1.0

    def ratio(self, smoothing, n_levels):
        """``rho`` (ndarray in [0, 1]) of ``lambda`` (ndarray in
        ``[0, max_smoothing]``), ``n_levels`` the categories seen at fit."""
        return np.asarray(smoothing, dtype=np.float64)

    def smoothing(self, ratio, n_levels):
        """``lambda`` of ``rho`` (ndarray), the inverse of :meth:`ratio`."""
        return np.asarray(ratio, dtype=np.float64)

    def weight(self, q, x, smoothing, n_levels):
        """``L(q, x) / L(q, q)`` for category codes (ranks for an ordered kernel) ``q`` and
        ``x`` (broadcast): the oracle of the embedding the estimators compute with."""
        q, x = np.asarray(q), np.asarray(x)
        distance = np.abs(q - x) if self.ordered else (q != x).astype(np.float64)
        ratio = self.ratio(np.float64(smoothing), n_levels)
        with np.errstate(divide="ignore"):
            weight = np.where(distance > 0, ratio ** np.where(distance > 0, distance, 1), 1.0)
        return np.where(q != x, weight * self.mismatch_factor, 1.0)


class LiRacine(CategoricalKernel):
    """Li and Racine's unordered kernel: 1 for the same category, ``lambda`` for another
    (``lambda`` in [0, 1]; 1 ignores the feature).

    Read more in the :ref:`User Guide <categorical>`.
    """


class AitchisonAitken(CategoricalKernel):
    """Aitchison and Aitken's unordered kernel (statsmodels' ``"u"``): ``1 - lambda`` for
    the same category, ``lambda / (c - 1)`` for another, ``c`` the number of categories
    seen at fit; ``lambda`` in ``[0, (c - 1) / c]``, the largest ignoring the feature.
    As a ratio it is Li and Racine's with ``lambda / ((c - 1) (1 - lambda))``.

    Read more in the :ref:`User Guide <categorical>`.
    """

    def max_smoothing(self, n_levels):
        c = max(n_levels, 2)
        return (c - 1) / c

    def ratio(self, smoothing, n_levels):
        c = max(n_levels, 2)
        smoothing = np.asarray(smoothing, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return np.minimum(smoothing / ((c - 1) * (1.0 - smoothing)), 1.0)

    def smoothing(self, ratio, n_levels):
        c = max(n_levels, 2)
        ratio = np.asarray(ratio, dtype=np.float64)
        return ratio * (c - 1) / (1.0 + ratio * (c - 1))


class LiRacineOrdered(CategoricalKernel):
    """Li and Racine's ordered kernel: ``lambda ** |r - r'|`` for categories of ranks
    ``r`` and ``r'`` (``lambda`` in [0, 1]; 1 ignores the feature).

    Read more in the :ref:`User Guide <categorical>`.
    """

    ordered = True


class WangVanRyzin(CategoricalKernel):
    """Wang and van Ryzin's ordered kernel (statsmodels' ``"o"``): ``1 - lambda`` for the
    same category, ``(1 - lambda) / 2 * lambda ** |r - r'|`` for another (``lambda`` in
    [0, 1]); any two different categories keep a factor 1/2 apart, also at
    ``lambda = 1``.

    Read more in the :ref:`User Guide <categorical>`.
    """

    ordered = True
    mismatch_factor = 0.5


CATEGORICAL_KERNELS = {
    "li_racine": (LiRacine, LiRacineOrdered),
    "aitchison_aitken": (AitchisonAitken, WangVanRyzin),
}
"""The estimators' ``categorical_kernel`` -> (unordered kernel, ordered kernel) classes."""
