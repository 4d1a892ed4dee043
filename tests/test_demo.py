"""The demo behind ``make demo``: its report lines and its heatmap."""

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier

from sklearn_nw import NadarayaWatsonClassifier
from sklearn_nw.__main__ import AUTOMATIC, KNN_TUNED, heatmap, report, verdict

pytest.importorskip("matplotlib")


def test_report_prints_one_line_per_model(capsys):
    X, y = load_wine(return_X_y=True)
    models = {"NW": NadarayaWatsonClassifier(bandwidth=200.0), "KNN": KNeighborsClassifier()}
    report("Wine", X, y, models, StratifiedKFold(3), "accuracy")
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("Wine: n_samples=178, n_features=13")
    scores = {line.split()[0]: float(line.split()[1]) for line in out[2:]}
    returned = report("Wine", X, y, models, StratifiedKFold(3), "accuracy")
    assert {name: len(s) for name, s in returned.items()} == {"NW": 3, "KNN": 3}
    assert set(scores) == {"NW", "KNN"}
    assert all(0.0 <= s <= 1.0 for s in scores.values())


def test_heatmap_is_written(tmp_path):
    from matplotlib.image import imread

    path = tmp_path / "attention.png"
    heatmap(str(path), "cpu")
    image = imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 400
    assert np.ptp(image[..., :3]) > 0.5  # not a blank figure


def test_verdict_says_where_k_nearest_neighbors_still_win(capsys):
    # Paired differences per fold: A and B -0.1 and +0.1 (two standard errors 0.009), C +0.02
    # with folds that disagree (0.12, -0.08, 0.12, -0.08, 0.02: two standard errors 0.089).
    verdict({
        "A": {AUTOMATIC: [0.50, 0.51, 0.49, 0.50, 0.50], KNN_TUNED: [0.60, 0.60, 0.60, 0.61, 0.59]},
        "B": {AUTOMATIC: [0.90, 0.91, 0.89, 0.90, 0.90], KNN_TUNED: [0.80, 0.80, 0.80, 0.81, 0.79]},
        "C": {AUTOMATIC: [0.82, 0.72, 0.82, 0.72, 0.72], KNN_TUNED: [0.70, 0.80, 0.70, 0.80, 0.70]},
    })
    out = capsys.readouterr().out.splitlines()
    lines = {line.split()[0]: line for line in out[1:]}
    assert "KNeighbors still wins (-0.100 +- 0.009)" in lines["A"]
    assert "Nadaraya-Watson wins (+0.100 +- 0.009)" in lines["B"]
    assert "a tie within the folds' noise (+0.020 +- 0.089)" in lines["C"]
