"""A corpus of NumPy functions that dynexpr must capture whole, each with input makers.

Every case is run plainly and captured, on every input set in order (later sets flip
shapes, dtypes or flags, so they exercise recompiles), and compared: values, dtypes,
shapes, result types and the arguments the function mutates.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Case:
    fn: Callable
    inputs: Callable  # rng -> list of argument tuples
    tol: dict | None = None
    name: str = field(default="")

    def __post_init__(self):
        self.name = self.name or self.fn.__name__


CASES: list[Case] = []


def case(inputs, tol=None):
    def register(fn):
        CASES.append(Case(fn, inputs, tol))
        return fn

    return register


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def f64(rng, *shape):
    return rng.standard_normal(shape)


def ints(rng, dtype, *shape, lo=-50, hi=50):
    return rng.integers(lo, hi, size=shape).astype(dtype)


def each_float(make):
    """The same inputs as float32 and as float64 (a dtype flip between calls)."""
    return lambda rng: [make(rng, f32), make(rng, f64)]


# --- pointwise chains -------------------------------------------------------------------


@case(each_float(lambda rng, f: (f(rng, 64),)))
def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x**3)))


@case(lambda rng: [(2.5, f32(rng, 33), f32(rng, 33)), (-1, f64(rng, 7), f64(rng, 7))])
def axpy(a, x, y):
    return a * x + y


COEFFS = [1.0, -0.5, 0.25, -0.125]


@case(each_float(lambda rng, f: (f(rng, 5, 6),)))
def horner_global_coeffs(x):
    acc = np.zeros_like(x)
    for c in COEFFS:
        acc = acc * x + c
    return acc


@case(each_float(lambda rng, f: (f(rng, 100),)))
def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@case(each_float(lambda rng, f: (f(rng, 4, 8),)))
def leaky_relu(x):
    return np.maximum(x, 0) + np.minimum(x, 0) * 0.01


@case(each_float(lambda rng, f: (f(rng, 50),)))
def trig_identity(x):
    return np.sin(x) ** 2 + np.cos(x) ** 2 - np.tan(x) * np.cos(x) / np.sin(x)


@case(each_float(lambda rng, f: (f(rng, 50) * 10,)))
def softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


@case(each_float(lambda rng, f: (f(rng, 40) * 5,)))
def rounding(x):
    return np.floor(x) + np.ceil(x) - np.trunc(x) + np.rint(x) + np.round(x)


@case(
    lambda rng: [
        (ints(rng, np.int32, 30), ints(rng, np.int32, 30, lo=1, hi=9)),
        (ints(rng, np.int64, 3, 4), ints(rng, np.int64, 4, lo=1, hi=9)),
    ]
)
def int_arithmetic(a, b):
    return (a // b) * 2 + a % b - ((a << 2) >> 1) + np.abs(a) * np.sign(a)


@case(
    lambda rng: [
        (ints(rng, np.uint8, 20, lo=0, hi=255), ints(rng, np.uint8, 20, lo=0, hi=255)),
        (ints(rng, np.int64, 20), ints(rng, np.int64, 20)),
    ]
)
def bitwise(a, b):
    return (a & b) | (a ^ ~b), np.bitwise_xor(a, 3), np.invert(b)


@case(each_float(lambda rng, f: (f(rng, 30), f(rng, 30))))
def compare_logic(x, y):
    return np.logical_and(x > 0, y < 0) | np.logical_not(x == y) ^ (x >= y), np.logical_xor(
        x <= 0, y != 0
    )


@case(
    lambda rng: [
        (np.array([0.0, np.nan, np.inf, -np.inf, 1.5], np.float32),),
        (np.array([[np.nan, 2.0], [-np.inf, 0.0]]),),
    ]
)
def predicates(x):
    return np.isnan(x) | np.isinf(x), np.isfinite(x), np.where(np.isfinite(x), x, 0.0)


@case(each_float(lambda rng, f: (f(rng, 25), f(rng, 25))))
def hypot_atan2(x, y):
    return np.hypot(x, y) + np.arctan2(y, x)


@case(each_float(lambda rng, f: (np.tanh(f(rng, 40)) * 0.9,)))
def inverse_trig(x):
    return (
        np.arcsin(x)
        + np.arccos(x)
        + np.arctan(x)
        + np.arcsinh(x)
        + np.arctanh(x)
        + np.arccosh(1.0 + x * x)
        + np.sinh(x)
        + np.cosh(x)
    )


@case(each_float(lambda rng, f: (np.abs(f(rng, 40)) + 0.1,)))
def exp_log_family(x):
    return np.exp2(x) + np.expm1(x) + np.log2(x) + np.log10(x) + np.log(x) + np.sqrt(x)


@case(each_float(lambda rng, f: (f(rng, 40),)))
def quiet_errstate(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(x) / x
    return np.where(np.isfinite(y), y, 0.0)


@case(each_float(lambda rng, f: (np.abs(f(rng, 40)) + 0.5,)))
def powers_fast_paths(x):
    return np.reciprocal(x) + np.square(x) + x**2 + x**-1 + x**0.5 + x**3 + x**2.0


@case(
    lambda rng: [(ints(rng, np.int32, 10, lo=-5, hi=5),), (ints(rng, np.int64, 3, 3, lo=0, hi=9),)]
)
def int_power(a):
    return a**3, a**2, np.power(a, 2)


@case(
    lambda rng: [
        (ints(rng, np.int32, 10), ints(rng, np.int32, 10, lo=1, hi=5)),
        (ints(rng, np.uint8, 10, lo=0, hi=200), ints(rng, np.uint8, 10, lo=1, hi=5)),
    ]
)
def int_true_divide(a, b):
    return a / b, a / 2, 3 / b


@case(
    lambda rng: [
        (
            ints(rng, np.int32, 8),
            f32(rng, 8),
            ints(rng, np.uint8, 8, lo=0, hi=100),
            rng.random(8) > 0.5,
        )
    ]
)
def mixed_dtypes(i, f, u, b):
    return i + f, u * 2, u + 300 * i, b + i, b * 1.5, f * u, b & (i > 0)


@case(lambda rng: [(f32(rng, 6),), (ints(rng, np.int32, 6),)])
def nep50_scalars(x):
    return x * np.float64(2.0), x * 2.0, x + np.float32(1), x * np.int64(3), np.float32(0.5) * 2


@case(each_float(lambda rng, f: (f(rng, 7, 3),)))
def python_scalar_logic(x):
    n, m = x.shape
    scale = (n + 1) / 2.0
    offset = n * m - len(x)
    return x * scale + offset, x.ndim, x.size, x.dtype.itemsize


@case(each_float(lambda rng, f: (f(rng, 4, 5), f(rng, 4))))
def broadcast_row_col(x, col):
    return x + col[:, None], x * col.reshape(-1, 1) - x[0]


@case(each_float(lambda rng, f: (f(rng, 6), f(rng, 9))))
def outer_product(x, y):
    return x[:, None] * y[None, :], np.expand_dims(x, 1) + y


# --- reductions --------------------------------------------------------------------------


@case(each_float(lambda rng, f: (f(rng, 5, 6, 7),)))
def reductions_axes(x):
    return (
        x.sum(),
        x.sum(axis=0),
        x.mean(axis=(0, 2)),
        np.max(x, axis=-1, keepdims=True),
        np.min(x, 1),
        x.prod(axis=2),
        np.sum(x, axis=(1, 2), keepdims=True),
    )


@case(each_float(lambda rng, f: (f(rng, 12, 5),)))
def variance_std(x):
    return (
        x.var(),
        np.std(x, axis=0),
        x.var(axis=1, ddof=1),
        np.std(x, ddof=1, keepdims=True, axis=1),
    )


@case(lambda rng: [(f64(rng, 6, 7),), (ints(rng, np.int32, 4, 9),)])
def arg_extrema(x):
    return x.argmax(), np.argmin(x, axis=0), x.argmax(axis=1), np.argmax(x, axis=-1, keepdims=True)


@case(lambda rng: [(f64(rng, 5, 4),), (ints(rng, np.int64, 5, 4, lo=-1, hi=2),)])
def any_all(x):
    return (
        (x > 0).any(),
        np.all(x > -3, axis=0),
        np.any(x, axis=1),
        (x != 0).all(axis=1, keepdims=True),
    )


@case(each_float(lambda rng, f: (f(rng, 8, 16) * 4,)))
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@case(each_float(lambda rng, f: (f(rng, 6, 10) * 20,)))
def logsumexp(x):
    m = np.max(x, axis=1, keepdims=True)
    return np.squeeze(m, 1) + np.log(np.sum(np.exp(x - m), axis=1))


@case(each_float(lambda rng, f: (f(rng, 4, 32), f(rng, 32), f(rng, 32))))
def layernorm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


@case(each_float(lambda rng, f: (f(rng, 7, 3),)))
def normalize_rows(x):
    return x / np.sqrt((x * x).sum(axis=1, keepdims=True))


@case(lambda rng: [(f32(rng, 1000),), (ints(rng, np.int32, 10, 3),)])
def reduction_dtypes(x):
    return (
        x.sum(dtype=np.float64),
        x.mean(),
        np.sum(x, axis=0),
        x.prod(dtype=np.float64),
        (x > 0).sum(),
    )


@case(each_float(lambda rng, f: (f(rng, 30),)))
def manual_variance(x):
    d = x - x.mean()
    return (d**2).mean(), np.sum(d * d) / (len(x) - 1)


# --- applications ----------------------------------------------------------------------


def _cnd(d):
    """Cumulative normal distribution (Abramowitz & Stegun 26.2.17)."""
    a1, a2, a3, a4, a5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    poly = k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5))))
    w = 1.0 - 1.0 / np.sqrt(2 * np.pi) * np.exp(-d * d / 2.0) * poly
    return np.where(d < 0, 1.0 - w, w)


def _option_inputs(rng, f):
    n = 64
    s = (np.abs(f(rng, n)) * 20 + 80).astype(f(rng, 1).dtype)
    k = (np.abs(f(rng, n)) * 20 + 80).astype(s.dtype)
    t = (np.abs(f(rng, n)) + 0.25).astype(s.dtype)
    return s, k, t


@case(each_float(_option_inputs))
def black_scholes(s, k, t, r=0.02, sigma=0.3):
    sqrt_t = np.sqrt(t)
    d1 = (np.log(s / k) + (r + 0.5 * sigma * sigma) * t) / (sigma * sqrt_t)
    d2 = d1 - sigma * sqrt_t
    discount = np.exp(-r * t)
    call = s * _cnd(d1) - k * discount * _cnd(d2)
    put = k * discount * _cnd(-d2) - s * _cnd(-d1)
    return call, put


@case(each_float(lambda rng, f: (f(rng, 5, 3), f(rng, 4, 3))))
def pairwise_euclidean(a, b):
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=-1))


@case(each_float(lambda rng, f: (f(rng, 5, 8), f(rng, 6, 8))))
def cosine_similarity(a, b):
    na = np.sqrt((a * a).sum(axis=1, keepdims=True))
    nb = np.sqrt((b * b).sum(axis=1, keepdims=True))
    return (a @ b.T) / (na * nb.T)


@case(each_float(lambda rng, f: (f(rng, 9, 4), f(rng, 4))))
def manhattan(a, b):
    return np.abs(a - b).sum(axis=-1)


@case(each_float(lambda rng, f: (f(rng, 3, 4), f(rng, 4, 5), f(rng, 5))))
def linear_layer(x, w, b):
    return np.maximum(x @ w + b, 0.0), np.matmul(x, w), np.dot(x, w), x[0] @ w, x @ w[:, 0]


@case(lambda rng: [(ints(rng, np.uint8, 8, 8, lo=0, hi=256),)])
def image_normalize(img):
    return img.astype(np.float32) / 255.0 * 2 - 1, (img > 128).astype(np.uint8) * 255


# The cases about arrays as objects (views, writes, helpers, outputs, odd inputs) live in
# corpus_arrays.py, which registers them here when imported.
import corpus_arrays  # noqa: E402, F401
