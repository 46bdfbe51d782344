"""Guards: flipping one fact at a time recompiles (or reuses) and never returns a stale
result (CAPTURE.md). cache_info() tells which happened."""

import types
import warnings

import numpy as np
import pytest

import dynexpr
from compare import assert_same
from dynexpr.guards import Guard, GuardSet, check, resolve, strict_equal


def captured(fn, backend="eager"):
    return dynexpr.capture(fn, backend=backend)


def info(f):
    return f.cache_info()


def test_shape_change_recompiles_and_old_entry_is_reused(backend):
    f = captured(lambda x: x * 2 + 1, backend)
    a, b = np.arange(3.0), np.arange(4.0)
    assert_same(a * 2 + 1, f(a))
    assert_same(a * 2 + 1, f(a.copy()))
    assert info(f)[:2] == (1, 1)
    assert_same(b * 2 + 1, f(b))
    assert info(f).entries == 2 and info(f).compiles == 2
    f(a)
    assert info(f).hits == 2 and info(f).misses == 2


def test_dtype_change_recompiles(backend):
    f = captured(lambda x: x / 2, backend)
    for x in (np.arange(4, dtype=np.int32), np.arange(4, dtype=np.float32), np.arange(4.0)):
        assert_same(x / 2, f(x))
    assert info(f).entries == 3


def test_strides_class_change_recompiles():
    f = captured(lambda x: x + 1)
    x = np.arange(12.0).reshape(3, 4)
    assert_same(x + 1, f(x))
    assert_same(x.T + 1, f(x.T))
    assert info(f).entries == 2


def test_bool_flag_recompiles_per_value(backend):
    def g(x, flag):
        return x * 2 if flag else x - 1

    f = captured(g, backend)
    x = np.ones(3)
    assert_same(g(x, True), f(x, True))
    assert_same(g(x, False), f(x, False))
    assert_same(g(x, True), f(x, True))
    assert info(f) == (1, 2, 2, 2)


@pytest.mark.parametrize("s", [0.5, np.float64(0.5), np.float32(0.5), 1, True, np.int64(1)])
def test_scalar_kind_is_guarded_nep50(s):
    def g(x, s):
        return x * s

    f = captured(g)
    x = np.arange(3, dtype=np.float32)
    f(x, 2.0)  # a different entry first: each kind below must not reuse it
    assert_same(g(x, s), f(x, s))
    assert info(f).entries == 2


def test_nan_scalar_reuses_its_entry():
    f = captured(lambda x, s: x + s)
    x = np.ones(2)
    f(x, float("nan"))
    f(x, float("nan"))
    assert info(f) == (1, 1, 1, 1)


G_SCALE = 2.0
G_ARRAY = np.arange(3.0)


def test_global_scalar_change_recompiles():
    global G_SCALE
    f = captured(lambda x: x * G_SCALE)
    x = np.ones(3)
    try:
        assert_same(x * 2.0, f(x))
        G_SCALE = 3.0
        assert_same(x * 3.0, f(x))
        assert info(f).entries == 2
    finally:
        G_SCALE = 2.0


def test_global_array_is_read_at_call_time_not_baked():
    global G_ARRAY
    f = captured(lambda x: x + G_ARRAY)
    x = np.ones(3)
    saved = G_ARRAY
    try:
        assert_same(x + G_ARRAY, f(x))
        G_ARRAY[1] = 100.0  # filled in place by its owner
        assert_same(x + G_ARRAY, f(x))
        G_ARRAY = np.full(3, 7.0)  # rebound to another array of the same kind
        assert_same(x + G_ARRAY, f(x))
        assert info(f).entries == 1
        G_ARRAY = np.ones(5)  # a new shape: a new entry
        with pytest.raises(ValueError):
            f(x)  # broadcast mismatch, as NumPy raises
    finally:
        G_ARRAY = saved


