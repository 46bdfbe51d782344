"""Hand-built graphs compiled by the native pipeline (schedule -> codegen -> cache ->
_native) and compared with NumPy: values, dtypes, shapes, mutated arguments.

Needs the extension: `pip install -e . --no-build-isolation -Cbuild-dir=build-py` (see
pyproject.toml). The first run compiles every graph (seconds each); the kernel cache
(DYNEXPR_CACHE_DIR, default ~/.cache/dynexpr) makes later runs fast.
"""

import ctypes
import subprocess

import numpy as np
import pytest

_native = pytest.importorskip("dynexpr._native", reason="the native extension is not built "
                              "(pip install -e . --no-build-isolation -Cbuild-dir=build-py)")

from dynexpr import ir, runtime
from native_graphs import GraphBuilder, assert_same

rng = np.random.default_rng(7)
FUSE = [True, False]


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def f64(*shape):
    return rng.standard_normal(shape)


def compiled(b: GraphBuilder, fuse=True):
    return runtime.compile_graph(b.graph, fuse=fuse)


@pytest.mark.parametrize("fuse", FUSE)
def test_pointwise_chain_float32(fuse):
    x, y = f32(1000), f32(1000)
    b = GraphBuilder(x, y)
    x0, y0 = b.x
    t = b.ufunc("tanh", b.ufunc("add", b.ufunc("multiply", x0, 2.0), y0))
    z = b.ufunc("add", b.ufunc("multiply", t, 0.5), b.ufunc("multiply", x0, y0))
    w = b.ufunc("sqrt", b.ufunc("absolute", b.ufunc("subtract", z, 1.0)))
    b.output(w)
    b.check(compiled(b, fuse))


@pytest.mark.parametrize("fuse", FUSE)
def test_broadcasting_and_several_outputs(fuse):
    b = GraphBuilder(f32(3, 4), f32(4), f32(3, 1))
    x, y, z = b.x
    s = b.ufunc("add", b.ufunc("add", x, y), z)
    p = b.ufunc("multiply", s, s)  # s used twice: computed once
    q = b.ufunc("maximum", y, z)   # (3, 4) from (4,) and (3, 1)
    b.output(p, q, s)
    b.check(compiled(b, fuse))


def test_mixed_dtypes():
    i32 = rng.integers(-50, 50, (5, 6)).astype(np.int32)
    u8 = rng.integers(0, 255, (5, 6)).astype(np.uint8)
    fl = f32(5, 6)
    bo = rng.random((5, 6)) > 0.5
    b = GraphBuilder(i32, u8, fl, bo)
    i, u, f, m = b.x
    outs = [
        b.ufunc("add", i, f),                     # int32 + float32 -> float64
        b.ufunc("add", u, 250),                   # uint8 + weak int stays uint8 (wraps)
        b.ufunc("true_divide", i, b.ufunc("add", i, 100)),  # int / int -> float64
        b.ufunc("exp", b.ufunc("multiply", i, 0.01)),       # int32 * 0.01 -> float64
        b.ufunc("add", m, m),                     # bool + bool -> logical or
        b.ufunc("greater", f, 0.0),
        b.where(b.ufunc("less", i, 0), f, 1.5),   # float32 with a weak float
        b.astype(b.ufunc("floor_divide", i, 7), "float32"),
        b.ufunc("remainder", i, -7),
        b.ufunc("add", m, 1),                     # bool + weak int -> int64
        b.ufunc("multiply", u, f),                # uint8 * float32 -> float32
    ]
    b.output(*outs)
    b.check(compiled(b))


def test_powers():
    b = GraphBuilder(f32(50), f64(50), rng.integers(-5, 5, 50).astype(np.int64))
    x, y, i = b.x
    outs = [
        b.ufunc("power", x, 2),        # np.square, as NumPy computes it
        b.ufunc("power", x, 3.0),      # x * x**2
        b.ufunc("power", y, 3),
        b.ufunc("power", b.ufunc("absolute", y), 0.37),
        b.ufunc("power", i, 3),        # integer power: exact
    ]
    b.output(*outs)
    b.check(compiled(b))


