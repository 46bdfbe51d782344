"""Captured calls keep plain Python's contract where translating could betray it:
generator and coroutine functions, NumPy attributes changed at run time, exceptions raised
by the user's objects, and recursion near the stack limit (issue 11)."""

import asyncio
import sys
import types
from unittest import mock

import numpy as np
import pytest
from compare import assert_same

import dynexpr
from dynexpr import GraphBreakError

A = np.arange(5.0)


# --- generator and coroutine functions ---------------------------------------------------


def gen(x):
    yield x * 2
    yield np.sin(x)


def test_a_captured_generator_function_returns_a_generator(backend):
    f = dynexpr.capture(gen, backend=backend)
    for _ in range(2):  # the first call and the cached entry
        got = f(A)
        assert isinstance(got, types.GeneratorType)
        assert_same(list(gen(A)), list(got))


def test_a_generator_function_under_fullgraph_is_a_graph_break():
    with pytest.raises(GraphBreakError, match="gen is a generator function"):
        dynexpr.capture(gen, fullgraph=True)(A)


def test_explain_says_why_a_generator_or_coroutine_runs_as_python():
    async def co(x):
        return x * 2

    for fn, what in ((gen, "a generator function"), (co, "a coroutine function")):
        ex = dynexpr.explain(fn, A)
        assert (ex.graph_count, ex.graph_break_count) == (0, 1)
        r = ex.break_reasons[0]
        assert what in r.reason and "runs the body lazily" in r.reason
        assert r.line == fn.__code__.co_firstlineno and r.source.startswith(("def", "async def"))


def test_coroutines_and_async_generators_run_as_plain_python(backend):
    async def co(x):
        await asyncio.sleep(0)
        return np.exp(x)

    async def agen(x):
        yield x + 1
        yield x * 3

    async def collect(ag):
        return [v async for v in ag]

    @types.coroutine
    def legacy(x):
        yield
        return x - 1

    async def drive(c):
        return await c

    assert_same(asyncio.run(co(A)), asyncio.run(dynexpr.capture(co, backend=backend)(A)))
    ag = dynexpr.capture(agen, backend=backend)(A)
    assert isinstance(ag, types.AsyncGeneratorType)
    assert_same(asyncio.run(collect(agen(A))), asyncio.run(collect(ag)))
    got = dynexpr.capture(legacy, backend=backend)(A)
    assert isinstance(got, types.GeneratorType)
    assert_same(asyncio.run(drive(legacy(A))), asyncio.run(drive(got)))


def test_a_generator_used_inside_a_captured_function_is_still_followed(backend):
    def f(x):
        return list(gen(x)), sum(v for v in gen(x))

    cf = dynexpr.capture(f, backend=backend)
    assert_same(f(A), cf(A))
    assert cf.entries[0].compiled is not None  # captured, not a break entry


def test_a_generator_object_that_escapes_is_the_real_generator(backend):
    def returns_it(x):
        return gen(x + 1)

    def steps_it(x):
        g = gen(x)
        first = next(g)
        print("between")  # a break while the generator is suspended
        return first, list(g)

    def throws_into_it(x):
        return (v for v in gen(x)).throw(KeyError("thrown"))

    got = dynexpr.capture(returns_it, backend=backend)(A)
    assert isinstance(got, types.GeneratorType)
    assert_same(list(returns_it(A)), list(got))
    assert_same(steps_it(A), dynexpr.capture(steps_it, backend=backend)(A))
    with pytest.raises(KeyError, match="thrown"):
        dynexpr.capture(throws_into_it, backend=backend)(A)


# --- branches on array data (3.13's TO_BOOL) ----------------------------------------------


def test_a_comparison_feeding_a_branch_stays_in_the_graph(backend):
    def branchy(x):
        if x.max() < 10:
            y = x * 2
        else:
            y = x
        if not (x.sum() >= 0):
            y = -y
        return y + (x > 1).any()

    ex = dynexpr.explain(branchy, A)
    # the max and its comparison, the sum and its comparison, the product: all in graphs
    # on every CPython version (3.13's TO_BOOL must not pull the comparison out of them)
    assert ex.compiled_op_share == 1.0, str(ex)
    cf = dynexpr.capture(branchy, backend=backend)
    for x in (A, A * 5, -A - 1):
        assert_same(branchy(x), cf(x))


# --- NumPy attributes are guarded ----------------------------------------------------------


def five(x):
    return np.sin(x) + np.exp(x) * np.cos(x) - np.tanh(x) + np.sqrt(np.abs(x))


def test_a_replaced_numpy_function_is_seen_and_restoring_it_hits_the_cache(backend, monkeypatch):
    cf = dynexpr.capture(five, backend=backend)
    assert_same(five(A), cf(A))
    monkeypatch.setattr(np, "sin", np.cos)
    assert_same(five(A), cf(A))  # plain Python now computes cos twice
    assert cf.cache_info().entries == 2
    monkeypatch.undo()
    hits = cf.cache_info().hits
    assert_same(five(A), cf(A))
    assert cf.cache_info().entries == 2 and cf.cache_info().hits == hits + 1


def test_the_c_and_python_guard_checks_agree_on_module_attributes(monkeypatch):
    from dynexpr import _native
    from dynexpr.guards import GuardSet

    def f(x):
        return np.sin(x) + np.linalg.norm(x)

    cf = dynexpr.capture(f, backend="eager")
    cf(A)
    guards = cf.entries[0].guards.guards
    assert any(g.source == ("attr", ("attr", ("global", "np"), "linalg"), "norm")
               for g in guards)
    py, c = GuardSet(guards), _native.GuardSet(guards)
    for patch in (None, (np, "sin"), (np.linalg, "norm"), (np, "linalg")):
        if patch is not None:
            monkeypatch.setattr(*patch, types.SimpleNamespace(norm=None))
        assert py.holds((A,), f) == c.check((A,), f) == (patch is None)
        monkeypatch.undo()


