"""NVRTC, loaded at run time: CUDA C++ source -> cubin (and PTX) for one sm_XX.

    from dynexpr.backends import nvrtc
    nvrtc.available()                 # None, or why not (no libnvrtc found)
    nvrtc.version()                   # (13, 0)
    art = nvrtc.compile_cached(source, "sm_90")   # cache.Artifact: kernel.cubin + kernel.ptx
    cubin, ptx = nvrtc.compile(source, "sm_80")   # bytes, uncached

The library is found, in order, at $DYNEXPR_NVRTC (a file), under $CUDA_HOME / $CUDA_PATH
/ /usr/local/cuda (lib64/libnvrtc.so*), in the `nvidia-cuda-nvrtc` wheel
(site-packages/nvidia/cuda_nvrtc/lib, or nvidia/cu13/lib), then by the dynamic loader's
own search. Nothing is loaded before the first use, so `import dynexpr` works on machines
without CUDA, and a missing library is an error naming the way out.

Cached artifacts are keyed by the source, NVRTC's version, the arch and the flags
(cache.py's content-addressed store; the artifact is `kernel.cubin`, with `kernel.ptx`
beside it for devices newer than the arch, which the driver JIT-compiles).
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import sys
from pathlib import Path

from .. import cache

FLAGS = ("-std=c++17", "--fmad=false", "-default-device")
# Note [no fmad]: NVRTC contracts a * b + c into one fma by default; NumPy (and the cpu
# backend's scalar bodies) round the product first, so contraction would change results
# by an ulp against the reference. Units ask for fma explicitly where they mean it.
# -default-device: the manifest's bodies pass lambdas (detail::wrapping), which NVRTC would
# otherwise take for host functions.
ARTIFACT = "kernel.cubin"

_lib = None
_why: str | None = None


class NvrtcError(RuntimeError):
    """NVRTC rejected a source (the message carries its log) or could not be used."""


def _candidates() -> list[str]:
    out = []
    if os.environ.get("DYNEXPR_NVRTC"):
        out.append(os.environ["DYNEXPR_NVRTC"])
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            out += sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")), key=len)
    for sp in sys.path:
        for sub in ("nvidia/cuda_nvrtc/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"):
            out += sorted(glob.glob(os.path.join(sp, sub, "libnvrtc.so*")), key=len)
    out += ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]
    return [p for p in out if "builtins" not in p and ".alt." not in p]


def _load():
    global _lib, _why
    if _lib is not None or _why is not None:
        return _lib
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        _declare(lib)
        _lib = lib
        return lib
    _why = ("dynexpr: NVRTC (libnvrtc.so) was not found; install the CUDA toolkit, or "
            "`pip install nvidia-cuda-nvrtc`, or set DYNEXPR_NVRTC to the library's path")
    return None


def _declare(lib) -> None:
    P, c_int, c_size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    lib.nvrtcGetErrorString.argtypes = [c_int]
    lib.nvrtcVersion.argtypes = [ctypes.POINTER(c_int), ctypes.POINTER(c_int)]
    lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(P), ctypes.c_char_p, ctypes.c_char_p,
                                       c_int, ctypes.POINTER(ctypes.c_char_p),
                                       ctypes.POINTER(ctypes.c_char_p)]
    lib.nvrtcCompileProgram.argtypes = [P, c_int, ctypes.POINTER(ctypes.c_char_p)]
    for fn in ("nvrtcGetProgramLogSize", "nvrtcGetCUBINSize", "nvrtcGetPTXSize"):
        getattr(lib, fn).argtypes = [P, ctypes.POINTER(c_size)]
    for fn in ("nvrtcGetProgramLog", "nvrtcGetCUBIN", "nvrtcGetPTX"):
        getattr(lib, fn).argtypes = [P, ctypes.c_char_p]
    lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(P)]


def available() -> str | None:
    """None when NVRTC can be loaded, else why not (with the way out)."""
    _load()
    return None if _lib is not None else _why


def _need():
    lib = _load()
    if lib is None:
        raise NvrtcError(_why)
    return lib


def _check(lib, rc: int, what: str) -> None:
    if rc != 0:
        raise NvrtcError(f"dynexpr: NVRTC {what} failed: {lib.nvrtcGetErrorString(rc).decode()}")


def version() -> tuple[int, int]:
    lib = _need()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def _bytes(lib, prog, size_fn, get_fn) -> bytes:
    n = ctypes.c_size_t()
    _check(lib, size_fn(prog, ctypes.byref(n)), size_fn.__name__)
    buf = ctypes.create_string_buffer(n.value)
    _check(lib, get_fn(prog, buf), get_fn.__name__)
    return buf.raw[: n.value]


def _compile_one(source: str, arch: str, flags, want: str, name: str) -> bytes:
    lib = _need()
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(),
                                       0, None, None), "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}", *flags]
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        if rc != 0:
            log = _bytes(lib, prog, lib.nvrtcGetProgramLogSize, lib.nvrtcGetProgramLog)
            raise NvrtcError(f"dynexpr: NVRTC could not compile {name} for {arch} "
                             f"({lib.nvrtcGetErrorString(rc).decode()}):\n"
                             f"{log.decode(errors='replace').rstrip(chr(0))}")
        if want == "cubin":
            return _bytes(lib, prog, lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
        return _bytes(lib, prog, lib.nvrtcGetPTXSize, lib.nvrtcGetPTX).rstrip(b"\0")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _arch(arch: str) -> str:
    if not (arch.startswith("sm_") and arch[3:].rstrip("af").isdigit()):
        raise ValueError(f"dynexpr: {arch!r} is not a CUDA architecture; use e.g. 'sm_90'")
    return arch


def compile(source: str, arch: str, flags=FLAGS, name: str = "dynexpr_unit.cu"
            ) -> tuple[bytes, bytes]:
    """(cubin for arch, PTX for the matching compute_XX)."""
    arch = _arch(arch)
    cubin = _compile_one(source, arch, flags, "cubin", name)
    ptx = _compile_one(source, "compute_" + arch[3:], flags, "ptx", name)
    return cubin, ptx


def key(source: str, arch: str, flags=FLAGS) -> str:
    h = hashlib.sha256(b"dynexpr cuda nvrtc\0")
    for part in (source, "{}.{}".format(*version()), arch, "\0".join(flags)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def compile_cached(source: str, arch: str, flags=FLAGS) -> cache.Artifact:
    """The cubin (and PTX) of source for arch from the store, compiled on a miss."""
    arch = _arch(arch)
    k = key(source, arch, flags)

    def make(tmp: Path, final: Path) -> None:
        cubin, ptx = compile(source, arch, flags)
        (tmp / ARTIFACT).write_bytes(cubin)
        (tmp / "kernel.ptx").write_bytes(ptx)
        (tmp / "kernel.cu").write_text(source)
        cache.stats["compiles"] += 1

    meta = {"backend": "cuda", "arch": arch, "nvrtc": "{}.{}".format(*version()), "flags": list(flags)}
    return cache.get_or_build(k, meta, make, ARTIFACT)
