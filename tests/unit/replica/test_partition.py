"""The Partition: role, epochs, the leader-epoch check, the high watermark's one writer, appends and reads."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafkalike.log import LogConfig, LogManager
from kafkalike.log.storage import IMMEDIATE
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from kafkalike.replica import Isolation, LeaderAndIsr, Partition, PartitionError, Role

TOPIC_ID = uuid.UUID(int=7)


def partition(tmp_path: Path, woken: list[tuple[str, int]] | None = None) -> Partition:
    logs = LogManager([tmp_path], storage="memory")
    plog = logs.get_or_create("t", 0, LogConfig(), 0, topic_id=TOPIC_ID)
    sink: list[tuple[str, int]] = [] if woken is None else woken
    return Partition("t", 0, TOPIC_ID, plog, local_broker_id=1, on_progress=sink.append)


def append(p: Partition, *values: bytes) -> int:
    batch = bytearray(build_batch([Record(value=v) for v in values], base_timestamp=1))
    result = p.append_as_leader(batch, now_ms=1, log_append_time=False, syncs=IMMEDIATE)
    return p.complete_append(result, None, 1).base_offset


def test_a_new_partition_is_led_here_at_epoch_zero(tmp_path: Path) -> None:
    p = partition(tmp_path)
    assert p.role is Role.LEADER and p.leader_epoch == 0 and p.replicas == p.isr == (1,)


def test_the_leader_epoch_check_is_kafkas(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.make_leader(LeaderAndIsr(1, 5, 9, (1,), (1,)), now_ms=0)
    assert p.check_leader_epoch(-1) is ErrorCode.NONE
    assert p.check_leader_epoch(5) is ErrorCode.NONE
    assert p.check_leader_epoch(4) is ErrorCode.FENCED_LEADER_EPOCH
    assert p.check_leader_epoch(6) is ErrorCode.UNKNOWN_LEADER_EPOCH


def test_the_high_watermark_follows_the_log_end_and_wakes_waiters(tmp_path: Path) -> None:
    woken: list[tuple[str, int]] = []
    p = partition(tmp_path, woken)
    woken.clear()
    assert append(p, b"a", b"b") == 0
    assert p.high_watermark == p.log_end_offset == 2
    assert ("t", 0) in woken
    assert append(p, b"c") == 2 and p.high_watermark == 3


def test_appends_carry_the_leader_epoch(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.make_leader(LeaderAndIsr(1, 3, 1, (1,), (1,)), now_ms=0)
    append(p, b"x")
    assert p.end_offset_for_epoch(3) == (3, 1)


def test_a_follower_refuses_client_appends_and_reads_with_not_leader(tmp_path: Path) -> None:
    p = partition(tmp_path)
    append(p, b"a")
    assert p.make_follower(LeaderAndIsr(2, 1, 1, (1, 2), (1, 2)), now_ms=0)
    assert p.role is Role.FOLLOWER and p.leader_id == 2
    with pytest.raises(PartitionError) as refused:
        p.append_as_leader(
            bytearray(build_batch([Record(value=b"b")])), now_ms=1, log_append_time=False, syncs=IMMEDIATE
        )
    assert refused.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.log_end_offset == 1  # nothing appended
    with pytest.raises(PartitionError) as read_refused:
        p.read(0, 1000, isolation=Isolation.HIGH_WATERMARK)
    assert read_refused.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    # The epoch is checked first, as Kafka's getLocalLog checks it.
    with pytest.raises(PartitionError) as fenced:
        p.read(0, 1000, isolation=Isolation.HIGH_WATERMARK, current_leader_epoch=0)
    assert fenced.value.code is ErrorCode.FENCED_LEADER_EPOCH
    # The follower keeps its high watermark: it is the leader's to move.
    assert not p.maybe_increment_high_watermark(0)


def test_becoming_leader_again_starts_a_new_term_only_for_a_new_epoch(tmp_path: Path) -> None:
    p = partition(tmp_path)
    state = LeaderAndIsr(1, 2, 2, (1,), (1,))
    assert p.make_leader(state, now_ms=0)
    assert not p.make_leader(LeaderAndIsr(1, 2, 3, (1,), (1,)), now_ms=0)  # an ISR change, same term
    assert p.partition_epoch == 3


def test_reads_stop_at_the_isolation_levels_bound(tmp_path: Path) -> None:
    p = partition(tmp_path)
    append(p, b"a", b"b")
    p.update_high_watermark(1, 0)  # a coordinator bounding it by what is durable
    assert p.high_watermark == 1
    consumer = p.read(0, 1 << 20, isolation=Isolation.HIGH_WATERMARK, min_one_batch=True)
    assert consumer.size_bytes == 0  # the only batch ends past the high watermark
    follower = p.read(0, 1 << 20, isolation=Isolation.HIGH_WATERMARK, replica_id=2)
    assert follower.size_bytes > 0  # a replica's fetch reads to the log end
    committed = p.read(0, 1 << 20, isolation=Isolation.TXN_COMMITTED)
    assert committed.aborted == [] and committed.high_watermark == 1


def test_leading_at_an_epoch_the_log_has_outlived_keeps_the_later_epochs(tmp_path: Path) -> None:
    # A restarted broker's metadata replay names it leader at epoch 0 again before it reaches
    # the records that moved leadership on; its log already holds epoch 1's batches (as a follower).
    p = partition(tmp_path)
    append(p, b"epoch 0")
    assert p.make_follower(LeaderAndIsr(2, 1, 1, (1, 2), (1, 2)), now_ms=0)
    later = bytearray(
        build_batch([Record(value=b"epoch 1")], base_offset=1, base_timestamp=1, partition_leader_epoch=1)
    )
    p.log.append_as_follower(later, now_ms=1, syncs=IMMEDIATE)
    assert p.end_offset_for_epoch(0) == (0, 1)
    p.make_leader(LeaderAndIsr(1, 0, 0, (1, 2), (1, 2)), now_ms=0)
    assert p.log.epoch_cache.latest_epoch == 1
    assert p.end_offset_for_epoch(0) == (0, 1) and p.end_offset_for_epoch(1) == (1, 2)
