"""dynexpr against its peers on the workloads of bench/python/workloads/, in one process:

    .venv/bin/python bench/python/run_peers.py --quick
    .venv/bin/python bench/python/run_peers.py [--workloads gelu,softmax_rows] [--sizes 64K,1M]
        [--dtypes float32,float64] [--threads N] [--json PATH] [--plots DIR]

Implementations: numpy (the baseline), dynexpr (dynexpr.capture), dynexpr_unfused
(capture(fuse=False)), dynexpr_autotune (capture(mode="max-autotune"): its first call
times the parallel schedules), numexpr, torch_compile (torch.compile of the torch version, CPU
inductor), jax (jax.jit), numba (@njit(parallel=True, fastmath=False)). A peer that is not
installed is a "not installed" row (bench/python/setup_peers.sh installs them).

For each workload, dtype and size, every implementation is built fresh and called once
(`first call`: capture/trace + compile + run; dynexpr's disk cache may already hold the
kernel, which the note says), its result compared with NumPy's (a mismatch is a WRONG row
and exit status 1), called once more to warm up, then timed: `reps` rounds, each calling
every implementation once in an order rotated by one per round, so that drift hits all
alike, each sample after a 10 ms pause and one untimed call (so that the threads another
library leaves spinning do not slow the next); a call shorter than the minimum sample is
batched. `time` is the median sample.
GB/s counts each input read once and the output written once (what a fused kernel moves);
`%triad` relates it to a NumPy triad measured at the start of the same process: it says
how close a call comes to streaming from memory at sizes beyond the caches, and passes
100% where the data stays in cache or more threads than NumPy's one share the work.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dynexpr  # noqa: E402
from dynexpr import cache  # noqa: E402
from peers import PEERS, load_peers, set_threads  # noqa: E402
from workloads import Workload, by_name  # noqa: E402

IMPLS = ("numpy", "dynexpr", "dynexpr_unfused", "dynexpr_autotune", "numexpr", "torch_compile",
         "jax", "numba")
PEER_IMPLS = ("numexpr", "torch_compile", "jax", "numba")
SETTLE = 0.01  # seconds of quiet before each timed sample, about dynexpr's spin (measure_group)
QUICK_WORKLOADS = "gelu,black_scholes,softmax_rows,sum_squares"
PROBE_BYTES = 64 << 20  # per array of the bandwidth probe: far beyond the last-level cache
# (rtol, atol) per result dtype; atol is relative to the largest |expected| value, so that
# results that cancel (a cheap option: two prices of ~100 subtracted) are judged on the
# scale of their terms. A full reduction over n values (a scalar) is allowed n-fold more.
TOL = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12)}
SCALAR_TOL = {"float32": 1e-3, "float64": 1e-8}


# ---------------------------------------------------------------------------------------
# Measuring

def bandwidth_probe() -> dict:
    """Best-of GB/s of a NumPy copy (2 arrays moved) and triad a + s*b (two NumPy passes,
    through a temporary: 5 arrays moved), on PROBE_BYTES float64 arrays, one thread."""
    n = PROBE_BYTES // 8
    a, b, tmp, dst = (np.full(n, v) for v in (1.0, 2.0, 0.0, 0.0))
    kernels = {
        "copy": (lambda: np.copyto(dst, a), 2),
        "triad": (lambda: np.add(a, np.multiply(b, 3.0, out=tmp), out=dst), 5),
    }
    res = {}
    for name, (kernel, arrays) in kernels.items():
        kernel()
        best = min(_timed(kernel) for _ in range(5))
        res[name] = arrays * PROBE_BYTES / best / 1e9
    return res


def _timed(call: Callable, number: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - t) / number


def _batch_size(call: Callable, min_sample: float) -> int:
    """Calls per timed sample, so that every implementation's samples last about
    min_sample. One call is a poor estimate: sized from a single call that came after a
    pause (threads asleep, caches cold), dynexpr's row got 60-call samples (~0.6 ms) and
    dynexpr_autotune's 363 for the same kernel and schedule (stencil3 float64 64K), and a
    sample that short can sit entirely inside one slow wake-up of a worker thread. So the
    estimate is the fastest of three ~1 ms runs of warm calls."""
    once = max(_timed(call), 1e-7)
    if once >= min_sample:
        return 1
    n = max(1, int(1e-3 / once))
    per = min(_timed(call, n) for _ in range(3))
    return max(1, math.ceil(min_sample / max(per, 1e-7)))


def check(expected: Any, got: Any) -> tuple[bool, str]:
    """(right, note): values within the dtype's tolerance and the shape NumPy gives; a
    different dtype is a note, not an error (numba promotes float32 by float64 constants)."""
    expected, got = np.asarray(expected), np.asarray(got)
    if got.shape != expected.shape:
        return False, f"shape {got.shape}, NumPy {expected.shape}"
    rtol, atol = TOL.get(expected.dtype.name, (1e-3, 1e-3))
    if expected.ndim == 0:
        rtol = SCALAR_TOL.get(expected.dtype.name, rtol)
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    if not np.allclose(got, expected, rtol=rtol, atol=atol * max(scale, 1.0), equal_nan=True):
        err = np.max(np.abs(got.astype(np.float64) - expected))
        return False, f"max |error| {err:.3g} (rtol {rtol:g})"
    note = f"returns {got.dtype}" if got.dtype != expected.dtype else ""
    return True, note


@dataclass
class Row:
    impl: str
    status: str  # ok, WRONG, error, not installed, n/a
    seconds: float | None = None
    min_seconds: float | None = None
    first_call_seconds: float | None = None
    note: str = ""


def measure_group(w: Workload, dtype: str, n: int, impls: list[str], status: dict,
                  reps: int, min_sample: float) -> tuple[list[Row], int]:
    """One workload, dtype and size: every implementation's row, and the bytes moved."""
    xs = w.make_inputs(n, np.dtype(dtype), np.random.default_rng(n))
    expected = w.fn(*xs)
    nbytes = sum(x.nbytes for x in xs) + np.asarray(expected).nbytes
    rows, calls = [], {}
    for name in impls:
        if status[name] == "not installed":
            rows.append(Row(name, "not installed"))
            continue
        if status[name].startswith("error"):
            rows.append(Row(name, "error", note=status[name][len("error: "):]))
            continue
        row = Row(name, "ok")
        rows.append(row)
        try:
            built = PEERS[name].build(w, xs)
            if built is None:
                row.status, row.note = "n/a", f"{name} cannot express {w.name}"
                continue
            call, to_numpy = built
            before = dict(cache.stats)
            t = time.perf_counter()
            got = to_numpy(call())
            row.first_call_seconds = time.perf_counter() - t
            right, row.note = check(expected, got)
            if not right:
                row.status = "WRONG"
            if name.startswith("dynexpr"):
                row.note = _join(row.note, _dynexpr_note(w, xs, before))
            call()  # warm-up: the first call may have paid for page faults of the output
            calls[name] = call
        except Exception as e:  # a peer that fails is a loud row, and the others go on
            row.status, row.note = "error", f"{type(e).__name__}: {str(e)[:120]}"
    gc.collect()
    batch = {k: _batch_size(c, min_sample) for k, c in calls.items()}
    samples: dict[str, list[float]] = {k: [] for k in calls}
    order = list(calls)
    for r in range(reps):
        for k in order[r % len(order):] + order[: r % len(order)]:
            # Another library's threads (XLA's, Numba's, dynexpr's) spin for a while after
            # its call; on a machine with few cores they would slow whoever runs next.
            # Every implementation gets the same pause, then one untimed call, alone.
            time.sleep(SETTLE)
            calls[k]()
            samples[k].append(_timed(calls[k], batch[k]))
    for row in rows:
        if row.impl in samples:
            row.seconds = statistics.median(samples[row.impl])
            row.min_seconds = min(samples[row.impl])
    return rows, nbytes


