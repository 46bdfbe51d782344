"""The workloads in torch ops, the same math as the NumPy functions (run_peers compiles them
with torch.compile). Imports torch: load it only through base.lazy."""

from __future__ import annotations

import torch

from . import pointwise, stencil
from .pointwise import EARTH_KM, RATE, VOL

affine = pointwise.affine  # operators only: the NumPy function is already torch code
stencil3 = stencil.stencil3


def tanh_chain(x, y):
    return torch.tanh(x * 2.0 + y) * 0.5 + x * y


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def clip_scale(x):
    return torch.clamp(x, -1.0, 1.0) * 3.0


def normal_cdf(d):
    return 0.5 * (1.0 + torch.tanh(0.7978845608 * (d + 0.044715 * d * d * d)))


def black_scholes(s, k, t):
    vol_t = VOL * torch.sqrt(t)
    d1 = (torch.log(s / k) + (RATE + 0.5 * VOL * VOL) * t) / vol_t
    d2 = d1 - vol_t
    return s * normal_cdf(d1) - k * torch.exp(-RATE * t) * normal_cdf(d2)


def haversine(lat1, lon1, lat2, lon2):
    a = torch.sin((lat2 - lat1) * 0.5) ** 2 + torch.cos(lat1) * torch.cos(lat2) * torch.sin(
        (lon2 - lon1) * 0.5
    ) ** 2
    return 2.0 * EARTH_KM * torch.arcsin(torch.sqrt(a))


def sum_squares(x):
    return torch.sum(x * x)


def softmax_rows(x):
    e = torch.exp(x - torch.amax(x, dim=1, keepdim=True))
    return e / torch.sum(e, dim=1, keepdim=True)


def layernorm_rows(x):
    d = x - torch.mean(x, dim=1, keepdim=True)
    return d / torch.sqrt(torch.mean(d * d, dim=1, keepdim=True) + 1e-5)


def logsumexp_rows(x):
    m = torch.amax(x, dim=1, keepdim=True)
    return (torch.log(torch.sum(torch.exp(x - m), dim=1, keepdim=True)) + m)[:, 0]


def normalise_rows(x):
    return x / torch.sum(x, dim=1, keepdim=True)
