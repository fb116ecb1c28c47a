"""A follower's appends (``PartitionLog.append_as_follower``) and the truncations replication makes."""

from __future__ import annotations

import errno
import struct
from pathlib import Path
from typing import Any

import pytest
from logtest_batches import batch_values, make_batch, make_marker

from kafkalike.log import (
    AbortedTxn,
    AppendLargerThanSegment,
    CorruptLogError,
    LogConfig,
    MemoryLogDirectory,
    OffsetsOutOfOrder,
    PartitionLog,
    UnexpectedAppendOffset,
)
from kafkalike.log.errors import KafkaStorageError
from kafkalike.log.partition_log import RollNeeded
from kafkalike.log.storage import DeferredSyncs, FileLogDirectory
from kafkalike.testing.faulty_storage import DiskFaults

PID, OTHER_PID = 7, 9


def fetched(values: list[bytes], base_offset: int, epoch: int, **kwargs: Any) -> bytearray:
    """A batch as a leader's log holds it: offsets and partition leader epoch set."""
    return make_batch(values, base_offset=base_offset, leader_epoch=epoch, **kwargs)


def marker(base_offset: int, epoch: int, *, commit: bool, pid: int = PID, producer_epoch: int = 0) -> bytearray:
    batch = make_marker(commit=commit, producer_id=pid, producer_epoch=producer_epoch)
    struct.pack_into(">q", batch, 0, base_offset)  # neither field is under the CRC
    struct.pack_into(">i", batch, 12, epoch)
    return batch


def state(log: PartitionLog) -> tuple[object, ...]:
    return (
        log.log_start_offset,
        log.log_end_offset,
        log.read_bytes(log.log_start_offset, 1 << 30),
        log.epoch_cache.entries(),
        log.producer_state.snapshot_bytes(),
        log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset),
        log.high_watermark,
    )


def leader_log(path: Path, config: LogConfig) -> PartitionLog:
    """A leader's log over three epochs: plain, idempotent and transactional batches, a
    committed and an aborted transaction, an empty epoch 2 and several segments."""
    log = PartitionLog.open(path, config, 0)
    for i in range(12):
        log.append(make_batch([b"plain-%d" % i, b"x" * 40]), leader_epoch=0, now_ms=i)
        log.append(
            make_batch([b"idem-%d" % i], producer_id=OTHER_PID, producer_epoch=0, base_sequence=i),
            leader_epoch=0,
            now_ms=i,
        )
    for n in range(3):
        log.append(
            make_batch([b"txn-%d" % n] * 3, producer_id=PID, producer_epoch=0, base_sequence=3 * n, transactional=True),
            leader_epoch=1,
            now_ms=100,
        )
    log.append(make_marker(commit=True, producer_id=PID, producer_epoch=0), leader_epoch=1, now_ms=100)
    log.append(
        make_batch([b"doomed"], producer_id=PID, producer_epoch=0, base_sequence=9, transactional=True),
        leader_epoch=3,
        now_ms=200,
    )
    log.append(make_batch([b"between"] * 2), leader_epoch=3, now_ms=200)
    log.append(make_marker(commit=False, producer_id=PID, producer_epoch=0), leader_epoch=3, now_ms=200)
    for i in range(8):
        log.append(make_batch([b"tail-%d" % i, b"y" * 50]), leader_epoch=3, now_ms=300 + i)
    assert len(log.segments) > 2
    return log


