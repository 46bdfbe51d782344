"""Loop nodes (Note [loop nodes], ir.py): a `for i in range(start, stop, step)` kept as one
node whose body is a graph, with the trip count a graph input. These tests build loop
graphs directly (capture does not emit them yet) and compare each with the plain NumPy
loop it stands for: values, dtype, shape and the mutation of the caller's array."""

import numpy as np
import pytest

from compare import assert_same
from dynexpr import eager, ir, schedule

TRIPS = [0, 1, 2, 7]


def _add(g, op, args, dtype, shape, /, **attrs):
    return g.add(ir.Value(op, tuple(args), dtype, tuple(shape), ir.make_attrs(**attrs)))


def _input(g, k, dtype, shape):
    return _add(g, "input", (), dtype, shape, index=k)


def _slice(g, a, start, stop):
    n = len(range(a.shape[0])[start:stop])
    return _add(g, "getitem", (a,), a.dtype, (n,), index=(("slice", start, stop, 1),))


def heat_1d_graph(n, dtype="float64"):
    """u (mutated), k, stop -> u after `for t in range(stop): u[1:-1] = u[1:-1] +
    k * (u[2:] - 2 * u[1:-1] + u[:-2])`."""
    body = ir.Graph()
    _input(body, 0, "int64", ())
    u = _input(body, 1, dtype, (n,))
    k = _input(body, 2, dtype, ())
    mid, right, left = _slice(body, u, 1, n - 1), _slice(body, u, 2, None), _slice(body, u, 0, n - 2)
    two = _add(body, "const", (), dtype, (), value=2.0, weak="float")
    lap = _add(body, "add", (_add(body, "subtract", (right, _add(body, "multiply", (two, mid),
                                                                 dtype, mid.shape)),
                                  dtype, mid.shape), left), dtype, mid.shape)
    new = _add(body, "add", (mid, _add(body, "multiply", (k, lap), dtype, mid.shape)),
               dtype, mid.shape)
    body.outputs = [_add(body, "setitem", (u, new), dtype, (n,), index=(("slice", 1, n - 1, 1),))]

    g = ir.Graph()
    u0, k0, stop = _input(g, 0, dtype, (n,)), _input(g, 1, dtype, ()), _input(g, 2, "int64", ())
    (final,) = ir.loop(g, 0, stop, 1, [u0], [k0], body)
    g.outputs = [final]
    g.mutations = [(0, final)]
    return g


def heat_1d(u, k, T):
    for t in range(T):
        u[1:-1] = u[1:-1] + k * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


@pytest.mark.parametrize("T", TRIPS)
def test_slice_update_loop_matches_numpy(T):
    n = 9
    fn = eager.compile_graph(heat_1d_graph(n))  # one compiled graph for every T
    u = np.random.default_rng(T).random(n)
    expected_u = u.copy()
    expected = heat_1d(expected_u, 0.2, T)
    (got,) = fn(u, np.float64(0.2), np.int64(T))
    assert_same(expected, got)
    assert_same(expected_u, u, "the argument after the call")


def test_new_trip_count_is_the_same_graph():
    """The trip count is an input: the canonical text (the compile cache's key) has no T
    in it, and one callable runs every T."""
    g = heat_1d_graph(6)
    assert "loop(%2, %0, %1" in g.canonical()
    fn = eager.compile_graph(g)
    for T in (3, 1000):
        u = np.linspace(0.0, 1.0, 6)
        expected = heat_1d(u.copy(), 0.1, T)
        assert_same(expected, fn(u, np.float64(0.1), np.int64(T))[0])


def two_carried_graph(n, start, step):
    """a, b, x, stop -> (a, b) after `for i in range(start, stop, step): a, b = b, 2*b - a
    + i * x`: two carried arrays updated from each other's entry values, and the loop
    variable used as a value."""
    body = ir.Graph()
    i = _input(body, 0, "int64", ())
    a, b = _input(body, 1, "float64", (n,)), _input(body, 2, "float64", (n,))
    x = _input(body, 3, "float64", (n,))
    two = _add(body, "const", (), "float64", (), value=2.0, weak="float")
    fi = _add(body, "astype", (i,), "float64", (), dtype="float64")
    nb = _add(body, "add", (_add(body, "subtract", (_add(body, "multiply", (two, b), "float64", (n,)), a),
                                 "float64", (n,)),
                            _add(body, "multiply", (fi, x), "float64", (n,))), "float64", (n,))
    body.outputs = [b, nb]

    g = ir.Graph()
    a0, b0, x0 = (_input(g, k, "float64", (n,)) for k in range(3))
    stop = _input(g, 3, "int64", ())
    fa, fb = ir.loop(g, start, stop, step, [a0, b0], [x0], body)
    g.outputs = [fa, fb]
    return g


