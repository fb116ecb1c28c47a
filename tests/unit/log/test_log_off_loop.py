"""The log's file work in the three steps the broker runs off its event loop: decided on the
caller's thread, the disk calls collected (``DeferredSyncs``, ``PreparedRoll``) to run anywhere,
the outcome applied on the caller's thread again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from logtest_batches import batch_values, make_batch

from kafkalike.log import LogConfig, PartitionLog
from kafkalike.log.partition_log import RollNeeded
from kafkalike.log.storage import DeferredSyncs

SMALL = LogConfig(segment_bytes=400, file_delete_delay_ms=60_000)


def _fill(log: PartitionLog, batches: int) -> None:
    for i in range(batches):
        log.append(make_batch([b"value-%03d" % i * 8]), leader_epoch=0, now_ms=0)
    log.high_watermark = log.log_end_offset


def _names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def _epochs(directory: Path) -> str:
    path = directory / "leader-epoch-checkpoint"
    return path.read_text() if path.exists() else ""


def test_a_fetch_holding_a_segment_retention_deletes_still_reads_its_bytes(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, replace(SMALL, retention_bytes=1), 0)
    _fill(log, 12)
    assert len(log.segments) > 2
    held = log.read(0, 1 << 20)  # a fetch's file ranges, not yet sent
    expected = batch_values(held.read_all())
    first = f"{0:020d}.log"

    syncs = DeferredSyncs()
    deleted = log.apply_retention(1, syncs)
    assert deleted >= 2 and log.log_start_offset == log.segments[0].base_offset > 0
    assert first in _names(directory)  # the renames wait for the worker thread
    syncs.run()
    assert first not in _names(directory) and first + ".deleted" in _names(directory)
    assert batch_values(held.read_all()) == expected  # its descriptor followed the rename

    unlinks = DeferredSyncs()
    log.apply_retention(60_001, unlinks)  # file.delete.delay.ms later
    unlinks.run()
    assert not [n for n in _names(directory) if n.endswith(".deleted")]
    log.close()
    reopened = PartitionLog.open(directory, SMALL, 0)
    assert reopened.log_start_offset == log.log_start_offset


def test_retention_of_every_segment_leaves_the_roll_to_the_caller_and_deletes_the_rest_after_it(
    tmp_path: Path,
) -> None:
    log = PartitionLog.open(tmp_path / "t-0", replace(SMALL, retention_ms=10), 0)
    _fill(log, 6)
    segments, end = len(log.segments), log.log_end_offset
    syncs = DeferredSyncs()
    assert log.apply_retention(100_000, syncs) == segments - 1
    assert log.roll_for_retention and len(log.segments) == 1
    prepared = log.prepare_roll()
    assert prepared is not None
    prepared.create()
    assert log.complete_roll(prepared, 100_000) is not None
    assert log.apply_retention(100_000, syncs) == 1
    syncs.run()
    assert not log.roll_for_retention
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (end, end, 1)


def test_an_append_that_needs_a_segment_asks_for_it_first_and_changes_nothing(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", SMALL, 0)
    _fill(log, 3)
    end, size, segments = log.log_end_offset, log.size_in_bytes, len(log.segments)
    batch = make_batch([b"x" * 300])
    with pytest.raises(RollNeeded) as needed:
        log.append(batch, leader_epoch=0, now_ms=0, syncs=DeferredSyncs(), defer_roll=True)
    assert needed.value.base_offset == end
    assert (log.log_end_offset, log.size_in_bytes, len(log.segments)) == (end, size, segments)

    prepared = log.prepare_roll()
    assert prepared is not None
    prepared.create()  # on a worker thread in the broker
    segment = log.complete_roll(prepared, 0)
    assert segment is not None and segment.base_offset == end
    result = log.append(batch, leader_epoch=0, now_ms=0, syncs=DeferredSyncs(), defer_roll=True)
    assert result.first_offset == end and len(log.segments) == segments + 1
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", SMALL, 0)
    assert [o for o, _ in batch_values(reopened.read_bytes(0, 1 << 20))] == list(range(end + 1))


def test_a_roll_made_while_the_log_moved_on_is_discarded_and_its_files_removed(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, SMALL, 0)
    _fill(log, 2)
    prepared = log.prepare_roll()
    assert prepared is not None
    prepared.create()
    stale = f"{prepared.base_offset:020d}.log"
    assert stale in _names(directory)
    log.append(make_batch([b"m"]), leader_epoch=0, now_ms=0)  # another writer meanwhile (no roll of its own)
    assert log.complete_roll(prepared, 0) is None
    prepared.discard()
    assert stale not in _names(directory)
    _fill(log, 1)
    log.close()
    reopened = PartitionLog.open(directory, SMALL, 0)
    assert len(batch_values(reopened.read_bytes(0, 1 << 20))) == 4
    assert reopened.truncated_bytes == 0


def test_the_epoch_checkpoint_left_by_an_append_is_written_by_the_next_flush(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig(), 0)
    log.append(make_batch([b"a"]), leader_epoch=3, now_ms=0, syncs=DeferredSyncs())
    assert "3 0" not in _epochs(directory) and log.epoch_cache.unwritten
    syncs = DeferredSyncs()
    ticket = log.prepare_flush(syncs)
    assert "3 0" not in _epochs(directory)  # written by the worker thread
    syncs.run()
    log.complete_flush(ticket, 0)
    assert (directory / "leader-epoch-checkpoint").read_text() == "0\n1\n3 0\n"
    assert not log.epoch_cache.unwritten and log.recovery_point == 1


def test_a_log_that_flushes_often_keeps_a_new_segments_index_files_open(tmp_path: Path) -> None:
    """So its flushes (on the event loop) write index entries without opening a file; a log
    left to the OS keeps one descriptor per segment."""
    flushing = PartitionLog.open(tmp_path / "f-0", replace(SMALL, flush_interval_messages=1), 0)
    lazy = PartitionLog.open(tmp_path / "l-0", SMALL, 0)
    for log in (flushing, lazy):
        _fill(log, 3)  # a roll
        assert len(log.segments) == 2
    active = flushing.active_segment
    assert active.offset_index.file_open and active.time_index.file_open
    assert not flushing.segments[0].offset_index.file_open  # closed at the roll
    assert not lazy.active_segment.offset_index.file_open and not lazy.active_segment.time_index.file_open
