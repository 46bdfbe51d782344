"""Small models: a CNN forward by slicing, an MLP, N-body, a recursive pyramid."""

import numpy as np
from sci_registry import LOOSE, case, grid


def _cnn_args(rng, h, filters, dtype=np.float32):
    img = rng.standard_normal((h, h)).astype(dtype)
    kernels = (rng.standard_normal((filters, 3, 3)) * 0.3).astype(dtype)
    n_pooled = filters * ((h - 2) // 2) ** 2
    w_fc = (rng.standard_normal((n_pooled, 10)) * 0.05).astype(dtype)
    return img, kernels, w_fc


@case("cnn", lambda r: _cnn_args(r, 8, 2), lambda r: _cnn_args(r, 66, 8),
      quick=lambda r: _cnn_args(r, 34, 4), tol=LOOSE)
def cnn_forward(img, kernels, w_fc):
    H, W = img.shape
    nf = kernels.shape[0]
    conv = np.zeros((nf, H - 2, W - 2), dtype=img.dtype)
    for f in range(nf):
        for di in range(3):
            for dj in range(3):
                conv[f] += kernels[f, di, dj] * img[di:di + H - 2, dj:dj + W - 2]
    act = np.maximum(conv, 0)
    ph, pw = (H - 2) // 2, (W - 2) // 2
    pooled = act[:, :2 * ph, :2 * pw].reshape(nf, ph, 2, pw, 2).max(axis=(2, 4))
    logits = pooled.reshape(-1) @ w_fc
    e = np.exp(logits - logits.max())
    return e / e.sum()


def _mlp_args(rng, batch, d_in, hidden, d_out):
    return (rng.standard_normal((batch, d_in)), rng.standard_normal((d_in, hidden)) * 0.1,
            np.zeros(hidden), rng.standard_normal((hidden, d_out)) * 0.1, np.zeros(d_out))


@case("matrix", lambda r: _mlp_args(r, 8, 12, 16, 4), lambda r: _mlp_args(r, 512, 784, 256, 10),
      tol=LOOSE)
def mlp_forward(x, W1, b1, W2, b2):
    h = x @ W1 + b1
    h = np.maximum(h, 0.0)
    z = h @ W2 + b2
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def _bodies(rng, n):
    return rng.standard_normal((n, 3)), rng.standard_normal((n, 3)) * 0.1, rng.random(n) + 0.5


@case("nbody", lambda r: _bodies(r, 8) + (0.01, 3), lambda r: _bodies(r, 256) + (0.01, 100),
      quick=lambda r: _bodies(r, 256) + (0.01, 10), tol=LOOSE)
def nbody(pos, vel, mass, dt, steps):
    # Updates the caller's positions and velocities in place, as simulation codes do.
    for s in range(steps):
        dx = pos[np.newaxis, :, :] - pos[:, np.newaxis, :]
        r2 = (dx ** 2).sum(axis=2) + 1e-3
        inv_r3 = r2 ** -1.5
        acc = (dx * (mass[np.newaxis, :] * inv_r3)[:, :, np.newaxis]).sum(axis=1)
        vel += dt * acc
        pos += dt * vel
    kinetic = 0.5 * np.sum(mass * (vel ** 2).sum(axis=1))
    return kinetic


@case("recursive", lambda r: (grid(r, 32), 4), lambda r: (grid(r, 1 << 20), 12), tol=LOOSE)
def pyramid_energy(x, levels):
    # A recursive user function: the energy of each level of a mean pyramid.
    if levels == 0 or x.shape[0] < 2:
        return float(np.sum(x * x))
    coarse = 0.5 * (x[0::2] + x[1::2])
    return float(np.sum((x[0::2] - coarse) ** 2)) + pyramid_energy(coarse, levels - 1)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@case("recursive", lambda r: (grid(r, 16), 12), lambda r: (grid(r, 100_000), 20), tol=LOOSE)
def fib_weighted(x, n):
    # Plain-int recursion mixed with arrays: fib folds to a constant while capturing.
    w = fib(n)
    return x * w + np.sqrt(x) * fib(n // 2)
