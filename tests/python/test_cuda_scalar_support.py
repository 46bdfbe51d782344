"""The CUDA prelude takes the scalar helpers of the op bodies (wrapping, divide_by_zero,
overflowed, scalar_min/max) from include/dynexpr/ops/scalar_support.hpp, the header the
CPU's op table includes, instead of keeping a copy (Note [scalar support as device text]).
NVRTC compiling the prelude and the emulation running it against NumPy are
test_cuda_codegen.py's; these check that the text is the header's and stays so."""

import shutil

import pytest
from dynexpr.backends import cuda_prelude
from dynexpr.toolchain import source_dirs


def _device_text(src: str) -> str:
    begin = src.index("\n", src.index("// BEGIN DEVICE TEXT")) + 1
    return src[begin:src.index("// END DEVICE TEXT")]


def test_prelude_holds_the_installed_header_text_once():
    header = source_dirs()[0] / "dynexpr" / "ops" / "scalar_support.hpp"
    text = _device_text(header.read_text())
    assert "wrapping(F f, T a, T b)" in text and "scalar_min" in text
    pre = cuda_prelude.prelude()
    assert text in pre
    for helper in ("T wrapping(", "T divide_by_zero(", "T overflowed(", "T scalar_min(",
                   "T scalar_max("):
        assert pre.count(helper) == 1, helper
    # the device has no floating-point flags: the header's flag-raising lines are out
    assert "#define DYNEXPR_FP_FLAGS 0" in pre


def _tree_copy(tmp_path):
    inc, kernels = source_dirs()
    shutil.copytree(inc, tmp_path / "include")
    shutil.copytree(kernels, tmp_path / "kernels")
    return tmp_path / "include" / "dynexpr" / "ops" / "scalar_support.hpp"


def test_an_edit_of_the_header_reaches_the_prelude(tmp_path, monkeypatch):
    header = _tree_copy(tmp_path)
    src = header.read_text().replace(
        "// END DEVICE TEXT",
        "template <class T> DYNEXPR_HOST_DEVICE T dx_probe_helper(T a) { return a; }\n"
        "// END DEVICE TEXT")
    header.write_text(src)
    monkeypatch.setenv("DYNEXPR_SOURCE_ROOT", str(tmp_path))
    assert "dx_probe_helper" in cuda_prelude.prelude()


def test_a_header_without_markers_is_a_clear_error(tmp_path, monkeypatch):
    header = _tree_copy(tmp_path)
    header.write_text(header.read_text().replace("// BEGIN DEVICE TEXT", "// begin"))
    monkeypatch.setenv("DYNEXPR_SOURCE_ROOT", str(tmp_path))
    with pytest.raises(RuntimeError, match="markers"):
        cuda_prelude.prelude()
