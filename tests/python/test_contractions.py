"""np.tensordot, np.einsum, N-D np.dot and batched matmul captured as BLAS products (Note
[contractions as one product] in dynexpr/capture/np_linalg.py), each compared with plain
NumPy (values, dtype, shape, arguments unchanged); what is not one product breaks with a
reason and is still right."""

import numpy as np
import pytest

import dynexpr
from compare import assert_same

RNG = np.random.default_rng(2024)


def arr(shape, dtype, order="C"):
    x = RNG.standard_normal(shape) * 3
    x = (x > 0) if dtype == "bool" else x.astype(dtype)
    return np.asarray(x, order=order)


def contractions(a, b, c, d, e, v):
    return (
        np.tensordot(a, b, axes=([1, 0], [0, 1])),  # (3,4,5) x (4,3,2) -> (5,2)
        np.tensordot(a, c, axes=1),  # last axis of a with the first of c
        np.tensordot(d, d, axes=0),  # an outer product
        np.einsum("ij,jk->ki", d, e),  # the result transposed
        np.einsum("bij,bjk->bik", c, c),  # a batch axis
        np.einsum("ij,kj", d, d),  # implicit output: 'ik'
        np.dot(c, e[:, :3]),  # N-D dot: last axis of c with e's rows
        np.dot(c, v),
        c @ c,  # batched matmul
        c @ e[:, :3],  # batch of matrices @ one matrix: one gemm of all rows
        v @ c,
        c @ v,
    )


def batched(x, y):
    return x @ y


@pytest.mark.parametrize("dtype, order", [("float64", "C"), ("float32", "F"), ("int64", "C"),
                                          ("bool", "C")])
def test_contractions_match_numpy(dtype, order):
    args = [arr((3, 4, 5), dtype, order), arr((4, 3, 2), dtype, order),
            arr((5, 3, 3), dtype, order), arr((4, 3), dtype, order), arr((3, 6), dtype, order),
            arr((3,), dtype)]
    before = [a.copy() for a in args]
    f = dynexpr.capture(contractions)
    want = contractions(*args)
    assert_same(want, f(*args))
    assert_same(want, f(*args))
    for a, b in zip(args, before):
        assert_same(b, a)
    ex = dynexpr.explain(contractions, *args)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


@pytest.mark.parametrize("shapes", [
    [(2, 1, 3, 4), (5, 4, 2)],  # batch axes broadcast: (2,1) with (5,) -> (2,5)
    [(1, 3, 4), (6, 4, 2)],  # a batch of one
    [(0, 3, 4), (0, 4, 2)],  # an empty batch
    [(2, 3, 0), (2, 0, 4)],  # an empty sum: zeros
    [(2, 1, 4), (4, 1)],  # 1xN products
    [(4,), (2, 3, 4, 5)],
])
def test_batched_matmul_broadcasts_as_numpy(shapes):
    x, y = (arr(s, "float64") for s in shapes)
    f = dynexpr.capture(batched)
    assert_same(batched(x, y), f(x, y))


def test_strided_operands_and_results_used_later():
    def fn(a, b):
        t = np.tensordot(a[:, ::2], b[::2], axes=([1], [0]))  # strided views
        return np.tanh(np.einsum("ik,kj->ij", t, t.T) * 0.5 + 1.0)

    a, b = arr((5, 8), "float64"), arr((8, 5), "float64")
    f = dynexpr.capture(fn)
    assert_same(fn(a, b), f(a, b))


def test_what_is_not_one_product_runs_as_numpy_and_says_why():
    def trace_like(a, b):
        return np.einsum("ii,ij->j", a, b)  # a diagonal

    def summed_within(a, b):
        return np.einsum("ij,jk->k", a, b)  # i is summed within a alone

    def three(a, b):
        return np.einsum("ij,jk,kl->il", a, b, b)

    def ellipsis(a, b):
        return np.einsum("...ij,jk->...ik", a, b)

    a, b = arr((3, 3), "float64"), arr((3, 3), "float64")
    for fn, words in ((trace_like, "diagonal"), (summed_within, "summed within one operand"),
                      (three, "3 operands"), (ellipsis, "ellipsis")):
        f = dynexpr.capture(fn)
        assert_same(fn(a, b), f(a, b))
        ex = dynexpr.explain(fn, a, b)
        assert ex.graph_break_count == 1 and words in ex.break_reasons[0].reason, ex


def test_mismatched_contractions_raise_as_numpy():
    def td(a, b):
        return np.tensordot(a, b, axes=([0], [0]))

    def ein(a, b):
        return np.einsum("ij,jk->ik", a, b)

    a, b = arr((3, 4), "float64"), arr((5, 4), "float64")
    for fn in (td, ein, batched):
        with pytest.raises(ValueError):
            fn(a, b if fn is not batched else arr((2, 5, 4), "float64"))
        with pytest.raises(ValueError):
            dynexpr.capture(fn)(a, b if fn is not batched else arr((2, 5, 4), "float64"))
