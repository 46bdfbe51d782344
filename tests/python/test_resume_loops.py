"""A graph break inside a loop: the rest of the call runs as real bytecode (Note
[resume code] in capture/resume_code.py, segments.Segments._real), not one interpreted
instruction and one guard selection at a time. Every call is compared with plain
NumPy: results, dtypes, argument mutations, exceptions."""

import copy

import numpy as np
import pytest

import dynexpr
from compare import assert_same


def adler32(data):
    a, b = 1, 0
    for byte in data:
        a = (a + int(byte)) % 65521
        b = (b + a) % 65521
    return (b << 16) | a


def recurrence(x, steps):
    acc = x * 0.5
    for _ in range(steps):
        s = float(np.abs(acc).max())  # a break every iteration
        acc = acc * 0.5 + x / (1.0 + s)
    return acc, acc.sum()


def fill_rows(a):
    out = np.zeros_like(a)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if a[i, j].item() > 0:  # the break is in the inner loop
                out[i, j] = a[i, j] * 2
        a[i] += 1  # the caller's array changes
    return out


def try_in_loop(x, ks):
    y = x * 2.0
    out = []
    for k in ks:
        try:
            out.append(float(y.sum()) / k)
        except ZeroDivisionError:
            out.append(None)
    return y + 1, out


def raises_in_loop(x):
    y = x + 1
    for i in range(5):
        if float(y[i]) > 3:
            y[i + 10] = 0  # IndexError on the third turn
    return y


def with_closure(k):
    scale = np.float32(k)

    def inner(x):
        acc = x * scale
        for _ in range(3):
            acc = acc + float(acc.mean()) * scale
        return acc

    return inner


def _bytes(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, n).astype(np.uint8)


CASES = [
    (adler32, lambda: (_bytes(300),)),
    (adler32, lambda: (_bytes(17, 1),)),
    (recurrence, lambda: (np.linspace(-1.0, 2.0, 50), 12)),
    (recurrence, lambda: (np.linspace(-1.0, 2.0, 50).astype(np.float32), 3)),
    (fill_rows, lambda: (np.arange(-4.0, 8.0).reshape(3, 4),)),
    (try_in_loop, lambda: (np.arange(4.0), [1, 0, 2])),
    (with_closure(2), lambda: (np.arange(5, dtype=np.float32),)),
]


def _call(fn, args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001 - compared with the plain call's
        return "raised", (type(e), str(e))


@pytest.mark.parametrize("fn, make", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in
                                                  enumerate(CASES)])
def test_break_in_loop_runs_as_real_code_and_matches_numpy(fn, make):
    f = dynexpr.capture(fn, backend="eager")
    for _ in range(3):
        plain_args, args = make(), make()
        expected, got = _call(fn, plain_args), _call(f, args)
        assert expected[0] == got[0]
        assert_same(expected[1], got[1])
        for e, g in zip(plain_args, args):
            assert_same(e, g, "an argument after the call")
    # No resume point was selected or translated inside the loop: the rest of the call
    # ran as CPython, from one resume function.
    assert f._segments.entries == 0
    assert [k for k, v in f._segments.real.items() if v is not None]
    assert f.cache_info().entries == 1


def test_compiled_backend_before_the_loop(backend):
    f = dynexpr.capture(recurrence, backend=backend)
    x = np.linspace(-1.0, 2.0, 64)
    for steps in (5, 5, 9):
        assert_same(recurrence(x, steps), f(x, steps))
    assert f._segments.entries == 0


def test_exception_after_the_break_is_the_plain_one_at_the_users_line():
    f = dynexpr.capture(raises_in_loop, backend="eager")
    with pytest.raises(IndexError) as plain:
        raises_in_loop(np.arange(5.0))
    with pytest.raises(IndexError) as mine:
        f(np.arange(5.0))
    assert str(mine.value) == str(plain.value)
    last = mine.traceback[-1]
    assert last.frame.code.raw.co_filename == raises_in_loop.__code__.co_filename
    assert last.lineno == plain.traceback[-1].lineno


def test_switched_off_resumes_through_the_interpreter():
    dynexpr.config.resume_as_code = False
    f = dynexpr.capture(adler32, backend="eager")
    data = _bytes(40)
    assert f(data) == adler32(data)
    assert f._segments.entries >= 1
    assert not f._segments.real


def test_explain_counts_the_loop_as_python():
    ex = dynexpr.explain(recurrence, np.linspace(-1.0, 2.0, 8), 4)
    assert ex.graph_count == 1 and ex.graph_break_count == 1
    assert ex.python_ops >= 4  # the array ops of the loop's turns after the break


def test_break_outside_a_loop_keeps_compiled_segments():
    def two_chains(x):
        y = np.tanh(x) * 2.0
        s = y.sum().item()
        return y * s + 1.0

    f = dynexpr.capture(two_chains, backend="eager")
    x = np.linspace(0.0, 1.0, 9)
    for _ in range(2):
        assert_same(two_chains(copy.deepcopy(x)), f(x))
    assert f._segments.entries == 1 and not f._segments.real


def _holds_iterator(t) -> bool:
    return isinstance(t, tuple) and (t[:1] == ("iter",) or t[:1] == ("listiter",) or any(
        _holds_iterator(c) for c in t))


@pytest.mark.parametrize("fn, make", [CASES[0], CASES[2], CASES[4]], ids=["bytes", "range",
                                                                           "nested"])
def test_the_segment_before_the_loop_stops_where_the_loop_starts(fn, make):
    # Stopped at the loop's start, the frame holds the iterable (an array, a range), not
    # an iterator that each call would rebuild item by item.
    f = dynexpr.capture(fn, backend="eager")
    args = make()
    assert_same(fn(*make()), f(*args))
    r = f.entries[0].resume
    assert not any(_holds_iterator(t) for t in r.locals_t + r.stack_t), r
    insts = list(__import__("dis").get_instructions(fn))
    assert insts[r.ip].opname == "GET_ITER"
