"""mode="reduce-overhead" on CUDA arrays: a unit captured once as a CUDA graph and
replayed (Note [CUDA graph replay] in backends/cuda_driver.py), without a GPU.

The driver is fake_driver.FakeDriver: it records the launcher's calls and runs each
replayed graph as the unit's host emulation with the pointers the graph holds; the
arrays are fake_cuda.FakeArrays in host memory. So every result is compared with NumPy
on the same values, and that checks which buffers a graph reads and writes, when inputs
are copied in and when a graph is captured again. The driver calls themselves run only
on a GPU (tests/gpu/)."""

import dynexpr
import numpy as np
import pytest
from dynexpr import cuda_run
from dynexpr.backends import cuda_codegen, cuda_driver
from dynexpr.backends.cuda_emulate import CudaEmulationBackend
from dynexpr.schedule import schedule
from fake_cuda import FakeArray, fake_library
from fake_driver import FakeDriver

RNG = np.random.default_rng(5)


def scaled_softplus_and_total(x, w):
    y = np.log1p(np.exp(x)) * w
    return y, y.sum()


def _unit(fn, *args):
    g = dynexpr.explain(fn, *args).graphs[0]
    return cuda_codegen.generate(schedule(g), set(range(len(args))))


@pytest.fixture
def lib():
    with fake_library() as lib:
        yield lib


def _replay(monkeypatch, tmp_path, unit):
    drv = FakeDriver(unit)
    monkeypatch.setattr(cuda_driver, "_lib", drv)
    monkeypatch.setattr(cuda_driver, "_why", None)
    monkeypatch.setattr(cuda_driver, "_ctx", {})
    cubin = tmp_path / "kernel.cubin"
    cubin.write_bytes(b"not used by the fake driver")
    return drv, cuda_driver.load(unit, cubin, 0).replayed()


def _ptr(a: FakeArray) -> int:
    return a.a.__array_interface__["data"][0]


def _check(got, x, w):
    y, total = scaled_softplus_and_total(x, w)
    assert isinstance(got[0], FakeArray) and isinstance(got[1], FakeArray)
    assert got[0].dtype == y.dtype and got[0].shape == y.shape
    np.testing.assert_allclose(got[0].a, y, rtol=1e-6)
    assert got[1].dtype == np.asarray(total).dtype and got[1].shape == ()
    np.testing.assert_allclose(got[1].a, total, rtol=1e-5)


def test_a_graph_is_captured_once_and_replayed(lib, monkeypatch, tmp_path):
    x = RNG.standard_normal((300, 70)).astype(np.float32)
    w = RNG.standard_normal(70).astype(np.float32)
    unit = _unit(scaled_softplus_and_total, x, w)
    assert len([la for la in unit.launches if la.library_call is None]) >= 2
    drv, f = _replay(monkeypatch, tmp_path, unit)
    X, W = FakeArray(x.copy()), FakeArray(w.copy())
    first = f(X, W)
    _check(first, x, w)
    assert f.captures == 1 and len(drv.calls("graph launch")) == 1
    assert drv.calls("launch") == [], "the kernels ran inside the graph, not one by one"
    # the inputs are read in place: the graph holds their addresses
    _, _, held = drv.calls("graph launch")[0]
    pointers = {p for _, _, dec in held for p in dec if isinstance(p, int)}
    assert _ptr(X) in pointers and _ptr(W) in pointers
    # the caller refills x in place: replayed, nothing copied, the new values read
    x0 = x.copy()
    x[:] = RNG.standard_normal(x.shape).astype(np.float32)
    X.a[:] = x
    second = f(X, W)
    _check(second, x, w)
    assert f.captures == 1 and len(drv.calls("graph launch")) == 2 and not drv.calls("memcpy")
    # results are copies out of the graph's buffers: the first call's kept their values
    assert _ptr(first[0]) != _ptr(second[0])
    _check(first, x0, w)


def test_an_input_at_a_new_address_is_copied_into_the_graph(lib, monkeypatch, tmp_path):
    x = RNG.standard_normal((64, 33))
    w = RNG.standard_normal(33)
    drv, f = _replay(monkeypatch, tmp_path, _unit(scaled_softplus_and_total, x, w))
    W = FakeArray(w.copy())
    _check(f(FakeArray(x.copy()), W), x, w)
    for k in range(3):  # a new x each call (a batch loop), the same w (a parameter)
        xk = RNG.standard_normal(x.shape)
        X = FakeArray(xk.copy())
        _check(f(X, W), xk, w)
        copies = drv.calls("memcpy")
        assert len(copies) == k + 1 and copies[-1][1] == _ptr(X) and copies[-1][2] == xk.nbytes
    assert f.captures == 2, "captured again once, when x first moved"
    assert f.moving == {"x0"}
    assert len(drv.destroyed) == 1
    assert "inputs copied in: x0" in f.describe()


def test_a_strided_input_that_moves_is_copied_by_the_library(lib, monkeypatch, tmp_path):
    w = RNG.standard_normal(16)
    big = RNG.standard_normal((80, 16))
    xs = big[::2]
    unit = cuda_codegen.generate(
        schedule(dynexpr.explain(scaled_softplus_and_total, xs, w).graphs[0]), {1})
    drv, f = _replay(monkeypatch, tmp_path, unit)
    W = FakeArray(w.copy())
    B = FakeArray(big.copy())
    _check(f(B[::2], W), big[::2], w)
    B2 = FakeArray(RNG.standard_normal((80, 16)))
    _check(f(B2[::2], W), B2.a[::2], w)
    assert f.moving == {"x0"} and not drv.calls("memcpy"), "strided: the library's copy"


