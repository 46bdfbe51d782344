"""Precompiled bundles (issue 15 parts 1-4): a manifest precompiled into a bundle, run in
a fresh process with no compiler on PATH and an empty cache (0 compiles, NumPy's
results); a call the bundle lacks warns once with its diff to the nearest entry; a
changed byte, a wrong key or an ISA level the CPU lacks refuses the bundle before any
unit is loaded. The bundle is built once per module (precompile of 3 specs for
x86-64-v3, in the session's cache, so a second run compiles nothing)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dynexpr.artifacts import bundle, isa, manifest

MODULE = textwrap.dedent('''
    import numpy as np

    def axpy(a, x, y):
        return a * x + np.tanh(y)

    def norm_rows(x):
        return x / np.sqrt((x * x).sum(axis=1, keepdims=True))

    def scaled(x, s):
        return np.exp(-x * s) + 1.0

    def branchy(x):
        if float(x.sum()) > 0:   # data-dependent: a graph break
            return x + 1
        return x - 1
''')

MANIFEST = textwrap.dedent('''
    [[spec]]
    function = "bmod:axpy"
    args = [
      { name = "a", value = 2.0 },
      { name = "x", dtype = "float64", shape = [1000], layout = "C" },
      { name = "y", dtype = "float64", shape = [1000], layout = "C" },
    ]

    [[spec]]
    function = "bmod:norm_rows"
    args = [{ name = "x", dtype = "float32", shape = [16, 8], layout = "C" }]

    [[spec]]
    function = "bmod:scaled"
    args = [
      { name = "x", dtype = "float64", shape = [{ min = 2, max = 100000, example = 500 }] },
      { name = "s", value = 0.5 },
    ]
''')

# Run in a fresh process: load the bundle, call the functions, report as JSON.
USE = textwrap.dedent('''
    import json, sys, warnings
    import numpy as np
    import dynexpr, bmod
    from dynexpr import cache
    out = {"level": dynexpr.load_artifacts(sys.argv[1]), "ok": [], "warnings": []}
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(1000), rng.standard_normal(1000)
    m = rng.standard_normal((16, 8)).astype(np.float32)
    z = rng.standard_normal(777)
    dynexpr.mark_dynamic(z, 0, min=2, max=100000)
    cases = [(bmod.axpy, (2.0, x, y)), (bmod.norm_rows, (m,)), (bmod.scaled, (z, 0.5))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fn, args in cases:
            f = dynexpr.capture(fn)
            got, want = f(*args), fn(*args)
            out["ok"].append([fn.__name__, bool(np.allclose(got, want, rtol=1e-5, atol=1e-6)),
                              str(got.dtype) == str(want.dtype) and got.shape == want.shape,
                              type(f.entries[0].compiled).__name__])
        out["compiles"] = cache.stats["compiles"]
        if len(sys.argv) > 2:  # a call the bundle lacks, twice: one warning
            f = dynexpr.capture(bmod.axpy)
            x32, y32 = x.astype(np.float32), y.astype(np.float32)
            for _ in range(2):
                got = f(2.0, x32, y32)
            want = bmod.axpy(2.0, x32, y32)
            out["miss_ok"] = bool(np.allclose(got, want, rtol=1e-5)) and got.dtype == want.dtype
    out["warnings"] = [str(w.message) for w in caught]
    print("RESULT " + json.dumps(out))
''')


def no_compiler_env(tmp: Path, **extra) -> dict:
    """A process with no compiler on PATH (and no CXX) and an empty cache."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CXX", "CC", "DYNEXPR_ARTIFACTS", "DYNEXPR_BUNDLE_KEY")}
    env.update(PATH=str(tmp / "empty-bin"), DYNEXPR_CACHE_DIR=str(tmp / "empty-cache"),
               DYNEXPR_BACKGROUND_COMPILE="0", **extra)
    (tmp / "empty-bin").mkdir(exist_ok=True)
    return env


