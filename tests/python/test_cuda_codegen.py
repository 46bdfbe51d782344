"""The cuda backend without a GPU: every corpus graph generated as CUDA and compiled by
NVRTC for sm_80 and sm_90 (compile only), and the same generated kernels run by the host
emulation (g++ + the launch-model shim, backends/cuda_emulate.py) against plain NumPy:
indexing, broadcasting, strides, in-place writes and reductions.

Graphs the CUDA codegen does not generate yet (matmul, loops) are
skipped with that reason, and test_generated_cases pins how many are not, so a
regression cannot hide behind a skip."""

import copy
import os
import subprocess
import sys

import dynexpr
import numpy as np
import pytest
from compare import assert_same
from corpus import CASES
from dynexpr.backends import cuda_codegen, nvrtc
from dynexpr.backends.cuda_emulate import CudaEmulationBackend
from dynexpr.schedule import schedule
from test_corpus import _run_and_compare

# Its subject (compiler, cache files, generated text) does not depend on the CPython
# version: run_all.sh runs it on the first version only (conftest.py, one_python).
pytestmark = pytest.mark.one_python

IDS = [c.name for c in CASES]
ARCHS = ("sm_80", "sm_90")
needs_nvrtc = pytest.mark.skipif(nvrtc.available() is not None,
                                 reason=f"NVRTC not found: {nvrtc.available()}")


def _units(case):
    """The CUDA units of every graph of every input set of case, or the reason one of
    them is not generated yet (NotImplementedError's message)."""
    units = []
    for args in case.inputs(np.random.default_rng(7)):
        ex = dynexpr.explain(case.fn, *copy.deepcopy(args))
        for g in ex.graphs:
            flat = [a for a in args if isinstance(a, np.ndarray)]
            contiguous = {i for i, a in enumerate(flat) if a.flags.c_contiguous}
            try:
                units.append(cuda_codegen.generate(schedule(g), contiguous))
            except NotImplementedError as e:
                return None, str(e)
    return units, None


@needs_nvrtc
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_nvrtc_compiles_corpus(case):
    units, why = _units(case)
    if units is None:
        pytest.skip(f"not generated for CUDA yet: {why}")
    for unit in units:
        for arch in ARCHS:
            cubin = nvrtc._compile_one(unit.source, arch, nvrtc.FLAGS, "cubin", case.name)
            assert cubin[:4] == b"\x7fELF", f"{case.name}: NVRTC gave no cubin for {arch}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_emulation_matches_numpy(case):
    units, why = _units(case)
    if units is None:
        pytest.skip(f"not generated for CUDA yet: {why}")
    # automatic dynamic shapes: the input sets' second shape makes extents dynamic
    captured = dynexpr.capture(case.fn, backend=CudaEmulationBackend(strict=True))
    for args in case.inputs(np.random.default_rng(1234)):
        with np.errstate(all="ignore"):
            _run_and_compare(case, captured, args, 1234)
    breaks = [e.reason for e in captured.entries if e.compiled is None]
    assert not breaks, breaks


def test_generated_cases():
    """How much of the corpus the CUDA codegen covers (raise the bound as it grows)."""
    missing = {c.name: _units(c)[1] for c in CASES if _units(c)[0] is None}
    assert not missing, missing  # matmul included (Note [matmul through the library])


# ------------------------------------------------------------------------ op tests
_SPECIAL = {"float32": [0.0, -0.0, 1.0, -1.0, 0.5, np.nan, np.inf, -np.inf, 3.0, -2.5],
            "float64": [0.0, -0.0, 1.0, -1.0, 0.5, np.nan, np.inf, -np.inf, 3.0, -2.5]}


def _inputs(dtype, rng, n=64):
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool), rng.integers(0, 2, n).astype(bool)
    if dtype in ("float32", "float64"):
        a = (rng.standard_normal(n) * 3).astype(dtype)
        b = (rng.standard_normal(n) * 3).astype(dtype)
        a[:10] = _SPECIAL[dtype]
        b[:10] = _SPECIAL[dtype][::-1]
        return a, b
    lo = 0 if dtype == "uint8" else -40
    a = rng.integers(lo, 40, n).astype(dtype)
    b = rng.integers(lo, 40, n).astype(dtype)
    b[:3] = 0  # integer division and remainder by zero
    return a, b


