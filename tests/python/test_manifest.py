"""The op manifest (include/dynexpr/ops/manifest.py) is the only place an op is listed.

A copy of the tree gets two toy ops appended to its manifest, and nothing else edited but
what the generator writes; the C++ library then has them (a program compiled against the
copy's headers runs them on float32/float64/int arrays against their scalar bodies), and
so does capture (a captured function calling them compiles them into its unit and
returns what NumPy returns). The generated files of this checkout are current.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Its subject (compiler, cache files, generated text) does not depend on the CPython
# version: run_all.sh runs it on the first version only (conftest.py, one_python).
pytestmark = pytest.mark.one_python

ROOT = Path(__file__).resolve().parents[2]
GENERATE = Path("include/dynexpr/ops/generate.py")

# One op without a Highway body (the scalar body runs lane by lane) and one with.
TOY_OPS = '''

# --- toy ops of tests/python/test_manifest.py ---
op("cube_op", "cube", 1, "elementwise", "same_rule",
   check='DYNEXPR_OP_CHECK("cube", !is_bool_v<A>, "not defined for bool; cast first");',
   scalar="return mul_op::scalar(a, mul_op::scalar(a, a));",
   python={"numpy": "a * (a * a)"})
op("sq_diff_op", "sq_diff", 2, "elementwise", "arith_rule",
   check=_not_two_bools("sq_diff", "cast first"),
   scalar="return mul_op::scalar(sub_op::scalar(a, b), sub_op::scalar(a, b));",
   simd="return mul_op::simd(d, sub_op::simd(d, a, b), sub_op::simd(d, a, b));",
   python={"numpy": "(a - b) * (a - b)"})
'''

PROGRAM = r"""
#include <dynexpr/dynexpr.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

namespace dx = dynexpr;

template <class T>
int check(const char* what) {
  const dx::index_t n = 37;  // full packets and a tail
  dx::Tensor<T> x(dx::Shape{n}), y(dx::Shape{n});
  for (dx::index_t i = 0; i < n; ++i) {
    x.data()[i] = static_cast<T>(i * 7 % 23) - static_cast<T>(i % 2 ? 11 : 0);
    y.data()[i] = static_cast<T>(i % 5);
  }
  const auto c = dx::eval(dx::cube(x));
  const auto s = dx::eval(dx::sq_diff(x, y));
  const auto r = dx::eval(dx::sq_diff(x.slice(dx::slice(dx::none, dx::none, -1)), y));  // strided
  int bad = 0;
  for (dx::index_t i = 0; i < n; ++i) {
    const T a = x.data()[i], b = y.data()[i], ra = x.data()[n - 1 - i];
    bad += c.data()[i] != dynexpr::ops::cube_op::scalar(a);
    bad += s.data()[i] != dynexpr::ops::sq_diff_op::scalar(a, b);
    bad += r.data()[i] != dynexpr::ops::sq_diff_op::scalar(ra, b);
    bad += c.data()[i] != static_cast<T>(a * (a * a));  // independent of the bodies
  }
  std::printf("%s %d\n", what, bad);
  return bad;
}

int main() {
  const auto names = dynexpr::ops::op_names();
  const bool listed = std::count(names.begin(), names.end(), std::string_view("cube")) == 1 &&
                      std::count(names.begin(), names.end(), std::string_view("sq_diff")) == 1;
  std::printf("listed %d\n", listed ? 1 : 0);
  return (check<float>("float32") + check<double>("float64") + check<std::int32_t>("int32") +
          check<std::int64_t>("int64")) != 0 || !listed;
}
"""

CAPTURE = r"""
import os
from pathlib import Path

import numpy as np

import dynexpr
from dynexpr import manifest, ops

assert manifest.OPS["cube"]["kind"] == "elementwise", manifest.PATH

def f(x, y):
    return ops.cube(x) + ops.sq_diff(x, y) * 2

cf = dynexpr.capture(f)
for dtype in ("float32", "float64", "int32", "int64"):
    x = (np.arange(37) % 11 - 5).astype(dtype)
    y = (np.arange(37) % 3).astype(dtype)
    want = x * (x * x) + (x - y) * (x - y) * 2  # NumPy, written out
    for got in (f(x, y), cf(x, y), cf(x, y)):
        assert got.dtype == want.dtype and got.shape == want.shape, (dtype, got.dtype)
        np.testing.assert_array_equal(got, want)
