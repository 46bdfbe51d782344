"""Large kernel outputs reuse freed output buffers (Note [output buffer cache] in
bridge/native/buffers.c): each call still returns a new array of its own."""

import os
import subprocess
import sys

import numpy as np
import pytest

import dynexpr
from compare import assert_same

_native = pytest.importorskip("dynexpr._native")
N = 1 << 18  # float64: 2 MiB outputs, above the cache's 128 KiB floor


def scaled(x):
    return x * 2.0 + 1.0


def test_outputs_reuse_freed_buffers_and_stay_distinct():
    f = dynexpr.capture(scaled)
    x = np.linspace(0, 1, N)
    f(x)
    _native.trim_buffers()
    before = _native.buffer_cache()
    a = f(x)
    b = f(x)  # a is alive: b must get memory of its own
    assert not np.shares_memory(a, b)
    assert_same(scaled(x), a)
    assert_same(scaled(x), b)
    del a, b
    assert _native.buffer_cache()["buffers"] >= 1
    c = f(x)
    after = _native.buffer_cache()
    assert after["reused"] > before["reused"]
    assert_same(scaled(x), c)
    c[:] = -1  # the caller owns it: writes land only there
    assert_same(scaled(x), f(x))


def test_outputs_from_128_kib_on_are_64_byte_aligned():
    """Full-width AVX-512 stores into them do not split cache lines (the Note)."""
    f = dynexpr.capture(scaled)
    for n in (1 << 14, 3 << 14, N):  # 128 KiB, 384 KiB, 2 MiB of float64
        x = np.linspace(0, 1, n)
        outs = [f(x) for _ in range(4)]  # alive together: four distinct buffers
        assert all(o.ctypes.data % 64 == 0 for o in outs)
        assert_same(scaled(x), outs[-1])


def _at_page_offset(values: np.ndarray, offset: int) -> np.ndarray:
    """A copy of float64 `values` whose data starts `offset` bytes into a page."""
    raw = np.empty(values.nbytes + 8192, np.uint8)
    start = (offset - raw.ctypes.data) % 4096
    out = raw[start:start + values.nbytes].view(np.float64)
    out[:] = values
    assert out.ctypes.data % 4096 == offset
    return out


def _ahead(out: np.ndarray, inp: np.ndarray) -> int:
    """How many bytes after `inp` `out` starts, in page-offset terms (0..4095)."""
    return (out.ctypes.data - inp.ctypes.data) % 4096


def test_outputs_do_not_start_just_after_their_inputs_in_the_page():
    """Note [where an output starts in its page]: an output 1..1024 bytes after an input
    in page-offset terms stalls the loop's loads (4K aliasing). NumPy's own large arrays
    start 16 bytes into a page; outputs used to start 64 bytes in, 48 after."""
    f = dynexpr.capture(scaled)
    values = np.linspace(0, 1, N)
    for offset in (16, 48, 1040, 2064, 4080, 0):
        x = _at_page_offset(values, offset)
        outs = [f(x) for _ in range(3)]  # fresh and reused buffers, placed per call
        for o in outs:
            assert o.ctypes.data % 64 == 0
            assert not 0 < _ahead(o, x) <= 1024, (offset, o.ctypes.data % 4096)
            assert_same(scaled(values), o)
        del outs
    x = np.linspace(0, 1, N)  # NumPy's own placement
    assert not 0 < _ahead(f(x), x) <= 1024


def test_an_output_avoids_every_input_when_it_can():
    two = dynexpr.capture(lambda a, b: a * 2.0 + b)
    va, vb = np.linspace(0, 1, N), np.linspace(1, 2, N)
    a, b = _at_page_offset(va, 16), _at_page_offset(vb, 2064)  # room between: 1040..2048
    for _ in range(3):
        r = two(a, b)
        assert not 0 < _ahead(r, a) <= 1024 and not 0 < _ahead(r, b) <= 1024
        assert_same(va * 2.0 + vb, r)


def test_output_offset_can_be_fixed_for_benchmarks():
    f = dynexpr.capture(scaled)
    x = np.linspace(0, 1, N)
    f(x)
    assert _native.output_offset() == -1
    try:
        assert _native.output_offset(100) == -1
        r = f(x)
        assert r.ctypes.data % 4096 == 64  # rounded down to 64 bytes
        assert_same(scaled(x), r)
    finally:
        _native.output_offset(-1)
    with pytest.raises(ValueError, match="not a page offset"):
        _native.output_offset(4096)
    assert _native.output_offset() == -1


def test_old_sizes_make_room_for_the_sizes_in_use():
    small = dynexpr.capture(scaled)
    x = np.linspace(0, 1, N)
    keep = [small(x) for _ in range(20)]  # 20 buffers of one size: more than the slots
    del keep
    assert _native.buffer_cache()["buffers"] == 16
    big = np.linspace(0, 1, 2 * N)
    small(big)
    before = _native.buffer_cache()["reused"]
    for _ in range(3):
        assert_same(scaled(big), small(big))
    assert _native.buffer_cache()["reused"] >= before + 3  # the new size was kept


def test_numpy_can_resize_and_free_an_output():
    f = dynexpr.capture(scaled)
    r = f(np.linspace(0, 1, N))
    r.resize(2 * N, refcheck=False)  # the handler's realloc
    assert r.shape == (2 * N,) and r[N - 1] == 3.0 and r[N] == 0.0
    del r
    _native.trim_buffers()
    assert _native.buffer_cache()["bytes"] == 0


def test_the_cache_can_be_turned_off():
    prog = ("import numpy as np, dynexpr; from dynexpr import _native; "
            "dynexpr.config.background_compile = False; "
            "f = dynexpr.capture(lambda x: x * 2.0 + 1.0); x = np.ones(1 << 18); "
            "[f(x) for _ in range(3)]; print(_native.buffer_cache()['cap'], "
            "_native.buffer_cache()['buffers'])")
    assert _child_output(prog, DYNEXPR_BUFFER_CACHE_MB="0") == ["0", "0"]


def test_units_store_their_outputs_without_streaming():
    """Note [streaming stores]: the bridge turns streaming off in the runtime library that
    every unit links against (units lost with it in one-process measurements), whatever
    DYNEXPR_STREAM_MIN_MB says; C++ programs keep it."""
    prog = ("import numpy as np, dynexpr; from dynexpr import runtime; "
            "dynexpr.config.background_compile = False; "
            "f = dynexpr.capture(lambda x: x * 2.0 + 1.0); x = np.ones(1 << 18); "
            "y = f(x); y = f(x); assert (y == 3.0).all(); "
            "print(runtime._runtime_lib().dynexpr_rt_stream_min_bytes())")
    assert _child_output(prog, DYNEXPR_STREAM_MIN_MB="0") == ["-1"]


def _child_output(prog: str, **env: str) -> list[str]:
    """The words a child Python running `prog` prints, with `env` added to ours."""
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                       env=dict(os.environ, **env), timeout=600, check=False)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()
