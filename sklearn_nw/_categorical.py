"""Categorical and ordered features: which columns they are, their categories, and the
embedding their kernels are computed on.

A categorical feature's kernel (:class:`~sklearn_nw.kernels.CategoricalKernel`) enters the
Nadaraya-Watson weights as ``rho ** D = exp(-D / s**2)`` times a fixed factor, ``D`` a
mismatch (unordered) or a distance between ranks (ordered), ``rho`` the weight of one
mismatch relative to a match. With a continuous kernel whose log-profile is ``-c u**2``
(the Gaussian) the product kernel is the continuous kernel on one vector: the continuous
features, then each categorical feature's embedding, its columns divided by the scale
``s = 1 / sqrt(-log rho)``:

- unordered: one-hot codes times ``1 / sqrt(2c)`` (a mismatch is ``D = 1``), with one
  column more for a category never seen at fit, different from every key;
- ordered: "thermometer" codes (``t_i = [rank > i]``) times ``1 / sqrt(c)``
  (``D = |rank - rank'|``); Wang and van Ryzin's kernel adds one-hot codes at the fixed
  scale that gives any mismatch its factor 1/2.

Every route, leave-one-out engine and search then computes on the embedded keys with a
bandwidth per embedded column (:meth:`CategoricalFeatures.expand`). The searches move one
parameter per feature, multiplicatively: a continuous feature's bandwidth, and a
categorical one's odds ``t = rho / (1 - rho)`` (about ``rho`` where it is small, infinite
where the feature is ignored), so that a step of the grid or of the descent changes the
weight of a mismatch in proportion, and a small ``rho`` keeps its gradient (``s`` itself
would make ``rho = exp(-1 / s**2)`` flat near 0). ``bandwidth_`` reports ``lambda`` at the
categorical positions (:meth:`CategoricalFeatures.public`). Local polynomials are polynomial in the
continuous features, the leading columns of the embedding (np's rule).
"""

import numpy as np
import torch

from ._scale import check_bandwidth
from .kernels import CATEGORICAL_KERNELS

# The scales of a categorical feature are kept in [SCALE_MIN, SCALE_MAX]:
# exp(-1 / SCALE_MIN**2) = exp(-2000) is 0 and exp(-1 / SCALE_MAX**2) is 1 in float64,
# while the embedded coordinates stay small enough (about 45) for the distance expansion.
SCALE_MIN = 2000.0**-0.5
SCALE_MAX = 1e8


def is_frame(X):
    return hasattr(X, "iloc") and hasattr(X, "dtypes")


def _is_category(dtype):
    return getattr(dtype, "name", None) == "category"


def categorical_columns(X, categorical_features, n_features):
    """The categorical features (d,) bool and the ordered ones among them (d,) bool.

    ``categorical_features`` is spelled as :class:`~sklearn.ensemble.HistGradientBoostingRegressor`
    spells it: ``"from_dtype"`` (a pandas DataFrame's ``category`` columns; an ordered
    one is ordered), a boolean mask, integer indices, feature names (of a DataFrame), or
    None. Only a pandas ordered categorical is ordered."""
    categorical = np.zeros(n_features, dtype=bool)
    dtypes = list(X.dtypes) if is_frame(X) else [None] * n_features
    if isinstance(categorical_features, str) and categorical_features == "from_dtype":
        categorical = np.array([_is_category(t) for t in dtypes], dtype=bool)
    elif categorical_features is not None:
        given = np.asarray(categorical_features)
        if given.ndim != 1:
            raise ValueError("categorical_features must be 'from_dtype', None, a boolean "
                             "mask, integer indices or feature names (one dimension); got "
                             f"an array of shape {given.shape}.")
        if given.dtype.kind in "OUS":
            names = [str(c) for c in X.columns] if is_frame(X) else None
            if names is None:
                raise ValueError("categorical_features given as feature names needs X as a "
                                 "pandas DataFrame with those column names.")
            missing = [str(c) for c in given if str(c) not in names]
            if missing:
                raise ValueError(f"categorical_features names {missing} are not columns of "
                                 f"X; its columns are {names}.")
            categorical[[names.index(str(c)) for c in given]] = True
        elif given.dtype.kind == "b":
            if len(given) != n_features:
                raise ValueError(f"categorical_features as a boolean mask must have "
                                 f"n_features={n_features} entries; got {len(given)}.")
            categorical = given.copy()
        elif given.dtype.kind in "iu" or given.size == 0:
            given = given.astype(np.int64)
            if np.any((given < 0) | (given >= n_features)):
                raise ValueError(f"categorical_features indices must be in [0, "
                                 f"{n_features - 1}]; got {given.tolist()}.")
            categorical[given] = True
        else:
            raise ValueError("categorical_features must be 'from_dtype', None, a boolean "
                             f"mask, integer indices or feature names; got "
                             f"{categorical_features!r}.")
    ordered = np.array([categorical[j] and _is_category(t) and bool(t.ordered)
                        for j, t in enumerate(dtypes)], dtype=bool)
    return categorical, ordered