def test_mock_patch_of_a_numpy_function_is_honoured(backend):
    cf = dynexpr.capture(five, backend=backend)
    cf(A)
    with mock.patch("numpy.exp", side_effect=lambda x: x + 100.0) as patched:
        assert_same(five(A), cf(A))
        assert patched.call_count == 2  # once by plain Python, once by the captured call
    assert_same(five(A), cf(A))


def test_nested_numpy_module_attributes_are_guarded(backend, monkeypatch):
    def f(x):
        return np.linalg.norm(x) * x

    cf = dynexpr.capture(f, backend=backend)
    assert_same(f(A), cf(A))
    monkeypatch.setattr(np.linalg, "norm", lambda x: np.float64(2.0))
    assert_same(f(A), cf(A))


exp = np.exp  # `from numpy import exp`: a global of this module


def test_a_numpy_function_imported_as_a_global_is_guarded(backend, monkeypatch):
    def f(x):
        return exp(x) + 1

    cf = dynexpr.capture(f, backend=backend)
    assert_same(f(A), cf(A))
    monkeypatch.setitem(globals(), "exp", np.negative)
    assert_same(f(A), cf(A))


# --- exceptions raised by the user's objects ----------------------------------------------


class _Raises:
    calls = 0

    def _boom(self, what):
        type(self).calls += 1
        raise RuntimeError(f"boom in {what}")


class GetAttribute(_Raises):
    def __getattribute__(self, name):
        if name in ("_boom", "calls"):
            return object.__getattribute__(self, name)
        self._boom("__getattribute__")


class Len(_Raises):
    def __len__(self):
        self._boom("__len__")


class Array(_Raises):
    def __array__(self, dtype=None, copy=None):
        self._boom("__array__")


class Bool(_Raises):
    def __bool__(self):
        self._boom("__bool__")


class Prop(_Raises):
    @property
    def v(self):
        self._boom("a property")


CASES = [
    (GetAttribute, lambda o, x: o.v + x),
    (Len, lambda o, x: len(o) + x),
    (Array, lambda o, x: np.asarray(o) + x),
    (Array, lambda o, x: np.add(o, x)),
    (Bool, lambda o, x: x * 2 if o else x),
    (Prop, lambda o, x: x * 2 + o.v),
    (GetAttribute, lambda o, x: x * isinstance(o, np.ndarray)),  # asks o for __class__
]


@pytest.mark.parametrize("cls, fn", CASES, ids=[c.__name__ + str(i) for i, (c, _) in
                                                 enumerate(CASES)])
def test_the_users_exception_is_raised_once_as_in_plain_python(backend, cls, fn):
    cls.calls = 0
    with pytest.raises(RuntimeError) as plain:
        fn(cls(), A)
    assert cls.calls == 1
    cf = dynexpr.capture(fn, backend=backend)
    for k in (2, 3):  # the call that translates, and the one that finds its entry
        with pytest.raises(RuntimeError) as got:
            cf(cls(), A)
        assert type(got.value) is type(plain.value) and str(got.value) == str(plain.value)
        assert cls.calls == k


def test_isinstance_asks_a_mock_for_its_class_as_python_does(backend):
    def f(o, x):
        return x * 2 if isinstance(o, np.ndarray) else x

    o = mock.Mock(spec=np.ndarray)  # its __class__ says ndarray
    assert_same(f(o, A), dynexpr.capture(f, backend=backend)(o, A))


# --- recursion --------------------------------------------------------------------------


def helper(x, n):
    if n == 0:
        return x
    return helper(x, n - 1) + 1


def uses_helper(x, n):
    return helper(x * 2, n)


def _depth():
    f, n = sys._getframe(1), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


def _at_headroom(frames, call):
    """call() with about `frames` frames left below the recursion limit."""
    def down():
        if sys.getrecursionlimit() - _depth() > frames:
            return down()
        return call()

    return down()


@pytest.mark.parametrize("n", [20, 200, 800])
def test_recursion_plain_python_completes_near_the_stack_limit(backend, n):
    if sys.getrecursionlimit() - _depth() < n + 60:
        pytest.fail("the test itself runs too deep for this recursion limit")
    want = _at_headroom(n + 40, lambda: uses_helper(A, n))
    cf = dynexpr.capture(uses_helper, backend=backend)
    for _ in range(2):
        assert_same(want, _at_headroom(n + 40, lambda: cf(A, n)))
    assert_same(uses_helper(A, n), cf(A, n))  # from a shallow stack it captures again


def test_recursion_that_plain_python_cannot_complete_raises_recursion_error(backend):
    def forever(x):
        return forever(x) + 1

    with pytest.raises(RecursionError):
        dynexpr.capture(forever, backend=backend)(A)


def test_recursive_fibonacci(backend):
    def fib(x, n):
        return x if n < 2 else fib(x, n - 1) + fib(x, n - 2)

    @dynexpr.capture(backend=backend)
    def fib_scalar(n):
        return n if n < 2 else fib_scalar(n - 1) + fib_scalar(n - 2)

    cf = dynexpr.capture(fib, backend=backend)
    for n in (12, 18):  # 18: a call tree of 8361 calls, beyond what is unrolled
        assert_same(fib(A, n), cf(A, n))
    assert "fib was inlined into itself with array work" in cf.entries[-1].reason.reason
    assert fib_scalar(18) == 2584
