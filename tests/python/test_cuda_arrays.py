"""Recognition and guards of CUDA arrays (backends/cuda_arrays.py) with fake objects that
expose __cuda_array_interface__ v3 or __dlpack_device__: no GPU needed. Not yet wired into
capture (see the module's docstring)."""

import numpy as np
import pytest
from dynexpr.backends import cuda_arrays


class FakeCuda:
    def __init__(self, shape, typestr="<f4", strides=None, version=3, ptr=0x7000_0000, ro=False):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, ro),
                                         "strides": strides, "version": version}


class FakeDLPack:
    def __init__(self, kind, ordinal=0):
        self._dev = (kind, ordinal)

    def __dlpack__(self, stream=None):
        raise AssertionError("not read")

    def __dlpack_device__(self):
        return self._dev


def test_contiguous_and_strided_arrays_are_described_in_elements():
    a = cuda_arrays.describe(FakeCuda((3, 4)))
    assert (a.shape, a.strides, a.dtype, a.device, a.c_contiguous) == ((3, 4), (4, 1), "float32", 0, True)
    t = cuda_arrays.describe(FakeCuda((4, 3), "<f8", strides=(8, 32), ro=True))
    assert (t.strides, t.dtype, t.readonly, t.c_contiguous) == ((1, 4), "float64", True, False)
    d = cuda_arrays.describe(FakeCuda((2,), "<i8", ptr=0x9000), device_of=lambda p: 1 if p == 0x9000 else 0)
    assert d.device == 1 and d.ptr == 0x9000


def test_numpy_inputs_are_a_clear_error():
    with pytest.raises(TypeError, match=r"argument 2 is a NumPy array.*cupy.asarray.*backend='cpu'"):
        cuda_arrays.describe(np.zeros(3), 2)
    assert cuda_arrays.describe(2.5) is None  # a Python scalar is no array


@pytest.mark.parametrize("fake, match", [
    (FakeCuda((3,), version=2), "version 2"),
    (FakeCuda((3,), "<c8"), "complex64"),
    (FakeCuda((3,), "<f4", strides=(6,)), "not multiples"),
    (FakeDLPack(1), "device type 1, not a CUDA device"),
    (FakeDLPack(2, 1), "cupy.from_dlpack"),
])
def test_unusable_arrays_name_the_way_out(fake, match):
    with pytest.raises(TypeError, match=match):
        cuda_arrays.describe(fake)


def test_guards_hold_one_device_and_its_capability():
    a = cuda_arrays.describe(FakeCuda((3,), ptr=1), device_of=lambda p: 1)
    b = cuda_arrays.describe(FakeCuda((3,), ptr=2), device_of=lambda p: 1)
    assert cuda_arrays.guard_facts([a, b], lambda d: (9, 0)) == (("device", 1), ("capability", (9, 0)))
    c = cuda_arrays.describe(FakeCuda((3,), ptr=3), device_of=lambda p: 0)
    with pytest.raises(TypeError, match=r"devices \[0, 1\]"):
        cuda_arrays.guard_facts([a, c], lambda d: (9, 0))
