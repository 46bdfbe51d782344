"""Graph breaks: the one way out of the translator.

Every construct the translator does not support calls `graph_break(reason)`. The frame
loop attaches where it happened (file, line, source text), innermost frame first, so
the report points at the user's line even inside an inlined helper.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass
from typing import NoReturn


@dataclass(frozen=True)
class BreakReason:
    """Why and where translation stopped. `stack` holds (file, line, function) of the
    frames that were inlined to get there, outermost first."""

    reason: str
    file: str = "?"
    line: int = 0
    source: str = ""
    stack: tuple = ()

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        text = f"\n    {self.source}" if self.source else ""
        return f"{self.reason}\n  at {where}{text}"


class Unsupported(Exception):
    """Raised by graph_break; caught by the translator, never seen by users."""

    def __init__(self, reason: str, final: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        # final: resuming after this break would only meet it again (an argument of a
        # kind no graph takes): the call runs as plain Python from the start.
        self.final = final
        self.location: tuple | None = None  # (file, line)
        self.stack: list = []
        self.guards: list = []

    def at(self, file: str, line: int | None, function: str) -> None:
        if self.location is None:
            self.location = (file, line or 0)
        self.stack.insert(0, (file, line or 0, function))

    def to_reason(self) -> BreakReason:
        file, line = self.location or ("?", 0)
        source = linecache.getline(file, line).strip() if line else ""
        return BreakReason(self.reason, file, line, source, tuple(self.stack))


class ShapeQuestion(Unsupported):
    """NumPy refused stand-ins (infer.ask). With dynamic dimensions in play the error may
    be about a sentinel rather than the user's shapes: the frame loop then asks the
    translation's session to specialize them (Session.specialized, with `why`)
    before this break is believed."""

    def __init__(self, reason: str, why: str) -> None:
        super().__init__(reason)
        self.why = why


class GraphBreakError(RuntimeError):
    """capture(fullgraph=True) met code it cannot capture."""

    def __init__(self, reason: BreakReason) -> None:
        super().__init__(
            f"dynexpr: fullgraph=True, but the function cannot be captured whole: "
            f"{reason}\n  remove fullgraph=True to run this part as plain Python"
        )
        self.reason = reason


class InternalError(RuntimeError):
    """A bug in dynexpr itself (not in the user's code)."""


class Untruncate(Exception):
    """A loop whose unrolling stopped early cannot stand for its untranslated iterations:
    the translation runs again with every iteration (Note [stopping the unrolling
    early], truncate.py)."""


def graph_break(reason: str, final: bool = False) -> NoReturn:
    raise Unsupported(reason, final)


@dataclass
class Budget:
    """Limits that keep translation short: unrolled loops, inlining depth."""

    instructions: int = 200_000
    loop_iterations: int = 1_000
    inline_depth: int = 24
    # Calls of a function already being inlined (recursion) that do array work. Each is
    # unrolled and its array ops inferred again, so branching recursion (fib) costs as its
    # call tree, not its code: past this many the call is a graph break and plain Python
    # runs it. (Recursion on Python scalars only folds to a constant: not counted.)
    recursive_calls: int = 256
    graph_values: int = 20_000
    used_instructions: int = 0
    used_iterations: int = 0
    used_recursive_calls: int = 0
