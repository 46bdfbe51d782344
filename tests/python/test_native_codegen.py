"""Scheduling decisions and the generated C++ text (golden files: the text is a contract
and the cache key). No compiler needed.

To accept a deliberate change of the generated text: DYNEXPR_UPDATE_GOLDEN=1 pytest ...
and review the diff of tests/python/golden/.
"""

import os
from pathlib import Path

import numpy as np
import pytest
from dynexpr import codegen, ir
from dynexpr.schedule import Buffer, schedule
from native_graphs import GraphBuilder

GOLDEN = Path(__file__).parent / "golden"


def chain_graph() -> ir.Graph:
    b = GraphBuilder(np.zeros(1024, np.float32), np.zeros(1024, np.float32))
    x, y = b.x
    t = b.ufunc("tanh", b.ufunc("add", b.ufunc("multiply", x, 2.0), y))
    b.output(t, b.reduce("sum", t))
    return b.graph


def softmax_graph() -> ir.Graph:
    b = GraphBuilder(np.zeros((8, 33), np.float32))
    (x,) = b.x
    m = b.reduce("max", x, axes=-1, keepdims=True)
    e = b.ufunc("exp", b.ufunc("subtract", x, m))
    b.output(b.ufunc("true_divide", e, b.reduce("sum", e, axes=-1, keepdims=True)))
    return b.graph


def inplace_graph() -> ir.Graph:
    b = GraphBuilder(np.zeros(20), np.zeros(5))
    x, y = b.x
    x1 = b.setitem(x, y, ("slice", 2, 7, None))
    x2 = b.setitem(x1, b.ufunc("multiply", b.getitem(x1, ("slice", None, -1, None)), 2.0),
                   ("slice", 1, None, None))
    b.mutate(0, x2)
    b.output(b.reduce("sum", x2))
    return b.graph


def dynamic_views_graph() -> ir.Graph:
    g = ir.Graph()
    x = g.add(ir.Value("input", (), "float64", ("s0", 3), ir.make_attrs(index=0)))
    t = g.add(ir.Value("transpose", (x,), "float64", (3, "s0"), ir.make_attrs(axes=(1, 0))))
    i = g.add(ir.Value("input", (), "int32", ("s0",), ir.make_attrs(index=1)))
    c = g.add(ir.Value("astype", (i,), "float64", ("s0",), ir.make_attrs(dtype="float64")))
    k = g.add(ir.Value("const", (), "float64", (), ir.make_attrs(value=0.5)))
    m = g.add(ir.Value("multiply", (t, c), "float64", (3, "s0")))
    w = g.add(ir.Value("where", (g.add(ir.Value("greater", (m, k), "bool", (3, "s0"))), m, k),
                       "float64", (3, "s0")))
    g.outputs = [w]
    return g


