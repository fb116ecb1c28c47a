"""The high watermarks' checkpoint, ``replication-offset-checkpoint`` in each log dir (Kafka's
ReplicaManager.checkpointHighWatermarks and Partition.createLog)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from logtest_batches import make_batch

from kafkalike.log import LogConfig, LogManager, PartitionLog
from kafkalike.log.checkpoint import parse_offset_checkpoint
from kafkalike.log.coordinator_log import read_records

CONFIG = LogConfig(segment_bytes=1024)
CHECKPOINT = "replication-offset-checkpoint"


def fill(manager: LogManager, topic: str, partition: int, batches: int, high_watermark: int) -> PartitionLog:
    log = manager.get_or_create(topic, partition, CONFIG, 0)
    for _ in range(batches):
        log.append(make_batch([b"y" * 50]), leader_epoch=0, now_ms=0)
    log.high_watermark = high_watermark
    return log


def test_written_on_its_own_interval_in_kafka_s_format(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], checkpoint_interval_ms=60_000, high_watermark_checkpoint_interval_ms=5_000)
    manager.flush_due(0)  # the intervals start counting here
    log = fill(manager, "orders", 3, 20, 12)
    fill(manager, "audit", 0, 2, 1)
    manager.flush_due(4_999)
    assert not (tmp_path / CHECKPOINT).exists()
    manager.flush_due(5_000)
    assert (tmp_path / CHECKPOINT).read_text() == "0\n2\naudit 0 1\norders 3 12\n"
    assert not (tmp_path / "recovery-point-offset-checkpoint").exists()  # that one waits for its own interval
    log.high_watermark = 20
    manager.flush_due(9_999)
    assert parse_offset_checkpoint((tmp_path / CHECKPOINT).read_bytes())[("orders", 3)] == 12
    manager.flush_due(10_000)
    assert parse_offset_checkpoint((tmp_path / CHECKPOINT).read_bytes())[("orders", 3)] == 20
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(CHECKPOINT)] == [CHECKPOINT]  # no temp file left


def test_a_reopened_log_starts_at_its_checkpointed_high_watermark(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    fill(manager, "t", 0, 20, 12)
    fill(manager, "t", 1, 5, 5)
    manager.close_all()  # writes it whatever the interval
    assert parse_offset_checkpoint((tmp_path / CHECKPOINT).read_bytes()) == {("t", 0): 12, ("t", 1): 5}

    again = LogManager([tmp_path])
    logs = {(log.directory.path, log.high_watermark, log.log_end_offset) for log in again.load_all(0)}
    assert logs == {(str(tmp_path / "t-0"), 12, 20), (str(tmp_path / "t-1"), 5, 5)}
    again.close_all()

    # A planned partition whose directory is already there: the same.
    third = LogManager([tmp_path])
    (planned,) = third.plan_new([("t", 0)])
    log = LogManager.open_new(planned, CONFIG, 0, None)
    third.adopt(planned, log)
    assert (log.high_watermark, log.log_end_offset) == (12, 20)


def test_the_checkpointed_value_is_clamped_to_the_recovered_log(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    fill(manager, "t", 0, 20, 20)
    manager.delete_records("t", 0, 7, now_ms=0)
    fill(manager, "t", 1, 10, 10)
    manager.close_all()
    (tmp_path / CHECKPOINT).write_text("0\n2\nt 0 3\nt 1 50\n")  # below the log start; past the log end
    again = LogManager([tmp_path])
    assert again.get_or_create("t", 0, CONFIG, 0).high_watermark == 7
    assert again.get_or_create("t", 1, CONFIG, 0).high_watermark == 10


@pytest.mark.parametrize("content", [None, b"0\n2\nt 0 12\n", b"1\n0\n", b"\xff\xfe"])
def test_a_missing_or_unreadable_checkpoint_starts_it_at_the_log_start(
    tmp_path: Path, content: bytes | None, caplog: pytest.LogCaptureFixture
) -> None:
    manager = LogManager([tmp_path])
    fill(manager, "t", 0, 20, 20)
    manager.delete_records("t", 0, 4, now_ms=0)
    manager.close_all()
    checkpoint = tmp_path / CHECKPOINT
    if content is None:
        checkpoint.unlink()
    else:
        checkpoint.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="kafkalike.log.manager"):
        log = LogManager([tmp_path]).get_or_create("t", 0, CONFIG, 0)
    assert (log.high_watermark, log.log_start_offset, log.log_end_offset) == (4, 4, 20)
    warned = [r for r in caplog.records if CHECKPOINT in r.getMessage()]
    assert len(warned) == (0 if content is None else 1)


def test_a_deleted_partition_leaves_the_checkpoint(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    fill(manager, "t", 0, 3, 3)
    fill(manager, "gone", 0, 3, 2)
    manager.close_all()
    again = LogManager([tmp_path])
    again.load_all(0)
    assert again.delete_partition("gone", 0)
    assert parse_offset_checkpoint((tmp_path / CHECKPOINT).read_bytes()) == {("t", 0): 3}


def test_memory_storage_keeps_it_across_a_restart_of_its_logs(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], storage="memory")
    fill(manager, "t", 0, 8, 5)
    manager.close_all()
    assert manager.get_or_create("t", 0, CONFIG, 0).high_watermark == 5
    assert not any(tmp_path.iterdir())


def test_a_log_opened_without_the_manager_starts_at_its_end(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", CONFIG, 0)
    log.append(make_batch([b"a"] * 4), leader_epoch=0, now_ms=0)
    log.close()
    assert PartitionLog.open(tmp_path / "t-0", CONFIG, 0).high_watermark == 4
    assert PartitionLog.open(tmp_path / "t-0", CONFIG, 0, high_watermark=2).high_watermark == 2


def test_a_coordinator_s_replay_still_reads_to_the_log_end(tmp_path: Path) -> None:
    # A coordinator's partition checkpointed with its high watermark below the log end (what was
    # not yet durable): the replay at load reads every record; its high watermark is the
    # partition's to move (the leader's: to the log end).
    manager = LogManager([tmp_path])
    log = manager.get_or_create("__consumer_offsets", 0, CONFIG, 0)
    for i in range(4):
        log.append(make_batch([b"v%d" % i], keys=[b"k%d" % i]), leader_epoch=0, now_ms=0)
    log.high_watermark = 2
    manager.close_all()
    reopened = LogManager([tmp_path]).get_or_create("__consumer_offsets", 0, CONFIG, 0)
    assert (reopened.high_watermark, reopened.log_end_offset) == (2, 4)
    replayed = list(read_records(reopened, skip_transactional=False))
    assert replayed == [(i, (b"k%d" % i, b"v%d" % i)) for i in range(4)]
