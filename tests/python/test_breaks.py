"""Graph breaks: code dynexpr cannot capture runs as plain Python, exactly once per call,
with the same results and exceptions; explain() says why and where."""

import logging

import numpy as np
import pytest
from numpy.linalg import pinv

import dynexpr
from compare import assert_same

CALLS = []


def uses_item(x):
    s = (x * 2).sum().item()
    return x * s


def prints(x):
    print("sum is", float(x.sum()))
    return x + 1


def solves(a, b):
    return np.linalg.solve(a, b) * 2


def data_branch(x):
    if x.sum() > 0:
        return x * 2
    return -x


def side_effect_then_break(x):
    CALLS.append(1)
    return x * float(x[0])


def _inner_break(x):
    return x.tolist()


def outer(x):
    y = x + 1
    return _inner_break(y)


def uses_pinv(a):
    return a / pinv(a).sum()


def uses_with(x):
    with np.errstate(divide="raise"):
        return 1.0 / x


# (function, arguments, words of the reason, source text, graphs around the break)
BREAKS = [
    (uses_item, lambda: (np.arange(3.0),), "item", "s = (x * 2).sum().item()", 2),
    (solves, lambda: (np.eye(3) * 2, np.ones(3)), "numpy.linalg", "np.linalg.solve(a, b)", 1),
    (uses_pinv, lambda: (np.arange(4.0).reshape(2, 2) + np.eye(2),), "numpy.linalg.pinv is not supported",
     "pinv(a)", 1),
    (data_branch, lambda: (np.arange(3.0),), "branch on an array", "if x.sum() > 0:", 2),
    (uses_with, lambda: (np.arange(1.0, 4.0),), "errstate", "with np.errstate", 0),
    (lambda x: x * 2, lambda: (np.ones(2, np.complex128),), "complex128", "lambda x: x * 2", 0),
    (lambda x: x + 1, lambda: (np.ones(2, np.float16),), "float16", "lambda x: x + 1", 0),
    (lambda x: x[[0, 1]], lambda: (np.arange(3.0),), "advanced indexing", "x[[0, 1]]", 0),
    (lambda x: np.cumsum(x), lambda: (np.arange(3.0),), "cumsum", "np.cumsum(x)", 0),
]


@pytest.mark.parametrize(
    "fn, make, reason, source, graphs", BREAKS, ids=lambda v: getattr(v, "__name__", None)
)
def test_break_is_correct_and_explain_says_where(fn, make, reason, source, graphs, backend):
    f = dynexpr.capture(fn, backend=backend)
    assert_same(fn(*make()), f(*make()))
    assert_same(fn(*make()), f(*make()))
    info = f.cache_info()
    assert (info.hits, info.misses, info.entries) == (1, 1, 1)  # the break is remembered
    # Graphs on both sides of a break compile once; a whole-Python break compiles nothing.
    assert info.compiles == (graphs if backend == "cpu" or callable(backend) else info.compiles)
    ex = dynexpr.explain(fn, *make())
    # (a with block adds its own: the code inside it runs as Python too)
    assert ex.graph_count == graphs and ex.graph_break_count == (3 if fn is uses_with else 1)
    r = ex.break_reasons[0]
    assert reason in r.reason, r.reason
    assert r.file == fn.__code__.co_filename and r.line > 0
    assert source in r.source, r.source
    text = str(ex)
    assert f"Graph break count: {ex.graph_break_count}" in text and f"{r.file}:{r.line}" in text
    if graphs:
        assert ex.compiled_op_share >= 0.5 and "run by Python at the breaks" in text


def test_print_happens_exactly_once_per_call(capsys):
    f = dynexpr.capture(prints, backend="eager")
    x = np.arange(3.0)
    assert_same(x + 1, f(x))
    assert_same(x + 1, f(x))
    assert capsys.readouterr().out == "sum is 3.0\n" * 2


def test_side_effects_run_once_per_call():
    f = dynexpr.capture(side_effect_then_break, backend="eager")
    CALLS.clear()
    x = np.arange(1.0, 4.0)
    f(x)
    f(x)
    assert len(CALLS) == 2