def _ops_for(dtype, a, b):
    """The manifest's ufunc ops NumPy computes for two `dtype` arrays without float16 or
    int8 (which dynexpr does not have); integer power is tested on its own."""
    out = []
    for name in dynexpr.manifest.UFUNC_OPS:
        uf = getattr(np, name)
        if name == "power" and dtype not in ("float32", "float64"):
            continue
        try:
            with np.errstate(all="ignore"):
                r = uf(*(a, b)[:uf.nin])
        except TypeError:
            continue
        if r.dtype.name in dynexpr.manifest.DTYPES:
            out.append(name)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool"])
def test_ops_emulated(dtype):
    a, b = _inputs(dtype, np.random.default_rng(3))
    names = _ops_for(dtype, a, b)
    assert len(names) >= 5, names
    src = ("def f(a, b):\n    return (" +
           "".join(f"np.{n}({'a, b' if getattr(np, n).nin == 2 else 'a'}), " for n in names)
           + ")\n")
    ns = {"np": np}
    exec(compile(src, f"<ops {dtype}>", "exec"), ns)
    f = ns["f"]
    captured = dynexpr.capture(f, backend=CudaEmulationBackend(strict=True))
    with np.errstate(all="ignore"):
        expected = f(a, b)
        got = captured(a, b)
    for name, e, g in zip(names, expected, got):
        assert_same(e, g, f"np.{name} on {dtype}", {"float32": (2e-6, 0), "float64": (1e-14, 0)})


@needs_nvrtc
def test_every_op_compiles_for_the_device():
    """One unit using every op on every dtype it takes, through NVRTC (the device math
    library is not the host's: this is where a body that does not compile shows)."""
    srcs = []
    for dtype in ("float32", "float64", "int32", "int64", "uint8", "bool"):
        a, b = _inputs(dtype, np.random.default_rng(3), 16)
        for name in _ops_for(dtype, a, b) + (["power"] if dtype in ("int32", "int64") else []):
            ns = {"np": np}
            nin = getattr(np, name).nin
            exec(f"def f(a, b):\n    return np.{name}({'a, b' if nin == 2 else 'a'})\n", ns)
            g = dynexpr.explain(ns["f"], a, b).graphs[0]
            srcs.append(cuda_codegen.generate(schedule(g), {0, 1}).source)
    # kernels of all units in one program: the prelude once, names made unique
    prelude_end = srcs[0].index('extern "C"')
    body = [srcs[0][:prelude_end]]
    for n, s in enumerate(srcs):
        body.append(s[s.index('extern "C"'):].replace("void __launch_bounds__(256) k",
                                                      f"void __launch_bounds__(256) u{n}_k"))
    cubin = nvrtc._compile_one("\n".join(body), "sm_90", nvrtc.FLAGS, "cubin", "ops.cu")
    assert cubin[:4] == b"\x7fELF"


def test_integer_power_negative_exponent_raises():
    def f(a, b):
        return a ** b

    a = np.arange(1, 9, dtype=np.int64)
    captured = dynexpr.capture(f, backend=CudaEmulationBackend(strict=True))
    b = np.full(8, 2, dtype=np.int64)
    assert_same(f(a, b), captured(a, b))
    b[3] = -1
    with pytest.raises(ValueError, match="negative integer powers"):
        f(a, b)
    with pytest.raises(ValueError, match="negative integer powers"):
        captured(a, b)


# ----------------------------------------------------- kernels' logic, case by case
def _emulated(f):
    return dynexpr.capture(f, backend=CudaEmulationBackend(strict=True), dynamic=False)


