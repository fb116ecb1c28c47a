"""The controller's records and refusals against Apache Kafka's: the same operations, the same batches.

A real Kafka 4.0.2 node (broker and controller) is formatted and started, and sent CreateTopics
(with configs), CreatePartitions, IncrementalAlterConfigs (a topic and the cluster default),
InitProducerId (its broker then asks its controller for a producer id block) and DeleteTopics.
Its ``__cluster_metadata`` log is then read, and each operation is run through kafkalike's
``QuorumController`` over the image Kafka's own log had just before that operation's batch: the
records must be Kafka's, type, version and every field, in the same order (the topic ids, which
both draw at random, are matched by position). The bootstrap batch is compared the same way.
Then refused requests (manual assignments, colliding and existing names, a replication factor
above the brokers, DeleteTopics' request checks) get Kafka's codes and words from both.
"""

from __future__ import annotations

import random
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.conftest import AK_BEFORE_4_1, AK_LIB, create_topics_body, topic_spec
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.features import bootstrap_records, feature_levels
from kafkalike.controller.loader import MetadataLoader
from kafkalike.controller.quorum_controller import QuorumController
from kafkalike.protocol.codec import request_schema
from kafkalike.protocol.metadata_records import (
    ApiMessageAndVersion,
    MetadataBatch,
    MetadataRecordType,
    read_metadata_batches,
)
from kafkalike.testing.apache_kafka import ApacheKafkaProcess
from kafkalike.testing.wire_client import WireClient

pytestmark = pytest.mark.differential

T = MetadataRecordType
ZERO = uuid.UUID(int=0)
CONFIGS = {"retention.ms": "1000", "cleanup.policy": "compact", "segment.ms": "100000", "max.message.bytes": "2000"}
OPERATIONS: list[tuple[int, int, dict[str, Any]]] = [
    (19, 7, create_topics_body([topic_spec("c-one", 1), topic_spec("c-three", 3, CONFIGS)])),
    (
        37,
        3,
        {"topics": [{"name": "c-one", "count": 3, "assignments": None}], "timeout_ms": 5000, "validate_only": False},
    ),
    (
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "c-three",
                    "configs": [
                        {"name": "segment.ms", "config_operation": 0, "value": "5000"},
                        {"name": "retention.ms", "config_operation": 1, "value": None},
                    ],
                }
            ],
            "validate_only": False,
        },
    ),
    (
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "99999"}],
                }
            ],
            "validate_only": False,
        },
    ),
    (67, 0, {}),  # the broker's own AllocateProducerIds, caused by an InitProducerId
    (20, 6, {"topics": [{"name": "c-one", "topic_id": ZERO}], "timeout_ms": 5000}),
    (19, 7, create_topics_body([topic_spec("dot.ted", 1)])),
]


def manual(name: str, assignments: list[tuple[int, list[int]]], partitions: int = -1, rf: int = -1) -> dict[str, Any]:
    spec = topic_spec(name, partitions, rf=rf)
    spec["assignments"] = [{"partition_index": i, "broker_ids": b} for i, b in assignments]
    return spec