@pytest.mark.parametrize("start,step", [(0, 1), (3, 2), (10, -3)])
@pytest.mark.parametrize("stop", [-1, 0, 1, 2, 7, 12])
def test_carried_pair_and_loop_variable(start, step, stop):
    n = 4
    rng = np.random.default_rng(stop + 20)
    a, b, x = rng.random(n), rng.random(n), rng.random(n)
    ea, eb = a.copy(), b.copy()
    for i in range(start, stop, step):
        ea, eb = eb, 2.0 * eb - ea + i * x
    fn = eager.compile_graph(two_carried_graph(n, start, step))
    got = fn(a.copy(), b.copy(), x, np.int64(stop))
    assert_same((ea, eb), got)
    assert got[0] is not a and got[1] is not b


def test_float32_loop_keeps_its_dtype():
    n = 7
    fn = eager.compile_graph(heat_1d_graph(n, "float32"))
    u = np.random.default_rng(1).random(n).astype(np.float32)
    expected = heat_1d(u.copy(), np.float32(0.25), 7)
    assert expected.dtype == np.float32
    assert_same(expected, fn(u, np.float32(0.25), np.int64(7))[0])


def test_body_contract_is_checked():
    """A carried array whose shape changes in the body is not a loop: ir.loop refuses it
    (capture unrolls such a body instead)."""
    body = ir.Graph()
    _input(body, 0, "int64", ())
    u = _input(body, 1, "float64", (5,))
    body.outputs = [_slice(body, u, 1, None)]
    g = ir.Graph()
    u0, stop = _input(g, 0, "float64", (5,)), _input(g, 1, "int64", ())
    with pytest.raises(ValueError, match="changes dtype or shape"):
        ir.loop(g, 0, stop, 1, [u0], [], body)
    with pytest.raises(ValueError, match="step cannot be zero"):
        ir.loop(g, 0, stop, 0, [u0], [], body)


def _cpu(graph):
    from dynexpr import runtime
    return runtime.build(graph)


def _scalar(x, dtype):
    return np.asarray(x, dtype=dtype)  # the native kernel takes 0-d arrays for scalars


@pytest.mark.parametrize("T", TRIPS)
def test_cpu_slice_update_loop_matches_numpy(T):
    """The cpu backend's unit: a C++ for around the body's function; the caller's array
    is updated in place and returned as itself, as the plain function does."""
    n = 9
    fn = _cpu(heat_1d_graph(n)).fn
    u = np.random.default_rng(T).random(n)
    expected_u = u.copy()
    expected = heat_1d(expected_u, 0.2, T)
    (got,) = fn(u, _scalar(0.2, np.float64), _scalar(T, np.int64))
    assert_same(expected, got)
    assert got is u
    assert_same(expected_u, u, "the argument after the call")


def test_cpu_unit_is_independent_of_the_trip_count():
    """One unit for every T (its source, hence its cache key, has no T in it), and the
    source is the body's size: 10 and 1000 steps run the same compiled unit."""
    from dynexpr import runtime

    c = _cpu(heat_1d_graph(12))
    assert "for (std::int64_t i = 0; i < L" in c.source
    assert len(c.source) < 6000, len(c.source)
    for T in (10, 1000):
        u = np.linspace(0.0, 1.0, 12) ** 2
        expected = heat_1d(u.copy(), 0.1, T)
        assert runtime.plan(heat_1d_graph(12)).key == c.key
        assert_same(expected, c.fn(u, _scalar(0.1, np.float64), _scalar(T, np.int64))[0])


@pytest.mark.parametrize("start,step", [(0, 1), (10, -3)])
def test_cpu_carried_pair_and_loop_variable(start, step):
    """Two carried arrays swapped every iteration (one exit is an entry passed on) and
    the loop variable as a value: the ping-pong must read every exit before any swap."""
    n = 4
    fn = _cpu(two_carried_graph(n, start, step)).fn
    for stop in (-1, 0, 1, 2, 7, 12):
        rng = np.random.default_rng(stop + 20)
        a, b, x = rng.random(n), rng.random(n), rng.random(n)
        ea, eb = a.copy(), b.copy()
        for i in range(start, stop, step):
            ea, eb = eb, 2.0 * eb - ea + i * x
        got = fn(a.copy(), b.copy(), x, _scalar(stop, np.int64))
        assert_same((ea, eb), got)
