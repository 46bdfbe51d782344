"""dynexpr.cond: a branch on array data that stays in the graph (capture/control.py).
Both branches are checked against plain Python on the same inputs, on both backends."""

import numpy as np
import pytest

import dynexpr
from compare import assert_same


def pos(a, b):
    return a * 2 + b, (a * b).sum()


def neg(a, b):
    return a - b * 3, (a - b).sum()


def branchy(x, y):
    return dynexpr.cond(x.mean() > 0, pos, neg, (x, y))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_both_branches_match_plain_python(backend, sign):
    f = dynexpr.capture(branchy, backend=backend)
    x = np.linspace(0.5, 2.0, 7, dtype=np.float32) * np.float32(sign)
    y = np.arange(7, dtype=np.float32)
    assert_same(branchy(x, y), f(x, y))
    assert_same(branchy(-x, y), f(-x, y))  # the other branch, same entry
    assert f.cache_info().entries == 1 and f.cache_info().hits == 1
    ex = dynexpr.explain(branchy, x, y)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)
    assert "where" in ex.ops_per_graph[0]


def test_python_pred_inlines_one_branch_and_is_guarded(backend):
    def f(x, flag):
        return dynexpr.cond(flag, lambda a: a + 1, lambda a: a - 1, (x,))

    g = dynexpr.capture(f, backend=backend)
    x = np.arange(3.0)
    assert_same(x + 1, g(x, True))
    assert_same(x - 1, g(x, False))
    assert g.cache_info().entries == 2
    assert "where" not in dynexpr.explain(f, x, True).ops_per_graph[0]


@pytest.mark.parametrize(
    "true_fn,false_fn,reason",
    [
        (lambda a: a, lambda a: a.astype(np.float32), "same dtype and shape"),
        (lambda a: a, lambda a: a[:2], "same dtype and shape"),
        (lambda a: (a, a), lambda a: a, "differ in kind"),
    ],
)
def test_branches_that_cannot_be_selected_are_a_break(true_fn, false_fn, reason):
    def f(x):
        return dynexpr.cond(x.sum() > 0, true_fn, false_fn, (x,))

    x = np.arange(4.0)
    ex = dynexpr.explain(f, x)
    assert ex.graph_break_count == 1 and reason in ex.break_reasons[0].reason
    assert_same(f(x), dynexpr.capture(f)(x))  # plain Python, still right


def test_a_branch_that_writes_is_a_break():
    def bump(a):
        a += 1
        return a

    def f(x):
        return dynexpr.cond(x.sum() > 0, bump, lambda a: a * 1.0, (x,))

    ex = dynexpr.explain(f, np.arange(3.0))
    assert ex.graph_break_count == 1 and "writes into an array" in ex.break_reasons[0].reason
    x, x2 = np.arange(3.0), np.arange(3.0)
    assert_same(f(x2), dynexpr.capture(f)(x))
    assert_same(x2, x)  # the mutation happened once, as in plain Python


def test_plain_call_and_bad_pred():
    assert dynexpr.cond(np.array(True), lambda: 1, lambda: 2) == 1
    assert dynexpr.cond(0.0, lambda a: a, lambda a: -a, (3,)) == -3
    with pytest.raises(ValueError, match="pred must be a single value"):
        dynexpr.cond(np.ones(3), lambda: 1, lambda: 2)
