"""The engine's bounded memory and its path-independence, checked through its chunk logic."""

import numpy as np
import pytest
import sklearn
import torch
from numpy.testing import assert_allclose

from sklearn_nw import NadarayaWatsonClassifier, NadarayaWatsonRegressor, _engine, _workers
from sklearn_nw.kernels import Epanechnikov, Gaussian


@pytest.mark.parametrize("n_rows, row_bytes, working_memory",
                         [(10_000, 80_000, 1024), (10_000, 8, 1), (5, 10, 1024), (100, 2**30, 1)])
def test_chunks_fit_in_working_memory(n_rows, row_bytes, working_memory):
    rows = _engine.chunk_rows(n_rows, row_bytes, working_memory)
    assert 1 <= rows <= n_rows
    # Within the budget, unless a single row is already larger than it.
    assert rows * row_bytes <= working_memory * 2**20 or rows == 1


def test_blocks_stay_small_while_predicting(monkeypatch):
    """Every (rows, n) block the dense engine builds holds at most the cache-sized chunk."""
    sizes = []
    real_exp = _engine.exp_

    def spy(logits, exact_zeros=True):
        sizes.append(logits.numel() * logits.element_size())
        return real_exp(logits, exact_zeros)

    monkeypatch.setattr(_engine, "exp_", spy)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30_000, 3)).astype(np.float32)
    NadarayaWatsonRegressor().fit(X, X[:, 0]).predict(X[:2_000])
    assert sizes and max(sizes) <= _workers.CACHE_BYTES
    assert sum(s // (X.shape[0] * 4) for s in sizes) == 2_000  # every query row, once


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "exponential"])
def test_chunking_changes_nothing(kernel, dense):
    rng = np.random.default_rng(1)
    X, Q = rng.standard_normal((300, 2)), rng.standard_normal((50, 2))
    y = np.sin(X[:, 0])
    reg = NadarayaWatsonRegressor(kernel, bandwidth=1.5).fit(X, y)
    expected, attention = reg.predict(Q, return_attention=True)
    with sklearn.config_context(working_memory=0.001):  # one query row per chunk
        got = reg.predict(Q)
    assert_allclose(got, expected, rtol=1e-12)
    # The dense attention asked for must fit in working_memory: chunks of 29 rows.
    with sklearn.config_context(working_memory=0.2):
        got, got_attention = reg.predict(Q, return_attention=True)
    assert_allclose(got, expected, rtol=1e-12)
    assert_allclose(dense(got_attention), dense(attention), rtol=1e-12, atol=1e-15)


def test_attention_pool_directly_matches_a_dense_softmax():
    torch.manual_seed(0)
    q, x = torch.randn(40, 3, dtype=torch.float64), torch.randn(70, 3, dtype=torch.float64)
    v = torch.randn(70, 2, dtype=torch.float64)
    h = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    result = _engine.attention_pool(q, x, v, h, Gaussian(), return_attention=True)
    d2 = (((q[:, None] - x[None]) / h) ** 2).sum(-1)
    a = torch.softmax(-0.5 * d2, dim=1)
    assert_allclose(result.attention.numpy(), a.numpy(), rtol=1e-10, atol=1e-15)
    assert_allclose(result.out.numpy(), (a @ v).numpy(), rtol=1e-10)
    # A compact kernel returns CSR parts whose rows sum to 1.
    crow, _, val = _engine.attention_pool(q, x, v, h * 3, Epanechnikov(),
                                          return_attention=True).attention
    sums = torch.zeros(40, dtype=torch.float64).index_add_(
        0, torch.repeat_interleave(torch.arange(40), crow[1:] - crow[:-1]), val)
    assert_allclose(sums.numpy(), 1.0)


def test_classifier_probabilities_are_exactly_zero_without_attention():
    X = np.array([[0.0], [0.1], [10.0]])
    y = ["a", "a", "b"]
    proba = NadarayaWatsonClassifier(bandwidth=0.05).fit(X, y).predict_proba([[0.05]])
    assert proba[0, 1] == 0.0 and proba[0, 0] == 1.0
