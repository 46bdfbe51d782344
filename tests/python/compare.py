"""Comparing a captured result with plain NumPy's: types, dtypes, shapes, values; and
reading the generated unit a captured function last compiled."""

import copy
import os

import numpy as np

# Tolerances per dtype: the compiled backend may use SIMD math within the op table's ULP
# bounds and another summation order; eager must match NumPy to the last bit anyway.
TOL = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12)}


def assert_same(expected, got, path="result", tol=None):
    assert type(got) is type(expected), (
        f"{path}: type {type(got).__name__}, NumPy gives {type(expected).__name__}"
    )
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            assert_same(e, g, f"{path}[{i}]", tol)
    elif isinstance(expected, dict):
        assert list(got) == list(expected), f"{path}: keys {list(got)} != {list(expected)}"
        for k in expected:
            assert_same(expected[k], got[k], f"{path}[{k!r}]", tol)
    elif isinstance(expected, (np.ndarray, np.generic)):
        assert got.dtype == expected.dtype, (
            f"{path}: dtype {got.dtype}, NumPy gives {expected.dtype}"
        )
        assert np.shape(got) == np.shape(expected), (
            f"{path}: shape {np.shape(got)} != {np.shape(expected)}"
        )
        if expected.dtype.kind == "f":
            rtol, atol = (tol or TOL).get(expected.dtype.name, (1e-3, 1e-3))
            np.testing.assert_allclose(
                got, expected, rtol=rtol, atol=atol, equal_nan=True, err_msg=path
            )
        else:
            np.testing.assert_array_equal(got, expected, err_msg=path)
    else:
        assert got == expected or (got != got and expected != expected), (
            f"{path}: {got!r} != {expected!r}"
        )


def assert_matches_plain(fn, args, captured):
    """Calls fn and `captured` on deep copies of args: their results, and every array
    argument after the call (NumPy's mutations), must be the same. Returns the captured
    call's result and arguments."""
    expected_args, got_args = copy.deepcopy(args), copy.deepcopy(args)
    expected = fn(*expected_args)
    got = captured(*got_args)
    assert_same(expected, got)
    for e, g in zip(expected_args, got_args):
        if isinstance(e, np.ndarray):
            assert_same(e, g, "argument after the call")
    return got, got_args


def unit_source(captured) -> str:
    """The C++ text of the unit `captured` compiled for its last entry."""
    path = captured.entries[-1].compiled.path
    with open(os.path.join(os.path.dirname(path), "unit.cpp")) as fh:
        return fh.read()
