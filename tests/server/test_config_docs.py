"""What DescribeConfigs tells about each config, over real sockets: its documentation (v3+, when
asked for), where its value comes from and its synonyms, in the order Apache Kafka lists them; and
the values a log could not run with, refused before they are stored."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kafkalike.configs import LISTED_BROKER_CONFIGS, LONG_MAX, TOPIC_CONFIGS
from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, serving
from tests.server.test_broker_basics import _create

TOPIC, BROKER = 2, 4
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
SET, DELETE = 0, 1
DOCS = {name: d.doc for name, d in LISTED_BROKER_CONFIGS.items()}
TOPIC_DOCS = {name: d.doc for name, d in TOPIC_CONFIGS.items()}


async def _describe(
    client: AsyncWireClient,
    rtype: int,
    name: str,
    version: int = 4,
    documentation: bool = False,
    keys: list[str] | None = None,
) -> dict[str, Any]:
    response = await client.request(
        32,
        version,
        {
            "resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": True,
            "include_documentation": documentation,
        },
    )
    (result,) = response.results
    assert result.error_code == 0, result.error_message
    return {c.name: c for c in result.configs}


async def _set(client: AsyncWireClient, rtype: int, name: str, configs: Mapping[str, str | None]) -> Any:
    """IncrementalAlterConfigs: SET each config, DELETE where the value is None."""
    ops = [{"name": k, "config_operation": DELETE if v is None else SET, "value": v} for k, v in configs.items()]
    response = await client.request(
        44,
        1,
        {"resources": [{"resource_type": rtype, "resource_name": name, "configs": ops}], "validate_only": False},
    )
    return response.responses[0]


def _synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


# -- documentation --------------------------------------------------------------------------------
# (every declaration's own text is checked in tests/unit/configs/test_declarations.py)


@pytest.mark.parametrize("version", [3, 4])
async def test_documentation_is_returned_when_asked_for(running: RunningBroker, version: int) -> None:
    client = await running.client()
    await _create(client, "documented")
    topic = await _describe(client, TOPIC, "documented", version, documentation=True)
    assert set(topic) == set(TOPIC_CONFIGS)
    assert {name: c.documentation for name, c in topic.items()} == TOPIC_DOCS
    broker = await _describe(client, BROKER, "1", version, documentation=True)
    assert set(broker) == set(LISTED_BROKER_CONFIGS)
    assert {name: c.documentation for name, c in broker.items()} == DOCS
    # Without include_documentation: null, for every config.
    for rtype, name in ((TOPIC, "documented"), (BROKER, "1")):
        assert all(c.documentation is None for c in (await _describe(client, rtype, name, version)).values())


async def test_documentation_of_chosen_keys_and_of_the_cluster_defaults(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "chosen")
    chosen = await _describe(client, TOPIC, "chosen", documentation=True, keys=["retention.ms", "cleanup.policy"])
    assert {n: c.documentation for n, c in chosen.items()} == {
        "retention.ms": TOPIC_DOCS["retention.ms"],
        "cleanup.policy": TOPIC_DOCS["cleanup.policy"],
    }
    assert (await _set(client, BROKER, "", {"log.cleaner.backoff.ms": "500"})).error_code == 0
    defaults = await _describe(client, BROKER, "", documentation=True)
    # A fresh cluster's own cluster-level min.insync.replicas (eligible leader replicas on, as Kafka 4.4's).
    assert {n: c.documentation for n, c in defaults.items()} == {
        "log.cleaner.backoff.ms": DOCS["log.cleaner.backoff.ms"],
        "min.insync.replicas": DOCS["min.insync.replicas"],
    }


@pytest.mark.parametrize(("version", "carried"), [(1, False), (2, False), (3, True), (4, True)])
async def test_the_documentation_is_on_the_wire_from_v3_on(running: RunningBroker, version: int, carried: bool) -> None:
    client = await running.client()
    await _create(client, "wire")
    body = {
        "resources": [{"resource_type": TOPIC, "resource_name": "wire", "configuration_keys": ["retention.ms"]}],
        "include_synonyms": False,
        "include_documentation": True,  # not in the request before v3: not asked for there
    }
    await client.send(32, version, body)
    frame = await client.receive_frame()
    assert frame is not None
    assert (TOPIC_DOCS["retention.ms"].encode() in frame) is carried


# -- sources and synonyms -------------------------------------------------------------------------


async def test_topic_values_come_from_the_broker_config_they_follow(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "plain")
    configs = await _describe(client, TOPIC, "plain")
    # The broker's log.cleaner.* and log.message.* settings are what the topic configs follow.
    assert _synonyms(configs["delete.retention.ms"]) == [("log.cleaner.delete.retention.ms", "86400000", DEFAULT)]
    assert _synonyms(configs["min.cleanable.dirty.ratio"]) == [("log.cleaner.min.cleanable.ratio", "0.5", DEFAULT)]
    assert _synonyms(configs["preallocate"]) == [("log.preallocate", "false", DEFAULT)]
    # A value no config of its own gives: the topic's value, source DEFAULT_CONFIG, no synonym.
    for name, value in (("flush.ms", str(LONG_MAX)), ("segment.ms", "604800000"), ("segment.jitter.ms", "0")):
        assert (configs[name].value, configs[name].config_source, _synonyms(configs[name])) == (value, DEFAULT, [])
    assert (await _set(client, BROKER, "1", {"log.cleaner.delete.retention.ms": "1000"})).error_code == 0
    entry = (await _describe(client, TOPIC, "plain"))["delete.retention.ms"]
    assert (entry.value, entry.config_source) == ("1000", DYNAMIC_BROKER)
    assert running.broker.partitions[("plain", 0)].log.config.delete_retention_ms == 1000


async def test_every_layer_in_kafkas_order(tmp_path: Path) -> None:
    async with serving(tmp_path, log_retention_hours="2", message_max_bytes="200000") as running:
        broker = running.broker
        client = await running.client()
        await _create(client, "layers")
        topic = await _describe(client, TOPIC, "layers")
        # Only log.retention.hours is set: the topic gets 2 h, and (as in Kafka) no synonym says why.
        retention = topic["retention.ms"]
        assert (retention.value, retention.config_source, _synonyms(retention)) == ("7200000", DEFAULT, [])
        assert broker.partitions[("layers", 0)].log.config.retention_ms == 7_200_000
        assert _synonyms(topic["max.message.bytes"]) == [
            ("message.max.bytes", "200000", STATIC),
            ("message.max.bytes", "1048588", DEFAULT),
        ]

        changes = {"message.max.bytes": "300000", "log.retention.ms": "5000000"}
        assert (await _set(client, BROKER, "", changes)).error_code == 0
        assert (await _set(client, BROKER, "1", {"log.retention.ms": "6000000"})).error_code == 0
        assert (await _set(client, TOPIC, "layers", {"retention.ms": "3600000"})).error_code == 0
        topic = await _describe(client, TOPIC, "layers")
        assert topic["retention.ms"].config_source == TOPIC_CONFIG
        assert _synonyms(topic["retention.ms"]) == [
            ("retention.ms", "3600000", TOPIC_CONFIG),
            ("log.retention.ms", "6000000", DYNAMIC_BROKER),
            ("log.retention.ms", "5000000", DYNAMIC_DEFAULT),
            ("log.retention.hours", "2", STATIC),
            ("log.retention.hours", "168", DEFAULT),
        ]
        assert (topic["max.message.bytes"].value, topic["max.message.bytes"].config_source) == (
            "300000",
            DYNAMIC_DEFAULT,
        )
        hours = (await _describe(client, BROKER, "1"))["log.retention.hours"]
        assert (hours.value, hours.read_only, _synonyms(hours)) == (
            "2",
            True,
            [("log.retention.hours", "2", STATIC), ("log.retention.hours", "168", DEFAULT)],
        )
        # The cluster-default resource lists the dynamic defaults alone, each its own synonym.
        defaults = await _describe(client, BROKER, "")
        assert {n: (c.value, c.config_source, _synonyms(c)) for n, c in defaults.items()} == {
            "log.retention.ms": ("5000000", DYNAMIC_DEFAULT, [("log.retention.ms", "5000000", DYNAMIC_DEFAULT)]),
            "message.max.bytes": ("300000", DYNAMIC_DEFAULT, [("message.max.bytes", "300000", DYNAMIC_DEFAULT)]),
            # Written by the controller's bootstrap (eligible leader replicas on).
            "min.insync.replicas": ("1", DYNAMIC_DEFAULT, [("min.insync.replicas", "1", DYNAMIC_DEFAULT)]),
        }


# -- values a log could not run with --------------------------------------------------------------


@pytest.mark.parametrize(
    ("rtype", "name", "value"),
    [
        (TOPIC, "min.cleanable.dirty.ratio", "1.5"),
        (TOPIC, "min.cleanable.dirty.ratio", "nan"),
        (TOPIC, "segment.index.bytes", "3"),
        (TOPIC, "cleanup.policy", "compact,shred"),
        (BROKER, "log.cleaner.min.cleanable.ratio", "-0.1"),
        (BROKER, "log.index.size.max.bytes", "0"),
        (BROKER, "log.roll.ms", "0"),
        (BROKER, "log.flush.interval.messages", "0"),
        (BROKER, "log.cleaner.backoff.ms", "-1"),
    ],
)
async def test_a_value_no_log_can_run_with_is_refused_and_not_stored(
    tmp_path: Path, rtype: int, name: str, value: str
) -> None:
    for round_ in range(2):
        # The second time: the refused value must not have reached the metadata log.
        async with serving(tmp_path) as running:
            client = await running.client()
            if round_ == 0:
                await _create(client, "guarded")
                resource = "guarded" if rtype == TOPIC else "1"
                refused = await _set(client, rtype, resource, {name: value})
                # Kafka refuses a bad broker value as an invalid request.
                code = ErrorCode.INVALID_CONFIG if rtype == TOPIC else ErrorCode.INVALID_REQUEST
                assert refused.error_code == code, refused.error_message
                if rtype == TOPIC:
                    created = await _create(client, "born-bad", 1, **{name.replace(".", "_"): value})
                    assert created.error_code == ErrorCode.INVALID_CONFIG, created.error_message
            assert "born-bad" not in running.broker.controller.image.topics
            configs = await _describe(client, rtype, "guarded" if rtype == TOPIC else "1", keys=[name])
            assert configs[name].config_source == DEFAULT
