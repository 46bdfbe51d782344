"""mode="max-autotune": a new kernel times its parallel schedules on the first call's
inputs, keeps the fastest in the cache index, and later processes use it untimed."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynexpr
from compare import assert_same
from dynexpr import autotune, cache

# A constant no other run shares: the first process here must time, not read a record.
_NONCE = float(os.environ.get("DYNEXPR_TEST_NONCE") or (os.getpid() % 9973) / 1e6 + 1.5)


def chain(x, y):
    return np.tanh(x * _NONCE + y) * 0.5 - np.sqrt(np.abs(y)) + x * y


def scale_in_place(x, y):
    x *= _NONCE  # written once per call, however many times the tuner ran the kernel
    return (x * y).sum()


def _args(n=1 << 16):
    rng = np.random.default_rng(3)
    return (rng.standard_normal(n).astype(np.float32),
            rng.standard_normal(n).astype(np.float32))


def test_tuned_kernels_match_numpy_and_write_arguments_once():
    timed = autotune.stats["timed"]
    f = dynexpr.capture(chain, mode="max-autotune")
    assert_same(chain(*_args()), f(*_args()))
    assert_same(chain(*_args()), f(*_args()))
    assert autotune.stats["timed"] == timed + 1
    schedule = f.entries[0].compiled.schedule
    assert schedule in autotune.candidates(dynexpr.config.num_threads or os.cpu_count())
    g = dynexpr.capture(scale_in_place, mode="max-autotune")
    plain, mine = _args(), _args()
    assert_same(scale_in_place(*plain), g(*mine))
    assert_same(plain[0], mine[0])


def test_the_choice_is_kept_for_the_next_process():
    f = dynexpr.capture(chain, mode="max-autotune")
    x, y = _args(1 << 15)
    f(x, y)
    chosen = f.entries[0].compiled.schedule
    prog = textwrap.dedent(f"""
        import numpy as np, dynexpr, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from dynexpr import autotune
        import test_autotune as t
        f = dynexpr.capture(t.chain, mode="max-autotune")
        x, y = t._args(1 << 15)
        assert np.allclose(f(x, y), t.chain(x, y), rtol=1e-5, atol=1e-6)
        print(autotune.stats["timed"], autotune.stats["loaded"], *f.entries[0].compiled.schedule)
    """)
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                       env=dict(os.environ, DYNEXPR_BACKGROUND_COMPILE="0",
                                DYNEXPR_TEST_NONCE=repr(_NONCE)), timeout=600,
                       check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "1", str(chosen[0]), str(chosen[1])], p.stdout


def test_a_damaged_record_is_timed_again(monkeypatch):
    puts = []
    monkeypatch.setattr(cache, "index_get", lambda fn_id, key: {"schedule": ["x", -1]})
    monkeypatch.setattr(cache, "index_put", lambda fn_id, key, value: puts.append(value))
    f = dynexpr.capture(chain, mode="max-autotune")
    assert_same(chain(*_args(1 << 12)), f(*_args(1 << 12)))
    # The index also gets the entry's record (artifacts/record.py): only the schedule counts.
    timed = [p for p in puts if "schedule" in p]
    assert len(timed) == 1 and len(timed[0]["schedule"]) == 2 and "0,0" in timed[0]["seconds"]


def test_schedules_are_checked_and_modes_named():
    f = dynexpr.capture(chain)
    f(*_args(1 << 10))
    kernel = f.entries[0].compiled
    with pytest.raises(ValueError, match="between 0"):
        kernel.set_schedule(-1, 0)
    kernel.set_schedule(1, 0)
    assert kernel.schedule == (1, 0)
    assert_same(chain(*_args(1 << 10)), f(*_args(1 << 10)))
    with pytest.raises(ValueError, match="max-autotune"):
        dynexpr.capture(chain, mode="fastest")
