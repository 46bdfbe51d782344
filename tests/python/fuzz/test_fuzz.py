"""Differential fuzzing: random NumPy programs (fuzz_programs.py), run plainly and with
dynexpr.capture (cpu backend, compiled kernels, background compile off), must agree on
values, dtypes, shapes, result types, argument mutations and exception types
(fuzz_check.py). Profiles: conftest.py.

With the 'long' profile a failing program is appended to $DYNEXPR_FUZZ_FAILURES (default
fuzz-failures.log in the kernel cache directory) and the run goes on; the test fails at
the end if any did.
"""

import os

from hypothesis import given, settings

import dynexpr
from fuzz_check import STATS, check_program
from fuzz_programs import programs


def _failure_log() -> str:
    return os.environ.get("DYNEXPR_FUZZ_FAILURES") or os.path.join(
        dynexpr.config.cache_dir, "fuzz-failures.log")


def _fuzz(run, failures: list) -> None:
    run()
    assert not failures, (f"{len(failures)} of {STATS['programs']} programs failed (see "
                          f"{_failure_log()}); the first:\n{failures[0]}")


def _check(prog, failures: list) -> None:
    try:
        check_program(prog, str(STATS["programs"]))
    except AssertionError as err:
        if settings.get_current_profile_name() != "long":
            raise
        failures.append(str(err))
        with open(_failure_log(), "a") as fh:
            fh.write(f"=== failure {len(failures)}\n{err}\n")


# The profile's examples in two halves, two tests that pytest-xdist runs side by side (one
# test of 90 programs was the last to finish on each Python). Their source differs, so the
# derandomized profile draws different programs for each.
def _half() -> settings:
    return settings(max_examples=max(1, settings.default.max_examples // 2))


def test_captured_programs_match_numpy_first_half():
    failures: list = []

    @_half()
    @given(programs())
    def run_first_half(prog):
        _check(prog, failures)

    _fuzz(run_first_half, failures)


def test_captured_programs_match_numpy_second_half():
    failures: list = []

    @_half()
    @given(programs())
    def run_second_half(prog):
        _check(prog, failures)

    _fuzz(run_second_half, failures)
