"""A slow, obviously-correct Nadaraya-Watson for the tests to compare against.

Plain Python loops over (query, training point) pairs and the textbook kernel formulas, with
no log space, no chunking and no torch: nothing here shares code with ``sklearn_nw``.
"""

import math

import numpy as np


def gaussian(u):
    return math.exp(-u * u / 2.0)


def epanechnikov(u):
    return 1.0 - u * u if u <= 1.0 else 0.0


def tophat(u):
    return 1.0 if u <= 1.0 else 0.0


def linear(u):
    return max(0.0, 1.0 - u)


def tricube(u):
    return (1.0 - u**3) ** 3 if u <= 1.0 else 0.0


def triweight(u):
    return (1.0 - u * u) ** 3 if u <= 1.0 else 0.0


def biweight(u):
    return (1.0 - u * u) ** 2 if u <= 1.0 else 0.0


def cosine(u):
    return math.cos(math.pi * u / 2.0) if u < 1.0 else 0.0


def exponential(u):
    return math.exp(-u)


def constant(u):
    return 1.0


# Every name the package accepts, aliases included, with its textbook profile.
PROFILES = {
    "gaussian": gaussian,
    "epanechnikov": epanechnikov,
    "tophat": tophat,
    "boxcar": tophat,
    "uniform": tophat,
    "linear": linear,
    "triangular": linear,
    "tricube": tricube,
    "triweight": triweight,
    "biweight": biweight,
    "quartic": biweight,
    "cosine": cosine,
    "exponential": exponential,
    "laplacian": exponential,
    "constant": constant,
}

COMPACT = {
    "epanechnikov", "tophat", "boxcar", "uniform", "linear", "triangular", "tricube",
    "triweight", "biweight", "quartic", "cosine",
}


def scaled_distance(q, x, h):
    """``||(q - x) / h||`` with one bandwidth per feature."""
    return math.sqrt(sum(((qk - xk) / hk) ** 2 for qk, xk, hk in zip(q, x, h)))


def nw_weights(Q, X, h, profile, sample_weight=None, leave_one_out=False):
    """Attention matrix ``A[i, j] = w_j k(u_ij) / sum_l w_l k(u_il)``.

    With ``leave_one_out`` (Q is X) query i gives no weight to its own point and to every
    training point at the same input: all the mass at its location is left out.
    """
    Q = np.asarray(Q, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    h = np.broadcast_to(np.asarray(h, dtype=np.float64), (d,))
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    A = np.zeros((Q.shape[0], n))
    for i in range(Q.shape[0]):
        for j in range(n):
            w_j = 0.0 if leave_one_out and np.array_equal(Q[i], X[j]) else w[j]
            A[i, j] = w_j * profile(scaled_distance(Q[i], X[j], h))
        total = A[i].sum()
        assert total > 0, f"oracle: query {i} has no training point inside the support"
        A[i] /= total
    return A


def nw_predict(Q, X, Y, h, profile, sample_weight=None):
    """``sum_j A[i, j] Y[j]`` for targets of shape (n,) or (n, t)."""
    A = nw_weights(Q, X, h, profile, sample_weight)
    Y = np.asarray(Y, dtype=np.float64)
    out = np.zeros((A.shape[0],) + Y.shape[1:])
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            out[i] += A[i, j] * Y[j]
    return out


def nw_class_proba(Q, X, labels, classes, h, profile, sample_weight=None):
    """Attention-weighted class frequencies, columns in the order of ``classes``."""
    A = nw_weights(Q, X, h, profile, sample_weight)
    classes = list(classes)
    P = np.zeros((A.shape[0], len(classes)))
    for i in range(A.shape[0]):
        for j, label in enumerate(labels):
            P[i, classes.index(label)] += A[i, j]
    return P


def nearest_index(q, X):
    """Index of the training point nearest to q (Euclidean), by numpy argmin."""
    diff = np.asarray(X, dtype=np.float64) - np.asarray(q, dtype=np.float64)
    return int(np.argmin((diff * diff).sum(axis=1)))


def kth_distance(q, X, h, k, sample_weight, skip_location=False):
    """The distance from q at which the nearest training rows hold k units of weight
    (weights count as repeated rows); with ``skip_location`` rows at q itself do not
    count."""
    pairs = sorted((scaled_distance(q, x, h), w) for x, w in zip(X, sample_weight)
                   if w > 0 and not (skip_location and np.array_equal(q, x)))
    held = 0.0
    for u, w in pairs:
        held += w
        if held >= k - 1e-9:
            return u
    raise AssertionError("oracle: fewer than k units of weight")


def adaptive_weights(Q, X, h, profile, kind, k, c, sample_weight=None):
    """Attention of adaptive bandwidths: ``w_j k(u_ij / (c d_k(q_i)))`` (balloon) or
    ``w_j h_j^-d k(u_ij / h_j)`` with ``h_j = c d_k(x_j)`` over the other locations
    (sample-point); a row with no mass goes to its nearest row(s) in the adaptive metric,
    weighted alike."""
    Q = np.asarray(Q, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    key_h = [c * kth_distance(x, X, h, k, w, skip_location=True) for x in X]
    A = np.zeros((Q.shape[0], n))
    for i, q in enumerate(Q):
        ratio, weight = np.full(n, np.inf), np.zeros(n)
        query_h = c * kth_distance(q, X, h, k, w) if kind == "balloon" else None
        for j in range(n):
            if w[j] <= 0:
                continue
            width = query_h if kind == "balloon" else key_h[j]
            u = scaled_distance(q, X[j], h)
            ratio[j] = u / width if width > 0 else (0.0 if u == 0 else np.inf)
            weight[j] = w[j] if kind == "balloon" else w[j] * width ** -d
            A[i, j] = weight[j] * profile(ratio[j])
        if A[i].sum() == 0:
            A[i] = np.where(ratio == ratio.min(), weight, 0.0)
        A[i] /= A[i].sum()
    return A
