"""Corpus, part 2: views and stencils, in-place updates of arguments, helpers and
methods, several outputs, empty/0-d/strided inputs, creation and casts (see corpus.py)."""

import numpy as np

from corpus import case, each_float, f32, f64, ints

# --- stencils and views ----------------------------------------------------------------------


@case(each_float(lambda rng, f: (f(rng, 8, 9),)))
def laplacian_5pt(u):
    return u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]


@case(each_float(lambda rng, f: (f(rng, 20),)))
def smooth_1d(x):
    return (x[:-2] + x[1:-1] + x[2:]) / 3.0, x[1:] - x[:-1]


@case(each_float(lambda rng, f: (f(rng, 20),)))
def strided_slices(x):
    return x[::2] + x[1::2], x[::-1] * x, x[-3::-2], x[5:2:-1]


@case(each_float(lambda rng, f: (f(rng, 3, 4, 5),)))
def index_forms(x):
    return x[1], x[1, 2], x[1, 2, 3], x[..., 0], x[None, :, 1], x[:, None, ::2, ...], x[-1, -1, -1]


@case(each_float(lambda rng, f: (f(rng, 2, 3, 4),)))
def view_chain(x):
    y = x.reshape(6, 4).T
    z = np.transpose(x, (2, 0, 1)).reshape(4, -1)
    w = np.expand_dims(x, 0).squeeze(0).swapaxes(0, 2)
    return y * 2, z + 1, w.ravel(), np.broadcast_to(x[:, :1, :], (2, 3, 4)) + 0, x.flatten()


@case(lambda rng: [(f32(rng, 6, 9),), (f64(rng, 6, 9),), (ints(rng, np.int64, 6, 9),),
                   (ints(rng, np.uint8, 6, 9, lo=0, hi=255),)])
def finite_differences(u):
    # np.diff as views and a subtraction: higher orders, other axes, bools (not_equal),
    # n=0 (the input itself), more orders than extents (empty)
    return (np.diff(u), np.diff(u, n=2, axis=0), np.diff(u, axis=-2) / 0.1, np.diff(u, 0),
            np.diff(u > u.mean()), np.diff(u, n=12), np.diff(u[0]).sum())


@case(lambda rng: [(f32(rng, 7, 9),), (f64(rng, 7, 9),), (ints(rng, np.int32, 7, 9),)])
def periodic_stencils(u):
    # np.roll as two stores into a new array: both signs, shifts past the extent, 0 (a
    # copy), axis None (the flat array), several axes at once, a repeated axis
    lap = (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0) + np.roll(u, 1, axis=1)
           + np.roll(u, -1, axis=1) - 4 * u)
    return (lap, np.roll(u, 11), np.roll(u, 0, axis=1), np.roll(u, (2, -3), axis=(0, 1)),
            np.roll(u, (1, 1), axis=(1, 1)), np.roll(u[0], -20), np.roll(u, 9, axis=0))


@case(lambda rng: [(f32(rng, 5, 6),), (f64(rng, 5, 6),), (ints(rng, np.int64, 5, 6),)])
def padded_stencils(u):
    # np.pad by stores into a new array: every mode it has, one width, pairs, per-axis
    # pairs, corners filled axis by axis as NumPy does
    return (np.pad(u, 1), np.pad(u, (2, 1), mode="edge"), np.pad(u, ((1, 2), (3, 0)), "wrap"),
            np.pad(u, 2, mode="reflect"), np.pad(u, ((0, 5), (6, 1)), mode="symmetric"),
            np.pad(u[0], 3, constant_values=7), np.pad(u, 1, mode="edge")[1:-1, 2:] - u)


@case(lambda rng: [(f32(rng, 4, 6), f64(rng, 3, 6)), (f64(rng, 4, 6), f64(rng, 3, 6)),
                   (ints(rng, np.int64, 4, 6), f32(rng, 3, 6))])
def joins(a, b):
    # concatenate (promoting dtypes as NumPy), stack, hstack/vstack/column_stack, axis
    # None, a dtype= cast, parts computed in place and a join that feeds more work
    return (np.concatenate([a * 2, b + 1]), np.concatenate((a, a), axis=1),
            np.concatenate((a, b), axis=None), np.stack([a, a * a], axis=-1).sum(axis=0),
            np.hstack((a[0], b[1], a[2])), np.vstack((a, b[:2])), np.vstack((a[0], a[1])),
            np.column_stack((a[0], b[0])), np.concatenate((a, b), dtype=np.float32),
            np.append(a, b), np.append(a, b, axis=0),
            np.stack((a[1], a[2])).sum(axis=1))


