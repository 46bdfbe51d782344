"""Calling a function exported by dynexpr.export from C++ in tests: the generic driver
(export_driver.cpp) compiled against the export directory, arguments passed as files.

    call = driver(export_dir, "name")
    results, buffers = call(x, y, 2.0)    # arrays as NumPy arrays; buffers: the arrays'
                                          # memory after the call (in-place updates)
    call(x) -> raises CppError(code, message) when run() reported an error
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


class CppError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


def driver(export_dir: Path, name: str, cxx: str = "g++"):
    """A callable running `name::run` of the export in `export_dir` in a new process."""
    export_dir = Path(export_dir)
    exe = export_dir / f"driver_{name}"
    cmd = [cxx, "-std=c++17", "-O1", "-Wall", "-Werror", f'-DEXPORTED_HEADER="{name}.hpp"',
           f"-DEXPORTED_NS={name}", "-I", str(export_dir), str(HERE / "export_driver.cpp"),
           "-o", str(exe), "-L", str(export_dir), f"-l{name}",
           f"-Wl,-rpath,{export_dir}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)

    def call(*args, env=None):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            lines, bases = [], {}
            for k, a in enumerate(args):
                if isinstance(a, np.ndarray):
                    base = a
                    while base.base is not None and isinstance(base.base, np.ndarray):
                        base = base.base
                    key = id(base)
                    if key not in bases:
                        f = d / f"buf{len(bases)}.bin"
                        f.write_bytes(np.ascontiguousarray(base).tobytes())
                        bases[key] = (f, base)
                    f, base = bases[key]
                    w = a.itemsize
                    off = (a.__array_interface__["data"][0]
                           - base.__array_interface__["data"][0]) // w
                    strides = [s // w for s in a.strides]
                    lines.append(" ".join(["array", a.dtype.name, str(a.ndim),
                                           *map(str, a.shape), *map(str, strides), str(off),
                                           str(f)]))
                elif a is None:
                    lines.append("none")
                elif isinstance(a, bool):
                    lines.append(f"bool {int(a)}")
                elif isinstance(a, int):
                    lines.append(f"int {a}")
                else:
                    lines.append(f"float {float(a)!r}")
            (d / "args.txt").write_text("\n".join(lines) + "\n")
            out = d / "out"
            out.mkdir()
            proc = subprocess.run([str(exe), str(d / "args.txt"), str(out)],
                                  capture_output=True, text=True,
                                  env=dict(os.environ, **(env or {})), check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"export driver failed ({proc.returncode}): {proc.stderr}")
            text = (out / "results.txt").read_text().splitlines()
            head = text[0].split()
            if head[0] == "error":
                raise CppError(int(head[1]), "\n".join(text[1:]))
            results = []
            for k, ln in enumerate(text[1:1 + int(head[1])]):
                parts = ln.split()
                dt, nd = np.dtype(parts[0]), int(parts[1])
                shape = tuple(int(e) for e in parts[2:2 + nd])
                data = np.frombuffer((out / f"result_{k}.bin").read_bytes(), dtype=dt)
                results.append(data.reshape(shape).copy())
            buffers = {}
            for f, base in bases.values():
                buffers[id(base)] = np.frombuffer((out / f.name).read_bytes(),
                                                  dtype=base.dtype).reshape(base.shape).copy()
            return results, buffers

    return call
