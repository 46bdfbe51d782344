"""Dynamic dimensions (Note [dynamic dimensions by sentinels] in capture/dynamic.py):
dynamic=None makes a dimension dynamic once it changes, dynamic=True from the start,
mark_dynamic/mark_static per array. Every result is compared with NumPy; cache_info()
shows how many captures (and compiles) a sequence of sizes took."""

import numpy as np
import pytest

import dynexpr
from compare import assert_same
from dynexpr.guards import Guard

rng = np.random.default_rng(11)


def vec(n, dtype=np.float32):
    return rng.standard_normal(n).astype(dtype)


def chain(x, y):
    return np.tanh(x * 2.0 + y) * 0.5 + x.mean()


def test_sizes_100_200_300_compile_twice(backend):
    f = dynexpr.capture(chain, backend=backend)
    for n in (100, 200, 300):
        x, y = vec(n), vec(n)
        assert_same(chain(x, y), f(x, y))
    info = f.cache_info()
    assert (info.compiles, info.entries, info.hits) == (2, 2, 1), info
    # The second entry is dynamic: a fourth size and the second size again reuse it,
    # the first size still has its own (static) entry.
    for n in (1000, 200, 100):
        x, y = vec(n), vec(n)
        assert_same(chain(x, y), f(x, y))
    assert f.cache_info().compiles == 2 and f.cache_info().hits == 4
    kinds = [g.kind for g in f.entries[1].guards]
    assert "DYN_SHAPE" in kinds and "SHAPE" not in kinds, kinds
    assert "DIM_EQ" in kinds  # x and y share the extent the kernel relies on


def test_dynamic_graph_has_symbolic_extents():
    f = dynexpr.capture(chain, backend="eager", dynamic=True)
    x, y = vec(64), vec(64)
    f(x, y)
    text = f.entries[0].translation.graph.canonical()
    assert "float32[s0]" in text and "64" not in text, text


