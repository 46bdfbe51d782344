"""Matrix products run NumPy's BLAS (issue 13 part 2; Note [NumPy's BLAS] in
dynexpr/blas.py, Note [BLAS hook] in include/dynexpr/interop/blas.hpp): `@`, np.matmul,
np.dot, np.inner, np.vdot and np.outer captured with the pointwise work around them, each
result compared with plain NumPy (values, dtype, shape) on float32/float64/int/bool,
transposed and strided operands, 1-D/2-D; batched products, np.tensordot and np.einsum are
tests/python/test_contractions.py's, scale and bias folding test_blas_fold.py's."""

import subprocess
import sys

import numpy as np
import pytest

import dynexpr
from dynexpr import blas
from compare import assert_same

RNG = np.random.default_rng(13)
DTYPES = ["float32", "float64", "int32", "int64", "bool"]


def arr(shape, dtype):
    x = RNG.standard_normal(shape) * 3
    return (x > 0) if dtype == "bool" else x.astype(dtype)


def mm(a, b):
    return a @ b


def mm_t(a, b):
    return a.T @ b


def mm_strided(a, b):
    return a[::2, 1::2] @ b[::3]


def around(a, b):
    return np.abs((a * 2) @ b + 1) @ b.T  # pointwise before, between and after


def gemm_ab(a, b, c, alpha, beta):
    return alpha * a @ b + beta * c


CASES = [  # fn, shapes
    (mm, [(7, 5), (5, 3)]),
    (mm, [(7, 5), (5,)]),
    (mm, [(5,), (5, 3)]),
    (mm, [(5,), (5,)]),
    (mm, [(1, 5), (5, 1)]),
    (mm_t, [(5, 7), (5, 3)]),
    (mm_t, [(5, 7), (5,)]),
    (mm_strided, [(12, 10), (15, 4)]),
    (mm_strided, [(12, 10), (15,)]),
    (around, [(6, 4), (4, 4)]),
]


def test_numpy_blas_is_found():
    # The scipy-openblas wheels NumPy ships (and system builds) export CBLAS gemm/gemv.
    found = blas.numpy_cblas()
    assert found is not None and all(found[0])
    assert all(found[2]), "ssyrk/dsyrk not found: Gram products run through gemm"


def gram_left(x):
    return x.T @ x


def gram_right(x):
    return x @ x.T


def gram_plus(x, c):
    return 2.0 * (x.T @ x) + c  # a scale and a bias folded into BLAS: gemm, not syrk


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, view", [((50, 7), None), ((7, 50), None), ((300, 40), None),
                                         ((40, 30), "stride"), ((30, 40), "transposed"),
                                         ((1, 5), None), ((5, 1), None)])
def test_gram_products_match_numpy_and_are_symmetric(dtype, shape, view):
    """Note [Gram products] (interop/matmul.hpp): x.T @ x and x @ x.T go to syrk as
    NumPy's do, which fills one triangle and mirrors it: the captured result equals
    NumPy's within rounding and is exactly symmetric, as NumPy's is. Which BLAS routine
    runs is checked in C++ (test_eigen.cpp, with recording BLAS hooks)."""
    x = arr(shape, dtype)
    if view == "stride":
        x = x[::2]
    elif view == "transposed":
        x = x.T
    for fn in (gram_left, gram_right):
        f = dynexpr.capture(fn)
        for _ in range(2):
            want, got = fn(x), f(x)
            assert_same(want, got)
            assert np.array_equal(got, got.T), fn.__name__
    c = arr((x.shape[1], x.shape[1]), dtype)
    f = dynexpr.capture(gram_plus)
    assert_same(gram_plus(x, c), f(x, c))


@pytest.mark.parametrize("fn, shapes, dtype",
                         [(f, s, d) for f, s in CASES for d in DTYPES
                          if not (f is around and d == "bool")],  # 2 * bool is int64's case
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_matmul_matches_numpy(fn, shapes, dtype):
    args = [arr(s, dtype) for s in shapes]
    f = dynexpr.capture(fn)
    assert_same(fn(*args), f(*args))
    assert_same(fn(*args), f(*args))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [3, 64, 300])
def test_scaled_product_plus_scaled_matrix(n, dtype):
    a, b, c = arr((n, n), dtype), arr((n, n), dtype), arr((n, n), dtype)
    f = dynexpr.capture(gemm_ab)
    for alpha, beta in ((0.5, 2.0), (-1.0, 0.0)):
        assert_same(gemm_ab(a, b, c, alpha, beta), f(a, b, c, alpha, beta),
                    tol={"float32": (1e-4, 1e-3), "float64": (1e-9, 1e-9)})
    ex = dynexpr.explain(gemm_ab, a, b, c, 0.5, 2.0)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)


def linalg_fns(a, b, m):
    return (np.inner(a, b), np.vdot(a, b), np.outer(a, b), np.dot(a, b), np.inner(m, m),
            np.inner(m, b), np.inner(a, m), np.dot(m, b), m.dot(m.T), np.vdot(m, m),
            np.outer(m, a))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dot_inner_vdot_outer_are_captured(dtype):
    a, b, m = arr((4,), dtype), arr((4,), dtype), arr((3, 4), dtype)
    f = dynexpr.capture(linalg_fns)
    assert_same(linalg_fns(a, b, m), f(a, b, m))
    ex = dynexpr.explain(linalg_fns, a, b, m)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)


def plain_ops(a, b, c):
    return np.tensordot(a, b, axes=1), np.einsum("ij,jk->ik", a, b), c @ c, np.inner(c, c)


def test_contractions_beside_products_are_right():
    a, b, c = arr((3, 4), "float64"), arr((4, 2), "float64"), arr((2, 3, 3), "float64")
    f = dynexpr.capture(plain_ops)
    assert_same(plain_ops(a, b, c), f(a, b, c))
    assert_same(plain_ops(a, b, c), f(a, b, c))


def test_complex_and_mismatched_operands_run_as_numpy():
    def fn(a, b):
        return np.vdot(a, b)

    f = dynexpr.capture(fn)
    z = np.array([1 + 2j, 3 - 1j])
    assert_same(fn(z, z), f(z, z))
    with pytest.raises(ValueError):
        f(np.ones(3), np.ones(4))


def test_without_blas_the_row_loop_computes_the_same():
    # DYNEXPR_BLAS=0: a unit's row loop (detail::loop_product, rows split over the pool), in
    # a fresh process.
    code = (
        "import numpy as np, dynexpr\n"
        "from dynexpr import blas\n"
        "assert blas.numpy_cblas() is None\n"
        "a = np.arange(300.).reshape(20, 15) / 7; x = np.arange(20.)\n"
        "f = dynexpr.capture(lambda a, x: np.tanh(a.T @ x) + a.T @ a[:, :3].sum(axis=1))\n"
        "np.testing.assert_allclose(f(a, x), np.tanh(a.T @ x) + a.T @ a[:, :3].sum(axis=1))\n"
        "print('ok')\n"
    )
    env = {**__import__("os").environ, "DYNEXPR_BLAS": "0", "DYNEXPR_BACKGROUND_COMPILE": "0"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
