"""Nothing in capture recurses on graph depth (Note [no recursion on graph depth], ir.py):
long loops that update one array, long fused chains and recursive user functions run
captured to plain NumPy's answer, without RecursionError."""

import copy

import numpy as np
import pytest

import dynexpr
from compare import assert_matches_plain, assert_same
from dynexpr import codegen, ir, schedule


def leapfrog_updates(a, steps):
    # Two slice updates of one array per step: an unrolled chain of 2 * steps versions.
    for _ in range(steps):
        a[1:] = a[1:] + 0.5 * a[:-1]
        a[:-1] = a[:-1] - 0.25 * a[1:]
    return a


def _plain_and_captured(fn, args, backend):
    captured = dynexpr.capture(fn, backend=backend)
    assert_matches_plain(fn, args, captured)
    return captured


@pytest.mark.parametrize("steps", [500, 3000])
def test_long_slice_update_loop_is_captured(steps):
    """500 steps (1000 versions of `a`) recursed past Python's limit in ir.walk: the call
    silently ran as plain Python and explain raised RecursionError. 3000 steps pass the
    unroll budget: translation stops unrolling once the iterations repeat (Note [stopping
    the unrolling early]) and the loop is one loop node, still without RecursionError."""
    args = (np.linspace(0.0, 1.0, 4), steps)
    captured = _plain_and_captured(leapfrog_updates, args, "eager")
    assert captured.cache_info().entries == 1  # translated, not run plain
    ex = dynexpr.explain(leapfrog_updates, *copy.deepcopy(args))
    assert ex.graph_count == 1
    assert ex.graph_break_count == 0, ex.break_reasons
    assert captured.entries[0].compiled is not None
    if steps == 3000:
        ops = ex.ops_per_graph[0]
        assert "loop" in ops and len(ops) < 50, ops  # rolled: the graph does not grow with steps


def decay_chain(x, steps):
    for _ in range(steps):
        x = x * 0.999 + 0.001
    return x


def test_deep_fused_chain_generates_code(monkeypatch):
    """A 900-link pointwise chain is one fused expression: codegen declared its links by
    recursing once per link (RecursionError from codegen.ref). (The loop is kept unrolled:
    rolled, it is one link in a loop body; a body that depends on i still unrolls.)"""
    from dynexpr.capture import reroll

    monkeypatch.setattr(reroll, "ENABLED", False)
    g = dynexpr.explain(decay_chain, np.ones(4), 450).graphs[0]
    s = schedule.schedule(g)
    src = codegen.generate(s)
    names = [line.split("=")[0].split()[-1] for line in src.splitlines() if "const auto v" in line]
    assert len(names) == len(set(names)) >= 800  # the fused links, each declared once...
    assert names == sorted(names, key=lambda n: int(n[1:]))  # ...each after its operand


def test_walk_is_iterative_and_topological():
    g = ir.Graph()
    v = g.add(ir.Value("input", (), "float64", (3,), ir.make_attrs(index=0)))
    for _ in range(5000):
        v = g.add(ir.Value("negative", (v,), "float64", (3,)))
    order = ir.walk([v, v])
    assert [u.id for u in order] == list(range(5001))


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def recursive_decay(x, n):
    if n == 0:
        return x
    return recursive_decay(x * 0.5 + fib(n % 7), n - 1)


def recursive_pairwise(x, n):
    if n == 0:
        return x.sum()
    if x.shape[0] > 1:
        return recursive_pairwise(x[1:] + x[:-1], n - 1)
    return x * n + recursive_pairwise(x, n - 1)


@pytest.mark.parametrize("fn", [recursive_decay, recursive_pairwise])
def test_recursive_user_function_depth_200(fn, backend):
    """Recursion 200 deep, with array work at every level: runs as plain Python does."""
    args = (np.arange(5.0), 200)
    captured = _plain_and_captured(fn, args, backend)
    got = captured(*copy.deepcopy(args))  # the second call takes the installed entry
    assert_same(fn(*copy.deepcopy(args)), got)
