"""The public API: decorator forms, options, misuse errors, config, reset, disable,
callable backends, cache_info, logs, and the op list checked against the C++ op table."""

import logging
import os
import pathlib
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import dynexpr
from compare import assert_same

ROOT = pathlib.Path(__file__).resolve().parents[2]


def double(x):
    return x * 2


# --- misuse names the mistake ----------------------------------------------------------------


@pytest.mark.parametrize("bad", [42, "f", None.__class__, np.sum, len])
def test_capture_of_a_non_function_is_a_type_error(bad):
    with pytest.raises(TypeError, match=r"dynexpr.capture\(.*expected a Python function"):
        dynexpr.capture(bad)


def test_reduce_overhead_is_the_default_path_on_cpu():
    """mode="reduce-overhead" (torch.compile's name) is accepted; on the cpu backend it
    runs the compiled unit as the default mode does, and explain says so."""
    x = np.linspace(-2.0, 2.0, 1000)
    f = dynexpr.capture(lambda a: np.tanh(a) * 2.0 + a, mode="reduce-overhead")
    for _ in range(2):
        got = f(x)
    want = np.tanh(x) * 2.0 + x
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    assert f.entries[0].compiled is not None
    text = str(dynexpr.explain(f, x))
    assert "Mode reduce-overhead: on this backend it is the default path" in text
    assert "Mode reduce-overhead" not in str(dynexpr.explain(dynexpr.capture(double), x))


def test_unknown_options_are_named():
    with pytest.raises(TypeError, match="unknown option.*bakend.*options are backend"):
        dynexpr.capture(double, bakend="eager")
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        dynexpr.capture(double, backend="gpu")
    with pytest.raises(ValueError, match="unknown mode 'fast'"):
        dynexpr.capture(double, mode="fast")
    with pytest.raises(TypeError, match="fullgraph must be True or False"):
        dynexpr.capture(double, fullgraph="yes")
    with pytest.raises(TypeError, match="dynamic must be"):
        dynexpr.capture(double, dynamic="auto")


def test_config_rejects_unknown_settings_and_wrong_types():
    with pytest.raises(AttributeError, match="recompile_limit"):
        dynexpr.config.recompile_limt = 3
    with pytest.raises(TypeError, match="must be int"):
        dynexpr.config.recompile_limit = "8"
    with pytest.raises(ValueError, match=">= 0"):
        dynexpr.config.recompile_limit = -1
    assert "recompile_limit=" in repr(dynexpr.config)
    assert dynexpr.config.accumulated_recompile_limit == 256


def test_mark_dynamic_and_mark_static_reject_misuse():
    with pytest.raises(TypeError, match="expected a NumPy ndarray"):
        dynexpr.mark_dynamic((1, 2), 0)
    with pytest.raises(TypeError, match="dim must be an int"):
        dynexpr.mark_dynamic(np.ones(3), "0")
    with pytest.raises(TypeError, match="min must be a non-negative int"):
        dynexpr.mark_dynamic(np.ones(3), 0, min=-1)
    with pytest.raises(TypeError, match="expected a NumPy ndarray"):
        dynexpr.mark_static([1.0])


# --- forms of use ------------------------------------------------------------------------------


def test_decorator_forms(backend):
    @dynexpr.capture
    def a(x):
        return x + 1

    @dynexpr.capture()
    def b(x):
        return x + 2

    @dynexpr.capture(backend=backend, fuse=False)
    def c(x):
        return x + 3

    x = np.ones(2)
    assert_same(x + 1, a(x))
    assert_same(x + 2, b(x))
    assert_same(x + 3, c(x))
    assert a.__name__ == "a" and a.__wrapped__.__name__ == "a"


def test_captured_method_and_captured_bound_method():
    class Layer:
        scale = 3.0

        @dynexpr.capture(backend="eager")
        def forward(self, x):
            return x * self.scale

    layer = Layer()
    assert_same(np.full(2, 3.0), layer.forward(np.ones(2)))
    bound = dynexpr.capture(Layer().forward, backend="eager")
    assert_same(np.full(2, 3.0), bound(np.ones(2)))
    assert dynexpr.explain(layer.forward, np.ones(2)).graph_count == 1


def test_keyword_and_default_arguments_bind_like_python():
    def g(x, y=2.0, *, z=1.0):
        return x * y + z

    f = dynexpr.capture(g, backend="eager")
    x = np.ones(2)
    assert_same(g(x), f(x))
    assert_same(g(x, z=5.0, y=3.0), f(x, z=5.0, y=3.0))
    with pytest.raises(TypeError):
        f(x, w=1)


