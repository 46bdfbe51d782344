"""dynexpr.export: specialisations saved as a C++ header + shared library and called from a
C++ program (exported_cpp.py's driver, no Python in that process), checked against NumPy
on the same inputs (values, dtype, shape); guards that refuse a call say why."""

from __future__ import annotations

import dynexpr
import numpy as np
import pytest
from dynexpr.artifacts.export import ExportError
from exported_cpp import CppError, driver
from test_loop_scalar import lorenz as loop_scalar_lorenz

# Its subject (compiler, cache files, generated text) does not depend on the CPython
# version: run_all.sh runs it on the first version only (conftest.py, one_python).
pytestmark = pytest.mark.one_python

rng = np.random.default_rng(7)


# --------------------------------------------------------------- functions exported
def zscore_and_energy(x, w, eps=1e-6):
    """Standardise rows, weight them; and each row's energy."""
    mu = x.mean(axis=1, keepdims=True)
    sd = np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + eps)
    z = (x - mu) / sd * w
    return z, (x * x).sum(axis=1)


def heat_step(u, alpha):
    """One explicit diffusion step, in place (the interior), as a stencil code writes it."""
    u[1:-1] += alpha * (u[2:] - 2.0 * u[1:-1] + u[:-2])


def lorenz(steps, dt):
    """test_loop_scalar's 500-step recurrence in float64 scalars, from (1, 1, 1)."""
    one = np.float64(1.0)
    return loop_scalar_lorenz((one, one, one), dt, steps)


def dense_gelu(x, w, b):
    h = x @ w + b
    return 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))


def mask_count(x, lo):
    m = (x > lo) & (x < 2 * lo)
    return m, m.sum(), x.astype(np.int64).max()


def same_or_not(a, b):
    return a + b


def breaks(x):
    s = x.sum().item()
    print(s)
    return x * s


W = np.ones(3)


def reads_global(x):
    return x * W


_rng = np.random.default_rng(3)
W1 = _rng.standard_normal((16, 32)).astype(np.float32)  # a model's weights, as globals
B1 = _rng.standard_normal(32).astype(np.float32)
SCALE = np.float32(0.5)


def mlp_layer(x):
    """Reads its weights from globals: they are built into the exported library."""
    h = x @ W1 + B1
    return np.maximum(h, 0) * SCALE, W1.sum(axis=0)


def writes_global(x):
    W[:] = x
    return x * 2


def returns_view(x):
    return (x * 2).T


# ------------------------------------------------------------------------- helpers
def _check(got, want):
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-5 if w.dtype == np.float32 else 1e-12,
                                       atol=1e-6 if w.dtype == np.float32 else 1e-12)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.fixture(scope="module")
def zscore(tmp_path_factory):
    d = tmp_path_factory.mktemp("zscore")
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal(8).astype(np.float32)
    ex = dynexpr.export(zscore_and_energy, x, w,
                        dynamic_shapes={"x": {0: dynexpr.Dim("rows", max=100_000)}})
    ex.add(x.astype(np.float64), w.astype(np.float64))  # a static float64 one
    ex.save(d)
    return ex, driver(d, "zscore_and_energy"), d


# ---------------------------------------------------------------------------- tests
def test_results_equal_numpy_across_a_dynamic_dimension(zscore):
    _, call, d = zscore
    for rows in (2, 16, 1000, 33_333):
        x = rng.standard_normal((rows, 8)).astype(np.float32)
        w = rng.standard_normal(8).astype(np.float32)
        got, _ = call(x, w)
        _check(got, zscore_and_energy(x, w))
    for name in ("zscore_and_energy.hpp", "libzscore_and_energy.so", "libdynexpr_rt.so",
                 "dynexpr/exported.hpp", "zscore_and_energy.json"):
        assert (d / name).is_file(), name


def test_second_specialisation_and_a_default_argument(zscore):
    _, call, _ = zscore
    x = rng.standard_normal((16, 8))
    w = rng.standard_normal(8)
    got, _ = call(x, w)  # eps omitted: its exported value is used
    _check(got, zscore_and_energy(x, w))
    got, _ = call(x, w, 1e-6)
    _check(got, zscore_and_energy(x, w, 1e-6))


def test_refusals_name_the_guard(zscore):
    ex, call, _ = zscore
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal(8).astype(np.float32)
    with pytest.raises(CppError) as e:
        call(x, w, 1e-3)  # eps is part of the specialisation
    assert e.value.code == 6
    assert "eps is 0.001" in e.value.message and "not the float 9.9999999999999995e-07" in \
        e.value.message
    with pytest.raises(CppError) as e:
        call(rng.standard_normal((200_000, 8)).astype(np.float32), w)
    assert "x.shape[0] is 200000, outside 2..100000" in e.value.message
    with pytest.raises(CppError) as e:
        call(x.astype(np.int32), w)
    assert "[0] x.dtype is int32, not float32" in e.value.message
    assert "[1] x.dtype is int32, not float64" in e.value.message
    with pytest.raises(CppError) as e:
        call(x[:, ::-1], w)  # a C-contiguous specialisation refuses a reversed view
    assert "x is not C-contiguous" in e.value.message
    with pytest.raises(CppError) as e:
        call(x)
    assert "takes 2 to 3 arguments, got 1" in e.value.message
    text = ex.describe()
    assert "x: float32[rows:2..100000, 8]" in text and "eps: == 1e-06" in text


