"""Snapshots of an estimator's state, to check that predicting changes nothing."""

import copy

import numpy as np
from numpy.testing import assert_array_equal
from sklearn.base import BaseEstimator


def snapshot(est):
    """``vars(est)``: the objects themselves, and deep copies of them."""
    return dict(vars(est)), {key: copy.deepcopy(value) for key, value in vars(est).items()}


def assert_same_state(est, shallow, deep):
    """``vars(est)`` holds the same objects as ``shallow``, with the same contents as
    ``deep``; the fitted key set (and its cell list) is compared the same way, inside."""
    now = vars(est)
    assert now.keys() == shallow.keys()
    for key, value in now.items():
        assert value is shallow[key], key
        old = deep[key]
        if isinstance(value, np.ndarray):
            assert value.dtype == old.dtype, key
            assert_array_equal(value, old, err_msg=key)
        elif isinstance(value, BaseEstimator):
            assert type(value) is type(old) and repr(value) == repr(old), key
        elif isinstance(value, tuple):  # arrays (or None) of the key set
            assert len(value) == len(old), key
            for part, old_part in zip(value, old):
                assert_array_equal(part, old_part, err_msg=key)
        elif type(value).__module__.startswith("sklearn_nw."):
            assert_same_state(value, dict(vars(value)), vars(old))
        else:
            assert value == old, key