def test_uint8_multiply():
    b = GraphBuilder(rng.integers(0, 255, 40).astype(np.uint8))
    b.output(b.ufunc("multiply", b.x[0], 3))
    b.check(compiled(b))


@pytest.mark.parametrize("fuse", FUSE)
def test_reductions(fuse):
    x = f32(4, 5, 6)
    i = rng.integers(-9, 9, (4, 5)).astype(np.int32)
    b = GraphBuilder(x, i)
    x0, i0 = b.x
    sq = b.ufunc("multiply", x0, x0)
    outs = [
        b.reduce("sum", sq, axes=1, keepdims=True),
        b.reduce("mean", x0, axes=(0, 2)),
        b.reduce("max", b.ufunc("add", x0, 1.0)),
        b.reduce("min", x0, axes=-1),
        b.reduce("argmax", x0, axes=0),
        b.reduce("argmin", x0),
        b.reduce("var", x0, axes=2, ddof=1),
        b.reduce("std", x0, axes=None, keepdims=True),
        b.reduce("any", b.ufunc("greater", x0, 2.0), axes=1),
        b.reduce("all", b.ufunc("greater", x0, -3.0)),
        b.reduce("prod", i0, axes=1),             # int32 -> int64
        b.reduce("sum", b.ufunc("greater", i0, 0)),  # bool -> int64
        b.reduce("mean", i0, axes=0),             # int -> float64
    ]
    b.output(*outs)
    b.check(compiled(b, fuse))


@pytest.mark.parametrize("fuse", FUSE)
def test_softmax_and_logsumexp(fuse):
    b = GraphBuilder(f32(8, 33))
    (x,) = b.x
    m = b.reduce("max", x, axes=-1, keepdims=True)
    e = b.ufunc("exp", b.ufunc("subtract", x, m))
    s = b.reduce("sum", e, axes=-1, keepdims=True)
    soft = b.ufunc("true_divide", e, s)
    lse = b.ufunc("add", b.ufunc("log", s), m)
    b.output(soft, lse)
    fn = compiled(b, fuse)
    b.check(fn)


@pytest.mark.parametrize("fuse", FUSE)
def test_matmul(fuse):
    b = GraphBuilder(f32(6, 5), f32(5, 4), f64(5), f64(3, 5))
    a, c, v, w = b.x
    outs = [
        b.matmul(b.ufunc("multiply", a, 2.0), c),   # pointwise operand, then GEMM
        b.ufunc("add", b.matmul(a, c), 1.0),        # GEMM, then pointwise
        b.matmul(w, v),                             # matrix @ vector
        b.matmul(b.transpose(c), b.transpose(a)),   # strided (transposed) operands
    ]
    b.output(*outs)
    b.check(compiled(b, fuse))


def test_views_of_inputs():
    x = f32(6, 8)
    b = GraphBuilder(x, f32(8))
    x0, y0 = b.x
    sl = b.getitem(x0, ("slice", 1, -1, None), ("slice", None, None, 2))  # x[1:-1, ::2]
    rv = b.getitem(x0, ("int", -1), ("slice", None, None, -1))         # x[-1, ::-1]
    tr = b.transpose(x0)                                               # x.T
    rs = b.reshape(x0, (4, 12))
    ed = b.expand_dims(y0, 0)
    sq = b.squeeze(ed, 0)
    bc = b.broadcast_to(y0, (3, 8))
    na = b.getitem(y0, ("newaxis",), ("slice", None, None, None))
    outs = [
        b.ufunc("add", sl, 1.0),
        b.ufunc("multiply", rv, y0),
        b.ufunc("subtract", tr, 0.5),
        b.ufunc("negative", rs),
        b.ufunc("add", sq, ed),
        b.ufunc("multiply", bc, 2.0),
        b.ufunc("add", na, x0),
        b.reduce("sum", tr, axes=0),
    ]
    b.output(*outs)
    b.check(compiled(b))


