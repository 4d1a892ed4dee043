"""AttentionDisplay: the heatmap of attention weights, signed ones (local polynomials) on
a diverging colour map."""

import numpy as np
import pytest

from sklearn_nw import NadarayaWatsonRegressor
from sklearn_nw.inspection import AttentionDisplay

pytest.importorskip("matplotlib")


def _data():
    X = np.linspace(0, 5, 40)[:, None]
    return X, np.sin(X[:, 0])


def test_nonnegative_attention_is_drawn_on_a_sequential_map():
    import matplotlib.pyplot as plt

    X, y = _data()
    reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    display = AttentionDisplay.from_estimator(reg, X[::2])
    assert display.image_.get_cmap().name == "Reds"
    assert display.image_.get_array().shape == (20, 40)
    assert display.image_.get_array().min() >= 0
    plt.close(display.figure_)


def test_signed_equivalent_kernel_is_centred_on_zero():
    import matplotlib.pyplot as plt
    from matplotlib.colors import CenteredNorm, LogNorm

    X, y = _data()
    reg = NadarayaWatsonRegressor(bandwidth=0.6, degree=2).fit(X, y)
    _, attention = reg.predict(X[:5] - 0.3, return_attention=True)
    assert attention.min() < 0  # the boundary's equivalent kernel has negative weights
    display = AttentionDisplay(attention).plot()
    assert display.image_.get_cmap().name == "RdBu_r"
    assert isinstance(display.image_.norm, CenteredNorm)
    assert display.image_.norm.vcenter == 0.0
    plt.close(display.figure_)
    # A norm or a colour map given by the user is kept.
    display = AttentionDisplay(np.abs(attention) + 1e-6).plot(cmap="viridis", norm=LogNorm())
    assert display.image_.get_cmap().name == "viridis"
    assert isinstance(display.image_.norm, LogNorm)
    plt.close(display.figure_)


def test_leave_one_out_attention_and_bad_sort_by():
    import matplotlib.pyplot as plt

    X, y = _data()
    reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    display = AttentionDisplay.from_estimator(reg)  # the training set on itself
    assert display.image_.get_array().shape == (40, 40)
    plt.close(display.figure_)
    with pytest.raises(ValueError, match="sort_by"):
        AttentionDisplay.from_estimator(reg, X, sort_by="prediction")