GRAPHS = {
    "chain_f32": (chain_graph, True),
    "softmax_f32": (softmax_graph, True),
    "softmax_f32_unfused": (softmax_graph, False),
    "inplace_setitem": (inplace_graph, True),
    "dynamic_views": (dynamic_views_graph, True),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_golden_text(name):
    make, fuse = GRAPHS[name]
    text = codegen.generate(schedule(make(), fuse))
    path = GOLDEN / f"{name}.cpp"
    if os.environ.get("DYNEXPR_UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"missing golden file {path}; run with DYNEXPR_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"generated text for {name} differs from {path}; if intended, rerun with "
        "DYNEXPR_UPDATE_GOLDEN=1 and review the diff")


def test_generated_text_is_deterministic():
    assert codegen.generate(schedule(chain_graph())) == codegen.generate(schedule(chain_graph()))


def test_unit_includes_only_the_prelude():
    text = codegen.generate(schedule(softmax_graph()))
    includes = [ln for ln in text.splitlines() if ln.startswith("#include")]
    assert includes == ['#include "prelude.hpp"']
    # Nothing but comments before it, so the precompiled header applies.
    before = text.split('#include "prelude.hpp"')[0]
    assert all(ln.startswith("//") for ln in before.splitlines())


def test_pointwise_chain_fuses_into_one_kernel():
    s = schedule(chain_graph())
    assert [k.kind for k in s.kernels] == ["pointwise", "reduction"]
    assert sum(1 for v in s.values if s.storage[v.id] == "lazy") == 2  # multiply, add
    unfused = schedule(chain_graph(), fuse=False)
    assert [k.kind for k in unfused.kernels] == ["pointwise"] * 3 + ["reduction"]


def test_common_subexpressions_are_computed_once():
    b = GraphBuilder(np.zeros(16, np.float32))
    (x,) = b.x
    # Two structurally identical values (distinct nodes), each used: one computation.
    e1 = b.ufunc("exp", b.ufunc("multiply", x, 3.0))
    e2 = b.ufunc("exp", b.ufunc("multiply", x, 3.0))
    b.output(b.ufunc("add", e1, e2), b.ufunc("subtract", e1, 1.0))
    s = schedule(b.graph)
    exps = [v for v in s.values if v.op == "exp"]
    assert len(exps) == 1
    assert isinstance(s.storage[exps[0].id], Buffer)  # used by two outputs: materialised
    text = codegen.generate(s)  # an expression or a direct loop (Note [direct pointwise loops])
    assert text.count("dx::exp(") + text.count("exp_op::simd(") == 1


def test_constants_of_different_types_are_not_merged():
    b = GraphBuilder(np.zeros(4, np.int64))
    (x,) = b.x
    b.output(b.ufunc("add", x, 1), b.ufunc("add", x, True))
    s = schedule(b.graph)
    assert len([v for v in s.values if v.op == "const"]) == 2


def test_one_kernel_writes_several_outputs():
    b = GraphBuilder(np.zeros(64, np.float32), np.zeros(64, np.float32))
    x, y = b.x
    b.output(b.ufunc("add", x, y), b.ufunc("multiply", x, y), b.ufunc("sin", x))
    s = schedule(b.graph)
    assert len(s.kernels) == 1 and len(s.kernels[0].stores) == 3


def test_mutation_is_in_place_when_nothing_reads_the_old_value_later():
    s = schedule(inplace_graph())
    assert s.inputs[0][2]  # written
    for k in s.kernels:
        for st in k.stores:
            if st.value.op == "setitem":
                assert st.buffer == Buffer("in", 0, "float64", (20,))
    assert all(k.kind != "copy" for k in s.kernels)


def test_mutation_goes_through_a_temporary_when_the_old_value_is_read_later():
    b = GraphBuilder(np.zeros(10))
    (x,) = b.x
    x1 = b.setitem(x, 5.0, ("slice", None, 3, None))
    b.mutate(0, x1)
    b.output(b.ufunc("add", x, b.reduce("sum", x1)))
    s = schedule(b.graph)
    assert s.kernels[-1].kind == "copy"
    assert s.storage[x1.id].kind == "tmp"


def test_views_of_inputs_are_not_copied():
    b = GraphBuilder(np.zeros((4, 6)))
    (x,) = b.x
    t = b.transpose(b.getitem(x, ("slice", None, None, 2)))
    b.output(b.ufunc("add", t, 1.0))
    s = schedule(b.graph)
    assert s.storage[t.id] == "leaf" and len(s.kernels) == 1
    assert ".permute(" in codegen.generate(s) and ".slice(" in codegen.generate(s)


def test_scalar_literals_round_trip():
    assert codegen.scalar_literal(0.1, "float32") == "0.1f"
    assert codegen.scalar_literal(1e-45, "float32") == "1e-45f"
    assert codegen.scalar_literal(0.1, "float64") == "0.1"
    assert codegen.scalar_literal(float("inf"), "float64") == \
        "std::numeric_limits<double>::infinity()"
    assert codegen.scalar_literal(-3, "int32") == "std::int32_t(-3)"
    assert codegen.scalar_literal(300, "uint8") == "std::uint8_t{44}"
    assert codegen.weak_literal(2, "int") == "std::int64_t{2}"
    assert codegen.weak_literal(2.0, "float") == "2.0"
    assert codegen.weak_literal(True, "bool") == "true"


def test_every_op_capture_emits_has_a_dx_spelling():
    """codegen writes op-table ops as dx::<numpy name>(...): each name the translator can
    emit must be a named function in the generated op table's DYNEXPR_NAMED_OPS list
    (include/dynexpr/ops/op_table.hpp, expanded by ops/operators.hpp)."""
    import re

    from dynexpr import toolchain

    np_ops = pytest.importorskip("dynexpr.capture.np_ops")
    inc, _ = toolchain.source_dirs()
    text = (inc / "dynexpr" / "ops" / "op_table.hpp").read_text()
    listed = text[text.index("#define DYNEXPR_NAMED_OPS(X)"):]
    listed = listed[: listed.index("#define DYNEXPR_BINARY_OPERATORS")]
    named = set(re.findall(r"X\((\w+), \w+\)", listed))
    missing = [n for n in np_ops.OP_TABLE_OPS if n != "where" and n not in named]
    assert not missing, f"ops without a dx:: function: {missing}"


def test_cheap_flat_loops_use_at_most_256_bit_vectors():
    # Note [narrow vectors for cheap loops]: a few adds and multiplies per element run
    # at the speed of memory, where 256-bit vectors measured faster in L2 on AVX-512;
    # a loop of costlier ops keeps the full width.
    b = GraphBuilder(np.zeros(1000, np.float64))
    (x,) = b.x
    b.output(b.ufunc("add", b.ufunc("multiply", x, 1.5), 0.5))
    cheap = codegen.generate(schedule(b.graph))
    assert "hn::CappedTag<double, 32 / sizeof(double)> d;" in cheap
    assert "hn::ScalableTag<double> d;" not in cheap
    b = GraphBuilder(np.zeros(1000, np.float32))
    (x,) = b.x
    b.output(b.ufunc("tanh", b.ufunc("exp", b.ufunc("multiply", x, 1.5))))
    costly = codegen.generate(schedule(b.graph))
    assert "hn::ScalableTag<float> d;" in costly
    assert "CappedTag" not in costly