def _specials(u):
    """u with zeros of both signs, NaN and both infinities in its first elements."""
    if u.dtype.kind == "f":
        u.reshape(-1)[:5] = [0.0, -0.0, np.nan, np.inf, -np.inf]
    return u


@case(lambda rng: [(_specials(f32(rng, 5, 6)),), (_specials(f64(rng, 5, 6)),),
                   (ints(rng, np.int32, 5, 6),)])
def numpy_compositions(u):
    # functions NumPy builds from other ops, built the same way (Note [functions as NumPy
    # composes them]): special values included, integer inputs through NumPy's float loops
    with np.errstate(invalid="ignore"):  # sin(inf) and inf * 0 in the reductions, as NumPy
        s, p = np.sinc(u), np.nanprod(u[1:3], axis=1)
    return (s, np.radians(u), np.rad2deg(u), np.fabs(u), np.heaviside(u, 0.5),
            np.fmax(u, u[::-1]), np.fmin(u, 1.0), np.nan_to_num(u, posinf=9.0),
            np.nansum(u, axis=0), p, np.ptp(u, axis=1),
            np.average(u, axis=0), np.round(u, 2), np.round(u * 3, 0))


@case(each_float(lambda rng, f: (f(rng, 4, 5),)))
def layout_compositions(u):
    # flips as views, diagonals as strided slices, grids and repetitions as broadcasts
    x, y = np.meshgrid(u[0], u[1, :3])
    return (np.flip(u) * 2, np.fliplr(u) - u, np.flipud(u)[1:], np.trace(u), np.trace(u, -1),
            np.diag(u, 1), np.diag(u[0], -1), x * y, np.repeat(u, 2, axis=1),
            np.tile(u[0], (2, 3)), np.tile(u, 2).sum(axis=0))


# --- in-place updates of arguments -------------------------------------------------------------


@case(each_float(lambda rng, f: (f(rng, 10), f(rng, 10))))
def inplace_add_arg(x, y):
    x += y
    x *= 2
    x -= 1


@case(each_float(lambda rng, f: (f(rng, 6, 5),)))
def slice_assign(x):
    x[1:-1, 1:-1] = 0
    x[0] = x[-1]
    x[:, 0] = 7.0
    return x


@case(each_float(lambda rng, f: (f(rng, 12),)))
def view_mutation(x):
    b = x[2:]
    b *= 3
    c = b[::2]
    c += 1
    return x.sum(), b


@case(each_float(lambda rng, f: (f(rng, 9),)))
def stencil_into_new(x):
    out = np.zeros_like(x)
    out[1:-1] = (x[:-2] + x[2:]) * 0.5
    out[::4] = -1
    return out


@case(each_float(lambda rng, f: (f(rng, 8),)))
def read_view_after_write(x):
    v = x[1:]
    x[1] = 100
    w = v * 1
    x[2:4] += v[3:5]
    return w, v


@case(each_float(lambda rng, f: (f(rng, 4, 4),)))
def write_through_transpose(x):
    t = x.T
    t[0] = 5
    t[1:, 2] *= -1
    return t.sum(axis=0)


@case(lambda rng: [(np.abs(f64(rng, 6)),), (np.abs(f32(rng, 2, 3)),)])
def inplace_power(x):
    x **= 2
    x **= 0.5
    return x


@case(lambda rng: [(ints(rng, np.int64, 10),), (ints(rng, np.int32, 10),)])
def inplace_int(a):
    a += 3
    a //= 2
    a %= 7
    a <<= 1
    return a


@case(each_float(lambda rng, f: (f(rng, 5, 5),)))
def accumulate_loop(x):
    acc = np.zeros_like(x)
    for i in range(4):
        acc += x * i
        acc[i] = i
    return acc


@case(each_float(lambda rng, f: (f(rng, 6),)))
def self_overlapping_assign(x):
    x[1:] = x[:-1]
    x[:3] += x[3:]
    return x