def test_dynamic_true_compiles_once_for_every_size(backend):
    def softmax_rows(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    f = dynexpr.capture(softmax_rows, backend=backend, dynamic=True)
    for rows, cols in ((3, 8), (5, 8), (7, 13), (2, 2)):
        x = rng.standard_normal((rows, cols))
        assert_same(softmax_rows(x), f(x))
    assert f.cache_info().compiles == 1, f.cache_info()


def test_mark_dynamic_compiles_once(backend):
    f = dynexpr.capture(lambda a, b: a * b + 1.5, backend=backend)
    for n in (100, 200, 300):
        a, b = vec(n, np.float64), vec(n, np.float64)
        dynexpr.mark_dynamic(a, 0)
        dynexpr.mark_dynamic(b, 0)
        assert_same(a * b + 1.5, f(a, b))
    assert f.cache_info().compiles == 1, f.cache_info()


def test_marking_one_of_two_broadcast_partners_specialises_it():
    # b's extent is static, so a's must equal it: a stays static too (never wrong).
    f = dynexpr.capture(lambda a, b: a * b, backend="eager")
    for n in (10, 20):
        a, b = vec(n), vec(n)
        dynexpr.mark_dynamic(a, 0)
        assert_same(a * b, f(a, b))
    assert f.cache_info().compiles == 2


def test_mark_dynamic_range_is_guarded_and_checked():
    f = dynexpr.capture(lambda a: a - 1, backend="eager")
    a = vec(50)
    dynexpr.mark_dynamic(a, 0, min=10, max=100)
    assert_same(a - 1, f(a))
    (g,) = [g for g in f.entries[0].guards if g.kind == "DYN_SHAPE"]
    assert g.expected == ((10, 100),)
    assert "10..100" in g.describe(("a",))
    big = vec(500)  # outside the range: the dynamic entry does not apply, a new one does
    assert_same(big - 1, f(big))
    assert f.cache_info().entries == 2
    with pytest.raises(ValueError, match=r"dimension 0 of this array has extent 5, outside "
                                         r"the range \[10, 100\]"):
        dynexpr.mark_dynamic(vec(5), 0, min=10, max=100)
    with pytest.raises(ValueError, match="out of range"):
        dynexpr.mark_dynamic(vec(5), 3)
    with pytest.raises(TypeError, match="expected a NumPy ndarray"):
        dynexpr.mark_dynamic([1, 2, 3], 0)
    with pytest.raises(ValueError, match="max=3 is below min=10"):
        dynexpr.mark_dynamic(vec(5), 0, min=10, max=3)


def test_mark_static_wins_over_dynamic_true():
    f = dynexpr.capture(lambda a: a * 2, backend="eager", dynamic=True)
    for n in (10, 20):
        a = vec(n)
        dynexpr.mark_static(a)
        assert_same(a * 2, f(a))
    assert f.cache_info().compiles == 2


def test_dynamic_false_never_generalises():
    f = dynexpr.capture(lambda a: a + 1, backend="eager", dynamic=False)
    for n in (10, 20, 30):
        a = vec(n)
        assert_same(a + 1, f(a))
    assert f.cache_info().compiles == 3


def test_sizes_0_and_1_stay_specialised(backend):
    f = dynexpr.capture(lambda x, y: x * y - y, backend=backend, dynamic=True)
    for n in (1, 0, 6, 9):
        x, y = vec(n), vec(6 if n == 1 else n)
        assert_same(x * y - y, f(x, y))
    # 1 and 0 each specialised; 6 and 9 share the dynamic entry.
    assert f.cache_info().compiles == 3, f.cache_info()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[1:] - x[:-1],  # slices along the dimension need its value
        lambda x: x / x.shape[0],  # Python reads the extent
        lambda x: x * len(x),
        lambda x: x.reshape(2, -1).sum(axis=0),
        lambda x: x[::2] + x[-1],
        lambda x: np.broadcast_to(x, (3, x.size)) * 2,
    ],
)
def test_uses_of_the_value_specialise_and_stay_correct(backend, fn):
    f = dynexpr.capture(fn, backend=backend, dynamic=True)
    for n in (8, 12, 8):
        x = vec(n)
        assert_same(fn(x), f(x))
    assert f.cache_info().compiles == 2  # one per size: the dimension is static


def test_column_pick_keeps_rows_dynamic(backend):
    def col(x):
        return x[:, 0] * 2 + x[:, 1:2].sum()

    f = dynexpr.capture(col, backend=backend)
    for rows in (4, 6, 9):
        x = rng.standard_normal((rows, 3))
        assert_same(col(x), f(x))
    assert f.cache_info().compiles == 2


def test_extents_that_stop_matching_raise_numpys_error(backend):
    f = dynexpr.capture(lambda x, y: x + y, backend=backend, dynamic=True)
    x = np.arange(5.0)
    assert_same(x + x[::-1].copy(), f(x, x[::-1].copy()))
    with pytest.raises(ValueError, match="broadcast"):
        f(np.arange(5.0), np.arange(7.0))
    with pytest.raises(ValueError, match="broadcast"):
        np.arange(5.0) + np.arange(7.0)


def test_dynamic_with_a_static_partner_dimension(backend):
    # x's rows are dynamic; its columns meet w's static extent.
    w = rng.standard_normal(16)

    def scale(x):
        return (x * w).sum(axis=1)

    f = dynexpr.capture(scale, backend=backend)
    for rows in (3, 5, 11):
        x = rng.standard_normal((rows, 16))
        assert_same(scale(x), f(x))
    assert f.cache_info().compiles == 2


def test_guard_describes_dynamic_extents():
    g = Guard("DYN_SHAPE", ("arg", 0), ((2, None), 16))
    assert g.describe(("x",)) == "x.shape == (>=2, 16) (dynamic)"
    e = Guard("DIM_EQ", (("arg", 0), ("arg", 1)), (0, 1))
    assert e.describe(("x", "y")) == "x.shape[0] == y.shape[1]"