def _reduce_all(x):
    return (x.sum(), x.sum(axis=0), x.sum(axis=1, keepdims=True), x.prod(axis=1),
            x.min(), x.max(axis=0, keepdims=True), x.min(axis=1), x.mean(axis=1),
            x.mean(), (x > 0).any(axis=1), (x > 0).all(axis=0), (x > 0).sum())


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_reductions_one_and_two_kernels(dtype):
    """3 x 5000: a row (5000 > BLOCK * 16) and the whole array take the grid reduction
    (G > 1 blocks per output, then a second kernel); columns take one block each."""
    rng = np.random.default_rng(5)
    if dtype.startswith("float"):
        x = (1 + rng.standard_normal((3, 5000)) * 1e-3).astype(dtype)
        x[1, 17] = -2.0
    else:
        x = rng.integers(-3, 4, (3, 5000)).astype(dtype)
    expected = _reduce_all(x)
    got = _emulated(_reduce_all)(x)
    assert_same(expected, got, f"reductions of {dtype}",
                {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)})


def _moments(x):
    return (x.var(), x.var(axis=1), x.std(axis=0, keepdims=True), x.var(axis=1, ddof=1),
            np.std(x, ddof=1), x.var(axis=0, ddof=3))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_var_and_std(dtype):
    """Two reductions (the mean into a workspace, then the squared deviations), in the
    one- and two-kernel forms (rows of 5000), ddof included; ddof >= n gives NumPy's
    inf/nan."""
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((3, 5000)) * 10).astype(dtype)
    with np.errstate(all="ignore"):
        expected = _moments(x)
        got = _emulated(_moments)(x)
    assert_same(expected, got, f"moments of {dtype}",
                {"float32": (1e-4, 1e-6), "float64": (1e-11, 1e-13)})


def _args(x):
    return (x.argmax(), x.argmin(), x.argmax(axis=0), x.argmin(axis=1),
            np.argmax(x, axis=1, keepdims=True), np.argmin(x, keepdims=True))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool"])
def test_argmin_argmax(dtype):
    """NumPy's first extreme (ties to the smaller index) and first NaN, across the
    threads' strided shares and the block's tree (rows of 700 > BLOCK)."""
    rng = np.random.default_rng(9)
    x = rng.integers(-5, 6, (4, 700)).astype(dtype)  # many ties
    if dtype.startswith("float"):
        x[1, 300] = np.nan
        x[1, 600] = np.nan
        x[3, 5] = np.nan
    assert_same(_args(x), _emulated(_args)(x), f"arg reductions of {dtype}")


def test_reduction_order_is_fixed_by_the_sizes():
    """Note [cuda kernels]: the partial count and block size depend on the sizes only."""
    def f(x):
        return x.sum()

    x = np.ones(100000, np.float32)
    g = dynexpr.explain(f, x).graphs[0]
    a = cuda_codegen.generate(schedule(g), {0})
    b = cuda_codegen.generate(schedule(g), {0})
    assert a.source == b.source and a.launches == b.launches
    assert len(a.launches) == 2 and a.launches[0].grid > 1 and a.launches[1].grid == 1


def test_strided_and_broadcast_inputs():
    def f(x, y, z):
        return x * y + np.sin(z)[:, None] - x.T.T[::-1] * 2.0

    rng = np.random.default_rng(2)
    base = rng.standard_normal((12, 10))
    x = base.T[:, ::2]            # (10, 6), neither C- nor F-contiguous
    y = rng.standard_normal(12)[::2]   # (6,), stride 2, broadcast along rows
    z = rng.standard_normal(10)
    assert not x.flags.c_contiguous and not y.flags.c_contiguous
    assert_same(f(x, y, z), _emulated(f)(x, y, z))
    g = dynexpr.explain(f, x, y, z).graphs[0]
    unit = cuda_codegen.generate(schedule(g), {2})
    assert unit.arrays["x0"].strided and "x0s0" in unit.source  # strides as parameters


