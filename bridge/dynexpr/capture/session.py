"""The state of one translation that is not the graph or the guards: which dimensions
are dynamic, and the counters that tell whether an instruction changed shared state.

Note [one session per translation]
Everything a translation writes lives on objects made for that translation: its
Context (graph, guards, wrapped values, budget) and the Session the Context owns (this
module). The handlers reach it from what they already get: `tx.ctx.session` from a
frame, `x.b.session` from an ArrayVar (its GraphBuilder). Nothing on the translation
path writes module-level state, so two translations (two threads, or a translation
started while another is paused) never see each other's sentinels or counters. What
the modules of capture/ keep at module level is constant tables, filled at import, and
memo.Memo caches of pure functions of a code object (tests/python/test_architecture.py
checks both).
"""

from __future__ import annotations

from typing import Any

from .dynamic import DynState, SpecializeDims, ints
from .errors import ShapeQuestion, Unsupported


class Session:
    """One translation's mutable state beyond the graph (Note [one session per
    translation]). `dyn`: the dynamic.DynState of a translate_dynamic run, or None when
    every extent is static."""

    __slots__ = ("dyn", "writes", "inlined", "api", "device", "stand_ins")

    def __init__(self, dyn: DynState | None = None, device: bool = False,
                 stand_ins: dict | None = None) -> None:
        self.dyn = dyn
        # a device-path translation (cuda_run.py): a CUDA library's functions spelled like
        # NumPy's are NumPy's (cupy.exp is np.exp); elsewhere plain Python refuses them
        self.device = device
        # source -> the NumPy stand-in a device-path translation reads there instead of a
        # CUDA array found in a global or closure (Note [the device path])
        self.stand_ins = stand_ins or {}
        # NumPy's API the translation used beyond operators and indexing: "np.exp",
        # "ndarray.max", "ndarray.dtype" (Note [which libraries speak NumPy] in
        # backends/cuda_arrays.py)
        self.api: set[str] = set()
        self.writes = 0  # writes into arrays so far (dynexpr.cond checks its branches make none)
        self.inlined = 0  # frames inlined so far (a break inside one may have changed state)

    def effects(self) -> tuple:
        """What an instruction that breaks must not have changed to be resumed before it
        (Note [resuming after a graph break])."""
        return (self.writes, self.inlined)

    def check_static(self, values: Any, why: str) -> None:
        """Raise SpecializeDims if any int in `values` (an int or nested tuples) is a
        sentinel of this translation: Python or a static-only op needs the real value
        (Note [dynamic dimensions by sentinels])."""
        st = self.dyn
        if st is None or not st.members:
            return
        found = {v for v in ints(values) if v in st.members}
        if found:
            raise SpecializeDims(found, why)

    def specialized(self, e: ShapeQuestion) -> Unsupported:
        """The break to raise for NumPy's refusal `e` (infer.ask): with dynamic
        dimensions in play, SpecializeDims for all of them (the refusal may be about a
        sentinel: translate again static before believing it); else `e` itself."""
        st = self.dyn
        if st is not None and st.members:
            return SpecializeDims(st.sentinels, e.why)
        return e
