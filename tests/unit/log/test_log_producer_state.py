"""Idempotent and transactional producer checks, through the log and on their own."""

from __future__ import annotations

from pathlib import Path

import pytest
from logtest_batches import make_batch, make_marker

from kafkalike.log import (
    AppendOrigin,
    AppendResult,
    InvalidProducerEpoch,
    InvalidTxnState,
    LogConfig,
    OutOfOrderSequence,
    PartitionLog,
    ProducerStateManager,
    UnknownProducerId,
    Verdict,
)
from kafkalike.log.producer_state import INT_MAX
from kafkalike.protocol.records import RecordBatchHeader, read_batch_header

PID = 4242


def produce(
    log: PartitionLog, seq: int, count: int = 2, epoch: int = 0, pid: int = PID, transactional: bool = False
) -> AppendResult:
    values = [b"v%d" % (seq + i) for i in range(count)]
    batch = make_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    return log.append(batch, leader_epoch=0, now_ms=1_000)


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=2048), 0)


def test_in_order_sequences_are_accepted(log: PartitionLog) -> None:
    assert produce(log, 0).first_offset == 0
    assert produce(log, 2).first_offset == 2
    assert produce(log, 4, count=5).last_offset == 8


def test_retried_batch_is_a_duplicate_with_original_offsets(log: PartitionLog) -> None:
    produce(log, 0)
    first = produce(log, 2)
    produce(log, 4)
    retry = produce(log, 2)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 6  # nothing was written


def test_only_the_last_five_batches_are_remembered(log: PartitionLog) -> None:
    for seq in range(0, 14, 2):
        produce(log, seq)
    assert produce(log, 4).duplicate  # 5th most recent
    with pytest.raises(OutOfOrderSequence):
        produce(log, 2)  # too old to recognise: looks like a gap backwards


def test_gap_in_sequence_is_out_of_order(log: PartitionLog) -> None:
    produce(log, 0)
    with pytest.raises(OutOfOrderSequence):
        produce(log, 5)
    assert log.log_end_offset == 2


def test_older_epoch_is_fenced_and_new_epoch_restarts_at_zero(log: PartitionLog) -> None:
    produce(log, 0, epoch=3)
    with pytest.raises(InvalidProducerEpoch):
        produce(log, 2, epoch=2)
    with pytest.raises(OutOfOrderSequence):
        produce(log, 7, epoch=4)  # a bumped epoch must start from sequence 0
    assert produce(log, 0, epoch=4).first_offset == 2
    assert produce(log, 2, epoch=4).first_offset == 4


def test_sequence_wraps_after_int_max(log: PartitionLog) -> None:
    produce(log, INT_MAX - 1, count=2)  # sequences INT_MAX-1 and INT_MAX
    assert produce(log, 0).first_offset == 2


def test_unknown_producer_may_start_anywhere_unless_strict(tmp_path: Path) -> None:
    lenient = PartitionLog.open(tmp_path / "a-0", LogConfig(), 0)
    assert produce(lenient, 17).first_offset == 0
    strict = PartitionLog.open(
        tmp_path / "b-0", LogConfig(), 0, producer_state=ProducerStateManager(strict_unknown_producer=True)
    )
    with pytest.raises(UnknownProducerId):
        produce(strict, 17)
    assert produce(strict, 0).first_offset == 0


def test_check_reports_verdicts_without_changing_state(log: PartitionLog) -> None:
    produce(log, 0)
    state = log.producer_state

    def header(seq: int, epoch: int = 0) -> RecordBatchHeader:
        return read_batch_header(make_batch([b"x"], producer_id=PID, producer_epoch=epoch, base_sequence=seq))

    assert state.check(header(2)).verdict is Verdict.OK
    assert state.check(header(0)).verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.check(header(9)).verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.check(header(0, epoch=-2)).verdict is Verdict.INVALID_PRODUCER_EPOCH
    two = read_batch_header(make_batch([b"a", b"b"], producer_id=PID, producer_epoch=0, base_sequence=0))
    dup = state.check(two)
    assert dup.verdict is Verdict.DUPLICATE and dup.duplicate is not None and dup.duplicate.first_offset == 0
    assert produce(log, 2).first_offset == 2


