"""python -m dynexpr cache ls | info KEY | clear | why-miss MODULE:FN --args-from M:F

    ls        every entry the cache's index records (function, arguments, units) and
              the units' total size
    info KEY  one unit (a key or a prefix of one, >= 6 characters): its files, calling
              convention and the entries that use it; or one function (module:qualname):
              its entries with their guards
    clear     removes everything in the cache directory (units, index, prelude, runtime)
    why-miss  for one call of a function (arguments from MAKE_ARGS()), the nearest entry
              the index holds and, guard by guard, how the call differs from it
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .. import cache
from . import record, specs


def add_parser(sub) -> None:
    cp = sub.add_parser("cache", help="look into the kernel cache: ls, info, clear, why-miss")
    cs = cp.add_subparsers(dest="cache_command", required=True)
    cs.add_parser("ls", help="list the cached entries and units")
    info = cs.add_parser("info", help="one unit (KEY or a prefix) or one function "
                                      "(module:qualname)")
    info.add_argument("key")
    cs.add_parser("clear", help="remove every cached unit, index record, prelude and "
                                "runtime library")
    wm = cs.add_parser("why-miss", help="why a call does not hit the cache: its guard-by-"
                                        "guard difference from the nearest cached entry")
    wm.add_argument("function", help="module:function (or module:Class.method)")
    wm.add_argument("--args-from", required=True, metavar="MODULE:MAKE_ARGS")


def run(ns, load, split_args) -> int:
    cmd = ns.cache_command
    if cmd == "ls":
        return ls()
    if cmd == "info":
        return info(ns.key)
    if cmd == "clear":
        return clear()
    fn = load(ns.function, "the function")
    make = load(ns.args_from, "--args-from")
    if not callable(make):
        raise SystemExit(f"dynexpr: --args-from {ns.args_from} is not callable")
    args, kwargs = split_args(make())
    return why_miss(fn, args, kwargs)


# ----------------------------------------------------------------------------- helpers
def _size(path: Path) -> int:
    total = 0
    for top, _, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(top, n)).st_size
            except OSError:
                pass
    return total


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _unit_state(key: str) -> str:
    return "cached" if (cache.unit_dir(key) / "unit.so").is_file() else "missing"


# ---------------------------------------------------------------------------- commands
def ls() -> int:
    d = cache.cache_dir()
    recs = record.records()
    print(f"dynexpr cache {d.parent} ({_human(_size(d))})")
    if not recs:
        print("no entries recorded (entries are recorded when a captured function "
              "compiles one)")
    now = time.time()
    for r in recs:
        units = ", ".join(f"{k[:12]} ({_unit_state(k)})" for k in r.get("units", [])) or "-"
        age = now - r.get("time", now)
        print(f"{r['function']}({', '.join(specs.arg_text(a) for a in r['args'])})")
        print(f"    {r.get('kind', 'graph')}, backend {r.get('backend')}, "
              f"{len(r.get('guards', []))} guards, units: {units}, "
              f"recorded {age / 3600:.1f} h ago")
    units = list((d / "units").glob("*/*/unit.so"))
    print(f"{len(recs)} entries, {len(units)} units "
          f"({_human(sum(_size(u.parent) for u in units))})")
    return 0


def _find_unit(prefix: str) -> list[Path]:
    base = cache.cache_dir() / "units"
    if len(prefix) < 2:
        return []
    return sorted(p for p in (base / prefix[:2]).glob(prefix + "*") if p.is_dir()
                  and not p.name.startswith("."))


def info(key: str) -> int:
    if ":" in key:  # a function
        recs = record.records(key)
        if not recs:
            print(f"dynexpr: no cached entry of {key} in {cache.cache_dir().parent}",
                  file=sys.stderr)
            return 1
        for n, r in enumerate(recs, 1):
            print(f"entry {n}: {key}({', '.join(specs.arg_text(a) for a in r['args'])})")
            for g in r.get("guards", []):
                print(f"    guard {g['text']}")
            for k in r.get("units", []):
                print(f"    unit {k} ({_unit_state(k)})")
        return 0
    if len(key) < 6:
        raise SystemExit("dynexpr: cache info: give at least 6 characters of a unit key, "
                         "or a function as module:qualname")
    found = _find_unit(key)
    if len(found) != 1:
        what = "no unit" if not found else f"{len(found)} units"
        raise SystemExit(f"dynexpr: cache info: {what} with a key starting {key!r} in "
                         f"{cache.cache_dir()}; `python -m dynexpr cache ls` lists them")
    d = found[0]
    art = cache.lookup(d.name)
    print(f"unit {d.name}")
    print(f"    directory {d} ({_human(_size(d))})")
    print(f"    verified: {'yes' if art is not None else 'NO (it will be rebuilt)'}")
    meta = art.meta if art is not None else {}
    if meta:
        print(f"    inputs (dtype code, ndim, written): {meta.get('inputs')}")
        print(f"    outputs (dtype code, extents): {meta.get('outputs')}")
    with_src = d / "unit.cpp"
    if with_src.is_file():
        print(f"    source {with_src} ({len(with_src.read_text().splitlines())} lines)")
    users = [r for r in record.records() if d.name in r.get("units", [])]
    for r in users:
        print(f"    used by {r['function']}({', '.join(specs.arg_text(a) for a in r['args'])})")
    if not users:
        print("    used by no recorded entry")
    return 0


def clear() -> int:
    d = cache.cache_dir()
    size = _size(d)
    removed = 0
    for e in os.scandir(d):
        p = Path(e.path)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed += 1
    cache.reset()
    print(f"dynexpr: cleared the cache {d.parent} ({_human(size)})")
    return 0


def why_miss(fn: Any, args: tuple, kwargs: dict) -> int:
    from ..capture.calls import BindError, bind_call

    plain = getattr(fn, "__dynexpr_wrapped__", fn)
    plain = getattr(plain, "__func__", plain)
    code = getattr(plain, "__code__", None)
    if code is None:
        raise SystemExit(f"dynexpr: why-miss: {fn!r} is not a Python function")
    try:
        bound = bind_call(plain, args, kwargs)
    except BindError as e:
        raise SystemExit(f"dynexpr: why-miss: the arguments do not fit {plain.__qualname__}: "
                         f"{e}") from None
    name = record.fn_id(plain)
    recs = record.records(name)
    if not recs:
        print(f"{name}: no cached entry in {cache.cache_dir().parent}: the first call "
              "translates and compiles one (no entry of this function was recorded there)")
        return 0
    best, lines = specs.nearest(recs, bound, plain, code.co_varnames)
    call = ", ".join(specs.arg_text(a) for a in specs.arg_specs(bound, code.co_varnames, ()))
    print(f"call: {name}({call})")
    print(f"nearest of {len(recs)} cached entries: "
          f"{name}({', '.join(specs.arg_text(a) for a in best['args'])})")
    if not lines:
        missing = [k for k in best.get("units", []) if _unit_state(k) == "missing"]
        if missing:
            print(f"every guard holds, but its units {', '.join(k[:12] for k in missing)} "
                  "are not in the cache: this call compiles them again")
            return 0
        print("every guard holds: this call hits the cache (no miss)")
        return 0
    print(f"it misses on {len(lines)} guard{'s' if len(lines) > 1 else ''}:")
    for ln in lines:
        print(f"    {ln}")
    return 0
