"""The group.consumer.* and transaction settings as broker configs: DescribeConfigs lists them with
Apache Kafka 4.0's defaults, types and read-only flags; the coordinators run with what is set; and
values Kafka refuses (at start-up, or through AlterConfigs) are refused the same way, in its words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.node import Node
from tests.server.conftest import RunningBroker, make_config, serving
from tests.server.test_config_docs import _describe, _set, _synonyms

BROKER = 4
STATIC, DEFAULT = 4, 5
BOOLEAN, STRING, INT, SHORT, LIST = 1, 2, 3, 4, 7

# name: (default, config type, read-only), as Apache Kafka 4.0.2 describes them.
KAFKA_4_0: dict[str, tuple[str, int, bool]] = {
    "group.consumer.session.timeout.ms": ("45000", INT, True),
    "group.consumer.min.session.timeout.ms": ("45000", INT, True),
    "group.consumer.max.session.timeout.ms": ("60000", INT, True),
    "group.consumer.heartbeat.interval.ms": ("5000", INT, True),
    "group.consumer.min.heartbeat.interval.ms": ("5000", INT, True),
    "group.consumer.max.heartbeat.interval.ms": ("15000", INT, True),
    "group.consumer.max.size": ("2147483647", INT, True),
    "group.consumer.assignors": ("uniform,range", LIST, True),
    "group.consumer.migration.policy": ("bidirectional", STRING, True),
    "transaction.max.timeout.ms": ("900000", INT, True),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("10000", INT, True),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("3600000", INT, True),
    "transactional.id.expiration.ms": ("604800000", INT, True),
    "transaction.state.log.num.partitions": ("50", INT, True),
    "transaction.state.log.segment.bytes": ("104857600", INT, True),
    "transaction.state.log.replication.factor": ("3", SHORT, True),
    "transaction.state.log.min.isr": ("2", INT, True),
    "transaction.partition.verification.enable": ("true", BOOLEAN, False),
}


async def test_describe_configs_lists_them_with_kafkas_defaults(running: RunningBroker) -> None:
    configs = await _describe(await running.client(), BROKER, "1")
    found = {
        name: (c.value, c.config_type, c.read_only, c.config_source, _synonyms(c))
        for name, c in configs.items()
        if name in KAFKA_4_0
    }
    assert found == {
        name: (value, type_, read_only, DEFAULT, [(name, value, DEFAULT)])
        for name, (value, type_, read_only) in KAFKA_4_0.items()
    }


async def test_static_values_are_listed_as_static_and_used(tmp_path: Path) -> None:
    overrides = {
        "transactional.id.expiration.ms": "60000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
        "group.consumer.session.timeout.ms": "50000",
        "group.consumer.max.size": "7",
        "group.consumer.migration.policy": "UPGRADE",  # any case, as in Kafka
    }
    async with serving(tmp_path, **{k.replace(".", "_"): v for k, v in overrides.items()}) as running:
        broker = running.broker
        sources = {name: broker.config.source(name) for name in overrides}
        assert sources == dict.fromkeys(overrides, STATIC)
        txn = broker.txn.config
        assert (txn.id_expiration_ms, txn.abort_timed_out_interval_ms) == (60_000, 500)
        consumer = broker.groups.new_shard(0, 0).consumer.config
        assert (consumer.session_timeout_ms, consumer.max_size) == (50_000, 7)


# Each as Apache Kafka 4.0.2's KafkaConfig refuses it (ConfigException or a failed requirement).
REFUSED_AT_START = [
    (
        {"group.consumer.session.timeout.ms": "0"},
        "Invalid value 0 for configuration group.consumer.session.timeout.ms: Value must be at least 1",
    ),
    (
        {"transaction.state.log.num.partitions": "0"},
        "Invalid value 0 for configuration transaction.state.log.num.partitions: Value must be at least 1",
    ),
    (
        {"transaction.state.log.replication.factor": "0"},
        "Invalid value 0 for configuration transaction.state.log.replication.factor: Value must be at least 1",
    ),
    (
        {"transactional.id.expiration.ms": "0"},
        "Invalid value 0 for configuration transactional.id.expiration.ms: Value must be at least 1",
    ),
    (
        {"transaction.max.timeout.ms": "ten"},
        "Invalid value ten for configuration transaction.max.timeout.ms: Not a number of type INT",
    ),
    (
        {"transaction.partition.verification.enable": "maybe"},
        "Invalid value maybe for configuration transaction.partition.verification.enable: "
        "Expected value to be either true or false",
    ),
    (
        {"group.consumer.migration.policy": "sideways"},
        "Invalid value sideways for configuration group.consumer.migration.policy: "
        "String must be one of (case insensitive): DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL",
    ),
    (
        {"group.consumer.heartbeat.interval.ms": "45000"},
        "group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
    ),
    (
        {"group.consumer.session.timeout.ms": "30000"},
        "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
    ),
    (
        {"group.consumer.max.session.timeout.ms": "40000"},
        "group.consumer.max.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
    ),
    (
        {
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.session.timeout.ms": "5000",
            "group.consumer.heartbeat.interval.ms": "5000",
        },
        "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms",
    ),
    ({"group.consumer.assignors": "sticky"}, "unknown consumer group assignor 'sticky'"),
]


@pytest.mark.parametrize(("settings", "message"), REFUSED_AT_START)
def test_a_broker_does_not_start_with_a_value_kafka_refuses(
    tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    config = make_config(tmp_path, **{k.replace(".", "_"): v for k, v in settings.items()})
    with pytest.raises(ValueError) as info:
        Node(config)
    assert str(info.value).startswith(message)


async def test_alter_configs_refuses_them_as_kafka_does(running: RunningBroker) -> None:
    client = await running.client()
    read_only: Any = await _set(client, BROKER, "1", {"group.consumer.session.timeout.ms": "50000"})
    assert read_only.error_code == ErrorCode.INVALID_REQUEST  # Kafka: "Cannot update these configs dynamically"
    bad: Any = await _set(client, BROKER, "1", {"transaction.partition.verification.enable": "maybe"})
    assert bad.error_code == ErrorCode.INVALID_REQUEST  # a bad broker value is an invalid request in Kafka
    assert running.broker.txn.verification_enabled
    # The one of these Kafka lets change at run time, and the partition leaders follow it at once.
    assert (await _set(client, BROKER, "1", {"transaction.partition.verification.enable": "false"})).error_code == 0
    assert not running.broker.txn.verification_enabled
