"""dynexpr.artifacts.isa — named ISA levels that precompiled units are built for, instead
of -march=native (which ties a unit to the CPU of the machine that compiled it).

DYNEXPR_ISA=<level> makes this process's cpu backend compile for that level (cxx.py's
flags); precompile sets it in the processes it starts. A bundle names the level of
its units and the CPU flags the level needs; a process loads a level only when
/proc/cpuinfo lists all of them.

Note [Highway 1.0.3 and ISA levels]
Highway 1.0.3 picks its static target from the compiler's predefined macros, and its
SSE4 and AVX2 targets also require PCLMUL and AES, which -march=x86-64-v2/v3/v4 do not
enable: plain -march=x86-64-v3 builds SSSE3 code. So each level adds -mpclmul -maes
(every CPU of these levels has both, and the level's `requires` lists them). What each
level gives is checked by precompile (it prints hwy::TargetName(HWY_STATIC_TARGET)):
v2 -> SSE4, v3 -> AVX2, v4 -> AVX3.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

_V2 = ("sse4_1", "sse4_2", "ssse3", "popcnt", "pclmulqdq", "aes")
_V3 = _V2 + ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")

# level -> (compiler flags, CPU flags it needs, Highway target it should give, rank)
LEVELS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str, int]] = {
    "x86-64-v2": (("-march=x86-64-v2", "-mpclmul", "-maes"), _V2, "SSE4", 2),
    "x86-64-v3": (("-march=x86-64-v3", "-mpclmul", "-maes"), _V3, "AVX2", 3),
    "x86-64-v4": (("-march=x86-64-v4", "-mpclmul", "-maes"), _V4, "AVX3", 4),
}
DEFAULT = ("x86-64-v3", "x86-64-v4")


def current() -> str:
    """The level this process compiles for ("native" unless DYNEXPR_ISA names one)."""
    return os.environ.get("DYNEXPR_ISA", "").strip() or "native"


def compile_flags() -> tuple[str, ...]:
    level = current()
    if level == "native":
        return ("-march=native",)
    if level not in LEVELS:  # a typo in the environment must not break `import dynexpr`
        warnings.warn(f"dynexpr: DYNEXPR_ISA={level!r} is not a level dynexpr knows; "
                      f"compiling for -march=native. Use one of {', '.join(LEVELS)}, or "
                      "unset it.", RuntimeWarning, stacklevel=2)
        return ("-march=native",)
    return LEVELS[level][0]


def check_levels(names: list[str]) -> list[str]:
    bad = [n for n in names if n not in LEVELS]
    if bad:
        raise ValueError(f"dynexpr: unknown ISA level {', '.join(bad)}; known: "
                         f"{', '.join(LEVELS)}")
    return names


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for ln in text.splitlines():
        if ln.startswith("flags"):
            return set(ln.partition(":")[2].split())
    return set()


def missing(requires: list[str] | tuple[str, ...], have: set[str] | None = None) -> list[str]:
    """The CPU flags of `requires` this CPU lacks ([]: it can run the level)."""
    have = cpu_flags() if have is None else have
    return [f for f in requires if f not in have]
