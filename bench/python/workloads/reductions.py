"""Reductions: over all elements, or over each row of a 2-D array (rows of base.ROW) with
the result broadcast back, where a fused kernel keeps the row in cache between passes."""

from __future__ import annotations

import numpy as np

from .base import Workload, jax_of, lazy, normal, numba_of, rows_shape, uniform


def sum_squares(x):
    return np.sum(x * x)


def softmax_rows(x):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def layernorm_rows(x):
    d = x - np.mean(x, axis=1, keepdims=True)
    return d / np.sqrt(np.mean(d * d, axis=1, keepdims=True) + 1e-5)


def logsumexp_rows(x):
    m = np.max(x, axis=1, keepdims=True)
    return (np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)) + m)[:, 0]


def normalise_rows(x):
    return x / x.sum(axis=1, keepdims=True)


def _flat(n, dtype, rng):
    return (normal(rng, n, dtype),)


def _rows(n, dtype, rng):
    return (normal(rng, rows_shape(n), dtype),)


def _positive_rows(n, dtype, rng):
    # Positive, so that no row sum is near zero and the quotient is well conditioned.
    return (uniform(rng, 0.1, 1.0, rows_shape(n), dtype),)


# numexpr has no reduction that keeps an axis (its sum/prod must be the outermost call,
# with no broadcast back), so the row workloads have no numexpr version.
WORKLOADS = [
    Workload("sum_squares", sum_squares, _flat, "sum(x*x)",
             torch=lazy("torch_versions", "sum_squares"), numexpr="sum(x * x)",
             numba=numba_of(sum_squares), jax=jax_of(sum_squares)),
    Workload("softmax_rows", softmax_rows, _rows, "e = exp(x - max_row(x)); e / sum_row(e)",
             torch=lazy("torch_versions", "softmax_rows"),
             numba=lazy("numba_versions", "softmax_rows"), jax=jax_of(softmax_rows)),
    Workload("layernorm_rows", layernorm_rows, _rows, "(x - mean_row) / sqrt(var_row + 1e-5)",
             torch=lazy("torch_versions", "layernorm_rows"),
             numba=lazy("numba_versions", "layernorm_rows"), jax=jax_of(layernorm_rows)),
    Workload("logsumexp_rows", logsumexp_rows, _rows, "log(sum_row(exp(x - m))) + m",
             torch=lazy("torch_versions", "logsumexp_rows"),
             numba=lazy("numba_versions", "logsumexp_rows"), jax=jax_of(logsumexp_rows)),
    Workload("normalise_rows", normalise_rows, _positive_rows, "x / sum_row(x)",
             torch=lazy("torch_versions", "normalise_rows"),
             numba=lazy("numba_versions", "normalise_rows"), jax=jax_of(normalise_rows)),
]
