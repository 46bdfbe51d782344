"""dynexpr.artifacts.manifest — the manifest of specialisations (TOML) that
`python -m dynexpr precompile` builds and DYNEXPR_RECORD=path writes.

    # dynexpr manifest of specialisations
    [[spec]]
    function = "mypkg.model:step"          # module:qualname (a captured or plain function)
    backend = "cpu"
    mode = "default"
    args = [
      { name = "x", dtype = "float32", shape = [{ min = 2, max = 4096, example = 100 }, 3] },
      { name = "alpha", value = 0.5 },
    ]

An array argument is dtype + shape + layout ("C", "F" or "strided"); a dimension is an
extent, or a dynamic one: a table with its range (min, and max unless unbounded, as
mark_dynamic takes them) and the example extent precompile calls it with. A plain Python
argument is its value (`none = true` for None). `dynamic` (true/false) is capture's
option when the spec sets it.

Reading is tomllib's; writing is by hand (the format above is all it writes). Recording
appends under an fcntl lock on `<path>.lock` and skips a spec already in the file, so
processes of one test suite can record into one manifest at once.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import tomllib
from pathlib import Path
from typing import Any

HEADER = "# dynexpr manifest of specialisations (python -m dynexpr precompile)\n"
LAYOUTS = ("C", "F", "strided")


class ManifestError(ValueError):
    """A manifest that is not what this module reads: names the file and the spec."""


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()
                                if x is not None) + " }"
    raise TypeError(f"dynexpr manifest: cannot write {v!r} ({type(v).__name__}) as TOML")


def spec_text(spec: dict) -> str:
    """One [[spec]] table."""
    lines = ["[[spec]]"]
    for k in ("function", "backend", "mode", "dynamic", "fullgraph", "fuse"):
        if spec.get(k) is not None:
            lines.append(f"{k} = {_toml_value(spec[k])}")
    lines.append("args = [")
    for a in spec.get("args", []):
        lines.append(f"  {_toml_value(a)},")
    lines.append("]")
    return "\n".join(lines) + "\n"


def dumps(specs: list[dict]) -> str:
    return HEADER + "".join("\n" + spec_text(s) for s in specs)


def _drop_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [_drop_none(v) for v in obj]
    return obj


def canonical(spec: dict) -> str:
    """A spec's identity (two recordings of one specialisation are one spec; a None
    is what TOML leaves out)."""
    return json.dumps(_drop_none(spec), sort_keys=True)


def load(path: str | os.PathLike) -> list[dict]:
    """The specs of a manifest file, checked (ManifestError names what is wrong)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as e:
        raise ManifestError(f"dynexpr: cannot read the manifest {p}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"dynexpr: the manifest {p} is not valid TOML: {e}") from None
    specs = data.get("spec", [])
    if not isinstance(specs, list):
        raise ManifestError(f"dynexpr: the manifest {p}: `spec` must be an array of tables "
                            "([[spec]])")
    for n, s in enumerate(specs, 1):
        check(s, f"{p}: spec {n}")
    return specs


def check(spec: Any, where: str) -> None:
    def bad(why: str):
        raise ManifestError(f"dynexpr: manifest {where}: {why}")

    if not isinstance(spec, dict):
        bad("is not a table")
    fn = spec.get("function")
    if not isinstance(fn, str) or ":" not in fn:
        bad(f"function must be 'module:qualname', got {fn!r}")
    args = spec.get("args", [])
    if not isinstance(args, list):
        bad("args must be an array")
    for i, a in enumerate(args):
        if not isinstance(a, dict):
            bad(f"argument {i} is not a table")
        if "dtype" in a:
            if not isinstance(a.get("shape"), list):
                bad(f"argument {i} ({a.get('name', '?')}): an array needs a shape")
            for d in a["shape"]:
                if isinstance(d, dict):
                    if not isinstance(d.get("min", 0), int) or "example" not in d:
                        bad(f"argument {i}: a dynamic dimension needs min and example, "
                            f"got {d}")
                elif not isinstance(d, int) or d < 0:
                    bad(f"argument {i}: extent {d!r} is not a whole number >= 0")
            if a.get("layout", "C") not in LAYOUTS:
                bad(f"argument {i}: layout must be one of {LAYOUTS}, got {a['layout']!r}")
        elif not ("value" in a or a.get("none") or "type" in a):
            bad(f"argument {i}: give dtype+shape (an array), value, or none = true")


def append(path: str | os.PathLike, spec: dict) -> bool:
    """Adds `spec` to the manifest at `path` unless it holds it already; True if added.
    Safe with processes appending at once (an fcntl lock beside the file)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(p) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        have = load(p) if p.exists() else []
        key = canonical(spec)
        if any(canonical(s) == key for s in have):
            return False
        new = not p.exists() or p.stat().st_size == 0
        with open(p, "a") as fh:
            fh.write((HEADER if new else "") + "\n" + spec_text(spec))
            fh.flush()
            os.fsync(fh.fileno())
        return True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
