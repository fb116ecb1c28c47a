"""A broker process's CPU time and resident memory, from /proc (Linux)."""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int | None) -> float | None:
    """utime + stime of the process (all its threads), from /proc/PID/stat."""
    if pid is None:
        return None
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of the whole line


def rss_bytes(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def machine_busy_seconds() -> float | None:
    """CPU seconds the whole machine spent busy since boot (all CPUs; /proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


class Meter:
    """Around one measured run: the broker's CPU seconds, its peak RSS, and how busy the rest of
    the machine was (CPU used by neither the broker, nor this process, nor the load generators it
    ran and waited for), as a fraction of all CPUs: a noise indicator on a shared machine."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.sampler = RssSampler(pid)
        self.broker_cpu_s: float | None = None
        self.foreign_share: float | None = None

    @staticmethod
    def _own_and_children() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    def __enter__(self) -> Meter:
        self._t0 = time.monotonic()
        self._cpu0 = cpu_seconds(self.pid)
        self._busy0 = machine_busy_seconds()
        self._ours0 = self._own_and_children()
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sampler.__exit__()
        elapsed = time.monotonic() - self._t0
        cpu1, busy1 = cpu_seconds(self.pid), machine_busy_seconds()
        if self._cpu0 is not None and cpu1 is not None:
            self.broker_cpu_s = cpu1 - self._cpu0
        if self._busy0 is not None and busy1 is not None and elapsed > 0:
            foreign = (busy1 - self._busy0) - (self.broker_cpu_s or 0.0) - (self._own_and_children() - self._ours0)
            self.foreign_share = max(foreign, 0.0) / (elapsed * (os.cpu_count() or 1))

    @property
    def max_rss(self) -> int | None:
        return self.sampler.max_bytes

    def annotate(self, run: dict[str, object]) -> dict[str, object]:
        run["broker_cpu_s"] = self.broker_cpu_s
        run["foreign_cpu_share"] = self.foreign_share
        run["broker_max_rss"] = self.max_rss
        return run


class RssSampler:
    """The largest RSS seen while the ``with`` block runs (sampled every ``interval_s``)."""

    def __init__(self, pid: int | None, interval_s: float = 0.2) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.max_bytes: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            value = rss_bytes(self.pid)
            if value is not None and (self.max_bytes is None or value > self.max_bytes):
                self.max_bytes = value
            self._stop.wait(self.interval_s)

    def __enter__(self) -> RssSampler:
        if self.pid is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)


def evict_page_cache(files: list[Path]) -> tuple[int, int]:
    """Drop these files' pages from the page cache (fsync, then POSIX_FADV_DONTNEED): what a cold
    start reads comes from the disk, and no other file on the machine is touched.
    Returns (files, bytes) evicted."""
    count = total = 0
    for path in files:
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                count += 1
                total += os.fstat(fd).st_size
            finally:
                os.close(fd)
    return count, total


def cached_bytes(files: list[Path]) -> int | None:
    """How many bytes of these files are in the page cache (``fincore``), or None if unknown."""
    import shutil
    import subprocess

    if not files or shutil.which("fincore") is None:
        return None
    total = 0
    for start in range(0, len(files), 200):
        chunk = [str(p) for p in files[start : start + 200]]
        ran = subprocess.run(
            ["fincore", "--bytes", "--noheadings", "--output", "RES", *chunk],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        for line in ran.stdout.split():
            with contextlib.suppress(ValueError):
                total += int(line)
    return total
