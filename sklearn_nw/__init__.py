"""Nadaraya-Watson kernel regression and classification for scikit-learn, on PyTorch."""

from ._base import EmptyNeighborhoodWarning, LocalFitWarning
from ._classification import NadarayaWatsonClassifier
from ._cv import NadarayaWatsonClassifierCV, NadarayaWatsonRegressorCV
from ._regression import NadarayaWatsonRegressor
from .bandwidth import AdaptiveBandwidth, LeaveOneOutBandwidth
from .kernels import Kernel

__version__ = "0.1.0"

__all__ = [
    "AdaptiveBandwidth",
    "EmptyNeighborhoodWarning",
    "Kernel",
    "LeaveOneOutBandwidth",
    "LocalFitWarning",
    "NadarayaWatsonClassifier",
    "NadarayaWatsonClassifierCV",
    "NadarayaWatsonRegressor",
    "NadarayaWatsonRegressorCV",
    "__version__",
]