# Refused requests, sent after the operations: Kafka's answers against the controller's.
REFUSALS: list[tuple[int, int, dict[str, Any]]] = [
    (19, 7, create_topics_body([manual("m-unknown", [(0, [7])])])),
    (19, 7, create_topics_body([manual("m-twice", [(0, [1, 1])])])),
    (19, 7, create_topics_body([manual("m-empty", [(0, [])])])),
    (19, 7, create_topics_body([manual("m-gap", [(0, [1]), (2, [1])])])),
    (19, 7, create_topics_body([manual("m-same", [(0, [1]), (0, [1])])])),
    (19, 7, create_topics_body([manual("m-rf", [(0, [1])], rf=1)])),
    (19, 7, create_topics_body([manual("m-count", [(0, [1])], partitions=1)])),
    (19, 7, create_topics_body([topic_spec("dot_ted", 1)])),
    (19, 7, create_topics_body([topic_spec("c-three", 1)])),
    (19, 7, create_topics_body([topic_spec("__cluster_metadata", 1)])),
    (19, 7, create_topics_body([topic_spec("rf-two", 1, rf=2)])),
    (
        37,
        3,
        {
            "topics": [{"name": "c-three", "count": 5, "assignments": [{"broker_ids": [1]}]}],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    ),
    (
        37,
        3,
        {
            "topics": [{"name": "c-three", "count": 4, "assignments": [{"broker_ids": [9]}]}],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    ),
    (
        37,
        3,
        {
            "topics": [{"name": "c-three", "count": 4, "assignments": [{"broker_ids": [1, 1]}]}],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    ),
    (20, 6, {"topics": [{"name": None, "topic_id": uuid.UUID(int=77)}], "timeout_ms": 5000}),
    (20, 6, {"topics": [{"name": "c-three", "topic_id": uuid.UUID(int=77)}], "timeout_ms": 5000}),
    (20, 6, {"topics": [{"name": None, "topic_id": ZERO}], "timeout_ms": 5000}),
]
OPERATION_TYPES = {T.TOPIC_RECORD, T.PARTITION_RECORD, T.CONFIG_RECORD, T.PRODUCER_IDS_RECORD, T.REMOVE_TOPIC_RECORD}


def init_producer_id(client: WireClient, timeout_s: float = 30.0) -> None:
    """Until the broker has a producer id to give (its first block comes from the controller)."""
    body = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.request(22, 4, body).error_code == 0:
            return
        time.sleep(0.2)
    raise AssertionError("InitProducerId never succeeded")


def wait_for_batches(metadata: Path, count: int, timeout_s: float = 30.0) -> None:
    """Until the log holds ``count`` operation batches (bounded: the controller writes them at once)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(operation_batches(read_log(metadata))) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} operation batches in the metadata log")


def read_log(metadata: Path) -> list[MetadataBatch]:
    return list(read_metadata_batches((metadata / "00000000000000000000.log").read_bytes(), partial_ok=True))


def operation_batches(batches: list[MetadataBatch]) -> list[MetadataBatch]:
    return [b for b in batches if (r := records_of(b)) and r[0].type in OPERATION_TYPES]


def records_of(batch: MetadataBatch) -> list[ApiMessageAndVersion]:
    # The controller's periodic NoOpRecord may share a batch with an operation's records.
    return [r for r in batch.records if r.type != T.NO_OP_RECORD]


KAFKA_REFUSALS: list[list[tuple[str | None, int, str | None]]] = []


def answers(api_key: int, response: Any) -> list[tuple[str | None, int, str | None]]:
    entries = {19: "topics", 37: "results", 20: "responses"}[api_key]
    return [(e.name, e.error_code, e.error_message) for e in getattr(response, entries)]


@pytest.fixture(scope="module")
def kafka_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[MetadataBatch]]:
    work = tmp_path_factory.mktemp("ak-controller")
    kafka = ApacheKafkaProcess(Path(AK_LIB), work, {}).start()
    metadata = work / "logs" / "__cluster_metadata-0"
    try:
        with WireClient(kafka.host, kafka.port) as client:
            for api_key, version, body in OPERATIONS:
                if api_key == 67:
                    init_producer_id(client)
                    continue
                response = client.request(api_key, version, body)
                codes = [
                    x.error_code
                    for x in getattr(response, "topics", None)
                    or getattr(response, "results", None)
                    or response.responses
                ]
                assert codes == [0] * len(codes), response
            wait_for_batches(metadata, len(OPERATIONS))
            KAFKA_REFUSALS[:] = [answers(k, client.request(k, v, body)) for k, v, body in REFUSALS]
    finally:
        kafka.stop()
    copy = work / "copy"
    shutil.copytree(metadata, copy)
    yield read_log(copy)


def comparable(records: list[ApiMessageAndVersion], topic_ids: dict[uuid.UUID, uuid.UUID]) -> list[tuple[Any, ...]]:
    out = []
    for r in records:
        fields = dict(r.message)
        if "topic_id" in fields:
            fields["topic_id"] = topic_ids.get(fields["topic_id"], fields["topic_id"])
        out.append((r.type.name, r.version, fields))
    return out


# Features Kafka 4.2+ finalizes in a new cluster for groups kafkalike does not serve (KIP-932
# share groups, KIP-1071 streams groups): kafkalike's bootstrap leaves them at level 0.
NOT_SERVED = ("share.version", "streams.version")


def our_bootstrap() -> list[ApiMessageAndVersion]:
    """Our controller's first batch over an empty log: against 4.0, that of the release 4.0
    formats with (``kafkalike storage format -r 4.0-IV3``), else our default (4.4-IV2)."""
    controller = QuorumController(node_id=1, rng=random.Random(0))
    if AK_BEFORE_4_1:
        return list(controller.activate(bootstrap_records(feature_levels("4.0-IV3", dynamic_quorum=False))).records)
    return list(controller.activate().records)


def test_the_bootstrap_batch_is_kafkas(kafka_log: list[MetadataBatch]) -> None:
    first = next(b for b in kafka_log if b.records)
    assert comparable(our_bootstrap(), {}) == comparable(records_of(first), {})


def test_the_bootstrap_batch_is_kafkas_but_for_the_groups_not_served(kafka_log: list[MetadataBatch]) -> None:
    """Kafka's first batch without the feature levels of NOT_SERVED is ours: metadata.version,
    the other features, and (under ELR) the cluster-level min.insync.replicas."""
    kafka_records = records_of(next(b for b in kafka_log if b.records))
    served = [r for r in kafka_records if not (r.type == T.FEATURE_LEVEL_RECORD and r.name in NOT_SERVED)]
    left_out = {r.name: r.feature_level for r in kafka_records if r not in served}
    assert left_out == ({} if AK_BEFORE_4_1 else {"share.version": 2, "streams.version": 1})
    assert comparable(our_bootstrap(), {}) == comparable(served, {})


def test_each_operation_writes_kafkas_records(kafka_log: list[MetadataBatch]) -> None:
    loader = MetadataLoader()
    operations = iter(OPERATIONS)
    compared = 0
    for batch in kafka_log:
        kafka_records = records_of(batch)
        if kafka_records and kafka_records[0].type in OPERATION_TYPES:
            api_key, version, body = next(operations)
            result = run(
                QuorumController(node_id=1, rng=random.Random(compared), image=loader.image), api_key, version, body
            )
            ours = list(result.records)
            ours_ids = [r.topic_id for r in ours if r.type == T.TOPIC_RECORD]
            kafka_ids = [r.topic_id for r in kafka_records if r.type == T.TOPIC_RECORD]
            assert comparable(ours, dict(zip(ours_ids, kafka_ids, strict=True))) == comparable(kafka_records, {}), (
                api_key
            )
            compared += 1
        loader.apply_batch(batch)
    assert compared == len(OPERATIONS)


def run(controller: QuorumController, api_key: int, version: int, body: dict[str, Any]) -> ControllerResult[Any]:
    if api_key == 67:  # what the broker asked for: a block for itself, at its current epoch
        broker = controller.image.brokers[1]
        body = {"broker_id": 1, "broker_epoch": broker.epoch}
    schema = request_schema(api_key, version)
    request = schema.decode(schema.encode(body))
    if api_key == 19:
        return controller.create_topics(request, now_ms=0)
    if api_key == 37:
        return controller.create_partitions(request, now_ms=0)
    if api_key == 44:
        return controller.incremental_alter_configs(request, now_ms=0)
    if api_key == 67:
        return controller.allocate_producer_ids(request, now_ms=0)
    return controller.delete_topics(request, version, now_ms=0)


def test_the_comparison_notices_config_records_in_another_order(kafka_log: list[MetadataBatch]) -> None:
    """Negative control: the same records with two ConfigRecords swapped (as the request listed
    them, not as Kafka's HashMap orders them) are not taken for Kafka's."""
    loader = MetadataLoader()
    creation = next(b for b in kafka_log if (r := records_of(b)) and r[0].type == T.TOPIC_RECORD)
    for batch in kafka_log:
        if batch is creation:
            break
        loader.apply_batch(batch)
    api_key, version, body = OPERATIONS[0]
    ours = list(
        run(QuorumController(node_id=1, rng=random.Random(0), image=loader.image), api_key, version, body).records
    )
    configs = [i for i, r in enumerate(ours) if r.type == T.CONFIG_RECORD]
    ours[configs[0]], ours[configs[1]] = ours[configs[1]], ours[configs[0]]
    kafka_records = records_of(creation)
    ids = dict(
        zip(
            [r.topic_id for r in ours if r.type == T.TOPIC_RECORD],
            [r.topic_id for r in kafka_records if r.type == T.TOPIC_RECORD],
            strict=True,
        )
    )
    assert comparable(ours, ids) != comparable(kafka_records, {})
    ours[configs[0]], ours[configs[1]] = ours[configs[1]], ours[configs[0]]
    assert comparable(ours, ids) == comparable(kafka_records, {})


# Newer releases (4.4; not 4.0) name cordoned log directories in the placer's refusals; kafkalike words them as 4.4.
CORDONED_SINCE_4_3 = (
    " or some brokers have all their log directories cordoned",
    ", or have all their log directories cordoned",
)


def as_compared(message: str | None) -> str | None:
    """Our refusal as the release compared with words it."""
    if message is None or not AK_BEFORE_4_1:
        return message
    for words in CORDONED_SINCE_4_3:
        message = message.replace(words, "")
    return message


def test_refusals_are_kafkas(kafka_log: list[MetadataBatch]) -> None:
    """Manual assignments, colliding and existing names, the metadata topic, a replication
    factor above the brokers, and DeleteTopics' request checks: Kafka's codes and words."""
    loader = MetadataLoader()
    for batch in kafka_log:
        records = records_of(batch)
        if records and records[0].type == T.BROKER_REGISTRATION_CHANGE_RECORD and records[0].in_controlled_shutdown:
            break  # the image as it was while Kafka answered: before its shutdown
        loader.apply_batch(batch)
    controller = QuorumController(node_id=1, rng=random.Random(0), image=loader.image)
    ours = []
    for api_key, version, body in REFUSALS:
        reply = run(controller, api_key, version, body).reply
        ours.append([(r.name, r.error.code, as_compared(r.error.message)) for r in reply])
    assert len(KAFKA_REFUSALS) == len(REFUSALS)
    assert all(code != 0 for answer in KAFKA_REFUSALS for _, code, _ in answer)  # refusals, each one
    assert KAFKA_REFUSALS[0] == [
        ("m-unknown", 39, "The manual partition assignment includes broker 7, but no such broker is registered.")
    ]
    different = [(body, k, o) for (_, _, body), k, o in zip(REFUSALS, KAFKA_REFUSALS, ours, strict=True) if k != o]
    assert not different, different