def test_in_place_updates_that_read_themselves():
    """x[1:] = x[:-1] + 1 reads what it overwrites: on a GPU that is a race, so it goes
    through a workspace copy; NumPy computes the right-hand side first."""
    def shift(x):
        x[1:] = x[:-1] + 1.0
        return x

    def reverse(x):
        x[:] = x[::-1] * 2.0
        return x.sum()

    for f in (shift, reverse):
        x = np.arange(2000, dtype=np.float64)
        x2 = x.copy()
        expected = f(x)
        got = _emulated(f)(x2)
        assert_same(expected, got, f.__name__)
        assert_same(x, x2, f"{f.__name__}: the argument")


def test_64_bit_indices_only_where_sizes_need_them():
    def f(x):
        return np.tanh(x) * 2.0

    small = np.ones((4, 5), np.float32)
    assert cuda_codegen.generate(
        schedule(dynexpr.explain(f, small).graphs[0]), {0}).index_type == "int"
    huge = np.broadcast_to(np.float32(1), (3, 2 ** 30))  # 3 * 2**30 elements, no memory
    unit = cuda_codegen.generate(schedule(dynexpr.explain(f, huge).graphs[0]), set())
    assert unit.index_type == "long long"
    if nvrtc.available() is None:
        assert nvrtc._compile_one(unit.source, "sm_90", nvrtc.FLAGS, "cubin", "big")[:4] \
            == b"\x7fELF"


# ------------------------------------------------------------------ NVRTC and cache
@needs_nvrtc
def test_nvrtc_cache_is_keyed_by_arch_and_reused(tmp_path, monkeypatch):
    from dynexpr import cache

    monkeypatch.setattr(dynexpr.config, "cache_dir", str(tmp_path))
    cache.reset()

    def f(x):
        return np.exp(x) + 1.0

    src = cuda_codegen.generate(schedule(
        dynexpr.explain(f, np.ones(8, np.float32)).graphs[0]), {0}).source
    a = nvrtc.compile_cached(src, "sm_80")
    hits = cache.stats["hits"]
    again = nvrtc.compile_cached(src, "sm_80")
    b = nvrtc.compile_cached(src, "sm_90")
    assert again.path == a.path and cache.stats["hits"] == hits + 1
    assert b.path != a.path and a.meta["arch"] == "sm_80" and b.meta["arch"] == "sm_90"
    assert a.path.read_bytes()[:4] == b"\x7fELF"
    assert b".target sm_80" in (a.dir / "kernel.ptx").read_bytes()
    assert nvrtc.key(src, "sm_80") != nvrtc.key(src, "sm_80", nvrtc.FLAGS + ("-G",))


@needs_nvrtc
def test_nvrtc_errors_carry_the_log():
    with pytest.raises(nvrtc.NvrtcError, match=r"broken\.cu.*sm_90(.|\n)*undefined"):
        nvrtc.compile('extern "C" __global__ void k() { undefined_thing(); }', "sm_90",
                      name="broken.cu")
    with pytest.raises(ValueError, match="not a CUDA architecture"):
        nvrtc.compile("", "90")