def test_global_array_written_by_the_function():
    ns = {"np": np, "BUF": np.zeros(3)}
    exec("def fill(x):\n    BUF[:] = x * 2\n    return BUF.sum()", ns)
    f = captured(ns["fill"])
    out = f(np.arange(3.0))
    assert_same(np.float64(6.0), out)
    assert_same(np.arange(3.0) * 2, ns["BUF"])


def test_shadowed_builtin_recompiles():
    ns = {"np": np}
    exec("def g(x):\n    return x * len(x)", ns)
    f = captured(ns["g"])
    x = np.ones(4)
    assert_same(x * 4, f(x))
    ns["len"] = lambda a: 10
    assert_same(x * 10, f(x))
    assert info(f).entries == 2


def test_replaced_helper_recompiles():
    ns = {"np": np}
    exec("def helper(x):\n    return x + 1\ndef g(x):\n    return helper(x) * 2", ns)
    f = captured(ns["g"])
    x = np.ones(2)
    assert_same((x + 1) * 2, f(x))
    exec("def helper(x):\n    return x - 1", ns)
    assert_same((x - 1) * 2, f(x))
    assert info(f).entries == 2


def test_helper_code_object_swap_recompiles():
    def helper(x):
        return x + 1

    def g(x):
        return helper(x)

    f = captured(g)
    x = np.ones(2)
    f(x)
    helper.__code__ = (lambda x: x * 5).__code__
    assert_same(x * 5, f(x))


def test_closure_cell_change_recompiles():
    scale = 2.0

    def g(x):
        return x * scale

    f = captured(g)
    x = np.ones(2)
    assert_same(x * 2.0, f(x))
    scale = 5.0  # noqa: F841  (rebinding the cell g reads)
    assert_same(x * 5.0, f(x))
    assert info(f).entries == 2


class Scaler:
    def __init__(self, k, w):
        self.k = k
        self.w = w

    def apply(self, x):
        return x * self.k + self.w


def test_attribute_change_recompiles_array_attribute_is_read_at_call_time():
    f = captured(lambda m, x: m.apply(x))
    m, x = Scaler(2.0, np.zeros(3)), np.ones(3)
    assert_same(m.apply(x), f(m, x))
    m.k = 3.0
    assert_same(m.apply(x), f(m, x))
    assert info(f).entries == 2
    m.w[:] = 5.0
    assert_same(m.apply(x), f(m, x))
    m.w = np.full(3, -1.0)
    assert_same(m.apply(x), f(m, x))
    assert info(f).entries == 2


def test_method_replaced_on_class_recompiles():
    class M:
        def f(self, x):
            return x + 1

    f = captured(lambda m, x: m.f(x))
    m, x = M(), np.ones(2)
    assert_same(x + 1, f(m, x))
    M.f = lambda self, x: x * 3
    assert_same(x * 3, f(m, x))


def test_same_array_twice_is_one_input_and_aliasing_is_guarded(backend):
    def g(x, y):
        x += 1
        return y * 2

    f = captured(g, backend)
    a = np.arange(3.0)
    a2 = a.copy()
    assert_same(g(a2, a2), f(a, a))  # y sees x's update: the same array
    assert_same(a2, a)
    b, c = np.arange(3.0), np.arange(3.0)
    b2, c2 = b.copy(), c.copy()
    assert_same(g(b2, c2), f(b, c))
    assert_same(b2, b)
    assert info(f).entries == 2


def test_partial_overlap_with_a_write_runs_plain_python():
    def g(x, y):
        x += 1
        return y * 2

    f = captured(g)
    a = np.arange(6.0)
    a2 = a.copy()
    assert_same(g(a2[1:], a2[:-1]), f(a[1:], a[:-1]))
    assert_same(a2, a)
    assert "overlap" in f.entries[0].reason.reason


def test_read_only_argument_write_raises_like_numpy():
    def g(x):
        x += 1
        return x

    f = captured(g)
    x = np.ones(3)
    x.flags.writeable = False
    with pytest.raises(ValueError):
        f(x)
    y = np.ones(3)
    assert_same(np.full(3, 2.0), f(y))


