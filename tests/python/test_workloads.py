"""The peer benchmark's workloads (bench/python/workloads/), captured on both backends,
give NumPy's results: values, dtype, shape, result type. The benchmark's numbers mean
something only if dynexpr computes the same thing as the NumPy it is timed against."""

import os
import sys

import numpy as np
import pytest

import dynexpr
from compare import assert_same

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "python"))
from workloads import REGISTRY  # noqa: E402

N = 1001  # not a multiple of any SIMD width: the tail loop runs too (2-D: 3 rows of 256)


# float64 on the compiled backend is the corpus's job (test_corpus.py); here it would add
# a dozen compiles to CI for the same code paths.
CASES = [("float32", "eager"), ("float64", "eager"), ("float32", "cpu")]


@pytest.mark.parametrize("dtype,backend", CASES, ids=[f"{d}-{b}" for d, b in CASES])
@pytest.mark.parametrize("workload", REGISTRY, ids=[w.name for w in REGISTRY])
def test_workload_matches_numpy(workload, dtype, backend):
    args = workload.make_inputs(N, np.dtype(dtype), np.random.default_rng(0))
    expected = workload.fn(*args)
    captured = dynexpr.capture(workload.fn, backend=backend)
    assert_same(expected, captured(*args))
    assert_same(expected, captured(*args), "result of the second call (cache hit)")
    info = captured.cache_info()
    assert (info.entries, info.hits) == (1, 1), f"{workload.name}: {info}"
    # A graph break would run plain NumPy and pass the comparison without testing anything.
    assert dynexpr.explain(workload.fn, *args).graph_break_count == 0
