"""Routes as objects built at fit: the route's name is the fitted ``route_``, nothing
rewrites it, and a local polynomial route reports its own counts."""

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_nw import EmptyNeighborhoodWarning, NadarayaWatsonRegressor
from sklearn_nw._base import LocalFitWarning


@pytest.mark.parametrize("seed", [0, 1])
def test_local_polynomial_leave_one_out_warns_each_count_under_its_name(seed):
    """attention_weights_ of a local linear fit: the rows with no other training point in
    the kernel's support fall back to their nearest (EmptyNeighborhoodWarning); those with
    fewer than two (no line through them) keep their local-constant value
    (LocalFitWarning). Counted here from the distances themselves."""
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0, 1, (32, 1)), axis=0)
    h = 0.05
    est = NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=h, degree=1).fit(
        X, np.sin(6 * X[:, 0]))
    D = np.abs(X - X.T)
    np.fill_diagonal(D, np.inf)
    in_reach = (D < h).sum(1)  # other training points inside the support
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        attention = est.attention_weights_
    counts = {w.category: int(re.match(r"(\d+) of", str(w.message)).group(1))
              for w in caught}
    assert counts[LocalFitWarning] == int((in_reach < 2).sum())
    assert counts.get(EmptyNeighborhoodWarning, 0) == int((in_reach == 0).sum())
    assert attention.shape == (32, 32)
    assert (in_reach == 0).sum() > 0  # the fallback case is reached


@pytest.mark.parametrize("params, route", [
    ({"kernel": "gaussian"}, "dense"),
    ({"kernel": "epanechnikov", "bandwidth": 0.05}, "cell_list"),
    ({"kernel": "epanechnikov", "bandwidth": 0.05, "algorithm": "kd_tree"}, "radius"),
    ({"n_neighbors": 5}, "k_nearest"),
    ({"kernel": "epanechnikov", "bandwidth": 0.05, "degree": 1}, "cell_list"),
])
def test_route_is_the_objects_name_and_kept_by_predict(params, route):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (6000, 2))
    est = NadarayaWatsonRegressor(**params).fit(X, X[:, 0])
    assert est.route_ == est.key_set_.route.name == route
    before = est.key_set_.route
    est.predict(X[:50])
    assert est.key_set_.route is before and est.route_ == route


def test_csr_from_parts_scatters_rows_given_in_several_parts():
    # Rows in any order within the parts, one row in two parts (a query no key reached,
    # redone over every key), a part with no entries, a row with none: the same matrix
    # as scipy's construction from (row, column) pairs, each row's entries in the order
    # of the parts.
    from sklearn_nw._routes import csr_from_parts

    parts = [
        (np.array([3, 0]), np.array([2, 1]), np.array([4, 1, 6]), np.array([0.5, 0.25, 1.0])),
        (np.array([2]), np.array([0]), np.array([], dtype=np.int64), np.array([])),
        (np.array([2, 3]), np.array([2, 1]), np.array([5, 0, 2]), np.array([2.0, 3.0, 4.0])),
    ]
    got = csr_from_parts(parts, (5, 7), np.float64)
    rows = np.concatenate([np.repeat(r, c) for r, c, _, _ in parts])
    cols = np.concatenate([c for _, _, c, _ in parts])
    vals = np.concatenate([v for _, _, _, v in parts])
    expected = sp.csr_array((vals, (rows, cols)), shape=(5, 7)).toarray()
    np.testing.assert_array_equal(got.toarray(), expected)
    np.testing.assert_array_equal(got.indptr, [0, 1, 1, 3, 6, 6])
    np.testing.assert_array_equal(got.indices, [6, 5, 0, 4, 1, 2])  # the parts' order
    assert got.dtype == np.float64
    empty = csr_from_parts([], (3, 4), np.float32)
    assert empty.shape == (3, 4) and empty.nnz == 0 and empty.dtype == np.float32
