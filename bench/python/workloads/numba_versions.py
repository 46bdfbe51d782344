"""numba versions of the row workloads, which numba cannot take as NumPy code (it has no
keepdims): one prange over the rows. The others are the NumPy functions themselves under
@njit (base.numba_of). Imports numba: load it only through base.lazy."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, fastmath=False)
def softmax_rows(x):
    out = np.empty_like(x)
    for i in prange(x.shape[0]):
        e = np.exp(x[i] - np.max(x[i]))
        out[i] = e / np.sum(e)
    return out


@njit(parallel=True, fastmath=False)
def layernorm_rows(x):
    out = np.empty_like(x)
    for i in prange(x.shape[0]):
        d = x[i] - np.mean(x[i])
        out[i] = d / np.sqrt(np.mean(d * d) + 1e-5)
    return out


@njit(parallel=True, fastmath=False)
def logsumexp_rows(x):
    out = np.empty(x.shape[0], x.dtype)
    for i in prange(x.shape[0]):
        m = np.max(x[i])
        out[i] = np.log(np.sum(np.exp(x[i] - m))) + m
    return out


@njit(parallel=True, fastmath=False)
def normalise_rows(x):
    out = np.empty_like(x)
    for i in prange(x.shape[0]):
        out[i] = x[i] / np.sum(x[i])
    return out