def use(work: Path, bundle_dir: Path, env: dict, *flags) -> dict:
    proc = subprocess.run([sys.executable, "use.py", str(bundle_dir), *flags], cwd=work,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("bundle")
    (work / "bmod.py").write_text(MODULE)
    (work / "use.py").write_text(USE)
    (work / "m.toml").write_text(MANIFEST)
    env = dict(os.environ)
    env.pop("DYNEXPR_BUNDLE_KEY", None)
    proc = subprocess.run([sys.executable, "-m", "dynexpr", "precompile", "m.toml", "-o",
                           "out", "-j", "2", "--isa", "x86-64-v3"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return work, work / "out", proc.stdout


def test_precompile_prints_its_table_and_the_highway_target(built):
    work, out, stdout = built
    assert "x86-64-v3: Highway target AVX2" in stdout
    for fn in ("bmod:axpy", "bmod:norm_rows", "bmod:scaled"):
        assert fn in stdout
    index = json.loads((out / "bundle.json").read_text())
    assert set(index["isas"]) == {"x86-64-v3"}
    assert len(index["isas"]["x86-64-v3"]["units"]) == 3
    assert "-march=x86-64-v3" in index["isas"]["x86-64-v3"]["flags"]


def test_a_bundle_runs_with_no_compiler_and_an_empty_cache(built, tmp_path):
    work, out, _ = built
    # Copied elsewhere: units find the runtime library relative to themselves.
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    res = use(work, moved, no_compiler_env(tmp_path), "miss")
    assert res["level"] == "x86-64-v3"
    assert res["compiles"] == 0
    for name, values_ok, kind_ok, callable_type in res["ok"]:
        assert values_ok and kind_ok, name
        assert callable_type == "Kernel", name  # the bundle's unit, not NumPy
    assert res["miss_ok"]
    # The uncovered call: one warning, naming it and its diff to the nearest entry.
    misses = [w for w in res["warnings"] if "is not in the loaded bundle" in w]
    assert len(misses) == 1, res["warnings"]
    assert "bmod:axpy(a=2.0, x: float32[1000] C, y: float32[1000] C)" in misses[0]
    assert "x: dtype float32 (this call) vs float64 (bundle)" in misses[0]
    assert "runs with NumPy instead" in misses[0]
    assert len(res["warnings"]) == 1, res["warnings"]


def test_one_changed_byte_refuses_the_bundle_before_loading(built, tmp_path):
    _, out, _ = built
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    so = next(bad.rglob("unit.so"))
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0x01
    so.write_bytes(bytes(data))
    from dynexpr import cache

    before = dict(cache.bundled)
    with pytest.raises(bundle.BundleError, match="does not match its sha256"):
        bundle.load(bad)
    assert cache.bundled == before  # nothing of it was installed


def test_a_tampered_bundle_in_the_environment_warns_and_the_call_is_still_right(built,
                                                                               tmp_path):
    work, out, _ = built
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    idx = bad / "bundle.json"
    idx.write_text(idx.read_text().replace("x86-64-v3", "x86-64-v3 "))
    script = ("import numpy as np, warnings, bmod, dynexpr\n"
              "x = np.ones(1000)\n"
              "r = dynexpr.capture(bmod.axpy)(2.0, x, x)\n"
              "print('RESULT', bool(np.allclose(r, bmod.axpy(2.0, x, x))))\n")
    env = no_compiler_env(tmp_path, DYNEXPR_ARTIFACTS=str(bad))
    proc = subprocess.run([sys.executable, "-c", script], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "RESULT True" in proc.stdout
    assert "bundle.json does not match its sha256" in proc.stderr


def test_signing(built, tmp_path, monkeypatch):
    _, out, _ = built
    signed = tmp_path / "signed"
    shutil.copytree(out, signed)
    monkeypatch.setenv("DYNEXPR_BUNDLE_KEY", "k1")
    bundle.seal(signed)
    assert (signed / "SIGNATURE").is_file()
    assert bundle.verify(signed)["isas"]  # the right key verifies
    monkeypatch.setenv("DYNEXPR_BUNDLE_KEY", "k2")
    with pytest.raises(bundle.BundleError, match="signature does not match"):
        bundle.verify(signed)
    monkeypatch.delenv("DYNEXPR_BUNDLE_KEY")
    with pytest.raises(bundle.BundleError, match="it is signed"):
        bundle.verify(signed)
    # An unsigned bundle is refused while a key is set.
    monkeypatch.setenv("DYNEXPR_BUNDLE_KEY", "k1")
    with pytest.raises(bundle.BundleError, match="not signed"):
        bundle.verify(out)
    # Changing SHA256SUMS along with a file does not pass the signature.
    sums = signed / "SHA256SUMS"
    sums.write_text(sums.read_text().replace("bundle.json", "bundle.json "))
    with pytest.raises(bundle.BundleError, match="signature does not match"):
        bundle.verify(signed)


def test_a_level_the_cpu_lacks_is_not_loaded(built, tmp_path):
    _, out, _ = built
    index = bundle.verify(out)
    v3 = set(isa.LEVELS["x86-64-v3"][1])
    assert bundle.choose_level(index, out, have=v3) == "x86-64-v3"
    with pytest.raises(bundle.BundleError, match="x86-64-v3 needs avx2"):
        bundle.choose_level(index, out, have=v3 - {"avx2"})
    # Of two levels, the best one the CPU runs.
    two = dict(index, isas=dict(index["isas"], **{"x86-64-v4": index["isas"]["x86-64-v3"]}))
    two["isas"]["x86-64-v4"] = dict(two["isas"]["x86-64-v4"],
                                    requires=list(isa.LEVELS["x86-64-v4"][1]))
    assert bundle.choose_level(two, out, have=v3) == "x86-64-v3"
    assert bundle.choose_level(two, out, have=set(isa.LEVELS["x86-64-v4"][1])) == "x86-64-v4"
    # A bundle (properly sealed) whose only level needs a flag this CPU lacks is refused.
    other = tmp_path / "other"
    shutil.copytree(out, other)
    idx = json.loads((other / "bundle.json").read_text())
    idx["isas"]["x86-64-v3"]["requires"].append("no_cpu_has_this_flag")
    (other / "bundle.json").write_text(json.dumps(idx))
    bundle.seal(other)
    with pytest.raises(bundle.BundleError, match="needs no_cpu_has_this_flag"):
        bundle.load(other)


def test_precompile_exits_nonzero_naming_the_function_that_breaks(built, tmp_path):
    work, _, _ = built
    (work / "brk.toml").write_text(textwrap.dedent('''
        [[spec]]
        function = "bmod:branchy"
        args = [{ name = "x", dtype = "float64", shape = [100], layout = "C" }]
    '''))
    proc = subprocess.run([sys.executable, "-m", "dynexpr", "precompile", "brk.toml", "-o",
                           str(tmp_path / "nb"), "--isa", "x86-64-v3"], cwd=work,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "bmod:branchy(x: float64[100] C) [x86-64-v3]: graph break" in proc.stderr
    assert not (tmp_path / "nb").exists()


def test_recording_from_processes_at_once_writes_each_spec_once(tmp_path):
    (tmp_path / "rmod.py").write_text(MODULE)
    script = textwrap.dedent('''
        import sys, numpy as np, dynexpr, rmod
        n = int(sys.argv[1])
        f = dynexpr.capture(rmod.axpy, backend="eager")
        np.testing.assert_allclose(f(2.0, np.ones(n), np.ones(n)),
                                   rmod.axpy(2.0, np.ones(n), np.ones(n)))
        g = dynexpr.capture(rmod.norm_rows, backend="eager")
        x = np.ones((4, 3), np.float32)
        np.testing.assert_allclose(g(x), rmod.norm_rows(x))
    ''')
    env = dict(os.environ, DYNEXPR_RECORD=str(tmp_path / "rec.toml"))
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)], cwd=tmp_path, env=env)
             for n in (10, 10, 20, 20)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    specs = manifest.load(tmp_path / "rec.toml")
    got = sorted((s["function"], json.dumps(s["args"])) for s in specs)
    assert len(got) == 3, got  # axpy at 10, axpy at 20, norm_rows: each once
    assert [s["function"] for s in specs].count("rmod:norm_rows") == 1
    shapes = sorted(s["args"][1]["shape"][0] for s in specs if s["function"] == "rmod:axpy")
    assert shapes == [10, 20]
    assert all(s["backend"] == "eager" for s in specs)
