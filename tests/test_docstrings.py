"""Every public parameter and fitted attribute of the estimators is documented."""

import re
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklearn_nw import (
    LeaveOneOutBandwidth,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)

ESTIMATORS = [NadarayaWatsonRegressor, NadarayaWatsonClassifier, NadarayaWatsonRegressorCV,
              NadarayaWatsonClassifierCV]


def _section(doc, title):
    """The entries (``name : type`` lines) of one numpydoc section."""
    pattern = rf"^\s*{title}\n\s*-+\n(.*?)(?=^\s*\w[\w ]*\n\s*-+\n|\Z)"
    match = re.search(pattern, doc, re.MULTILINE | re.DOTALL)
    assert match, f"no {title} section"
    return set(re.findall(r"^ {4}(\w+) :", match.group(1), re.MULTILINE))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_every_parameter_is_documented(Estimator):
    documented = _section(Estimator.__doc__, "Parameters")
    assert set(Estimator().get_params()) == documented


def _fits(Estimator):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(60, 3))
    y = X[:, 0] + 0.1 * rng.standard_normal(60)
    if "Classifier" in Estimator.__name__:
        y = (y > 0.5).astype(int)
    if Estimator in (NadarayaWatsonRegressor, NadarayaWatsonClassifier):
        yield Estimator(bandwidth=LeaveOneOutBandwidth("full", max_iter=5)).fit(X, y)
        yield Estimator(kernel="epanechnikov", bandwidth=0.5, n_neighbors=5).fit(X, y)
    else:
        yield Estimator().fit(X, y)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_every_fitted_attribute_is_documented(Estimator):
    documented = _section(Estimator.__doc__, "Attributes")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter=5, to be quick
        for model in _fits(Estimator):
            fitted = {k for k in vars(model) if k.endswith("_") and not k.startswith("_")}
            assert fitted <= documented, sorted(fitted - documented)
