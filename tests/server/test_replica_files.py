"""A metadata delta's local changes applied with the file work off the event loop
(server/replica_files.py): logs made, roles taken, deleted partitions' directories removed,
and a failed open leaving nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalike.controller.delta import MetadataDelta
from kafkalike.log import LogConfig, LogManager
from kafkalike.log.manager import NewPartition
from kafkalike.replica import ReplicaManager, Role
from kafkalike.server.replica_files import apply_replica_changes
from kafkalike.testing.loop_blocking import LoopBlockingCalls
from tests.unit.replica.test_replica_manager import LOCAL, TOPIC, T, brokers, rec, topic


def config_for(name: str) -> LogConfig:
    return LogConfig()


def partition_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("orders-"))


async def test_a_delta_opens_and_removes_partitions_off_the_loop(tmp_path: Path) -> None:
    replicas = ReplicaManager(LogManager([tmp_path]), LOCAL)
    replicas.logs.remove_orphans(set())  # the log dirs' scan, as a broker makes it at start-up
    created = MetadataDelta(brokers()).replay_all(topic(leaders=[1, 2]))
    with LoopBlockingCalls(roots=[tmp_path]) as calls:
        applied = await apply_replica_changes(replicas, created.local_changes(LOCAL), config_for, now_ms=0)
        calls.check()  # every directory and file made on a worker thread
    assert partition_dirs(tmp_path) == ["orders-0", "orders-1"]
    assert replicas[("orders", 0)].role is Role.LEADER and replicas[("orders", 1)].role is Role.FOLLOWER
    assert len(applied.became_leader) == len(applied.became_follower) == 1
    removed = MetadataDelta(created.apply()).replay_all([rec(T.REMOVE_TOPIC_RECORD, topic_id=TOPIC)])
    with LoopBlockingCalls(roots=[tmp_path]) as calls:
        applied = await apply_replica_changes(replicas, removed.local_changes(LOCAL), config_for, now_ms=0)
        calls.check()
    assert sorted(applied.removed) == [("orders", 0), ("orders", 1)]
    assert not replicas and partition_dirs(tmp_path) == []


async def test_a_failed_open_applies_nothing_and_removes_what_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replicas = ReplicaManager(LogManager([tmp_path]), LOCAL)
    real_open = LogManager.open_new

    def open_or_fail(new: NewPartition, *args: object, **kwargs: object) -> object:
        if new.tp == ("orders", 1):
            raise OSError(28, "No space left on device")
        return real_open(new, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogManager, "open_new", staticmethod(open_or_fail))
    delta = MetadataDelta(brokers()).replay_all(topic(leaders=[1, 1]))
    with pytest.raises(OSError):
        await apply_replica_changes(replicas, delta.local_changes(LOCAL), config_for, now_ms=0)
    assert not replicas and partition_dirs(tmp_path) == []
    monkeypatch.setattr(LogManager, "open_new", staticmethod(real_open))
    await apply_replica_changes(replicas, delta.local_changes(LOCAL), config_for, now_ms=0)
    assert set(replicas) == {("orders", 0), ("orders", 1)}
