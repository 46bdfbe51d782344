"""Compiling kernels in the background, so that a first call does not wait for g++.

Note [tiered first call]
A 10-op unit takes g++ ~2.8 s here (a 137 MB precompiled prelude to load, then the
expression templates to instantiate and optimise). With config.background_compile (the
default), a graph whose unit is not in the disk cache yet is handed to one compile thread,
and its entry runs the captured graph op by op with NumPy (the eager backend: the same
results, unfused) until the unit is ready; the first call that finds it ready swaps the
entry over to the kernel, after which nothing of this module is on the call path.

The compile runs in a g++ subprocess, so the thread holds the GIL only to start it and to
load the result. At interpreter exit the compile that is running is finished and published
(the next process finds it in the cache); queued ones are dropped. A compile that fails
raises its error (with the generated file and the compiler's message) from the call that
finds it, and from every later call of that entry, as a synchronous compile would; with
config.suppress_errors it warns once and the entry stays on NumPy.

`dynexpr.synchronize()` waits for every queued compile: tests and benchmarks that want the
compiled kernel (not the NumPy tier) call it, or set config.background_compile = False.

Note [background compiles and fork]
A forked child has no compile thread, and a lock held at the fork stays held in it: a
child that waited for a pending compile (synchronize(), a multiprocessing fork pool)
would wait forever. After a fork the child gets fresh locks, queue and state; the
compiles that were pending in the parent are queued again in the child and its own
compile thread starts on the first wait or call that needs it (the cache's file lock
makes the child find the parent's result when the parent publishes it first).

Note [no imports on compile threads]
CPython keeps one lock per module being imported. A fork while another thread holds one
(it is importing that module for the first time) leaves the lock held forever in the
child, and the child's compile thread, rerunning the parent's pending compile, waits on
it when it reaches the same import: a multiprocessing fork pool started right after a
first call hung this way (`from . import _config` inside toolchain.system_includes(),
reached by the compile thread and the runtime-library helper at the same moment). So the
code a compile runs imports nothing for the first time: modules it needs are imported
with the package. test_cache_trust's test_a_first_compile_imports_nothing_on_its_threads
watches every import made off the main thread during a first compile.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from . import logs
from .config import config
from .diagnostics import warn_once, warn_unavailable
from .toolchain import BuildUnavailable

_jobs: queue.Queue = queue.Queue()
_lock = threading.Lock()
_state: dict[str, Any] = {"thread": None, "exiting": False, "pending": 0, "running": None,
                          "kept": None}
_idle = threading.Condition(_lock)
_ANY = object()
_unfinished: set = set()  # jobs submitted and not finished (queued again after a fork)


class Job:
    """One compile: `work()` runs on the compile thread; its result or error is kept."""

    __slots__ = ("work", "label", "done", "result", "error", "seconds")

    def __init__(self, work: Callable[[], Any], label: str) -> None:
        self.work, self.label = work, label
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.seconds = 0.0


def submit(work: Callable[[], Any], label: str) -> Job:
    job = Job(work, label)
    with _lock:
        _state["pending"] += 1
        _unfinished.add(job)
        _start_worker()
    _jobs.put(job)
    log = logs.get("cache")
    if log.isEnabledFor(20):
        log.info("dynexpr: compiling %s in the background; NumPy runs it meanwhile", label)
    return job


def _start_worker() -> None:
    """Starts the compile thread if it is not running (_lock held)."""
    if _state["thread"] is None or not _state["thread"].is_alive():
        t = threading.Thread(target=_worker, name="dynexpr-compile", daemon=True)
        _state["thread"] = t
        t.start()


def synchronize(timeout: float | None = None) -> bool:
    """Waits until every background compile has finished; False if `timeout` ran out."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _idle:
        if _state["pending"]:
            _start_worker()  # a forked child's first wait (Note [background compiles and fork])
        while _state["pending"]:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            _idle.wait(left)
    return True


def pending() -> int:
    return _state["pending"]


