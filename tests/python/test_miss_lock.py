"""One captured function called from 8 threads at once on a cold cache: each guard set is
translated and compiled once (Note [one compile per guard set] in captured.py), for the
function's own entries and for the entries of the points after a graph break, and every
thread gets what plain NumPy gives."""

import threading
import time

import numpy as np
import pytest

import dynexpr
from compare import assert_same

THREADS = 8


def chain(x, y):
    return np.tanh(x * 2.0 + y) * 0.5 - x * y


def item(x):  # a graph break: the code after .item() is a resume point (segments.py)
    y = np.tanh(x) * 2.0
    s = y.sum().item()
    return y * s + 1.0


def _slowed(monkeypatch, module, name: str) -> list:
    """Wraps module.name (a translate function) to count its calls and hold each for a
    while, so that threads that missed at once are all inside the miss path together."""
    calls = []
    real = getattr(module, name)

    def slow(*args, **kwargs):
        calls.append(threading.get_ident())
        time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, slow)
    return calls


def _at_once(f, inputs: list) -> list:
    """f(*inputs[i]) on thread i, all released together; the results in order."""
    barrier = threading.Barrier(len(inputs))
    out: list = [None] * len(inputs)
    errors: list = []

    def work(i):
        barrier.wait()
        try:
            out[i] = f(*inputs[i])
        except BaseException as e:  # re-raised below, on the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def test_eight_threads_translate_and_compile_each_guard_set_once(backend, monkeypatch):
    translations = _slowed(monkeypatch, dynexpr.captured, "translate")
    f = dynexpr.capture(chain, backend=backend, dynamic=False)
    rng = np.random.default_rng(1)
    # Two guard sets (float32 and float64), four threads each.
    inputs = [tuple(rng.standard_normal(64).astype(np.float32 if i % 2 else np.float64)
                    for _ in range(2)) for i in range(THREADS)]
    results = _at_once(f, inputs)
    for args, got in zip(inputs, results):
        assert_same(chain(*args), got)
    assert len(translations) == 2
    info = f.cache_info()
    assert (info.entries, info.compiles) == (2, 2)
    # The same calls again: all hits, nothing new.
    assert [type(r) for r in _at_once(f, inputs)] == [np.ndarray] * THREADS
    assert f.cache_info().entries == 2 and len(translations) == 2


def test_eight_threads_after_a_graph_break_add_one_entry_per_point(backend, monkeypatch):
    segments = _slowed(monkeypatch, dynexpr.segments, "translate_segment")
    f = dynexpr.capture(item, backend=backend, dynamic=False)
    x = np.linspace(-2.0, 3.0, 6)
    inputs = [(x * (k + 1),) for k in range(THREADS)]  # new values at the break: one entry
    results = _at_once(f, inputs)
    for args, got in zip(inputs, results):
        assert_same(item(*args), got)
    # One graph before .item() and one after it, each translated once.
    assert len(segments) == 1 and f._segments.entries == 1
    assert f.cache_info().entries == 1 and f.cache_info().compiles == 2


@pytest.mark.parametrize("kind", ["function", "point"])
def test_cache_clear_while_threads_call(kind, monkeypatch):
    """The hit path reads snapshots: clearing the entries while other threads call
    never shows them a list changing under them (they miss and translate again)."""
    f = dynexpr.capture(chain if kind == "function" else item, backend="eager")
    plain = chain if kind == "function" else item
    args = ((np.ones(8), np.full(8, 0.5)) if kind == "function" else (np.ones(8),))
    stop = threading.Event()
    errors: list = []

    def caller():
        try:
            while not stop.is_set():
                assert_same(plain(*args), f(*args))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for _ in range(50):
        f.cache_clear()
        time.sleep(0.001)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert f.cache_info().entries <= 1