def test_each_stream_has_its_graph(lib, monkeypatch, tmp_path):
    # a graph's buffers are used in one stream's order: another stream gets its own
    x = RNG.standard_normal((50, 20)).astype(np.float32)
    w = RNG.standard_normal(20).astype(np.float32)
    drv, f = _replay(monkeypatch, tmp_path, _unit(scaled_softplus_and_total, x, w))
    X, W = FakeArray(x.copy()), FakeArray(w.copy())
    for stream in (0, 0x5000, 0, 0x5000):
        monkeypatch.setattr(lib, "stream", lambda device, like, s=stream: s)
        _check(f(X, W), x, w)
    assert f.captures == 2 and len(f.graphs) == 2
    launched = [(exe, stream) for exe, stream, _ in drv.calls("graph launch")]
    assert [s for _, s in launched] == [0, 0x5000, 0, 0x5000]
    assert launched[0][0] == launched[2][0] != launched[1][0] == launched[3][0]


def test_each_set_of_extents_has_its_graph(lib, monkeypatch, tmp_path):
    def f(x):
        return np.tanh(x) * 2.0 + x.sum(axis=-1, keepdims=True) - x.mean()

    units = []

    class Recording(CudaEmulationBackend):  # the unit capture generates, extents dynamic
        def codegen(self, graph, example_inputs, *, fuse=True):
            plan = super().codegen(graph, example_inputs, fuse=fuse)
            units.append(plan.detail)
            return plan

    dynexpr.capture(f, backend=Recording(), dynamic=True)(RNG.standard_normal((6, 50)))
    unit = units[0]
    assert unit.schedule.symbols, "the graph should have dynamic extents"
    monkeypatch.setattr(cuda_driver, "GRAPHS_PER_UNIT", 2)
    drv, rep = _replay(monkeypatch, tmp_path, unit)
    arrays = {shape: RNG.standard_normal(shape) for shape in [(6, 50), (3, 7), (40, 1000)]}
    for shape in [(6, 50), (3, 7), (40, 1000), (3, 7)]:
        xs = arrays[shape]
        X = FakeArray(xs)  # the same memory each time a shape comes back: read in place
        got = rep(X)[0]
        assert got.shape == shape
        np.testing.assert_allclose(got.a, f(xs), rtol=1e-12, atol=1e-12)
    assert rep.captures == 3, "(3, 7) came back: its graph was kept"
    assert len(rep.graphs) == 2 and len(drv.destroyed) == 1, "the least recently used went"


def test_units_with_a_library_call_launch_kernel_by_kernel(lib, monkeypatch, tmp_path):
    def f(a, b):
        return np.tanh(a @ b) + 1.0

    a, b = RNG.standard_normal((20, 30)), RNG.standard_normal((30, 10))
    unit = _unit(f, a, b)
    assert any(la.library_call is not None for la in unit.launches)
    drv, rep = _replay(monkeypatch, tmp_path, unit)
    rep(FakeArray(a.copy()), FakeArray(b.copy()))
    assert rep.captures == 0 and not drv.calls("graph launch") and drv.calls("launch")
    assert lib.matmuls == 1
    assert "matmul through cuBLAS" in rep.describe()


def test_units_that_write_an_argument_launch_kernel_by_kernel(lib, monkeypatch, tmp_path):
    def step(x, v):
        x += 0.1 * v
        return x.sum()

    x, v = RNG.standard_normal(500), RNG.standard_normal(500)
    unit = _unit(step, x.copy(), v)
    drv, rep = _replay(monkeypatch, tmp_path, unit)
    rep(FakeArray(x.copy()), FakeArray(v.copy()))
    assert rep.captures == 0 and not drv.calls("graph launch") and drv.calls("launch")
    assert "writes an argument in place" in rep.describe()


def test_capture_with_reduce_overhead_replays_on_the_device_path(lib, monkeypatch, tmp_path):
    """Through dynexpr.capture: the cuda backend (NVRTC compiles the unit for real; the
    fake driver stands in for libcuda) wraps the unit for replay, and explain says so."""
    from dynexpr.backends import nvrtc

    why = nvrtc.available()
    if why is not None:
        pytest.skip(f"NVRTC is not available here: {why}")
    x = RNG.standard_normal((128, 40)).astype(np.float32)
    w = RNG.standard_normal(40).astype(np.float32)
    drivers = []
    real_load = cuda_driver.load

    def load(unit, path, device=0):
        drv = FakeDriver(unit)
        drivers.append(drv)
        monkeypatch.setattr(cuda_driver, "_lib", drv)
        return real_load(unit, path, device)

    monkeypatch.setattr(cuda_driver, "_lib", FakeDriver(None))
    monkeypatch.setattr(cuda_driver, "_why", None)
    monkeypatch.setattr(cuda_driver, "_ctx", {})
    monkeypatch.setattr(cuda_driver, "load", load)
    dynexpr.config.background_compile = False
    f = dynexpr.capture(scaled_softplus_and_total, backend="cuda", mode="reduce-overhead")
    X, W = FakeArray(x.copy()), FakeArray(w.copy())
    for _ in range(3):
        _check(f(X, W), x, w)
    assert len(drivers) == 1 and len(drivers[0].calls("graph launch")) == 3
    lines = cuda_run.describe(f)
    assert any("a CUDA graph per set of extents (1 kept, 1 captured)" in ln for ln in lines), lines
    text = str(dynexpr.explain(f, X, W))
    assert "Mode reduce-overhead: each CUDA unit is captured once" in text
