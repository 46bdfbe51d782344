"""The cost of one graph break, in one run.

Two 10-op float32 chains with a break between them (`.item()` of a reduction, which
plain Python must see), against the same function without the break (the reduction
stays a 0-d array in the graph) and against plain NumPy. With the break, the chain
before it and the chain after it each run as a compiled segment and the `.item()`
runs as Python between them (Note [resuming after a graph break]). Medians of many
calls after warm-up, the three alternating. Target (issue 4): the function with the
break faster than plain NumPy at 1M elements.

Then breaks inside loops (issue 13 part 3): a byte checksum (an `int()` per byte), a
block checksum and a recurrence with a `float()` per step, captured twice: the rest of
the call after the break as real bytecode (Note [resume code] in
capture/resume_code.py, the default) and through dynexpr's resume interpreter
(config.resume_as_code = False, what ran before); each over plain CPython + NumPy.

    .venv/bin/python bench/python/break_bench.py [--sizes 1K,64K,1M] [--json PATH]
"""

from __future__ import annotations

import os

import numpy as np
import statistics

from alternating import arguments, measure, median_s, parse_size, write_json

import dynexpr

# Time the compiled path with its breaks, not the plain function that a slower entry
# would run (Note [judging an entry] in dynexpr/judge.py).
dynexpr.config.plain_fallback = False


def _chain(x, y):  # 10 array ops
    return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x * x * x))) + y


def with_break(x, y):
    a = _chain(x, y)
    scale = np.abs(a).max().item()  # Python needs the value: a graph break
    return _chain(a / scale, y)


def without_break(x, y):
    a = _chain(x, y)
    scale = np.abs(a).max()  # a 0-d array: the graph goes on
    return _chain(a / scale, y)


def adler32(data):
    a, b = 1, 0
    for byte in data:
        a = (a + int(byte)) % 65521
        b = (b + a) % 65521
    return (b << 16) | a


def fletcher16_blocks(data):
    s1 = s2 = 0
    d = data.astype(np.int64)
    for start in range(0, len(d), 16):
        block = d[start:start + 16]
        s2 = (s2 + len(block) * s1 + np.sum(block * np.arange(len(block), 0, -1))) % 255
        s1 = (s1 + np.sum(block)) % 255
    return (s2 << 8) | s1


def recurrence(x, steps):
    acc = x * 0.5
    for _ in range(steps):
        s = float(np.abs(acc).max())  # Python needs the value: a break every step
        acc = acc * 0.5 + x / (1.0 + s)
    return acc


def _same(got, want) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=0)


def loop_rows(rounds: int) -> list[dict]:
    """Per loop function: median seconds of plain, real bytecode after the break, and
    the resume interpreter; both captured versions checked against plain first."""
    rng = np.random.default_rng(0)
    cases = [("adler32 2000 B", adler32, (rng.integers(0, 256, 2000).astype(np.uint8),)),
             ("fletcher16 1600 B", fletcher16_blocks,
              (rng.integers(0, 256, 1600).astype(np.uint8),)),
             ("recurrence 1K x 200", recurrence, (rng.standard_normal(1024), 200))]
    rows = []
    for name, fn, args in cases:
        want = fn(*args)
        impls = {}
        for mode, on in (("code", True), ("interp", False)):
            dynexpr.config.resume_as_code = on
            f = dynexpr.capture(fn)
            for _ in range(3):  # translate, compile, then the steady state
                _same(f(*args), want)
            impls[mode] = (f, on)
        t = {k: [] for k in ("plain", "code", "interp")}
        for _ in range(rounds):
            t["plain"].append(median_s(fn, args, 5))
            for mode, (f, on) in impls.items():
                dynexpr.config.resume_as_code = on
                t[mode].append(median_s(f, args, 5))
        rows.append({"case": name, **{f"{k}_s": statistics.median(v) for k, v in t.items()}})
    dynexpr.config.resume_as_code = True
    return rows


def main() -> None:
    args = arguments(__doc__)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    rows = measure({"break": dynexpr.capture(with_break),
                    "no_break": dynexpr.capture(without_break)}, with_break, sizes,
                   args.rounds, rtol=1e-4, atol=1e-5)
    for r in rows:
        r["break_over_no_break"] = r["break_s"] / r["no_break_s"]
        r["numpy_over_break"] = r["numpy_s"] / r["break_s"]
    ex = dynexpr.explain(with_break, np.ones(8, np.float32), np.ones(8, np.float32))
    print(f"two 10-op float32 chains, one .item() between; {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f}; with the break: {ex.graph_count} graphs, "
          f"{ex.compiled_op_share:.0%} of array ops compiled")
    print(f"{'n':>10} {'break':>11} {'no break':>11} {'numpy':>11} {'break/no':>9} "
          f"{'numpy/break':>12}")
    for r in rows:
        print(f"{r['n']:>10} {r['break_s'] * 1e6:>9.1f}us {r['no_break_s'] * 1e6:>9.1f}us "
              f"{r['numpy_s'] * 1e6:>9.1f}us {r['break_over_no_break']:>8.2f}x "
              f"{r['numpy_over_break']:>11.2f}x")
    loops = loop_rows(args.rounds)
    print("\nbreaks inside loops (plain/captured: > 1 is faster than plain CPython + NumPy)")
    print(f"{'case':>22} {'plain':>11} {'real code':>11} {'interp':>11} "
          f"{'plain/code':>11} {'plain/interp':>13}")
    for r in loops:
        print(f"{r['case']:>22} {r['plain_s'] * 1e6:>9.1f}us {r['code_s'] * 1e6:>9.1f}us "
              f"{r['interp_s'] * 1e6:>9.1f}us {r['plain_s'] / r['code_s']:>10.2f}x "
              f"{r['plain_s'] / r['interp_s']:>12.3f}x")
    write_json(rows + loops, args.json)


if __name__ == "__main__":
    main()
