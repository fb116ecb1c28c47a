"""Replaying metadata records into immutable images (Kafka's MetadataDelta rules)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkalike.controller.delta import ControllerResult, MetadataDelta, MetadataReplayError, replay_records
from kafkalike.controller.image import (
    BROKER_RESOURCE,
    EMPTY_IMAGE,
    TOPIC_RESOURCE,
    BrokerRegistration,
    ConfigResource,
    Endpoint,
    FeatureRange,
    MetadataImage,
    MetadataProvenance,
    PartitionRegistration,
)
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record

T = MetadataRecordType
TOPIC = uuid.UUID(int=0xA1)
OTHER = uuid.UUID(int=0xB2)
INCARNATION = uuid.UUID(int=0xC3)


def rec(record_type: MetadataRecordType, **fields: Any) -> ApiMessageAndVersion:
    return metadata_record(record_type, **fields)


def register(broker_id: int, epoch: int = 10, **fields: Any) -> ApiMessageAndVersion:
    return rec(
        T.REGISTER_BROKER_RECORD,
        broker_id=broker_id,
        broker_epoch=epoch,
        incarnation_id=INCARNATION,
        end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9000 + broker_id, "security_protocol": 0}],
        **fields,
    )


def topic_with_partitions(
    topic_id: uuid.UUID = TOPIC, name: str = "orders", count: int = 2
) -> list[ApiMessageAndVersion]:
    out = [rec(T.TOPIC_RECORD, name=name, topic_id=topic_id)]
    for p in range(count):
        out.append(
            rec(
                T.PARTITION_RECORD,
                partition_id=p,
                topic_id=topic_id,
                replicas=[1, 2],
                isr=[1, 2],
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
            )
        )
    return out


def image_with_topic() -> MetadataImage:
    return replay_records(EMPTY_IMAGE, [register(1), register(2), *topic_with_partitions()])


def change(**fields: Any) -> ApiMessageAndVersion:
    return rec(T.PARTITION_CHANGE_RECORD, **{"topic_id": TOPIC, "partition_id": 0, **fields})


def partition0(image: MetadataImage) -> PartitionRegistration:
    p = image.partition(TOPIC, 0)
    assert p is not None
    return p


# -- features, producer ids, no-ops


def test_feature_levels_set_metadata_version_and_features_level_0_removes_one() -> None:
    image = replay_records(
        EMPTY_IMAGE,
        [
            rec(T.FEATURE_LEVEL_RECORD, name="metadata.version", feature_level=25),
            rec(T.FEATURE_LEVEL_RECORD, name="group.version", feature_level=1),
            rec(T.FEATURE_LEVEL_RECORD, name="transaction.version", feature_level=2),
        ],
    )
    assert image.metadata_version == 25
    assert dict(image.features) == {"group.version": 1, "transaction.version": 2}
    image = replay_records(image, [rec(T.FEATURE_LEVEL_RECORD, name="transaction.version", feature_level=0)])
    assert dict(image.features) == {"group.version": 1} and image.metadata_version == 25


def test_producer_ids_record_moves_the_next_block() -> None:
    assert EMPTY_IMAGE.next_producer_id == -1
    image = replay_records(
        EMPTY_IMAGE, [rec(T.PRODUCER_IDS_RECORD, broker_id=1, broker_epoch=10, next_producer_id=1000)]
    )
    assert image.next_producer_id == 1000


def test_no_op_and_unmodelled_records_change_nothing() -> None:
    image = image_with_topic()
    quota = ApiMessageAndVersion(T.CLIENT_QUOTA_RECORD, 0, None, b"\x00")
    assert replay_records(image, [rec(T.NO_OP_RECORD), quota]) == image


# -- brokers


def test_register_broker_makes_a_fenced_registration_with_listeners_and_features() -> None:
    image = replay_records(
        EMPTY_IMAGE,
        [
            register(
                3,
                rack="r1",
                features=[{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 25}],
                log_dirs=[uuid.UUID(int=1)],
            )
        ],
    )
    broker = image.brokers[3]
    assert broker == BrokerRegistration(
        broker_id=3,
        epoch=10,
        incarnation_id=INCARNATION,
        listeners=(Endpoint("PLAINTEXT", "127.0.0.1", 9003, 0),),
        supported_features={"metadata.version": FeatureRange(7, 25)},
        rack="r1",
        fenced=True,
        directories=(uuid.UUID(int=1),),
    )
    assert image.unfenced_brokers() == []


def test_registering_again_replaces_the_registration_and_unregister_removes_it() -> None:
    image = replay_records(EMPTY_IMAGE, [register(1, epoch=10), register(1, epoch=20)])
    assert image.brokers[1].epoch == 20
    image = replay_records(image, [rec(T.UNREGISTER_BROKER_RECORD, broker_id=1, broker_epoch=20)])
    assert 1 not in image.brokers


def test_unfence_and_fence_need_the_broker_current_epoch() -> None:
    image = replay_records(EMPTY_IMAGE, [register(1, epoch=10), rec(T.UNFENCE_BROKER_RECORD, id=1, epoch=10)])
    assert not image.brokers[1].fenced and [b.broker_id for b in image.unfenced_brokers()] == [1]
    image = replay_records(image, [rec(T.FENCE_BROKER_RECORD, id=1, epoch=10)])
    assert image.brokers[1].fenced
    with pytest.raises(MetadataReplayError, match="given epoch, 9, did not match the current broker epoch, 10"):
        MetadataDelta(image).replay(rec(T.UNFENCE_BROKER_RECORD, id=1, epoch=9))
    with pytest.raises(MetadataReplayError, match="broker 7, but that broker was not registered"):
        MetadataDelta(image).replay(rec(T.FENCE_BROKER_RECORD, id=7, epoch=10))


def test_broker_registration_change_fences_unfences_and_enters_controlled_shutdown() -> None:
    image = replay_records(EMPTY_IMAGE, [register(1)])

    def after(**fields: Any) -> BrokerRegistration:
        r = rec(T.BROKER_REGISTRATION_CHANGE_RECORD, broker_id=1, broker_epoch=10, **fields)
        return replay_records(image, [r]).brokers[1]

    assert not after(fenced=-1).fenced
    assert after(fenced=0) == image.brokers[1]
    assert after(fenced=1).fenced
    assert after(in_controlled_shutdown=1).in_controlled_shutdown
    assert after(log_dirs=[uuid.UUID(int=4)]).directories == (uuid.UUID(int=4),)
    with pytest.raises(MetadataReplayError, match="unknown fenced 2"):
        after(fenced=2)
    with pytest.raises(MetadataReplayError, match="did not match"):
        replay_records(image, [rec(T.BROKER_REGISTRATION_CHANGE_RECORD, broker_id=1, broker_epoch=11, fenced=-1)])


# -- topics and partitions


def test_topic_and_partition_records_make_a_topic_by_id_and_by_name() -> None:
    image = image_with_topic()
    topic = image.topic("orders")
    assert topic is not None and image.topics_by_id[TOPIC] is topic
    assert sorted(topic.partitions) == [0, 1]
    assert partition0(image) == PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=1)


def test_partition_change_without_a_leader_keeps_the_leader_and_its_epoch_but_bumps_the_partition_epoch() -> None:
    p = partition0(replay_records(image_with_topic(), [change(isr=[1])]))
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1,), 1, 0, 1)


def test_partition_change_to_a_new_leader_bumps_both_epochs() -> None:
    p = partition0(replay_records(image_with_topic(), [change(leader=2)]))
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (2, 1, 1, (1, 2))


def test_partition_change_to_no_leader_is_a_leader_change() -> None:
    p = partition0(replay_records(image_with_topic(), [change(leader=-1, isr=[])]))
    assert (p.leader, p.has_leader, p.leader_epoch, p.partition_epoch, p.isr) == (-1, False, 1, 1, ())


def test_partition_change_of_replicas_and_reassignment_lists() -> None:
    p = partition0(
        replay_records(image_with_topic(), [change(replicas=[1, 2, 3], adding_replicas=[3], removing_replicas=[])])
    )
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr) == ((1, 2, 3), (3,), (), (1, 2))
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)


def test_leader_recovery_state_minus_1_is_unchanged() -> None:
    image = replay_records(image_with_topic(), [change(leader=2, leader_recovery_state=1)])
    assert partition0(image).leader_recovery_state == 1
    assert partition0(replay_records(image, [change(isr=[2])])).leader_recovery_state == 1
    assert partition0(replay_records(image, [change(leader_recovery_state=0)])).leader_recovery_state == 0


def test_several_changes_in_one_delta_build_on_each_other() -> None:
    p = partition0(
        replay_records(image_with_topic(), [change(leader=2), change(isr=[2]), change(leader=1, isr=[1, 2])])
    )
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1, 2), 2, 3)


def test_partition_records_for_a_topic_created_in_the_same_delta() -> None:
    records = [
        *topic_with_partitions(OTHER, "new", 1),
        rec(T.PARTITION_CHANGE_RECORD, topic_id=OTHER, partition_id=0, leader=2),
    ]
    delta = MetadataDelta(image_with_topic()).replay_all(records)
    assert delta.created_topic_ids == {OTHER}
    assert set(delta.changed_partitions) == {(OTHER, 0)}
    image = delta.apply()
    assert image.partition(OTHER, 0) == PartitionRegistration(
        (1, 2), (1, 2), leader=2, leader_epoch=1, partition_epoch=1
    )


def test_changes_to_unknown_partitions_or_topics_are_errors() -> None:
    with pytest.raises(MetadataReplayError, match="no partition"):
        replay_records(image_with_topic(), [change(partition_id=5, leader=1)])
    with pytest.raises(MetadataReplayError, match="no topic"):
        replay_records(image_with_topic(), [rec(T.PARTITION_CHANGE_RECORD, topic_id=OTHER, partition_id=0, leader=1)])
    with pytest.raises(MetadataReplayError, match="no such topic"):
        replay_records(image_with_topic(), [rec(T.REMOVE_TOPIC_RECORD, topic_id=OTHER)])


def test_remove_topic_drops_its_partitions_and_configs() -> None:
    config = rec(T.CONFIG_RECORD, resource_type=TOPIC_RESOURCE, resource_name="orders", name="retention.ms", value="1")
    image = replay_records(image_with_topic(), [config])
    assert dict(image.topic_configs("orders")) == {"retention.ms": "1"}
    delta = MetadataDelta(image)
    delta.replay(rec(T.REMOVE_TOPIC_RECORD, topic_id=TOPIC))
    assert set(delta.deleted_topics) == {TOPIC}
    after = delta.apply()
    assert after.topic("orders") is None and TOPIC not in after.topics_by_id
    assert ConfigResource(TOPIC_RESOURCE, "orders") not in after.configs


def test_a_topic_deleted_and_recreated_under_its_name_in_one_delta() -> None:
    records = [rec(T.REMOVE_TOPIC_RECORD, topic_id=TOPIC), *topic_with_partitions(OTHER, "orders", 1)]
    image = replay_records(image_with_topic(), records)
    topic = image.topic("orders")
    assert topic is not None and topic.topic_id == OTHER and list(topic.partitions) == [0]
    assert list(image.topics_by_id) == [OTHER]


def test_a_topic_created_and_removed_in_one_delta_leaves_nothing() -> None:
    records = [*topic_with_partitions(OTHER, "brief", 1), rec(T.REMOVE_TOPIC_RECORD, topic_id=OTHER)]
    delta = MetadataDelta(image_with_topic()).replay_all(records)
    assert delta.deleted_topics == {} and delta.apply() == image_with_topic()


# -- configs


def test_config_records_set_and_null_removes_and_an_emptied_resource_disappears() -> None:
    def cfg(name: str, value: str | None, resource: str = "") -> ApiMessageAndVersion:
        return rec(T.CONFIG_RECORD, resource_type=BROKER_RESOURCE, resource_name=resource, name=name, value=value)

    image = replay_records(EMPTY_IMAGE, [cfg("log.retention.ms", "5"), cfg("num.io.threads", "4", "1")])
    assert dict(image.configs[ConfigResource(BROKER_RESOURCE, "")]) == {"log.retention.ms": "5"}
    assert dict(image.configs[ConfigResource(BROKER_RESOURCE, "1")]) == {"num.io.threads": "4"}
    image = replay_records(image, [cfg("log.retention.ms", None)])
    assert ConfigResource(BROKER_RESOURCE, "") not in image.configs


# -- immutability, sharing, rebuilding


def test_images_are_never_changed_and_share_what_did_not_change() -> None:
    before = image_with_topic()
    snapshot = replay_records(EMPTY_IMAGE, before.records())
    after = replay_records(before, [change(leader=2), rec(T.UNFENCE_BROKER_RECORD, id=2, epoch=10)])
    assert replay_records(EMPTY_IMAGE, before.records()) == snapshot  # `before` is as it was
    assert partition0(before).leader == 1 and before.brokers[2].fenced
    assert after.brokers[1] is before.brokers[1]
    assert after.topics_by_id[TOPIC].partitions[1] is before.topics_by_id[TOPIC].partitions[1]
    untouched = replay_records(before, [rec(T.NO_OP_RECORD)])
    assert untouched.topics_by_id is before.topics_by_id and untouched.brokers is before.brokers
    with pytest.raises(TypeError):
        before.brokers[9] = before.brokers[1]  # type: ignore[index]
    with pytest.raises(AttributeError):
        before.next_producer_id = 5  # type: ignore[misc]


def test_an_image_rebuilds_from_its_own_records() -> None:
    records = [
        rec(T.FEATURE_LEVEL_RECORD, name="metadata.version", feature_level=25),
        rec(T.FEATURE_LEVEL_RECORD, name="kraft.version", feature_level=1),
        register(
            1, rack="r", features=[{"name": "group.version", "min_supported_version": 0, "max_supported_version": 1}]
        ),
        register(2),
        rec(T.UNFENCE_BROKER_RECORD, id=1, epoch=10),
        rec(T.BROKER_REGISTRATION_CHANGE_RECORD, broker_id=2, broker_epoch=10, in_controlled_shutdown=1),
        *topic_with_partitions(),
        change(leader=2, isr=[2], eligible_leader_replicas=[1], last_known_elr=[1]),
        rec(
            T.CONFIG_RECORD,
            resource_type=TOPIC_RESOURCE,
            resource_name="orders",
            name="cleanup.policy",
            value="compact",
        ),
        rec(T.CONFIG_RECORD, resource_type=BROKER_RESOURCE, resource_name="", name="x", value="y"),
        rec(T.PRODUCER_IDS_RECORD, broker_id=1, broker_epoch=10, next_producer_id=2000),
    ]
    image = replay_records(EMPTY_IMAGE, records)
    rebuilt = replay_records(EMPTY_IMAGE, image.records())
    assert rebuilt == image
    assert image.records()[0].name == "metadata.version"  # metadata.version leads, as in Kafka


def test_apply_records_the_provenance() -> None:
    provenance = MetadataProvenance(last_offset=41, last_epoch=3, last_append_time_ms=1000)
    assert MetadataDelta(EMPTY_IMAGE).apply(provenance).provenance == provenance
    assert replay_records(EMPTY_IMAGE, []).provenance == MetadataProvenance()


def test_controller_result_holds_records_and_reply() -> None:
    result = ControllerResult.of(iter(topic_with_partitions()), reply="ok")
    assert len(result.records) == 3 and result.reply == "ok"


# -- what a delta asks of one broker


def test_local_changes_for_new_partitions_split_leaders_and_followers() -> None:
    delta = MetadataDelta(replay_records(EMPTY_IMAGE, [register(1), register(2)])).replay_all(topic_with_partitions())
    on_1, on_2, on_3 = delta.local_changes(1), delta.local_changes(2), delta.local_changes(3)
    assert set(on_1.leaders) == set(on_1.elected_leaders) == {(TOPIC, 0), (TOPIC, 1)} and not on_1.followers
    assert on_1.leaders[(TOPIC, 0)].topic_name == "orders"
    assert set(on_2.followers) == {(TOPIC, 0), (TOPIC, 1)} and not on_2.leaders
    assert not (on_3.leaders or on_3.followers or on_3.deletes)


def test_local_changes_after_a_leader_move_an_isr_change_and_a_removal() -> None:
    records = [
        change(leader=2),  # partition 0: 2 becomes leader, 1 a follower
        rec(T.PARTITION_CHANGE_RECORD, topic_id=TOPIC, partition_id=1, isr=[1]),  # partition 1: ISR only
    ]
    delta = MetadataDelta(image_with_topic()).replay_all(records)
    on_1, on_2 = delta.local_changes(1), delta.local_changes(2)
    assert set(on_2.elected_leaders) == {(TOPIC, 0)} and set(on_2.followers) == {(TOPIC, 1)}
    assert set(on_1.leaders) == {(TOPIC, 1)} and not on_1.elected_leaders  # still leader, epoch unchanged
    assert set(on_1.followers) == {(TOPIC, 0)}
    moved = MetadataDelta(image_with_topic()).replay_all([change(replicas=[2], isr=[2], leader=2)])
    assert set(moved.local_changes(1).deletes) == {(TOPIC, 0)}
    assert moved.local_changes(1).deletes[(TOPIC, 0)].registration.replicas == (1, 2)  # as it was


def test_local_changes_of_a_deleted_topic_delete_every_hosted_partition() -> None:
    delta = MetadataDelta(image_with_topic()).replay_all([rec(T.REMOVE_TOPIC_RECORD, topic_id=TOPIC)])
    assert set(delta.local_changes(2).deletes) == {(TOPIC, 0), (TOPIC, 1)}
    assert not delta.local_changes(3).deletes


def test_changes_not_taken_then_later_ones_leave_the_broker_where_both_in_turn_would() -> None:
    created = MetadataDelta(replay_records(EMPTY_IMAGE, [register(1), register(2)])).replay_all(topic_with_partitions())
    untaken = created.local_changes(1).roles()  # broker 1 elected for both partitions, not taken
    assert set(untaken.elected_leaders) == {(TOPIC, 0), (TOPIC, 1)} and not untaken.deletes
    # Partition 0 moves to broker 2, partition 1 changes its ISR only: 1 stays elected for 1.
    image = created.apply()
    later = MetadataDelta(image).replay_all(
        [change(leader=2), rec(T.PARTITION_CHANGE_RECORD, topic_id=TOPIC, partition_id=1, isr=[1])]
    )
    merged = untaken.then(later.local_changes(1))
    assert set(merged.followers) == {(TOPIC, 0)} and set(merged.leaders) == set(merged.elected_leaders) == {(TOPIC, 1)}
    assert merged.leaders[(TOPIC, 1)].registration.isr == (1,)  # the later state
    # A deletion takes the partitions out of what is left to take, and is kept itself.
    removed = untaken.then(
        MetadataDelta(image).replay_all([rec(T.REMOVE_TOPIC_RECORD, topic_id=TOPIC)]).local_changes(1)
    )
    assert not (removed.leaders or removed.followers or removed.elected_leaders)
    assert set(removed.deletes) == {(TOPIC, 0), (TOPIC, 1)}
    assert removed and not removed.roles()
