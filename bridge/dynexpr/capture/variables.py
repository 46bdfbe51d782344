"""The symbolic values on the translator's stack.

A translation never touches the user's data. What it knows about a Python object is
one of these:

    PyVar          a known Python object (a constant for this cache entry: every fact
                   that made it known is guarded)
    ArrayVar       a fake ndarray or NumPy scalar: dtype and shape only (arrays.py)
    TupleVar, ListVar, DictVar    containers built symbolically or holding arrays
    ObjectVar      a user object; its attributes are read (and guarded) on demand
    FunctionVar    a user function to inline; NestedFunctionVar one made by MAKE_FUNCTION
    BoundMethodVar a method of a user object or of an array, bound to its self
    IteratorVar    iteration over a finite, known sequence (loops are unrolled)
    CellVar        a closure cell
"""

from __future__ import annotations

from typing import Any


class Var:
    __slots__ = ()

    def describe(self) -> str:
        return type(self).__name__


class _Null(Var):
    """The NULL that LOAD_GLOBAL/LOAD_ATTR push below a callable."""

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


class _Unbound:
    def __repr__(self) -> str:
        return "UNBOUND"


UNBOUND = _Unbound()


class PyVar(Var):
    __slots__ = ("value", "source")

    def __init__(self, value: Any, source: tuple | None = None) -> None:
        self.value = value
        self.source = source

    def describe(self) -> str:
        v = self.value
        name = getattr(v, "__qualname__", None) or getattr(v, "__name__", None)
        return f"{type(v).__name__} {name}" if name else f"{type(v).__name__} {v!r:.40}"

    def __repr__(self) -> str:
        return f"PyVar({self.value!r:.60})"


class ScalarInputVar(PyVar):
    """A number a resumed segment gets from plain Python, e.g. the result of `.item()`
    (Note [resuming after a graph break]). Arithmetic with arrays takes it as a 0-d
    graph input, so a new value does not compile again; anything that reads the value
    itself (a branch, a shape, folding) specialises the entry on it with a VALUE guard."""

    __slots__ = ("raw", "ctx", "inputs")

    def __init__(self, raw: Any, source: tuple, ctx: Any) -> None:
        self.raw = raw
        self.source = source
        self.ctx = ctx
        self.inputs: dict = {}  # dtype -> the graph input holding the value as that dtype

    @property
    def value(self) -> Any:
        self.ctx.guard("VALUE", self.source, self.raw)
        return self.raw

    def describe(self) -> str:
        return f"{type(self.raw).__name__} (a value computed outside the graph)"


class LoopIndexVar(PyVar):
    """The loop variable of a for-range loop (or a scalar computed from it by +, -, * and
    / with constants: `i + 1`, `n - 1 - i`, `t0 + i * dt`) while capture may stop
    unrolling that loop early (Note [stopping the unrolling early], reroll.py). Indexing,
    affine arithmetic and array math (Note [loop-derived scalars], affine.py) read `raw`;
    any other read of `value` (a branch, a call) marks the loop `opaque`: its later
    iterations might differ in ways the first ones did not show, so all are translated.
    `chain` is the arithmetic applied to i, replayed exactly for the value after the loop."""

    __slots__ = ("raw", "it", "mul", "add", "chain")

    def __init__(self, raw, it: "IteratorVar", mul=1, add=0, chain: tuple = ()) -> None:
        self.raw, self.it, self.mul, self.add, self.chain = raw, it, mul, add, chain
        self.source = None

    @property
    def value(self) -> Any:
        self.it.opaque = True
        return self.raw

    def step(self, op: str, c, left: bool) -> "LoopIndexVar":
        """self <op> c (left: self is the left operand), still affine in the loop
        variable; the caller checked that op and c keep it so."""
        s = (op, c, left)
        return LoopIndexVar(replay((s,), self.raw), self.it, _affine_step(self.mul, s, True),
                            _affine_step(self.add, s, False), self.chain + (s,))

    def affine(self, mul: int, add: int) -> "LoopIndexVar":
        """mul*self + add, still known as a function of the loop variable."""
        return self.step("*", mul, True).step("+", add, True)


def replay(chain: tuple, x):
    """The arithmetic `chain` of a LoopIndexVar applied to x as Python does it."""
    for op, c, left in chain:
        a, b = (x, c) if left else (c, x)
        x = a + b if op == "+" else a - b if op == "-" else a * b if op == "*" else a / b
    return x


def _affine_step(k, s: tuple, is_mul: bool):
    """The coefficient k (of i when is_mul, else the constant term) after step s."""
    op, c, left = s
    if op == "+":
        return k if is_mul else k + c
    if op == "-":
        return (k if is_mul else k - c) if left else (-k if is_mul else c - k)
    if op == "*":
        return k * c
    return k / c