def test_in_place_update_of_a_strided_argument(tmp_path):
    u = rng.standard_normal(64)
    ex = dynexpr.export(heat_step, u[::2], 0.1)  # a strided example: any layout runs it
    ex.add(np.zeros(301), 0.1)  # and a second extent, C-contiguous
    assert "u: float64[32] any layout" in ex.describe()
    ex.save(tmp_path)
    call = driver(tmp_path, "heat_step")
    for n in (32, 301):
        base = rng.standard_normal(2 * n)
        views = [base[::2], base[:n]] if n == 32 else [base[:n]]
        for arr in views:
            want = arr.copy()
            heat_step(want, 0.1)
            got, buffers = call(arr, 0.1)
            assert got == []  # returns None
            after = buffers[id(base)]
            np.testing.assert_allclose(after[::2] if arr.strides[0] == 16 else after[:n], want,
                                       rtol=1e-13, atol=1e-13)
    with pytest.raises(CppError) as e:
        call(rng.standard_normal(602)[::2], 0.1)
    assert "[1] u is not C-contiguous" in e.value.message


def test_a_recurrence_and_a_matmul_run_without_python(tmp_path):
    ex = dynexpr.export(lorenz, 500, 0.01)
    ex.save(tmp_path / "l")
    got, _ = driver(tmp_path / "l", "lorenz")(500, 0.01)
    _check(got, lorenz(500, 0.01))

    x = rng.standard_normal((32, 20)).astype(np.float32)
    w = rng.standard_normal((20, 12)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    dynexpr.export(dense_gelu, x, w, b,
                   dynamic_shapes={"x": {0: dynexpr.Dim("batch")}}).save(tmp_path / "g")
    call = driver(tmp_path / "g", "dense_gelu")
    for batch in (3, 257):
        xb = rng.standard_normal((batch, 20)).astype(np.float32)
        got, _ = call(xb, w, b)  # no NumPy BLAS here: dynexpr's own product loop
        _check(got, dense_gelu(xb, w, b))


def test_bool_and_integer_results_and_scalars(tmp_path):
    x = rng.standard_normal((10, 10))
    dynexpr.export(mask_count, x, 0.5).save(tmp_path)
    call = driver(tmp_path, "mask_count")
    x2 = rng.standard_normal((10, 10)) * 4
    got, _ = call(x2, 0.5)
    _check(got, mask_count(x2, 0.5))
    assert got[1].shape == () and got[1].dtype == np.int64


def test_a_transposed_result_comes_back_whole(tmp_path):
    x = rng.standard_normal((3, 5))
    dynexpr.export(returns_view, x).save(tmp_path)
    got, _ = driver(tmp_path, "returns_view")(x)
    _check(got, returns_view(x))


def test_global_arrays_are_built_into_the_library(tmp_path):
    """Note [constants in an export]: weights read from globals are baked in (their value
    at export), listed as assumed; the argument's extent the product needs is checked
    against the weights'; a later change of the global does not reach the library."""
    x = rng.standard_normal((8, 16)).astype(np.float32)
    ex = dynexpr.export(mlp_layer, x, dynamic_shapes={"x": {0: dynexpr.Dim("batch")}})
    assert "W1 is the float32[16, 32] array it held at export (built in)" in ex.describe()
    ex.save(tmp_path)
    assert not list(tmp_path.glob("*.const"))
    call = driver(tmp_path, "mlp_layer")
    for batch in (2, 100):
        xb = rng.standard_normal((batch, 16)).astype(np.float32)
        got, _ = call(xb)
        _check(got, mlp_layer(xb))
    with pytest.raises(CppError) as e:
        call(rng.standard_normal((4, 15)).astype(np.float32))
    assert "x.shape[1] is 15, not 16" in e.value.message
    kept = W1.copy()
    try:
        W1[:] = 0.0  # the library keeps the value it was exported with
        got, _ = call(x)
    finally:
        W1[:] = kept
    _check(got, mlp_layer(x))


def test_aliasing_is_a_guard(tmp_path):
    a = rng.standard_normal(50)
    ex = dynexpr.export(same_or_not, a, a)  # the same array twice
    ex.save(tmp_path)
    call = driver(tmp_path, "same_or_not")
    got, _ = call(a, a)
    _check(got, same_or_not(a, a))
    with pytest.raises(CppError) as e:
        call(a, a.copy())
    assert "a and b: disjoint, not same" in e.value.message


def test_what_cannot_be_exported_is_an_error_that_says_why():
    x = np.ones(4)
    with pytest.raises(ExportError) as e:
        dynexpr.export(breaks, x)
    assert "breaks the graph" in str(e.value) and ".item()" in str(e.value)
    with pytest.raises(ExportError, match="writes into W.*Pass it as an argument"):
        dynexpr.export(writes_global, np.ones(3))
    with pytest.raises(ExportError, match="cannot be dynamic"):
        dynexpr.export(heat_step, np.ones(10), 0.1, dynamic_shapes={"u": {0: True}})
    with pytest.raises(ExportError, match="steps, which is not an array"):
        dynexpr.export(lorenz, 500, 0.01, dynamic_shapes={"steps": {0: True}})
    with pytest.raises(ExportError, match="outside its Dim"):
        dynexpr.export(same_or_not, x, x, dynamic_shapes={"a": {0: dynexpr.Dim("n", min=8)}})
    with pytest.raises(ExportError, match="not usable as a C\\+\\+ namespace"):
        dynexpr.export(same_or_not, x, x, name="class")
