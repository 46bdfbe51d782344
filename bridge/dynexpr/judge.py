"""Never slower than the plain function: each entry of a captured function is timed on
real calls against the plain function, and an entry whose compiled path does not pay
runs the plain function from then on, re-checked now and then.

Note [judging an entry]
Compiling does not always pay: tiny arrays (the kernel call costs more than NumPy's
ufuncs), a graph break every few ops (the resume path costs more than the code it
resumes), a graph that is mostly extern calls. Only measuring tells, so once an entry's
kernel is ready (not the NumPy tier of a background compile), its next calls alternate
between the compiled path and the plain function, `policy.samples` of each, and the
medians decide. A close call (medians within `policy.close` of each other) is sampled
again, up to `policy.max_samples` of each, all of them pooled: five noisy samples of two
paths 5% apart pick the slower one about as often as the faster (the corpus's ar2_filter
was judged compiled at 0.89x of plain that way). Each of those calls is a real call
whose result the caller gets: the two paths never run on the same call, since the plain
function may mutate its arguments or globals. What is timed is the whole call of the
top-level function, its resumes after graph breaks included, since that is what the user
pays; a compiled call that translated or compiled a resume segment of its own is not a
sample.
- Compiled wins: `entry.judge` becomes None, and the hit path is what it was before
  judging (captured.py checks that one attribute per call).
- Plain wins: the entry calls the plain function; after `recheck_calls` calls or
  `recheck_s` seconds (whichever comes first, both doubling at each plain verdict) it is
  judged again, since a resume segment may have finished compiling or the machine's
  load changed.

Note [plain while compiling]
While a unit of the entry (its own, or a resume segment's) compiles in the background,
the judged entry runs the plain function, not the NumPy tier of background.Tiered: the
tier runs the captured graph op by op, which for a loop node is a Python loop over the
body's nodes, up to 30x slower than the plain function's own loop (a 200-step logistic
map: 14.5 ms against 0.5 ms), and never faster than the plain function by more than the
Python overhead capture folded away. The first call after the compile finishes runs the
kernel (Tiered swaps itself out), then judging starts as above. Entries that are not
judged (config.plain_fallback off, for benchmarking the compiled path) keep the tier.

Note [reaching the resume points]
One call is the exception: the first call of an entry whose graph ends at a graph break
runs the NumPy tier, and through it the rest of the call (segments.py). A resume point's
segment is translated, and its compile queued, only when a call reaches the point with
the frame's values; a plain call never does. Without this, `f(x); synchronize()` waited
for the first unit only: the next call reached the break and queued the resume unit, and
calls ran plain until that compile finished too (the quickstart's `with_a_break` timed
at plain speed after synchronize()). The first call pays for translating anyway, and
"never slower than plain" holds from the second call on (DESIGN.md).

config.plain_fallback = False (or DYNEXPR_PLAIN_FALLBACK=0) turns it off: every entry
runs compiled, for benchmarking the compiled path alone (setting it False also stops
the judging of existing entries; setting it True judges the entries made afterwards).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .config import config
from .entries import run


class Policy:
    """How entries are judged; tests replace `timed` (and `clock`) to decide by injected
    times instead of measured ones."""

    samples = 5  # timed calls of each path per judgement
    close = 0.10  # medians within 10% of each other: a close call, sampled again ...
    max_samples = 25  # ... up to this many calls of each path in all
    warmup = 1  # calls after the kernel is ready that are not timed (first-touch costs)
    margin = 1.0  # plain when compiled median > margin * (plain median + plain_overhead_ns)
    # What the plain path costs on top of the function it calls (this judge's call and
    # counter): a tie goes to the compiled path, whose hit path is the leaner one.
    plain_overhead_ns = 150
    recheck_calls = 100  # first re-check of a plain verdict after this many calls ...
    recheck_s = 2.0  # ... or this many seconds; both double at each plain verdict
    max_recheck_calls = 1 << 20
    max_recheck_s = 600.0

    def timed(self, path: str, call: Callable[[], Any]) -> tuple[Any, int]:
        """(call(), nanoseconds it took); `path` is "compiled" or "plain"."""
        t0 = time.perf_counter_ns()
        result = call()
        return result, time.perf_counter_ns() - t0

    def clock(self) -> float:
        """Seconds, for the re-check interval."""
        return time.monotonic()


policy = Policy()


class Verdict:
    """What the last judgement of an entry measured (cache_info and explain show it)."""

    __slots__ = ("plain", "compiled_ns", "plain_ns", "checks", "next_check")

    def __init__(self, plain: bool, compiled_ns: float, plain_ns: float, checks: int,
                 next_check: str) -> None:
        self.plain, self.compiled_ns, self.plain_ns = plain, compiled_ns, plain_ns
        self.checks, self.next_check = checks, next_check

    def __repr__(self) -> str:
        return f"<Verdict {self.describe()}>"

    def describe(self) -> str:
        c, p = _us(self.compiled_ns), _us(self.plain_ns)
        n = f"judged {self.checks} time{'s' if self.checks > 1 else ''}"
        if self.plain:
            return (f"runs plain: compiled {c} per call > plain {p} ({n}; "
                    f"re-checked after {self.next_check})")
        return f"runs compiled: compiled {c} per call <= plain {p} ({n})"


def _us(ns: float) -> str:
    return f"{ns / 1e3:.2f} us" if ns < 1e4 else f"{ns / 1e3:.1f} us"


class _Break:
    """The judge of a graph-break entry: the whole call is plain Python (no kernel)."""

    __slots__ = ()
    # Read by the native hit path, which then calls the function itself (Note [a plain
    # verdict in C] in bridge/native/dispatch.c).
    plain, calls_left = True, None

    def call(self, cf: Any, entry: Any, bound: Any, args: tuple, kwargs: dict) -> Any:
        return cf._fn(*args, **kwargs)


BREAK = _Break()


class Judge:
    """The judgement of one compiled entry of a top-level function (Note [judging an
    entry]); lives in `entry.judge` until the compiled path wins."""

    __slots__ = ("warm", "compiled_ns", "plain_ns", "checks", "plain", "calls_left",
                 "until", "every_calls", "every_s", "reach")

    def __init__(self) -> None:
        self.warm = policy.warmup
        self.reach = True  # Note [reaching the resume points]: until the first call
        self.compiled_ns: list[int] = []
        self.plain_ns: list[int] = []
        self.checks = 0
        self.plain = False  # True between a plain verdict and its re-check
        self.calls_left = 0
        self.until = 0.0
        self.every_calls, self.every_s = policy.recheck_calls, policy.recheck_s

    def call(self, cf: Any, entry: Any, bound: Any, args: tuple, kwargs: dict) -> Any:
        if self.plain:  # the plain path is what this entry runs: keep it short
            # The native hit path counts 7 calls in 8 itself (Note [a plain verdict in
            # C] in bridge/native/dispatch.c): keep the two in step.
            n = self.calls_left = self.calls_left - 1
            # The clock is read every 8 calls only: a call of the plain path costs less
            # than 1 us for tiny arrays.
            if n & 7 or (n > 0 and policy.clock() < self.until):
                return cf._fn(*args, **kwargs)
            self.plain = False  # re-check: sample both paths again
        fn = cf._fn
        reach, self.reach = self.reach, False
        if _compiling(cf, entry):  # Note [plain while compiling]
            if reach and entry.resume is not None:  # Note [reaching the resume points]
                return run(entry, bound, fn, cf._finish)
            return fn(*args, **kwargs)
        if self.warm > 0:
            self.warm -= 1
            return run(entry, bound, fn, cf._finish)
        if len(self.compiled_ns) <= len(self.plain_ns):
            seen = _work(cf)
            result, ns = policy.timed("compiled", lambda: run(entry, bound, fn, cf._finish))
            if _work(cf) == seen:  # else it translated or compiled a resume: not a sample
                self.compiled_ns.append(ns)
        else:
            result, ns = policy.timed("plain", lambda: fn(*args, **kwargs))
            self.plain_ns.append(ns)
            if len(self.plain_ns) % policy.samples == 0 and self.compiled_ns:
                self._decide(cf, entry)
        return result

    def _decide(self, cf: Any, entry: Any) -> None:
        c, p = _median(self.compiled_ns), _median(self.plain_ns)
        if abs(c - p) <= policy.close * min(c, p) and len(self.plain_ns) < policy.max_samples:
            return  # a close call: more samples of both paths first
        self.compiled_ns, self.plain_ns = [], []
        if any(_tiering(e.compiled) for e in cf._segments.all_entries()):
            return  # a resume segment still runs its NumPy tier: sample again
        self.checks += 1
        plain = c > policy.margin * (p + policy.plain_overhead_ns)
        nxt = f"{self.every_calls} calls or {self.every_s:g} s"
        entry.verdict = Verdict(plain, c, p, self.checks, nxt)
        if not plain:
            entry.judge = None  # the lean hit path from now on
            return
        self.plain = True
        self.calls_left, self.until = self.every_calls, policy.clock() + self.every_s
        self.every_calls = min(2 * self.every_calls, policy.max_recheck_calls)
        self.every_s = min(2 * self.every_s, policy.max_recheck_s)


def _work(cf: Any) -> tuple:
    """What grows when a call of `cf` translates or compiles (a resume point reached
    with new values: a recursive function, a loop's later iterations)."""
    return cf._segments.entries, cf._compiles


def _compiling(cf: Any, entry: Any) -> bool:
    """Note [plain while compiling]: whether a unit of this call's path still compiles
    in the background (the entry's own, or a resume segment's)."""
    if _tiering(entry.compiled):
        entry.compiled.poll()
        return True
    return any(_tiering(e.compiled) for e in cf._segments.all_entries())


def _tiering(compiled: Any) -> bool:
    """Whether `compiled` still runs the NumPy tier of a background compile."""
    return getattr(compiled, "tiered", False) and not compiled.ready


def _median(xs: list[int]) -> float:
    s = sorted(xs)
    n = len(s)
    return float(s[n // 2]) if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def switched(on: bool, entries: list) -> None:
    """config.plain_fallback was set (a config hook, so no call checks the setting):
    off, every compiled entry of `entries` runs compiled from its next call on."""
    if on:
        return  # entries made from now on are judged
    for e in entries:
        if e.compiled is not None:
            e.judge = None


def start(entry: Any) -> None:
    """Arm the judgement of a new entry of a top-level function (captured.py)."""
    if entry.compiled is None:
        entry.judge = BREAK
    elif config.plain_fallback:
        entry.judge = Judge()


def report(entries: list) -> list[str]:
    """One line per judged entry: which path it runs ("runs plain: ..." or "runs
    compiled: ...") and the times measured."""
    return [f"entry {i}: {e.verdict.describe()}" for i, e in enumerate(entries, 1)
            if e.verdict is not None]