def _worker() -> None:
    while True:
        job = _jobs.get()
        with _lock:
            kept = _state["kept"]
            drop = _state["exiting"] and kept is not job and kept is not _ANY
            if not drop:
                _state["running"] = job
                if kept is _ANY:
                    _state["kept"] = job
        if drop:
            _finish(job, RuntimeError("dynexpr: interpreter exiting; compile dropped"))
            continue
        t0 = time.perf_counter()
        try:
            result, error = job.work(), None
        except BaseException as e:  # kept for the call that finds it
            result, error = None, e
        job.seconds = time.perf_counter() - t0
        job.result = result
        with _lock:
            _state["running"] = None
        _finish(job, error)


def _finish(job: Job, error: BaseException | None) -> None:
    job.error = error
    with _idle:
        if job in _unfinished:  # not a stale parent's job finishing in a forked child
            _unfinished.discard(job)
            job.done = True
            _state["pending"] -= 1
            _idle.notify_all()
    log = logs.get("cache")
    if log.isEnabledFor(20) and error is None:
        log.info("dynexpr: %s compiled in the background in %.2fs", job.label, job.seconds)


class Tiered:
    """An entry's callable while its unit compiles in the background: NumPy (the eager
    graph) until the kernel is ready, then the kernel, which also replaces this object in
    the entry (set where the entry is made) so later calls skip it."""

    __slots__ = ("job", "fallback", "name", "entry")
    tiered = True

    def __init__(self, job: Job, fallback: Callable, name: str) -> None:
        self.job, self.fallback, self.name = job, fallback, name
        self.entry: Any = None  # the entries.Entry holding this callable

    @property
    def ready(self) -> bool:
        return self.job.done

    def poll(self) -> None:
        """Keep the compile going where a call does not run this tier (judge.py's Note
        [plain while compiling]): a forked child restarts the worker thread."""
        if not self.job.done and _state["thread"] is None:
            # forked child: Note [background compiles and fork]
            with _lock:
                _start_worker()

    def __call__(self, *arrays: Any) -> tuple:
        job = self.job
        if not job.done:
            self.poll()
            return self.fallback(*arrays)
        if job.error is None:
            if self.entry is not None:
                self.entry.compiled = job.result
            return job.result(*arrays)
        if isinstance(job.error, (BuildUnavailable, OSError)):
            # The NumPy tier from now on (Note [when building is not possible]).
            warn_unavailable(job.error)
            if self.entry is not None:
                self.entry.compiled = self.fallback
            return self.fallback(*arrays)
        if not config.suppress_errors:
            raise job.error
        warn_once(("bg-error", id(self)),
                  f"{job.error}\n(suppress_errors: {self.name} keeps running the captured "
                  "graph with NumPy)")
        if self.entry is not None:
            self.entry.compiled = self.fallback
        return self.fallback(*arrays)


def _after_fork_in_child() -> None:
    global _jobs, _lock, _idle
    _jobs, _lock = queue.Queue(), threading.Lock()
    _idle = threading.Condition(_lock)
    waiting = [j for j in _unfinished if not j.done]
    _state.update(thread=None, exiting=False, pending=len(waiting), running=None, kept=None)
    for job in waiting:
        _jobs.put(job)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _at_exit() -> None:
    # Finish the compile that is running (so the cache gets it), or the first queued one
    # when the thread has not picked it up yet (a short script's only compile); drop the
    # rest.
    t = _state["thread"]
    with _lock:
        _state["exiting"] = True
        drained = []
        while True:
            try:
                drained.append(_jobs.get_nowait())
            except queue.Empty:
                break
        if _state["running"] is None and drained:
            _state["kept"] = drained.pop(0)
            _jobs.put(_state["kept"])
        elif _state["running"] is None:
            _state["kept"] = _ANY  # the thread holds a job it has not marked running yet
    for job in drained:
        _finish(job, RuntimeError("dynexpr: interpreter exiting; compile dropped"))
    if t is None or not t.is_alive():
        return
    with _idle:
        while _state["pending"]:
            _idle.wait(1.0)
            if not t.is_alive():
                break
