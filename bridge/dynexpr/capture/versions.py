"""The one place that looks at the running CPython's version: it picks the symbolic
opcode table (opcodes31x.Translator). Every other module of the translator is
version-neutral or belongs to one version (opcodes31x.py).
"""

from __future__ import annotations

import sys

from .errors import graph_break

VERSION = sys.version_info[:2]

if VERSION == (3, 11):
    from .opcodes311 import Translator
elif VERSION == (3, 12):
    from .opcodes312 import Translator
elif VERSION == (3, 13):
    from .opcodes313 import Translator
else:  # imports fine; the first translation says why nothing is captured
    Translator = None

def translator() -> type:
    """The frame class (symbolic opcode table) of this interpreter."""
    if Translator is None:
        graph_break(
            f"dynexpr's capture supports CPython 3.11 to 3.13, not {VERSION[0]}.{VERSION[1]}"
        )
    return Translator