@pytest.mark.parametrize("fetch_bytes", [97, 400, 1024])  # at most segment.bytes, as Kafka needs
def test_a_follower_fed_the_leader_s_bytes_becomes_the_same_log(tmp_path: Path, fetch_bytes: int) -> None:
    config = LogConfig(segment_bytes=1024)
    leader = leader_log(tmp_path / "leader" / "t-0", config)
    follower = PartitionLog.open(tmp_path / "follower" / "t-0", config, 0)
    fetch_offset = 0
    while fetch_offset < leader.log_end_offset:
        # The fetch's size limit cuts wherever it falls; whole batches only reach the log.
        response = leader.read_bytes(fetch_offset, fetch_bytes)[:fetch_bytes]
        result = follower.append_as_follower(response, now_ms=1_000)
        if result.last_offset < result.first_offset:  # the first batch did not fit: fetch it alone
            result = follower.append_as_follower(leader.read_bytes(fetch_offset, 0), now_ms=1_000)
        assert result.first_offset == fetch_offset
        fetch_offset = result.last_offset + 1
    leader.high_watermark = follower.high_watermark = 0
    assert state(follower) == state(leader)
    assert follower.epoch_cache.entries() == [(0, 0), (1, 36), (3, 46)]
    assert follower.collect_aborted_transactions(0, follower.log_end_offset) == [AbortedTxn(PID, 46, 49, 50)]
    assert follower.last_stable_offset == leader.last_stable_offset
    # On disk too: a reopened follower recovers the same log.
    follower.close()
    reopened = PartitionLog.open(tmp_path / "follower" / "t-0", config, 0)
    reopened.high_watermark = 0
    assert state(reopened) == state(leader)


def test_the_leader_s_offsets_and_epochs_are_kept_and_gaps_are_allowed() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(), 0)
    data = fetched([b"a", b"b"], 0, 4) + fetched([b"c"], 5, 4) + fetched([b"d"], 9, 6)  # a compacted leader's gaps
    result = log.append_as_follower(bytes(data), now_ms=0)
    assert (result.first_offset, result.last_offset, result.log_append_time_ms) == (0, 9, -1)
    assert log.log_end_offset == 10
    assert batch_values(log.read_bytes(0, 1 << 20)) == [(0, b"a"), (1, b"b"), (5, b"c"), (9, b"d")]
    assert log.read_bytes(0, 1 << 20) == data
    assert log.epoch_cache.entries() == [(4, 0), (6, 9)]
    assert batch_values(log.read_bytes(7, 1 << 20)) == [(9, b"d")]  # an offset in a gap reads on from there


def test_the_high_watermark_does_not_move() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(), 0)
    log.append_as_follower(fetched([b"a"] * 3, 0, 0), now_ms=0)
    assert log.high_watermark == 0
    log.high_watermark = 2  # the leader's, from the fetch response
    log.append_as_follower(fetched([b"b"], 3, 0), now_ms=0)
    assert (log.high_watermark, log.log_end_offset) == (2, 4)


def test_a_cut_off_last_batch_is_left_out_and_nothing_is_nothing() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(), 0)
    first, second = fetched([b"a"], 0, 0), fetched([b"b" * 100], 1, 0)
    for cut in (1, 11, 12, 20, 61, len(second) - 1):
        result = log.append_as_follower(bytes(first + second[:cut]), now_ms=0) if log.log_end_offset == 0 else None
        if result is not None:
            assert (result.first_offset, result.last_offset) == (0, 0)
        assert log.append_as_follower(second[:cut], now_ms=0)[:2] == (1, 0)  # nothing appended
    assert log.append_as_follower(b"", now_ms=0)[:2] == (1, 0)
    assert log.log_end_offset == 1
    assert log.read_bytes(0, 1 << 20) == first
    assert log.append_as_follower(second, now_ms=0)[:2] == (1, 1)


def test_a_corrupt_batch_is_refused_and_the_log_left_as_it_was(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)
    log.append_as_follower(fetched([b"a"], 0, 1), now_ms=0)
    before = state(log)
    good = fetched([b"b"], 1, 2, producer_id=PID, producer_epoch=0, base_sequence=0)
    bad = fetched([b"c"], 2, 2)
    bad[-1] ^= 0x01  # a flipped bit in the last record
    with pytest.raises(CorruptLogError, match="crc"):
        log.append_as_follower(bytes(good + bad), now_ms=0)
    assert state(log) == before
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    legacy = bytearray(fetched([b"d"], 1, 2))
    legacy[16] = 1  # magic 1
    with pytest.raises(CorruptLogError, match="magic"):
        log.append_as_follower(bytes(legacy), now_ms=0)
    assert state(log) == before


