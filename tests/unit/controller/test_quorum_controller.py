"""The controller facade: operations against the latest image, records committed through the
metadata log's own encoding, one replay path for the active controller and a standby."""

from __future__ import annotations

import random
import uuid
from typing import Any

from controllertest_harness import broker_records, cluster, create_topics, request, topic_spec

from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.features import LATEST_PRODUCTION, LEVELS_BY_NAME, bootstrap_records, feature_levels
from kafkalike.controller.image import EMPTY_IMAGE
from kafkalike.controller.producer_id_control import PRODUCER_ID_BLOCK_SIZE
from kafkalike.controller.quorum_controller import QuorumController
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import (
    MetadataBatch,
    MetadataRecordType,
    build_metadata_batch,
    metadata_record,
    read_metadata_batches,
)

T = MetadataRecordType
E = ErrorCode


class MetadataLog:
    """Appended batches, encoded and decoded as the metadata log holds them."""

    def __init__(self) -> None:
        self.batches: list[MetadataBatch] = []
        self.end_offset = 0

    def append(self, result: ControllerResult[Any], epoch: int = 1) -> MetadataBatch:
        data = build_metadata_batch(result.records, base_offset=self.end_offset, leader_epoch=epoch, append_time_ms=5)
        [batch] = read_metadata_batches(data)
        self.batches.append(batch)
        self.end_offset = batch.last_offset + 1
        return batch


def active(image: Any = None, seed: int = 3) -> QuorumController:
    return QuorumController(node_id=1, rng=random.Random(seed), image=cluster([1, 2, 3]) if image is None else image)


def append(controller: QuorumController, log: MetadataLog, result: ControllerResult[Any]) -> MetadataBatch:
    batch = log.append(result)
    controller.appended(batch.last_offset)
    return batch


def test_an_empty_log_gets_the_bootstrap_records_in_a_metadata_transaction() -> None:
    controller = QuorumController(node_id=1, rng=random.Random(0))
    result = controller.activate()
    types = [r.type for r in result.records]
    assert types[0] == T.BEGIN_TRANSACTION_RECORD and types[-1] == T.END_TRANSACTION_RECORD
    assert result.records[1].name == "metadata.version"
    assert result.records[1].feature_level == LEVELS_BY_NAME[LATEST_PRODUCTION]
    log = MetadataLog()
    controller.replay(append(controller, log, result))
    assert controller.image.metadata_version == LEVELS_BY_NAME[LATEST_PRODUCTION]
    assert controller.image.features == {
        "eligible.leader.replicas.version": 1,
        "group.version": 1,
        "transaction.version": 2,
    }
    # ELR on: the cluster-level min.insync.replicas, the static one, last in the transaction
    config = result.records[-2]
    assert (config.type, config.version, config.resource_type, config.resource_name) == (T.CONFIG_RECORD, 0, 4, "")
    assert (config.name, config.value) == ("min.insync.replicas", "1")
    assert controller.activate().records == ()  # a log that has them gets nothing more


def test_without_elr_the_bootstrap_sets_no_cluster_level_min_insync_replicas() -> None:
    records = bootstrap_records(feature_levels("4.0-IV3", dynamic_quorum=False))
    result = QuorumController(node_id=1, rng=random.Random(0)).activate(records)
    assert T.CONFIG_RECORD not in [r.type for r in result.records]


def test_under_elr_min_insync_replicas_is_the_clusters_not_a_brokers() -> None:
    controller, log = QuorumController(node_id=1, rng=random.Random(0)), MetadataLog()
    controller.replay(append(controller, log, controller.activate()))

    def alter(resource_name: str, value: str | None, operation: int = 0) -> tuple[int, str | None]:
        entry = {"name": "min.insync.replicas", "config_operation": operation, "value": value}
        body = {"resources": [{"resource_type": 4, "resource_name": resource_name, "configs": [entry]}]}
        (reply,) = controller.incremental_alter_configs(
            request(44, 1, {**body, "validate_only": False}), now_ms=0
        ).reply
        return reply.error.code, reply.error.message

    broker_level = (
        ErrorCode.INVALID_CONFIG,
        "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
    )
    assert alter("1", "2") == broker_level
    assert alter("1", None, operation=1) == broker_level
    assert alter("", None, operation=1) == (
        ErrorCode.INVALID_CONFIG,
        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
    )
    assert alter("", "2") == (ErrorCode.NONE, None)


def test_bootstrap_from_the_formatted_checkpoint_and_an_old_version_without_transactions() -> None:
    records = bootstrap_records(feature_levels("3.5-IV2", dynamic_quorum=False))
    result = QuorumController(node_id=1, rng=random.Random(0)).activate(records)
    assert [r.type for r in result.records] == [T.FEATURE_LEVEL_RECORD]
    assert result.records[0].feature_level == 11


def test_a_partial_bootstrap_transaction_is_aborted_and_written_again() -> None:
    controller = QuorumController(node_id=1, rng=random.Random(0))
    log = MetadataLog()
    begun = ControllerResult.of([metadata_record(T.BEGIN_TRANSACTION_RECORD, name="Bootstrap records")], None)
    controller.replay(log.append(begun))
    result = controller.activate()
    assert [r.type for r in result.records[:2]] == [T.ABORT_TRANSACTION_RECORD, T.BEGIN_TRANSACTION_RECORD]
    controller.replay(append(controller, log, result))
    assert controller.image.metadata_version == LEVELS_BY_NAME[LATEST_PRODUCTION]


