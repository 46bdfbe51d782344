"""dynexpr's generated CUDA kernels against the GPU peers, on the workloads of run_peers.py,
in one process (issue 14, item 6). Needs an NVIDIA GPU, NVRTC and CuPy; torch (CUDA) and
jax (CUDA) are used where installed.

    .venv/bin/python bench/python/run_gpu.py --quick
    .venv/bin/python bench/python/run_gpu.py [--workloads gelu,softmax_rows] [--sizes 1M,16M]
        [--dtypes float32] [--reps 20] [--json PATH]
    .venv/bin/python bench/python/run_gpu.py --list     # the plan, on any machine

Implementations per workload, dtype and size:
  dynexpr       dynexpr.capture of the NumPy function called with CuPy arrays: the device
                path (cuda_run.py) guards the call, generates CUDA (cuda_codegen), compiles
                it with NVRTC for this device, launches it through the driver API on
                CuPy's current stream and returns CuPy arrays (what a user runs)
  dynexpr_graph the same with mode="reduce-overhead": each call one CUDA graph replay
                (Note [CUDA graph replay]); its host time is the reduce-overhead target
  dynexpr_launch the same unit called through the launcher alone (cuda_driver.load): the
                host time without capture's guards, for comparison
  cupy          the same NumPy function called with CuPy arrays (NEP 18: op by op)
  cupy_fuse     cupy.fuse of it (elementwise workloads only; a reduction ends the fusion)
  torch         the torch version on CUDA tensors, eager
  torch_compile torch.compile of it (inductor, Triton)
  jax           jax.jit of the jax version, where jax sees a GPU
and `copy`, a device-to-device copy of the largest input: the roofline probe every
bandwidth is related to (%copy).

Each call is timed with CUDA events around `reps` calls after a warm-up (device time per
call, the median of 5 rounds), and separately the host time per call: the wall time of
enqueueing `reps` calls without synchronising, divided by reps (what a Python caller pays
before the GPU runs). Results are checked against NumPy (float32: rtol 1e-4).
Records {workload, dtype, n, impl, seconds, host_seconds, gbps} go to --json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import REGISTRY, by_name

QUICK = ("gelu", "black_scholes", "softmax_rows", "layernorm_rows", "sum_squares")
SIZES = {"1K": 1 << 10, "64K": 1 << 16, "1M": 1 << 20, "16M": 1 << 24}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"workloads {','.join(QUICK)} at 1M and 16M float32, 10 reps")
    ap.add_argument("--workloads", default=",".join(w.name for w in REGISTRY))
    ap.add_argument("--sizes", default="64K,1M,16M")
    ap.add_argument("--dtypes", default="float32")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="write the records here")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    a = ap.parse_args(argv)
    if a.quick:
        a.workloads, a.sizes, a.dtypes, a.reps = ",".join(QUICK), "1M,16M", "float32", 10
    return a


def plan(a) -> list[tuple]:
    out = []
    for w in by_name([name.strip() for name in a.workloads.split(",")]):
        for dt in a.dtypes.split(","):
            for size in a.sizes.split(","):
                if size not in SIZES:
                    sys.exit(f"run_gpu: unknown size {size}; sizes: {', '.join(SIZES)}")
                out.append((w, np.dtype(dt.strip()), SIZES[size]))
    return out


def why_no_gpu() -> str | None:
    from dynexpr.backends import cuda_driver, nvrtc

    why = nvrtc.available() or cuda_driver.available()
    if why:
        return why
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "CuPy is not installed (pip install cupy-cuda13x)"
    return None


# ------------------------------------------------------------------ implementations
def build_captured(w, host_inputs, mode="default"):
    """dynexpr.capture(w.fn, mode=mode), compiled before timing; refuses where it would
    run plain (or, in reduce-overhead, where it would not replay a CUDA graph)."""
    import dynexpr
    from dynexpr import cuda_run

    dynexpr.config.background_compile = False
    f = dynexpr.capture(w.fn, mode=mode)
    import cupy

    f(*[cupy.asarray(h) for h in host_inputs])
    path = cuda_run.describe(f)[-1]
    if "CUDA kernels" not in path:
        raise NotImplementedError(path)
    if mode == "reduce-overhead" and "a CUDA graph per set of extents" not in path:
        raise NotImplementedError(path)
    return f


def build_dynexpr(w, host_inputs):
    """The graph capture builds for w.fn on these inputs, as a CUDA launcher."""
    import dynexpr
    from dynexpr.backends import cuda_codegen, cuda_driver, nvrtc
    from dynexpr.schedule import schedule

    ex = dynexpr.explain(w.fn, *host_inputs)
    if ex.graph_break_count or len(ex.graphs) != 1:
        raise NotImplementedError("the function breaks the graph")
    unit = cuda_codegen.generate(schedule(ex.graphs[0]), set(range(len(host_inputs))))
    fn = cuda_driver.load(unit, nvrtc.compile_cached(unit.source, cuda_driver.arch()).path)

    def call(*xs):
        out = fn(*xs)
        return out[0] if len(out) == 1 else out

    return call


def builders(w):
    """(name, build(host_inputs) -> callable on device arrays) of each implementation."""
    out = [("dynexpr", lambda h: build_captured(w, h)),
           ("dynexpr_graph", lambda h: build_captured(w, h, "reduce-overhead")),
           ("dynexpr_launch", lambda h: build_dynexpr(w, h)), ("cupy", lambda h: w.fn)]

    def fuse(h):
        import cupy

        if any(k in w.formula for k in ("sum", "max", "mean", "row")):
            raise NotImplementedError("cupy.fuse: a reduction ends the fusion")
        return cupy.fuse(w.fn)

    out.append(("cupy_fuse", fuse))
    if w.torch is not None:
        out.append(("torch", lambda h: w.torch()))

        def compiled(h):
            import torch

            return torch.compile(w.torch())

        out.append(("torch_compile", compiled))
    if w.jax is not None:
        def jitted(h):
            import jax

            if not any(d.platform == "gpu" for d in jax.devices()):
                raise NotImplementedError("jax sees no GPU (pip install jax[cuda13])")
            return jax.jit(w.jax())

        out.append(("jax", jitted))
    return out


def to_device(impl: str, host_inputs):
    import cupy

    if impl.startswith("torch"):
        import torch

        return [torch.as_tensor(x, device="cuda") for x in host_inputs]
    if impl == "jax":
        import jax.numpy as jnp

        return [jnp.asarray(x) for x in host_inputs]
    return [cupy.asarray(x) for x in host_inputs]


def to_host(y):
    import cupy

    if isinstance(y, (tuple, list)):
        return [to_host(v) for v in y]
    if hasattr(y, "detach"):
        return y.detach().cpu().numpy()
    if isinstance(y, cupy.ndarray):
        return cupy.asnumpy(y)
    return np.asarray(y)


def synchronize(impl: str) -> None:
    import cupy

    cupy.cuda.get_current_stream().synchronize()
    if impl.startswith("torch"):
        import torch

        torch.cuda.synchronize()


def timed(impl, fn, args, reps: int) -> tuple[float, float]:
    """(device seconds per call: median of 5 rounds of CUDA-event timing, host seconds
    per call: enqueueing reps calls without waiting)."""
    import cupy

    fn(*args)
    synchronize(impl)
    rounds = []
    for _ in range(5):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(reps):
            fn(*args)
        stop.record()
        stop.synchronize()
        synchronize(impl)
        rounds.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3 / reps)
    synchronize(impl)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn(*args)
    host = (time.perf_counter() - t0) / reps
    synchronize(impl)
    return statistics.median(rounds), host


def copy_probe(n_bytes: int, reps: int) -> float:
    """GB/s of a device-to-device copy (read + write counted)."""
    import cupy

    x = cupy.ones(n_bytes // 4, dtype=cupy.float32)
    y = cupy.empty_like(x)
    sec, _ = timed("cupy", lambda a, b: cupy.copyto(b, a), (x, y), reps)
    return 2 * n_bytes / sec / 1e9


def same(want, got, dtype) -> bool:
    want = want if isinstance(want, (tuple, list)) else [want]
    got = got if isinstance(got, (tuple, list)) else [got]
    rtol = 1e-4 if dtype == np.float32 else 1e-9
    return len(want) == len(got) and all(
        np.allclose(np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64),
                    rtol=rtol, atol=rtol * (np.abs(w).max() if np.size(w) else 0) + 1e-30)
        for w, g in zip(want, got))


def main(argv=None) -> int:
    a = parse_args(argv)
    todo = plan(a)
    if a.list:
        for w, dt, n in todo:
            print(f"{w.name:18} {dt.name:8} {n:>10}  impls: "
                  f"{', '.join(name for name, _ in builders(w))}")
        return 0
    why = why_no_gpu()
    if why:
        print(f"run_gpu: cannot run here: {why}", file=sys.stderr)
        return 2
    import cupy

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    print(f"device {dev.id}: {props['name'].decode()} (sm_{props['major']}{props['minor']})")
    probe = copy_probe(1 << 28, a.reps)
    print(f"copy probe: {probe:.0f} GB/s")
    records, wrong = [], 0
    rng = np.random.default_rng(0)
    print(f"{'workload':18} {'dtype':8} {'n':>9} {'impl':14} {'device':>10} {'host':>9} "
          f"{'GB/s':>7} {'%copy':>6}")
    for w, dt, n in todo:
        host_inputs = w.make_inputs(n, dt, rng)
        want = w.fn(*host_inputs)
        moved = sum(x.nbytes for x in host_inputs) + sum(
            np.asarray(y).nbytes for y in (want if isinstance(want, tuple) else (want,)))
        for impl, build in builders(w):
            try:
                fn = build(host_inputs)
                args = to_device(impl, host_inputs)
                got = to_host(fn(*args))
            except (ImportError, NotImplementedError) as e:
                print(f"{w.name:18} {dt.name:8} {n:>9} {impl:14} {'-':>10}  ({e})")
                continue
            if not same(want, got, dt):
                wrong += 1
                print(f"{w.name:18} {dt.name:8} {n:>9} {impl:14} WRONG")
                continue
            sec, host = timed(impl, fn, args, a.reps)
            gbps = moved / sec / 1e9
            records.append({"workload": w.name, "dtype": dt.name, "n": n, "impl": impl,
                            "seconds": sec, "host_seconds": host, "gbps": gbps})
            print(f"{w.name:18} {dt.name:8} {n:>9} {impl:14} {sec * 1e6:8.1f}us "
                  f"{host * 1e6:7.1f}us {gbps:7.0f} {100 * gbps / probe:5.0f}%")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"copy_gbps": probe, "records": records}, fh, indent=1)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