def test_captured_function_calling_another_is_inlined():
    inner = dynexpr.capture(lambda x: x * 2, backend="eager")
    outer = dynexpr.capture(lambda x: inner(x) + 1, backend="eager")
    x = np.ones(3)
    assert_same(x * 2 + 1, outer(x))
    assert dynexpr.explain(outer, x).graph_count == 1
    assert inner.cache_info().misses == 0  # inlined, not called


def test_cache_info_is_a_named_tuple():
    f = dynexpr.capture(double, backend="eager")
    f(np.ones(2))
    f(np.ones(2))
    i = f.cache_info()
    assert (i.hits, i.misses, i.compiles, i.entries) == (1, 1, 1, 1) and i._fields == (
        "hits",
        "misses",
        "compiles",
        "entries",
    )


def test_reset_forgets_every_capture():
    f = dynexpr.capture(double, backend="eager")
    f(np.ones(2))
    dynexpr.reset()
    assert f.cache_info() == (0, 0, 0, 0)
    f(np.ones(2))
    assert f.cache_info().misses == 1


def test_disable():
    @dynexpr.disable
    def opaque(x):
        return x - 1

    f = dynexpr.capture(lambda x: opaque(x * 2), backend="eager")
    assert_same(np.ones(2), f(np.ones(2)))
    assert "dynexpr.disable" in f.entries[0].reason.reason
    g = dynexpr.capture(opaque, backend="eager")
    assert_same(np.zeros(2), g(np.ones(2)))
    assert g.cache_info().entries == 0


# --- backends ------------------------------------------------------------------------------


def test_callable_backend_receives_the_graph_and_example_inputs():
    seen = []

    def backend(graph, example_inputs):
        seen.append((graph.ops(), [a.shape for a in example_inputs]))
        return dynexpr.eager.compile_graph(graph)

    f = dynexpr.capture(lambda x, y: np.exp(x) + y, backend=backend)
    assert_same(np.exp(np.ones(3)) + 1, f(np.ones(3), np.ones(3)))
    assert seen == [(["exp", "add"], [(3,), (3,)])]


def test_backend_returning_a_non_callable_is_a_type_error():
    f = dynexpr.capture(double, backend=lambda g, inputs: 42)
    with pytest.raises(TypeError, match="not a callable"):
        f(np.ones(2))


def test_cpu_falls_back_to_eager_with_one_warning(monkeypatch):
    monkeypatch.setitem(sys.modules, "dynexpr._native", None)  # as in a build without it
    dynexpr.captured._state["runtime"] = None
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            f = dynexpr.capture(double, backend="cpu")
            assert_same(np.full(2, 2.0), f(np.ones(2)))
    msgs = [str(m.message) for m in w if issubclass(m.category, dynexpr.DynexprWarning)]
    assert len(msgs) == 1 and "backend='cpu' is not available" in msgs[0]
    dynexpr.captured._state["runtime"] = None


def test_internal_errors_raise_or_fall_back_with_suppress_errors(monkeypatch):
    from dynexpr.capture.errors import InternalError

    def broken(fn, bound, **_):
        raise InternalError("dynexpr: internal error (simulated)")

    monkeypatch.setattr(dynexpr.captured, "translate", broken)
    f = dynexpr.capture(double, backend="eager")
    with pytest.raises(InternalError):
        f(np.ones(2))
    dynexpr.config.suppress_errors = True
    with pytest.warns(dynexpr.DynexprWarning, match="simulated"):
        assert_same(np.full(2, 2.0), f(np.ones(2)))


# --- explain and logs ------------------------------------------------------------------------


def test_explain_of_a_captured_graph():
    ex = dynexpr.explain(lambda x, y: np.tanh(x) * y + 1, np.ones(3, np.float32), 2.0)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)
    assert ex.ops_per_graph == [["tanh", "multiply", "add"]]
    kinds = {g.kind for g in ex.guards}
    assert {"TYPE", "DTYPE", "SHAPE", "STRIDES_CLASS", "VALUE"} <= kinds
    text = str(ex)
    assert "Graph count: 1" in text and "tanh(%0)" in text and "y == 2.0 (float)" in text
    with pytest.raises(TypeError, match="expected a Python function"):
        dynexpr.explain(np.sum, np.ones(2))


