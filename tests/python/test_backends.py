"""Backends registered by name go through the one policy (backends/policy.py): the store
first, then compiling now or in the background with NumPy meanwhile, autotune, and NumPy
when building is not possible; results always what plain NumPy gives."""

import warnings

import numpy as np
import pytest

import dynexpr
from compare import assert_same
from dynexpr import backends, cxx, eager
from dynexpr.backends import Backend, Plan
from dynexpr.toolchain import BuildUnavailable, sha


def chain(x, y):
    return np.tanh(x * 2.0 + y) - x * y


class Toy(Backend):
    """Builds 'artifacts' that are eager callables, keyed like a real backend's units;
    the store is a dict, so a plan is cached once built."""

    fallbacks = True

    def __init__(self, name="toy", fail=None, why=None):
        self.name, self.fail, self.why = name, fail, why
        self.built, self.store = [], {}

    def unavailable(self):
        return self.why

    def codegen(self, graph, example_inputs, *, fuse=True):
        return Plan(graph, sha({"backend": self.name, "source": graph.canonical()}),
                    graph.canonical())

    def cached(self, plan):
        return self.store.get(plan.key)

    def build(self, plan):
        if self.fail is not None:
            raise self.fail
        self.built.append(plan.key)
        fn = eager.compile_graph(plan.graph)
        kernel = lambda *a: fn(*a)  # noqa: E731  (a callable that is not the NumPy tier)
        self.store[plan.key] = kernel
        return kernel


@pytest.fixture
def toy():
    b = Toy()
    backends.register("toy", lambda: b)
    yield b
    backends._factories.pop("toy", None)
    backends._made.pop("toy", None)


def _args():
    return np.linspace(-1, 1, 33), np.linspace(2, 3, 33)


def test_a_registered_backend_is_used_by_name_and_caches_its_builds(toy):
    f = dynexpr.capture(chain, backend="toy")
    assert_same(chain(*_args()), f(*_args()))
    assert len(toy.built) == 1 and f.entries[0].compiled is toy.store[toy.built[0]]
    g = dynexpr.capture(chain, backend="toy")  # another function, the same graph: cached
    assert_same(chain(*_args()), g(*_args()))
    assert len(toy.built) == 1
    with pytest.raises(ValueError, match="use 'cpu', 'eager', 'cuda', 'toy' or a callable"):
        dynexpr.capture(chain, backend="nope")


def test_tiering_works_for_any_backend(toy):
    dynexpr.config.background_compile = True
    f = dynexpr.capture(chain, backend="toy")
    assert_same(chain(*_args()), f(*_args()))  # NumPy while the build runs
    assert dynexpr.synchronize(timeout=60)
    assert_same(chain(*_args()), f(*_args()))  # the first call that finds it swaps it in
    assert f.entries[0].compiled is toy.store[toy.built[0]]


def test_max_autotune_works_for_any_backend(toy):
    f = dynexpr.capture(chain, backend="toy", mode="max-autotune")
    assert_same(chain(*_args()), f(*_args()))
    assert len(toy.built) == 1  # compiled at once, not in the background


def test_an_unavailable_backend_runs_numpy_with_one_warning():
    b = Toy(name="absent", why="no driver here")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            f = dynexpr.capture(chain, backend=b)
            assert_same(chain(*_args()), f(*_args()))
    msgs = [str(m.message) for m in w if issubclass(m.category, dynexpr.DynexprWarning)]
    assert len(msgs) == 1 and "backend='absent' is not available (no driver here)" in msgs[0]
    assert b.built == []


def test_a_backend_that_cannot_build_here_runs_numpy():
    b = Toy(fail=BuildUnavailable("dynexpr: the toy disk is full"))
    f = dynexpr.capture(chain, backend=b)
    with pytest.warns(dynexpr.DynexprWarning, match="the toy disk is full"):
        assert_same(chain(*_args()), f(*_args()))


def test_the_unit_key_carries_the_backend_and_its_toolchain(monkeypatch):
    src = "// a unit\n"
    key = cxx.unit_key(src)
    assert key == cxx.unit_key(src)
    monkeypatch.setattr(cxx, "BACKEND", "other")
    assert cxx.unit_key(src) != key
    monkeypatch.undo()
    tc = cxx.toolchain()
    assert backends.get("cpu").toolchain() is tc and backends.get("cpu").artifact == "unit.so"
    monkeypatch.setattr(type(tc), "fingerprint", lambda self: "another compiler")
    assert cxx.unit_key(src) != key