def test_import_and_cpu_capture_load_no_cuda_library():
    """`import dynexpr` and the cpu backend never load NVRTC or libcuda; a missing NVRTC
    is reported with the way out."""
    code = ("import numpy as np, dynexpr\n"
            "f = dynexpr.capture(lambda x: x + 1, backend='eager')\n"
            "f(np.ones(3))\n"
            "maps = open('/proc/self/maps').read()\n"
            "assert 'libnvrtc' not in maps and 'libcuda' not in maps, 'loaded'\n"
            "from dynexpr.backends import nvrtc\n"
            "nvrtc._candidates = lambda: ['/nonexistent/libnvrtc.so']\n"
            "print(nvrtc.available())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                       env={**os.environ, "DYNEXPR_BACKGROUND_COMPILE": "0"})
    assert r.returncode == 0, r.stderr
    assert "nvidia-cuda-nvrtc" in r.stdout and "DYNEXPR_NVRTC" in r.stdout


def test_cuda_backend_is_registered_and_reports_why_it_cannot_run():
    from dynexpr import backends
    from dynexpr.backends import cuda_driver

    b = backends.get("cuda")
    assert b.name == "cuda"
    if cuda_driver.available() is not None:  # this machine: no libcuda
        assert b.unavailable() is not None


def test_dynamic_extents_are_kernel_parameters():
    """One unit for every size: extents are parameters, grids and the reduction's
    partial count are computed per call from them (with the static rule)."""
    def f(x):
        return np.tanh(x) * 2.0 + x.sum(axis=-1, keepdims=True) - x.mean()

    units = []

    class Recording(CudaEmulationBackend):
        def codegen(self, graph, example_inputs, *, fuse=True):
            plan = super().codegen(graph, example_inputs, fuse=fuse)
            units.append(plan.detail)
            return plan

    captured = dynexpr.capture(f, backend=Recording(strict=True), dynamic=True)
    rng = np.random.default_rng(4)
    for shape in ((3, 5), (4, 7), (2, 5000), (70, 3)):
        x = rng.standard_normal(shape)
        assert_same(f(x), captured(x), f"shape {shape}")
    assert len(units) == 1, "one unit for every shape"
    unit = units[0]
    assert unit.schedule.symbols, "the graph should have dynamic extents"
    assert "long long n_s" in unit.source and unit.index_type == "long long"
    assert any(isinstance(la.grid, str) for la in unit.launches)
    if nvrtc.available() is None:
        assert nvrtc._compile_one(unit.source, "sm_80", nvrtc.FLAGS, "cubin", "dyn")[:4] \
            == b"\x7fELF"


# ------------------------------------------------------------------ row kernels
def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layernorm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * g + b


def _logsumexp_and_rms(x):
    m = x.max(axis=(1, 2), keepdims=True)
    lse = np.log(np.exp(x - m).sum(axis=(1, 2), keepdims=True)) + m
    return lse, x / np.sqrt((x * x).mean(axis=(1, 2), keepdims=True) + 1e-6)


def _row_units(f, args):
    from dynexpr.capture.translate import translate

    tr = translate(f, list(args), None, False)
    return cuda_codegen.generate(schedule(tr.graph), {0})


@pytest.mark.parametrize("f,args", [
    (_softmax, ((37, 300), "float32")),
    (_layernorm, ((5, 1000), "float64")),
    (_logsumexp_and_rms, ((6, 4, 70), "float32")),
])
def test_row_normalisations_are_one_kernel_per_row(f, args):
    """Note [cuda row kernels]: softmax, layernorm (with var), logsumexp and an RMS norm
    over two axes are each one launch, a block per row; the temporaries read only inside
    the row (exp(x - max)) are recomputed, not stored; results match NumPy emulated, for
    rows shorter and longer than a block, and NVRTC compiles the kernel."""
    rng = np.random.default_rng(11)
    shape, dtype = args
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    extra = [rng.standard_normal(shape[-1:]).astype(dtype) for _ in range(2)] \
        if f is _layernorm else []
    unit = _row_units(f, [x, *extra])
    assert len(unit.launches) == 1, [la.kernel for la in unit.launches]
    assert "DXCU_SHARED" in unit.source and "row += gridDim.x" in unit.source
    assert not any(name.startswith("t") for name in unit.arrays), "a row temporary was stored"
    got = _emulated(f)(x, *extra)
    assert_same(f(x, *extra), got, f.__name__,
                {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-13)})
    if nvrtc.available() is None:
        for arch in ARCHS:
            assert nvrtc._compile_one(unit.source, arch, nvrtc.FLAGS, "cubin",
                                      f.__name__)[:4] == b"\x7fELF"


def test_row_kernel_with_dynamic_rows_and_a_strided_input():
    """Rows as a dynamic extent (the grid is computed per call) and a transposed input
    read through its strides."""
    captured = dynexpr.capture(_softmax, backend=CudaEmulationBackend(strict=True),
                               dynamic=True)
    rng = np.random.default_rng(12)
    for rows in (2, 9, 300):
        x = rng.standard_normal((rows, 40))
        assert_same(_softmax(x), captured(x), f"{rows} rows")
    xt = rng.standard_normal((40, 17)).T  # (17, 40), not C-contiguous
    assert_same(_softmax(xt), _emulated(_softmax)(xt), "strided")


