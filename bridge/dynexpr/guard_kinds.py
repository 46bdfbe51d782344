"""dynexpr.guard_kinds — the guard kinds, listed once.

Note [guard kinds are listed once]
A guard kind is known to two checkers: dynexpr.guards (the Python reference) and the C
extension's GuardSet (bridge/native/guards.c, the per-call check). Both take their names
and codes from TABLE below: guards.py imports KINDS and PAIR_KINDS, and the build runs
this file as a script (meson.build: `python guard_kinds.py dx_guard_kinds.h`) to write the
C table that guards.c's enum and name lookup are made from. A kind's code is its index.

To add a kind: a row here, its predicate in guards.py (_predicate) and, when `native`,
its case in guards.c's check_one (and its `expected` parsing in GuardSet_new). A kind
with native False is checked in Python only: the C GuardSet refuses a guard list that
holds one, and that entry's guards run in Python (captured._native_guards).

This module imports nothing: the build runs it before anything of dynexpr exists.
"""

import sys

# name, pair (the source is a pair of sources), native (checked in C as well)
TABLE = (
    ("TYPE", False, True),
    ("DTYPE", False, True),
    ("NDIM", False, True),
    ("SHAPE", False, True),
    ("STRIDES_CLASS", False, True),
    ("VALUE", False, True),
    ("ID", False, True),
    ("LEN", False, True),
    ("DICT_KEYS", False, True),
    ("WRITEABLE", False, True),
    ("ALIAS", True, True),
    ("DYN_SHAPE", False, True),  # expected: per dim an int, or (lo, hi) for a dynamic one
    ("DIM_EQ", True, True),
    ("CMP", False, False),  # expected: (op, constant, left, outcome); a comparison's outcome
)

KINDS = tuple(name for name, _, _ in TABLE)
PAIR_KINDS = tuple(name for name, pair, _ in TABLE if pair)
NATIVE_KINDS = tuple(name for name, _, native in TABLE if native)


def c_header() -> str:
    """TABLE as the C X-macro DX_GUARD_KINDS(X): X(name, pair, native) per kind, in code
    order."""
    rows = "".join(f"  X({name}, {int(pair)}, {int(native)}) \\\n" for name, pair, native in TABLE)
    return ("/* Generated from bridge/dynexpr/guard_kinds.py by the build: do not edit\n"
            " * (Note [guard kinds are listed once]). */\n"
            "#ifndef DX_GUARD_KINDS_H\n#define DX_GUARD_KINDS_H\n"
            f"#define DX_GUARD_KINDS(X) \\\n{rows}\n#endif\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python guard_kinds.py OUTPUT.h")
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        out.write(c_header())
