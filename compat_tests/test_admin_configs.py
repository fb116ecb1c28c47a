"""Configs and admin operations through real clients' admin APIs.

confluent-kafka's AdminClient and kafka-python's KafkaAdminClient alter and describe topic and
broker configs (values, sources, synonyms in Kafka's order, validate_only, invalid values, unknown
topics); a changed topic config applies to the very next request; DeleteRecords, DescribeLogDirs
and CreatePartitions through the same clients; ElectLeaders through confluent-kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import kafka.errors as kafka_errors
import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import AlterConfigOp
from kafka.admin import ConfigResource as KafkaConfigResource
from kafka.admin import NewTopic as KafkaNewTopic

from kafkalike.testing import BrokerProcess, InProcessBroker
from kafkalike.testing.wire_client import WireClient

TIMEOUT_S = 30
SET, DELETE, APPEND, SUBTRACT = (
    AlterConfigOpType.SET,
    AlterConfigOpType.DELETE,
    AlterConfigOpType.APPEND,
    AlterConfigOpType.SUBTRACT,
)
TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
DYNAMIC_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG.value
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
STATIC = ConfigSource.STATIC_BROKER_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value
WEEK_MS = str(7 * 24 * 3_600_000)
Ops = dict[str, tuple[AlterConfigOpType, str | None]]


# -- confluent-kafka ------------------------------------------------------------------------------


def confluent_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(client: AdminClient, topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    client.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(TIMEOUT_S)


def describe(client: AdminClient, resource_type: ResourceType, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(resource_type, name)
    described: dict[str, ConfigEntry] = client.describe_configs([resource])[resource].result(TIMEOUT_S)
    return described


def describe_topic(client: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    return describe(client, ConfigResource.Type.TOPIC, topic)


def incremental(
    client: AdminClient, resource_type: ResourceType, name: str, ops: Ops, validate_only: bool = False
) -> None:
    """IncrementalAlterConfigs; raises the client's KafkaException when the broker refuses."""
    entries = [ConfigEntry(key, value, incremental_operation=op) for key, (op, value) in ops.items()]
    resource = ConfigResource(resource_type, name, incremental_configs=entries)
    client.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(TIMEOUT_S)


def error_code(raised: pytest.ExceptionInfo[KafkaException]) -> int:
    return int(raised.value.args[0].code())


def sources(entry: ConfigEntry) -> tuple[str | None, int, list[str]]:
    """Value, source and synonym names (the client keys synonyms by name, in the broker's order)."""
    return entry.value, ConfigSource(entry.source).value, list(entry.synonyms)


class Deliveries:
    def __init__(self) -> None:
        self.errors: list[KafkaError | None] = []

    def report(self, error: KafkaError | None, _message: Message) -> None:
        self.errors.append(error)


def produce_one(bootstrap: str, topic: str, value: bytes, key: bytes | None = None) -> KafkaError | None:
    """Send one message and wait for its delivery report: None when acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    deliveries = Deliveries()
    producer.produce(topic, value, key, partition=0, on_delivery=deliveries.report)
    assert producer.flush(TIMEOUT_S) == 0
    (error,) = deliveries.errors
    return error


# -- kafka-python ---------------------------------------------------------------------------------


@contextmanager
def kafka_python_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        yield client
    finally:
        client.close()


def kp_describe(client: KafkaAdminClient, kind: str, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    """Every config (or ``keys``) with synonyms, as kafka-python reports them."""
    found = client.describe_configs([KafkaConfigResource(kind, name, keys)], include_synonyms=True, config_filter="all")
    described: dict[str, Any] = found[kind.lower()][name]
    return described


def kp_synonyms(entry: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def set_cluster_default(bootstrap: str, name: str, value: str) -> None:
    """A dynamic cluster-wide default (the broker resource named ""): neither Python client can
    name that resource, so this one change goes over the wire directly."""
    host, _, port = bootstrap.rpartition(":")
    body = {
        "resources": [
            {
                "resource_type": 4,
                "resource_name": "",
                "configs": [{"name": name, "config_operation": 0, "value": value}],
            }
        ],
        "validate_only": False,
    }
    with WireClient(host, int(port)) as client:
        response = client.request(44, 1, body)
    assert response.responses[0].error_code == 0, response.responses[0].error_message


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    """Check ``condition`` until it holds, failing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


# -- topic configs --------------------------------------------------------------------------------