def find_categorical(X, categorical_features, categorical_kernel):
    """The :class:`CategoricalFeatures` of training inputs ``X`` as given (an array, a
    pandas or dask DataFrame, a dask array), or None where none is categorical
    (``categorical_features`` None, or ``"from_dtype"`` on anything but a DataFrame)."""
    spec = categorical_features
    if spec is None or (isinstance(spec, str) and not is_frame(X)):
        return None
    shape = X.shape if hasattr(X, "shape") else np.asarray(X, dtype=object).shape
    if len(shape) != 2:
        return None  # the estimator's validation names what is wrong
    categorical, ordered = categorical_columns(X, spec, shape[1])
    if not categorical.any():
        return None
    return CategoricalFeatures(X, categorical, ordered, categorical_kernel)


def _column(X, j):
    if is_frame(X):
        return X.iloc[:, j]
    return X[:, j] if _is_lazy(X) else np.asarray(X)[:, j]


def _is_lazy(a):
    """Whether ``a`` is a dask collection (an array, DataFrame or Series): computed on its
    cluster, not gathered."""
    return hasattr(a, "dask") and hasattr(a, "compute")


def _distinct(column):
    """The distinct values of a dask column, computed on its cluster (few where the
    feature is categorical): a pandas Series in the column's dtype (a categorical dtype
    with its categories made known), or a numpy array."""
    if hasattr(column, "drop_duplicates"):
        if _is_category(column.dtype) and not column.cat.known:
            column = column.cat.as_known()
        # Each partition's, gathered (no shuffle), then over the partitions.
        return column.map_partitions(type(column._meta).drop_duplicates).compute(
            ).drop_duplicates()
    import dask.array as da

    return da.unique(column).compute()


def _lookup(column, categories):
    """The index of each value of ``column`` in ``categories`` (int64; -1 where it is not
    one of them), without a Python loop over the rows where the types allow it."""
    dtype = getattr(column, "dtype", None)
    if _is_category(dtype) and np.array_equal(np.asarray(dtype.categories), categories):
        return np.asarray(column.cat.codes, dtype=np.int64)  # pandas' own codes
    values = np.asarray(column)
    if values.dtype.kind in "biuf" and categories.dtype.kind in "biuf" and len(categories):
        order = np.argsort(categories, kind="stable")
        position = np.searchsorted(categories[order], values).clip(0, len(categories) - 1)
        found = categories[order][position] == values
        return np.where(found, order[position], -1).astype(np.int64)
    index = {value: i for i, value in enumerate(categories.tolist())}
    return np.array([index.get(v, -1) for v in np.asarray(values, dtype=object).tolist()],
                    dtype=np.int64)