def test_views_of_computed_values():
    b = GraphBuilder(f32(4, 6))
    (x,) = b.x
    y = b.ufunc("exp", x)
    t = b.transpose(y)                # a view of a computed value: y is materialised
    r = b.reshape(b.ufunc("add", x, 1.0), (24,))
    b.output(b.ufunc("multiply", t, 2.0), b.getitem(r, ("slice", None, None, 3)))
    b.check(compiled(b))


def test_strided_inputs_are_read_in_place():
    base = f64(10, 12)
    b = GraphBuilder(base[::2, 1::3], base.T[::-1])
    x, y = b.x
    b.output(b.ufunc("add", x, 1.0), b.reduce("sum", y, axes=1))
    fn = compiled(b)
    # The graph was built from contiguous copies; the call gets the strided views.
    outs = fn(base[::2, 1::3], base.T[::-1])
    assert_same(outs[0], base[::2, 1::3] + 1.0)
    assert_same(outs[1], base.T[::-1].sum(axis=1))
    # Negative and zero strides.
    z = np.broadcast_to(base[0, :3], (5, 3))
    b2 = GraphBuilder(np.ascontiguousarray(z))
    b2.output(b2.ufunc("multiply", b2.x[0], 3.0))
    assert_same(compiled(b2)(z)[0], z * 3.0)


@pytest.mark.parametrize("fuse", FUSE)
def test_mutation_in_place_update(fuse):
    b = GraphBuilder(f32(100), f32(100))
    x, y = b.x
    doubled = b.ufunc("multiply", x, 2.0)       # reads the old x
    b.output(doubled)
    b.mutate(0, b.ufunc("add", x, y))           # x += y
    args = b.check(compiled(b, fuse))
    assert args is not None


@pytest.mark.parametrize("fuse", FUSE)
def test_mutation_setitem_chain_and_overlap(fuse):
    b = GraphBuilder(f64(20), f64(5))
    x, y = b.x
    x1 = b.setitem(x, y, ("slice", 2, 7, None))                        # x[2:7] = y
    x2 = b.setitem(x1, b.ufunc("multiply", b.getitem(x1, ("slice", None, -1, None)), 2.0),
                   ("slice", 1, None, None))                           # x[1:] = x[:-1] * 2
    x3 = b.setitem(x2, 0.0, ("int", 0))                                # x[0] = 0
    b.mutate(0, x3)
    b.output(b.reduce("sum", x3))
    b.check(compiled(b, fuse))


def test_mutation_when_old_value_is_read_after():
    # y reads x's original content after the new version exists in the graph's order:
    # the update goes to a temporary and is copied into x at the end.
    b = GraphBuilder(f64(10))
    (x,) = b.x
    x1 = b.setitem(x, 5.0, ("slice", None, 3, None))
    late = b.ufunc("add", x, b.reduce("sum", x1))
    b.mutate(0, x1)
    b.output(late)
    b.check(compiled(b))


def test_mutated_argument_that_is_never_read():
    # np.multiply(x, y, out=buf); buf += 1; buf[0] = np.exp(y): buf's old content is unused.
    b = GraphBuilder(f32(4, 3), f32(3), f32(4, 3))
    x, y, _ = b.x
    v = b.setitem(b.ufunc("add", b.ufunc("multiply", x, y), 1), b.ufunc("exp", y), ("int", 0))
    b.mutate(2, v)
    b.output(b.reduce("sum", v))
    b.check(compiled(b))


def test_mutation_needs_writeable_argument():
    b = GraphBuilder(f64(4))
    b.mutate(0, b.ufunc("add", b.x[0], 1.0))
    fn = compiled(b)
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fn(ro)


