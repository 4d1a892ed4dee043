"""What leaving one out means, written once (sklearn_nw._leave_one_out) and shared by the
local estimators, the engines and the Dask tasks; the losses' weighted mean and spread."""

import math

import numpy as np
import pytest
import torch

from sklearn_nw._dask_tasks import (
    Locations,
    ShardSettings,
    location_sums,
    merge_distinct,
    merge_locations,
)
from sklearn_nw._dask_tasks import distinct_inputs as block_distinct_inputs
from sklearn_nw._engine_loo import loo_logits
from sklearn_nw._leave_one_out import (
    distinct_inputs,
    leave_one_out_set,
    nearest_keys,
    other_keys,
    self_logits,
    set_self_,
)
from sklearn_nw._losses import LOG_LOSS, SQUARED_ERROR
from sklearn_nw.kernels import Epanechnikov, Exponential, Gaussian


def _same_bytes(a, b):
    """Equal values and equal signs of zero (np.array_equal says -0.0 == 0.0)."""
    return np.array_equal(a, b) and np.array_equal(np.signbit(a), np.signbit(b))


# -- distinct inputs: -0.0 and 0.0 are one input, stored as 0.0 -------------------------


def test_distinct_inputs_merge_signed_zeros_and_keep_positive_weight():
    X = np.array([[-0.0, 1.0], [0.0, 1.0], [2.0, -0.0], [2.0, 0.0], [3.0, 3.0]])
    w = np.array([1.0, 2.0, 0.5, 0.0, 0.0])
    inputs, inverse = distinct_inputs(X)
    assert _same_bytes(inputs, np.array([[0.0, 1.0], [2.0, 0.0], [3.0, 3.0]]))
    np.testing.assert_array_equal(inverse, [0, 0, 1, 1, 2])
    np.testing.assert_array_equal(inputs[inverse], X)  # -0.0 == 0.0
    inputs, inverse = distinct_inputs(X, w)
    assert _same_bytes(inputs, np.array([[0.0, 1.0], [2.0, 0.0]]))
    np.testing.assert_array_equal(inverse, [0, 0, 1])  # the rows of positive weight
    # The Dask task counts what the local estimators count.
    assert _same_bytes(block_distinct_inputs(X, w), inputs)


@pytest.mark.parametrize("minus_first", [True, False])
def test_union_of_blocks_is_the_local_distinct_inputs(minus_first):
    # One block holds -0.0 where another holds 0.0: one input, as the local estimator has
    # it, whichever block comes first.
    a, b = np.array([[-0.0, 1.0], [2.0, 2.0]]), np.array([[0.0, 1.0]])
    if not minus_first:
        a, b = b, a
    merged = merge_distinct(a, b)
    local, _ = distinct_inputs(np.concatenate([a, b]))
    assert merged.shape == (2, 2)
    assert _same_bytes(merged, local)
    assert not np.signbit(merged).any()


@pytest.mark.parametrize("minus_first", [True, False])
def test_merged_locations_are_the_local_leave_one_out_set(minus_first):
    # Two blocks' Locations at the same input, one stored at -0.0 and one at 0.0: one
    # location, with the summed weight and sums, stored as the local estimator stores it.
    minus = Locations(np.array([[-0.0, 1.0]]), np.array([2.0]), np.array([[4.0]]), 8.0)
    plus = Locations(np.array([[0.0, 1.0], [3.0, 1.0]]), np.array([1.0, 1.0]),
                     np.array([[1.0], [5.0]]), 26.0)
    a, b = (minus, plus) if minus_first else (plus, minus)
    merged = merge_locations(a, b)
    assert _same_bytes(merged.X, np.array([[0.0, 1.0], [3.0, 1.0]]))
    np.testing.assert_array_equal(merged.weight, [3.0, 1.0])
    np.testing.assert_array_equal(merged.sums, [[5.0], [5.0]])
    assert merged.sum_sq == 34.0


def test_block_locations_merged_equal_the_local_leave_one_out_set():
    # Rows split over two blocks, -0.0 in one and 0.0 in the other at the same inputs.
    rng = np.random.default_rng(0)
    X = rng.integers(-1, 2, size=(40, 2)).astype(np.float64) * 0.5
    X[X == 0] = np.where(rng.random(np.count_nonzero(X == 0)) < 0.5, -0.0, 0.0)
    y = rng.normal(size=40)
    w = rng.integers(0, 3, 40).astype(np.float64)
    spec = ShardSettings(Gaussian(), None, np.zeros(2), np.dtype(np.float64), None,
                         np.zeros(1), 1.0, True, 1024)
    blocks = [location_sums(X[s], y[s], w[s], spec, False)
              for s in (slice(0, 17), slice(17, 40))]
    merged = merge_locations(*blocks)
    loo = leave_one_out_set(X, y[:, None], w)
    positive = loo.weight > 0
    assert _same_bytes(merged.X, loo.X[positive])
    np.testing.assert_allclose(merged.weight, loo.weight[positive], rtol=1e-15)
    np.testing.assert_allclose(merged.sums / merged.weight[:, None], loo.values[positive],
                               rtol=1e-13)


# -- self-exclusion and the nearest-key fallback -----------------------------------------


