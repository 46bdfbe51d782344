"""Dynamic dimensions: one capture that serves every size of a dimension.

Note [dynamic dimensions by sentinels]
The translator works on concrete int shapes everywhere (shape inference asks NumPy about
stand-in arrays). A dimension that is to be dynamic is given, instead of its real
extent, a sentinel: a large number no real shape of this call uses. Ops propagate it like
any extent (broadcasting, reductions, elementwise ops, transposes keep it), and after the
translation every graph shape entry equal to a sentinel becomes the symbol ("s0", ...)
that the C++ unit binds from the argument at run time.

That is sound only where nothing depended on the value, so:
  - Python never sees a sentinel: reading `.shape`, `.size`, `.nbytes` or `len()` of an
    array with a dynamic dimension, indexing or slicing along it, reshaping or
    broadcasting it to a given shape, and any shape error NumPy reports while it is in
    play (a dynamic extent meeting a static one, say) raise SpecializeDims: the
    translation starts again with those dimensions static (TorchDynamo specialises a
    symbolic size the same way when Python branches on it).
  - The translation is done twice, with different sentinels; the two graphs and guard
    lists must be the same once sentinels are replaced by symbols, and no op attribute
    may hold one. Anything derived from a sentinel that the rules above missed (a size
    computed from it, a constant it leaked into) differs between the runs, and the
    capture is then static: slower to reuse, never wrong.
Sizes 0 and 1 are never dynamic (they change broadcasting and emptiness), as in
TorchDynamo. A dynamic dimension's guard accepts any extent >= 2 (within a range given to
mark_dynamic); dimensions that shared a symbol at capture (equal extents: the kernel
relies on it, e.g. x + y) are guarded equal.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import Unsupported

_BASES = (1_048_573, 1_310_719)  # sentinels of the first and the checking translation
_STEP = 1_009
MAX_EXTENT = (1 << 62) // 8  # a stand-in's elements must fit NumPy's intp


class SpecializeDims(Unsupported):
    """A dynamic dimension's value was needed: translate again with it static."""

    def __init__(self, sentinels: set[int], why: str) -> None:
        # final: a resumable translation restarts with the dimension static instead of
        # ending its segment here (Note [resuming after a graph break]).
        super().__init__(f"a dynamic dimension is used as a value ({why})", final=True)
        self.sentinels = set(sentinels)


class DynState:
    """Which dimensions are dynamic in one translation, and their sentinels.
    `policy(source, axis, array)` gives the allowed (lo, hi) range of a dimension that
    is to be dynamic (hi None: unbounded), or None for a static one."""

    def __init__(self, policy: Callable[[tuple, int, np.ndarray], tuple | None],
                 run: int) -> None:
        self.policy = policy
        self.base = _BASES[run]
        self.by_extent: dict[int, int] = {}  # real extent -> sentinel (duck sizing)
        self.members: dict[int, list[tuple]] = {}  # sentinel -> [(source, axis), ...]
        self.ranges: dict[int, tuple[int, int | None]] = {}

    @property
    def sentinels(self) -> set[int]:
        return set(self.members)

    def shape_for(self, source: tuple, a: np.ndarray) -> tuple:
        """The shape the translation uses for array `a`, found at `source`."""
        out = list(a.shape)
        total = 1
        for axis, d in enumerate(a.shape):
            rng = self.policy(source, axis, a) if d >= 2 else None
            if rng is None:
                total *= max(d, 1)
                continue
            s = self.by_extent.get(d)
            if s is None:
                s = self.base + _STEP * len(self.by_extent)
            if total * s > MAX_EXTENT:  # too many dynamic dims in one array for a
                total *= d  # stand-in: this one stays static
                continue
            self.by_extent[d] = s
            total *= s
            self.members.setdefault(s, []).append((source, axis))
            lo, hi = self.ranges.get(s, (2, None))
            lo = max(lo, rng[0])
            hi = rng[1] if hi is None else (hi if rng[1] is None else min(hi, rng[1]))
            self.ranges[s] = (lo, hi)
            out[axis] = s
        return tuple(out)

    def symbol_of(self) -> dict[int, str]:
        return {s: f"s{k}" for k, s in enumerate(sorted(self.members))}


def ints(values: Any):
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        yield int(values)
    elif isinstance(values, (tuple, list)):
        for v in values:
            yield from ints(v)


# --- marks on arrays (mark_dynamic / mark_static) ------------------------------------
# ndarrays take no attributes and are not hashable: marks live in a table keyed by id,
# dropped when the array dies.
_marks: dict[int, tuple[weakref.ref, dict[int, tuple | None]]] = {}


def _marks_of(a: np.ndarray, create: bool) -> dict[int, tuple | None] | None:
    hit = _marks.get(id(a))
    if hit is not None and hit[0]() is a:
        return hit[1]
    if not create:
        return None
    key = id(a)
    table: dict[int, tuple | None] = {}
    _marks[key] = (weakref.ref(a, lambda _r, k=key: _marks.pop(k, None)), table)
    return table


def mark(a: Any, dim: int, rng: tuple | None, what: str) -> None:
    axis = axis_of(a, dim, what)  # first: a list has no weak reference to take
    _marks_of(a, True)[axis] = rng


def axis_of(a: Any, dim: int, what: str) -> int:
    """dim of array a, normalised; a clear TypeError/ValueError for anything else."""
    if type(a) is not np.ndarray:
        raise TypeError(f"dynexpr.{what}: expected a NumPy ndarray, got {type(a).__name__}")
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"dynexpr.{what}: dim must be an int, got {dim!r}")
    if not -a.ndim <= dim < a.ndim:
        raise ValueError(
            f"dynexpr.{what}: dim {dim} is out of range for an array with {a.ndim} dimensions"
        )
    return int(dim) % a.ndim


def marks(a: np.ndarray) -> dict[int, tuple | None] | None:
    """{axis: (lo, hi)} for mark_dynamic, {axis: None} for mark_static, or None."""
    return _marks_of(a, False)


def any_marks() -> bool:
    return bool(_marks)