def test_setitem_builds_an_output():
    b = GraphBuilder(f64(12))
    (x,) = b.x
    z = b.full(0.0, "float64", (12,))
    d = b.ufunc("subtract", b.getitem(x, ("slice", 1, None, None)),
                b.getitem(x, ("slice", None, -1, None)))
    out = b.setitem(z, d, ("slice", 1, None, None))   # out = zeros; out[1:] = x[1:] - x[:-1]
    b.output(out)
    b.check(compiled(b))


@pytest.mark.parametrize("fuse", FUSE)
def test_empty_and_zero_d(fuse):
    b = GraphBuilder(f32(0), f32(3, 0), np.float32(2.5).reshape(()), np.float64(-1.0))
    e, e2, s, t = b.x
    outs = [
        b.ufunc("add", b.ufunc("multiply", e, 2.0), 1.0),
        b.reduce("sum", e),
        b.reduce("sum", e2, axes=1),
        b.ufunc("add", b.ufunc("multiply", s, s), 1.0),   # 0-d float32
        b.ufunc("multiply", s, t),                        # 0-d float32 * 0-d float64
        b.reduce("sum", s),
    ]
    b.output(*outs)
    b.check(compiled(b, fuse))


def test_kernel_errors_become_python_exceptions():
    b = GraphBuilder(f32(8), f32(8))
    b.output(b.ufunc("add", *b.x))
    fn = compiled(b)
    with pytest.raises(ValueError, match="extent"):
        fn(f32(8), f32(9))
    with pytest.raises(TypeError, match="dtype"):
        fn(f32(8), f64(8))
    with pytest.raises(TypeError, match="takes 2 arrays"):
        fn(f32(8))
    # Byte-swapped (and unaligned) inputs are copied for the call, as NumPy computes
    # with them too (Note [inputs a kernel cannot read in place] in bridge/native/kernel.c).
    a, swapped = f32(8), f32(8).astype(">f4")
    np.testing.assert_array_equal(fn(a, swapped)[0], a + swapped)
    with pytest.raises(TypeError, match="dtype"):
        fn(f32(8), np.zeros(8, dtype=np.complex64))
    # NumPy scalars and 0-d inputs are accepted where a 0-d array is expected.
    b2 = GraphBuilder(np.float64(1.5).reshape(()))
    b2.output(b2.ufunc("multiply", b2.x[0], 2.0))
    assert b2.check(compiled(b2))[0] == 3.0
    assert compiled(b2)(np.float64(4.0))[0] == 8.0
    # An empty max has no identity: ValueError, as NumPy.
    b3 = GraphBuilder(f64(0))
    b3.output(b3.reduce("sum", b3.x[0]))
    b3.graph.values[-1] = b3.graph.values[-1]
    g = ir.Graph()
    xin = g.add(ir.Value("input", (), "float64", (0,), ir.make_attrs(index=0)))
    mx = g.add(ir.Value("max", (xin,), "float64", (), ir.make_attrs(axes=None, keepdims=False)))
    g.outputs = [mx]
    with pytest.raises(ValueError, match="zero-size|empty"):
        runtime.compile_graph(g)(np.zeros(0))


class _Device(ctypes.Structure):  # kernels/abi.h's dx_device
    _fields_ = [("kind", ctypes.c_int32), ("ordinal", ctypes.c_int32)]


class _Array(ctypes.Structure):  # kernels/abi.h's dx_array (ABI 2)
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("device", _Device)]


