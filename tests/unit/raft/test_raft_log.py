"""The in-memory Raft log: written against durable bytes, crashes, epochs, records."""

from __future__ import annotations

import pytest
from rafttest_harness import fill_log

from kafkalike.raft.log import MemoryRaftLog, OffsetAndEpoch, RaftLogError
from kafkalike.raft.records import LeaderChange, data_batch, leader_change_batch, parse_leader_change, record_values


def batch(log: MemoryRaftLog, epoch: int, *values: bytes) -> bytes:
    return data_batch(list(values) or [b"x"], base_offset=log.end_offset, epoch=epoch, timestamp_ms=0)


def test_a_crash_keeps_only_flushed_batches() -> None:
    log = MemoryRaftLog()
    log.append(batch(log, 1))
    log.append(batch(log, 1))
    log.flush(1)
    log.append(batch(log, 1))
    assert (log.end_offset, log.durable_end_offset) == (3, 1)
    log.crash()
    assert (log.end_offset, log.durable_end_offset) == (1, 1)


def test_a_flush_covers_only_what_was_written_before_it() -> None:
    log = MemoryRaftLog()
    log.append(batch(log, 1))
    log.append(batch(log, 1))
    token = log.flush_token()  # a flush starts: it covers offsets 0 and 1
    log.truncate_to(1)  # offset 1 is replaced before the flush is done
    log.append(batch(log, 2))
    log.complete_flush(token)
    assert log.durable_end_offset == 1  # the new offset 1 was written after the flush began
    log.complete_flush(log.flush_token())
    assert log.durable_end_offset == 2


def test_appends_keep_the_log_in_order() -> None:
    log = MemoryRaftLog()
    log.append(batch(log, 2))
    with pytest.raises(RaftLogError):
        log.append(data_batch([b"x"], base_offset=5, epoch=2, timestamp_ms=0))  # a gap
    with pytest.raises(RaftLogError):
        log.append(batch(log, 1))  # a falling epoch
    corrupt = bytearray(batch(log, 2))
    corrupt[-1] ^= 1
    with pytest.raises(RaftLogError):
        log.append(bytes(corrupt))
    whole = batch(log, 2, b"a")
    assert log.append(whole + whole[:20]).last_offset == 1  # a partial last batch is left out
    assert log.end_offset == 2


def test_end_offset_for_epoch_is_the_start_of_the_next() -> None:
    log = MemoryRaftLog()
    fill_log(log, [(1, 2), (3, 2), (4, 1)])
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)  # no epoch 2: the largest below
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(4, 3)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(5, 4)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    log.truncate_to(3)
    assert (log.last_fetched_epoch(), log.end_offset_for_epoch(4)) == (3, OffsetAndEpoch(3, 3))


def test_reads_return_whole_batches() -> None:
    log = MemoryRaftLog()
    log.append(batch(log, 1, b"a", b"b"))
    log.append(batch(log, 1, b"c"))
    assert [*record_values(log.read(1, 1))] == [b"a", b"b"]  # the batch holding offset 1, at least
    assert log.read(1, 1 << 20) == log.batches[0].data + log.batches[1].data
    assert log.read(3, 1 << 20) == b""


def test_leader_change_round_trip() -> None:
    change = LeaderChange(2, (1, 2, 3), (2, 3))
    data = leader_change_batch(change, base_offset=7, epoch=4, timestamp_ms=1)
    assert parse_leader_change(data) == change
    assert parse_leader_change(data_batch([b"x"], base_offset=0, epoch=1, timestamp_ms=0)) is None
