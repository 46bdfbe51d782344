"""Exports a layer normalisation written with NumPy as standalone C++ and writes the
inputs and NumPy's results that examples/cpp/use_exported.cpp checks it against:

    python examples/cpp/export_example.py OUTDIR
    meson configure build -Dexported=OUTDIR && meson compile -C build
    build/examples/cpp/use_exported OUTDIR

OUTDIR gets layer_norm.hpp, liblayer_norm.so, libdynexpr_rt.so (export's files) and per
case (3 and 1000 rows) case_ROWS.txt with its inputs and expected output as raw float32.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dynexpr
import numpy as np


def layer_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def main(out: Path) -> None:
    rng = np.random.default_rng(2026)
    features = 64
    gamma = (1.0 + 0.1 * rng.standard_normal(features)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(features)).astype(np.float32)
    example = rng.standard_normal((8, features)).astype(np.float32)
    ex = dynexpr.export(layer_norm, example, gamma, beta,
                        dynamic_shapes={"x": {0: dynexpr.Dim("rows", max=1 << 24)}})
    print(ex)
    ex.save(out)
    for rows in (3, 1000):
        x = (rng.standard_normal((rows, features)) * 3 + 1).astype(np.float32)
        want = layer_norm(x, gamma, beta)
        for name, a in (("x", x), ("gamma", gamma), ("beta", beta), ("want", want)):
            (out / f"case_{rows}_{name}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
        (out / f"case_{rows}.txt").write_text(f"{rows} {features}\n")
    print(f"wrote {out}: layer_norm.hpp, liblayer_norm.so and the NumPy reference cases")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/cpp/export_example.py OUTDIR")
    main(Path(sys.argv[1]).resolve())
