"""capture() with the CUDA arrays users have (Note [the device path] in cuda_run.py) on a
real device: CuPy arrays and torch CUDA tensors in, arrays of the same library out,
compared with NumPy on the same values. The same paths run without a GPU on fake arrays
in tests/python/test_cuda_capture.py.

Never run yet: written without a GPU. Every test skips with the reason where there is
no GPU, no NVRTC or no CuPy (torch's tests also without torch's CUDA build)."""

import dynexpr
import numpy as np
import pytest
from device import cupy, needs_gpu
from dynexpr import cuda_run

pytestmark = needs_gpu
RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def synchronous():
    before = dynexpr.config.background_compile
    dynexpr.config.background_compile = False
    yield
    dynexpr.config.background_compile = before


def gelu(x, s):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))) * s


def softmax_cp(x):
    e = cupy.exp(x - x.max(axis=-1, keepdims=True))
    return e / cupy.sum(e, axis=-1, keepdims=True)


def _close(got, want, rtol):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cupy_arrays_run_kernels_and_come_back_as_cupy(dtype):
    f = dynexpr.capture(gelu)
    xh = RNG.standard_normal((1000, 333)).astype(dtype)
    x = cupy.asarray(xh)
    for _ in range(2):
        r = f(x, 2.0)
        assert isinstance(r, cupy.ndarray) and r.device.id == x.device.id
        _close(cupy.asnumpy(r), gelu(xh, 2.0), 1e-5)
    assert cuda_run.describe(f)[0].endswith("CUDA kernels")


def test_cupy_spelled_functions_and_reductions():
    f = dynexpr.capture(softmax_cp)
    xh = RNG.standard_normal((512, 1000)).astype(np.float32)
    r = f(cupy.asarray(xh))
    e = np.exp(xh - xh.max(-1, keepdims=True))
    _close(cupy.asnumpy(r), e / e.sum(-1, keepdims=True), 1e-5)
    assert "CUDA kernels" in cuda_run.describe(f)[0]


def test_in_place_on_the_callers_stream():
    def update(x, y):
        x *= 2.0
        x[1:] += y[:-1]
        return x.sum()

    f = dynexpr.capture(update)
    xh, yh = RNG.standard_normal((300, 40)), RNG.standard_normal((300, 40))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        x, y = cupy.asarray(xh), cupy.asarray(yh)
        r = f(x, y)
    s.synchronize()
    want_x = xh.copy()
    want = update(want_x, yh)
    np.testing.assert_allclose(cupy.asnumpy(x), want_x, rtol=1e-12)
    np.testing.assert_allclose(float(r), want, rtol=1e-10)


def test_numpy_arrays_to_the_cuda_backend_are_an_error():
    f = dynexpr.capture(gelu, backend="cuda")
    with pytest.raises(TypeError, match="NumPy array"):
        f(np.ones(4), 1.0)


def test_torch_cuda_tensors_with_operators():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    f = dynexpr.capture(lambda x, y: (x * y + 1.0) * 0.5 - x / y)
    xh, yh = RNG.standard_normal(4096).astype(np.float32), RNG.uniform(1, 2, 4096).astype(np.float32)
    r = f(torch.from_numpy(xh).cuda(), torch.from_numpy(yh).cuda())
    assert isinstance(r, torch.Tensor) and r.is_cuda
    _close(r.cpu().numpy(), (xh * yh + 1.0) * 0.5 - xh / yh, 1e-6)