def test_offsets_below_the_log_end_are_refused_with_the_append_s_range() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(), 0)
    log.append_as_follower(fetched([b"a"] * 5, 0, 0), now_ms=0)
    with pytest.raises(UnexpectedAppendOffset) as refused:
        log.append_as_follower(fetched([b"b"] * 3, 3, 0) + fetched([b"c"], 6, 0), now_ms=0)
    assert (refused.value.first_offset, refused.value.last_offset) == (3, 6)
    assert log.log_end_offset == 5
    with pytest.raises(OffsetsOutOfOrder):
        log.append_as_follower(fetched([b"b"] * 3, 5, 0) + fetched([b"c"], 7, 0), now_ms=0)
    assert log.log_end_offset == 5


def test_size_limits_are_segment_bytes_not_max_message_bytes() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(segment_bytes=1024, max_message_bytes=100), 0)
    big = fetched([b"v" * 400], 0, 0)  # over max.message.bytes: the leader took it, so does the follower
    assert log.append_as_follower(big, now_ms=0).last_offset == 0
    with pytest.raises(AppendLargerThanSegment):
        log.append_as_follower(b"".join(fetched([b"w" * 400], offset, 0) for offset in (1, 2, 3)), now_ms=0)
    assert log.log_end_offset == 1


def test_a_roll_comes_first_and_defer_roll_changes_nothing() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(segment_bytes=1024), 0)
    log.append_as_follower(fetched([b"v" * 600], 0, 0), now_ms=0)
    before = state(log)
    batch = fetched([b"w" * 600], 1, 1)
    with pytest.raises(RollNeeded) as needed:
        log.append_as_follower(batch, now_ms=0, defer_roll=True)
    assert needed.value.base_offset == 1
    assert state(log) == before
    log.append_as_follower(batch, now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 1]
    assert log.epoch_cache.entries() == [(0, 0), (1, 1)]


def test_flush_messages_and_deferred_syncs_as_on_the_leader(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(flush_interval_messages=3), 0)
    log.append_as_follower(fetched([b"a"] * 2, 0, 0), now_ms=0)
    assert log.recovery_point == 0
    syncs = DeferredSyncs()
    result = log.append_as_follower(fetched([b"b"], 2, 1), now_ms=0, syncs=syncs)
    assert result.flush is not None and syncs
    assert log.recovery_point == 0
    syncs.run()
    log.complete_append(result, None, 0)
    assert log.recovery_point == 3
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 2\n"


def test_producer_state_is_replicated_without_sequence_checks() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(), 0)
    # A sequence gap the leader's checks would refuse (the leader's log was compacted or expired).
    log.append_as_follower(fetched([b"a"], 0, 0, producer_id=PID, producer_epoch=0, base_sequence=0), now_ms=0)
    log.append_as_follower(fetched([b"b"], 1, 0, producer_id=PID, producer_epoch=0, base_sequence=40), now_ms=0)
    txn = fetched([b"t"] * 2, 2, 0, producer_id=OTHER_PID, producer_epoch=3, base_sequence=0, transactional=True)
    log.append_as_follower(txn, now_ms=0)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 2  # the open transaction holds it back
    log.append_as_follower(marker(4, 0, commit=False, pid=OTHER_PID, producer_epoch=3), now_ms=0)
    assert log.producer_state.producers[PID].last_seq == 40
    assert log.producer_state.producers[OTHER_PID].current_txn_first_offset is None
    assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(OTHER_PID, 2, 4, 5)]
    log.high_watermark = 5
    assert log.last_stable_offset == 5


