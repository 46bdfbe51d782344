"""Scale and bias folded into the product's BLAS call, the product written straight into
its output (Note [alpha/beta folding] in dynexpr/blas_fold.py, dx::matmul_into in
include/dynexpr/interop/matmul.hpp). Each result is compared with plain NumPy (values,
dtype, shape, arguments unchanged); the schedule is checked to be the one BLAS call."""

import numpy as np
import pytest

import dynexpr
from dynexpr import codegen, schedule
from compare import assert_same

RNG = np.random.default_rng(1313)
TOL = {"float32": (1e-4, 1e-3), "float64": (1e-9, 1e-9)}


def gemm_ab(A, B, C, alpha, beta):
    return alpha * A @ B + beta * C


def gemv_bias(A, x, b):
    return A @ x + b


def scaled_after(A, B, s):
    return (A @ B) * s


def minus_bias(A, x, b):
    return A @ x - b


def t_gemv_scaled_bias(A, y, b):
    return 0.5 * (A.T @ y) + b


def row_bias(A, B, r):
    return A @ B + r  # r (n,) broadcast over the rows


def bias_first(A, x, b):
    return b + 2.0 * (A @ x)


def vec_mat(x, A, b):
    return x @ A + b


def dot_bias(A, x, b):
    return np.dot(A, x) + b


def mlp(X, W1, b1, W2, b2):
    h = np.maximum(X @ W1 + b1, 0.0)
    return h @ W2 + b2


# fn, argument shapes (() is a Python float), folded kernels expected with one BLAS call each
CASES = [
    (gemm_ab, [(6, 5), (5, 4), (6, 4), (), ()], 1),
    (gemv_bias, [(6, 5), (5,), (6,)], 1),
    (scaled_after, [(6, 5), (5, 4), ()], 1),
    (minus_bias, [(6, 5), (5,), (6,)], 1),
    (t_gemv_scaled_bias, [(5, 6), (5,), (6,)], 1),
    (row_bias, [(6, 5), (5, 4), (4,)], 1),
    (bias_first, [(6, 5), (5,), (6,)], 1),
    (vec_mat, [(6,), (6, 5), (5,)], 1),
    (dot_bias, [(6, 5), (5,), (6,)], 1),
    (mlp, [(7, 6), (6, 5), (5,), (5, 3), (3,)], 2),
]


def make(shapes, dtype, order="C"):
    out = []
    for s in shapes:
        if s == ():
            out.append(float(RNG.uniform(-2, 2)))
        else:
            out.append(np.asarray(RNG.standard_normal(s), dtype=dtype, order=order))
    return out


def product_kernels(fn, args):
    ex = dynexpr.explain(fn, *args)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)
    s = schedule.schedule(ex.graphs[0])
    return s, codegen.generate(s)


@pytest.mark.parametrize("dtype, order", [("float64", "C"), ("float32", "F")])
@pytest.mark.parametrize("fn, shapes, n_products", CASES, ids=lambda v: getattr(v, "__name__", None))
def test_folded_product_matches_numpy(fn, shapes, n_products, dtype, order):
    args = make(shapes, dtype, order)
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    f = dynexpr.capture(fn)
    want = fn(*args)
    assert_same(want, f(*args), tol=TOL)
    assert_same(want, f(*args), tol=TOL)
    for a, b in zip(args, before):  # arguments are not written
        assert_same(b, a)
    s, src = product_kernels(fn, args)
    # every product is one kernel that writes its result where it lives: no pointwise
    # pass over a temporary product, no copy of it into the output
    assert [k.kind for k in s.kernels].count("matmul") == n_products
    assert src.count("dx::matmul_into(") == n_products
    assert "dx::matmul(" not in src
    if n_products == 1:
        assert [k.kind for k in s.kernels] == ["matmul"], src


