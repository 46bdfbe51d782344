"""Graph breaks with compiled code on both sides (Note [resuming after a graph break]):
the instruction that breaks runs as plain Python, the array work before and after it
runs in graphs, and every call gives what plain NumPy gives: results, argument
mutations, object identity, printed output and exceptions."""

import copy
import logging

import numpy as np
import pytest

import dynexpr
from compare import assert_same

LOG = logging.getLogger("test_resume")


def _unknown(a):  # a Python function dynexpr cannot inline (it uses a set comprehension)
    return a * len({1, 2})


class Box:
    def __init__(self, x):
        self.x = x


def item(x):
    y = np.tanh(x) * 2.0
    s = y.sum().item()
    return y * s + 1.0


def tolist(x):
    y = x * 2
    values = y.tolist()
    return y + len(values), values


def conversions(x):
    y = x * 3
    f, i, b = float(y[0]), int(y.sum()), bool(y[1] > 0)
    return y * f + i, b


def data_branch(x):
    y = np.exp(x)
    if y.sum() > 10:
        y = y / y.sum()
    else:
        y = y * 2
    return y + 1


def prints(x):
    y = x + 1
    print("total", y.sum())
    return y * 2


def logs(x):
    y = x * 2
    LOG.warning("max %s", y.max())
    return y - 1


def warns(x):
    y = x * 2
    with np.errstate(divide="warn"):
        z = 1.0 / (y - y)  # NumPy's RuntimeWarning, run as Python
    return np.asarray(np.nan_to_num(z).tolist()) + y  # .tolist(): the break


def frames(x):
    import sys

    y = x * 2
    depth = len(sys._getframe().f_code.co_name)
    return y + depth


def unknown_call(x):
    y = x * 2
    z = _unknown(y)
    return z + y


def linalg(a, b):
    c = a * 2
    return np.linalg.solve(c, b) + 1


def fft_sort(x):
    y = x * 2
    z = np.sort(y)
    return np.abs(np.fft.fft(z)).astype(np.float64) + y


def mask_index(x):
    y = x * 2
    z = y[y > 0]
    w = y[[0, 2]]
    return z.sum() + w, z * 3


def mutations(x, out):
    x += 1  # into the caller's array, before the break
    v = x[1:]
    s = float(x.sum())
    v *= s  # through a view, after it
    out[...] = x * 2
    return out


def identity(x):
    t = x * 2
    u = t
    v = t[::2]
    print(float(v.sum()))
    v += 1  # writes t (and u, the same object) through the view
    return t, u, v


def lists(x):
    acc = [x * 2]
    n = int(x.sum())
    acc.append(x + n)
    return acc


def loop(x, n):
    acc = np.zeros_like(x)
    for i in range(n):
        acc = acc + x * i
        if float(acc.sum()) > 50:
            break
    return acc


def raises(x):
    y = x * 2
    if y.sum() < 0:
        raise ValueError("negative total")
    return y


def keyword_call(x):
    y = x * 2
    print("y", y.sum(), sep="=", end="!\n")
    return np.clip(y, a_min=0, a_max=3)


def try_except(x):
    y = np.tanh(x) * 2
    try:
        s = float(y)  # TypeError unless y has one element
    except TypeError:
        s = float(y.sum())
    return y * s


def finally_block(x, log):
    y = x + 1
    try:
        if y.sum() > 100:
            raise ValueError("big")
        y = y * 2
    finally:
        log.append(float(y.sum()))
    return y - 1


def reraise(x):
    y = x * 2
    try:
        return float(y) * y
    except TypeError:
        raise ValueError("not a scalar") from None


def chained(x):
    try:
        return float(x)
    except TypeError:
        raise ValueError("not a scalar")  # __context__ is the TypeError


class Swallow:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(kind.__name__ if kind else None)
        return True


def with_manager(x, log):
    y = x * 3
    with Swallow(log):
        y = y + float(y.sum())
        raise KeyError("swallowed")
    return y * 2


def with_errstate(x):
    y = x * 2 - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log(y)
        print("nans", int(np.isnan(z).sum()))
    return np.nan_to_num(z) + y


def generator_of_arrays(x):
    yield x * 2
    print(float(x.sum()))
    yield x + 1


def attribute_model(m, x):
    y = m.x * x
    m.last = float(y.sum())  # a side effect on a user object
    return y + m.last


def _f64(n=6, lo=-2.0):
    return np.linspace(lo, 3.0, n)


