"""NumPy's floating-point error policy for captured code (Note [floating-point errors] in
bridge/native/kernel.c).

A compiled kernel raises the IEEE flags NumPy's loops would; the native Kernel collects
them (from every pool thread) and calls `report(bits)` here when one is set that the
current np.errstate / np.seterr does not ignore. `report` does what NumPy's ufunc error
handler does for each flag in NumPy's order (divide, over, under, invalid): 'warn' a
RuntimeWarning, 'raise' FloatingPointError, 'call' the np.seterrcall function with (kind,
bits), 'print' and 'log' a "Warning: ..." line (to sys.stderr / the seterrcall object's
write). Messages read "<kind> encountered in <where>", as NumPy's. A fused kernel runs
many ops in one loop and cannot tell which one raised a flag: `where` is the NumPy name
of the one op of its graph that can raise that kind ("divide by zero encountered in
divide" for a captured x / 0.0), else "dynexpr kernel (multiply, exp)" listing the ops
that can (`op_names`). The eager backend names the op that raised it (`collecting`).

Warnings name the first caller outside dynexpr, as NumPy's name the line that called
the ufunc, so the warnings module's once-per-location filters see the user's line.
"""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import contextmanager

import numpy as np

from . import manifest

try:  # NumPy >= 2.0: the error state as a dict, without the copy np.geterr makes
    from numpy._core.umath import _get_extobj_dict as _state
except ImportError:  # pragma: no cover
    def _state() -> dict:
        return {**np.geterr(), "call": np.geterrcall()}

KERNEL = "dynexpr kernel"
# NumPy's NPY_FPE_* bits, its errstate keys, and the words of its messages.
KINDS = ((1, "divide", "divide by zero"), (2, "over", "overflow"),
         (4, "under", "underflow"), (8, "invalid", "invalid value"))
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


# The graph ops (ir names) that can raise each kind, in NumPy's loops: the manifest's `fp`
# of each op, and the reductions and matmul (which accumulate as arithmetic does; min/max
# compare, "invalid" on NaN).
_ARITH = ("sum", "prod", "mean", "var", "std", "matmul")
_STRUCTURAL = {1: (), 2: _ARITH, 4: _ARITH, 8: _ARITH + ("min", "max")}
_CAN_RAISE = {bit: tuple(n for n, o in manifest.OPS.items() if key in o["fp"]) + _STRUCTURAL[bit]
              for bit, key, _ in KINDS}
_NUMPY_NAME = {"true_divide": "divide", "astype": "cast"}


def op_names(ops: list[str]) -> list[str]:
    """The `where` of each kind (divide, over, under, invalid) for a kernel computing
    `ops` (its graph's ir op names, in order)."""
    out = []
    for bit in (1, 2, 4, 8):
        cands = list(dict.fromkeys(_NUMPY_NAME.get(op, op) for op in ops
                                   if op in _CAN_RAISE[bit]))
        out.append(cands[0] if len(cands) == 1 else
                   f"{KERNEL} ({', '.join(cands)})" if cands else KERNEL)
    return out


def ignored() -> int:
    """The NPY_FPE bits whose mode is 'ignore' in the current error state."""
    st = _state()
    return sum(bit for bit, key, _ in KINDS if st[key] == "ignore")


def report(bits: int, where: str | tuple = KERNEL, state: dict | None = None) -> None:
    """Applies the error state (the current one, or `state`) to the NPY_FPE bits
    raised by `where` (one name, or one per kind as `op_names` gives), as NumPy's ufunc
    machinery does."""
    st = _state() if state is None else state
    for k, (bit, key, text) in enumerate(KINDS):
        if not bits & bit:
            continue
        mode = st[key]
        if mode == "ignore":
            continue
        name = where if isinstance(where, str) else where[k]
        msg = f"{text} encountered in {name}"
        if mode == "warn":
            warnings.warn(msg, RuntimeWarning, stacklevel=_caller_level())
        elif mode == "raise":
            raise FloatingPointError(msg)
        elif mode == "print":
            sys.stderr.write(f"Warning: {msg}\n")
        elif mode in ("call", "log"):
            sink = st["call"]
            if sink is None:
                what = "python callback" if mode == "call" else "log"
                raise NameError(f"{what} specified for {text} (in {name}) but no "
                                f"{'function' if mode == 'call' else 'object with write method'} "
                                "found.")
            if mode == "call":
                sink(text, bits)
            else:
                sink.write(f"Warning: {msg}\n")


def _caller_level() -> int:
    """warnings.warn's stacklevel for the first frame outside the dynexpr package."""
    f, level = sys._getframe(2), 2  # frame 1 is report, 2 its caller (stacklevel 2)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f, level = f.f_back, level + 1
    return level


class _Collector:
    """An np.seterrcall function that records the NPY_FPE bits raised."""

    __slots__ = ("bits",)

    def __init__(self) -> None:
        self.bits = 0

    def __call__(self, kind: str, bits: int) -> None:
        self.bits |= bits


@contextmanager
def collecting():
    """For the eager backend: runs NumPy ops with every flag sent to a collector, so that
    reports name the user's line rather than dynexpr's, and yields (state, collector):
    the caller's error state, to give `report` with the bits collected after each op.
    With every mode 'ignore' (nothing to report) the collector is None."""
    st = _state()
    if all(st[key] == "ignore" for _, key, _ in KINDS):
        with np.errstate(all="ignore"):
            yield st, None
        return
    sink = _Collector()
    with np.errstate(all="call", call=sink):
        yield st, sink