def test_an_older_epoch_after_a_newer_one_rewinds_the_cache_as_kafka_s_assign() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(), 0)
    log.append_as_follower(fetched([b"a"], 0, 1) + fetched([b"b"], 1, 1) + fetched([b"c"], 2, 3), now_ms=0)
    assert log.epoch_cache.entries() == [(1, 0), (3, 2)]
    log.append_as_follower(fetched([b"d"], 3, 2), now_ms=0)
    assert log.epoch_cache.entries() == [(1, 0), (2, 3)]


# ---- truncation, as replication uses it -----------------------------------------------------------


def test_truncating_inside_a_batch_takes_the_whole_batch_and_the_refetch_appends_cleanly() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(), 0)
    log.append_as_follower(fetched([b"a"] * 3, 0, 1) + fetched([b"b"] * 4, 3, 2), now_ms=0)
    log.high_watermark = 7
    assert log.truncate_to(5, now_ms=0)
    # The log keeps whole batches: it ends where the cut batch began.
    assert (log.log_end_offset, log.high_watermark) == (3, 3)
    assert log.epoch_cache.entries() == [(1, 0)]
    result = log.append_as_follower(fetched([b"c"] * 4, 3, 4), now_ms=0)
    assert (result.first_offset, result.last_offset) == (3, 6)
    assert log.epoch_cache.entries() == [(1, 0), (4, 3)]
    assert batch_values(log.read_bytes(0, 1 << 20))[3:] == [(3, b"c"), (4, b"c"), (5, b"c"), (6, b"c")]


def test_truncation_that_cuts_an_abort_marker_reopens_the_transaction(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1024)
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    txn = fetched([b"t" * 300], 0, 0, producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True)
    log.append_as_follower(txn, now_ms=0)
    log.append_as_follower(fetched([b"p" * 300], 1, 0), now_ms=0)
    log.append_as_follower(fetched([b"q" * 300], 2, 0), now_ms=0)  # rolls: a snapshot at offset 2
    log.append_as_follower(marker(3, 0, commit=False), now_ms=0)
    log.append_as_follower(fetched([b"after"], 4, 0), now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(PID, 0, 3, 4)]
    log.high_watermark = 5
    assert log.last_stable_offset == 5

    assert log.truncate_to(3, now_ms=0)
    assert log.collect_aborted_transactions(0, 3) == []
    assert log.segments[-1].txn_index.entries == []
    assert log.producer_state.producers[PID].current_txn_first_offset == 0  # rebuilt from the snapshot at 2
    assert (log.high_watermark, log.last_stable_offset) == (3, 0)
    # The new leader's log goes on differently: the transaction commits.
    log.append_as_follower(marker(3, 1, commit=True), now_ms=0)
    assert log.collect_aborted_transactions(0, 4) == []
    log.high_watermark = 4
    assert log.last_stable_offset == 4
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", config, 0)
    assert reopened.collect_aborted_transactions(0, 4) == []
    assert reopened.producer_state.producers[PID].current_txn_first_offset is None
    assert reopened.epoch_cache.entries() == [(0, 0), (1, 3)]


def test_restarting_at_the_leader_s_log_start_puts_the_high_watermark_there() -> None:
    log = PartitionLog.open(MemoryLogDirectory(), LogConfig(), 0)
    log.append_as_follower(fetched([b"a"] * 10, 0, 1), now_ms=0)
    log.high_watermark = 5
    # The leader deleted records up to 100, inside a batch starting at 98 (Kafka's Partition
    # restarts an empty follower log at the batch's base offset).
    log.truncate_fully_and_start_at(100, now_ms=0)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (100, 100, 100)
    with pytest.raises(UnexpectedAppendOffset) as refused:
        log.append_as_follower(fetched([b"b"] * 4, 98, 2), now_ms=0)
    assert (refused.value.first_offset, refused.value.last_offset) == (98, 101)
    log.truncate_fully_and_start_at(refused.value.first_offset, now_ms=0)
    assert log.append_as_follower(fetched([b"b"] * 4, 98, 2), now_ms=0)[:2] == (98, 101)
    assert (log.log_start_offset, log.high_watermark, log.epoch_cache.entries()) == (98, 98, [(2, 98)])