def _dynexpr_note(w: Workload, xs: tuple, before: dict) -> str:
    """Whether dynexpr ran the workload as plain Python, and what its first call paid for."""
    ex = dynexpr.explain(w.fn, *xs)
    if ex.graph_break_count:
        reason = ex.break_reasons[0].reason if ex.break_reasons else "?"
        return f"PLAIN PYTHON ({ex.graph_break_count} graph break: {reason})"
    compiles = cache.stats["compiles"] - before["compiles"]
    note = f"{compiles} compile(s)" if compiles else "kernel from disk cache"
    if cache.stats["pch_builds"] > before["pch_builds"]:
        note += " + prelude build (once per toolchain)"
    return note


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


# ---------------------------------------------------------------------------------------
# Reporting

def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_size(n: int) -> str:
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def records_for(w: Workload, dtype: str, n: int, rows: list[Row], nbytes: int,
                probe: dict, threads: int) -> list[dict]:
    base = next((r.seconds for r in rows if r.impl == "numpy"), None)
    out = []
    for r in rows:
        gbps = nbytes / r.seconds / 1e9 if r.seconds else None
        out.append({
            "workload": w.name, "dtype": dtype, "n": n, "impl": r.impl,
            "seconds": r.seconds, "first_call_seconds": r.first_call_seconds,
            "min_seconds": r.min_seconds,
            "status": r.status, "note": r.note,
            "speedup_vs_numpy": base / r.seconds if base and r.seconds else None,
            "gbps": gbps, "triad_fraction": gbps / probe["triad"] if gbps else None,
            "bytes": nbytes, "threads": threads,
        })
    return out


