"""segment.bytes as Kafka 4.1+ (KIP-1030) checks it: at least 1 MiB through every admin request, and
internal.segment.bytes for the tiny segments tests want, winning over segment.bytes."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker

TOPIC = 2


def refused(value: int) -> tuple[int, str]:
    return (
        ErrorCode.INVALID_CONFIG,
        f"Invalid value {value} for configuration segment.bytes: Value must be at least 1048576",
    )


async def create(client: AsyncWireClient, name: str, configs: dict[str, str], validate_only: bool = False) -> Any:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout_ms": 5000,
        "validate_only": validate_only,
    }
    return (await client.request(19, 7, body)).topics[0]


async def incremental_alter(client: AsyncWireClient, topic: str, name: str, value: str) -> Any:
    resource = {
        "resource_type": TOPIC,
        "resource_name": topic,
        "configs": [{"name": name, "config_operation": 0, "value": value}],
    }
    return (await client.request(44, 1, {"resources": [resource], "validate_only": False})).responses[0]


async def legacy_alter(client: AsyncWireClient, topic: str, name: str, value: str) -> Any:
    resource = {"resource_type": TOPIC, "resource_name": topic, "configs": [{"name": name, "value": value}]}
    return (await client.request(33, 2, {"resources": [resource], "validate_only": False})).responses[0]


async def described(client: AsyncWireClient, topic: str) -> dict[str, Any]:
    body = {
        "resources": [{"resource_type": TOPIC, "resource_name": topic, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    return {c.name: c for c in (await client.request(32, 4, body)).results[0].configs}


def produce_body(topic: str, batch: bytes) -> dict[str, Any]:
    partition = {"index": 0, "records": batch}
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [partition]}],
    }


@pytest.mark.parametrize("value", [14, 1048575])
async def test_segment_bytes_below_one_mib_is_refused_by_every_admin_request(
    running: RunningBroker, value: int
) -> None:
    client = await running.client()
    for validate_only in (True, False):
        answer = await create(client, f"small-{value}", {"segment.bytes": str(value)}, validate_only)
        assert (answer.error_code, answer.error_message) == refused(value)
    assert f"small-{value}" not in running.broker.controller.image.topics
    assert (await create(client, "existing", {})).error_code == ErrorCode.NONE
    for alter in (incremental_alter, legacy_alter):
        answer = await alter(client, "existing", "segment.bytes", str(value))
        assert (answer.error_code, answer.error_message) == refused(value)
    assert "segment.bytes" not in running.broker.controller.image.topics["existing"].configs
    assert running.broker.partitions[("existing", 0)].log.config.segment_bytes == 1 << 30


async def test_segment_bytes_of_one_mib_is_accepted(running: RunningBroker) -> None:
    client = await running.client()
    assert (await create(client, "mib", {"segment.bytes": "1048576"})).error_code == ErrorCode.NONE
    assert running.broker.partitions[("mib", 0)].log.config.segment_bytes == 1048576
    assert (await create(client, "later", {})).error_code == ErrorCode.NONE
    assert (await incremental_alter(client, "later", "segment.bytes", "1048576")).error_code == ErrorCode.NONE
    assert (await legacy_alter(client, "later", "segment.bytes", "2097152")).error_code == ErrorCode.NONE
    assert running.broker.partitions[("later", 0)].log.config.segment_bytes == 2097152


async def test_internal_segment_bytes_gives_tiny_segments_that_roll(running: RunningBroker) -> None:
    client = await running.client()
    answer = await create(client, "tiny", {"internal.segment.bytes": "1024"})
    assert answer.error_code == ErrorCode.NONE
    # CreateTopics lists the internal config among the topic's own, as Kafka's does.
    listed = {c.name: (c.value, c.config_source) for c in answer.configs}
    assert listed["internal.segment.bytes"] == ("1024", 1) and listed["segment.bytes"][0] == "1073741824"
    log = running.broker.partitions[("tiny", 0)].log
    assert log.config.segment_bytes == 1024
    for i in range(10):
        batch = build_batch([Record(value=b"%d" % i + b"." * 300)])
        response = await client.request(0, 9, produce_body("tiny", batch))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert log.log_end_offset == 10
    assert len(log.segments) >= 3 and all(s.size <= 1024 for s in log.segments)
    # Past the tiny segment: no segment could hold it (Kafka's RECORD_LIST_TOO_LARGE).
    big = await client.request(0, 9, produce_body("tiny", build_batch([Record(value=b"x" * 2000)])))
    assert big.responses[0].partition_responses[0].error_code == ErrorCode.RECORD_LIST_TOO_LARGE


async def test_internal_segment_bytes_wins_over_segment_bytes_and_is_listed_only_when_set(
    running: RunningBroker,
) -> None:
    client = await running.client()
    configs = {"segment.bytes": "2097152", "internal.segment.bytes": "2048"}
    assert (await create(client, "both", configs)).error_code == ErrorCode.NONE
    assert running.broker.partitions[("both", 0)].log.config.segment_bytes == 2048
    listed = await described(client, "both")
    assert (listed["internal.segment.bytes"].value, listed["internal.segment.bytes"].config_source) == ("2048", 1)
    assert listed["segment.bytes"].value == "2097152"
    assert (await create(client, "plain", {})).error_code == ErrorCode.NONE
    assert "internal.segment.bytes" not in await described(client, "plain")
    # Set later through AlterConfigs, it takes effect at once; removed, segment.bytes rules again.
    assert (await incremental_alter(client, "plain", "internal.segment.bytes", "4096")).error_code == ErrorCode.NONE
    assert running.broker.partitions[("plain", 0)].log.config.segment_bytes == 4096
    assert (await legacy_alter(client, "plain", "segment.bytes", "1048576")).error_code == ErrorCode.NONE
    assert running.broker.partitions[("plain", 0)].log.config.segment_bytes == 1048576


async def test_a_bad_internal_segment_bytes_is_an_invalid_config(running: RunningBroker) -> None:
    client = await running.client()
    answer = await create(client, "bad", {"internal.segment.bytes": "abc"})
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value abc for configuration internal.segment.bytes: Not a number of type INT",
    )
    assert (await create(client, "headerless", {"internal.segment.bytes": "13"})).error_code == ErrorCode.INVALID_CONFIG
