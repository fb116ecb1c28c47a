"""A checker for "nothing blocks the event loop": blocking file-system calls made on a trio loop.

    with LoopBlockingCalls(roots=[data_dir]) as calls:
        ...  # run the broker
    calls.check(allow={"kafkalike.log.coordinator_log": "why it may block, for now"})

While installed it wraps the calls that can wait for a disk (fsync, opening, renaming, removing,
creating and truncating files, listing directories), and records each one made on a thread that
is running a trio loop, with the stack of its caller. Calls on worker threads (``trio.to_thread``) are what the
broker is meant to make, and are not recorded. Path calls count only under ``roots`` (when
given), so the test's own imports and logging are left out; descriptor calls always count.
``check`` fails with every recorded call not allowed by a caller on its stack.

    with LongSteps(threshold_s=0.2) as steps:
        ...  # inside the trio run
    steps.check()

``LongSteps`` is the other half: a trio instrument that times every task step (the code a task
runs between two awaits) and records each one longer than ``threshold_s``, so work done in one go
on the loop (decoding a whole log, say) shows even when it makes no file-system call.
"""

from __future__ import annotations

import builtins
import io
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

import trio

# (module, attribute, how its first argument is read: "path", "fd" or "paths" for rename/replace)
WATCHED: tuple[tuple[Any, str, str], ...] = (
    (os, "fsync", "fd"),
    (os, "fdatasync", "fd"),
    (os, "ftruncate", "fd"),
    (os, "open", "path"),
    (builtins, "open", "path"),
    (io, "open", "path"),
    (os, "rename", "paths"),
    (os, "replace", "paths"),
    (os, "unlink", "path"),
    (os, "remove", "path"),
    (os, "rmdir", "path"),
    (os, "mkdir", "path"),
    (os, "makedirs", "path"),
    (os, "truncate", "path"),
    (os, "listdir", "path"),
    (os, "scandir", "path"),
    (shutil, "rmtree", "path"),
)
STACK_LIMIT = 40


@dataclass(frozen=True)
class BlockingCall:
    """One blocking call seen on a loop thread: the call, and its callers, innermost first."""

    call: str  # e.g. "os.fsync(17)"
    stack: tuple[str, ...]  # "module.qualname (file:line)" per frame

    def allowed_by(self, allow: Mapping[str, str]) -> str | None:
        """The allow-list entry one of the callers matches (a prefix of "module.qualname")."""
        for frame in self.stack:
            name = frame.split(" ", 1)[0]
            for entry in allow:
                if name == entry or name.startswith(entry + "."):
                    return entry
        return None

    def describe(self) -> str:
        return "\n".join([self.call, *(f"    {frame}" for frame in self.stack)])


def _on_trio_loop() -> bool:
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


def _frame_name(frame: FrameType) -> str:
    module = frame.f_globals.get("__name__", "?")
    code = frame.f_code
    return f"{module}.{getattr(code, 'co_qualname', code.co_name)} ({code.co_filename}:{frame.f_lineno})"


