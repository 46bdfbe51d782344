"""Every op of the op table, called as np.<name> and through operators, on the dtypes
it takes, matches NumPy on both backends (values, dtype, shape, result type)."""

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
def test_every_ufunc(name, dtype, backend):
    uf = getattr(np, name)
    args = _inputs(name, dtype)
    f = dynexpr.capture(lambda *a: uf(*a), backend=backend)
    assert_same(uf(*args), f(*args))
    # broadcasting against a row, and a 0-d operand giving a NumPy scalar
    row = [a[0] for a in args]
    assert_same(uf(*row[:1], *args[1:]), f(*row[:1], *args[1:]))
    zero_d = [np.asarray(a[0, 0]) for a in args]
    assert_same(uf(*zero_d), f(*zero_d))
    assert not [e for e in f.entries if e.compiled is None]


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
def test_operators_with_python_scalars_on_both_sides(op, backend):
    is_int = op in ("&", "|", "^", "<<", ">>")
    x = np.arange(1, 7, dtype=np.int32 if is_int else np.float32).reshape(2, 3)
    fwd = eval(f"lambda x: x {op} 2")
    rev = eval(f"lambda x: 3 {op} x")
    for fn in (fwd, rev):
        assert_same(fn(x), dynexpr.capture(fn, backend=backend)(x))


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
