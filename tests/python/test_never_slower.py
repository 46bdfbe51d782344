"""Never slower than the plain function (Note [judging an entry] in judge.py): an entry
whose compiled path is measured slower runs the plain function, re-checked later; the
switch turns it off; explain and cache_info say so. The decisions are made
deterministic by injecting the times (judge.policy.timed and .clock); no test asserts
on a real timing. Every call's result is compared with plain NumPy's."""

import numpy as np
import pytest

import dynexpr
from compare import assert_same
from dynexpr import judge


def scale_in_place(x, y):
    x *= 2.0  # mutates the caller's array: the two paths never run on the same call
    return np.tanh(x) * y + 1.0


class Fake:
    """Injected times per path (ns) and a settable clock; records which path ran."""

    def __init__(self, compiled_ns, plain_ns):
        self.ns = {"compiled": compiled_ns, "plain": plain_ns}
        self.paths = []
        self.now = 0.0

    def timed(self, path, call):
        self.paths.append(path)
        return call(), self.ns[path]

    def clock(self):
        return self.now


@pytest.fixture
def fake(monkeypatch):
    """Judging on, with injected times (compiled slower, to start with)."""
    dynexpr.config.plain_fallback = True
    f = Fake(compiled_ns=50_000, plain_ns=5_000)
    monkeypatch.setattr(judge.policy, "timed", f.timed)
    monkeypatch.setattr(judge.policy, "clock", f.clock)
    monkeypatch.setattr(judge.policy, "samples", 3)
    monkeypatch.setattr(judge.policy, "warmup", 1)
    monkeypatch.setattr(judge.policy, "recheck_calls", 4)
    monkeypatch.setattr(judge.policy, "recheck_s", 1e9)
    return f


def call_and_compare(cf, fn, n=1, rng=np.random.default_rng(0)):
    """n calls of cf, each checked against fn on copies of the same inputs (values, dtype,
    shape, and the mutation of x)."""
    for _ in range(n):
        x, y = rng.standard_normal(16), rng.standard_normal(16)
        xe, ye = x.copy(), y.copy()
        got = cf(x, y)
        want = fn(xe, ye)
        assert_same(want, got)
        assert_same(xe, x, "x after the call")
        assert_same(ye, y, "y after the call")


def counting(entry):
    """Wrap entry's kernel so the test sees how often it runs."""
    kernel, calls = entry.compiled, []

    def wrapped(*a):
        calls.append(1)
        return kernel(*a)

    entry.compiled = wrapped
    return calls


def test_an_entry_whose_compiled_path_is_slower_runs_plain(fake, backend):
    cf = dynexpr.capture(scale_in_place, backend=backend)
    call_and_compare(cf, scale_in_place)  # first call: compiles, warms up (not timed)
    entry = cf.entries[0]
    assert entry.judge is not None and entry.verdict is None
    call_and_compare(cf, scale_in_place, 6)  # 3 timed calls of each path, alternating
    assert fake.paths == ["compiled", "plain"] * 3
    assert entry.verdict is not None and entry.verdict.plain
    kernel_calls = counting(entry)
    call_and_compare(cf, scale_in_place, 3)  # plain from now on: the kernel never runs
    assert kernel_calls == [] and fake.paths == ["compiled", "plain"] * 3
    assert cf.cache_info().hits == 9 and cf.cache_info().entries == 1


def test_a_close_call_is_sampled_again_before_a_verdict(fake, monkeypatch):
    # Note [judging an entry]: medians within policy.close of each other decide nothing
    # until policy.max_samples calls of each path are pooled; then the slower path loses.
    monkeypatch.setattr(judge.policy, "max_samples", 9)
    fake.ns.update(compiled=5_400, plain=5_000)  # compiled 8% slower (150 ns overhead)
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place)
    entry = cf.entries[0]
    call_and_compare(cf, scale_in_place, 12)  # 6 of each: past samples, still close
    assert fake.paths == ["compiled", "plain"] * 6 and entry.verdict is None
    call_and_compare(cf, scale_in_place, 6)  # 9 of each: decided on all 18
    assert entry.verdict is not None and entry.verdict.plain
    assert fake.paths == ["compiled", "plain"] * 9
    # a clear difference is still decided on the first samples
    fake.ns.update(compiled=1_000)
    g = dynexpr.capture(lambda x, y: scale_in_place(x, y), backend="eager")
    call_and_compare(g, scale_in_place, 7)
    assert g.entries[0].verdict is not None and not g.entries[0].verdict.plain