def test_confluent_incremental_changes_are_described_with_their_sources(
    kafka_bootstrap: str, kafka_topic_name: str
) -> None:
    client = confluent_admin(kafka_bootstrap)
    create_topic(client, kafka_topic_name, configs={"retention.ms": "3600000"})
    configs = describe_topic(client, kafka_topic_name)
    assert sources(configs["retention.ms"]) == ("3600000", TOPIC_CONFIG, ["retention.ms"])
    assert not configs["retention.ms"].is_default
    # Not set anywhere but in the defaults: the broker config is the only synonym.
    assert sources(configs["segment.bytes"]) == ("1073741824", DEFAULT, ["log.segment.bytes"])
    assert configs["segment.bytes"].is_default
    assert sources(configs["delete.retention.ms"]) == ("86400000", DEFAULT, ["log.cleaner.delete.retention.ms"])
    # As Kafka lists it: a value that only log.retention.hours gives has no synonym at all.
    assert sources(configs["segment.ms"]) == (WEEK_MS, DEFAULT, [])

    incremental(
        client,
        ConfigResource.Type.TOPIC,
        kafka_topic_name,
        {"max.message.bytes": (SET, "65536"), "cleanup.policy": (APPEND, "compact"), "retention.ms": (DELETE, None)},
    )
    configs = describe_topic(client, kafka_topic_name)
    assert sources(configs["max.message.bytes"]) == ("65536", TOPIC_CONFIG, ["max.message.bytes", "message.max.bytes"])
    assert sources(configs["cleanup.policy"])[:2] == ("delete,compact", TOPIC_CONFIG)
    assert sources(configs["retention.ms"]) == (WEEK_MS, DEFAULT, [])

    incremental(client, ConfigResource.Type.TOPIC, kafka_topic_name, {"cleanup.policy": (SUBTRACT, "delete")})
    assert describe_topic(client, kafka_topic_name)["cleanup.policy"].value == "compact"

    incremental(
        client, ConfigResource.Type.TOPIC, kafka_topic_name, {"retention.ms": (SET, "1000")}, validate_only=True
    )
    assert sources(describe_topic(client, kafka_topic_name)["retention.ms"]) == (WEEK_MS, DEFAULT, [])


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_confluent_alter_configs_replaces_every_override_of_the_topic(
    kafka_bootstrap: str, kafka_topic_name: str
) -> None:
    client = confluent_admin(kafka_bootstrap)
    create_topic(client, kafka_topic_name, configs={"max.message.bytes": "65536", "retention.ms": "3600000"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, kafka_topic_name, set_config={"retention.ms": "7200000"})
    client.alter_configs([resource], validate_only=True)[resource].result(TIMEOUT_S)
    assert describe_topic(client, kafka_topic_name)["retention.ms"].value == "3600000"
    client.alter_configs([resource])[resource].result(TIMEOUT_S)
    configs = describe_topic(client, kafka_topic_name)
    assert sources(configs["retention.ms"])[:2] == ("7200000", TOPIC_CONFIG)
    # AlterConfigs (not incremental) sets the whole set: the override it did not name is gone.
    assert sources(configs["max.message.bytes"]) == ("1048588", DEFAULT, ["message.max.bytes"])


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("retention.ms", "soon"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "shred"),
        ("min.cleanable.dirty.ratio", "2"),
        ("min.cleanable.dirty.ratio", "NaN"),
        ("segment.index.bytes", "3"),
        ("cleanup.policy", "compact,shred"),
        ("no.such.config", "1"),
    ],
)
@pytest.mark.kafka_topic(partitions=1)
def test_an_invalid_value_is_refused_with_invalid_config(
    kafka_bootstrap: str, kafka_topic: str, name: str, value: str
) -> None:
    client = confluent_admin(kafka_bootstrap)
    before = {k: (e.value, e.source) for k, e in describe_topic(client, kafka_topic).items()}
    for validate_only in (True, False):
        with pytest.raises(KafkaException) as raised:
            incremental(client, ConfigResource.Type.TOPIC, kafka_topic, {name: (SET, value)}, validate_only)
        assert error_code(raised) == KafkaError.INVALID_CONFIG, raised.value
    with kafka_python_admin(kafka_bootstrap) as kp:
        result = kp.alter_configs([KafkaConfigResource("TOPIC", kafka_topic, {name: value})], raise_on_unknown=False)
    assert result["topic"][kafka_topic].startswith("[Error 40] InvalidConfigurationError"), result
    assert kafka_errors.for_code(40) is kafka_errors.InvalidConfigurationError
    # Nothing was stored, and the topic still works (the fixture checks the broker logged no error).
    assert {k: (e.value, e.source) for k, e in describe_topic(client, kafka_topic).items()} == before
    assert produce_one(kafka_bootstrap, kafka_topic, b"still writable") is None


