"""Retention by time and size, DeleteRecords, truncation, and delayed file deletion."""

from __future__ import annotations

from pathlib import Path

import pytest
from logtest_batches import batch_values, make_batch

from kafkalike.log import LogConfig, OffsetOutOfRange, PartitionLog

DAY = 86_400_000


def build(path: Path, config: LogConfig, batches: int = 60, ts0: int = 1_000_000) -> PartitionLog:
    log = PartitionLog.open(path / "t-0", config, ts0)
    for i in range(batches):
        log.append(make_batch([b"x" * 100], base_timestamp=ts0 + i * 1000), leader_epoch=0, now_ms=ts0 + i * 1000)
    log.high_watermark = log.log_end_offset
    return log


def log_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "t-0").glob("*.log"))


def test_retention_by_time_deletes_old_segments(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1024, retention_ms=10_000, file_delete_delay_ms=5_000)
    log = build(tmp_path, config)
    segments_before = len(log.segments)
    now = 1_000_000 + 30_000
    deleted = log.apply_retention(now)
    assert deleted > 0 and len(log.segments) == segments_before - deleted
    assert all(now - s.largest_timestamp <= 10_000 for s in log.segments)
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    # Renamed at once, removed after file.delete.delay.ms.
    assert any(p.name.endswith(".log.deleted") for p in (tmp_path / "t-0").iterdir())
    assert log.delete_due_files(now + 4_999) == 0
    assert log.delete_due_files(now + 5_000) == deleted
    assert not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())
    assert len(log_files(tmp_path)) == len(log.segments)


def test_retention_by_time_can_empty_the_log_and_keeps_offsets(tmp_path: Path) -> None:
    log = build(tmp_path, LogConfig(segment_bytes=1024, retention_ms=1_000))
    end = log.log_end_offset
    log.apply_retention(10 * DAY)
    assert log.log_start_offset == log.log_end_offset == end
    assert len(log.segments) == 1 and log.active_segment.size == 0
    assert log.append(make_batch([b"next"]), leader_epoch=0, now_ms=10 * DAY).first_offset == end


def test_retention_by_size(tmp_path: Path) -> None:
    log = build(tmp_path, LogConfig(segment_bytes=1024, retention_bytes=3000))
    assert log.size_in_bytes > 3000
    log.apply_retention(1_000_000)
    assert log.size_in_bytes <= 3000 + 1024
    assert log.size_in_bytes > 3000 - 1024
    assert batch_values(log.read_bytes(log.log_start_offset, 1 << 20))[-1][0] == log.log_end_offset - 1


def test_retention_never_passes_the_high_watermark(tmp_path: Path) -> None:
    log = build(tmp_path, LogConfig(segment_bytes=1024, retention_ms=1_000))
    log.high_watermark = 5
    log.apply_retention(10 * DAY)
    assert log.log_start_offset <= 5


def test_unlimited_and_compact_retention_keep_everything(tmp_path: Path) -> None:
    for i, config in enumerate(
        [
            LogConfig(segment_bytes=1024, retention_ms=-1),
            LogConfig(segment_bytes=1024, retention_ms=1, cleanup_policy="compact"),
        ]
    ):
        log = build(tmp_path / str(i), config)
        assert log.apply_retention(100 * DAY) == 0 and log.log_start_offset == 0


def test_delete_records_moves_log_start(tmp_path: Path) -> None:
    log = build(tmp_path, LogConfig(segment_bytes=1024, file_delete_delay_ms=0))
    segments = len(log.segments)
    assert log.delete_records_before(25, now_ms=0) == 25
    assert log.log_start_offset == 25
    assert len(log.segments) < segments and log.segments[0].base_offset <= 25
    assert batch_values(log.read_bytes(25, 1 << 20))[0][0] == 25
    assert log.delete_records_before(10, now_ms=0) == 25  # never moves back
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(log.high_watermark + 1, now_ms=0)


def test_truncate_to_removes_tail_and_files(tmp_path: Path) -> None:
    log = build(tmp_path, LogConfig(segment_bytes=1024, file_delete_delay_ms=0))
    assert log.truncate_to(17, now_ms=0)
    assert log.log_end_offset == 17 and log.high_watermark == 17
    log.apply_retention(0)
    assert log_files(tmp_path)[-1] == f"{log.active_segment.base_offset:020d}.log"
    assert [o for o, _ in batch_values(log.read_bytes(0, 1 << 20))] == list(range(17))
    assert log.append(make_batch([b"again"]), leader_epoch=1, now_ms=0).first_offset == 17
    assert not log.truncate_to(100, now_ms=0)
    log.truncate_to(0, now_ms=0)
    assert log.log_end_offset == 0 and len(log.segments) == 1


def test_retention_survives_reopen(tmp_path: Path) -> None:
    log = build(tmp_path, LogConfig(segment_bytes=1024, retention_ms=10_000, file_delete_delay_ms=0))
    log.apply_retention(1_000_000 + 30_000)
    start, end = log.log_start_offset, log.log_end_offset
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1024), 0)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (start, end)