def test_the_plain_function_runs_while_the_unit_compiles(fake):
    # Note [plain while compiling]: not the NumPy tier, which runs a loop node as a
    # Python loop over its body's nodes; nothing is timed either.
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place)
    entry = cf.entries[0]
    kernel = entry.compiled
    tier_calls, polls = [], []

    class Compiling:  # what background.Tiered looks like while its unit compiles
        tiered, ready = True, False

        def poll(self):
            polls.append(1)

        def __call__(self, *a):
            tier_calls.append(1)
            return kernel(*a)

    entry.compiled = Compiling()
    call_and_compare(cf, scale_in_place, 8)
    assert fake.paths == [] and entry.verdict is None
    assert tier_calls == [] and len(polls) == 8
    entry.compiled = kernel  # the compile is done
    call_and_compare(cf, scale_in_place, 6)
    assert fake.paths == ["compiled", "plain"] * 3 and entry.verdict.plain


def test_a_call_that_compiles_a_resume_is_not_a_sample(fake, monkeypatch):
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place)
    entry = cf.entries[0]
    kernel = entry.compiled

    def compiles_a_resume(*a):  # as a call that reached a new resume point would
        cf._compiles += 1
        return kernel(*a)

    entry.compiled = compiles_a_resume
    call_and_compare(cf, scale_in_place, 6)
    assert fake.paths == ["compiled"] * 6  # timed, and none kept: still no plain turn
    assert entry.verdict is None
    entry.compiled = kernel
    call_and_compare(cf, scale_in_place, 6)
    assert fake.paths[6:] == ["compiled", "plain"] * 3 and entry.verdict.plain


def test_a_plain_entry_is_judged_again_and_backs_off(fake):
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place, 7)
    entry = cf.entries[0]
    assert entry.verdict.plain and entry.verdict.checks == 1
    assert "4 calls" in entry.verdict.next_check
    call_and_compare(cf, scale_in_place, 3)  # 3 plain calls, untimed
    assert len(fake.paths) == 6
    call_and_compare(cf, scale_in_place, 6)  # the 4th call starts the re-check
    assert len(fake.paths) == 12
    assert entry.verdict.plain and entry.verdict.checks == 2
    assert "8 calls" in entry.verdict.next_check  # backoff: the interval doubled
    # Now the compiled path pays (a resume finished compiling, say): after the next
    # interval it is judged again and wins; the hit path is the lean one again.
    fake.ns["compiled"] = 1_000
    call_and_compare(cf, scale_in_place, 7 + 6)
    assert not entry.verdict.plain and entry.verdict.checks == 3
    assert entry.judge is None
    kernel_calls = counting(entry)
    call_and_compare(cf, scale_in_place, 2)
    assert len(kernel_calls) == 2 and len(fake.paths) == 18  # compiled, no longer timed


def test_a_plain_entry_is_judged_again_after_some_seconds(fake, monkeypatch):
    monkeypatch.setattr(judge.policy, "recheck_calls", 10**6)
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place, 7)
    assert cf.entries[0].verdict.plain
    call_and_compare(cf, scale_in_place, 20)
    assert len(fake.paths) == 6  # no re-check yet: neither the calls nor the time
    fake.now = 2e9  # past recheck_s (1e9); the clock is read every 8 calls
    call_and_compare(cf, scale_in_place, 8 + 6)
    assert len(fake.paths) == 12 and cf.entries[0].verdict.checks == 2


def test_an_entry_whose_compiled_path_pays_keeps_the_lean_hit_path(fake):
    fake.ns["compiled"] = 1_000
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place, 7)
    entry = cf.entries[0]
    assert entry.judge is None and not entry.verdict.plain
    assert cf.cache_info().plain == ()
    assert "runs compiled" in cf.cache_info().judged[0]


def test_the_switch_turns_judging_off(fake, monkeypatch):
    dynexpr.config.plain_fallback = False
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place, 10)
    assert fake.paths == [] and cf.entries[0].judge is None
    assert cf.cache_info().judged == ()
    # Switched off after an entry was judged plain: the compiled path again.
    dynexpr.config.plain_fallback = True
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place, 7)
    entry = cf.entries[0]
    assert entry.verdict.plain
    dynexpr.config.plain_fallback = False
    kernel_calls = counting(entry)
    call_and_compare(cf, scale_in_place, 2)
    assert len(kernel_calls) == 2 and entry.judge is None


def test_the_switch_follows_the_environment(monkeypatch):
    from dynexpr.config import Config

    monkeypatch.setenv("DYNEXPR_PLAIN_FALLBACK", "0")
    assert Config().plain_fallback is False
    monkeypatch.setenv("DYNEXPR_PLAIN_FALLBACK", "1")
    assert Config().plain_fallback is True
    with pytest.raises(TypeError, match="plain_fallback must be bool"):
        dynexpr.config.plain_fallback = "no"


