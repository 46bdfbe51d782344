"""The peers of bench/python/run_peers.py: how each implementation is imported, told its
thread count, and built for one workload (see that script's docstring)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import dynexpr
from workloads import Workload

# Peers: load() imports the library (ImportError: not installed) and returns its version;
# build() returns (call, to_numpy) for one workload and its inputs, or None where the peer
# cannot express the workload.

@dataclass
class Peer:
    name: str
    load: Callable[[int], str]
    build: Callable[[Workload, tuple], tuple[Callable, Callable] | None]


def _load_numpy(threads: int) -> str:
    return np.__version__


def _build_numpy(w, xs):
    return (lambda: w.fn(*xs)), np.asarray


def _load_dynexpr(threads: int) -> str:
    # Every workload, dtype and size is a new capture: lift the per-function and
    # process-wide limits, past which dynexpr would run plain Python (and the table lie).
    dynexpr.config.recompile_limit = 64
    dynexpr.config.accumulated_recompile_limit = 1 << 20
    try:
        # The first call waits for the compiler rather than running NumPy meanwhile: the
        # first-call column is then the compile's cost, and every timed call a kernel's.
        dynexpr.config.background_compile = False
    except AttributeError:  # a dynexpr that always compiles in the foreground
        pass
    try:
        # Every timed call runs the compiled path, not the plain function that an entry
        # measured slower would run (Note [judging an entry] in dynexpr/judge.py).
        dynexpr.config.plain_fallback = False
    except AttributeError:  # a dynexpr without that judgement
        pass
    return dynexpr.__version__


def _build_dynexpr(fuse: bool, mode: str = "default"):
    def build(w, xs):
        f = dynexpr.capture(w.fn, fuse=fuse, mode=mode)
        return (lambda: f(*xs)), np.asarray

    return build


_mods: dict[str, Any] = {}


def _load_numexpr(threads: int) -> str:
    import numexpr

    numexpr.set_num_threads(threads)
    _mods["numexpr"] = numexpr
    return numexpr.__version__


def _build_numexpr(w, xs):
    ne = _mods["numexpr"]
    if w.numexpr is None:
        return None
    if callable(w.numexpr):
        return (lambda: w.numexpr(ne, *xs)), np.asarray
    names = dict(zip(w.params, xs))
    expr = w.numexpr
    if all(getattr(x, "dtype", None) == np.float32 for x in xs):
        expr, consts = _float32_constants(expr)
        names.update(consts)
    return (lambda: ne.evaluate(expr, local_dict=names)), np.asarray


# A float literal not inside a name (x2) or after a dot.
_FLOAT = re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _float32_constants(expr: str) -> tuple[str, dict]:
    """expr with its float literals as float32 variables: numexpr types a literal as
    double, which makes float32 inputs compute (and return) float64, unlike NumPy 2."""
    consts: dict[str, np.float32] = {}

    def name(m: re.Match) -> str:
        key = f"_c{len(consts)}"
        consts[key] = np.float32(float(m.group(0)))
        return key

    return _FLOAT.sub(name, expr), consts


def _load_torch(threads: int) -> str:
    import torch

    torch.set_num_threads(threads)
    # One compiled graph per dtype and size of each function: keep dynamo from giving up.
    for knob in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 256)
    _mods["torch"] = torch
    return torch.__version__


def _build_torch(w, xs):
    if w.torch is None:
        return None
    torch = _mods["torch"]
    f = torch.compile(w.torch())
    ts = [torch.from_numpy(x) for x in xs]
    return (lambda: f(*ts)), (lambda r: r.numpy())


def _load_jax(threads: int) -> str:
    import jax

    jax.config.update("jax_enable_x64", True)  # float64 workloads; float32 ones stay float32
    _mods["jax"] = jax
    return jax.__version__


def _build_jax(w, xs):
    if w.jax is None:
        return None
    jax = _mods["jax"]
    f = jax.jit(w.jax())
    js = [jax.device_put(x) for x in xs]
    return (lambda: f(*js).block_until_ready()), np.asarray


def _load_numba(threads: int) -> str:
    import numba

    numba.set_num_threads(threads)
    return numba.__version__


def _build_numba(w, xs):
    if w.numba is None:
        return None
    f = w.numba()
    return (lambda: f(*xs)), np.asarray


PEERS = {
    "numpy": Peer("numpy", _load_numpy, _build_numpy),
    "dynexpr": Peer("dynexpr", _load_dynexpr, _build_dynexpr(True)),
    "dynexpr_unfused": Peer("dynexpr_unfused", _load_dynexpr, _build_dynexpr(False)),
    "dynexpr_autotune": Peer("dynexpr_autotune", _load_dynexpr,
                             _build_dynexpr(True, "max-autotune")),
    "numexpr": Peer("numexpr", _load_numexpr, _build_numexpr),
    "torch_compile": Peer("torch_compile", _load_torch, _build_torch),
    "jax": Peer("jax", _load_jax, _build_jax),
    "numba": Peer("numba", _load_numba, _build_numba),
}


def set_threads(n: int) -> None:
    """The same thread count for every peer, set before any of them is imported (numba and
    numexpr read it at import, dynexpr's pool when first used); torch and numexpr are also
    told at load."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS", "NUMBA_NUM_THREADS",
                "DYNEXPR_NUM_THREADS"):
        os.environ[var] = str(n)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


def load_peers(names: list[str], threads: int) -> dict[str, str]:
    """name -> version, or "not installed", or "error: ..." (a peer that failed to load)."""
    status = {}
    for name in names:
        try:
            status[name] = PEERS[name].load(threads)
        except ImportError as e:
            status[name] = "not installed" if _missing(e) else f"error: {e}"
        except Exception as e:  # a broken install is a row in the table, not a crash
            status[name] = f"error: {type(e).__name__}: {e}"
    return status


def _missing(e: ImportError) -> bool:
    return isinstance(e, ModuleNotFoundError) and e.name in ("numexpr", "torch", "jax", "numba")


