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


def test_captured_programs_match_numpy():
    keep_going = settings.get_current_profile_name() == "long"
    failures = []

    @given(programs())
    def run(prog):
        try:
            check_program(prog, str(STATS["programs"]))
        except AssertionError as err:
            if not keep_going:
                raise
            failures.append(str(err))
            with open(_failure_log(), "a") as fh:
                fh.write(f"=== failure {len(failures)}\n{err}\n")

    run()
    assert not failures, (f"{len(failures)} of {STATS['programs']} programs failed (see "
                          f"{_failure_log()}); the first:\n{failures[0]}")
