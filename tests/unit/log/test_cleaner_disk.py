"""The log cleaner and the disk: a cleaned segment's fsync handed out for a worker thread before
its swap, and disk errors that drop the pass without giving up on the log."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from test_cleaner_support import CONFIG, latest_per_key, produce, rows

from kafkalike.log import FileLogDirectory, LogCleaner, PartitionLog
from kafkalike.log.partition_log import SegmentSwap
from kafkalike.log.storage import DeferredSyncs
from kafkalike.testing.faulty_storage import DiskFaults


def fill(log: PartitionLog, count: int = 200, keys: int = 17) -> list[tuple[int, bytes | None, bytes | None]]:
    written: list[tuple[int, bytes | None, bytes | None]] = []
    for i in range(count):
        key, value = b"k%02d" % (i % keys), b"v%03d" % i
        written.append((produce(log, [(key, value)], now_ms=i), key, value))
    return written


def expected_after_cleaning(log: PartitionLog, written: list[tuple[int, bytes | None, bytes | None]]) -> list:  # type: ignore[type-arg]
    active = log.active_segment.base_offset
    return latest_per_key([w for w in written if w[0] < active]) + [w for w in written if w[0] >= active]


def test_a_cleaned_segment_is_synced_by_the_caller_before_its_swap(tmp_path: Path) -> None:
    log = PartitionLog.open(FileLogDirectory(tmp_path / "c-0"), CONFIG, 0)
    log.high_watermark = log.log_end_offset
    written = fill(log)
    log.high_watermark = log.log_end_offset
    expected = expected_after_cleaning(log, written)
    cleaner = LogCleaner()
    handed_out: list[str] = []
    for _ in range(1000):
        if not cleaner.work([log], 1_000, max_bytes=1 << 30):
            break
        job = cleaner.take_syncs()
        if job is None:
            continue
        names = log.directory.list_names()
        cleaned, swapping = (any(n.endswith(suffix) for n in names) for suffix in (".log.cleaned", ".swap"))
        if isinstance(job, DeferredSyncs):  # the cleaned file's fsync, before its swap
            assert job.descriptors and cleaned and not swapping
            handed_out.append("fsync")
        elif isinstance(job, SegmentSwap):
            assert cleaned and not swapping
            handed_out.append("swap")
        else:  # the cleaned file's creation
            assert not cleaned
            handed_out.append("create")
        job.run()
    assert handed_out[:3] == ["create", "fsync", "swap"]
    assert rows(log) == expected
    assert not [n for n in log.directory.list_names() if n.endswith((".cleaned", ".swap"))]


def test_a_sync_nobody_took_runs_before_the_swap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = PartitionLog.open(FileLogDirectory(tmp_path / "c-0"), CONFIG, 0)
    written = fill(log)
    log.high_watermark = log.log_end_offset
    expected = expected_after_cleaning(log, written)
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append(("rename", os.path.basename(str(src))))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    cleaner = LogCleaner()
    for _ in range(1000):  # never take_syncs: the cleaner must run them itself
        if not cleaner.work([log], 1_000, max_bytes=1 << 30):
            break
    cleaned = [name for kind, name in events if kind == "rename" and name.endswith(".log.cleaned")]
    assert cleaned
    for name in cleaned:
        assert events.index(("fsync", name)) < events.index(("rename", name))
    assert rows(log) == expected


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO, errno.EROFS, errno.EMFILE], ids=errno.errorcode.get)
def test_a_disk_error_while_cleaning_drops_the_pass_and_a_later_one_succeeds(tmp_path: Path, err: int) -> None:
    faults = DiskFaults()
    log = PartitionLog.open(faults.wrap(FileLogDirectory(tmp_path / "c-0")), CONFIG, 0)
    written = fill(log)
    log.high_watermark = log.log_end_offset
    expected = expected_after_cleaning(log, written)
    rule = faults.fail("open" if err == errno.EMFILE else "append", err, name=".cleaned")
    cleaner = LogCleaner()
    stats = cleaner.clean_once([log], 1_000)
    assert stats is not None and stats.errors and faults.injected
    assert rows(log) == written  # nothing swapped in
    assert not cleaner.is_uncleanable(log)  # the disk failed, not the log: it is cleaned again later
    faults.remove(rule)
    stats = cleaner.clean_once([log], 1_000)
    assert stats is not None and not stats.errors
    assert rows(log) == expected
