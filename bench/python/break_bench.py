"""The cost of one graph break, in one run.

Two 10-op float32 chains with a break between them (`.item()` of a reduction, which
plain Python must see), against the same function without the break (the reduction
stays a 0-d array in the graph) and against plain NumPy. With the break, the chain
before it and the chain after it each run as a compiled segment and the `.item()`
runs as Python between them (Note [resuming after a graph break]). Medians of many
calls after warm-up, the three alternating. Target (issue 4): the function with the
break faster than plain NumPy at 1M elements.

    .venv/bin/python bench/python/break_bench.py [--sizes 1K,64K,1M] [--json PATH]
"""

from __future__ import annotations

import os

import numpy as np
from alternating import arguments, measure, parse_size, write_json

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
    write_json(rows, args.json)


if __name__ == "__main__":
    main()
