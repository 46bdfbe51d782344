"""The Workload record and the helpers that build each peer's version of a workload.

Every peer library is imported inside a builder, never at module level, so the workloads
load (and the tests run) with NumPy and dynexpr alone.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Builder = Callable[[], Callable]  # imports its peer library, returns the peer's function
ROW = 256  # row length of the 2-D workloads


@dataclass(frozen=True)
class Workload:
    """One benchmark: the NumPy function (also what dynexpr captures) and its peers.

    make_inputs(n, dtype, rng) returns the inputs, each with about n elements.
    numexpr is an expression over fn's parameter names, or a callable(ne, *inputs);
    None where numexpr cannot express it. torch, numba and jax are builders (zero-argument
    callables importing their library and returning the function) or None. torch and jax
    functions take tensors / jax arrays in the order of fn's parameters.
    """

    name: str
    fn: Callable
    make_inputs: Callable[[int, np.dtype, np.random.Generator], tuple]
    formula: str
    torch: Builder | None = None
    numexpr: str | Callable | None = None
    numba: Builder | None = None
    jax: Builder | None = None

    @property
    def params(self) -> tuple[str, ...]:
        return self.fn.__code__.co_varnames[: self.fn.__code__.co_argcount]


def rows_shape(n: int) -> tuple[int, int]:
    """(n / ROW, ROW): the 2-D shape with about n elements, at least one row."""
    return (max(n // ROW, 1), ROW)


def uniform(rng: np.random.Generator, lo: float, hi: float, shape, dtype) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(dtype)


def normal(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def rebind(fn: Callable, **names) -> types.FunctionType:
    """fn's code with some of its globals replaced (np -> jax.numpy, a helper -> its jitted
    form): the very same math run by another library."""
    return types.FunctionType(
        fn.__code__, {**fn.__globals__, **names}, fn.__name__, fn.__defaults__, fn.__closure__
    )


def lazy(module: str, name: str) -> Builder:
    """A builder for workloads.<module>.<name>: the module (which imports its peer library
    at the top) is imported only when the builder is called."""
    return lambda: getattr(importlib.import_module(f"{__package__}.{module}"), name)


def numba_of(fn: Callable, **helpers: Callable) -> Builder:
    """fn itself under numba (@njit(parallel=True, fastmath=False)); helpers it calls are
    jitted too and bound in its place."""

    def build() -> Callable:
        from numba import njit

        jitted = {k: njit(fastmath=False)(h) for k, h in helpers.items()}
        return njit(parallel=True, fastmath=False)(rebind(fn, **jitted))

    return build


def jax_of(fn: Callable, **helpers: Callable) -> Builder:
    """fn itself with np bound to jax.numpy (jnp mirrors NumPy's API), helpers likewise;
    the caller applies jax.jit."""

    def build() -> Callable:
        import jax.numpy as jnp

        bound = {k: rebind(h, np=jnp) for k, h in helpers.items()}
        return rebind(fn, np=jnp, **bound)

    return build
