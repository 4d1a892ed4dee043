"""Demo behind ``make demo``: ``python -m sklearn_nw [--output PATH] [--device DEVICE]``.

Fits both estimators on data sets that scikit-learn ships (diabetes for regression; wine
and breast cancer for classification): the automatic CV estimators with default arguments
(fixed, balloon or sample-point bandwidths, and for the regression the degree, chosen by
exact leave-one-out), the bandwidth learned on the leave-one-out loss, and Scott's rule.
It prints 5-fold cross-validated scores beside scikit-learn's k-nearest-neighbors
baselines, what the automatic model chose, says on which data sets the tuned k nearest
neighbors still win (a difference within the folds' noise is a tie), and writes a heatmap
of the attention of held-out diabetes patients on the training patients.
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    StratifiedKFold,
    cross_val_score,
    train_test_split,
)
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from . import (
    NadarayaWatsonClassifier,
    NadarayaWatsonClassifierCV,
    NadarayaWatsonRegressor,
    NadarayaWatsonRegressorCV,
)

AUTOMATIC = "NW CV, automatic (default arguments)"
KNN_TUNED = "KNN, k and weights by grid search"


def _models(nw, nw_cv, knn, device):
    """The contenders for one task, each in a StandardScaler pipeline."""
    knn_name = type(knn()).__name__.lower()
    return {
        AUTOMATIC: make_pipeline(StandardScaler(), nw_cv(device=device)),
        "NW, bandwidth='loo' (learned)": make_pipeline(
            StandardScaler(), nw(bandwidth="loo", device=device)
        ),
        "NW, Scott's rule": make_pipeline(StandardScaler(), nw(device=device)),
        "KNN, k=5 (sklearn default)": make_pipeline(StandardScaler(), knn()),
        KNN_TUNED: GridSearchCV(
            make_pipeline(StandardScaler(), knn()),
            {f"{knn_name}__n_neighbors": (1, 3, 5, 10, 15, 20, 30, 50),
             f"{knn_name}__weights": ("uniform", "distance")},
        ),
    }


def report(title, X, y, models, cv, scoring):
    """Print each model's cross-validated score (and what the automatic one chooses on the
    whole data set); return the scores of the folds by name (every model on the same folds:
    ``cv`` splits alike at each call)."""
    print(f"\n{title}: n_samples={X.shape[0]}, n_features={X.shape[1]}, "
          f"5-fold CV {scoring} (mean +- std)")
    means = {}
    for name, model in models.items():
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scores = cross_val_score(model, X, y, cv=cv, scoring=scoring)
        seconds = time.perf_counter() - start
        print(f"  {name:<36} {scores.mean():.3f} +- {scores.std():.3f}   ({seconds:.1f} s)")
        means[name] = scores
        # One line per kind of warning instead of one per fold.
        for kind in sorted({w.category.__name__ for w in caught}):
            first = next(w for w in caught if w.category.__name__ == kind)
            count = sum(w.category.__name__ == kind for w in caught)
            print(f"      {count} x {kind}: {str(first.message).splitlines()[0]}")
        if name == AUTOMATIC:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                chosen = model.fit(X, y)[-1].best_params_
            print("      on all the data it chooses: " + ", ".join(
                f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in chosen.items() if k != "bandwidth"))
    return means


def verdict(results):
    """Say plainly, data set by data set, whether the automatic model or tuned k nearest
    neighbors scored higher, or neither beyond the folds' noise.

    ``results`` maps each data set to the scores of the folds by model (the same folds for
    every model). The difference of the means is a tie when it is within two standard
    errors of the folds' paired differences (their standard deviation over the square root
    of the number of folds): a one-sample difference on a test fold is noise, not a win.
    """
    print("\nThe automatic model against tuned k nearest neighbors "
          "(mean difference +- two standard errors of the folds' differences):")
    for title, scores in results.items():
        diffs = np.asarray(scores[AUTOMATIC]) - np.asarray(scores[KNN_TUNED])
        gap = float(diffs.mean())
        noise = 2.0 * float(diffs.std(ddof=1)) / np.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
        who = ("a tie within the folds' noise" if abs(gap) <= noise
               else "KNeighbors still wins" if gap < 0 else "Nadaraya-Watson wins")
        shown = round(gap, 3) + 0.0  # no "-0.000" for a difference that rounds to 0
        print(f"  {title:<32} {who} ({shown:+.3f} +- {noise:.3f})")


def heatmap(output, device):
    import matplotlib
    from matplotlib.colors import PowerNorm

    from .inspection import AttentionDisplay

    matplotlib.use("Agg")
    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=100, random_state=0)
    scaler = StandardScaler().fit(X_train)
    reg = NadarayaWatsonRegressor(bandwidth="loo", device=device)
    reg.fit(scaler.transform(X_train), y_train)
    display = AttentionDisplay.from_estimator(
        reg, scaler.transform(X_test),
        title="Diabetes: attention of 100 held-out patients on the training set\n"
              "(bandwidth learned on the leave-one-out loss; sorted by disease progression)",
        xlabel="training patients (keys), by target", ylabel="held-out patients, by prediction",
        norm=PowerNorm(gamma=0.4),  # a few large weights would wash out the rest
    )
    display.figure_.set_size_inches(8, 6)
    display.figure_.tight_layout()
    display.figure_.savefig(output, dpi=120)
    print(f"\nWrote the attention heatmap to {output}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sklearn_nw",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--output", default="nw_attention.png", help="heatmap PNG path")
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda, mps, auto")
    args = parser.parse_args(argv)

    X, y = load_diabetes(return_X_y=True)
    results = {"Diabetes (regression)": report(
        "Diabetes (regression)", X, y,
        _models(NadarayaWatsonRegressor, NadarayaWatsonRegressorCV, KNeighborsRegressor,
                args.device),
        KFold(5, shuffle=True, random_state=0), "r2")}
    for title, loader in [("Wine (classification)", load_wine),
                          ("Breast cancer (classification)", load_breast_cancer)]:
        X, y = loader(return_X_y=True)
        results[title] = report(title, X, y,
                                 _models(NadarayaWatsonClassifier, NadarayaWatsonClassifierCV,
                                         KNeighborsClassifier, args.device),
                                 StratifiedKFold(5, shuffle=True, random_state=0), "accuracy")
    verdict(results)
    heatmap(args.output, args.device)


if __name__ == "__main__":
    main()