def test_run_gpu_plans_here_and_says_why_it_cannot_run():
    """bench/python/run_gpu.py (tests/gpu/run.sh runs it on a GPU): its plan prints on any
    machine; without a device it exits 2 naming what is missing, and runs nothing."""
    script = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "python",
                          "run_gpu.py")
    plan = subprocess.run([sys.executable, script, "--list", "--quick"], capture_output=True,
                          text=True, check=True).stdout
    assert "softmax_rows" in plan and "cupy_fuse" in plan and "torch_compile" in plan
    from dynexpr.backends import cuda_driver
    if nvrtc.available() is None and cuda_driver.available() is None:
        pytest.skip("a CUDA driver is present: tests/gpu/run.sh runs the benchmark")
    proc = subprocess.run([sys.executable, script, "--quick"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2 and "cannot run here" in proc.stderr


# ------------------------------------------------------------ the scientific corpus
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "scientific"))
from sci_registry import all_cases, assert_close

SCI = [c for c in all_cases() if not c.xfail]


@pytest.mark.parametrize("c", SCI, ids=[c.name for c in SCI])
def test_scientific_corpus_emulated(c):
    """Graphs the CUDA codegen generates run emulated, the others (matmul, loops: named)
    with NumPy; the whole call matches plain NumPy, arguments included."""
    generated, missing = [], []

    class Counting(CudaEmulationBackend):
        def codegen(self, graph, example_inputs, *, fuse=True):
            try:
                cuda_codegen.generate(schedule(graph, fuse=fuse), set())
                generated.append(graph)
            except NotImplementedError as e:
                missing.append(str(e))
            return super().codegen(graph, example_inputs, fuse=fuse)

    args = c.test(np.random.default_rng(2026))
    captured = dynexpr.capture(c.fn, backend=Counting())
    for _ in range(2):
        plain, mine = copy.deepcopy(args), copy.deepcopy(args)
        with np.errstate(all="ignore"):
            expected = c.fn(*plain)
            got = captured(*mine)
        assert_close(expected, got, "result", c.tol)
        for i, (e, g) in enumerate(zip(plain, mine)):
            if isinstance(e, np.ndarray):
                assert_close(e, g, f"argument {i} after the call", c.tol)
    # A function whose loop breaks from its start runs as real bytecode: no graph at all.
    graphs = dynexpr.explain(c.fn, *copy.deepcopy(args)).graph_count
    assert bool(generated or missing) == bool(graphs), (graphs, generated, missing)
    for why in missing:
        assert "matmul" in why or "loop" in why, why


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_vector_loads_where_aligned_and_the_element_loop_elsewhere(dtype):
    """Note [vector loads]: a contiguous same-shape kernel moves 16 bytes per access when
    every pointer is aligned; a view at an odd offset takes the element loop, and the
    n % width remainder the tail loop. Both against NumPy, through the emulation."""
    def f(x, y):
        return x * 3 + y * y

    rng = np.random.default_rng(5)
    base = (rng.standard_normal(1004) * 10).astype(dtype)
    other = (rng.standard_normal(1003) * 10).astype(dtype)
    ex = dynexpr.explain(f, base[:1003], other)
    unit = cuda_codegen.generate(schedule(ex.graphs[0]), {0, 1})
    width = 16 // np.dtype(dtype).itemsize
    assert f"dxcu_vec<{cuda_codegen.CT[dtype]}, {width}>" in unit.source
    captured = dynexpr.capture(f, backend=CudaEmulationBackend(strict=True), dynamic=False)
    for x in (base[:1003], base[1:]):  # aligned, then 1 element off (element loop)
        got = captured(x, other)
        np.testing.assert_array_equal(got, f(x, other))
        assert got.dtype == f(x, other).dtype