@case(each_float(lambda rng, f: (f(rng, 4, 3), f(rng, 3), f(rng, 4, 3))))
def ufunc_out(x, y, buf):
    np.multiply(x, y, out=buf)
    np.add(buf, 1, buf)
    np.exp(y, out=buf[0])
    r = np.negative(y, out=(buf[1],))
    return buf.sum(), r


class Accumulator:
    def __init__(self, total):
        self.total = total

    def add(self, x):
        self.total += x
        return self.total * 1


@case(each_float(lambda rng, f: (Accumulator(f(rng, 5)), f(rng, 5))))
def attribute_updated_in_place(acc, x):
    first = acc.add(x)
    acc.total *= 2
    return first, acc.total


# --- helpers, methods, closures, containers ------------------------------------------------------


def _scale_shift(x, scale=2.0, *, shift=1.0):
    return x * scale + shift


@case(each_float(lambda rng, f: (f(rng, 10),)))
def helper_with_defaults(x):
    return _scale_shift(x), _scale_shift(x, 3), _scale_shift(x, shift=-2.0, scale=0.5)


class Affine:
    def __init__(self, w, b):
        self.w = w
        self.b = b

    @property
    def out_features(self):
        return self.w.shape[1]

    def __call__(self, x):
        return self.forward(x)

    def forward(self, x):
        return x @ self.w + self.b

    @staticmethod
    def act(x):
        return np.tanh(x)


@case(each_float(lambda rng, f: (Affine(f(rng, 4, 3), f(rng, 3)), f(rng, 2, 4))))
def method_and_property(layer, x):
    y = layer(x)
    return layer.act(y) * layer.out_features, layer.forward(x) - y


def _make_scaler(k, offset):
    def scaler(x):
        return x * k + offset

    return scaler


SCALER = _make_scaler(3.0, np.arange(5.0))


@case(each_float(lambda rng, f: (f(rng, 5),)))
def closure_helper(x):
    return SCALER(x)


@case(each_float(lambda rng, f: (f(rng, 6),)))
def nested_def_and_comprehension(x):
    def sq(v):
        return v * v

    parts = [sq(x[i::3]) for i in range(3)]
    scaled = (lambda v, s=2: v * s)(x)
    return sum(parts), scaled, tuple(p.sum() for p in parts)


@case(each_float(lambda rng, f: ({"w": f(rng, 4), "b": 0.5, "act": "relu"}, f(rng, 4))))
def dict_params(params, x):
    y = x * params["w"] + params["b"]
    if params["act"] == "relu":
        y = np.maximum(y, 0)
    return {"y": y, "norm": (y * y).sum()}