def _missing(column):
    """Which values of a column are missing: NaN, None, and pandas' NA and NaT (a pandas
    column answers itself, nullable dtypes included)."""
    if hasattr(column, "isna"):
        return np.asarray(column.isna(), dtype=bool)
    values = np.asarray(column)
    if values.dtype.kind in "fc":
        return np.isnan(values)
    if values.dtype.kind == "O":
        return np.array([v is None or _not_itself(v) for v in values], dtype=bool)
    return np.zeros(len(values), dtype=bool)


def _not_itself(value):
    """NaN (unequal to itself), or a value whose equality with itself has no truth value
    (pandas.NA): both mean "missing"."""
    try:
        return bool(value != value)
    except TypeError:
        return True


class CategoricalFeatures:
    """The categorical features of a fit: their categories, kernels and embedding.

    Parameters
    ----------
    X : array-like or pandas DataFrame of shape (n_samples, n_features)
        The training inputs as the user gave them.
    categorical, ordered : ndarray of bool, shape (n_features,)
        :func:`categorical_columns`.
    categorical_kernel : {"li_racine", "aitchison_aitken"}
        The kernels of unordered and ordered features
        (:data:`~sklearn_nw.kernels.CATEGORICAL_KERNELS`).

    The continuous kernel is set by :meth:`use_kernel`, before :meth:`embed`.
    """

    def __init__(self, X, categorical, ordered, categorical_kernel):
        self.categorical, self.ordered = categorical, ordered
        self.n_features = len(categorical)
        self.continuous = np.flatnonzero(~categorical)
        self.columns = np.flatnonzero(categorical)
        self.n_continuous = len(self.continuous)
        unordered_kernel, ordered_kernel = CATEGORICAL_KERNELS[categorical_kernel]
        self.kernels = [ordered_kernel() if ordered[j] else unordered_kernel()
                        for j in self.columns]
        self.categories = []
        # Whether each feature's categories are its pandas dtype's (declared, as X
        # gave them), and the columns' names (None for an array): decode's X as given.
        self.declared = []
        self.names = list(X.columns) if is_frame(X) else None
        for j in self.columns:
            column = _column(X, j)
            self.declared.append(_is_category(getattr(column, "dtype", None)))
            if _is_lazy(column):  # a dask column: its distinct values stand for it
                column = _distinct(column)
            self._check_missing(column, j)
            if self.declared[-1]:
                self.categories.append(np.asarray(column.cat.categories))
            else:
                try:
                    self.categories.append(np.unique(np.asarray(column)))
                except TypeError as exc:
                    raise ValueError(f"The categories of feature {j} cannot be sorted "
                                     f"({exc}); give them one type.") from None
        # The number of categories seen at fit (statsmodels' num_levels), counted by
        # fit_encode from the codes it returns.
        self.n_levels = None

    def fit_encode(self, X):
        """:meth:`encode` the training inputs, counting the categories seen in them."""
        codes = self._codes(X)
        self.n_levels = [len(np.unique(codes[:, k])) for k in range(len(self.columns))]
        return self._encoded(X, codes)

    # -- encoding -------------------------------------------------------------------------

    @staticmethod
    def _check_missing(column, j):
        if np.any(_missing(column)):
            raise ValueError(
                f"Categorical feature {j} has missing values; give them a category of "
                "their own (e.g. the string 'missing') before fitting.")

    def _codes(self, X):
        """Category codes (n, k) of the categorical features: indices into their
        categories; an unordered category not seen at fit gets ``len(categories)``."""
        codes = np.empty((X.shape[0], len(self.columns)), dtype=np.int64)
        for k, (j, categories) in enumerate(zip(self.columns, self.categories)):
            column = _column(X, j)
            self._check_missing(column, j)
            code = _lookup(column, categories)
            unseen = code < 0
            if np.any(unseen) and self.ordered[j]:
                values = np.asarray(column, dtype=object)
                raise ValueError(
                    f"Ordered feature {j} has values {sorted(set(values[unseen].tolist()))[:5]} "
                    f"that are not among its categories {categories.tolist()}: an ordered "
                    "category needs a rank.")
            codes[:, k] = np.where(unseen, len(categories), code)
        return codes

    def encode(self, X):
        """``X`` with its categorical columns replaced by their codes (float64): a
        DataFrame stays a DataFrame (its column names are checked as usual), anything
        else becomes a float64 array."""
        return self._encoded(X, self._codes(X))

    def _encoded(self, X, codes):
        codes = codes.astype(np.float64)
        if is_frame(X):
            X = X.copy()
            for k, j in enumerate(self.columns):
                X[X.columns[j]] = codes[:, k]
            return X
        X = np.asarray(X)
        out = np.empty(X.shape, dtype=np.float64)
        try:
            out[:, self.continuous] = X[:, self.continuous].astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"The continuous features of X must be numbers: {exc}") from None
        out[:, self.columns] = codes
        return out

    def decode(self, encoded):
        """The inputs as given (the training rows' categories, not their codes) of
        ``encoded`` inputs (n, d) of categories seen at fit: a DataFrame with the fit's
        columns (a categorical feature in its pandas dtype where it had one) when fit
        took one, else an array (of objects where a category is not a number). A clone
        fitted on them learns the categories that fit learned on the same rows."""
        encoded = np.asarray(encoded)
        values = [encoded[:, j] for j in range(self.n_features)]
        for j, categories in zip(self.columns, self.categories):
            values[j] = categories[encoded[:, j].astype(np.int64)]
        if self.names is None:
            numbers = all(v.dtype.kind in "biuf" for v in values)
            return np.column_stack([v if numbers else v.astype(object) for v in values])
        import pandas as pd

        frame = {}
        for j, name in enumerate(self.names):
            frame[name] = values[j]
        for k, j in enumerate(self.columns):
            if self.declared[k]:
                dtype = pd.CategoricalDtype(self.categories[k], ordered=bool(self.ordered[j]))
                frame[self.names[j]] = pd.Categorical.from_codes(
                    encoded[:, j].astype(np.int64), dtype=dtype)
        return pd.DataFrame(frame, columns=self.names)

    def reference_codes(self, codes, k):
        """The codes (n, d) with categorical feature ``self.columns[k]`` moved to the level
        each query's is compared with (R np's gradients of a factor): the first category
        for an unordered feature, the previous one for an ordered feature; and where that
        is the query's own level (n,) bool (the first level, of either kind)."""
        j = self.columns[k]
        own = codes[:, j].astype(np.int64)
        reference = np.maximum(own - 1, 0) if self.ordered[j] else np.zeros_like(own)
        moved = np.array(codes, copy=True)
        moved[:, j] = reference
        return moved, reference == own

    # -- the embedding --------------------------------------------------------------------

    def use_kernel(self, kernel):
        """Embed for the continuous ``kernel``, whose log-profile must be ``-c u**2``; set
        ``source`` (d_emb,), the feature whose scale divides each embedded column (-1: a
        fixed scale), and ``fixed`` (d_emb,), that scale."""
        quadratic_coef = kernel.quadratic_coef
        if quadratic_coef is None:
            raise ValueError(
                f"Categorical features are computed with the Gaussian kernel (a product "
                f"with it is one Gaussian on the continuous features and the categories' "
                f"codes); got kernel={kernel!r}. Use kernel='gaussian', or "
                "categorical_features=None to treat every feature as a number.")
        self.quadratic_coef = quadratic_coef
        self._one_hot = 1.0 / np.sqrt(2.0 * quadratic_coef)
        self._rank = 1.0 / np.sqrt(quadratic_coef)
        source = list(self.continuous)
        fixed = [np.nan] * len(source)
        for j, kernel, categories in zip(self.columns, self.kernels, self.categories):
            c = len(categories)
            if kernel.ordered:
                source += [j] * (c - 1)
                fixed += [np.nan] * (c - 1)
            if not kernel.ordered:  # one column more: a category not seen at fit
                source += [j] * (c + 1)
                fixed += [np.nan] * (c + 1)
            elif kernel.mismatch_factor != 1.0:  # -1 / s**2 = log(mismatch_factor)
                source += [-1] * c
                fixed += [1.0 / np.sqrt(-np.log(kernel.mismatch_factor))] * c
        self.source = np.asarray(source, dtype=np.int64)
        self.fixed = np.asarray(fixed)

    def embed(self, codes):
        """The embedded inputs (n, d_emb) of encoded inputs ``codes`` (n, d), in their
        dtype: the continuous features first."""
        codes = np.asarray(codes)
        parts = [codes[:, self.continuous]]
        for j, kernel, categories in zip(self.columns, self.kernels, self.categories):
            c = len(categories)
            code = codes[:, j].astype(np.int64)
            if kernel.ordered:
                parts.append((code[:, None] > np.arange(c - 1)) * self._rank)
            if not kernel.ordered or kernel.mismatch_factor != 1.0:
                width = c if kernel.ordered else c + 1
                parts.append((code[:, None] == np.arange(width)) * self._one_hot)
        return np.concatenate(parts, axis=1).astype(codes.dtype, copy=False)

    def feature_columns(self, k):
        """The embedded columns (a slice) of categorical feature ``self.columns[k]``: its
        thermometer or one-hot codes, and its fixed-scale one-hot codes where it has
        them (:meth:`embed`'s order)."""
        start = self.n_continuous
        for i, (kernel, categories) in enumerate(zip(self.kernels, self.categories)):
            c = len(categories)
            width = ((c - 1 + (c if kernel.mismatch_factor != 1.0 else 0)) if kernel.ordered
                     else c + 1)
            if i == k:
                return slice(start, start + width)
            start += width
        raise IndexError(k)

    def category_log_factors(self, k, h):
        """The log factors (S, c, c) of categorical feature ``self.columns[k]``'s kernel
        between its c categories (seen at fit) at the parameters ``h`` (S, d) (only that
        feature's entry is read): ``-coef ||e(a) - e(b)||**2`` over its embedded columns
        divided by their scales, the Gaussian factor those columns put on a weight."""
        j, columns = self.columns[k], self.feature_columns(k)
        c = len(self.categories[k])
        codes = np.zeros((c, self.n_features))
        codes[:, j] = np.arange(c)
        e = self.embed(codes)[:, columns]  # (c, e)
        scales = self.expand(np.asarray(h, dtype=np.float64))[:, columns]  # (S, e)
        diff = (e[:, None, :] - e[None, :, :])[None] / scales[:, None, None, :]
        return -self.quadratic_coef * (diff**2).sum(-1)

    def unembed(self, embedded):
        """The encoded inputs (n, d) float64 of inputs ``embedded`` (n, d_emb) by
        :meth:`embed`: its inverse (an unordered category's code from its one-hot
        column, an ordered one's from its thermometer columns)."""
        embedded = np.asarray(embedded)
        codes = np.empty((len(embedded), self.n_features))
        codes[:, self.continuous] = embedded[:, :self.n_continuous]
        for k, (j, kernel) in enumerate(zip(self.columns, self.kernels)):
            block = embedded[:, self.feature_columns(k)]
            c = len(self.categories[k])
            codes[:, j] = (np.count_nonzero(block[:, :c - 1], axis=1) if kernel.ordered
                           else np.argmax(block, axis=1))
        return codes

    def expand(self, h):
        """The bandwidth of every embedded column (d_emb,) from one parameter per feature
        ``h`` (..., d) (a continuous feature's bandwidth, a categorical one's odds ``t``):
        numpy or torch (differentiable in ``h``). A categorical column's is the scale
        ``s = 1 / sqrt(log(1 + 1 / t))``, clamped to [SCALE_MIN, SCALE_MAX]."""
        is_fixed = self.source < 0
        source = np.where(is_fixed, 0, self.source)
        categorical = self.categorical[source] & ~is_fixed
        if isinstance(h, torch.Tensor):
            device = h.device
            e = h[..., torch.as_tensor(source, device=device)]
            scale = torch.rsqrt(torch.log1p(1.0 / e)).clamp(SCALE_MIN, SCALE_MAX)
            e = torch.where(torch.as_tensor(categorical, device=device), scale, e)
            fixed = torch.as_tensor(np.nan_to_num(self.fixed), dtype=h.dtype, device=device)
            return torch.where(torch.as_tensor(is_fixed, device=device), fixed, e)
        e = np.asarray(h, dtype=np.float64)[..., source]
        with np.errstate(divide="ignore"):
            scale = np.clip(1.0 / np.sqrt(np.log1p(1.0 / e)), SCALE_MIN, SCALE_MAX)
        e = np.where(categorical, scale, e)
        return np.where(is_fixed, self.fixed, e)

    # -- bandwidth_ as the user reads and gives it ----------------------------------------

    def public(self, h):
        """``bandwidth_`` (..., d) of the searches' parameters ``h`` (..., d): ``lambda``
        at the categorical features (of the odds ``t``, ``rho = 1 / (1 + 1 / t)``)."""
        out = np.array(h, dtype=np.float64)
        for j, kernel, n_levels in zip(self.columns, self.kernels, self.n_levels):
            with np.errstate(divide="ignore"):
                ratio = 1.0 / (1.0 + 1.0 / out[..., j])
            out[..., j] = kernel.smoothing(ratio, n_levels)
        return out

    def internal(self, bandwidth):
        """The searches' parameters (..., d) of a bandwidth vector given in
        ``bandwidth_``'s terms, ``lambda`` at the categorical features, each checked
        against its kernel's range."""
        out = np.array(bandwidth, dtype=np.float64)
        for j, kernel, n_levels in zip(self.columns, self.kernels, self.n_levels):
            lam, top = out[..., j], kernel.max_smoothing(n_levels)
            if np.any(~np.isfinite(lam)) or np.any((lam < 0) | (lam > top)):
                raise ValueError(
                    f"The bandwidth of categorical feature {j} is the smoothing lambda of "
                    f"the {type(kernel).__name__} kernel, in [0, {top:.6g}]; got "
                    f"{np.ravel(lam).tolist()}.")
            ratio = kernel.ratio(lam, n_levels)
            with np.errstate(divide="ignore"):
                out[..., j] = ratio / (1.0 - ratio)  # inf where the feature is ignored
        return out

    def check(self, bandwidth):
        """Scales (d,) of a ``bandwidth`` the user gave, one value per feature: a
        continuous feature's bandwidth (positive, finite), a categorical one's
        ``lambda``."""
        if np.ndim(bandwidth) != 1:
            raise ValueError(
                "With categorical features, bandwidth must hold one value per feature "
                "(the bandwidth of a continuous feature, the smoothing lambda of a "
                f"categorical one), as statsmodels' bw; got {bandwidth!r}.")
        try:
            given = np.asarray(bandwidth, dtype=np.float64)
        except (TypeError, ValueError):
            given = None
        if given is None or len(given) != self.n_features:
            check_bandwidth(bandwidth, self.n_features)  # raises what is wrong
        h = check_bandwidth(np.where(self.categorical, 1.0, given), self.n_features)
        h[self.columns] = given[self.columns]
        return self.internal(h)

    def reference(self, h, n):
        """The parameters (d,) a rule of thumb gives: its continuous bandwidths ``h`` (d,)
        kept, each categorical feature where a mismatch (one rank) weighs
        ``rho = n ** (-2 / (q + 4))`` of a match, ``q`` continuous features and ``n`` the
        sample size: Li and Racine's rate, ``lambda ~ h**2``."""
        out = np.array(h, dtype=np.float64)
        ratio = max(float(n), 2.0) ** (-2.0 / (self.n_continuous + 4))
        out[self.columns] = ratio / (1.0 - ratio)
        return out
