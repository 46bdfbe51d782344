"""Recurrences, filters, binning and byte/bit loops."""

import numpy as np
from sci_registry import LOOSE, case, grid


@case("recurrence", lambda r: (r.standard_normal(10), 0.6, -0.2),
      lambda r: (r.standard_normal(5000), 0.6, -0.2),
      quick=lambda r: (r.standard_normal(500), 0.6, -0.2), tol=LOOSE)
def ar2_filter(x, a1, a2):
    y = np.zeros_like(x)
    y[0] = x[0]
    y[1] = x[1] + a1 * y[0]
    for n in range(2, len(x)):
        y[n] = x[n] + a1 * y[n - 1] + a2 * y[n - 2]
    return y


@case("recurrence", lambda r: (r.standard_normal(8), np.array([0.2, 0.3, 0.2]),
                               np.array([1.0, -0.4, 0.1])),
      lambda r: (r.standard_normal(5000), np.array([0.2, 0.3, 0.2]), np.array([1.0, -0.4, 0.1])),
      quick=lambda r: (r.standard_normal(300), np.array([0.2, 0.3, 0.2]),
                       np.array([1.0, -0.4, 0.1])), tol=LOOSE)
def iir_direct_form(x, b, a):
    # lfilter by hand: y[n] = (sum b[k] x[n-k] - sum a[k] y[n-k]) / a[0]
    y = np.zeros(len(x))
    for n in range(len(x)):
        acc = 0.0
        for k in range(len(b)):
            if n - k >= 0:
                acc += b[k] * x[n - k]
        for k in range(1, len(a)):
            if n - k >= 0:
                acc -= a[k] * y[n - k]
        y[n] = acc / a[0]
    return y


@case("recurrence", lambda r: (grid(r, 50), 1.8, 6), lambda r: (grid(r, 50), 1.8, 500),
      quick=lambda r: (grid(r, 50), 1.8, 50), tol=LOOSE)
def logistic_population(pop, growth, years):
    # A per-step scalar read with .item(): Python sees the total every year.
    history = []
    for year in range(years):
        total = pop.sum().item()
        pop = pop * growth / (1.0 + total / 25.0)
        history.append(total)
    return pop, history


@case("recurrence", lambda r: (grid(r, 6, 8), 0.3), lambda r: (grid(r, 1000, 256), 0.3),
      quick=lambda r: (grid(r, 100, 256), 0.3), tol=LOOSE)
def ema_rows(x, alpha):
    s = np.empty_like(x)
    s[0] = x[0]
    for t in range(1, x.shape[0]):
        s[t] = alpha * x[t] + (1 - alpha) * s[t - 1]
    return s


@case("binning", lambda r: (r.standard_normal(200), 5, -3.0, 3.0),
      lambda r: (r.standard_normal(1_000_000), 64, -3.0, 3.0))
def histogram_loop(x, nbins, lo, hi):
    idx = ((x - lo) / (hi - lo) * nbins).astype(np.int64)
    idx = np.clip(idx, 0, nbins - 1)
    counts = np.zeros(nbins, dtype=np.int64)
    for b in range(nbins):
        counts[b] = np.sum(idx == b)
    return counts


@case("binning", lambda r: (r.standard_normal(300),), lambda r: (r.standard_normal(1_000_000),),
      tol=LOOSE)
def histogram_density(samples):
    counts, edges = np.histogram(samples, bins=20, range=(-4.0, 4.0))
    centers = 0.5 * (edges[1:] + edges[:-1])
    density = counts / (counts.sum() * (edges[1] - edges[0]))
    mean = np.sum(centers * density) * (edges[1] - edges[0])
    return density, mean


def _bytes(rng, n):
    return rng.integers(0, 256, size=n).astype(np.uint8)


@case("bytes", lambda r: (_bytes(r, 16),), lambda r: (_bytes(r, 20_000),),
      quick=lambda r: (_bytes(r, 2000),))
def adler32(data):
    a, b = 1, 0
    for byte in data:
        a = (a + int(byte)) % 65521
        b = (b + a) % 65521
    return (b << 16) | a


@case("bytes", lambda r: (_bytes(r, 64),), lambda r: (_bytes(r, 1_000_000),))
def popcount_bytes(data):
    v = data.copy()
    counts = np.zeros_like(data)
    for bit in range(8):
        counts += v & 1
        v >>= 1
    return counts, int(counts.sum())


@case("bytes", lambda r: (_bytes(r, 48),), lambda r: (_bytes(r, 100_000),),
      quick=lambda r: (_bytes(r, 1600),))
def fletcher16_blocks(data):
    # Fletcher-16 over 16-byte blocks, sums kept in int64 and reduced per block.
    s1 = 0
    s2 = 0
    d = data.astype(np.int64)
    for start in range(0, len(d), 16):
        block = d[start:start + 16]
        s2 = (s2 + len(block) * s1 + np.sum(block * np.arange(len(block), 0, -1))) % 255
        s1 = (s1 + np.sum(block)) % 255
    return (s2 << 8) | s1
