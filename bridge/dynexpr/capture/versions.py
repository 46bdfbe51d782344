"""The one place that looks at the running CPython's version: it picks the symbolic
opcode table (opcodes31x.Translator) and the resume interpreter's table
(concrete31x.Run). Every other module of capture/ is version-neutral or belongs to one
version (opcodes31x.py, concrete31x.py); adding a CPython version is one more pair of
those files and one more branch here.
"""

from __future__ import annotations

import sys

from .errors import graph_break

VERSION = sys.version_info[:2]

if VERSION == (3, 11):
    from .concrete311 import Run311 as Run
    from .opcodes311 import Translator
elif VERSION == (3, 12):
    from .concrete312 import Run312 as Run
    from .opcodes312 import Translator
else:
    # 3.13; on a later version nothing is captured (translator() says why) and the resume
    # interpreter, which then never runs, has 3.13's table.
    from .concrete313 import Run313 as Run
    from .opcodes313 import Frame313

    Translator = Frame313 if VERSION == (3, 13) else None

def translator() -> type:
    """The frame class (symbolic opcode table) of this interpreter."""
    if Translator is None:
        graph_break(
            f"dynexpr's capture supports CPython 3.11 to 3.13, not {VERSION[0]}.{VERSION[1]}"
        )
    return Translator
