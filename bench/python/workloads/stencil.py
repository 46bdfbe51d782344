"""Stencils through overlapping slices of one input: a fused kernel reads x once where
NumPy reads it three times and writes two temporaries."""

from __future__ import annotations

from .base import Workload, jax_of, lazy, normal, numba_of


def stencil3(x):
    return 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]


def _stencil3_numexpr(ne, x):
    return ne.evaluate("0.25 * a + 0.5 * b + 0.25 * c",
                       local_dict={"a": x[:-2], "b": x[1:-1], "c": x[2:]})


def _one(n, dtype, rng):
    return (normal(rng, n, dtype),)


WORKLOADS = [
    Workload("stencil3", stencil3, _one, "0.25*x[:-2] + 0.5*x[1:-1] + 0.25*x[2:]",
             torch=lazy("torch_versions", "stencil3"), numexpr=_stencil3_numexpr,
             numba=numba_of(stencil3), jax=jax_of(stencil3)),
]