def test_explain_and_cache_info_say_which_entries_run_plain(fake):
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place, 7)
    info = cf.cache_info()
    assert info == (6, 1, 1, 1)  # still the 4-tuple of counts: hits, misses, ...
    assert info.plain == ("entry 1: runs plain: compiled 50.0 us per call > plain 5.00 us "
                          "(judged 1 time; re-checked after 4 calls or 1e+09 s)",)
    assert "plain=" not in repr(info) and "judged=" in repr(info)
    x, y = np.ones(16), np.ones(16)
    out = dynexpr.explain(cf, x, y)
    assert out.runs_plain == list(info.plain)
    assert "Compiled vs the plain function" in str(out)
    assert "runs plain: compiled 50.0 us per call > plain 5.00 us" in str(out)
    assert_same(np.ones(16), x)  # explain ran nothing


def closes_over(x):
    k = float(x[0])  # a break in a function an inner function closes over: not resumable,
    inner = lambda: k + 1.0  # noqa: E731  so the whole call is a graph-break entry
    return x * inner()


def test_a_graph_break_entry_still_runs_plain_python(fake):
    cf = dynexpr.capture(closes_over, backend="eager")
    for _ in range(8):
        x = np.arange(1.0, 6.0)
        assert_same(closes_over(x.copy()), cf(x))
    entry = cf.entries[0]
    assert entry.compiled is None and entry.judge is judge.BREAK
    assert fake.paths == [] and cf.cache_info().judged == ()


# --- real end to end: no injected times --------------------------------------------------


def break_every_op(a, b):
    # float() of an array is a graph break: each op is its own tiny segment, on 4
    # elements, which a kernel call plus a resume can only lose to plain NumPy.
    c = a * 2.0 + float(a[0])
    c = np.sin(c) + float(c[1])
    c = c * b + float(c[2])
    c = np.sqrt(np.abs(c)) + float(c[3])
    return c - float(c[0])


def test_tiny_arrays_with_a_break_every_op_end_up_running_plain(backend):
    dynexpr.config.plain_fallback = True
    cf = dynexpr.capture(break_every_op, backend=backend)
    rng = np.random.default_rng(1)
    for _ in range(1 + judge.policy.warmup + 2 * judge.policy.samples):
        a, b = rng.standard_normal(4), rng.standard_normal(4)
        assert_same(break_every_op(a.copy(), b.copy()), cf(a, b))
    info = cf.cache_info()
    assert info.entries == 1 and len(info.judged) == 1
    assert info.plain == info.judged, info.judged  # judged, and it runs plain
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    assert_same(break_every_op(a.copy(), b.copy()), cf(a, b))


def test_plain_calls_skip_the_judges_python_lines(fake, monkeypatch):
    # Note [a plain verdict in C] (bridge/native/dispatch.c): after a plain verdict the
    # native hit path calls the plain function itself on 7 calls in 8 and counts them as
    # Judge.call would; every 8th reaches Judge.call, which reads the clock.
    monkeypatch.setattr(judge.policy, "recheck_calls", 10**6)
    cf = dynexpr.capture(scale_in_place, backend="eager")
    call_and_compare(cf, scale_in_place, 7)
    entry = cf.entries[0]
    assert entry.verdict.plain
    left = entry.judge.calls_left
    seen = []
    original = judge.Judge.call

    def spy(self, *a):
        seen.append(self.calls_left)
        return original(self, *a)

    monkeypatch.setattr(judge.Judge, "call", spy)
    kernel_calls = counting(entry)
    call_and_compare(cf, scale_in_place, 24)
    assert entry.judge.calls_left == left - 24 and kernel_calls == []
    # the calls Judge.call saw: those whose count reaches a multiple of 8
    assert seen == [c + 1 for c in range(left - 1, left - 25, -1) if c % 8 == 0] and len(seen) == 3
    assert len(fake.paths) == 6  # none of them timed
    # a keyword call cannot take the native path: Judge.call counts it
    x, y = np.ones(16), np.ones(16)
    assert_same(scale_in_place(x.copy(), y), cf(x=x, y=y))
    assert entry.judge.calls_left == left - 25


def test_a_function_that_breaks_at_its_start_runs_plain_without_the_judge(monkeypatch):
    # judge.BREAK's calls_left = None: the native hit path calls the function itself.
    def rotate(z, theta):
        return z * np.exp(1j * theta)  # complex: not in dynexpr's dtypes, a graph break

    seen = []
    original = judge._Break.call
    monkeypatch.setattr(judge._Break, "call", lambda self, *a: seen.append(1) or original(self, *a))
    cf = dynexpr.capture(rotate)
    z = np.arange(5) + 1j * np.arange(5)
    assert_same(rotate(z, 0.3), cf(z, 0.3))  # the first call (a miss) runs in Python
    first = len(seen)
    for _ in range(5):
        assert_same(rotate(z, 0.3), cf(z, 0.3))
    assert cf.entries[0].judge is judge.BREAK and len(seen) == first
    assert_same(rotate(z, 0.5), cf(z, theta=0.5))  # keywords: the Python path
    assert len(seen) == first + 1