def test_list_length_and_dict_keys_are_guarded():
    f = captured(lambda xs: sum(xs))
    a = np.ones(2)
    assert_same(a + a, f([a, a]))
    assert_same(a + a + a, f([a, a, a]))
    g = captured(lambda d: d["a"] * 2 if "b" not in d else d["b"])
    assert_same(a * 2, g({"a": a}))
    assert_same(a, g({"a": a, "b": a}))
    assert info(f).entries == 2 and info(g).entries == 2


def test_recompile_limit_runs_plain_python_with_one_warning():
    dynexpr.config.recompile_limit = 2
    f = captured(lambda x: x + 1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, 6):
            x = np.ones(n)
            assert_same(x + 1, f(x))
    msgs = [str(m.message) for m in w if issubclass(m.category, dynexpr.DynexprWarning)]
    assert len(msgs) == 1 and "<lambda>" in msgs[0] and "shape" in msgs[0], msgs
    assert info(f).entries == 2
    # Each recompile is named with the guard that failed and the value that was seen.
    assert "entry 2: x.shape == (1,) (got (2,))" in msgs[0], msgs[0]
    assert "entry 3: x.shape == (1,) (got (3,)); x.shape == (2,) (got (3,))" in msgs[0]


SCALE_FLAG = 1.0


def test_recompile_history_names_the_failing_guard_and_value():
    global SCALE_FLAG

    def scaled(x):
        return x * SCALE_FLAG

    f = captured(scaled)
    x = np.ones(3)
    for v in (1.0, 2.0, 3.0):
        SCALE_FLAG = v
        assert_same(x * v, f(x))
    SCALE_FLAG = 1.0
    text = str(dynexpr.explain(f, x))
    assert "Recompiles:" in text
    assert "entry 2: SCALE_FLAG == 1.0 (float) (got 2.0)" in text, text
    assert "entry 3: SCALE_FLAG == 1.0 (float) (got 3.0); SCALE_FLAG == 2.0 (float) (got 3.0)" \
        in text, text


# --- guards are data ------------------------------------------------------------------------


def test_guard_is_frozen_data_with_known_kinds():
    g = Guard("SHAPE", ("arg", 0), (3,))
    with pytest.raises(Exception):
        g.kind = "TYPE"
    with pytest.raises(ValueError, match="unknown guard kind"):
        Guard("CODE", ("arg", 0), "x.shape == (3,)")


def test_check_evaluates_guard_lists_without_raising():
    fn = types.FunctionType((lambda x: x).__code__, {"K": 1.0})
    guards = [
        Guard("TYPE", ("arg", 0), np.ndarray),
        Guard("DTYPE", ("arg", 0), np.dtype("float64")),
        Guard("SHAPE", ("arg", 0), (2,)),
        Guard("VALUE", ("global", "K"), 1.0),
    ]
    assert check(guards, [np.ones(2)], fn)
    assert not check(guards, [np.ones(3)], fn)
    assert not check(guards, ["not an array"], fn)  # TYPE fails first; DTYPE never raises
    assert GuardSet(guards).failing([np.ones(2, np.float32)], fn).kind == "DTYPE"
    assert not check([Guard("VALUE", ("global", "missing"), 1)], [], fn)


def test_sources_resolve_access_paths():
    class Holder:
        pass

    o = Holder()
    o.items = {"w": [10, 20]}
    k = 3

    def fn(a):
        return k

    args = [o]
    assert resolve(("item", ("item", ("attr", ("arg", 0), "items"), "w"), 1), args, fn) == 20
    assert resolve(("closure", "k"), args, fn) == 3
    assert resolve(("type", ("arg", 0)), args, fn) is Holder
    assert resolve(("global", "len"), args, fn) is len


def test_strict_equal_keeps_kinds_apart():
    assert not strict_equal(1, 1.0) and not strict_equal(True, 1)
    assert not strict_equal(0.5, np.float32(0.5))
    assert strict_equal([1, (2.0, "a")], [1, (2.0, "a")]) and not strict_equal([1], (1,))
    assert strict_equal(float("nan"), float("nan"))
