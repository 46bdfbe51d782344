"""What happens when a compiled kernel runs, compared with plain NumPy (issue 11):

- arrays NumPy computes with but a kernel cannot read in place (unaligned record fields,
  non-native byte order, read-only views) give NumPy's results, and in-place updates of
  such arguments reach the caller's array;
- NumPy's floating-point error state (np.errstate / np.seterr / np.seterrcall) is
  honoured: the same kinds of RuntimeWarning, FloatingPointError or callback as NumPy,
  on small arrays (vector tails), large ones (the thread pool) and on both backends,
  and ordinary inputs raise nothing NumPy does not (Note [floating-point errors] in
  bridge/dynexpr/fperr.py)."""

import re
import warnings

import numpy as np
import pytest

import dynexpr

from compare import assert_same

# -------------------------------------------------------------- unusual input arrays


def record_field(n=7):
    rec = np.zeros(n, dtype=[("a", "f8"), ("b", "i4")])  # itemsize 12: 'a' is unaligned
    rec["a"] = np.linspace(-2.0, 3.0, n)
    rec["b"] = np.arange(n)
    return rec


def scale(x):
    return x * 2.0 + 1.0


def bump(x):
    x += 1.5
    return x * 2.0


def test_record_field_unaligned_input(backend):
    rec = record_field()
    assert not rec["a"].flags.aligned
    f = dynexpr.capture(scale, backend=backend)
    for _ in range(3):  # the capture call and cache hits
        assert_same(scale(rec["a"]), f(rec["a"]))


def test_record_field_unaligned_mutated_in_place(backend):
    want, got = record_field(), record_field()
    f = dynexpr.capture(bump, backend=backend)
    for _ in range(3):
        assert_same(bump(want["a"]), f(got["a"]))
        assert_same(want, got)  # the caller's record array saw every update


def test_unaligned_contiguous_buffer(backend):
    raw = bytearray(8 * 9 + 1)

    def view():
        return np.frombuffer(raw, dtype=np.float64, count=9, offset=1)

    view()[:] = np.arange(9.0)
    assert not view().flags.aligned
    ref = view().copy()
    f = dynexpr.capture(bump, backend=backend)
    expected = bump(ref)
    assert_same(expected, f(view()))
    assert_same(ref, view().copy())


@pytest.mark.parametrize("dtype", [">f8", ">f4", ">i4", ">i8"])
def test_byte_swapped_input(backend, dtype):
    x = np.arange(1, 12, dtype=dtype)
    assert not x.dtype.isnative
    f = dynexpr.capture(scale, backend=backend)
    for _ in range(2):
        assert_same(scale(x), f(x))


def test_byte_swapped_mutated_in_place(backend):
    want, got = np.arange(9, dtype=">f8"), np.arange(9, dtype=">f8")
    f = dynexpr.capture(bump, backend=backend)
    for _ in range(2):
        assert_same(bump(want), f(got))
        assert got.dtype == np.dtype(">f8")
        assert_same(want, got)


def test_read_only_inputs(backend):
    base = np.arange(12.0)
    ro = base.copy()
    ro.setflags(write=False)
    frozen = np.frombuffer(np.arange(12.0).tobytes(), dtype=np.float64)  # read-only memory
    bcast = np.broadcast_to(np.float64(3.0), (12,))  # read-only, stride 0
    f = dynexpr.capture(scale, backend=backend)
    for x in (ro, frozen, bcast, ro[::2], frozen[1:]):
        assert not x.flags.writeable
        assert_same(scale(x), f(x))


def test_read_only_mutated_raises_like_numpy(backend):
    ro = np.arange(6.0)
    ro.setflags(write=False)
    with pytest.raises(ValueError) as np_err:
        bump(ro)
    f = dynexpr.capture(bump, backend=backend)
    with pytest.raises(ValueError) as dx_err:
        f(ro)
    assert "read-only" in str(np_err.value) and "read-only" in str(dx_err.value)
    assert_same(np.arange(6.0), ro)


