"""The generated CUDA units on a real device, through the driver-API launcher
(backends/cuda_driver.py), on CuPy arrays, compared with NumPy on the same data.

Never run yet: written without a GPU. Every test skips with the reason where there is
no GPU, no NVRTC or no CuPy."""

import copy

import dynexpr
import numpy as np
import pytest
from compare import assert_same
from corpus import CASES
from device import cupy, needs_gpu
from dynexpr.backends import cuda_codegen, cuda_driver, nvrtc
from dynexpr.schedule import schedule

pytestmark = needs_gpu


def _run_on_device(graph, inputs):
    unit = cuda_codegen.generate(schedule(graph), {i for i, x in enumerate(inputs)
                                                   if x.flags.c_contiguous})
    art = nvrtc.compile_cached(unit.source, cuda_driver.arch())
    fn = cuda_driver.load(unit, art.path)
    dev = [cupy.asarray(x) for x in inputs]
    outs = fn(*dev)
    cupy.cuda.get_current_stream().synchronize()
    return tuple(cupy.asnumpy(o) for o in outs), [cupy.asnumpy(d) for d in dev]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_graph_on_device(case):
    args = case.inputs(np.random.default_rng(11))[0]
    if not all(isinstance(a, np.ndarray) for a in args):
        pytest.skip("non-array arguments: the graph's inputs are not the call's arguments")
    ex = dynexpr.explain(case.fn, *copy.deepcopy(args))
    if ex.graph_break_count or len(ex.graphs) != 1:
        pytest.skip("graph breaks: compared through capture on the cpu backend instead")
    g = ex.graphs[0]
    if [(v.dtype, tuple(v.shape)) for v in g.inputs] != [(a.dtype.name, a.shape) for a in args]:
        pytest.skip("the graph's inputs are not the call's arguments (globals, closures)")
    try:
        got, after = _run_on_device(g, [np.ascontiguousarray(a) for a in args])
    except NotImplementedError as e:
        pytest.skip(f"not generated for CUDA yet: {e}")
    from dynexpr import eager
    ref_args = [np.array(a) for a in args]
    with np.errstate(all="ignore"):
        expected = eager.compile_graph(g)(*ref_args)
    for k, (e, o) in enumerate(zip(expected, got)):
        assert_same(e, o, f"{case.name} output {k}", {"float32": (1e-5, 1e-6),
                                                      "float64": (1e-12, 1e-14)})
    for i, (e, a) in enumerate(zip(ref_args, after)):
        assert_same(e, a, f"{case.name} argument {i} after the call")


def test_grid_reduction_is_deterministic_on_device():
    def f(x):
        return x.sum()

    x = np.random.default_rng(0).standard_normal(1 << 22).astype(np.float32)
    g = dynexpr.explain(f, x).graphs[0]
    a, _ = _run_on_device(g, [x])
    b, _ = _run_on_device(g, [x])
    assert a[0].tobytes() == b[0].tobytes()
    np.testing.assert_allclose(a[0], x.sum(dtype=np.float64), rtol=1e-5)


def test_cuda_graph_replay_on_device():
    """mode="reduce-overhead"'s replay (Note [CUDA graph replay]): the same results as
    NumPy for inputs read in place, refilled in place, and at new addresses."""
    def f(x, w):
        y = np.log1p(np.exp(x)) * w
        return y, y.sum()

    rng = np.random.default_rng(3)
    x = rng.standard_normal((512, 64)).astype(np.float32)
    w = rng.standard_normal(64).astype(np.float32)
    g = dynexpr.explain(f, x, w).graphs[0]
    unit = cuda_codegen.generate(schedule(g), {0, 1})
    rep = cuda_driver.load(unit, nvrtc.compile_cached(unit.source, cuda_driver.arch()).path).replayed()
    W = cupy.asarray(w)
    X = cupy.asarray(x)
    for k in range(4):
        if k == 2:
            x = rng.standard_normal(x.shape).astype(np.float32)
            X[...] = cupy.asarray(x)  # refilled in place
        if k == 3:
            x = rng.standard_normal(x.shape).astype(np.float32)
            X = cupy.asarray(x)  # a new address: copied into the graph's buffer
        y, total = rep(X, W)
        want_y, want_total = f(x, w)
        np.testing.assert_allclose(cupy.asnumpy(y), want_y, rtol=1e-5)
        np.testing.assert_allclose(cupy.asnumpy(total), want_total, rtol=1e-4)
    assert rep.captures == 2 and rep.moving == {"x0"}
