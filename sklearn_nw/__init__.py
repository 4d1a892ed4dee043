"""Nadaraya-Watson kernel regression and classification for scikit-learn, on PyTorch."""

from ._base import EmptyNeighborhoodWarning
from ._classification import NadarayaWatsonClassifier
from ._regression import NadarayaWatsonRegressor
from .kernels import Kernel

__version__ = "0.1.0"

__all__ = [
    "NadarayaWatsonRegressor",
    "NadarayaWatsonClassifier",
    "Kernel",
    "EmptyNeighborhoodWarning",
    "__version__",
]
