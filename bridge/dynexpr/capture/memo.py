"""Bounded caches of pure functions of a code object: the one kind of module-level
state that translation writes (Note [one session per translation] in session.py).

A Memo's value depends on its key alone (the instructions of a code object, its
exception table, whether it can be resumed), so it may be shared by every translation
on every thread: two threads that miss at once compute the same value, and either
store wins. Each dict operation is atomic under the GIL; `clear` when full only costs
recomputation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_MISSING = object()


class Memo:
    """fn(key), remembered for up to `limit` keys (then forgotten all at once)."""

    __slots__ = ("fn", "limit", "_data")

    def __init__(self, fn: Callable[[Any], Any], limit: int = 512) -> None:
        self.fn = fn
        self.limit = limit
        self._data: dict[Any, Any] = {}

    def __call__(self, key: Any) -> Any:
        hit = self._data.get(key, _MISSING)
        if hit is _MISSING:
            hit = self.fn(key)
            if len(self._data) > self.limit:
                self._data.clear()
            self._data[key] = hit
        return hit