@case(each_float(lambda rng, f: (f(rng, 3), f(rng, 3), f(rng, 3))))
def star_args(*xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total, len(xs)


@case(lambda rng: [(f32(rng, 5), True), (f32(rng, 5), False), (f64(rng, 5), 3)])
def flag_branch(x, flag, *, scale=2.0):
    if flag is True:
        return x * scale
    elif flag:
        return x - flag
    return -x


@case(each_float(lambda rng, f: ([f(rng, 3), f(rng, 3)], (f(rng, 3), 2.0))))
def list_and_tuple_args(arrays, pair):
    a, b = arrays
    v, s = pair
    out = []
    for i, arr in enumerate(arrays):
        out.append(arr * (i + s))
    return out, a - b + v


# --- several outputs, identity, result types ---------------------------------------------------


@case(each_float(lambda rng, f: (f(rng, 4, 3),)))
def several_outputs(x):
    return x.mean(), x.shape[0], x * 2, [x.min(axis=0)], (x.std(),)


@case(each_float(lambda rng, f: (f(rng, 5),)))
def same_result_twice(x):
    y = x * 2
    return y, y, y.copy()


@case(each_float(lambda rng, f: (f(rng, 5),)))
def returns_argument(x):
    return x, x[1:], x.T, x + 1


@case(
    lambda rng: [(np.float64(3.0), f64(rng, 3)), (np.float32(2.0), f32(rng, 3)), (2, f64(rng, 3))]
)
def scalar_arguments(s, x):
    return s * x, s * 2, x.sum() * s


# --- empty, 0-d and strided inputs ---------------------------------------------------------------


@case(
    lambda rng: [(np.zeros((0,), np.float32),), (np.zeros((0, 3)),), (np.zeros((3, 0), np.int32),)]
)
def empty_inputs(x):
    return x * 2 + 1, x.sum(), x.sum(axis=0), x.reshape(-1), np.exp(x)


@case(lambda rng: [(np.array(3.0),), (np.array(2, np.int32),), (np.array(1.5, np.float32),)])
def zero_dim_inputs(x):
    return x + 1, x * x, x[()], x[...], x.sum(), np.sqrt(x), x.reshape(1)


@case(lambda rng: [(f64(rng, 10, 6)[::2, 1::2],), (f32(rng, 6, 8).T,), (f64(rng, 7)[::-1],)])
def strided_inputs(x):
    return x * 2 + np.exp(x), x.sum(axis=0), x.T + 1


@case(lambda rng: [(f64(rng, 8)[::2],), (f32(rng, 3, 4).T,)])
def strided_inplace(x):
    x += 1
    x[0] = -1
    return x


# --- creation, casts, clip, where ---------------------------------------------------------------


@case(each_float(lambda rng, f: (f(rng, 3, 4),)))
def creation(x):
    return (
        np.zeros_like(x) + np.ones_like(x, dtype=np.int32) + np.full_like(x, 2.7),
        np.zeros(3) + np.ones((2, 3), np.float32) + np.full((3,), 7, np.int64),
        np.full_like(x, 2.7, dtype=np.int32),
        np.zeros_like(x[0], shape=(2, 2)),
    )


@case(each_float(lambda rng, f: (f(rng, 6, 4),)))
def identity_matrices(x):
    """np.eye and np.identity: a ridge term on a square block, off-diagonals above and
    below, a rectangular eye, one with no diagonal left (k past the columns), an empty one,
    and int/bool dtypes; the last is written to afterwards (its diagonal was stored through
    its flat view, so this is a second write to the same array). No matmul here: the CUDA
    codegen's corpus count (test_generated_cases) pins the matmul cases."""
    n = x.shape[1]
    gram = x[:n] + 0.5 * np.eye(n)
    shifted = x * np.eye(6, 4, k=1) - x * np.eye(6, n, -2, dtype=x.dtype)
    marked = np.identity(3, dtype=np.int32)
    marked[0, 2] = 7
    return (gram, shifted, np.eye(2, 3, k=5), np.eye(0), np.eye(3, dtype=bool),
            np.identity(n) * x[0], marked, np.identity(2), np.eye(2, dtype=None))


@case(each_float(lambda rng, f: (f(rng, 10) * 10,)))
def astype_chain(x):
    i = x.astype(np.int32)
    return i, i.astype(bool), (x > 0).astype(np.float32) * x, x.astype(x.dtype, copy=False) is x


@case(each_float(lambda rng, f: (f(rng, 4, 4), f(rng, 4))))
def where_and_clip(x, y):
    return (
        np.where(x > y, x, y),
        np.where(x > 0, 1, -1),
        np.where(x < 0, 0.0, x),
        np.clip(x, -0.5, 0.5),
        x.clip(min=0),
        np.clip(x, None, y),
    )


def _pendulum(y):
    return np.array([y[1], -np.sin(y[0])])


@case(lambda rng: [(f64(rng, 2), 0.01), (f32(rng, 2), 0.02)])
def arrays_from_items(y, dt):
    # np.array of NumPy scalars, numbers and equal-shape arrays: an ODE's right-hand
    # side in an RK4 step, a stack of rows, mixed kinds (NumPy picks the dtype). The
    # 500-step loop of it is in test_loop_scalar.py (loops are CPU-only for now).
    k1 = _pendulum(y)
    k2 = _pendulum(y + dt / 2 * k1)
    k3 = _pendulum(y + dt / 2 * k2)
    k4 = _pendulum(y + dt * k3)
    y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return (y, np.array([y, y * 2, -y]), np.array([y[0], 2, dt]), np.asarray((y[1], 1.5)),
            np.array([y[0] > 0, True]), np.array([y.sum(), 1], dtype=np.float32),
            np.array([]), np.array([np.int32(3), 4]), np.array((y[0], y[1]))[::-1])


@case(lambda rng: [(f64(rng, 5),)])
def asarray_copy(x):
    a = np.asarray(x)
    b = np.array(x)
    b += 1
    c = np.copy(x) * 2
    return a is x, b, c, np.asarray(x, dtype=np.float32)