def test_scale_as_a_0d_array_argument_and_strided_operands():
    def fn(A, x, b, s):
        return s * (A[::2, ::3] @ x[1::2]) + b

    A, x, b = RNG.standard_normal((12, 15)), RNG.standard_normal(10), RNG.standard_normal(6)
    s = np.array(1.5)
    f = dynexpr.capture(fn)
    assert_same(fn(A, x, b, s), f(A, x, b, s))
    s2 = np.array(-3.0)  # the scale is read at call time, not baked in
    assert_same(fn(A, x, b, s2), f(A, x, b, s2))
    st, src = product_kernels(fn, (A, x, b, s))
    assert [k.kind for k in st.kernels] == ["matmul"], src


def test_what_does_not_fold_is_still_right():
    def shared(A, B, C):
        P = A @ B
        return P + C, P * 2.0  # the product has two users: it is materialised once

    def promoted(A, B, C):
        return A @ B + C  # float32 product + float64 matrix: a float64 result

    def int_product(A, B, C):
        return 3 * (A @ B) + C

    def both_products(A, B, C):
        return A @ B + C @ B  # one of them takes the other as its bias

    A32, B32 = (RNG.standard_normal((4, 4)).astype("float32") for _ in range(2))
    C64 = RNG.standard_normal((4, 4))
    Ai, Bi, Ci = (RNG.integers(-5, 5, (4, 4)) for _ in range(3))
    for fn, args in ((shared, (C64, C64.T, C64)), (promoted, (A32, B32, C64)),
                     (int_product, (Ai, Bi, Ci)), (both_products, (C64, C64 + 1, C64 * 2))):
        f = dynexpr.capture(fn)
        assert_same(fn(*args), f(*args), tol=TOL)
    _, src = product_kernels(both_products, (C64, C64 + 1, C64 * 2))
    assert src.count("dx::matmul_into(") == 2 and ", true);" in src


def test_gram_product_keeps_its_bias_out_of_blas():
    """A bias on X.T @ X is added after the product, not folded as beta: syrk, which
    NumPy uses for it, has no beta (Note [alpha/beta folding]); a scale still folds."""
    def ridge(X, lam):
        return X.T @ X + lam * np.eye(X.shape[1])

    def scaled(X, C):
        return 0.5 * (X @ X.T) + C

    X = RNG.standard_normal((30, 6))
    for fn, args in ((ridge, (X, 0.25)), (scaled, (X, RNG.standard_normal((30, 30))))):
        f = dynexpr.capture(fn)
        assert_same(fn(*args), f(*args), tol=TOL)
        st, src = product_kernels(fn, args)
        assert src.count("dx::matmul_into(") == 1 and ", true);" not in src, src
        assert [k.kind for k in st.kernels][-1] == "pointwise", src  # the add, after it
    _, src = product_kernels(scaled, (X, RNG.standard_normal((30, 30))))
    assert src.split("dx::matmul_into(")[1].split(";")[0].endswith(", 0.5)"), src  # alpha


def test_product_written_into_a_mutated_argument():
    def fn(A, x):
        x[:] = A @ x  # the destination is an operand: the product goes through a temporary
        return x

    def fn_bias(A, x, y):
        y[:] = A @ x + y
        return y

    A = RNG.standard_normal((5, 5))
    x, y = RNG.standard_normal(5), RNG.standard_normal(5)
    f, g = dynexpr.capture(fn), dynexpr.capture(fn_bias)
    x1, x2 = x.copy(), x.copy()
    assert_same(fn(A, x1), f(A, x2))
    assert_same(x1, x2)
    y1, y2 = y.copy(), y.copy()
    assert_same(fn_bias(A, x, y1), g(A, x, y2))
    assert_same(y1, y2)


@pytest.mark.parametrize("shapes", [[(0, 3), (3,), (0,)], [(3, 0), (0,), (3,)],
                                    [(1, 4), (4,), (1,)], [(4, 1), (1,), (4,)]])
def test_empty_and_single_row_products(shapes):
    args = make(shapes, "float64")
    f = dynexpr.capture(gemv_bias)
    assert_same(gemv_bias(*args), f(*args))