def test_unaligned_with_background_compile():
    # The NumPy tier took the first call; the kernel must take the later ones too.
    dynexpr.config.background_compile = True
    rec = record_field(33)

    def chain(x):
        return np.sqrt(x * x + 0.25) - x * (0.5 + 1e-9 * 7)

    f = dynexpr.capture(chain)
    assert_same(chain(rec["a"]), f(rec["a"]))
    assert dynexpr.synchronize(timeout=300)
    for _ in range(2):
        assert_same(chain(rec["a"]), f(rec["a"]))
    assert type(f.entries[0].compiled).__name__ == "Kernel"


# ---------------------------------------------------------- floating-point error state

KINDS = {"divide by zero": "divide", "overflow": "over", "underflow": "under",
         "invalid value": "invalid"}
_KIND_RE = re.compile("(" + "|".join(KINDS) + ") encountered in")


class _Calls:
    def __init__(self):
        self.kinds = []

    def __call__(self, kind, flags):
        self.kinds.append(kind)


class _Log:
    def __init__(self):
        self.lines = []

    def write(self, text):
        self.lines.append(text)


def outcome(fn, args, mode, under=None):
    """(result, exception type, {kinds warned / called / logged}) of fn(*args) under
    np.errstate(all=mode) (and under=under if given)."""
    sink = _Calls() if mode == "call" else _Log() if mode == "log" else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(all=mode, call=sink, **({"under": under} if under else {})):
            try:
                result, exc = fn(*args), None
            except FloatingPointError as e:
                result, exc = None, e
    kinds = set()
    for w in caught:
        if issubclass(w.category, RuntimeWarning):
            kinds.update(KINDS[m] for m in _KIND_RE.findall(str(w.message)))
    if isinstance(sink, _Calls):
        kinds.update(KINDS[k] for k in sink.kinds)
    if isinstance(sink, _Log):
        kinds.update(KINDS[m] for line in sink.lines for m in _KIND_RE.findall(line))
    if exc is not None:
        kinds.update(KINDS[m] for m in _KIND_RE.findall(str(exc)))
    return result, type(exc) if exc else None, kinds


def assert_same_outcome(fn, args, mode, backend):
    want = outcome(fn, [a.copy() for a in args], mode)
    f = dynexpr.capture(fn, backend=backend)
    for _ in range(2):  # the capture call and a cache hit
        got = outcome(f, [a.copy() for a in args], mode)
        assert got[1] is want[1], f"{mode}: raised {got[1]}, NumPy raised {want[1]}"
        assert got[2] == want[2], f"{mode}: reported {got[2]}, NumPy reported {want[2]}"
        if want[1] is None:
            assert_same(want[0], got[0])
    return want


def div0(x):
    return x / 0.0


def zero_by_zero(x):
    return (x * 0.0) / 0.0


def exp_big(x):
    return np.exp(x * 1000.0)


def sqrt_neg(x):
    return np.sqrt(x - 10.0)


def log0(x):
    return np.log(x * 0.0)


def int_floordiv0(x):
    return x // 0


def int_mod0(x):
    return x % 0


def ordinary_math(x):
    return np.tanh(x) + np.exp(x) + np.log(x + 3.0) + np.sqrt(x + 3.0) + x / (x + 5.0)


FLOAT_CASES = [(div0, "divide"), (zero_by_zero, "invalid"), (exp_big, "over"),
               (sqrt_neg, "invalid"), (log0, "divide")]