# compiled: one unit per dtype in the cache, each calling the generated named functions
units = [p for p in Path(os.environ["DYNEXPR_CACHE_DIR"]).rglob("unit.cpp")
         if (p.parent / "unit.so").is_file()]
assert len(units) == 4, units
for unit in units:
    text = unit.read_text()
    assert "dx::cube(" in text and "dx::sq_diff(" in text, text
print("captured ok")
"""


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory) -> Path:
    """A copy of include/ and kernels/ whose manifest has the toy ops, regenerated."""
    root = tmp_path_factory.mktemp("toy")
    for d in ("include", "kernels"):
        shutil.copytree(ROOT / d, root / d, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = root / "include/dynexpr/ops/manifest.py"
    manifest.write_text(manifest.read_text() + TOY_OPS)
    # Until the generator runs, the tree's check names what is stale.
    stale = subprocess.run([sys.executable, str(root / GENERATE), "--check"],
                           capture_output=True, text=True, check=False)
    assert stale.returncode == 1, stale.stderr
    assert "include/dynexpr/ops/op_table.hpp, include/dynexpr/ops/registry.hpp" in stale.stderr
    subprocess.run([sys.executable, str(root / GENERATE)], check=True)
    return root


def _changed(a: Path, b: Path, rel: str = "") -> list[str]:
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__"])
    out = [f"{rel}{n}" for n in cmp.diff_files + cmp.left_only + cmp.right_only]
    for sub in cmp.common_dirs:
        out += _changed(a / sub, b / sub, f"{rel}{sub}/")
    return sorted(out)


def test_generated_files_are_current():
    """The committed output of the generator is what the manifest gives (meson's
    generated_current test checks the same)."""
    p = subprocess.run([sys.executable, str(ROOT / GENERATE), "--check"], capture_output=True,
                       text=True, check=False)
    assert p.returncode == 0, p.stderr


def test_a_toy_op_needs_only_its_manifest_entry(toy_tree):
    changed = _changed(ROOT / "include", toy_tree / "include")
    assert changed == ["dynexpr/ops/manifest.py", "dynexpr/ops/op_table.hpp",
                       "dynexpr/ops/registry.hpp"], changed
    assert _changed(ROOT / "kernels", toy_tree / "kernels") == []


def test_toy_ops_compile_and_match_their_scalar_bodies_in_cpp(toy_tree, tmp_path):
    from dynexpr import toolchain

    src = tmp_path / "toy.cpp"
    src.write_text(PROGRAM)
    exe = tmp_path / "toy"
    cmd = [os.environ.get("CXX", "c++"), "-std=c++20", "-O1", "-march=native", "-Wall",
           "-Wextra", "-Werror", "-I", str(toy_tree / "include")]
    cmd += [f"-isystem{d}" for d in toolchain.system_includes()]
    subprocess.run(cmd + [str(src), "-o", str(exe), "-pthread"], check=True)
    p = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["listed", "1", "float32", "0", "float64", "0", "int32", "0",
                                "int64", "0"], p.stdout


def test_toy_ops_are_captured_and_compiled(toy_tree, tmp_path):
    env = dict(os.environ, DYNEXPR_SOURCE_ROOT=str(toy_tree),
               DYNEXPR_CACHE_DIR=str(tmp_path / "cache"), DYNEXPR_NO_PCH="1")
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(CAPTURE)], env=env,
                       capture_output=True, text=True, check=False, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "captured ok" in p.stdout, p.stdout
    p = subprocess.run([sys.executable, "-m", "dynexpr", "ops"], env=env, capture_output=True,
                       text=True, check=True, cwd=tmp_path)
    assert "cube" in p.stdout and "dynexpr.ops.sq_diff" in p.stdout, p.stdout


def test_cli_lists_the_manifest_ops():
    from dynexpr import manifest

    p = subprocess.run([sys.executable, "-m", "dynexpr", "ops"], capture_output=True,
                       text=True, check=True)
    lines = p.stdout.splitlines()
    assert [ln.split()[0] for ln in lines[:-1]] == list(manifest.OPS)
    assert "np.tanh" in p.stdout and "C++ only" in p.stdout and "float32" in lines[-1]