@pytest.mark.kafka_topic(partitions=1)
def test_appending_to_a_config_that_is_not_a_list_is_invalid(kafka_bootstrap: str, kafka_topic: str) -> None:
    client = confluent_admin(kafka_bootstrap)
    with pytest.raises(KafkaException) as raised:
        incremental(client, ConfigResource.Type.TOPIC, kafka_topic, {"retention.ms": (APPEND, "5")})
    assert error_code(raised) == KafkaError.INVALID_CONFIG


def test_configs_of_an_unknown_topic(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    client = confluent_admin(kafka_bootstrap)
    with pytest.raises(KafkaException) as raised:
        describe_topic(client, kafka_topic_name)
    assert error_code(raised) == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(KafkaException) as raised:
        incremental(client, ConfigResource.Type.TOPIC, kafka_topic_name, {"retention.ms": (SET, "5")})
    assert error_code(raised) == KafkaError.UNKNOWN_TOPIC_OR_PART
    with kafka_python_admin(kafka_bootstrap) as kp:
        for incremental_api in (True, False):
            result = kp.alter_configs(
                [KafkaConfigResource("TOPIC", kafka_topic_name, {"retention.ms": "5"})],
                raise_on_unknown=False,
                incremental=incremental_api,
            )
            assert result["topic"][kafka_topic_name].startswith("[Error 3] UnknownTopicOrPartitionError"), result


def test_kafka_python_alters_and_describes_topic_configs(kafka_bootstrap: str, kafka_topic_name: str) -> None:
    with kafka_python_admin(kafka_bootstrap) as client:
        client.create_topics([KafkaNewTopic(kafka_topic_name, 1, 1)])
        changes = {"retention.ms": "3600000", "cleanup.policy": (AlterConfigOp.APPEND, "compact")}
        assert client.alter_configs([KafkaConfigResource("TOPIC", kafka_topic_name, changes)]) == {
            "topic": {kafka_topic_name: "OK"}
        }
        modified = client.describe_configs([KafkaConfigResource("TOPIC", kafka_topic_name)], include_synonyms=True)
        configs = modified["topic"][kafka_topic_name]
        assert set(configs) == {"retention.ms", "cleanup.policy"}  # the default filter: modified only
        assert configs["retention.ms"]["value"] == "3600000"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["retention.ms"]["config_type"] == "LONG"
        assert kp_synonyms(configs["cleanup.policy"]) == [
            ("cleanup.policy", "delete,compact", "DYNAMIC_TOPIC_CONFIG"),
            ("log.cleanup.policy", "delete", "DEFAULT_CONFIG"),
        ]
        # AlterConfigs proper: kafka-python re-sends the other overrides so that they are kept.
        result = client.alter_configs(
            [KafkaConfigResource("TOPIC", kafka_topic_name, {"max.message.bytes": "65536"})], incremental=False
        )
        assert result == {"topic": {kafka_topic_name: "OK"}}
        values = {k: v["value"] for k, v in kp_describe(client, "TOPIC", kafka_topic_name).items()}
        assert (values["retention.ms"], values["cleanup.policy"], values["max.message.bytes"]) == (
            "3600000",
            "delete,compact",
            "65536",
        )
        assert client.alter_configs(
            [KafkaConfigResource("TOPIC", kafka_topic_name, {"retention.ms": "1"})], validate_only=True
        ) == {"topic": {kafka_topic_name: "OK"}}
        assert kp_describe(client, "TOPIC", kafka_topic_name, ["retention.ms"])["retention.ms"]["value"] == "3600000"
        reset = client.reset_configs([KafkaConfigResource("TOPIC", kafka_topic_name, ["retention.ms"])])
        assert reset == {"topic": {kafka_topic_name: "OK"}}
        entry = kp_describe(client, "TOPIC", kafka_topic_name, ["retention.ms"])["retention.ms"]
        assert (entry["value"], entry["config_source"], entry["synonyms"]) == (WEEK_MS, "DEFAULT_CONFIG", [])


# -- broker configs -------------------------------------------------------------------------------


def check_broker_layers(client: KafkaAdminClient, topic: str) -> None:
    """What ``test_broker_configs_by_source_with_synonyms_in_order`` set, in every layer."""
    two_days, day = "172800000", "86400000"
    described = kp_describe(client, "BROKER", "1", ["message.max.bytes", "log.retention.ms"])
    assert described["message.max.bytes"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    assert kp_synonyms(described["message.max.bytes"]) == [
        ("message.max.bytes", "400000", "DYNAMIC_BROKER_CONFIG"),
        ("message.max.bytes", "300000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("message.max.bytes", "200000", "STATIC_BROKER_CONFIG"),
        ("message.max.bytes", "1048588", "DEFAULT_CONFIG"),
    ]
    assert kp_synonyms(described["log.retention.ms"]) == [
        ("log.retention.ms", two_days, "DYNAMIC_BROKER_CONFIG"),
        ("log.retention.ms", day, "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "2", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    on_topic = kp_describe(client, "TOPIC", topic, ["retention.ms", "max.message.bytes"])
    max_bytes = on_topic["max.message.bytes"]
    assert (max_bytes["value"], max_bytes["config_source"]) == ("400000", "DYNAMIC_BROKER_CONFIG")
    assert kp_synonyms(on_topic["retention.ms"]) == [
        ("retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"),
        ("log.retention.ms", two_days, "DYNAMIC_BROKER_CONFIG"),
        ("log.retention.ms", day, "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "2", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]


def test_broker_configs_by_source_with_synonyms_in_order(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process("log.retention.hours=2", "message.max.bytes=200000")
    with kafka_python_admin(broker.bootstrap) as client:
        client.create_topics([KafkaNewTopic(kafka_topic_name, 1, 1)])
        configs = kp_describe(client, "TOPIC", kafka_topic_name, ["retention.ms", "max.message.bytes"])
        # Static settings: the value the topic uses, sourced where it comes from.
        retention, max_bytes = configs["retention.ms"], configs["max.message.bytes"]
        assert (retention["value"], retention["config_source"], retention["synonyms"]) == (
            "7200000",
            "DEFAULT_CONFIG",  # Kafka's answer: only log.retention.hours is set, log.retention.ms is not
            [],
        )
        assert (max_bytes["value"], max_bytes["config_source"]) == ("200000", "STATIC_BROKER_CONFIG")
        assert kp_synonyms(max_bytes) == [
            ("message.max.bytes", "200000", "STATIC_BROKER_CONFIG"),
            ("message.max.bytes", "1048588", "DEFAULT_CONFIG"),
        ]

        set_cluster_default(broker.bootstrap, "message.max.bytes", "300000")
        set_cluster_default(broker.bootstrap, "log.retention.ms", "86400000")
        changes = {"message.max.bytes": "400000", "log.retention.ms": "172800000"}
        assert client.alter_configs([KafkaConfigResource("BROKER", "1", changes)]) == {"broker": {"1": "OK"}}
        override = {"retention.ms": "3600000"}
        assert client.alter_configs([KafkaConfigResource("TOPIC", kafka_topic_name, override)]) == {
            "topic": {kafka_topic_name: "OK"}
        }
        check_broker_layers(client, kafka_topic_name)

    # confluent-kafka shows the same order (its synonyms are keyed by name).
    confluent = confluent_admin(broker.bootstrap)
    assert sources(describe_topic(confluent, kafka_topic_name)["retention.ms"]) == (
        "3600000",
        TOPIC_CONFIG,
        ["retention.ms", "log.retention.ms", "log.retention.hours"],
    )
    by_broker = describe(confluent, ConfigResource.Type.BROKER, "1")
    assert sources(by_broker["log.retention.hours"]) == ("2", STATIC, ["log.retention.hours"])
    assert by_broker["log.retention.hours"].is_read_only and not by_broker["log.retention.ms"].is_read_only

    # Dynamic configs live in the metadata log: the same after a restart.
    assert broker.stop() == 0
    broker.restart()
    with kafka_python_admin(broker.bootstrap) as client:
        check_broker_layers(client, kafka_topic_name)
        # Without the per-broker value, the cluster-wide default shows through.
        remove = {"message.max.bytes": (AlterConfigOp.DELETE, None)}
        assert client.alter_configs([KafkaConfigResource("BROKER", "1", remove)]) == {"broker": {"1": "OK"}}
    confluent = confluent_admin(broker.bootstrap)
    assert sources(describe(confluent, ConfigResource.Type.BROKER, "1")["message.max.bytes"]) == (
        "300000",
        DYNAMIC_DEFAULT,
        ["message.max.bytes"],
    )
    assert sources(describe_topic(confluent, kafka_topic_name)["max.message.bytes"])[:2] == ("300000", DYNAMIC_DEFAULT)
    # Read-only broker configs cannot be changed at run time; invalid values are refused.
    with pytest.raises(KafkaException) as raised:
        incremental(confluent, ConfigResource.Type.BROKER, "1", {"node.id": (SET, "7")})
    assert error_code(raised) == KafkaError.INVALID_REQUEST
    with pytest.raises(KafkaException) as raised:
        incremental(confluent, ConfigResource.Type.BROKER, "1", {"log.index.size.max.bytes": (SET, "0")})
    assert error_code(raised) == KafkaError.INVALID_REQUEST  # as Kafka answers a bad broker value


# -- changes take effect at once ------------------------------------------------------------------


@pytest.mark.kafka_topic(partitions=1)
def test_a_lowered_max_message_bytes_applies_to_the_next_produce(kafka_bootstrap: str, kafka_topic: str) -> None:
    client = confluent_admin(kafka_bootstrap)
    payload = b"x" * 4096
    assert produce_one(kafka_bootstrap, kafka_topic, payload) is None
    incremental(client, ConfigResource.Type.TOPIC, kafka_topic, {"max.message.bytes": (SET, "2048")})
    refused = produce_one(kafka_bootstrap, kafka_topic, payload)
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
    incremental(client, ConfigResource.Type.TOPIC, kafka_topic, {"max.message.bytes": (DELETE, None)})
    assert produce_one(kafka_bootstrap, kafka_topic, payload) is None


def test_a_lowered_retention_ms_removes_old_data_without_a_restart(
    kafka_broker_process: Callable[..., BrokerProcess], kafka_topic_name: str
) -> None:
    broker = kafka_broker_process("log.retention.check.interval.ms=100")
    hour_ago = int(time.time() * 1000) - 3_600_000
    tp = KafkaTopicPartition(kafka_topic_name, 0)
    with kafka_python_admin(broker.bootstrap) as admin:
        admin.create_topics([KafkaNewTopic(kafka_topic_name, 1, 1, topic_configs={"internal.segment.bytes": "1024"})])
        # Batches stay under the 1 KiB segments: a larger one is refused (as Kafka refuses it).
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", batch_size=600)
        try:
            for i in range(40):
                producer.send(kafka_topic_name, b"old %02d " % i + b"." * 100, partition=0, timestamp_ms=hour_ago + i)
            producer.flush(TIMEOUT_S)
            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
            try:
                assert consumer.beginning_offsets([tp])[tp] == 0 and consumer.end_offsets([tp])[tp] == 40
                # An hour old is well inside the default week; a minute is not.
                admin.alter_configs([KafkaConfigResource("TOPIC", kafka_topic_name, {"retention.ms": "60000"})])
                wait_for(lambda: consumer.beginning_offsets([tp])[tp] == 40, "retention removed the old records")
                assert consumer.end_offsets([tp])[tp] == 40
                metadata = producer.send(kafka_topic_name, b"new", partition=0).get(TIMEOUT_S)
                assert metadata.offset == 40
                consumer.assign([tp])
                consumer.seek_to_beginning(tp)
                got = [r for records in consumer.poll(timeout_ms=5000).values() for r in records]
                assert [(r.offset, r.value) for r in got] == [(40, b"new")]
            finally:
                consumer.close()
        finally:
            producer.close(timeout=TIMEOUT_S)


# -- DeleteRecords, DescribeLogDirs, CreatePartitions ---------------------------------------------


@pytest.mark.kafka_topic(partitions=1)
def test_delete_records_then_reading_below_the_new_start_is_out_of_range(
    kafka_bootstrap: str, kafka_topic: str
) -> None:
    client = confluent_admin(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(kafka_topic, b"record %d" % i, partition=0)
    assert producer.flush(TIMEOUT_S) == 0

    (deleted,) = client.delete_records([TopicPartition(kafka_topic, 0, 10)]).values()
    assert deleted.result(TIMEOUT_S).low_watermark == 10
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"compat-{kafka_topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    try:
        assert consumer.get_watermark_offsets(TopicPartition(kafka_topic, 0), timeout=TIMEOUT_S) == (10, 20)
        consumer.assign([TopicPartition(kafka_topic, 0, 3)])
        deadline = time.monotonic() + TIMEOUT_S
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None
        error = message.error()
        assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET, error
        assert "Offset out of range" in error.str()
    finally:
        consumer.close()

    tp = KafkaTopicPartition(kafka_topic, 0)
    with kafka_python_admin(kafka_bootstrap) as admin:
        assert admin.delete_records({tp: 15})[tp]["low_watermark"] == 15
        assert admin.delete_records({tp: -1})[tp]["low_watermark"] == 20  # -1: up to the high watermark
    reader = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, auto_offset_reset="none")
    try:
        reader.assign([tp])
        reader.seek(tp, 12)
        with pytest.raises(kafka_errors.OffsetOutOfRangeError):
            reader.poll(timeout_ms=5000)
    finally:
        reader.close()


@pytest.mark.kafka_topic(partitions=2)
def test_describe_log_dirs_lists_the_partitions_with_their_sizes(
    kafka_broker: InProcessBroker, kafka_bootstrap: str, kafka_topic: str
) -> None:
    assert produce_one(kafka_bootstrap, kafka_topic, b"x" * 1000) is None  # to partition 0; 1 stays empty
    with kafka_python_admin(kafka_bootstrap) as client:
        (answer,) = client.describe_log_dirs({kafka_topic: [0, 1]})
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(kafka_broker.data_dir.resolve())
    assert log_dir["usable_bytes"] <= log_dir["total_bytes"]
    (found,) = log_dir["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in found["partitions"]}
    assert found["name"] == kafka_topic and sizes[0] > 1000 and sizes[1] == 0


@pytest.mark.kafka_topic(partitions=2)
def test_create_partitions_through_both_admin_clients(kafka_bootstrap: str, kafka_topic: str) -> None:
    client = confluent_admin(kafka_bootstrap)

    def partition_count() -> int:
        return len(client.list_topics(kafka_topic, timeout=TIMEOUT_S).topics[kafka_topic].partitions)

    def placement(keys: list[bytes]) -> dict[bytes, int]:
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
        placed: dict[bytes, int] = {}

        def report(error: KafkaError | None, message: Message) -> None:
            key, partition = message.key(), message.partition()
            assert error is None and key is not None and partition is not None, error
            placed[key] = partition

        for key in keys:
            producer.produce(kafka_topic, b"v", key, on_delivery=report)
        assert producer.flush(TIMEOUT_S) == 0
        return placed

    keys = [b"key-%d" % i for i in range(30)]
    before = placement(keys)
    with kafka_python_admin(kafka_bootstrap) as kp:
        kp.create_partitions({kafka_topic: 3}, validate_only=True)
        assert partition_count() == 2
        kp.create_partitions({kafka_topic: 3})
        with pytest.raises(kafka_errors.InvalidPartitionsError):
            kp.create_partitions({kafka_topic: 2})
    assert partition_count() == 3
    new = NewPartitions(kafka_topic, 5)
    client.create_partitions([new], validate_only=True)[kafka_topic].result(TIMEOUT_S)
    assert partition_count() == 3
    client.create_partitions([new])[kafka_topic].result(TIMEOUT_S)
    assert partition_count() == 5
    with pytest.raises(KafkaException) as raised:
        client.create_partitions([NewPartitions(kafka_topic, 4)])[kafka_topic].result(TIMEOUT_S)
    assert error_code(raised) == KafkaError.INVALID_PARTITIONS
    # Keys hash over the partition count: after growing, some keys land elsewhere (as in Kafka).
    after = placement(keys)
    assert set(after.values()) <= set(range(5)) and len(set(after.values())) > 2
    assert any(before[key] != after[key] for key in keys)


@pytest.mark.kafka_topic(partitions=2)
def test_confluent_elect_leaders_answers_per_partition(kafka_bootstrap: str, kafka_topic: str) -> None:
    client = confluent_admin(kafka_bootstrap)
    asked = [TopicPartition(kafka_topic, 0), TopicPartition(kafka_topic, 1), TopicPartition(f"{kafka_topic}-none", 0)]
    results = client.elect_leaders(ElectionType.PREFERRED, asked).result(TIMEOUT_S)
    codes = {(tp.topic, tp.partition): None if e is None else e.code() for tp, e in results.items()}
    assert codes == {
        (kafka_topic, 0): KafkaError.ELECTION_NOT_NEEDED,  # each partition's only replica leads it
        (kafka_topic, 1): KafkaError.ELECTION_NOT_NEEDED,
        (f"{kafka_topic}-none", 0): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    # Every partition: those needing no election are left out of the answer.
    assert client.elect_leaders(ElectionType.UNCLEAN, None).result(TIMEOUT_S) == {}
