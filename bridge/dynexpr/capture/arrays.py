"""Fake arrays: dtype, shape, and NumPy's view and mutation semantics, functionally.

Note [arrays as storages and view paths]
An ArrayVar is a view path from a Storage (one base array: an input, or the result of
an op). The storage holds the base's current value, an IR Value; every write makes a
new version (a `setitem` node, or a whole new value). A view reads by replaying its
path on the current version, so `b = x[1:]; x[2] = 7; b` sees the write, exactly as
NumPy's shared memory would. A write through a view is scattered back up the path
(getitem -> setitem into the parent, transpose -> the inverse transpose, reshape ->
reshape back), so `b = x[1:-1]; b *= 2` produces the next version of x, and an
argument's final version becomes a Graph mutation. NumPy scalars (x[0] on a 1-d
array, x.sum()) are copies, not views: they get storages of their own.

Where NumPy's choice between a view and a copy depends on memory layout we do not
track (reshape of a non-contiguous array), the storages involved are frozen: reading
is fine either way, and a later write breaks the graph instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import ir
from .errors import graph_break
from .graph import GraphBuilder
from .variables import Var


@dataclass(frozen=True)
class ViewStep:
    op: str  # one of ir.VIEWS
    attrs: tuple  # ir.make_attrs(...)
    in_shape: tuple
    out_shape: tuple


class Storage:
    """One base array and its current version."""

    def __init__(
        self,
        value: ir.Value,
        *,
        source: tuple | None = None,
        c_contig: bool | None = None,
        writeable: bool = True,
        on_first_write: Callable[[], None] | None = None,
    ) -> None:
        self.current = value
        self.origin = value  # the version the function started from
        self.version = 0
        self.source = source  # where an array from outside lives; None: a temporary
        self.c_contig = c_contig  # True/False when known, None when not
        self.writeable = writeable
        self.frozen: str | None = None
        self.on_first_write = on_first_write

    @property
    def written(self) -> bool:
        return self.version > 0

    def freeze(self, reason: str) -> None:
        if self.frozen is None:
            self.frozen = reason


class ArrayVar(Var):
    """A fake ndarray (kind "ndarray") or NumPy scalar (kind "scalar")."""

    __slots__ = ("b", "storage", "path", "kind", "dtype", "shape", "_value", "_version")

    def __init__(
        self,
        b: GraphBuilder,
        storage: Storage,
        path: tuple = (),
        *,
        kind: str = "ndarray",
        dtype: str | None = None,
        shape: tuple | None = None,
    ) -> None:
        self.b = b
        self.storage = storage
        self.path = path
        self.kind = kind
        self.dtype = dtype or storage.current.dtype
        self.shape = tuple(
            shape if shape is not None else (path[-1].out_shape if path else storage.current.shape)
        )
        self._value = storage.current if not path else None
        self._version = storage.version if not path else -1

    # -- reading ---------------------------------------------------------------------
    @property
    def value(self) -> ir.Value:
        st = self.storage
        if self._version != st.version or self._value is None:
            self._value = self._replay(len(self.path))
            self._version = st.version
        return self._value

    def _replay(self, upto: int) -> ir.Value:
        v = self.storage.current
        for step in self.path[:upto]:
            v = apply_step(self.b, step, v)
        return v

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def is_scalar(self) -> bool:
        return self.kind == "scalar"

    @property
    def c_contig(self) -> bool | None:
        if not self.path:
            return self.storage.c_contig
        if all(s.op in ("reshape", "expand_dims", "squeeze") for s in self.path):
            return self.storage.c_contig  # these keep C order when they are views
        return None

    def describe(self) -> str:
        what = "NumPy scalar" if self.is_scalar else "array"
        return f"{what} {self.dtype}{list(self.shape)}"

    def __repr__(self) -> str:
        return f"ArrayVar({self.dtype}{list(self.shape)}, path={[s.op for s in self.path]})"

    # -- views -----------------------------------------------------------------------
    def view(self, op: str, out_shape: tuple, **attrs: Any) -> ArrayVar:
        step = ViewStep(op, ir.make_attrs(**attrs), self.shape, tuple(out_shape))
        return ArrayVar(self.b, self.storage, self.path + (step,), dtype=self.dtype)

    # -- writing ---------------------------------------------------------------------
    def write(self, index: tuple | None, value: ir.Value) -> None:
        """Write `value` into self[index] (index None: the whole array). `value` must
        already have the region's shape and this array's dtype."""
        self.b.session.writes += 1
        st = self.storage
        if self.is_scalar:
            raise AssertionError("NumPy scalars are immutable; callers rebind instead")
        if st.frozen:
            graph_break(st.frozen)
        if not st.writeable or any(s.op == "broadcast_to" for s in self.path):
            graph_break("assignment destination is read-only (NumPy raises ValueError)")
        if st.on_first_write is not None:
            hook, st.on_first_write = st.on_first_write, None
            hook()
        b = self.b
        new = (
            value
            if index is None
            else b.node("setitem", (self.value, value), self.dtype, self.shape, index=index)
        )
        for k in range(len(self.path) - 1, -1, -1):
            new = _scatter_back(b, self.path[k], self._replay(k), new)
        st.current = new
        st.version += 1


def apply_step(b: GraphBuilder, step: ViewStep, v: ir.Value) -> ir.Value:
    return b.node(step.op, (v,), v.dtype, step.out_shape, **dict(step.attrs))


def _scatter_back(b: GraphBuilder, step: ViewStep, parent: ir.Value, new: ir.Value) -> ir.Value:
    """The parent's next version, given that its view `step` now holds `new`."""
    attrs = dict(step.attrs)
    if step.op == "getitem":
        return b.node("setitem", (parent, new), parent.dtype, parent.shape, index=attrs["index"])
    if step.op == "transpose":
        axes = attrs["axes"]
        inverse = tuple(sorted(range(len(axes)), key=lambda i: axes[i]))
        return b.node("transpose", (new,), new.dtype, step.in_shape, axes=inverse)
    if step.op in ("reshape", "expand_dims", "squeeze"):
        return b.node("reshape", (new,), new.dtype, step.in_shape, shape=step.in_shape)
    raise AssertionError(f"no way back through view {step.op}")


def fresh(b: GraphBuilder, value: ir.Value, kind: str = "ndarray") -> ArrayVar:
    """An ArrayVar owning a new temporary (the result of a computation)."""
    # NumPy gives results the layout of their inputs (K order), which we do not track.
    return ArrayVar(b, Storage(value, c_contig=True if value.ndim <= 1 else None), kind=kind)
