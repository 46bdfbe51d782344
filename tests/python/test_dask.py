"""Captured functions on Dask arrays (dask_run.py, Note [dask chunk plans]): a lazy Dask
array whose tasks run compiled kernels, equal to plain Dask with NumPy chunks and to
NumPy, on a two-process LocalCluster and on the threaded scheduler."""

import threading

import numpy as np
import pytest

import dynexpr
from compare import assert_same

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


def tanh_chain(x, y):
    return np.tanh(x * 2.0 + y) * 0.5 + x * y


def softmax_rows(x):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def total(x):
    return (x * 2.0).sum()


def col_mean(x):
    return np.mean(x * x + 1.0, axis=0)


def col_var(x):
    return np.var(np.sin(x), axis=0)


def all_std(x):
    return (x - 0.5).std(ddof=1)


def row_max(x):
    return np.max(np.abs(x), axis=1)


def col_min_keep(x):
    return np.min(x * 3.0, axis=0, keepdims=True)


def col_argmax(x):
    return np.argmax(x * 2.0, axis=0)


def diff(x):
    return x[1:] - x[:-1]


def laplace(x):
    return x[2:, 1:-1] + x[:-2, 1:-1] + x[1:-1, 2:] + x[1:-1, :-2] - 4.0 * x[1:-1, 1:-1]


def diff_times(x, y):
    return (x[1:] - x[:-1]) * y[:-1]


def matmul_then(x, w):
    return np.tanh(x @ w)


def with_break(x):
    if float(x.sum()) > 0:  # a graph break: Dask computes the sum on the client
        return x * 2.0
    return x - 1.0


RNG = np.random.default_rng(7)
X = RNG.standard_normal((1001, 6))  # rows chunked 300: a ragged last chunk of 101
Y = RNG.standard_normal((1001, 6))


def _check(fn, *arrays, chunks=(300, 6), kind=None):
    """fn captured on Dask arrays equals plain Dask with NumPy chunks and plain NumPy;
    `kind`: the chunk plan explain must report."""
    dargs = [da.from_array(a, chunks=chunks) for a in arrays]
    cf = dynexpr.capture(fn)
    got = cf(*dargs)
    assert isinstance(got, da.Array)  # lazy, like the rest of Dask
    expected_dask = fn(*dargs).compute()
    value = got.compute()
    assert_same(expected_dask, value)
    expected = fn(*arrays)
    if isinstance(expected, np.generic):  # Dask's compute() of a 0-d result: an ndarray
        value = value[()]
    assert_same(expected, value)
    if kind is not None:
        assert dynexpr.explain(cf, *dargs).kind == kind
    return got


@pytest.mark.parametrize("fn,kind", [(tanh_chain, "blockwise"), (softmax_rows, "blockwise"),
                                     (row_max, "blockwise")])
def test_chunk_local_graphs_are_one_task_per_chunk(client, fn, kind):
    arrays = (X, Y)[: fn.__code__.co_argcount]
    got = _check(fn, *arrays, kind=kind)
    # One layer over the inputs: a task per chunk (4 row chunks), no per-op tasks.
    ex = dynexpr.explain(fn, *[da.from_array(a, chunks=(300, 6)) for a in arrays])
    assert ex.tasks == 4 and ex.tasks_plain > ex.tasks
    assert any(str(name).startswith("dynexpr:") for name in got.dask.layers)


@pytest.mark.parametrize("fn", [total, col_mean, col_var, all_std, col_min_keep])
def test_reductions_over_chunked_axes(client, fn):
    _check(fn, X, kind="reduction")


def test_reductions_combine_not_mean_of_means(client):
    # Chunks of 300, 300, 300, 101: a mean of the chunk means would weigh the last
    # chunk 3x; var needs each chunk's M2 and mean, not the chunks' variances averaged.
    x = np.concatenate([np.zeros(900), np.full(101, 10.0)])[:, None] * np.ones((1, 6))
    _check(col_mean, x, kind="reduction")
    _check(col_var, x, kind="reduction")


def test_mixed_chunked_and_unchunked_axes(client):
    # Both axes chunked: the row reduction crosses chunks now, the column one too.
    _check(row_max, X, chunks=(300, 4), kind="reduction")
    _check(col_var, X, chunks=(250, 3), kind="reduction")
    _check(tanh_chain, X, Y, chunks=(250, 3), kind="blockwise")


def test_float32_and_int_inputs(client):
    _check(col_mean, X.astype(np.float32), kind="reduction")
    _check(total, (X * 10).astype(np.int64), kind="reduction")


def test_what_is_not_chunkwise_goes_to_dask(client):
    w = RNG.standard_normal((6, 3))
    dx = da.from_array(X, chunks=(300, 6))
    for fn, args in ((col_argmax, (X,)), (matmul_then, (X, w))):
        _check(fn, *args)
        dargs = [da.from_array(a, chunks=(300, 6)) if a is X else a for a in args]
        ex = dynexpr.explain(fn, *dargs)
        assert ex.kind == "dask" and ex.why, ex
    assert "went to Dask" in str(dynexpr.explain(col_argmax, dx))


def test_slice_stencils_run_through_map_overlap(client):
    # Halo from the slices: 1 row for diff, 1 along both axes for the 5-point Laplacian
    # (chunks 300/300/300/101, and 80/80/41 by 20/20/10: ragged last chunks on each axis).
    _check(diff, X, kind="stencil")
    _check(diff_times, X, Y, kind="stencil")
    z = RNG.standard_normal((201, 50))
    _check(laplace, z, chunks=(80, 20), kind="stencil")
    # A last chunk no longer than the halo: Dask's own slicing runs it.
    _check(diff, X[:901], chunks=(300, 6))
    assert dynexpr.explain(diff, da.from_array(X[:601], chunks=(300, 6))).kind == "dask"


def test_ragged_chunks_share_one_kernel():
    from dynexpr import dask_tasks

    def chain3(x, y):
        return np.exp(-x * y) + np.cos(x) * 3.0

    # Chunks 300, 300, 1: the last chunk of one row runs the same symbolic kernel.
    x, y = RNG.standard_normal((601, 3)), RNG.standard_normal((601, 3))
    before = len(dask_tasks._compiled)
    got = dynexpr.capture(chain3)(da.from_array(x, chunks=(300, 3)),
                                  da.from_array(y, chunks=(300, 3)))
    assert_same(chain3(x, y), got.compute(scheduler="sync"))
    assert len(dask_tasks._compiled) == before + 1


def test_graph_break_computes_on_the_client(client):
    _check(with_break, X)
    _check(with_break, -np.abs(X))
    assert "graph break" in dynexpr.explain(with_break, da.from_array(X, chunks=300)).why


def test_numpy_calls_after_dask_calls_still_compile(client):
    cf = dynexpr.capture(tanh_chain)
    cf(da.from_array(X, chunks=(300, 6)), da.from_array(Y, chunks=(300, 6))).compute()
    assert_same(tanh_chain(X, Y), cf(X, Y))
    assert cf.cache_info().entries == 1


def test_threaded_scheduler_many_threads_one_function():
    cf = dynexpr.capture(softmax_rows)
    xs = [RNG.standard_normal((400 + 37 * k, 5)) for k in range(6)]
    results: dict = {}

    def work(k):
        d = cf(da.from_array(xs[k], chunks=(64, 5)))
        results[k] = d.compute(scheduler="threads", num_workers=4)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, x in enumerate(xs):
        assert_same(softmax_rows(x), results[k])
