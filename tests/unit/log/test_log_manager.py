"""LogManager: partition directories, checkpoints, clean-shutdown marker, deletion."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from logtest_batches import batch_values, make_batch

from kafkalike.log import InconsistentTopicId, LogConfig, LogManager
from kafkalike.log.checkpoint import parse_offset_checkpoint, topic_id_to_string

CONFIG = LogConfig(segment_bytes=1024)


def fill(manager: LogManager, topic: str, partition: int, batches: int = 20) -> None:
    log = manager.get_or_create(topic, partition, CONFIG, 0)
    for _ in range(batches):
        log.append(make_batch([b"y" * 50]), leader_epoch=0, now_ms=0)
    log.high_watermark = log.log_end_offset


def test_layout_checkpoints_and_clean_shutdown(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    manager = LogManager([tmp_path])
    log = manager.get_or_create("orders", 3, CONFIG, 0, topic_id=topic_id)
    assert manager.get_or_create("orders", 3, CONFIG, 0) is log
    fill(manager, "orders", 3)
    manager.delete_records("orders", 3, 7, now_ms=0)
    assert parse_offset_checkpoint((tmp_path / "log-start-offset-checkpoint").read_bytes())[("orders", 3)] == 7
    manager.close_all()
    part = tmp_path / "orders-3"
    assert (part / "partition.metadata").read_text() == f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n"
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert parse_offset_checkpoint((tmp_path / "recovery-point-offset-checkpoint").read_bytes()) == {("orders", 3): 20}

    again = LogManager([tmp_path])
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # a crash from here on is unclean
    log = again.get_or_create("orders", 3, CONFIG, 0, topic_id=topic_id)
    assert log.recovered_segments == 0
    assert (log.log_start_offset, log.log_end_offset) == (7, 20)
    again.close_all()
    with pytest.raises(InconsistentTopicId):
        LogManager([tmp_path]).get_or_create("orders", 3, CONFIG, 0, topic_id=uuid.uuid4())


def test_unclean_start_recovers_from_the_recovery_point(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    fill(manager, "t", 0, batches=60)
    manager.flush_all()
    log = manager.get_or_create("t", 0, CONFIG, 0)
    log.append(make_batch([b"unflushed"]), leader_epoch=0, now_ms=0)
    segments = len(log.segments)
    # No close_all: the process "dies" here.
    recovered = LogManager([tmp_path]).get_or_create("t", 0, CONFIG, 0)
    assert recovered.log_end_offset == 61
    assert 1 <= recovered.recovered_segments < segments


def test_partitions_spread_over_log_dirs_and_load_all(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    for partition in range(4):
        fill(manager, "spread", partition, batches=2)
    assert sorted(p.name for p in dirs[0].iterdir() if p.is_dir()) == ["spread-0", "spread-2"]
    assert sorted(p.name for p in dirs[1].iterdir() if p.is_dir()) == ["spread-1", "spread-3"]
    manager.close_all()
    loaded = LogManager(dirs)
    logs = loaded.load_all(0)
    assert loaded.partitions() == [("spread", p) for p in range(4)]
    assert all(log.log_end_offset == 2 for log in logs)


def test_delete_partition_and_remove_orphans(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    for topic in ("keep", "gone", "my-dashed-topic"):
        fill(manager, topic, 0, batches=2)
    assert manager.delete_partition("gone", 0)
    assert not manager.delete_partition("gone", 0)
    assert not (tmp_path / "gone-0").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    manager.close_all()
    (tmp_path / "stale.0123abcd-delete").mkdir()  # an interrupted deletion
    again = LogManager([tmp_path])
    assert not (tmp_path / "stale.0123abcd-delete").exists()
    assert again.remove_orphans({("keep", 0)}) == [("my-dashed-topic", 0)]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["keep-0"]
    assert again.get("keep", 0) is None
    assert batch_values(again.get_or_create("keep", 0, CONFIG, 0).read_bytes(0, 1 << 20))[0][0] == 0


def test_retention_and_flush_through_manager(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    config = LogConfig(segment_bytes=1024, retention_bytes=1024, flush_interval_ms=1_000, file_delete_delay_ms=0)
    log = manager.get_or_create("r", 0, config, 0)
    for _ in range(40):
        log.append(make_batch([b"z" * 60]), leader_epoch=0, now_ms=0)
    log.high_watermark = log.log_end_offset
    assert log.recovery_point < log.log_end_offset
    manager.flush_due(1_000)
    assert log.recovery_point == log.log_end_offset
    assert manager.run_retention(1_000) > 0
    assert log.log_start_offset > 0
    start = parse_offset_checkpoint((tmp_path / "log-start-offset-checkpoint").read_bytes())[("r", 0)]
    assert start == log.log_start_offset


def test_memory_storage_touches_no_disk(tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "unused"], storage="memory")
    fill(manager, "m", 0, batches=30)
    manager.close_all()
    log = manager.get_or_create("m", 0, CONFIG, 0)
    assert log.log_end_offset == 30
    assert manager.delete_partition("m", 0)
    assert manager.get_or_create("m", 0, CONFIG, 0).log_end_offset == 0
    assert not (tmp_path / "unused").exists()


def test_the_recovery_point_checkpoint_is_written_on_its_interval(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], checkpoint_interval_ms=60_000)
    config = LogConfig(segment_bytes=1024, flush_interval_ms=100)
    log = manager.get_or_create("cp", 0, config, 0)
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    manager.flush_due(0)  # the interval starts counting here
    log.append(make_batch([b"a" * 60]), leader_epoch=0, now_ms=0)
    manager.flush_due(1_000)
    assert log.recovery_point == 1  # flushed at once, as flush.ms says...
    assert not checkpoint.exists()  # ...but checkpointed only once the interval is up
    manager.flush_due(59_999)
    assert not checkpoint.exists()
    manager.flush_due(60_000)
    assert parse_offset_checkpoint(checkpoint.read_bytes()) == {("cp", 0): 1}


def test_unclean_start_checks_every_segment_after_the_checkpointed_recovery_point(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], checkpoint_interval_ms=0)
    fill(manager, "rp", 0, batches=60)
    log = manager.get_or_create("rp", 0, CONFIG, 0)
    manager.flush_due(1)  # flushes the rolled segments, checkpoints the recovery point
    recovery_point = log.recovery_point
    assert 0 < recovery_point < log.log_end_offset
    unflushed = [s.base_offset for s in log.segments if s.next_offset > recovery_point]
    # No close_all: the process "dies" here.
    recovered = LogManager([tmp_path]).get_or_create("rp", 0, CONFIG, 0)
    assert recovered.recovered_segments == len(unflushed)
    assert recovered.log_end_offset == 60


def test_new_partitions_planned_made_elsewhere_then_adopted(tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "a", tmp_path / "b"])
    fill(manager, "old", 0)  # in a/: the fewest-partitions rule sends the next ones to b/ first
    planned = manager.plan_new([("new", 0), ("new", 1), ("new", 2)])
    assert [p.home.path.name for p in planned] == ["b", "a", "b"]
    assert not (tmp_path / "b" / "new-0").exists()  # nothing on disk until open_new
    logs = [LogManager.open_new(p, CONFIG, 0, uuid.uuid4()) for p in planned]
    assert manager.get("new", 0) is None  # not the manager's until adopted
    for new, log in zip(planned, logs, strict=True):
        manager.adopt(new, log)
    assert manager.get("new", 1) is logs[1] and (tmp_path / "a" / "new-1").is_dir()
    with pytest.raises(ValueError):
        manager.plan_new([("new", 0)])


def test_unplanned_places_are_free_again(tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "a", tmp_path / "b"])
    (taken,) = manager.plan_new([("x", 0)])
    assert taken.home.path.name == "a"
    assert [p.home.path.name for p in manager.plan_new([("y", 0)])] == ["b"]  # a/ holds a reservation
    manager.unplan(taken)
    # Given back: a/ has one partition fewer than b/ (y-0's reservation) now.
    assert [p.home.path.name for p in manager.plan_new([("z", 0)])] == ["a"]


def test_a_detached_partition_is_renamed_then_removed(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    fill(manager, "gone", 0)
    path = manager.detach_partition("gone", 0)
    assert path == tmp_path / "gone-0" and manager.get("gone", 0) is None
    renamed = LogManager.rename_for_removal(path)
    assert renamed is not None and renamed.name.endswith("-delete") and not path.exists()
    # The name is free at once: a new partition of it starts empty.
    (new,) = manager.plan_new([("gone", 0)])
    assert LogManager.open_new(new, CONFIG, 0, None).log_end_offset == 0
    LogManager.remove_directory(renamed)
    assert not renamed.exists()
    assert LogManager.rename_for_removal(path.with_name("never-0")) is None