def test_transactions_hold_back_the_last_stable_offset(log: PartitionLog) -> None:
    produce(log, 0, pid=1)  # plain idempotent data
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 2
    produce(log, 0, pid=7, transactional=True)
    produce(log, 2, pid=7, transactional=True)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 2
    assert log.producer_state.ongoing_transactions() == {7: 2}
    with pytest.raises(InvalidTxnState):
        produce(log, 4, pid=7)  # non-transactional write while its transaction is open
    marker = make_marker(commit=False, producer_id=7, producer_epoch=0, coordinator_epoch=5)
    log.append(marker, leader_epoch=0, now_ms=2_000, origin=AppendOrigin.COORDINATOR)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == log.log_end_offset == 7
    assert log.producer_state.producers[7].coordinator_epoch == 5


def test_marker_from_older_epoch_is_rejected(log: PartitionLog) -> None:
    produce(log, 0, epoch=2, transactional=True)
    with pytest.raises(InvalidProducerEpoch):
        log.append(
            make_marker(commit=True, producer_id=PID, producer_epoch=1),
            leader_epoch=0,
            now_ms=0,
            origin=AppendOrigin.COORDINATOR,
        )


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("lose_snapshots", [True, False])
def test_state_is_rebuilt_after_reopen(tmp_path: Path, clean: bool, lose_snapshots: bool) -> None:
    path = tmp_path / "t-0"
    log = PartitionLog.open(path, LogConfig(segment_bytes=1024), 0)
    for seq in range(0, 60, 2):
        produce(log, seq)
    produce(log, 0, pid=9, epoch=1, transactional=True)
    log.close()
    assert list(path.glob("*.snapshot"))
    if lose_snapshots:
        for snapshot in path.glob("*.snapshot"):
            snapshot.unlink()
    log = PartitionLog.open(path, LogConfig(segment_bytes=1024), 0, clean_shutdown=clean)
    assert produce(log, 58).duplicate
    with pytest.raises(OutOfOrderSequence):
        produce(log, 61)
    assert produce(log, 60).first_offset == 62
    assert log.producer_state.ongoing_transactions() == {9: 60}
    with pytest.raises(InvalidProducerEpoch):
        produce(log, 2, pid=9, epoch=0)


def test_snapshot_format_round_trip() -> None:
    state = ProducerStateManager()
    header = read_batch_header(
        make_batch(
            [b"a", b"b", b"c"], producer_id=5, producer_epoch=2, base_sequence=10, base_offset=100, transactional=True
        )
    )
    state.replay(header, None)
    data = state.snapshot_bytes()
    assert data[:2] == b"\x00\x01" and len(data) == 2 + 4 + 4 + 46
    restored = ProducerStateManager()
    assert restored.load_snapshot(data, now_ms=0, expiration_ms=1 << 40)
    entry = restored.producers[5]
    assert (entry.epoch, entry.last_seq, entry.current_txn_first_offset) == (2, 12, 100)
    assert entry.batches[-1].first_seq == 10 and entry.batches[-1].first_offset == 100
    assert not restored.load_snapshot(data[:-1] + b"\x00", now_ms=0, expiration_ms=1 << 40)


def test_idle_producers_expire_and_the_table_is_bounded() -> None:
    state = ProducerStateManager(max_producer_ids=3)
    for pid in range(5):
        state.replay(
            read_batch_header(
                make_batch([b"x"], base_timestamp=pid, producer_id=pid, producer_epoch=0, base_sequence=0)
            ),
            None,
        )
    assert list(state.producers) == [2, 3, 4]
    assert state.remove_expired(now_ms=1_002, expiration_ms=1_000) == 1
    assert list(state.producers) == [3, 4]
