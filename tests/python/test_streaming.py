"""Outputs written with streaming stores (Note [streaming stores] in
include/dynexpr/simd/convert.hpp) hold NumPy's values. The threshold is read once per
process, so each case runs in a child with DYNEXPR_STREAM_MIN_MB=0 (every aligned output
streamed) and the parent compares what it returns with NumPy on the same inputs."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from compare import assert_same

pytestmark = pytest.mark.one_python  # the generated C++ loops, not the CPython version

pytest.importorskip("dynexpr._native")

# The functions, as a scientist writes them: run by the child captured and by the parent
# as plain NumPy.
FUNCTIONS = textwrap.dedent("""
    import numpy as np

    def affine(x):
        return ((x * 1.5 + 0.5) * 0.75 - 0.25) * 2.0 + 1.0

    def tanh_chain(x, y):
        return np.tanh(x * 2.0 + y) * 0.5 + x * y

    def centre_rows(x):
        return x - x.mean(axis=1, keepdims=True)

    def softmax_rows(x):
        e = np.exp(x - np.max(x, axis=1, keepdims=True))
        return e / np.sum(e, axis=1, keepdims=True)

    def scale_and_centre(x):
        y = x * 2.0 + 1.0
        return y - y.mean(axis=1, keepdims=True), y
""")
PLAIN: dict = {}
exec(FUNCTIONS, PLAIN)

# The child: each function captured and called twice (compiled synchronously), results
# and each unit's C++ text saved for the parent.
CHILD = FUNCTIONS + textwrap.dedent("""
    import os
    import sys
    import dynexpr

    dynexpr.config.background_compile = False

    rng = np.random.default_rng(7)
    cases = {
        "affine_f32": (affine, [rng.standard_normal(300007).astype(np.float32)]),
        "affine_f64": (affine, [rng.standard_normal(65537)]),
        "tanh_chain_f32": (tanh_chain, [rng.standard_normal(100003).astype(np.float32),
                                        rng.standard_normal(100003).astype(np.float32)]),
        # rows of 256 float32 (1 KiB): every row 64-byte aligned, so streamed
        "centre_rows_aligned": (centre_rows, [rng.standard_normal((999, 256)).astype(np.float32)]),
        # rows of 100 float64 (800 B): not every row aligned, so stored normally
        "centre_rows_unaligned": (centre_rows, [rng.standard_normal((777, 100))]),
        # 512 KB, in cache: one row loop per kernel
        "softmax_rows": (softmax_rows, [rng.standard_normal((256, 512)).astype(np.float32)]),
        # 4 MB: a run of row blocks, whose kernels read what the ones before wrote from
        # cache, so nothing in it is streamed
        "softmax_blocks": (softmax_rows, [rng.standard_normal((2048, 512)).astype(np.float32)]),
        # a run of row blocks (3.2 MB) whose flat loop writes the result y, which the next
        # kernels of the block read
        "scale_and_centre": (scale_and_centre, [rng.standard_normal((4096, 100))]),
    }
    saved, text = {}, []
    for name, (fn, args) in cases.items():
        f = dynexpr.capture(fn)
        f(*args)
        got = f(*args)
        for i, r in enumerate(got if isinstance(got, tuple) else (got,)):
            saved[f"{name}_out{i}"] = r
        for i, a in enumerate(args):
            saved[f"{name}_arg{i}"] = a
        path = f.entries[-1].compiled.path  # as compare.unit_source reads it
        with open(os.path.join(os.path.dirname(path), "unit.cpp")) as fh:
            text.append(f"=== {name}\\n" + fh.read())
    np.savez(sys.argv[1], **saved)
    with open(sys.argv[2], "w") as out:
        out.write("\\n".join(text))
""")


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    d = tmp_path_factory.mktemp("streaming")
    npz, explained = d / "results.npz", d / "units.txt"
    p = subprocess.run([sys.executable, "-c", CHILD, str(npz), str(explained)],
                       capture_output=True, text=True, timeout=1200, check=False,
                       env=dict(os.environ, DYNEXPR_STREAM_MIN_MB="0"))
    assert p.returncode == 0, p.stderr
    sections = explained.read_text().split("=== ")[1:]
    return np.load(npz), {s.split("\n", 1)[0]: s for s in sections}


@pytest.mark.parametrize("name, fn, n_args, streams", [
    ("affine_f32", "affine", 1, True),
    ("affine_f64", "affine", 1, True),
    ("tanh_chain_f32", "tanh_chain", 2, True),
    ("centre_rows_aligned", "centre_rows", 1, True),
    ("centre_rows_unaligned", "centre_rows", 1, False),
    ("softmax_rows", "softmax_rows", 1, True),
    ("softmax_blocks", "softmax_rows", 1, False),
    ("scale_and_centre", "scale_and_centre", 1, False),
])
def test_streamed_outputs_match_numpy(streamed, name, fn, n_args, streams):
    results, explained = streamed
    args = [results[f"{name}_arg{i}"] for i in range(n_args)]
    want = PLAIN[fn](*args)
    outs = [results[k] for k in sorted(results.files) if k.startswith(f"{name}_out")]
    assert_same(want, tuple(outs) if isinstance(want, tuple) else outs[0])
    # The unit asks at run time whether to stream its output (dxk::streams); a row loop
    # whose rows are not all 64-byte aligned never does.
    assert ("dxk::streams(" in explained[name]) == streams, explained[name]
