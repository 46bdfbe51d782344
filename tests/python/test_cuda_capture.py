"""Capture with CUDA arrays (Note [the device path] in cuda_run.py), without a GPU: the
arrays are fake_cuda.FakeArray (__cuda_array_interface__ over host memory, a library
registered as host memory), the kernels are the cuda backend's generated source run by
the host emulation. Every result is checked against plain NumPy on the same values:
values, dtype, shape, and that it is an array of the caller's library."""

import dynexpr
import numpy as np
import pytest
from dynexpr import cuda_run
from dynexpr.backends import cuda_arrays
from dynexpr.backends.cuda_emulate import CudaEmulationBackend
from fake_cuda import FakeArray, fake_library
from fake_cuda import fakecupy as fcp

EMU = CudaEmulationBackend()
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def lib():
    before = dynexpr.config.background_compile
    dynexpr.config.background_compile = False
    with fake_library() as lib:
        yield lib
    dynexpr.config.background_compile = before


def dev(a, device=0):
    return FakeArray(np.array(a, copy=True), device)


def same(got, want, rtol=2e-6):
    """got: the captured call's result (FakeArrays), want: NumPy's on the same values."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w, rtol)
        return
    assert isinstance(got, FakeArray), f"a {type(got).__name__}, not the caller's library's array"
    w = np.asarray(want)
    assert got.dtype == w.dtype and got.shape == w.shape, (got.dtype, got.shape, w.dtype, w.shape)
    np.testing.assert_allclose(got.a, w, rtol=rtol, atol=1e-6 if w.dtype.kind == "f" else 0)


def paths(f):
    return cuda_run.describe(f)


def gelu(x, scale):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))) * scale


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_pointwise_chain_runs_as_kernels_and_returns_the_callers_arrays(lib, dtype):
    f = dynexpr.capture(gelu, backend=EMU)
    xh = RNG.standard_normal((37, 129)).astype(dtype)
    x = dev(xh)
    same(f(x, 2.0), gelu(xh, 2.0))
    same(f(x, 2.0), gelu(xh, 2.0))
    assert paths(f) == ["device entry 1 (fakecuda arrays, 2 calls): CUDA kernels"]
    assert f.cache_info()[:3] == (1, 1, 1)
    assert lib.allocated >= 2  # results allocated through the library, once per call
    np.testing.assert_array_equal(x.a, xh)  # the argument is untouched


def softmax_cupy(x):
    e = fcp.exp(x - x.max(axis=-1, keepdims=True))
    return e / fcp.sum(e, axis=-1, keepdims=True)


def softmax_np(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def test_functions_written_with_the_librarys_namespace_capture(lib):
    f = dynexpr.capture(softmax_cupy, backend=EMU)
    xh = RNG.standard_normal((64, 200)).astype(np.float32)
    same(f(dev(xh)), softmax_np(xh))
    assert paths(f)[0].endswith("CUDA kernels")
    text = str(dynexpr.explain(f, dev(xh)))
    assert "Graph break count: 0" in text and "fakecuda arrays on CUDA device 0" in text
    assert "compute capability 9.0" in text and "kernel launches" in text


def stats(x, w):
    mu = x.mean(axis=1, keepdims=True)
    sd = np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
    return (x - mu) / sd * w, x.sum(), np.abs(x).max(axis=0)


def test_reductions_keep_numpys_dtypes_and_return_zero_d_arrays_like_cupy(lib):
    f = dynexpr.capture(stats, backend=EMU)
    xh = RNG.standard_normal((50, 33)).astype(np.float32)
    wh = RNG.standard_normal(33).astype(np.float32)
    got = f(dev(xh), dev(wh))
    want = stats(xh, wh)
    same(got, want, rtol=2e-5)
    assert got[1].shape == () and got[1].dtype == np.float32  # x.sum(): a 0-d array


def update(x, y, a):
    x *= a
    x[1:] += y[:-1]
    return x.sum(axis=0)


def test_in_place_updates_write_into_the_callers_memory(lib):
    f = dynexpr.capture(update, backend=EMU)
    xh = RNG.standard_normal((20, 7))
    yh = RNG.standard_normal((20, 7))
    x = dev(xh)
    got = f(x, dev(yh), 1.5)
    want_x = xh.copy()
    want = update(want_x, yh, 1.5)
    same(got, want)
    np.testing.assert_allclose(x.a, want_x, rtol=1e-12)
    assert paths(f)[0].endswith("CUDA kernels")


def test_strided_and_transposed_arguments(lib):
    f = dynexpr.capture(lambda a, b: a * 2.0 + b, backend=EMU)
    ah = RNG.standard_normal((40, 30)).astype(np.float32)
    bh = RNG.standard_normal((30, 40)).astype(np.float32)
    a, b = dev(ah), dev(bh)
    same(f(a[::2, 1:], b.T[::2, 1:]), ah[::2, 1:] * 2.0 + bh.T[::2, 1:])
    same(f(a, b.T), ah * 2.0 + bh.T)


def test_the_same_array_twice_is_one_input_and_partial_overlap_runs_plain(lib):
    def axpy(x, y):
        y += 2.0 * x
        return y

    f = dynexpr.capture(axpy, backend=EMU)
    xh = RNG.standard_normal(100)
    x = dev(xh)
    r = f(x, x)
    np.testing.assert_allclose(x.a, 3.0 * xh)
    assert r is x
    z = dev(xh)
    r = f(z[1:], z[:-1])  # overlapping views: the library runs it, as without dynexpr
    want = xh.copy()
    axpy(want[1:], want[:-1])
    np.testing.assert_allclose(z.a, want)
    assert f._device.last.reason.startswith("argument 0 and argument 1 overlap in device memory")


def test_guards_recompile_for_dtype_device_capability_and_globals(lib):
    f = dynexpr.capture(gelu, backend=EMU, dynamic=False)
    xh = RNG.standard_normal((8, 16))
    same(f(dev(xh), 1.0), gelu(xh, 1.0))
    same(f(dev(xh.astype(np.float32)), 1.0), gelu(xh.astype(np.float32), 1.0))
    same(f(dev(xh, device=1), 1.0), gelu(xh, 1.0))  # device 1: capability 8.0
    assert len(f._device.entries) == 3
    keys = {e.key[0][2:4] for e in f._device.entries}
    assert keys == {(0, (9, 0)), (1, (8, 0))}
    same(f(dev(xh), 3.0), gelu(xh, 3.0))  # a scalar's value is a guard, as on the CPU
    assert len(f._device.entries) == 4


SHIFT = 1.0


def shifted(x):
    return x + SHIFT


def test_a_changed_global_recompiles(lib):
    global SHIFT
    f = dynexpr.capture(shifted, backend=EMU)
    xh = RNG.standard_normal(10)
    same(f(dev(xh)), xh + 1.0)
    SHIFT = 5.0
    try:
        same(f(dev(xh)), xh + 5.0)
    finally:
        SHIFT = 1.0
    assert len(f._device.entries) == 2


WEIGHT = None  # a CUDA array read as a global (set by the test below)


def scaled_by_global(x):
    return np.tanh(x * WEIGHT) + WEIGHT


def make_affine(w, b):
    def affine(x):
        return x * w + b

    return affine


def test_cuda_arrays_in_globals_and_closures_are_inputs_of_the_kernels(lib):
    global WEIGHT
    xh = RNG.standard_normal((16, 24)).astype(np.float32)
    wh = RNG.standard_normal(24).astype(np.float32)
    bh = RNG.standard_normal(24).astype(np.float32)
    f = dynexpr.capture(scaled_by_global, backend=EMU)
    try:
        WEIGHT = dev(wh)
        same(f(dev(xh)), np.tanh(xh * wh) + wh)
        same(f(dev(xh)), np.tanh(xh * wh) + wh)
        assert paths(f) == ["device entry 1 (fakecuda arrays, 2 calls): CUDA kernels"]
        w2 = RNG.standard_normal(24).astype(np.float32)
        WEIGHT = dev(w2)  # another array of the same kind: the same entry reads its values
        same(f(dev(xh)), np.tanh(xh * w2) + w2)
        assert len(f._device.entries) == 1
        w64 = wh.astype(np.float64)
        WEIGHT = dev(w64)  # another dtype: the global's guards ask for a new entry
        same(f(dev(xh)), np.tanh(xh * w64) + w64)
        assert len(f._device.entries) == 2
        WEIGHT = dev(wh, device=1)  # a global on another device than the argument
        same(f(dev(xh)), np.tanh(xh * wh) + wh)
        assert "devices" in f._device.last.reason
        WEIGHT = wh  # a NumPy global next to a CUDA argument: the library decides
        same(f(dev(xh)), np.tanh(xh * wh) + wh)
        assert "NumPy array (a global or closure)" in paths(f)[-1]
        WEIGHT = dev(wh)
        text = str(dynexpr.explain(f, dev(xh)))
        assert "CUDA kernel launches" in text or "CUDA unit" in text, text
    finally:
        WEIGHT = None
    g = dynexpr.capture(make_affine(dev(wh), dev(bh)), backend=EMU)
    same(g(dev(xh)), xh * wh + bh)
    same(g(dev(xh)), xh * wh + bh)
    assert paths(g) == ["device entry 1 (fakecuda arrays, 2 calls): CUDA kernels"]
    w = dev(wh)
    h = dynexpr.capture(make_affine(w, w), backend=EMU)  # one array in two cells
    same(h(dev(xh)), xh * wh + wh)
    assert paths(h)[0].endswith("CUDA kernels")


def weighted_sum(xs, ws):
    total = xs[0] * ws[0]
    for x, w in zip(xs[1:], ws[1:]):
        total = total + x * w
    return np.tanh(total)


def test_cuda_arrays_inside_list_and_tuple_arguments_are_inputs(lib):
    hs = [RNG.standard_normal((12, 40)).astype(np.float32) for _ in range(3)]
    f = dynexpr.capture(weighted_sum, backend=EMU)
    want = weighted_sum(hs, (0.5, 1.5, -2.0))
    same(f([dev(h) for h in hs], (0.5, 1.5, -2.0)), want)
    same(f([dev(h) for h in hs], (0.5, 1.5, -2.0)), want)  # new arrays, the same entry
    assert paths(f) == ["device entry 1 (fakecuda arrays, 2 calls): CUDA kernels"]
    ws = [RNG.standard_normal(40).astype(np.float32) for _ in range(3)]
    same(f(tuple(dev(h) for h in hs), [dev(w) for w in ws]), weighted_sum(hs, ws))
    assert paths(f)[-1].endswith("CUDA kernels")
    same(f([dev(h) for h in hs[:2]], (1.0, 2.0)), weighted_sum(hs[:2], (1.0, 2.0)))
    assert len(f._device.entries) == 3  # another length: the list's guard asks again
    assert all(p.endswith("CUDA kernels") for p in paths(f))
    nested = dynexpr.capture(lambda pair, k: pair[0][0] * k + pair[1], backend=EMU)
    a, b = dev(hs[0]), dev(hs[1])
    same(nested(([a], b), 3.0), hs[0] * 3.0 + hs[1])
    assert paths(nested)[0].endswith("CUDA kernels")
    assert cuda_run.has_device_arrays([[1.0, ("x", a)]])
    assert not cuda_run.has_device_arrays([[1.0, 2.0], (hs[0],)])


def field_of_global(scale, shift=0.0):
    return np.tanh(WEIGHT * scale) + shift


def test_calls_whose_only_cuda_arrays_are_globals_run_on_the_device(lib):
    # Weights made once as globals; the call passes Python numbers only.
    global WEIGHT
    wh = RNG.standard_normal((32, 8)).astype(np.float32)
    f = dynexpr.capture(field_of_global, backend=EMU)
    try:
        WEIGHT = dev(wh)
        same(f(0.5), np.tanh(wh * np.float32(0.5)))
        same(f(0.5, 1.0), np.tanh(wh * np.float32(0.5)) + 1.0)
        assert all(p.endswith("CUDA kernels") for p in paths(f))
        assert cuda_run.reads_device_arrays(field_of_global)
        text = str(dynexpr.explain(f, 0.5))
        assert "CUDA" in text, text
        WEIGHT = wh  # a NumPy global: the CPU path, compiled
        np.testing.assert_allclose(f(0.5), np.tanh(wh * np.float32(0.5)), rtol=2e-6)
        assert not cuda_run.reads_device_arrays(field_of_global)
    finally:
        WEIGHT = None
    g = dynexpr.capture(make_affine(dev(wh), dev(wh)), backend=EMU)  # closure cells only
    same(g(2.0), wh * 2.0 + wh)
    assert paths(g)[0].endswith("CUDA kernels")


class _Unaskable:
    def __getattr__(self, name):
        raise RuntimeError("no attributes here")


UNASKABLE = _Unaskable()


def reads_an_unaskable_global(x):
    return x * 2.0 if UNASKABLE is not None else x


def test_a_global_that_fails_the_question_is_no_array(lib):
    assert not cuda_run.reads_device_arrays(reads_an_unaskable_global)
    f = dynexpr.capture(reads_an_unaskable_global)
    np.testing.assert_array_equal(f(np.ones(3)), np.full(3, 2.0))


def layer(params, x):
    h = np.tanh(x @ params["w1"] + params["b1"])
    return h @ params["layers"][0]["w"] + params["layers"][0]["b"]


def test_cuda_arrays_inside_dict_arguments_are_inputs(lib):
    # A model's parameters as a dict of arrays (nested: a list of per-layer dicts).
    ph = {"w1": RNG.standard_normal((20, 16)).astype(np.float32),
          "b1": RNG.standard_normal(16).astype(np.float32),
          "layers": [{"w": RNG.standard_normal((16, 4)).astype(np.float32),
                      "b": RNG.standard_normal(4).astype(np.float32)}]}
    xh = RNG.standard_normal((8, 20)).astype(np.float32)

    def to_dev(p):
        if type(p) is dict:
            return {k: to_dev(v) for k, v in p.items()}
        if type(p) is list:
            return [to_dev(v) for v in p]
        return dev(p)

    f = dynexpr.capture(layer, backend=EMU)
    same(f(to_dev(ph), dev(xh)), layer(ph, xh), rtol=2e-5)
    same(f(to_dev(ph), dev(xh)), layer(ph, xh), rtol=2e-5)  # new arrays, the same entry
    assert paths(f) == ["device entry 1 (fakecuda arrays, 2 calls): CUDA kernels"]
    other = {**ph, "b1": ph["b1"].astype(np.float64)}  # another dtype: another entry
    same(f(to_dev(other), dev(xh)), layer(other, xh), rtol=2e-5)
    assert len(f._device.entries) == 2
    assert all(p.endswith("CUDA kernels") for p in paths(f))
    assert cuda_run.has_device_arrays([{"k": [1.0, dev(xh)]}])
    assert not cuda_run.has_device_arrays([{"k": xh}])
    source, _ = next(cuda_run._items({"a": {"b": dev(xh)}}, ("arg", 0)))
    assert source == ("item", ("item", ("arg", 0), "a"), "b")


def test_changing_extents_become_dynamic(lib):
    f = dynexpr.capture(softmax_np, backend=EMU)
    for rows in (3, 5, 9, 17):
        xh = RNG.standard_normal((rows, 12)).astype(np.float32)
        same(f(dev(xh)), softmax_np(xh))
    assert len(f._device.entries) == 2  # the second extent made the rows dynamic


def breaking(x, n):
    total = 0.0
    for i in range(n):
        v = (x * i).sum()
        if v.item() > 0:  # .item() in a loop: a graph break
            total += v.item()
    return np.exp(x) * total


def matmul_gelu(x, w, b):
    return gelu(x @ w + b, 1.0), (x.T @ x) * 0.5


def recurrence(x, steps):
    for _ in range(steps):  # a loop node (rerolled): not generated for CUDA yet
        x = 0.9 * x + 0.1 * np.tanh(x)
    return x


def test_matrix_products_run_through_the_library_between_the_kernels(lib):
    xh = RNG.standard_normal((64, 48)).astype(np.float32)
    wh = RNG.standard_normal((48, 32)).astype(np.float32)
    bh = RNG.standard_normal(32).astype(np.float32)
    f = dynexpr.capture(matmul_gelu, backend=EMU)
    same(f(dev(xh), dev(wh), dev(bh)), matmul_gelu(xh, wh, bh), rtol=2e-5)
    assert paths(f)[0].endswith("CUDA kernels")
    assert lib.matmuls == 2  # x @ w and x.T @ x (its operand transposed into a workspace)
    v = RNG.standard_normal(48)
    g = dynexpr.capture(lambda a, v: 2.0 * (a @ v), backend=EMU)
    same(g(dev(xh.astype(np.float64)), dev(v)), 2.0 * (xh.astype(np.float64) @ v))


def test_what_cannot_run_as_kernels_runs_plain_and_right(lib):
    xh = RNG.standard_normal((6, 5))
    f = dynexpr.capture(breaking, backend=EMU)
    same(f(dev(xh), 30), breaking(xh, 30))
    assert "graph break" in paths(f)[0]
    g = dynexpr.capture(recurrence, backend=EMU)
    same(g(dev(xh), 500), recurrence(xh, 500))
    assert "not generated for CUDA yet: a loop" in paths(g)[0]
    h = dynexpr.capture(lambda x, y: x + y, backend=EMU)
    got = h(dev(xh), xh)  # a NumPy array next to a CUDA one: the library decides
    same(got, xh + xh)
    assert "NumPy array" in paths(h)[0]
    text = str(dynexpr.explain(breaking, dev(xh), 30))
    assert "Graph break count: 1" in text and "plain Python" in text


def test_the_cuda_backend_refuses_numpy_arrays_and_runs_plain_without_a_driver(lib):
    f = dynexpr.capture(gelu, backend="cuda")
    with pytest.raises(TypeError, match=r"NumPy array.*cupy.asarray.*backend='cpu'"):
        f(np.ones(3), 1.0)
    # The default backend: CUDA arrays go to the cuda backend, which needs libcuda and
    # NVRTC; where they are missing the call runs plain on the library, with a warning.
    g = dynexpr.capture(gelu)
    xh = RNG.standard_normal(50)
    why = dynexpr.backends.get("cuda").unavailable()
    if why is None:
        pytest.skip("this machine has a CUDA driver: tests/gpu/ covers the real backend")
    with pytest.warns(dynexpr.DynexprWarning, match="not available"):
        same(g(dev(xh), 1.0), gelu(xh, 1.0))
    assert "not available" in paths(g)[0]
    assert "not available here" in str(dynexpr.explain(g, dev(xh), 1.0))


def test_a_background_compile_runs_plain_until_the_kernel_is_ready(lib):
    dynexpr.config.background_compile = True
    f = dynexpr.capture(lambda x: np.sqrt(np.abs(x)) * 3.0 - 1.0, backend=CudaEmulationBackend(strict=True))
    xh = RNG.standard_normal(300).astype(np.float32)
    same(f(dev(xh)), np.sqrt(np.abs(xh)) * 3.0 - 1.0)
    dynexpr.synchronize()
    same(f(dev(xh)), np.sqrt(np.abs(xh)) * 3.0 - 1.0)
    assert paths(f)[0].endswith("CUDA kernels")


def test_a_library_that_does_not_speak_numpy_runs_operators_only(lib):
    with fake_library(name="faketorch", numpy_api=False) as torchish:
        assert cuda_arrays.library_of(dev(np.ones(2))) is torchish
        f = dynexpr.capture(lambda x, y: (x * y + 1.0) * 0.5 - x / y, backend=EMU)
        xh, yh = RNG.standard_normal(40), RNG.uniform(1, 2, 40)
        same(f(dev(xh), dev(yh)), (xh * yh + 1.0) * 0.5 - xh / yh)
        assert paths(f)[0].endswith("CUDA kernels")
        g = dynexpr.capture(lambda x: x.max(1), backend=EMU)  # torch: values and indices
        same(g(dev(xh.reshape(4, 10))), xh.reshape(4, 10).max(1))
        assert "ndarray.max" in paths(g)[0]
        h = dynexpr.capture(lambda x: x / 2, backend=EMU)  # int / int: float32 in torch
        same(h(dev(np.arange(6))), np.arange(6) / 2)
        assert "integer values" in paths(h)[0]


def test_unusable_arrays_run_plain_and_name_why(lib):
    class OldInterface(FakeArray):
        @property
        def __cuda_array_interface__(self):
            return {**super().__cuda_array_interface__, "version": 2}

    f = dynexpr.capture(lambda x: x * 2.0, backend=EMU)
    x = OldInterface(np.arange(4.0))
    got = f(x)
    np.testing.assert_array_equal(got.a, np.arange(4.0) * 2.0)
    assert "version 2" in f._device.last.reason
    xs = [dev(np.ones(3)), dev(np.ones(3), device=1)]
    g = dynexpr.capture(lambda a, b: a + b, backend=EMU)
    g(*xs)
    assert "devices [0, 1]" in g._device.last.reason
