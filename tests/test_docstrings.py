"""Every public parameter and fitted attribute of the estimators is documented."""

import inspect
import re
import warnings
from pathlib import Path

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


def _public_classes():
    import sklearn_nw.inspection
    import sklearn_nw.kernels

    modules = [sklearn_nw, sklearn_nw.kernels, sklearn_nw.inspection]
    try:
        import sklearn_nw.dask
    except ImportError:  # dask's extra not installed
        pass
    else:
        modules.append(sklearn_nw.dask)
    return {f"{module.__name__}.{name}": getattr(module, name) for module in modules
            for name in module.__all__ if inspect.isclass(getattr(module, name))}


def _user_guide_labels():
    guide = Path(__file__).resolve().parents[1] / "docs" / "user_guide"
    return {label for page in guide.glob("*.rst")
            for label in re.findall(r"^\.\. _(\w+):$", page.read_text(), re.MULTILINE)}


@pytest.mark.parametrize("name", sorted(_public_classes()))
def test_every_public_class_links_the_user_guide(name):
    match = re.search(r"Read more in the :ref:`User Guide <(\w+)>`\.",
                      _public_classes()[name].__doc__)
    assert match, f"{name} has no 'Read more in the User Guide'"
    assert match.group(1) in _user_guide_labels()


@pytest.mark.parametrize("Estimator", [NadarayaWatsonRegressorCV, NadarayaWatsonClassifierCV])
def test_cv_docstrings_are_complete(Estimator):
    doc = Estimator.__doc__
    see_also = re.search(r"See Also\n\s*-+\n(.*?)\n\n", doc, re.DOTALL).group(1)
    for name in ("GridSearchCV", "BandwidthSearchDisplay", "RidgeC"):
        assert name in see_also
    notes = re.search(r"Notes\n\s*-+\n(.*?)\n    References\n", doc, re.DOTALL).group(1)
    assert "one-standard-error rule" in notes and "[1]_" in notes
    examples = doc[doc.index("    Examples\n"):]
    assert f"{Estimator.__name__}().fit(" in examples and "best_params_" in examples
