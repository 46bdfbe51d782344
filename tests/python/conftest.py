"""pytest setup for dynexpr's Python tests: runs from a source checkout (bridge/ on
sys.path when dynexpr is not installed) and starts every test from a clean state."""

import os
import sys
import warnings

# Subprocesses the tests start (a second process on the same cache) compile in the
# foreground too: see the fixture below.
os.environ.setdefault("DYNEXPR_BACKGROUND_COMPILE", "0")
# ... and run their compiled path on every call (Note [judging an entry]).
os.environ.setdefault("DYNEXPR_PLAIN_FALLBACK", "0")

try:
    import dynexpr  # noqa: F401  (an installed or editable dynexpr)
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bridge"))
    import dynexpr  # noqa: F401

import pytest

BACKENDS = ["eager", "cpu"]


def pytest_configure(config):
    # run_all.sh runs the whole suite on its first CPython version, then `-m "not
    # one_python"` on the others: these modules test the compiler, the cache's files and
    # generated text, none of which depends on the interpreter's version (capture,
    # which does, is in the modules that run on every version).
    config.addinivalue_line(
        "markers", "one_python: subject independent of the CPython version (run once)")


@pytest.fixture(autouse=True)
def _fresh_dynexpr():
    dynexpr.reset()
    saved = {
        k: getattr(dynexpr.config, k)
        for k in ("recompile_limit", "suppress_errors", "accumulated_recompile_limit",
                  "background_compile", "plain_fallback", "resume_as_code")
    }
    # The tests check the compiled kernels, so the first call waits for the compiler
    # instead of running NumPy meanwhile (test_background.py tests that tier).
    dynexpr.config.background_compile = False
    # Every call of a test runs the compiled path, not the plain function that judging
    # may pick (test_never_slower.py turns it on).
    dynexpr.config.plain_fallback = False
    with warnings.catch_warnings():
        # Until the native runtime lands, backend="cpu" falls back to eager with a warning.
        warnings.filterwarnings("ignore", message=".*backend='cpu' is not available.*")
        yield
    for k, v in saved.items():
        setattr(dynexpr.config, k, v)


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(scope="session")
def shared_pch():
    """The session cache's precompiled prelude directory (built once); see
    cache_testing.py for tests that link it into caches of their own."""
    from dynexpr import cache, cxx

    cache.reset()
    d = cxx.ensure_pch()
    assert d is not None
    return d


# The scientific corpus's record (graphs, breaks, first-call seconds per function and
# backend, tests/python/scientific/) printed after the run. It lives here, not in that
# folder's conftest: under -n 2 the controller collects nothing, so only this root
# conftest's hooks run there; the rows travel as user_properties.
def pytest_terminal_summary(terminalreporter):
    rows = []
    for report in terminalreporter.stats.get("passed", []):
        rows += [v for k, v in getattr(report, "user_properties", ()) if k == "scientific"]
    if not rows:
        return
    tr = terminalreporter
    tr.section("scientific corpus: graphs, breaks, first call (translate + compile)")
    tr.write_line(f"{'function':26} {'backend':7} {'graphs':>6} {'breaks':>6} {'first call':>10}")
    for name, backend, graphs, breaks, first in sorted(rows):
        tr.write_line(f"{name:26} {backend:7} {graphs:>6} {breaks:>6} {first:>9.2f}s")