COLUMNS = f"{'impl':<16} {'time':>9} {'vs numpy':>9} {'GB/s':>7} {'%triad':>7} " \
          f"{'first call':>10}  note"


def print_group(w: Workload, dtype: str, n: int, recs: list[dict], nbytes: int) -> None:
    print(f"\n## {w.name} {dtype} n={fmt_size(n)} ({nbytes / 1e6:.3g} MB moved): {w.formula}")
    print(COLUMNS)
    ok = [r for r in recs if r["status"] == "ok" and r["seconds"]]
    fastest = min(ok, key=lambda r: r["seconds"])["impl"] if ok else None
    for r in recs:
        if r["seconds"] is None:
            what = r["status"].upper() if r["status"] in ("error", "WRONG") else r["status"]
            print(f"{r['impl']:<16} {what:>9}  {r['note']}")
            continue
        flag = "WRONG " if r["status"] == "WRONG" else ""
        print(f"{r['impl']:<16} {fmt_time(r['seconds']):>9} {r['speedup_vs_numpy']:>8.2f}x "
              f"{r['gbps']:>7.2f} {r['triad_fraction'] * 100:>6.0f}% "
              f"{fmt_time(r['first_call_seconds']):>10}  {flag}{r['note']}"
              f"{'  <- fastest' if r['impl'] == fastest else ''}")
    verdict = _peer_verdict(ok)
    if verdict:
        print(verdict)


def _best_peer(times: dict[str, float]) -> tuple[str, float] | None:
    """(peer, best peer's seconds / dynexpr's) of one group's times by implementation, or
    None when dynexpr or every peer is missing from it."""
    peers = [p for p in PEER_IMPLS if p in times]
    if "dynexpr" not in times or not peers:
        return None
    best = min(peers, key=lambda p: times[p])
    return best, times[best] / times["dynexpr"]


def _peer_verdict(ok: list[dict]) -> str:
    """Which peer is fastest in a group, against dynexpr's default call."""
    found = _best_peer({r["impl"]: r["seconds"] for r in ok})
    if found is None:
        return ""
    best, ratio = found
    if ratio >= 1:
        return f"dynexpr wins: {ratio:.2f}x the best peer ({best})"
    return f"{best} wins: dynexpr takes {1 / ratio:.2f}x its time"


