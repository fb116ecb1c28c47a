"""The replica manager applies the controller's decisions, from real metadata records' deltas."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkalike.controller.delta import MetadataDelta, replay_records
from kafkalike.controller.image import EMPTY_IMAGE, MetadataImage
from kafkalike.log import LogConfig, LogManager
from kafkalike.log.storage import IMMEDIATE
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record
from kafkalike.protocol.records import Record, build_batch
from kafkalike.replica import ReplicaManager, Role

T = MetadataRecordType
TOPIC = uuid.UUID(int=0xA1)
INCARNATION = uuid.UUID(int=0xC3)
LOCAL = 1


def rec(record_type: MetadataRecordType, **fields: Any) -> ApiMessageAndVersion:
    return metadata_record(record_type, **fields)


def register(broker_id: int) -> ApiMessageAndVersion:
    return rec(
        T.REGISTER_BROKER_RECORD,
        broker_id=broker_id,
        broker_epoch=10,
        incarnation_id=INCARNATION,
        end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9000 + broker_id, "security_protocol": 0}],
    )


def topic(leaders: list[int]) -> list[ApiMessageAndVersion]:
    """Topic "orders", partition p led by ``leaders[p]``, replicated on brokers 1 and 2."""
    out = [rec(T.TOPIC_RECORD, name="orders", topic_id=TOPIC)]
    for p, leader in enumerate(leaders):
        out.append(
            rec(
                T.PARTITION_RECORD,
                partition_id=p,
                topic_id=TOPIC,
                replicas=[1, 2],
                isr=[1, 2],
                leader=leader,
                leader_epoch=0,
                partition_epoch=0,
            )
        )
    return out


def brokers() -> MetadataImage:
    return replay_records(EMPTY_IMAGE, [register(1), register(2)])


def config_for(name: str) -> LogConfig:
    return LogConfig()


def apply(replicas: ReplicaManager, image: MetadataImage, records: list[ApiMessageAndVersion]) -> tuple[Any, Any]:
    delta = MetadataDelta(image).replay_all(records)
    applied = replicas.apply_changes(delta.local_changes(LOCAL), config_for, now_ms=0)
    return applied, delta.apply()


@pytest.fixture(params=["memory", "file"])
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> ReplicaManager:
    return ReplicaManager(LogManager([tmp_path], storage=request.param), LOCAL)


def test_a_new_topic_opens_its_partitions_as_leader_or_follower(replicas: ReplicaManager) -> None:
    applied, _ = apply(replicas, brokers(), topic(leaders=[1, 2]))
    assert set(replicas) == {("orders", 0), ("orders", 1)}
    led, followed = replicas[("orders", 0)], replicas[("orders", 1)]
    assert led.role is Role.LEADER and led.isr == (1, 2) and led.replicas == (1, 2)
    assert followed.role is Role.FOLLOWER and followed.leader_id == 2
    assert [p.tp for p in applied.became_leader] == [("orders", 0)]
    assert [p.tp for p in applied.became_follower] == [("orders", 1)]
    assert replicas.get_by_id(TOPIC, 1) is followed


def test_a_leader_change_moves_roles_and_epochs(replicas: ReplicaManager) -> None:
    _, image = apply(replicas, brokers(), topic(leaders=[1, 2]))
    changes = [
        rec(T.PARTITION_CHANGE_RECORD, topic_id=TOPIC, partition_id=0, leader=2),
        rec(T.PARTITION_CHANGE_RECORD, topic_id=TOPIC, partition_id=1, leader=1),
    ]
    applied, _ = apply(replicas, image, changes)
    demoted, promoted = replicas[("orders", 0)], replicas[("orders", 1)]
    assert demoted.role is Role.FOLLOWER and demoted.leader_id == 2 and demoted.leader_epoch == 1
    assert promoted.role is Role.LEADER and promoted.leader_epoch == 1 and promoted.partition_epoch == 1
    assert [p.tp for p in applied.became_leader] == [("orders", 1)]
    assert [p.tp for p in applied.became_follower] == [("orders", 0)]


def test_an_isr_change_is_not_a_new_term(replicas: ReplicaManager) -> None:
    _, image = apply(replicas, brokers(), topic(leaders=[1]))
    applied, _ = apply(replicas, image, [rec(T.PARTITION_CHANGE_RECORD, topic_id=TOPIC, partition_id=0, isr=[1])])
    assert replicas[("orders", 0)].isr == (1,) and replicas[("orders", 0)].partition_epoch == 1
    assert not applied.became_leader


def test_a_deleted_topic_and_a_moved_replica_are_removed_with_their_files(
    replicas: ReplicaManager, tmp_path: Path
) -> None:
    _, image = apply(replicas, brokers(), topic(leaders=[1, 1]))
    moved, image = apply(
        replicas,
        image,
        [rec(T.PARTITION_CHANGE_RECORD, topic_id=TOPIC, partition_id=1, replicas=[2], isr=[2], leader=2)],
    )
    assert moved.removed == [("orders", 1)] and set(replicas) == {("orders", 0)}
    deleted, _ = apply(replicas, image, [rec(T.REMOVE_TOPIC_RECORD, topic_id=TOPIC)])
    assert deleted.removed == [("orders", 0)] and not replicas and replicas.get_by_id(TOPIC, 0) is None
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("orders-")]


def test_another_brokers_partitions_open_nothing_here(replicas: ReplicaManager) -> None:
    records = [rec(T.TOPIC_RECORD, name="elsewhere", topic_id=TOPIC)]
    records.append(
        rec(T.PARTITION_RECORD, partition_id=0, topic_id=TOPIC, replicas=[2], isr=[2], leader=2, partition_epoch=0)
    )
    applied, _ = apply(replicas, brokers(), records)
    assert not replicas and not applied.became_leader and not applied.became_follower


def test_a_failed_open_applies_nothing_and_gives_the_places_back(replicas: ReplicaManager) -> None:
    delta = MetadataDelta(brokers()).replay_all(topic(leaders=[1, 1]))
    plan = replicas.plan_changes(delta.local_changes(LOCAL), config_for)
    plan.error = OSError(28, "No space left on device")  # as open_logs returns it from the worker thread
    with pytest.raises(OSError):
        replicas.complete_changes(plan, 0)
    assert not replicas
    applied = replicas.apply_changes(delta.local_changes(LOCAL), config_for, now_ms=0)  # and again, it works
    assert len(applied.became_leader) == 2


def test_a_topic_deleted_and_made_again_in_one_delta_gets_a_new_log(replicas: ReplicaManager) -> None:
    _, image = apply(replicas, brokers(), topic(leaders=[1]))
    old_log = replicas[("orders", 0)].log
    again = uuid.UUID(int=0xD4)
    records = [
        rec(T.REMOVE_TOPIC_RECORD, topic_id=TOPIC),
        rec(T.TOPIC_RECORD, name="orders", topic_id=again),
        rec(T.PARTITION_RECORD, partition_id=0, topic_id=again, replicas=[1], isr=[1], leader=1, partition_epoch=0),
    ]
    applied, _ = apply(replicas, image, records)
    assert applied.removed == [("orders", 0)] and [p.tp for p in applied.became_leader] == [("orders", 0)]
    assert replicas[("orders", 0)].topic_id == again and replicas[("orders", 0)].log is not old_log
    assert replicas.get_by_id(TOPIC, 0) is None


def test_a_reopened_replica_keeps_its_checkpointed_high_watermark_until_its_leader_says(tmp_path: Path) -> None:
    # A leader killed with appends no follower had: reopened as a follower, those records are
    # not committed, so the high watermark must not jump to its log end.
    logs = LogManager([tmp_path], storage="file")
    first = ReplicaManager(logs, LOCAL)
    apply(first, brokers(), topic(leaders=[1]))
    led = first[("orders", 0)]
    batch = bytearray(build_batch([Record(value=b"uncommitted")] * 3, base_timestamp=1))
    led.complete_append(led.append_as_leader(batch, now_ms=1, log_append_time=False, syncs=IMMEDIATE), None, 1)
    assert led.log_end_offset == 3 and led.high_watermark == 0  # broker 2 never fetched them
    logs.close_all()

    reopened = ReplicaManager(LogManager([tmp_path], storage="file"), LOCAL)
    apply(reopened, brokers(), topic(leaders=[2]))
    follower = reopened[("orders", 0)]
    assert follower.role is Role.FOLLOWER and follower.log_end_offset == 3
    assert follower.high_watermark == 0


def test_a_recovered_follower_keeps_its_checkpointed_high_watermark(replicas: ReplicaManager) -> None:
    """A broker restarting opens its logs (records past its high-watermark checkpoint: never
    committed, maybe diverging) before the metadata makes it a follower: its high watermark
    stays the checkpoint's, not its log end, as Kafka's does."""
    delta = MetadataDelta(brokers()).replay_all(topic(leaders=[2]))
    plan = replicas.plan_changes(delta.local_changes(LOCAL), config_for)
    plan.open_logs(0)
    [new] = plan.new
    assert new.log is not None
    batch = build_batch([Record(value=b"v%d" % i) for i in range(5)], partition_leader_epoch=0, base_timestamp=1)
    result = new.log.append_as_follower(batch, now_ms=0, syncs=IMMEDIATE)
    if result.flush is not None:
        new.log.complete_append(result, None, 0)
    new.log.high_watermark = 2  # what its checkpoint said
    replicas.complete_changes(plan, 0)
    follower = replicas[("orders", 0)]
    assert follower.role is Role.FOLLOWER and follower.log_end_offset == 5
    assert follower.high_watermark == 2
