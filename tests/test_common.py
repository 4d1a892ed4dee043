"""scikit-learn's common estimator checks on both estimators, with several kernels."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_nw import NadarayaWatsonClassifier, NadarayaWatsonRegressor
from sklearn_nw.kernels import SymmetricBeta

ESTIMATORS = [
    NadarayaWatsonRegressor(),
    NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth="silverman"),
    NadarayaWatsonRegressor(kernel="exponential", bandwidth=0.5),
    NadarayaWatsonRegressor(kernel=SymmetricBeta(power=2.0)),
    NadarayaWatsonClassifier(),
    NadarayaWatsonClassifier(kernel="tricube"),
    NadarayaWatsonClassifier(kernel="linear", bandwidth="silverman"),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
