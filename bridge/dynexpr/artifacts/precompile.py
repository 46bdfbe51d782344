"""python -m dynexpr precompile MANIFEST -o BUNDLE [-j N] [--isa LIST]

Builds every spec of the manifest (manifest.py) for every ISA level (isa.py), each spec
in a process of its own (worker.py), N at a time, with a progress bar; prints a table of
what was built and writes the bundle (bundle.py). Exits 1, naming each function, when a
spec breaks the graph, fails to compile or computes something else than the plain
function; no bundle is written then. Units are compiled into the configured cache
(DYNEXPR_CACHE_DIR), so a second run compiles only what changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import bundle, isa, manifest, specs


def add_parser(sub) -> None:
    p = sub.add_parser("precompile", help="compile a manifest's specialisations into a "
                                          "bundle (python -m dynexpr precompile M -o B)")
    p.add_argument("manifest", help="the manifest of specialisations (TOML)")
    p.add_argument("-o", "--output", required=True, metavar="BUNDLE",
                   help="the bundle directory to write")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                   help="compile this many specs at once (default: one per core)")
    p.add_argument("--isa", default=",".join(isa.DEFAULT),
                   help=f"comma-separated ISA levels (default {','.join(isa.DEFAULT)}; "
                        f"known: {', '.join(isa.LEVELS)})")


def _job(kind: str, level: str, payload: dict | None) -> dict:
    env = dict(os.environ, DYNEXPR_ISA=level, DYNEXPR_BACKGROUND_COMPILE="0",
               DYNEXPR_PLAIN_FALLBACK="0")
    env.pop("DYNEXPR_ARTIFACTS", None)  # build from source, not from another bundle
    env.pop("DYNEXPR_RECORD", None)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "result.json")
        proc = subprocess.run(
            [sys.executable, "-m", "dynexpr.artifacts.worker", kind, out],
            input=json.dumps(payload or {}), capture_output=True, text=True, env=env,
            check=False)
        try:
            with open(out) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            return {"ok": False, "problems": [f"the worker process died (exit "
                                              f"{proc.returncode}): {' / '.join(tail)}"]}


def _bar(total: int, desc: str):
    try:
        from tqdm import tqdm
    except ImportError:  # pip install dynexpr[precompile] for a bar
        return None
    return tqdm(total=total, desc=desc, unit="spec", file=sys.stderr)


def _spec_text(spec: dict) -> str:
    args = []
    for a in spec.get("args", []):
        if "dtype" in a:
            a = dict(a, shape=[[d.get("min", 2), d.get("max"), 0] if isinstance(d, dict)
                               else d for d in a["shape"]], layout=a.get("layout", "C"))
        elif a.get("none"):
            a = dict(a, value=None)
        args.append(specs.arg_text(a))
    return ", ".join(args)


def run(manifest_path: str, output: str, jobs: int, levels: list[str]) -> int:
    t0 = time.perf_counter()
    specs = manifest.load(manifest_path)
    if not specs:
        print(f"dynexpr precompile: {manifest_path} holds no [[spec]]", file=sys.stderr)
        return 1
    isa.check_levels(levels)
    jobs = max(1, jobs)
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        prepared = dict(zip(levels, ex.map(lambda lv: _job("prepare", lv, None), levels)))
        bad = {lv: p for lv, p in prepared.items() if not p.get("ok")}
        for lv, p in bad.items():
            print(f"dynexpr precompile: cannot build for {lv}: {'; '.join(p['problems'])}",
                  file=sys.stderr)
        if bad:
            return 1
        for lv, p in prepared.items():
            want = isa.LEVELS[lv][2]
            note = "" if p["hwy_target"] == want else f" (expected {want})"
            print(f"{lv}: Highway target {p['hwy_target']}{note}; {p['compiler']}; "
                  f"prelude + runtime {p['seconds']:.1f} s")
        todo = [(lv, s) for lv in levels for s in specs]
        bar = _bar(len(todo), "precompile")
        results = []

        def one(item):
            lv, spec = item
            r = _job("build", lv, spec)
            r.update(isa=lv, spec=spec)
            if bar is not None:
                bar.update(1)
            else:
                print(f"  {'built' if r['ok'] else 'FAILED'} {spec['function']} ({lv})",
                      file=sys.stderr)
            return r

        results = list(ex.map(one, todo))
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t0
    print(f"{'function':32} {'specialisation':40} {'isa':10} {'units':>5} {'compiles':>8} "
          f"{'compile s':>9}")
    for r in results:
        status = "" if r["ok"] else "  FAILED"
        print(f"{r['spec']['function']:32} {_spec_text(r['spec'])[:40]:40} {r['isa']:10} "
              f"{len(r.get('units', [])):>5} {r.get('compiles', 0):>8} "
              f"{r.get('compile_seconds', 0.0):>9.2f}{status}")
    failed = [r for r in results if not r["ok"]]
    total = sum(r.get("compile_seconds", 0.0) for r in results) + sum(
        p["seconds"] for p in prepared.values())
    print(f"wall {wall:.1f} s with -j {jobs}; the compiles and preludes alone sum to "
          f"{total:.1f} s")
    if failed:
        for r in failed:
            print(f"dynexpr precompile: {r['spec']['function']}({_spec_text(r['spec'])}) "
                  f"[{r['isa']}]: {'; '.join(r['problems'])}", file=sys.stderr)
        print(f"dynexpr precompile: {len(failed)} of {len(results)} failed; no bundle "
              "written", file=sys.stderr)
        return 1
    out = bundle.write(Path(output), prepared, results)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    signed = " (signed)" if (out / bundle.SIGNATURE).exists() else ""
    print(f"bundle {out}{signed}: {len(results)} specs, {size / 1e6:.1f} MB")
    return 0