MODES = ["raise", "warn", "ignore", "call", "log"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn,kind", FLOAT_CASES, ids=[c[0].__name__ for c in FLOAT_CASES])
def test_float_errors_follow_errstate(backend, fn, kind, dtype, mode):
    x = np.linspace(1.0, 2.0, 7, dtype=dtype)  # 7: a vector tail
    want = assert_same_outcome(fn, [x], mode, backend)
    assert (kind in want[2]) == (mode != "ignore")  # the case tests what it says


@pytest.mark.parametrize("mode", ["raise", "warn", "call"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("fn", [int_floordiv0, int_mod0])
def test_integer_division_by_zero(backend, fn, dtype, mode):
    x = np.arange(-5, 6, dtype=dtype)
    want = assert_same_outcome(fn, [x], mode, backend)
    assert "divide" in want[2]


@pytest.mark.parametrize("n", [1, 7, 1000, 300_001])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ordinary_inputs_raise_nothing(backend, n, dtype):
    x = np.linspace(-2.0, 2.0, n, dtype=dtype)
    f = dynexpr.capture(ordinary_math, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            want = ordinary_math(x)
            for _ in range(2):
                assert_same(want, f(x))


def special_values(dtype, n):
    x = np.linspace(-3.0, 3.0, n).astype(dtype)
    x[::5] = np.nan
    x[1::7] = np.inf
    x[2::11] = -np.inf
    return x


def nan_friendly(x):
    # Nothing here warns in NumPy, whatever the NaNs and infinities.
    y = np.maximum(x, 0.0) + np.minimum(x, 1.0) + np.where(x < 0.5, x, 2.0)
    return y, np.isnan(x) | (x >= 1.0), np.clip(x, -1.0, 1.0), np.abs(x) * 2.0


def nan_math(x):
    return np.exp(x), np.tanh(x), np.arctan(x), np.sin(np.clip(x, -5.0, 5.0))


def nan_elements(x):
    # 0-d comparisons of a NaN element (Note [quiet comparisons]): quiet in NumPy.
    return x[0] < x[1], x[0] >= x[2], x[3] > x[0], x[1] <= x[0]


@pytest.mark.parametrize("fn", [nan_friendly, nan_math, nan_elements])
@pytest.mark.parametrize("n", [9, 4099])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_and_inf_inputs_like_numpy(backend, fn, n, dtype):
    assert_same_outcome(fn, [special_values(dtype, n)], "call", backend)


@pytest.mark.parametrize("mode", ["raise", "warn", "call"])
def test_errors_from_every_pool_thread(backend, mode):
    """One zero divisor per call, at positions spread over the array: whichever thread
    of the pool runs the chunk holding it, NumPy's report must come."""
    saved = dynexpr.config.num_threads
    dynexpr.config.num_threads = 4
    try:
        n = 1 << 19
        f = dynexpr.capture(lambda x, y: x / y + 1.0, backend=backend)
        x = np.ones(n)
        for pos in (0, n // 3, n // 2, 2 * n // 3, n - 1):
            y = np.full(n, 2.0)
            y[pos] = 0.0
            want = outcome(lambda a, b: a / b + 1.0, [x, y], mode)
            got = outcome(f, [x, y], mode)
            assert want[1:] == got[1:], f"zero at {pos}: {got[1:]}, NumPy {want[1:]}"
    finally:
        dynexpr.config.num_threads = saved


def test_warning_names_the_callers_line(backend):
    f = dynexpr.capture(div0, backend=backend)
    x = np.ones(5)
    with np.errstate(divide="ignore"):
        f(x)  # capture first: only the cache hit below is checked
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(x)
    [w] = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert str(w.message) == "divide by zero encountered in divide"  # NumPy's words
    assert w.filename == __file__


def test_report_names_the_ops_that_can_raise_it(backend):
    def chain(x):
        return np.exp(x * 1000.0) + np.sqrt(x - 10.0)

    f = dynexpr.capture(chain, backend=backend)
    x = np.ones(5)
    with np.errstate(all="ignore"):
        f(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(x)
    got = sorted(str(w.message) for w in caught)
    if backend == "eager":  # op by op, as NumPy
        assert got == ["invalid value encountered in sqrt", "overflow encountered in exp"]
    else:  # one fused loop: the graph's ops that can raise each kind, in graph order
        inv, over = got
        assert inv.startswith("invalid value encountered in dynexpr kernel ("), inv
        assert over.startswith("overflow encountered in dynexpr kernel ("), over
        inv_ops = set(inv[inv.index("(") + 1:-1].split(", "))
        over_ops = set(over[over.index("(") + 1:-1].split(", "))
        assert "sqrt" in inv_ops and "exp" not in inv_ops, inv
        assert "exp" in over_ops and "sqrt" not in over_ops, over


def test_seterr_outside_errstate(backend):
    f = dynexpr.capture(div0, backend=backend)
    old = np.seterr(divide="raise")
    try:
        with pytest.raises(FloatingPointError, match="divide by zero encountered in"):
            f(np.ones(3))
    finally:
        np.seterr(**old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(divide="ignore"):
            assert_same(div0(np.ones(3)), f(np.ones(3)))


def test_underflow_follows_errstate(backend):
    def tiny(x):
        return x * 1e-300

    x = np.full(5, 1e-300)
    for mode in ("ignore", "raise", "warn"):
        want = outcome(tiny, [x], mode)
        f = dynexpr.capture(tiny, backend=backend)
        got = outcome(f, [x], mode)
        assert want[1:] == got[1:], mode


SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 30.0, 100.0, 400.0, 710.0, -745.0, 1e30,
           np.inf, -np.inf, np.nan]
UNARY = ["exp", "exp2", "expm1", "log", "log1p", "sqrt", "sin", "tan", "tanh", "sinh", "cosh",
         "arcsin", "arctan", "arcsinh", "arccosh", "arctanh", "reciprocal"]
BINARY = ["divide", "floor_divide", "remainder", "power", "arctan2", "hypot", "maximum"]


def _op_cases():
    for name in UNARY + BINARY:
        for dtype in ("float32", "float64"):
            yield pytest.param(name, dtype, id=f"{name}-{dtype}")


@pytest.mark.parametrize("name,dtype", list(_op_cases()))
def test_special_values_raise_what_numpy_raises(name, dtype):
    """Each op on each special value alone (NaN, infinities, zeros, huge, out of
    domain), in a 9-element array (one packet and a tail): the divide / overflow /
    invalid reports are NumPy's. (Underflow inside some of the SIMD math differs from
    NumPy's for subnormal and extreme arguments; NumPy ignores underflow by default.)"""
    uf = getattr(np, name)
    fn = (lambda x, y: uf(x, y)) if name in BINARY else (lambda x: uf(x))
    f = dynexpr.capture(fn)
    seconds = [1.0, 0.0, -2.5, np.nan, np.inf] if name in BINARY else [None]
    for v in SPECIAL:
        for w in seconds:
            if name == "power" and w == np.inf and abs(v) > 1:
                # NumPy's own float32 power reports "overflow" for power(1e30, inf) and
                # its float64 one does not (C99's pow raises nothing: inf is exact).
                continue
            args = [np.full(9, v, dtype=dtype)] + ([] if w is None else [np.full(9, w, dtype)])
            want = outcome(fn, args, "call", under="ignore")
            got = outcome(f, args, "call", under="ignore")
            assert got[2] == want[2], f"{name}{(v,) if w is None else (v, w)}: {got[2]}, NumPy {want[2]}"
            assert_same(want[0], got[0])


def test_print_mode_writes_numpy_s_line(backend, capfd):
    x = np.ones(5)
    f = dynexpr.capture(div0, backend=backend)
    with np.errstate(divide="ignore"):
        f(x)  # capture first
    capfd.readouterr()
    with np.errstate(divide="print"):
        want = div0(x)
        numpy_err = capfd.readouterr().err
        got = f(x)
        ours = capfd.readouterr().err
    assert_same(want, got)
    assert numpy_err.startswith("Warning: divide by zero encountered in")
    assert ours.startswith("Warning: divide by zero encountered in"), ours


def quiet_block(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(x) / x
    return np.where(np.isfinite(y), y, 0.0)


def quiet_divide_only(x):
    with np.errstate(divide="ignore"):
        a = 1.0 / x
    return a + np.sqrt(x - 10.0)  # 'invalid' outside the block is still reported


@pytest.mark.parametrize("mode", ["warn", "raise", "call"])
@pytest.mark.parametrize("fn", [quiet_block, quiet_divide_only])
def test_errstate_inside_the_captured_function(backend, fn, mode):
    """Note [errstate inside captured code]: the function's own np.errstate blocks
    silence what they silence in NumPy, whatever the caller's error state."""
    x = np.array([0.0, -1.0, 0.5, 2.0, 3.0, 0.0, 7.0])
    assert_same_outcome(fn, [x], mode, backend)
