"""The scientific corpus (issue 13, "A corpus of your own"): NumPy functions written the
way a scientist writes them — time loops with slice updates, element-by-element solves,
per-step `.item()`, np.linalg calls, Python recursion — not the way dynexpr's own tests
are written. Each case has two argument makers: `test` (small sizes, short trip counts,
so the whole corpus compiles in minutes while loops still unroll into the graph) and
`bench` (realistic sizes and trip counts, bench/python/scientific_bench.py) with
`quick` (a tenth of those trip counts, for the bench's --quick)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from compare import TOL, assert_same


@dataclass
class SciCase:
    fn: Callable
    test: Callable  # rng -> argument tuple (small)
    bench: Callable  # rng -> argument tuple (realistic)
    kind: str
    quick: Callable | None = None  # rng -> arguments for the bench's --quick (default: bench)
    tol: dict | None = None  # dtype name -> (rtol, atol); None: compare.TOL
    xfail: str | None = None  # reason (issue 13) when captured fails where plain succeeds

    @property
    def name(self) -> str:
        return self.fn.__name__


CASES: list[SciCase] = []

# Loops over reductions, transcendental functions and matmul may sum in another order
# (SIMD lanes, Eigen's blocking) than NumPy: float64 then agrees to ~1e-13 relative,
# which long time loops amplify a little.
LOOSE = {"float32": (2e-4, 2e-5), "float64": (1e-8, 1e-10)}


def case(kind: str, test: Callable, bench: Callable, quick: Callable | None = None,
         tol: dict | None = None, xfail: str | None = None):
    def register(fn):
        CASES.append(SciCase(fn, test, bench, kind, quick, tol, xfail))
        return fn

    return register


def grid(rng, *shape, dtype=np.float64):
    return rng.random(shape).astype(dtype)


def spd(rng, n):
    """A well-conditioned symmetric positive definite matrix."""
    a = rng.standard_normal((n, n))
    return a @ a.T / n + np.eye(n)


def assert_close(expected, got, path, tol):
    """compare.assert_same, except that Python floats (a `float(np.sum(...))` or an
    `.item()`) get the dtype's tolerance too: the compiled sum may add in another order."""
    if type(expected) is float and type(got) is float:
        rtol, atol = (tol or TOL)["float64"]
        assert math.isclose(got, expected, rel_tol=rtol, abs_tol=atol), (
            f"{path}: {got!r} != {expected!r}")
    elif isinstance(expected, (tuple, list)) and type(got) is type(expected):
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            assert_close(e, g, f"{path}[{i}]", tol)
    else:
        assert_same(expected, got, path, tol)


def all_cases() -> list[SciCase]:
    import sci_linalg  # noqa: F401  (each module registers its cases)
    import sci_models  # noqa: F401
    import sci_signals  # noqa: F401
    import sci_stencils  # noqa: F401

    return CASES