def print_summary(records: list[dict]) -> None:
    """Geometric mean of the speedups over NumPy, per implementation, over every group."""
    by_impl: dict[str, list[float]] = {}
    for r in records:
        if r["status"] == "ok" and r["speedup_vs_numpy"] and r["impl"] != "numpy":
            by_impl.setdefault(r["impl"], []).append(r["speedup_vs_numpy"])
    if by_impl:
        print("\ngeometric mean speedup over NumPy (groups where the peer ran, right):")
        for impl, s in by_impl.items():
            print(f"  {impl:<16} {math.exp(sum(map(math.log, s)) / len(s)):.2f}x "
                  f"over {len(s)} group(s)")
    groups: dict[tuple, dict[str, float]] = {}  # (workload, dtype, n) -> {impl: seconds}
    for r in records:
        if r["status"] == "ok" and r["seconds"]:
            groups.setdefault((r["workload"], r["dtype"], r["n"]), {})[r["impl"]] = r["seconds"]
    big = {k: t for k, t in groups.items() if k[2] >= 1 << 20}
    ratios = [found[1] for found in map(_best_peer, big.values()) if found is not None]
    lost = []
    for (workload, dtype, n), times in groups.items():
        found = _best_peer(times) if n >= 1 << 16 else None
        if found is not None and found[1] < 1 / 1.05:
            lost.append(f"{workload} {dtype} {fmt_size(n)}: {found[0]} "
                        f"{1 / found[1]:.2f}x faster")
    if lost:
        print(f"\ngroups at 64K elements and up that a peer wins by more than 5% ({len(lost)}):")
        for line in lost:
            print(f"  {line}")
    if ratios:
        print(f"\ndynexpr over the best installed peer ({', '.join(PEER_IMPLS)}) at 1M elements "
              f"and up: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x geometric "
              f"mean over {len(ratios)} group(s)")
    tuned = [t["dynexpr"] / t["dynexpr_autotune"] for t in big.values()
             if "dynexpr" in t and "dynexpr_autotune" in t]
    if tuned:
        print(f"max-autotune over the default schedule at 1M elements and up: "
              f"{math.exp(sum(map(math.log, tuned)) / len(tuned)):.2f}x geometric mean over "
              f"{len(tuned)} group(s)")


def write_plots(records: list[dict], folder: str) -> None:
    try:
        import matplotlib
    except ImportError:
        print("\nplots skipped: matplotlib is not installed (bench/python/setup_peers.sh)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["workload"], r["dtype"]), []).append(r)
    for (workload, dtype), recs in groups.items():
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for impl in IMPLS:
            pts = sorted((r["n"], r["speedup_vs_numpy"]) for r in recs
                         if r["impl"] == impl and r["status"] == "ok" and r["speedup_vs_numpy"])
            if pts:
                ax.plot(*zip(*pts), marker="o", label=impl)
        sizes = sorted({r["n"] for r in recs})
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [fmt_size(n) for n in sizes])
        ax.set_yscale("log")
        ax.set_xlabel("elements per input")
        ax.set_ylabel("speedup over NumPy (higher is faster)")
        ax.set_title(f"{workload} {dtype}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(folder, f"{workload}_{dtype}.png"), dpi=100)
        plt.close(fig)
    print(f"\nplots: {len(groups)} PNG(s) in {folder}")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def header(threads: int, status: dict, probe: dict, loadavg: tuple) -> str:
    versions = [f"python {platform.python_version()}"]
    for name in ("numpy", "dynexpr", "numexpr", "torch", "jax", "numba", "matplotlib"):
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} not installed")
    missing = [k for k, v in status.items() if not v[:1].isdigit()]
    busy = (f"\nwarning: load average {loadavg[0]:.2f} before the run: other work shares the "
            "cores, which slows the pooled implementations most") if loadavg[0] > 0.5 else ""
    return "\n".join([
        (f"run_peers: {cpu_name()}, {os.cpu_count()} hardware threads, load average "
         f"{', '.join(f'{x:.2f}' for x in loadavg)}{busy}"),
        f"versions: {'; '.join(versions)}",
        (f"threads: {threads} for every peer (OMP/NUMBA/NUMEXPR/DYNEXPR_NUM_THREADS, "
         "torch.set_num_threads, numexpr.set_num_threads); NumPy's ufuncs use one; JAX uses "
         "XLA's CPU pool (one per core, not settable)"),
        (f"bandwidth (NumPy, one thread, {PROBE_BYTES >> 20} MiB float64 arrays, best of 5): "
         f"copy {probe['copy']:.2f} GB/s, triad {probe['triad']:.2f} GB/s "
         "(the %triad reference)"),
        f"dynexpr cache: {dynexpr.config.cache_dir}",
        *([f"not available: {', '.join(f'{k} ({status[k]})' for k in missing)}"]
          if missing else []),
    ])


