"""Every op of the op table, called as np.<name> and through operators, on the dtypes
it takes, matches NumPy on both backends (values, dtype, shape, result type).

The eager backend runs one capture per op. The compiled backend gets the same ops in
batches (one captured function computing several ops, each compared on its own): a
unit per op and layout would be ~400 compiles, most of the Python suite's time, for the
same coverage of the generated code."""

import numpy as np
import pytest

import dynexpr
from compare import assert_same
from dynexpr.capture.np_ops import ELEMENTWISE

INT_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"}
UNIT_RANGE = {"arcsin", "arccos", "arctanh"}


def _inputs(name, dtype):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    nin = getattr(np, name).nin
    if np.dtype(dtype).kind in "iu":
        lo = 0 if name in ("left_shift", "right_shift") or dtype == "uint8" else -20
        hi = 7 if name in ("left_shift", "right_shift") else 20
        return [rng.integers(lo, hi, size=(3, 4)).astype(dtype) for _ in range(nin)]
    x = [rng.standard_normal((3, 4)).astype(dtype) for _ in range(nin)]
    if name in UNIT_RANGE:
        x = [np.tanh(a) * np.asarray(0.9, dtype) for a in x]
    elif name == "arccosh":
        x = [np.abs(a) + np.asarray(1, dtype) for a in x]
    elif name in ("log", "log1p", "log2", "log10", "sqrt", "power"):
        x = [np.abs(a) + np.asarray(0.1, dtype) for a in x]
    return x


CASES = [
    (n, dt)
    for n in ELEMENTWISE
    for dt in (("int32", "uint8", "int64") if n in INT_ONLY else ("float32", "float64"))
]


@pytest.mark.parametrize("name, dtype", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_every_ufunc(name, dtype):
    uf = getattr(np, name)
    args = _inputs(name, dtype)
    f = dynexpr.capture(lambda *a: uf(*a), backend="eager")
    assert_same(uf(*args), f(*args))
    # broadcasting against a row, and a 0-d operand giving a NumPy scalar
    row = [a[0] for a in args]
    assert_same(uf(*row[:1], *args[1:]), f(*row[:1], *args[1:]))
    zero_d = [np.asarray(a[0, 0]) for a in args]
    assert_same(uf(*zero_d), f(*zero_d))
    assert not [e for e in f.entries if e.compiled is None]


BATCH = 10


def _batches():
    out = []
    for dt in ("float32", "float64", "int32", "uint8", "int64"):
        names = [n for n, d in CASES if d == dt]
        out += [(dt, names[i : i + BATCH]) for i in range(0, len(names), BATCH)]
    return out


def _batch_function(names):
    """def batch(a0, a1, ...): return (np.<name0>(a0, ...), np.<name1>(...), ...)"""
    calls, k = [], 0
    for n in names:
        nin = getattr(np, n).nin
        calls.append(f"np.{n}({', '.join(f'a{k + j}' for j in range(nin))})")
        k += nin
    ns = {"np": np}
    exec(f"def batch({', '.join(f'a{j}' for j in range(k))}):\n"
         f"    return ({', '.join(calls)},)\n", ns)
    return ns["batch"]


@pytest.mark.parametrize("dtype, names", _batches(),
                         ids=[f"{d}-{ns[0]}..{ns[-1]}" for d, ns in _batches()])
def test_every_ufunc_compiled(dtype, names):
    """The ops of one batch in one captured function on backend="cpu": full arrays,
    broadcasting against a row, and 0-d operands (NumPy scalars out)."""
    batch = _batch_function(names)
    f = dynexpr.capture(batch)
    args = [a for n in names for a in _inputs(n, dtype)]
    starts = np.cumsum([0] + [getattr(np, n).nin for n in names])
    layouts = {
        "full": args,
        "row": [a[0] if i in starts[:-1] else a for i, a in enumerate(args)],
        "0-d": [np.asarray(a[0, 0]) for a in args],
    }
    for layout, xs in layouts.items():
        want, got = batch(*xs), f(*xs)
        for n, w, g in zip(names, want, got, strict=True):
            assert_same(w, g, f"np.{n} ({dtype}, {layout})")
    assert not [e for e in f.entries if e.compiled is None]
    assert f.cache_info().compiles == 3


OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "<", "<=", "==", "!=", ">", ">=",
             "&", "|", "^", "<<", ">>"]
INT_OPERATORS = ("&", "|", "^", "<<", ">>")


@pytest.mark.parametrize("is_int", [False, True], ids=["float32", "int32"])
def test_operators_with_python_scalars_compiled(is_int):
    """Every operator with a Python scalar on either side, batched on backend="cpu"."""
    ops = [op for op in OPERATORS if (op in INT_OPERATORS) == is_int]
    x = np.arange(1, 7, dtype=np.int32 if is_int else np.float32).reshape(2, 3)
    for side in ("x {op} 2", "3 {op} x"):
        exprs = ", ".join("(" + side.format(op=op) + ")" for op in ops)
        fn = eval(f"lambda x: ({exprs},)")
        for op, w, g in zip(ops, fn(x), dynexpr.capture(fn)(x), strict=True):
            assert_same(w, g, side.format(op=op))


@pytest.mark.parametrize(
    "op",
    [
        "+",
        "-",
        "*",
        "/",
        "//",
        "%",
        "**",
        "<",
        "<=",
        "==",
        "!=",
        ">",
        ">=",
        "&",
        "|",
        "^",
        "<<",
        ">>",
    ],
)
def test_operators_with_python_scalars_on_both_sides(op):
    is_int = op in INT_OPERATORS
    x = np.arange(1, 7, dtype=np.int32 if is_int else np.float32).reshape(2, 3)
    fwd = eval(f"lambda x: x {op} 2")
    rev = eval(f"lambda x: 3 {op} x")
    for fn in (fwd, rev):
        assert_same(fn(x), dynexpr.capture(fn, backend="eager")(x))


def test_aliases_map_to_the_op_table_names():
    from dynexpr.capture.np_ops import UFUNC_OPS

    assert UFUNC_OPS[np.divide] == "true_divide" and UFUNC_OPS[np.abs] == "absolute"
    assert UFUNC_OPS[np.mod] == "remainder"
    ex = dynexpr.explain(lambda x: np.abs(np.mod(np.divide(x, 2), 3)), np.ones(3))
    assert ex.ops_per_graph == [["true_divide", "remainder", "absolute"]]


def test_list_item_updated_in_place():
    def g(xs, y):
        xs[0] += y
        return xs[0] * 2

    f = dynexpr.capture(g, backend="eager")
    a, b = [np.ones(3)], [np.ones(3)]
    assert_same(g(a, np.ones(3)), f(b, np.ones(3)))
    assert_same(a[0], b[0])
    assert not [e for e in f.entries if e.compiled is None]