CASES = [
    (item, lambda: (_f64(),), 2),
    (tolist, lambda: (_f64(),), 2),
    (conversions, lambda: (_f64(),), 2),
    (data_branch, lambda: (_f64(),), 2),
    (data_branch, lambda: (_f64(lo=-9.0) - 5,), 2),
    (prints, lambda: (_f64(),), 2),
    (unknown_call, lambda: (_f64(),), 2),
    (logs, lambda: (_f64(),), 2),
    (warns, lambda: (_f64(),), 2),
    (linalg, lambda: (np.eye(3) + 0.5, np.ones(3)), 2),
    (fft_sort, lambda: (_f64(),), 2),
    (mask_index, lambda: (_f64(),), 2),
    (mutations, lambda: (_f64(), np.zeros(6)), 2),
    (identity, lambda: (_f64(),), 2),
    (lists, lambda: (_f64(),), 2),
    # A break inside a loop: the rest of the call runs as real bytecode (Note [resume
    # code]), so the graph before the break is the only one (test_resume_loops.py).
    (loop, lambda: (_f64(), 4), 1),
    (loop, lambda: (_f64(), 40), 1),
    (raises, lambda: (_f64(),), 1),
    (keyword_call, lambda: (_f64(),), 2),
    (try_except, lambda: (_f64(),), 2),
    (try_except, lambda: (_f64(1),), 2),
    (finally_block, lambda: (_f64(), []), 2),
    (with_manager, lambda: (_f64(), []), 2),
    (with_errstate, lambda: (_f64(),), 2),
    (attribute_model, lambda: (Box(_f64()), _f64()), 2),
]
IDS = [f"{fn.__name__}-{i}" for i, (fn, _, _) in enumerate(CASES)]


def _same_call(fn, make, capsys, captured):
    args = make()
    expected = fn(*copy.deepcopy(args))
    printed = capsys.readouterr().out
    mine = copy.deepcopy(args)
    got = captured(*mine)
    assert capsys.readouterr().out == printed
    assert_same(expected, got)
    plain_args = copy.deepcopy(args)
    fn(*plain_args)
    capsys.readouterr()
    for i, (e, g) in enumerate(zip(plain_args, mine)):
        if isinstance(e, np.ndarray):
            assert_same(e, g, f"argument {i} after the call")
        elif isinstance(e, Box):
            assert vars(e).keys() == vars(g).keys()
            for k in vars(e):
                assert_same(vars(e)[k], vars(g)[k], f"argument {i}.{k} after the call")
    return got


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("fn, make, graphs", CASES, ids=IDS)
def test_each_break_kind_matches_numpy_with_graphs_on_both_sides(fn, make, graphs, capsys):
    f = dynexpr.capture(fn, backend="eager")
    for _ in range(3):  # the first call translates, the next ones reuse every segment
        _same_call(fn, make, capsys, f)
    info = f.cache_info()
    assert (info.entries, info.misses) == (1, 1), info
    entry = f.entries[0]
    assert entry.resume is not None and entry.reason is not None
    ex = dynexpr.explain(fn, *make())
    capsys.readouterr()
    assert ex.graph_count >= graphs and ex.graph_break_count >= 1, str(ex)
    assert ex.break_reasons[0].stack[0][0] == fn.__code__.co_filename  # the user's frame


def test_raised_exception_is_the_plain_one():
    f = dynexpr.capture(raises, backend="eager")
    x = -np.ones(3)
    with pytest.raises(ValueError, match="negative total"):
        f(x)
    with pytest.raises(ValueError, match="negative total"):
        f(x)
    assert_same(raises(np.ones(3)), f(np.ones(3)))


def test_exceptions_reach_their_handlers_as_in_python():
    f = dynexpr.capture(finally_block, backend="eager")
    log, plain_log = [], []
    with pytest.raises(ValueError, match="big"):
        f(_f64(60, lo=0.0), log)
    with pytest.raises(ValueError, match="big"):
        finally_block(_f64(60, lo=0.0), plain_log)
    assert log == plain_log and len(log) == 1  # the finally ran once, on the way out
    for fn in (reraise, chained):
        g = dynexpr.capture(fn, backend="eager")
        for _ in range(2):
            with pytest.raises(ValueError) as got:
                g(_f64())
            with pytest.raises(ValueError) as want:
                fn(_f64())
            assert repr(got.value.__context__) == repr(want.value.__context__)
            assert got.value.__suppress_context__ == want.value.__suppress_context__
    log = []
    assert_same(with_manager(_f64(), []), dynexpr.capture(with_manager, backend="eager")(
        _f64(), log))
    assert log == ["enter", "KeyError"]


