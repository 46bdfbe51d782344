"""What happens when a compiled kernel runs, compared with plain NumPy (issue 11):

- arrays NumPy computes with but a kernel cannot read in place (unaligned record fields,
  non-native byte order, read-only views) give NumPy's results, and in-place updates of
  such arguments reach the caller's array (Note [inputs a kernel cannot read in place]
  in bridge/_native.c)."""

import numpy as np
import pytest

import dynexpr

from compare import assert_same

# -------------------------------------------------------------- unusual input arrays


def record_field(n=7):
    rec = np.zeros(n, dtype=[("a", "f8"), ("b", "i4")])  # itemsize 12: 'a' is unaligned
    rec["a"] = np.linspace(-2.0, 3.0, n)
    rec["b"] = np.arange(n)
    return rec


def scale(x):
    return x * 2.0 + 1.0


def bump(x):
    x += 1.5
    return x * 2.0


def test_record_field_unaligned_input(backend):
    rec = record_field()
    assert not rec["a"].flags.aligned
    f = dynexpr.capture(scale, backend=backend)
    for _ in range(3):  # the capture call and cache hits
        assert_same(scale(rec["a"]), f(rec["a"]))


def test_record_field_unaligned_mutated_in_place(backend):
    want, got = record_field(), record_field()
    f = dynexpr.capture(bump, backend=backend)
    for _ in range(3):
        assert_same(bump(want["a"]), f(got["a"]))
        assert_same(want, got)  # the caller's record array saw every update


def test_unaligned_contiguous_buffer(backend):
    raw = bytearray(8 * 9 + 1)

    def view():
        return np.frombuffer(raw, dtype=np.float64, count=9, offset=1)

    view()[:] = np.arange(9.0)
    assert not view().flags.aligned
    ref = view().copy()
    f = dynexpr.capture(bump, backend=backend)
    expected = bump(ref)
    assert_same(expected, f(view()))
    assert_same(ref, view().copy())


@pytest.mark.parametrize("dtype", [">f8", ">f4", ">i4", ">i8"])
def test_byte_swapped_input(backend, dtype):
    x = np.arange(1, 12, dtype=dtype)
    assert not x.dtype.isnative
    f = dynexpr.capture(scale, backend=backend)
    for _ in range(2):
        assert_same(scale(x), f(x))


def test_byte_swapped_mutated_in_place(backend):
    want, got = np.arange(9, dtype=">f8"), np.arange(9, dtype=">f8")
    f = dynexpr.capture(bump, backend=backend)
    for _ in range(2):
        assert_same(bump(want), f(got))
        assert got.dtype == np.dtype(">f8")
        assert_same(want, got)


def test_read_only_inputs(backend):
    base = np.arange(12.0)
    ro = base.copy()
    ro.setflags(write=False)
    frozen = np.frombuffer(np.arange(12.0).tobytes(), dtype=np.float64)  # read-only memory
    bcast = np.broadcast_to(np.float64(3.0), (12,))  # read-only, stride 0
    f = dynexpr.capture(scale, backend=backend)
    for x in (ro, frozen, bcast, ro[::2], frozen[1:]):
        assert not x.flags.writeable
        assert_same(scale(x), f(x))


def test_read_only_mutated_raises_like_numpy(backend):
    ro = np.arange(6.0)
    ro.setflags(write=False)
    with pytest.raises(ValueError) as np_err:
        bump(ro)
    f = dynexpr.capture(bump, backend=backend)
    with pytest.raises(ValueError) as dx_err:
        f(ro)
    assert "read-only" in str(np_err.value) and "read-only" in str(dx_err.value)
    assert_same(np.arange(6.0), ro)


def test_unaligned_with_background_compile():
    # The NumPy tier took the first call; the kernel must take the later ones too.
    dynexpr.config.background_compile = True
    rec = record_field(33)

    def chain(x):
        return np.sqrt(x * x + 0.25) - x * (0.5 + 1e-9 * 7)

    f = dynexpr.capture(chain)
    assert_same(chain(rec["a"]), f(rec["a"]))
    assert dynexpr.synchronize(timeout=300)
    for _ in range(2):
        assert_same(chain(rec["a"]), f(rec["a"]))
    assert type(f.entries[0].compiled).__name__ == "Kernel"