class StopVar(PyVar):
    """An int argument, VALUE-guarded, whose reads are counted: when its only use is the
    stop of a range() whose loop capture rolled and stopped unrolling early, that guard
    is relaxed to the range of values the graph is right for (relax.py)."""

    __slots__ = ("raw", "reads")

    def __init__(self, raw: int, source: tuple) -> None:
        self.raw, self.source, self.reads = raw, source, 0

    @property
    def value(self) -> Any:
        self.reads += 1
        return self.raw


class FinalIndexVar(PyVar):
    """The loop variable (or mul*i + add) after a loop whose unrolling stopped early: its
    value depends on the trip count, so reading it keeps the trip count's VALUE guard."""

    __slots__ = ("raw", "it")

    def __init__(self, raw: int, it: "IteratorVar") -> None:
        self.raw, self.it, self.source = raw, it, None

    @property
    def value(self) -> Any:
        self.it.final_read = True
        return self.raw


class TupleVar(Var):
    __slots__ = ("items",)

    def __init__(self, items) -> None:
        self.items = tuple(items)

    def describe(self) -> str:
        return f"tuple of {len(self.items)}"


class ListVar(Var):
    """A list. `source` is set for a list that came from outside: mutating it would be a
    side effect on the caller's object, which the translator does not replay."""

    __slots__ = ("items", "source")

    def __init__(self, items, source: tuple | None = None) -> None:
        self.items = list(items)
        self.source = source

    def describe(self) -> str:
        return f"list of {len(self.items)}"


class DictVar(Var):
    __slots__ = ("items", "source")

    def __init__(self, items: dict, source: tuple | None = None) -> None:
        self.items = dict(items)
        self.source = source

    def describe(self) -> str:
        return f"dict of {len(self.items)}"


class ObjectVar(Var):
    __slots__ = ("value", "source")

    def __init__(self, value: Any, source: tuple | None) -> None:
        self.value = value
        self.source = source

    def describe(self) -> str:
        return f"{type(self.value).__qualname__} object"


class FunctionVar(Var):
    """A plain Python function (guarded by identity) whose code the translator inlines."""

    __slots__ = ("fn", "source")

    def __init__(self, fn: Any, source: tuple | None) -> None:
        self.fn = fn
        self.source = source

    def describe(self) -> str:
        return f"function {self.fn.__qualname__}"


class NestedFunctionVar(Var):
    """A function created while translating (def/lambda/comprehension in 3.11)."""

    __slots__ = ("code", "defaults", "kwdefaults", "closure", "globals_src", "globals")

    def __init__(self, code, defaults, kwdefaults, closure, frame_globals, globals_src) -> None:
        self.code = code
        self.defaults = tuple(defaults)
        self.kwdefaults = dict(kwdefaults)
        self.closure = tuple(closure)
        self.globals = frame_globals
        self.globals_src = globals_src

    def describe(self) -> str:
        return f"function {self.code.co_qualname}"


class BoundMethodVar(Var):
    """`obj.name` where name is a method: `func` is a FunctionVar/NestedFunctionVar for
    user objects, or a str naming an ndarray/builtin method."""

    __slots__ = ("self_var", "func")

    def __init__(self, self_var: Var, func: Any) -> None:
        self.self_var = self_var
        self.func = func

    def describe(self) -> str:
        name = self.func if isinstance(self.func, str) else self.func.describe()
        return f"method {name} of {self.self_var.describe()}"


class IteratorVar(Var):
    __slots__ = ("items", "pos", "generator", "marks", "opaque", "truncated", "snapshot",
                 "final_read")

    def __init__(self, items, generator: str | None = None) -> None:
        self.items = items  # a list (possibly a live ListVar.items) of Vars
        self.pos = 0
        # For a loop over a range: (the range, the graph's length at each FOR_ITER),
        # the iterations' boundaries that capture/reroll.py rolls back into a loop node.
        self.marks: tuple | None = None
        self.opaque = False  # the loop variable was read other than as an index (LoopIndexVar)
        self.truncated = False  # its later iterations were not translated (reroll.py)
        self.snapshot = None  # the frame at the start of an iteration, to compare with the next
        self.final_read = False  # the loop variable's value after a truncated loop was read
        # The qualname of the generator function whose values these are (Note [generators
        # run eagerly]): such an iterator has no value outside the graph, since plain
        # Python would need the suspended generator itself.
        self.generator = generator

    def describe(self) -> str:
        return f"generator {self.generator}" if self.generator else "iterator"

    def next(self) -> Var | None:
        if self.pos >= len(self.items):
            return None
        v = self.items[self.pos]
        self.pos += 1
        return v


class CellVar(Var):
    """A closure cell. A cell of the captured function (or of an inlined real function)
    is read lazily through `loader`, which wraps and guards the real contents."""

    __slots__ = ("contents", "loader", "name", "external")

    def __init__(self, contents: Any = UNBOUND, loader=None, name: str = "") -> None:
        self.contents = contents
        self.loader = loader
        self.name = name
        self.external = loader is not None  # a real cell: writing it is a side effect

    def get(self) -> Any:
        if self.contents is UNBOUND and self.loader is not None:
            self.contents = self.loader()
            self.loader = None
        return self.contents