# ---------------------------------------------------------------------------------------

def parse_sizes(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20}.get(part[-1:], 1)
        try:
            out.append(int(part.rstrip("KM")) * scale)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--sizes: {part!r} is not a size; write e.g. 64K,1M,4M (K = 1024)") from None
    return out


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_WORKLOADS}, float32, 64K and 1M, 5 rounds")
    ap.add_argument("--workloads", help="comma-separated names (default: all)")
    ap.add_argument("--sizes", type=parse_sizes, help="elements per input, e.g. 64K,1M")
    ap.add_argument("--dtypes", default=None, help="float32,float64 (default both)")
    ap.add_argument("--impls", default=",".join(IMPLS), help="comma-separated implementations")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads of every peer")
    ap.add_argument("--reps", type=int, help="timed rounds (default 5 quick, 11 otherwise)")
    ap.add_argument("--json", help="write the results as a JSON list of records")
    ap.add_argument("--plots", default=os.path.join(os.path.dirname(__file__), "..", "results",
                                                    "plots"), help="folder for the PNG plots")
    args = ap.parse_args(argv)
    args.workloads = (args.workloads or (QUICK_WORKLOADS if args.quick else "")).split(",")
    args.workloads = [w for w in args.workloads if w] or None
    args.sizes = args.sizes or parse_sizes("64K,1M" if args.quick else "1K,64K,1M,16M")
    args.dtypes = (args.dtypes or ("float32" if args.quick else "float32,float64")).split(",")
    args.reps = args.reps or (5 if args.quick else 11)
    args.impls = args.impls.split(",")
    bad = [x for x in args.impls if x not in IMPLS] + \
          [d for d in args.dtypes if d not in ("float32", "float64")]
    if bad or args.threads < 1:
        ap.error(f"unknown {', '.join(bad) or 'thread count'}; implementations: "
                 f"{', '.join(IMPLS)}; dtypes: float32, float64; --threads >= 1")
    if "numpy" not in args.impls:
        args.impls.insert(0, "numpy")  # the baseline every speedup is relative to
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        selected = by_name(args.workloads)
    except ValueError as e:
        print(f"run_peers: {e}", file=sys.stderr)
        return 2
    loadavg = os.getloadavg()  # before the probe and the peers' imports add to it
    set_threads(args.threads)
    status = load_peers(args.impls, args.threads)
    probe = bandwidth_probe()
    print(header(args.threads, status, probe, loadavg))
    records, wrong = [], 0
    min_sample = 2e-3 if args.quick else 5e-3
    for w in selected:
        for dtype in args.dtypes:
            for n in args.sizes:
                rows, nbytes = measure_group(w, dtype, n, args.impls, status, args.reps,
                                             min_sample)
                recs = records_for(w, dtype, n, rows, nbytes, probe, args.threads)
                print_group(w, dtype, n, recs, nbytes)
                sys.stdout.flush()
                records += recs
                wrong += sum(r.status == "WRONG" for r in rows)
    print_summary(records)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(records, fh, indent=1)
        print(f"json: {len(records)} records in {args.json}")
    write_plots(records, os.path.normpath(args.plots))
    if wrong:
        print(f"\nrun_peers: {wrong} WRONG result(s): see the rows marked WRONG", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
