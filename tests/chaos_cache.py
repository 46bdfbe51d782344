"""Chaos test of the compile cache (issue 11): processes sharing one empty cache are
killed with SIGKILL at random points of their compiles, and every kind of artifact is
truncated or overwritten with garbage; after each fault a fresh process computes and is
compared with NumPy.

    python tests/chaos_cache.py --rounds 20          # the full run (about 15 minutes)
    python tests/chaos_cache.py --rounds 2 --quick   # what the pytest check runs

It prints one line of counts; every count must be 0 (exit status 1 otherwise):
wrong results, crashes (a process that died by itself), hangs (past --timeout), and
artifacts a process had mapped although they did not verify against their recorded
sha256. --quick compiles without the precompiled prelude (its build takes a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The child: computes one chain captured and with NumPy, goes through the persistent
# index too, then checks every cache file it has mapped against its recorded digest.
CHILD = r"""
import hashlib, json, os, sys
import numpy as np
import dynexpr
from dynexpr import cache, runtime
dynexpr.config.background_compile = False
c = float(sys.argv[1])
def chain(x, y):
    return np.tanh(x * c + y) * 0.5 - np.sqrt(np.abs(y)) + x * y
x = np.linspace(-2, 2, 3001, dtype=np.float32); y = np.cos(x)
want = chain(x, y)
def same(got):
    return bool(got.dtype == want.dtype and got.shape == want.shape
                and np.allclose(got, want, rtol=1e-5, atol=1e-6))
f = dynexpr.capture(chain)
ok = same(f(x, y))
rec = cache.index_get("chaos", repr(c))
if rec is not None:
    fn = runtime.load(rec["units"][0]) if rec.get("units") else None
    if fn is not None:
        ok = ok and same(fn(x, y)[0])
cache.index_put("chaos", repr(c),
                {"units": [runtime.plan(f.entries[0].translation.graph).key]})
root = str(cache.cache_dir())
bad = 0
for line in open("/proc/self/maps"):
    parts = line.split()
    if len(parts) < 6 or not parts[5].startswith(root):
        continue
    p, ino = parts[5], int(parts[4])
    if not os.path.exists(p) or os.stat(p).st_ino != ino:
        continue  # replaced since it was loaded: what was loaded verified then
    if p.endswith("unit.so"):
        d = os.path.dirname(p)
        good = cache.unit_digest(open(p, "rb").read(), open(d + "/meta.json", "rb").read())
        bad += good != open(d + "/unit.sha256").read().strip()
    else:
        bad += hashlib.sha256(open(p, "rb").read()).hexdigest() != open(p + ".sha256").read().strip()
print(json.dumps({"ok": ok, "unverified": bad}))
"""

KINDS = ("unit.so", "meta.json", "runtime", "pch", "toolchain.json", "index")


def artifacts(layout: Path, kind: str) -> list[Path]:
    pattern = {"unit.so": "units/*/*/unit.so", "meta.json": "units/*/*/meta.json",
               "runtime": "rt/*/libdynexpr_rt.so", "pch": "pch/*/prelude.hpp.gch",
               "toolchain.json": "toolchain.json", "index": "index/*.json"}[kind]
    return sorted(layout.glob(pattern))


def damage(path: Path, how: str, rng: random.Random) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # in place, as a crash or a full disk leaves a file
        if how == "truncate":
            fh.truncate(size // 2)
        else:
            fh.write(rng.randbytes(max(size, 64)))


class Chaos:
    def __init__(self, args) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.tmp = Path(tempfile.mkdtemp(prefix="dynexpr-chaos-"))
        self.root = self.tmp / "cache"
        self.prog = self.tmp / "child.py"
        self.prog.write_text(CHILD)
        self.env = dict(os.environ, DYNEXPR_CACHE_DIR=str(self.root))
        if args.quick:
            self.env["DYNEXPR_NO_PCH"] = "1"
        self.counts = {"runs": 0, "killed": 0, "faults": 0, "wrong": 0, "crashes": 0,
                       "hangs": 0, "unverified": 0}

    def start(self, c: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(self.prog), repr(c)], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    def finish(self, p: subprocess.Popen, killed: bool = False) -> None:
        try:
            out, err = p.communicate(timeout=self.args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            self.counts["hangs"] += 1
            return
        self.counts["runs"] += 1
        if killed and p.returncode == -signal.SIGKILL:
            self.counts["killed"] += 1
            return
        if p.returncode != 0:
            self.counts["crashes"] += 1
            print(f"crash ({p.returncode}):\n{err[-3000:]}", file=sys.stderr)
            return
        res = json.loads(out.strip().splitlines()[-1])
        self.counts["wrong"] += not res["ok"]
        self.counts["unverified"] += res["unverified"]

    def check(self, c: float) -> None:
        """A fresh process after a fault."""
        self.finish(self.start(c))

    def kill_round(self, c: float) -> None:
        """args.procs processes make the same first call; some are killed mid-way."""
        procs = [self.start(c) for _ in range(self.args.procs)]
        t0 = time.monotonic()
        plan = sorted((self.rng.uniform(0.3, self.args.kill_window), p, self.rng.random() < 0.5)
                      for p in procs if self.rng.random() < 0.6)
        doomed = set()
        for when, p, group in plan:
            time.sleep(max(0.0, when - (time.monotonic() - t0)))
            if p.poll() is None:
                # the process alone (its g++ runs on, orphaned) or its whole group
                (os.killpg if group else os.kill)(p.pid, signal.SIGKILL)
                doomed.add(p)
        for p in procs:
            self.finish(p, killed=p in doomed)
        self.check(c)

    def fault_round(self, r: int, c: float) -> None:
        m = min(self.args.rounds, len(KINDS))
        layout = self.root / "v1"
        for k, kind in enumerate(KINDS):
            if k % m != r % m:
                continue
            how = "truncate" if (r + k) % 2 == 0 else "garbage"
            hit = artifacts(layout, kind)
            for path in hit:
                damage(path, how, self.rng)
            if hit:
                self.counts["faults"] += 1
                self.check(c)

    def run(self) -> dict:
        try:
            for r in range(self.args.rounds):
                c = 1.0 + r / 8 + self.args.seed * 1e-4  # a new unit each round
                self.kill_round(c)
                self.fault_round(r, c)
                print(f"round {r + 1}/{self.args.rounds}: {json.dumps(self.counts)}",
                      file=sys.stderr, flush=True)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return self.counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 10000)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before a hang")
    ap.add_argument("--kill-window", type=float, default=None,
                    help="kills fall in [0.3, this] seconds after the start")
    ap.add_argument("--quick", action="store_true", help="no precompiled prelude")
    args = ap.parse_args(argv)
    if args.kill_window is None:
        args.kill_window = 8.0 if args.quick else 6.0
    counts = Chaos(args).run()
    print(json.dumps({"seed": args.seed, **counts}))
    return 1 if any(counts[k] for k in ("wrong", "crashes", "hangs", "unverified")) else 0


if __name__ == "__main__":
    sys.exit(main())