def test_break_in_inlined_helper_points_at_the_helper():
    ex = dynexpr.explain(outer, np.arange(3.0))
    r = ex.break_reasons[0]
    assert r.source == "return x.tolist()"
    assert [name for _, _, name in r.stack] == ["outer", "_inner_break"]
    assert "inlined through" in str(ex)


def test_fullgraph_raises_graph_break_error():
    f = dynexpr.capture(uses_item, fullgraph=True, backend="eager")
    with pytest.raises(dynexpr.GraphBreakError) as e:
        f(np.arange(3.0))
    assert "item" in str(e.value) and "uses_item" not in e.value.reason.reason
    assert e.value.reason.line == uses_item.__code__.co_firstlineno + 1


def test_numpy_errors_surface_with_the_same_type(backend):
    cases = [
        (lambda x, y: x + y, (np.ones(3), np.ones(4)), ValueError),
        (lambda x: x.sum(axis=2), (np.ones(3),), np.exceptions.AxisError),
        (lambda x: x**-1, (np.arange(1, 4),), ValueError),
        (lambda x: x.reshape(5), (np.ones(3),), ValueError),
        (lambda x: x[5], (np.ones(3),), IndexError),
        (lambda x: np.max(x), (np.ones(0),), ValueError),
        (lambda x: x + 300, (np.ones(3, np.uint8),), OverflowError),
        (lambda x: x.T @ x[:2], (np.ones((3, 3)),), ValueError),
    ]
    for fn, args, exc in cases:
        f = dynexpr.capture(fn, backend=backend)
        with pytest.raises(exc):
            fn(*args)
        with pytest.raises(exc):
            f(*args)


def test_in_place_cast_error_is_numpys():
    def g(x):
        x += 1.5
        return x

    f = dynexpr.capture(g, backend="eager")
    with pytest.raises(np._core._exceptions._UFuncOutputCastingError):
        f(np.ones(3, np.int64))


def test_long_loops_break_instead_of_unrolling_forever():
    def g(x):
        # i * i is not affine in i, so the body changes every trip and cannot roll
        # (`x + i` rolls: Note [loop-derived scalars] in capture/affine.py).
        for i in range(100_000):
            x = x + i * i
        return x

    f = dynexpr.capture(g, backend="eager")
    assert_same(g(np.zeros(2)), f(np.zeros(2)))
    assert "unroll" in f.entries[0].reason.reason

    def rolls(x):
        for i in range(100_000):
            x = x + i
        return x

    f = dynexpr.capture(rolls, backend="eager")
    assert_same(rolls(np.zeros(2)), f(np.zeros(2)))
    assert f.entries[0].reason is None  # one graph, its loop a loop node


def test_np_diff_with_a_huge_n_stays_small():
    def g(x, n):
        return np.diff(x, n=n) * 2

    # Past the axis' length every further difference is empty, so the graph stops there
    # (NumPy returns the empty array at once too).
    f = dynexpr.capture(g, backend="eager")
    for x in (np.arange(6.0), np.arange(12).reshape(3, 4) % 5, np.arange(4.0) > 1):
        assert_same(g(x, 10**6), f(x, 10**6))
        assert f.entries[-1].reason is None
        assert len(f.entries[-1].translation.graph.canonical().splitlines()) < 60


def test_recursion_breaks_cleanly():
    def fact(n, x):
        return x if n == 0 else fact(n - 1, x * n)

    f = dynexpr.capture(lambda x: fact(40, x), backend="eager")
    assert_same(fact(40, np.ones(2)), f(np.ones(2)))
    assert "deeper" in f.entries[0].reason.reason


def test_graph_break_log(caplog):
    dynexpr.logs.configure("graph_breaks")
    try:
        with caplog.at_level(logging.INFO, logger="dynexpr.graph_breaks"):
            dynexpr.capture(uses_item, backend="eager")(np.arange(3.0))
        assert "item" in caplog.text and "uses_item" in caplog.text
    finally:
        dynexpr.logs.configure("")