def _call_unit(path, ins, outs, device):
    """dynexpr_kernel of the unit at `path`, called as the ABI says, every array
    described as being on `device` (kind, ordinal): (status, message)."""
    keep = []

    def describe(a):
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        strides = (ctypes.c_int64 * a.ndim)(*(s // a.itemsize for s in a.strides))
        keep.extend((shape, strides))
        return _Array(a.ctypes.data, runtime.CODES[a.dtype.name], a.ndim, shape, strides,
                      _Device(*device))

    fn = ctypes.CDLL(path).dynexpr_kernel
    fn.restype = ctypes.c_int32
    in_arr = (_Array * len(ins))(*map(describe, ins))
    out_arr = (_Array * len(outs))(*map(describe, outs))
    err = ctypes.create_string_buffer(1024)
    rc = fn(in_arr, len(ins), out_arr, len(outs), err, ctypes.c_size_t(len(err)))
    return rc, err.value.decode()


def test_units_take_host_arrays_only():
    # ABI 2: dx_array says where its data lives; the loader describes NumPy arrays as
    # host memory and a cpu unit refuses any other device before reading a pointer.
    x, y = f32(8), f32(8)
    b = GraphBuilder(x, y)
    b.output(b.ufunc("add", *b.x))
    fn = compiled(b)
    b.check(fn)  # through the loader: host arrays
    assert _native.ABI_VERSION == 2
    assert ctypes.CDLL(fn.path).dynexpr_abi_version() == _native.ABI_VERSION
    out = np.zeros(8, np.float32)
    assert _call_unit(fn.path, (x, y), (out,), (0, 0)) == (0, "")
    np.testing.assert_array_equal(out, x + y)
    out[:] = 0
    rc, msg = _call_unit(fn.path, (x, y), (out,), (1, 3))
    assert rc == 5 and "input 0 is on device cuda:3" in msg and "host memory only" in msg
    assert not out.any()  # nothing was written


def test_a_unit_of_another_abi_is_refused_with_the_way_out(tmp_path):
    src = tmp_path / "old.c"
    src.write_text("#include <stdint.h>\n#include <stddef.h>\n"
                   "int32_t dynexpr_abi_version(void) { return 1; }\n"
                   "int32_t dynexpr_kernel(const void* i, int32_t ni, const void* o, int32_t no,"
                   " char* e, size_t n) { return 0; }\n")
    so = tmp_path / "old.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    with pytest.raises(ImportError, match="built for kernel ABI 1, this extension speaks 2; "
                       "clear the cache directory"):
        _native.Kernel(str(so), ((4, 1, False),), ((4, (8,)),), (0,))


def test_dynamic_dimension():
    g = ir.Graph()
    x = g.add(ir.Value("input", (), "float32", ("s0", 4), ir.make_attrs(index=0)))
    y = g.add(ir.Value("input", (), "float32", (4,), ir.make_attrs(index=1)))
    c = g.add(ir.Value("const", (), "float32", (), ir.make_attrs(value=3.0, weak="float")))
    m = g.add(ir.Value("multiply", (x, c), "float32", ("s0", 4)))
    a = g.add(ir.Value("add", (m, y), "float32", ("s0", 4)))
    s = g.add(ir.Value("sum", (a,), "float32", (4,), ir.make_attrs(axes=(0,), keepdims=False)))
    g.outputs = [a, s]
    fn = runtime.compile_graph(g)
    for n in (1, 7, 0, 300):
        xv, yv = f32(n, 4), f32(4)
        out, total = fn(xv, yv)
        assert_same(out, xv * np.float32(3.0) + yv)
        assert_same(total, (xv * np.float32(3.0) + yv).sum(axis=0))
    with pytest.raises(ValueError):
        fn(f32(3, 5), f32(4))


def test_outputs_that_are_arguments_and_no_kernels():
    g = ir.Graph()
    x = g.add(ir.Value("input", (), "float64", (3,), ir.make_attrs(index=0)))
    g.outputs = [x]
    fn = runtime.compile_graph(g)
    a = np.ones(3)
    assert fn(a)[0] is a


def test_many_arguments():
    # More inputs than the extension's on-stack scratch (16): its heap path.
    arrays = [f64(3) for _ in range(18)]
    b = GraphBuilder(*arrays)
    acc = b.x[0]
    for x in b.x[1:]:
        acc = b.ufunc("add", acc, x)
    b.output(*[b.ufunc("multiply", acc, float(k)) for k in range(17)])
    b.check(compiled(b))
