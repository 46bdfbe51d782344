"""A dynamic-shape kernel against its static twin, in one run.

The same 10-op float32 chain is captured twice: with dynamic=False (extents are
compile-time constants of the unit) and with dynamic=True (the extent is bound from the
argument at run time, one unit for every size). Both are timed at each size, alternating,
as medians of many calls after warm-up, with NumPy alongside. Target (issue 4): the
dynamic kernel within 1.15x of the static one at 1M elements.

    .venv/bin/python bench/python/dynamic_bench.py [--sizes 1K,64K,1M] [--json PATH]
"""

from __future__ import annotations

import os

import numpy as np
from alternating import arguments, measure, parse_size, write_json

import dynexpr


def gelu10(x, y):
    return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x * x * x))) + y


def main() -> None:
    args = arguments(__doc__)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    static = dynexpr.capture(gelu10, dynamic=False)
    dyn = dynexpr.capture(gelu10, dynamic=True)
    rows = measure({"static": static, "dynamic": dyn}, gelu10, sizes, args.rounds,
                   rtol=1e-5, atol=1e-6)
    for r in rows:
        r["dynamic_over_static"] = r["dynamic_s"] / r["static_s"]
    assert dyn.cache_info().compiles == 1, dyn.cache_info()
    print(f"10-op float32 chain; dynexpr threads: {os.environ.get('DYNEXPR_NUM_THREADS', 'all')}"
          f", {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'n':>10} {'static':>11} {'dynamic':>11} {'numpy':>11} {'dyn/static':>11}")
    for r in rows:
        print(f"{r['n']:>10} {r['static_s'] * 1e6:>9.1f}us {r['dynamic_s'] * 1e6:>9.1f}us "
              f"{r['numpy_s'] * 1e6:>9.1f}us {r['dynamic_over_static']:>10.3f}x")
    print(f"dynamic captures: {dyn.cache_info().compiles} unit for {len(sizes)} sizes; "
          f"static: {static.cache_info().compiles} units")
    write_json(rows, args.json)


if __name__ == "__main__":
    main()