def test_operations_see_what_is_appended_before_it_is_committed() -> None:
    controller, log = active(), MetadataLog()
    first = controller.create_topics(create_topics(topic_spec("t", 3)), now_ms=0)
    batch = append(controller, log, first)
    assert controller.image.topic("t") is None and controller.latest_image.topic("t") is not None
    second = controller.create_topics(create_topics(topic_spec("t", 3)), now_ms=0)
    assert second.records == ()
    assert second.reply[0].error.code == E.TOPIC_ALREADY_EXISTS
    controller.replay(batch)
    assert controller.image.topic("t") is not None and controller.uncommitted_records == 0
    assert controller.latest_image == controller.image


def test_revert_drops_what_was_not_committed() -> None:
    controller, log = active(), MetadataLog()
    append(controller, log, controller.create_topics(create_topics(topic_spec("lost")), now_ms=0))
    controller.revert()
    assert controller.latest_image.topic("lost") is None
    again = controller.create_topics(create_topics(topic_spec("lost")), now_ms=0)
    assert again.reply[0].error.ok


def test_a_standby_replaying_the_same_batches_has_the_same_image() -> None:
    base = cluster([1, 2, 3])
    leader, standby, log = active(base), QuorumController(node_id=2, rng=random.Random(9), image=base), MetadataLog()
    steps = [
        lambda: leader.create_topics(
            create_topics(topic_spec("a", 4), topic_spec("b", 2, configs={"retention.ms": "9"})), 0
        ),
        lambda: leader.create_partitions(
            request(
                37,
                3,
                {"topics": [{"name": "a", "count": 6, "assignments": None}], "timeout_ms": 1, "validate_only": False},
            ),
            0,
        ),
        lambda: leader.incremental_alter_configs(
            request(
                44,
                1,
                {
                    "resources": [
                        {
                            "resource_type": 4,
                            "resource_name": "",
                            "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "5"}],
                        }
                    ],
                    "validate_only": False,
                },
            ),
            0,
        ),
        lambda: leader.delete_topics(
            request(20, 6, {"topics": [{"name": "b", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 1}),
            6,
            0,
        ),
        lambda: leader.allocate_producer_ids(request(67, 0, {"broker_id": 2, "broker_epoch": 102}), 0),
    ]
    batches = [append(leader, log, step()) for step in steps]
    expected = leader.latest_image
    for batch in batches:
        leader.replay(batch)
        standby.replay(batch)
    assert standby.image.topics_by_name.keys() == {"a"} and len(standby.image.topics_by_name["a"].partitions) == 6
    assert standby.image.next_producer_id == PRODUCER_ID_BLOCK_SIZE
    for image in (leader.image, standby.image):
        assert (image.topics_by_id, image.configs, image.next_producer_id, image.brokers) == (
            expected.topics_by_id,
            expected.configs,
            expected.next_producer_id,
            expected.brokers,
        )


def test_uncommitted_records_that_no_longer_apply_are_dropped() -> None:
    base = cluster([1, 2, 3])
    seeded, log = active(base), MetadataLog()
    base_batch = log.append(seeded.create_topics(create_topics(topic_spec("t", 1)), now_ms=0))
    controller = active(base)
    controller.replay(base_batch)
    grow = controller.create_partitions(
        request(
            37, 3, {"topics": [{"name": "t", "count": 3, "assignments": None}], "timeout_ms": 1, "validate_only": False}
        ),
        now_ms=0,
    )
    assert grow.records
    controller.appended(10)  # where this controller thinks its records will be
    # Another leader's batch, committed first, deletes the topic the new partitions belong to.
    topic_id = controller.image.topics_by_name["t"].topic_id
    controller.replay(
        log.append(ControllerResult.of([metadata_record(T.REMOVE_TOPIC_RECORD, topic_id=topic_id)], None))
    )
    assert controller.uncommitted_records == 0
    assert controller.latest_image == controller.image and controller.image.topic("t") is None


def test_producer_id_blocks_follow_each_other_and_name_the_broker() -> None:
    controller, log = active(), MetadataLog()
    first = controller.allocate_producer_ids(request(67, 0, {"broker_id": 2, "broker_epoch": 102}), now_ms=0)
    second = controller.allocate_producer_ids(request(67, 0, {"broker_id": 3, "broker_epoch": 103}), now_ms=0)
    assert (first.reply.first_id, first.reply.size) == (0, 1000)
    assert (second.reply.first_id, second.reply.size) == (1000, 1000)
    [record] = second.records
    assert (record.type, record.broker_id, record.broker_epoch, record.next_producer_id) == (
        T.PRODUCER_IDS_RECORD,
        3,
        103,
        2000,
    )
    for result in (first, second):
        controller.replay(append(controller, log, result))
    assert controller.image.next_producer_id == 2000


def test_producer_ids_need_the_brokers_current_epoch() -> None:
    controller = active()
    stale = controller.allocate_producer_ids(request(67, 0, {"broker_id": 2, "broker_epoch": 5}), now_ms=0)
    unknown = controller.allocate_producer_ids(request(67, 0, {"broker_id": 9, "broker_epoch": 5}), now_ms=0)
    assert stale.records == () and unknown.records == ()
    assert (stale.reply.error.code, stale.reply.error.message) == (
        E.STALE_BROKER_EPOCH,
        "Expected broker epoch 102, but got broker epoch 5",
    )
    assert (unknown.reply.error.code, unknown.reply.error.message) == (
        E.STALE_BROKER_EPOCH,
        "No broker registration found for broker id 9",
    )


def test_cluster_control_operations_run_against_the_latest_image() -> None:
    controller = active(EMPTY_IMAGE)
    registered = controller.run(lambda image: ControllerResult.of(broker_records([1]), len(image.brokers)))
    assert registered.reply == 0 and 1 in controller.latest_image.brokers
    created = controller.create_topics(create_topics(topic_spec("after")), now_ms=0)
    assert created.reply[0].error.ok  # placed on the broker registered just before
