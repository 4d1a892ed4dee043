"""scikit-learn's common estimator checks on both estimators, with several kernels."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_nw import (
    AdaptiveBandwidth,
    LeaveOneOutBandwidth,
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)
from sklearn_nw.kernels import SymmetricBeta

ESTIMATORS = [
    NadarayaWatsonRegressor(),
    NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth="silverman"),
    NadarayaWatsonRegressor(kernel="exponential", bandwidth=0.5),
    NadarayaWatsonRegressor(kernel=SymmetricBeta(power=2.0)),
    NadarayaWatsonClassifier(),
    NadarayaWatsonClassifier(kernel="tricube"),
    NadarayaWatsonClassifier(kernel="linear", bandwidth="silverman"),
    NadarayaWatsonRegressor(kernel="tricube", bandwidth=2.0, algorithm="kd_tree"),
    NadarayaWatsonRegressor(compute="compiled"),
    NadarayaWatsonClassifier(kernel="biweight", bandwidth=2.0, algorithm="cell_list"),
    NadarayaWatsonRegressor(metric="precomputed", bandwidth=1.0),
    NadarayaWatsonClassifier(kernel="epanechnikov", bandwidth=3.0, n_neighbors=3,
                             metric="precomputed"),
    NadarayaWatsonRegressor(n_neighbors=5),
    NadarayaWatsonRegressor(degree=1),
    NadarayaWatsonRegressor(kernel="epanechnikov", bandwidth=3.0, degree=2),
    NadarayaWatsonClassifier(kernel="epanechnikov", n_neighbors=5, algorithm="ball_tree"),
    NadarayaWatsonRegressor(bandwidth="loo"),
    NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth("isotropic", max_iter=20)),
    NadarayaWatsonClassifier(bandwidth=LeaveOneOutBandwidth(max_iter=20)),
    NadarayaWatsonRegressor(bandwidth="loo", degree=1),
    NadarayaWatsonRegressor(bandwidth=LeaveOneOutBandwidth("isotropic", max_iter=20),
                            degree=2, bounded=True),
    NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(n_neighbors=1)),
    NadarayaWatsonRegressor(kernel="epanechnikov",
                            bandwidth=AdaptiveBandwidth("sample_point", n_neighbors=2)),
    NadarayaWatsonClassifier(kernel="tophat", bandwidth=AdaptiveBandwidth(n_neighbors=1)),
    NadarayaWatsonClassifier(bandwidth=AdaptiveBandwidth("sample_point", n_neighbors=1)),
    NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth(n_neighbors=1, scale=2.0), degree=1),
    # The defaults, as a user writes them first.
    NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth()),
    NadarayaWatsonRegressor(bandwidth=AdaptiveBandwidth("sample_point")),
    NadarayaWatsonClassifier(bandwidth=AdaptiveBandwidth()),
    NadarayaWatsonClassifier(bandwidth=AdaptiveBandwidth("sample_point")),
    NadarayaWatsonRegressorCV(),
    NadarayaWatsonRegressorCV(degree=0),
    NadarayaWatsonRegressorCV(bandwidths=(0.3, 1.0, 3.0), kernel="epanechnikov", cv=3),
    NadarayaWatsonRegressorCV(bandwidths=(0.5, 1.0, 2.0), degree="auto"),
    NadarayaWatsonClassifierCV(),
    NadarayaWatsonClassifierCV(bandwidth_kinds=["balloon", "sample_point"]),
    NadarayaWatsonClassifierCV(cv=3, scoring="accuracy"),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