# Write sites a follower append reaches: the config that makes it reach them, the operation and file that fail.
DISK_SITES: dict[str, tuple[LogConfig, str, str]] = {
    "segment append": (LogConfig(), "append", ".log"),
    "segment roll": (LogConfig(segment_bytes=1024), "open", ".log"),
    "flush (fsync)": (LogConfig(flush_interval_messages=1), "flush", ".log"),
    "leader epoch checkpoint": (LogConfig(), "write_document", "leader-epoch-checkpoint"),
    "transaction index": (LogConfig(), "append", ".txnindex"),
}


@pytest.mark.parametrize("site", DISK_SITES)
def test_a_failed_write_leaves_the_follower_log_as_it_was_and_the_refetch_appends(site: str, tmp_path: Path) -> None:
    config, operation, name = DISK_SITES[site]
    faults = DiskFaults()
    log = PartitionLog.open(faults.wrap(FileLogDirectory(tmp_path / "t-0")), config, 0)
    txn = fetched([b"t" * 300], 0, 1, producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True)
    log.append_as_follower(txn + fetched([b"p" * 300], 1, 1), now_ms=0)
    before = state(log)
    refetched = bytes(fetched([b"q" * 300], 2, 2) + marker(3, 2, commit=False))
    rule = faults.fail(operation, errno.ENOSPC, name=name)
    with pytest.raises(KafkaStorageError):
        log.append_as_follower(refetched, now_ms=0)
    assert faults.injected, "the fault never fired: the site was not reached"
    assert state(log) == before
    assert log.producer_state.producers[PID].current_txn_first_offset == 0
    faults.remove(rule)
    assert log.append_as_follower(refetched, now_ms=0)[:2] == (2, 3)
    assert log.epoch_cache.entries() == [(1, 0), (2, 2)]
    assert log.collect_aborted_transactions(0, 4) == [AbortedTxn(PID, 0, 3, 4)]


def test_a_roll_past_a_gap_starts_the_segment_at_the_append_s_first_offset(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1024)
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    log.append_as_follower(fetched([b"v" * 600], 0, 0), now_ms=0)
    log.append_as_follower(fetched([b"w" * 600], 50, 0), now_ms=0)  # compacted away in between
    assert [s.base_offset for s in log.segments] == [0, 50]
    assert batch_values(log.read_bytes(1, 1 << 20)) == [(50, b"w" * 600)]
    # Further than one segment's relative offsets reach (Kafka's maybeRoll has the same reason).
    far = 51 + (1 << 31) + 5
    log.append_as_follower(fetched([b"x"] * 2, far, 0), now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 50, far]
    assert log.log_end_offset == far + 2
    assert batch_values(log.read_bytes(far + 1, 1 << 20)) == [(far, b"x"), (far + 1, b"x")]
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", config, 0)
    assert ([s.base_offset for s in reopened.segments], reopened.log_end_offset) == ([0, 50, far], far + 2)
    assert batch_values(reopened.read_bytes(60, 1 << 20)) == [(far, b"x"), (far + 1, b"x")]


def test_a_deferred_roll_past_a_gap_is_made_where_roll_needed_says(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1024)
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    log.append_as_follower(fetched([b"v" * 600], 0, 0), now_ms=0)
    batch = fetched([b"w" * 600], 40, 0)
    with pytest.raises(RollNeeded) as needed:
        log.append_as_follower(batch, now_ms=0, defer_roll=True)
    assert needed.value.base_offset == 40
    prepared = log.prepare_roll(needed.value.base_offset)
    assert prepared is not None
    prepared.create()
    assert log.complete_roll(prepared, 0) is not None
    assert log.log_end_offset == 1  # nothing appended yet
    log.release()  # a crash before the append: the log restarts at the new segment
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    assert ([s.base_offset for s in log.segments], log.log_end_offset) == ([0, 40], 40)
    assert log.append_as_follower(batch, now_ms=0, defer_roll=True)[:2] == (40, 40)