def test_set_self_writes_each_query_entry_for_its_own_key():
    block = torch.zeros(2, 3, 5)  # (g, b, n): 3 queries, keys 4, 0 and 2
    rows = torch.tensor([4, 0, 2])
    assert set_self_(block, rows, 7.0) is block
    expected = torch.zeros(2, 3, 5)
    expected[:, 0, 4] = expected[:, 1, 0] = expected[:, 2, 2] = 7.0
    assert torch.equal(block, expected)


def test_self_logits_are_the_kernel_at_zero_plus_the_weight_kept():
    self_log_w = torch.tensor([-math.inf, math.log(2.0), 0.0], dtype=torch.float64)
    rows = torch.tensor([2, 0, 1])
    kernel = Exponential()
    # The exponential's log-profile at 0 is -1e-154, not 0 (a smooth sqrt): exactly that.
    at_zero = kernel.log_profile_sq(torch.zeros(1, dtype=torch.float64))
    got = self_logits(kernel, self_log_w, rows)
    assert torch.equal(got, at_zero + torch.tensor([0.0, -math.inf, math.log(2.0)],
                                                   dtype=torch.float64))


def test_other_keys_leave_out_the_query_and_keys_without_weight():
    positive = torch.tensor([True, True, False, True])
    expected = torch.tensor([[True, False, False, True], [False, True, False, True]])
    assert torch.equal(other_keys(positive, torch.tensor([1, 0])), expected)


def test_nearest_keys_keep_every_tie_among_the_eligible():
    d2 = torch.tensor([[0.0, 2.0, 1.0, 1.0, 5.0],
                       [3.0, math.inf, 3.0, math.inf, 0.5],
                       [math.inf, math.inf, math.inf, math.inf, 1.0]])
    eligible = torch.tensor([[False, True, True, True, True],  # the query is key 0
                             [True, True, True, True, False],
                             [True, True, True, False, False]])
    nearest, distance = nearest_keys(d2, eligible)
    assert torch.equal(nearest, torch.tensor([[False, False, True, True, False],
                                              [True, False, True, False, False],
                                              [True, True, True, False, False]]))
    # Every eligible key infinitely far: all of them, tied at infinity.
    assert torch.equal(distance, torch.tensor([1.0, 3.0, math.inf]))


def test_a_left_out_query_with_every_other_key_infinitely_far_never_attends_itself():
    # Key 0's distances to every other key overflowed: its fallback is those keys, tied,
    # by weight, and never itself (every copy of a point leaves with it).
    d2 = torch.tensor([[0.0, math.inf, math.inf, math.inf],
                       [math.inf, 0.0, 4.0, 9.0]], dtype=torch.float64)
    log_w = torch.log(torch.tensor([1.0, 1.0, 3.0, 0.0], dtype=torch.float64))
    self_log_w = torch.full((4,), -math.inf, dtype=torch.float64)
    rows = torch.tensor([0, 1])
    logits = loo_logits(None, None, Epanechnikov(), log_w, self_log_w, rows, d2=d2)
    attention = torch.softmax(logits, dim=1)
    expected = torch.tensor([[0.0, 0.25, 0.75, 0.0], [0.0, 0.0, 1.0, 0.0]],
                            dtype=torch.float64)
    torch.testing.assert_close(attention, expected, rtol=1e-15, atol=0.0)


# -- the weighted mean and the spread of the losses ---------------------------------------


@pytest.mark.parametrize("loss", [SQUARED_ERROR, LOG_LOSS])
def test_weighted_mean_and_its_shares(loss):
    rng = np.random.default_rng(1)
    per_row = torch.as_tensor(rng.uniform(size=(3, 50)))  # (G, m)
    w = torch.as_tensor(rng.integers(0, 4, 50).astype(np.float64))
    expected = [sum(float(w[i]) * float(p[i]) for i in range(50)) / float(w.sum())
                for p in per_row]
    np.testing.assert_allclose(loss.weighted_mean(per_row, w).numpy(), expected, rtol=1e-14)
    # The shares of chunks of rows in the mean over all rows add up to it.
    shares = sum(loss.weighted_mean(per_row[:, s : s + 16], w[s : s + 16], w.sum())
                 for s in range(0, 50, 16))
    np.testing.assert_allclose(shares.numpy(), expected, rtol=1e-14)
    np.testing.assert_allclose(loss.weighted_sum(per_row, w).numpy(),
                               np.array(expected) * float(w.sum()), rtol=1e-14)


@pytest.mark.parametrize("loss", [SQUARED_ERROR, LOG_LOSS])
def test_spread_is_the_weighted_variance_of_the_values(loss):
    rng = np.random.default_rng(2)
    values = rng.normal(size=(30, 2))
    w = rng.integers(0, 4, 30).astype(np.float64)
    mean = np.average(values, axis=0, weights=w)
    expected = np.average(((values - mean) ** 2).sum(1), weights=w)
    got = float(loss.spread(torch.as_tensor(values), torch.as_tensor(w)))
    assert got == pytest.approx(expected, rel=1e-13)
    # Integer weights are repeated rows.
    repeated = float(loss.spread(torch.as_tensor(np.repeat(values, w.astype(int), axis=0)),
                                 torch.ones(int(w.sum()), dtype=torch.float64)))
    assert got == pytest.approx(repeated, rel=1e-13)