def test_explain_gives_a_hint_for_each_break_and_the_compiled_share():
    def branchy(x):
        if x.sum() > 0:
            return x * 2
        return x

    ex = dynexpr.explain(branchy, np.ones(3))
    # The branch runs as Python; the sum and compare before it and the product after it
    # are graphs (Note [resuming after a graph break]).
    assert (ex.graph_count, ex.graph_break_count, ex.compiled_op_share) == (2, 1, 1.0)
    assert "np.where" in ex.hints[0]
    text = str(ex)
    assert "hint: use np.where(cond, a, b)" in text and "if x.sum() > 0:" in text
    assert "Array ops that run compiled: 100% (3 in graphs, 0 run by Python" in text
    ex = dynexpr.explain(lambda x: np.sort(x) + 1, np.ones(3))
    assert "move the call outside the captured function" in ex.hints[0]
    assert ex.compiled_op_share == 0.5  # np.sort by Python, + 1 in a graph
    assert dynexpr.explain(double, np.ones(3)).compiled_op_share == 1.0

    def guarded(x):
        with np.errstate(all="ignore"):  # a with block: the whole call runs as Python
            return np.sort(x)

    ex = dynexpr.explain(guarded, np.ones(3))
    assert (ex.graph_count, ex.compiled_op_share) == (0, 0.0)
    assert "Array ops that run compiled: 0%" in str(ex)


def test_command_line_explain(tmp_path):
    mod = tmp_path / "cli_target.py"
    mod.write_text(
        "import numpy as np\n"
        "def f(x):\n"
        "    y = np.tanh(x) + 1\n"
        "    print(y)\n"
        "    return y\n"
        "def args():\n"
        "    return (np.ones(5),), {}\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path)] + [p for p in sys.path if p]))
    p = subprocess.run([sys.executable, "-m", "dynexpr", "explain", "cli_target:f",
                        "--args-from", "cli_target:args"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, check=False)
    assert p.returncode == 0, p.stderr
    assert "Graph break count: 1" in p.stdout and "print(y)" in p.stdout, p.stdout
    assert "hint: print outside the captured function" in p.stdout
    p = subprocess.run([sys.executable, "-m", "dynexpr", "explain", "cli_target",
                        "--args-from", "cli_target:args"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, check=False)
    assert p.returncode != 0 and "must look like module:name" in p.stderr


def test_logs_guards_recompiles_output_code(caplog):
    dynexpr.logs.configure("guards,recompiles,output_code")
    try:
        f = dynexpr.capture(double, backend="eager")
        with caplog.at_level(logging.INFO, logger="dynexpr"):
            f(np.ones(2))
            f(np.ones(3))
        assert "x.shape == (2,)" in caplog.text  # guards
        assert "capturing again (entry 2): entry 1 needs x.shape == (2,)" in caplog.text
        assert "multiply(%0, %1)" in caplog.text  # the captured graph
    finally:
        dynexpr.logs.configure("")


def test_unknown_log_topic_is_reported_not_fatal(capsys):
    assert dynexpr.logs.configure("guards,gaurds") == ["guards"]
    assert "gaurds" in capsys.readouterr().err
    dynexpr.logs.configure("")


def test_max_rank_matches_the_cpp_core():
    from dynexpr.capture.graph import MAX_RANK

    text = (ROOT / "include/dynexpr/core/config.hpp").read_text()
    assert re.search(r"max_rank = (\d+);", text).group(1) == str(MAX_RANK)
    x = np.ones((1,) * (MAX_RANK + 1))
    f = dynexpr.capture(lambda x: x + 1, backend="eager")
    assert_same(x + 1, f(x))
    assert "at most 8" in f.entries[0].reason.reason


def test_malformed_integer_settings_in_the_environment_warn_and_use_the_default():
    """A typo in $DYNEXPR_NUM_THREADS or $DYNEXPR_UNIT_BUDGET used to make `import dynexpr`
    raise int()'s bare ValueError; now one warning names the variable and the way out."""
    env = dict(os.environ, DYNEXPR_NUM_THREADS="four", DYNEXPR_UNIT_BUDGET="-3")
    code = ("import warnings; warnings.simplefilter('always'); import dynexpr; "
            "print(dynexpr.config.num_threads, dynexpr.config.unit_budget)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "500"]
    assert "$DYNEXPR_NUM_THREADS='four' is not a whole number >= 0" in r.stderr
    assert "$DYNEXPR_UNIT_BUDGET='-3' is not a whole number >= 0" in r.stderr
    assert "Set it to one, or unset it" in r.stderr
    env.update(DYNEXPR_NUM_THREADS="3", DYNEXPR_UNIT_BUDGET="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split() == ["3", "0"], r.stderr
    assert "whole number" not in r.stderr
