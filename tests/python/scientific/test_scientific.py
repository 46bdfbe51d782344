"""The scientific corpus (sci_*.py), captured, matches plain NumPy: values (with the
dtype's tolerance), dtypes, shapes, result types and the caller's arrays after the call,
each side given its own copies of the arguments. Two calls each: the first translates
and compiles, the second takes the installed entry (or its resume points). The graph and
break counts (dynexpr.explain) and the first call's time are recorded per function and
printed at the end of the run (tests/python/conftest.py)."""

import copy
import time

import numpy as np
import pytest
from sci_registry import all_cases, assert_close

import dynexpr

CASES = all_cases()


def _param(c):
    marks = [pytest.mark.xfail(strict=True, reason=f"issue 13: {c.xfail}")] if c.xfail else []
    return pytest.param(c, id=c.name, marks=marks)


def _call_and_compare(c, captured, args):
    plain_args, captured_args = copy.deepcopy(args), copy.deepcopy(args)
    expected = c.fn(*plain_args)
    t = time.perf_counter()
    got = captured(*captured_args)
    seconds = time.perf_counter() - t
    assert_close(expected, got, "result", c.tol)
    for i, (e, g) in enumerate(zip(plain_args, captured_args)):
        if isinstance(e, np.ndarray):
            assert_close(e, g, f"argument {i} after the call", c.tol)
    return seconds


@pytest.mark.parametrize("c", [_param(c) for c in CASES])
def test_matches_numpy(c, backend, record_property):
    args = c.test(np.random.default_rng(2026))
    captured = dynexpr.capture(c.fn, backend=backend)
    first = _call_and_compare(c, captured, args)
    _call_and_compare(c, captured, args)
    ex = dynexpr.explain(c.fn, *copy.deepcopy(args))
    record_property("scientific", (c.name, backend, ex.graph_count, ex.graph_break_count,
                                   round(first, 3)))


def test_corpus_covers_the_styles():
    kinds = {c.kind for c in CASES}
    assert len(CASES) >= 25, len(CASES)
    assert {"stencil", "solve", "factor", "matrix", "recurrence", "binning", "bytes", "cnn",
            "nbody", "recursive"} <= kinds, kinds
    assert len({c.name for c in CASES}) == len(CASES), "two cases share a name"
