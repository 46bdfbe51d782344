"""dynexpr.artifacts.bundle — a directory of precompiled units that a process loads
instead of compiling (issue 15 parts 3-4).

    BUNDLE/bundle.json                   the index: stamps, ISA levels, units, specs
    BUNDLE/<level>/rt/<k>/libdynexpr_rt.so
    BUNDLE/<level>/units/<kk>/<key>/     unit.so, meta.json, unit.cpp
    BUNDLE/SHA256SUMS                    sha256 of every other file ("digest  path")
    BUNDLE/SIGNATURE                     HMAC-SHA256 of SHA256SUMS (DYNEXPR_BUNDLE_KEY)

Note [bundles]
A bundle is found by what a translation produces, not by the toolchain: a unit is
indexed by its backend and source (cxx.source_key), so a process that translates the
same graph finds it without asking a compiler (there may be none). What must agree is
checked once, at load: the ABI version and the hash of the headers the units were
generated against (the installed package's), and the ISA level: of the bundle's levels,
the best one whose CPU flags (isa.LEVELS) this CPU has is used; none: the bundle is
refused. Before anything of it is mapped, every file is checked against SHA256SUMS
(and SHA256SUMS against SIGNATURE when signed): one changed byte refuses the whole
bundle. A unit's file is checked again by its stat signature just before it is loaded
(cache.lookup), so a file replaced after the check is not mapped either. Units link the
runtime library through an $ORIGIN-relative rpath, and the process loads the bundle's
runtime library itself first (runtime._runtime_lib), so a bundle works wherever it is
copied. A call the bundle does not cover compiles where a compiler exists, else runs
with NumPy, with one warning naming the specialisation and how it differs from the
nearest one in the bundle (record.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import time
import warnings
from pathlib import Path

from .. import cache
from ..toolchain import abi_version, headers_hash, source_dirs
from . import isa

FORMAT = "dynexpr-bundle-1"
SUMS, SIGNATURE, INDEX = "SHA256SUMS", "SIGNATURE", "bundle.json"
KEY_ENV = "DYNEXPR_BUNDLE_KEY"


class BundleError(RuntimeError):
    """A bundle that must not be loaded: names the bundle, the problem and the way out."""


# --------------------------------------------------------------------------- writing
def write(out: Path, prepared: dict[str, dict], built: list[dict]) -> Path:
    """Writes the bundle of `built` jobs ({"isa", "spec", "units", "guards", ...}) made
    with the levels' `prepared` toolchains; published by rename (a reader never sees half
    a bundle). Returns its directory."""
    from .. import cxx

    out = Path(out).absolute()
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    levels: dict[str, dict] = {}
    for level, info in prepared.items():
        rt = Path(info["runtime"])
        rel_rt = Path(level) / "rt" / rt.parent.name / rt.name
        (tmp / rel_rt).parent.mkdir(parents=True)
        shutil.copy2(rt, tmp / rel_rt)
        levels[level] = {"flags": info["flags"], "requires": list(isa.LEVELS[level][1]),
                         "hwy_target": info["hwy_target"], "compiler": info["compiler"],
                         "runtime": str(rel_rt), "units": {}}
    specs = []
    for job in built:
        level, units = job["isa"], levels[job["isa"]]["units"]
        for key in job["units"]:
            if key in units:
                continue
            src = cache.unit_dir(key)
            rel = Path(level) / "units" / key[:2] / key
            shutil.copytree(src, tmp / rel)
            source = (src / "unit.cpp").read_text()
            units[key] = {"dir": str(rel), "source_key": cxx.source_key(source)}
        specs.append({"function": job["spec"]["function"], "isa": level,
                      "args": job["args"], "guards": job["guards"], "units": job["units"]})
    any_info = next(iter(prepared.values()))
    index = {"format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "abi": any_info["abi"], "headers": any_info["headers"], "isas": levels,
             "specs": specs}
    (tmp / INDEX).write_text(json.dumps(index, indent=1))
    seal(tmp)
    if out.exists():
        if not (out / INDEX).is_file() and any(out.iterdir()):
            shutil.rmtree(tmp, ignore_errors=True)
            raise BundleError(f"dynexpr: precompile: {out} exists and is not a bundle; "
                              "give -o a new or empty directory")
        shutil.rmtree(out)
    os.rename(tmp, out)
    return out


def _files(root: Path) -> list[str]:
    out = []
    for top, dirs, names in os.walk(root):
        dirs.sort()
        for n in sorted(names):
            rel = os.path.relpath(os.path.join(top, n), root)
            if rel not in (SUMS, SIGNATURE):
                out.append(rel)
    return out


def _sha256(path: Path) -> str:
    return cache.file_sha256(path)


def seal(root: Path) -> None:
    """Writes SHA256SUMS over every file of the bundle, and SIGNATURE when
    DYNEXPR_BUNDLE_KEY is set (also after editing a bundle on purpose)."""
    root = Path(root)
    text = "".join(f"{_sha256(root / rel)}  {rel}\n" for rel in _files(root))
    (root / SUMS).write_text(text)
    (root / SIGNATURE).unlink(missing_ok=True)
    key = os.environ.get(KEY_ENV)
    if key:
        (root / SIGNATURE).write_text(_mac(key, text.encode()) + "\n")


def _mac(key: str, data: bytes) -> str:
    return hmac.new(key.encode(), data, hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- loading
_loaded: list[dict] = []  # the loaded bundles: {"path", "isa", "specs"}


def loaded() -> list[dict]:
    return list(_loaded)


def verify(root: Path) -> dict:
    """The index of the bundle at root once every file verified (BundleError if not)."""
    def refuse(why: str, way_out: str = "rebuild it with `python -m dynexpr precompile`"):
        raise BundleError(f"dynexpr: bundle {root}: {why}; it is not loaded. To use it, "
                          f"{way_out}.")

    try:
        text = (root / SUMS).read_text()
    except OSError as e:
        refuse(f"no readable {SUMS} ({e.strerror or e}): not a dynexpr bundle",
               "give the directory `python -m dynexpr precompile -o` wrote")
    key = os.environ.get(KEY_ENV)
    sig = root / SIGNATURE
    if sig.exists():
        if not key:
            refuse("it is signed, and DYNEXPR_BUNDLE_KEY is not set to check the signature",
                   "set DYNEXPR_BUNDLE_KEY to the key it was signed with")
        if not hmac.compare_digest(sig.read_text().strip(), _mac(key, text.encode())):
            refuse(f"its signature does not match {SUMS} with the key in "
                   "DYNEXPR_BUNDLE_KEY (a different key, or the bundle was changed)")
    elif key:
        refuse("it is not signed, and DYNEXPR_BUNDLE_KEY is set (only signed bundles are "
               "loaded then)", "sign it: run precompile with DYNEXPR_BUNDLE_KEY set")
    listed = {}
    for ln in text.splitlines():
        digest, _, rel = ln.partition("  ")
        listed[rel] = digest
    present = _files(root)
    for rel in present:
        if rel not in listed:
            refuse(f"{rel} is not listed in {SUMS} (a file was added after it was built)")
        if _sha256(root / rel) != listed[rel]:
            refuse(f"{rel} does not match its sha256 in {SUMS} (the file was changed after "
                   "the bundle was built)")
    gone = sorted(set(listed) - set(present))
    if gone:
        refuse(f"{gone[0]} is listed in {SUMS} but missing")
    index = json.loads((root / INDEX).read_text())
    if index.get("format") != FORMAT:
        refuse(f"its format is {index.get('format')!r}, this dynexpr reads {FORMAT!r}")
    inc, kern = source_dirs()
    if index["abi"] != abi_version(kern) or index["headers"] != headers_hash(inc, kern):
        refuse("it was built for another version of dynexpr's headers or ABI than the one "
               "installed here", "precompile it again with this version of dynexpr")
    return index


def choose_level(index: dict, root: Path, have: set[str] | None = None) -> str:
    """The best ISA level of the bundle this CPU runs (BundleError: none)."""
    levels = sorted(index["isas"], key=lambda n: -isa.LEVELS.get(n, ((), (), "", 0))[3])
    lacking = []
    for level in levels:
        miss = isa.missing(index["isas"][level]["requires"], have)
        if not miss:
            return level
        lacking.append(f"{level} needs {', '.join(miss)}")
    raise BundleError(f"dynexpr: bundle {root}: it holds units for ISA levels this CPU "
                      f"cannot run ({'; '.join(lacking)}); it is not loaded. Precompile "
                      f"for a level this CPU has too, e.g. --isa x86-64-v3")


def load(path: str | os.PathLike) -> str:
    """Verifies the bundle at `path` and makes this process use its units (Note
    [bundles]); returns the ISA level chosen. BundleError when it must not be loaded."""
    root = Path(path).absolute()
    index = verify(root)
    level = choose_level(index, root)
    info = index["isas"][level]
    fresh: dict[str, cache.Artifact] = {}
    for key, u in info["units"].items():
        d = root / u["dir"]
        meta = json.loads((d / "meta.json").read_text())
        fresh[key] = cache.Artifact(key, d, meta)
        cache.bundled_stat[str(d / cache.ARTIFACT)] = cache._signature(d / cache.ARTIFACT)
    for key, u in info["units"].items():
        cache.bundled_source[u["source_key"]] = key
    cache.bundled.update(fresh)
    if cache.bundle_runtime is None:
        rt = root / info["runtime"]
        cache.bundled_stat[str(rt)] = cache._signature(rt)
        cache.bundle_runtime = rt
    _loaded.append({"path": str(root), "isa": level,
                    "specs": [s for s in index["specs"] if s["isa"] == level]})
    return level


def load_from_env() -> None:
    """DYNEXPR_ARTIFACTS=path[:path...] at import: a bundle that cannot be loaded warns
    (the process runs as without it), never breaks `import dynexpr`."""
    for p in filter(None, os.environ.get("DYNEXPR_ARTIFACTS", "").split(os.pathsep)):
        try:
            load(p)
        except (BundleError, OSError, ValueError, KeyError) as e:
            warnings.warn(f"{e}" if isinstance(e, BundleError) else
                          f"dynexpr: DYNEXPR_ARTIFACTS: cannot load the bundle {p}: {e}",
                          RuntimeWarning, stacklevel=3)
