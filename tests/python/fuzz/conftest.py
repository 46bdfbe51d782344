"""Hypothesis profiles of the differential fuzzer (test_fuzz.py).

    pytest tests/python/fuzz                          # 'ci': fixed examples, ~1-2 minutes
    pytest tests/python/fuzz --hypothesis-profile=long   # 20,000 random programs (hours)
    pytest tests/python/fuzz --hypothesis-profile=shrink # 'ci' that also shrinks a failure

Without --hypothesis-profile (the whole suite, CI) the 'ci' profile runs. No profile
keeps a Hypothesis database: a run must not need a writable .hypothesis/ in the checkout,
and every program a failure needs is printed in full (its source and input seed).
Shrinking is off except in 'shrink': each step compiles a new C++ unit (seconds).
"""

import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir

import dynexpr

# Hypothesis also keeps a cache of its own (constants found in source files) under
# ./.hypothesis; it goes beside the kernel cache instead, so the checkout stays clean
# and may be read-only (Hypothesis skips that cache where it cannot write).
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(os.path.join(dynexpr.config.cache_dir, "hypothesis"))

_COMMON = dict(
    database=None,
    deadline=None,  # a new program shape compiles a C++ unit: seconds, not milliseconds
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much, HealthCheck.large_base_example],
    print_blob=False,
)
# 'ci': derandomized (the same programs every run). max_examples is sized to run in about
# 60-120 s on a cold kernel cache on a 2-core machine (measured: see test_fuzz.py).
settings.register_profile("ci", max_examples=90, derandomize=True,
                          phases=(Phase.explicit, Phase.generate), **_COMMON)
settings.register_profile("shrink", max_examples=90, derandomize=True, **_COMMON)
# 'long': random programs; a failure is logged and the run goes on (test_fuzz.py).
settings.register_profile("long", max_examples=20_000, phases=(Phase.explicit, Phase.generate),
                          **_COMMON)


def pytest_configure(config):
    # Hypothesis's own plugin loads --hypothesis-profile; without it, this suite is 'ci'.
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("ci")


def pytest_terminal_summary(terminalreporter):
    import sys

    check = sys.modules.get("fuzz_check")
    if check is not None and check.STATS["programs"]:
        terminalreporter.write_line(
            "dynexpr fuzz: " + ", ".join(f"{k} {v}" for k, v in check.STATS.items()))
