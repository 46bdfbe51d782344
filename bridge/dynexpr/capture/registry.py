"""Where the call dispatcher (calls.py) finds the handlers that it cannot import.

Note [handlers are registered]
calls.call dispatches every call the translator meets: to the NumPy tables (np_table),
the builtins and container methods (pybuiltins), dynexpr.cond (control), or inlining.
Those modules call back into calls.call themselves (np.vectorize-like callbacks,
map(), cond's branches, properties), so calls.py does not import them: each registers
its entry points here when it is imported, and translate.py imports all of them before
the first translation can start. The table is written at import only; a translation
only reads it. Adding a family of handlers is one more name in SLOTS, one
`@registry.register(name)` in its module, and one import in translate.py.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import InternalError

SLOTS = {
    "numpy_function": "value -> handler(tx, args, kwargs) or None (np_table)",
    "builtin_function": "value -> handler(tx, args, kwargs) or None (pybuiltins)",
    "known_call": "(tx, fn, args, kwargs) -> Var: any other known callable (pybuiltins)",
    "array_method": "(tx, array, name, args, kwargs) -> Var (np_table)",
    "container_method": "(tx, list/dict/str..., name, args, kwargs) -> Var (pybuiltins)",
    "cond": "(tx, args, kwargs) -> Var: dynexpr.cond (control)",
}
_handlers: dict[str, Callable] = {}


def register(slot: str) -> Callable[[Callable], Callable]:
    """Decorator: `fn` handles `slot` (a reload of its module registers it again)."""
    if slot not in SLOTS:
        raise ValueError(f"unknown handler slot {slot!r}; the slots are {sorted(SLOTS)}")

    def add(fn: Callable) -> Callable:
        _handlers[slot] = fn
        return fn

    return add


def handler(slot: str) -> Callable:
    fn = _handlers.get(slot)
    if fn is None:
        raise InternalError(f"dynexpr: no handler is registered for {slot!r} "
                            "(dynexpr.capture.translate imports the modules that register them)")
    return fn


def missing() -> list[str]:
    """Slots nobody registered (a test checks there are none)."""
    return [s for s in SLOTS if s not in _handlers]
