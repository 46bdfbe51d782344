"""Every corpus function, captured, matches plain NumPy on every input set and on both
backends: values, dtypes, shapes, result types, and the arguments it mutates."""

import copy

import numpy as np
import pytest

import dynexpr
from compare import TOL, assert_same
from corpus import CASES

IDS = [c.name for c in CASES]


def _tolerance(case, args):
    """The case's tolerance; by default the dtype's, except that a float64 result computed
    from float32 data (promoted by a NumPy float64 scalar, say) carries float32 rounding
    from the float32 part, so it is compared with float32's tolerance."""
    if case.tol is not None:
        return case.tol
    if any(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in args):
        return {"float32": TOL["float32"], "float64": TOL["float32"]}
    return None


def _run_and_compare(case, captured, args, rng_seed):
    plain_args = copy.deepcopy(args)
    captured_args = copy.deepcopy(args)
    expected = case.fn(*plain_args)
    got = captured(*captured_args)
    tol = _tolerance(case, args)
    assert_same(expected, got, "result", tol)
    for i, (e, g) in enumerate(zip(plain_args, captured_args)):
        if isinstance(e, np.ndarray):
            assert_same(e, g, f"argument {i} after the call", tol)
        elif hasattr(e, "__dict__") and not callable(e):  # user objects: their arrays too
            for k, v in vars(e).items():
                if isinstance(v, np.ndarray):
                    assert_same(v, vars(g)[k], f"argument {i}.{k} after the call", tol)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_numpy(case, backend):
    rng = np.random.default_rng(1234)
    input_sets = case.inputs(rng)
    captured = dynexpr.capture(case.fn, backend=backend)
    for args in input_sets + input_sets[:1]:  # the repeat is a cache hit
        _run_and_compare(case, captured, args, 1234)
    info = captured.cache_info()
    assert info.hits >= 1, info
    breaks = [e.reason for e in captured.entries if e.compiled is None]
    assert not breaks, f"{case.name} was not captured whole: {breaks[0]}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_graph_is_well_formed(case):
    """The IR contract the native backend relies on, checked on every corpus graph."""
    from dynexpr import ir
    from dynexpr.capture.np_ops import OP_TABLE_OPS

    rng = np.random.default_rng(7)
    args = case.inputs(rng)[0]
    ex = dynexpr.explain(case.fn, *copy.deepcopy(args))
    assert ex.graph_break_count == 0, ex.break_reasons
    again = dynexpr.explain(case.fn, *copy.deepcopy(args))
    for g, g2 in zip(ex.graphs, again.graphs):
        assert g.canonical() == g2.canonical(), "the canonical text must be deterministic"
        for v in g.values:
            assert v.dtype in ir.DTYPES and all(isinstance(d, int) for d in v.shape)
            assert v.op in ir.STRUCTURAL_OPS or v.op in OP_TABLE_OPS, v.op
            if v.op in OP_TABLE_OPS and v.op != "where":
                assert len({a.dtype for a in v.args}) == 1, f"{v}: args not cast to one loop dtype"
            if v.op == "where":
                assert v.args[0].dtype == "bool" and v.args[1].dtype == v.args[2].dtype == v.dtype
            if v.op == "setitem":
                assert v.args[1].dtype == v.dtype
            if v.op == "matmul":  # 2-D, or batched: a 3-D result of 2-D/3-D operands
                nds = (v.args[0].ndim, v.args[1].ndim)
                assert set(nds) <= {2, 3} and v.ndim == (3 if 3 in nds else 2), v
        for o in g.outputs:
            assert o.op not in ("input", "const") and o.op not in ir.VIEWS, o
        inputs = g.inputs
        assert [v.attr("index") for v in inputs] == list(range(len(inputs)))


def test_corpus_is_large_enough():
    assert len(CASES) >= 60, len(CASES)
