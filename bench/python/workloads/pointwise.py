"""Pointwise workloads: each output element depends on the same element of each input,
so a fused kernel reads every input once and writes the output once."""

from __future__ import annotations

import numpy as np

from .base import Workload, jax_of, lazy, normal, numba_of, uniform

RATE, VOL = 0.02, 0.3  # Black-Scholes: risk-free rate and volatility
EARTH_KM = 6371.0


def affine(x):
    return ((x * 1.5 + 0.5) * 0.75 - 0.25) * 2.0 + 1.0


def tanh_chain(x, y):
    return np.tanh(x * 2.0 + y) * 0.5 + x * y


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def clip_scale(x):
    return np.clip(x, -1.0, 1.0) * 3.0


def normal_cdf(d):
    """The standard normal CDF through tanh (the GELU approximation, ~1e-3 absolute)."""
    return 0.5 * (1.0 + np.tanh(0.7978845608 * (d + 0.044715 * d * d * d)))


def black_scholes(s, k, t):
    """European call price for spot s, strike k, years to expiry t."""
    vol_t = VOL * np.sqrt(t)
    d1 = (np.log(s / k) + (RATE + 0.5 * VOL * VOL) * t) / vol_t
    d2 = d1 - vol_t
    return s * normal_cdf(d1) - k * np.exp(-RATE * t) * normal_cdf(d2)


def haversine(lat1, lon1, lat2, lon2):
    """Great-circle distance in km between points given in radians."""
    a = np.sin((lat2 - lat1) * 0.5) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin(
        (lon2 - lon1) * 0.5
    ) ** 2
    return 2.0 * EARTH_KM * np.arcsin(np.sqrt(a))


def _cdf_ne(d: str) -> str:
    return f"(0.5 * (1.0 + tanh(0.7978845608 * (({d}) + 0.044715 * ({d})**3))))"


_D1 = f"(log(s / k) + {RATE + 0.5 * VOL * VOL!r} * t) / ({VOL!r} * sqrt(t))"
_D2 = f"({_D1} - {VOL!r} * sqrt(t))"
_BLACK_SCHOLES_NE = f"s * {_cdf_ne(_D1)} - k * exp({-RATE!r} * t) * {_cdf_ne(_D2)}"


def _one(n, dtype, rng):
    return (normal(rng, n, dtype),)


def _two(n, dtype, rng):
    return (normal(rng, n, dtype), normal(rng, n, dtype))


def _options(n, dtype, rng):
    return (uniform(rng, 50, 150, n, dtype), uniform(rng, 50, 150, n, dtype),
            uniform(rng, 0.1, 2.0, n, dtype))


def _coordinates(n, dtype, rng):
    # Within +-1 rad of each other, far from antipodal points, where arcsin(sqrt(a))
    # meets a rounded a > 1 and any two libraries may disagree (NaN or pi/2).
    return tuple(uniform(rng, -1.0, 1.0, n, dtype) for _ in range(4))


WORKLOADS = [
    Workload("affine", affine, _one, "((x*1.5+0.5)*0.75-0.25)*2+1",
             torch=lazy("torch_versions", "affine"),
             numexpr="((x * 1.5 + 0.5) * 0.75 - 0.25) * 2.0 + 1.0",
             numba=numba_of(affine), jax=jax_of(affine)),
    Workload("tanh_chain", tanh_chain, _two, "tanh(x*2+y)*0.5 + x*y",
             torch=lazy("torch_versions", "tanh_chain"),
             numexpr="tanh(x * 2.0 + y) * 0.5 + x * y",
             numba=numba_of(tanh_chain), jax=jax_of(tanh_chain)),
    Workload("gelu", gelu, _one, "0.5*x*(1+tanh(0.798*(x+0.0447*x^3)))",
             torch=lazy("torch_versions", "gelu"),
             numexpr="0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))",
             numba=numba_of(gelu), jax=jax_of(gelu)),
    Workload("clip_scale", clip_scale, _one, "clip(x, -1, 1)*3",
             torch=lazy("torch_versions", "clip_scale"),
             numexpr="where(x < -1.0, -1.0, where(x > 1.0, 1.0, x)) * 3.0",
             numba=numba_of(clip_scale), jax=jax_of(clip_scale)),
    Workload("black_scholes", black_scholes, _options, "call price of (s, k, t), tanh CDF",
             torch=lazy("torch_versions", "black_scholes"),
             numexpr=_BLACK_SCHOLES_NE,
             numba=numba_of(black_scholes, normal_cdf=normal_cdf),
             jax=jax_of(black_scholes, normal_cdf=normal_cdf)),
    Workload("haversine", haversine, _coordinates, "great-circle km of (lat1, lon1, lat2, lon2)",
             torch=lazy("torch_versions", "haversine"),
             numexpr=f"2.0 * {EARTH_KM!r} * arcsin(sqrt(sin((lat2 - lat1) * 0.5)**2"
                     " + cos(lat1) * cos(lat2) * sin((lon2 - lon1) * 0.5)**2))",
             numba=numba_of(haversine), jax=jax_of(haversine)),
]