class LoopBlockingCalls:
    def __init__(self, roots: Iterable[str | os.PathLike[str]] | None = None) -> None:
        self.roots = None if roots is None else [os.path.realpath(os.fspath(r)) for r in roots]
        self.calls: list[BlockingCall] = []
        self._originals: list[tuple[Any, str, Callable[..., Any]]] = []
        self._busy = threading.local()  # no recording of what the recording itself calls
        self._lock = threading.Lock()

    # -- installing ---------------------------------------------------------------------------

    def install(self) -> LoopBlockingCalls:
        if self._originals:
            raise RuntimeError("already installed")
        for module, name, kind in WATCHED:
            original = getattr(module, name)
            self._originals.append((module, name, original))
            setattr(module, name, self._wrap(f"{module.__name__}.{name}", kind, original))
        return self

    def uninstall(self) -> None:
        for module, name, original in reversed(self._originals):
            setattr(module, name, original)
        self._originals.clear()

    def __enter__(self) -> LoopBlockingCalls:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def _wrap(self, label: str, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def watched(*args: Any, **kwargs: Any) -> Any:
            if not getattr(self._busy, "on", False) and args:
                self._busy.on = True
                try:
                    self._maybe_record(label, kind, args)
                finally:
                    self._busy.on = False
            return original(*args, **kwargs)

        watched.__wrapped__ = original  # type: ignore[attr-defined]
        return watched

    def _maybe_record(self, label: str, kind: str, args: tuple[Any, ...]) -> None:
        if not _on_trio_loop():
            return
        if kind == "fd":
            if not isinstance(args[0], int):
                return
        else:
            paths = args[:2] if kind == "paths" else args[:1]
            if not any(self._watched_path(p) for p in paths):
                return
        frame: FrameType | None = sys._getframe(2)  # the caller of the wrapped function
        stack: list[str] = []
        while frame is not None and len(stack) < STACK_LIMIT:
            stack.append(_frame_name(frame))
            frame = frame.f_back
        shown = ", ".join(repr(a) for a in (args[:2] if kind == "paths" else args[:1]))
        with self._lock:
            self.calls.append(BlockingCall(f"{label}({shown})", tuple(stack)))

    def _watched_path(self, path: Any) -> bool:
        if isinstance(path, int):  # os.open(..., dir_fd=) style and open(fd): a descriptor
            return self.roots is None
        try:
            text = os.fspath(path)
        except TypeError:
            return False
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        if self.roots is None:
            return True
        absolute = os.path.realpath(text)
        return any(absolute == root or absolute.startswith(root + os.sep) for root in self.roots)

    # -- checking -------------------------------------------------------------------------------

    def unexpected(self, allow: Mapping[str, str] | None = None) -> list[BlockingCall]:
        """The recorded calls no entry of ``allow`` (caller name prefix -> reason) covers."""
        allow = allow or {}
        with self._lock:
            return [c for c in self.calls if c.allowed_by(allow) is None]

    def check(self, allow: Mapping[str, str] | None = None) -> None:
        """Raise AssertionError listing every blocking call made on the loop that ``allow``
        does not cover (each allowed entry must name why, for the reader of the test)."""
        found = self.unexpected(allow)
        if found:
            listing = "\n\n".join(call.describe() for call in found)
            raise AssertionError(f"{len(found)} blocking file-system call(s) on the event loop:\n\n{listing}")


@dataclass(frozen=True)
class LongStep:
    """One task step that kept the loop for ``seconds``."""

    task: str
    seconds: float


class LongSteps(trio.abc.Instrument):
    """Task steps longer than ``threshold_s`` on the trio run it is entered in (see the module docstring)."""

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self.steps: list[LongStep] = []
        self.longest_s = 0.0
        self._began: dict[trio.lowlevel.Task, float] = {}

    def __enter__(self) -> LongSteps:
        trio.lowlevel.add_instrument(self)
        self.before_task_step(trio.lowlevel.current_task())  # the step running now counts from here
        return self

    def __exit__(self, *exc: object) -> None:
        trio.lowlevel.remove_instrument(self)

    # Real time, not the run's clock: how long the loop was held is the point (trio's clock
    # may be a MockClock that jumps).
    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._began[task] = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        began = self._began.pop(task, None)
        if began is None:
            return
        seconds = time.perf_counter() - began
        self.longest_s = max(self.longest_s, seconds)
        if seconds > self.threshold_s:
            self.steps.append(LongStep(task.name, seconds))

    def check(self) -> None:
        """Raise AssertionError listing every step longer than the threshold."""
        if self.steps:
            listing = "\n".join(f"{s.seconds * 1000:.0f} ms in {s.task}" for s in self.steps)
            raise AssertionError(
                f"{len(self.steps)} task step(s) held the event loop over {self.threshold_s * 1000:.0f} ms:\n{listing}"
            )