def test_identity_and_aliasing_survive_the_break(capsys):
    f = dynexpr.capture(identity, backend="eager")
    t, u, v = f(np.arange(4.0))
    assert t is u and np.shares_memory(t, v)
    lst = dynexpr.capture(lists, backend="eager")(np.arange(3.0))
    assert type(lst) is list and len(lst) == 2


def test_functions_the_interpreter_cannot_resume_run_whole_as_python(capsys):
    for fn, args in [(generator_of_arrays, (np.arange(3.0),)),
                     (frames, (np.arange(3.0),))]:
        f = dynexpr.capture(fn, backend="eager")
        got, expected = f(*args), fn(*args)
        if fn is generator_of_arrays:
            got, expected = list(got), list(expected)
        assert_same(expected, got)
        assert f.entries[0].resume is None and f.entries[0].compiled is None


def test_logging_and_warnings_name_the_users_line(caplog):
    with caplog.at_level(logging.WARNING, logger="test_resume"):
        logs(np.arange(3.0))
        dynexpr.capture(logs, backend="eager")(np.arange(3.0))
    plain, captured = caplog.records
    assert (captured.filename, captured.lineno, captured.funcName) == (
        plain.filename, plain.lineno, plain.funcName)
    f = dynexpr.capture(warns, backend="eager")
    with pytest.warns(RuntimeWarning) as got:
        f(_f64())
    with pytest.warns(RuntimeWarning) as want:
        warns(_f64())
    assert [(w.filename, w.lineno) for w in got] == [(w.filename, w.lineno) for w in want]


def test_a_new_value_at_the_break_reuses_the_segment():
    f = dynexpr.capture(item, backend="eager")
    for k in range(5):
        assert_same(item(_f64() * k), f(_f64() * k))
    assert f.cache_info().compiles == 2  # one graph before .item(), one after
    assert f._segments.entries == 1


def test_a_comparison_guard_keeps_loops_from_recompiling():
    # The interpreter's path through a loop (what resumes a layout that resume code
    # refuses); by default the rest of this call runs as real bytecode.
    dynexpr.config.resume_as_code = False
    f = dynexpr.capture(loop, backend="eager")
    for n in (40, 40, 40):
        assert_same(loop(_f64(), n), f(_f64(), n))
    entries = f._segments.entries
    assert_same(loop(_f64() * 1.5, 40), f(_f64() * 1.5, 40))
    assert f._segments.entries <= entries + 2
    assert any(g.kind == "CMP" for entries, _ in f._segments.points.values() for e in entries
               for g in e.guards)


def test_too_many_variants_at_one_point_run_as_python_with_one_warning():
    def spin(x, n):
        acc = x * 0
        for i in range(n):
            k = int(x.sum()) + i  # a break, and a new k each turn
            acc = acc + x[: k % 5 + 1].sum()  # a slice bound: each k is its own segment
        return acc

    dynexpr.config.recompile_limit = 2
    dynexpr.config.resume_as_code = False  # the interpreter's path, as above
    f = dynexpr.capture(spin, backend="eager")
    with pytest.warns(dynexpr.DynexprWarning, match="more than 2 captures at one place"):
        out = f(_f64(), 20)
    assert_same(spin(_f64(), 20), out)
    assert_same(spin(_f64(), 20), f(_f64(), 20))


def test_fullgraph_still_raises_at_the_first_break():
    f = dynexpr.capture(item, backend="eager", fullgraph=True)
    with pytest.raises(dynexpr.GraphBreakError, match="item"):
        f(_f64())


def test_compiled_segments_match_numpy_on_the_cpu_backend(capsys):
    for fn, make, _ in (CASES[0], CASES[3], CASES[11], CASES[12]):
        f = dynexpr.capture(fn, backend="cpu")
        for _ in range(2):
            _same_call(fn, make, capsys, f)
        assert f.cache_info().compiles >= 2


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_segments_get_dynamic_dimensions_too(backend):
    f = dynexpr.capture(item, backend=backend)
    for n in (100, 200, 300, 400):
        assert_same(item(_f64(n)), f(_f64(n)))
    # 100 is captured static; 200 makes the dimension dynamic, before and after the
    # break alike; 300 and 400 reuse both segments.
    assert f.cache_info().entries == 2 and f._segments.entries == 2
    assert f.cache_info().compiles == 4
    f = dynexpr.capture(item, backend=backend, dynamic=False)
    for n in (100, 200):
        assert_same(item(_f64(n)), f(_f64(n)))
    assert f._segments.entries == 2
