"""Topic admin, configs, offsets and restart behaviour of the in-process broker."""

from __future__ import annotations

from pathlib import Path

import trio

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from kafkalike.server.config import BrokerConfig
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, serving
from tests.server.test_broker_basics import _create, _produce_body


async def _list_offset(client: AsyncWireClient, topic: str, timestamp: int) -> tuple[int, int]:
    response = await client.request(
        2,
        8,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}],
                }
            ],
        },
    )
    part = response.topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset, part.timestamp


async def test_list_offsets_by_time_earliest_latest_and_max(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "times")
    for base in (1000, 2000, 3000):
        batch = build_batch([Record(value=b"x", timestamp_delta=d) for d in range(3)], base_timestamp=base)
        await client.request(0, 9, _produce_body("times", 0, batch))
    assert (await _list_offset(client, "times", -2))[0] == 0
    assert (await _list_offset(client, "times", -1))[0] == 9  # last offset + 1, batches of 3
    assert await _list_offset(client, "times", 2001) == (4, 2001)
    assert await _list_offset(client, "times", 1500) == (3, 2000)
    assert (await _list_offset(client, "times", 9999))[0] == -1
    assert await _list_offset(client, "times", -3) == (8, 3002)


async def test_describe_configs_reports_topic_overrides_and_defaults(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "cfg", 1, retention_ms="1234")
    response = await client.request(
        32,
        4,
        {
            "resources": [{"resource_type": 2, "resource_name": "cfg", "configuration_keys": None}],
            "include_synonyms": True,
            "include_documentation": False,
        },
    )
    configs = {c.name: c for c in response.results[0].configs}
    assert configs["retention.ms"].value == "1234" and configs["retention.ms"].config_source == 1
    assert configs["segment.bytes"].value == "1073741824" and configs["segment.bytes"].config_source == 5
    assert configs["retention.ms"].synonyms[0].source == 1
    missing = await client.request(
        32,
        4,
        {
            "resources": [{"resource_type": 2, "resource_name": "nope", "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    assert missing.results[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_create_partitions_and_delete_topic_by_id(running: RunningBroker) -> None:
    client = await running.client()
    created = await _create(client, "grow", 2)
    grown = await client.request(
        37,
        3,
        {"topics": [{"name": "grow", "count": 5, "assignments": None}], "timeout_ms": 1000, "validate_only": False},
    )
    assert grown.results[0].error_code == 0
    shrink = await client.request(
        37,
        3,
        {"topics": [{"name": "grow", "count": 3, "assignments": None}], "timeout_ms": 1000, "validate_only": False},
    )
    assert shrink.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    meta = await client.request(
        3, 12, {"topics": [{"topic_id": created.topic_id, "name": None}], "allow_auto_topic_creation": False}
    )
    assert len(meta.topics[0].partitions) == 5
    deleted = await client.request(
        20, 6, {"topics": [{"name": None, "topic_id": created.topic_id}], "timeout_ms": 1000}
    )
    assert deleted.responses[0].error_code == 0 and deleted.responses[0].name == "grow"
    meta = await client.request(3, 12, {"topics": [{"name": "grow"}], "allow_auto_topic_creation": False})
    assert meta.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not (running.broker.data_dir / "grow-0").exists()


async def test_metadata_auto_creates_unless_disabled(running: RunningBroker) -> None:
    client = await running.client()
    no = await client.request(3, 12, {"topics": [{"name": "auto1"}], "allow_auto_topic_creation": False})
    assert no.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not (running.broker.data_dir / "auto1-0").exists()
    # As Kafka answers: unknown while it is being created, there once its partitions are ready.
    yes = await client.request(3, 12, {"topics": [{"name": "auto1"}], "allow_auto_topic_creation": True})
    assert yes.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with trio.fail_after(10):
        await running.broker.wait_auto_creations()
    later = await client.request(3, 12, {"topics": [{"name": "auto1"}], "allow_auto_topic_creation": False})
    assert later.topics[0].error_code == 0 and len(later.topics[0].partitions) == 1


async def test_topics_and_data_survive_a_restart(tmp_path: Path) -> None:
    for round_ in range(2):
        async with serving(tmp_path) as running:
            client = await running.client()
            if round_ == 0:
                await _create(client, "keep", 2)
                await client.request(0, 9, _produce_body("keep", 1, build_batch([Record(value=b"v")] * 3)))
                cluster_id = running.broker.cluster_id
            else:
                assert running.broker.cluster_id == cluster_id
                meta = await client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
                assert [(t.name, len(t.partitions)) for t in meta.topics] == [("keep", 2)]
                assert (await _list_offset_p(client, "keep", 1)) == 3


async def _list_offset_p(client: AsyncWireClient, topic: str, partition: int) -> int:
    response = await client.request(
        2,
        8,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}],
                }
            ],
        },
    )
    return int(response.topics[0].partitions[0].offset)


def test_server_properties_use_kafkas_names(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# comment\nlog.dirs=/x/y\nnum.partitions = 4\nlog.retention.hours=2\n")
    config = BrokerConfig.load(props, ["num.partitions=6"])
    assert config.log_dirs == [Path("/x/y")]
    assert config.get_int("num.partitions") == 6
    assert config.get("log.retention.ms") == str(2 * 3_600_000)
    assert config.topic_default("retention.ms") == str(2 * 3_600_000)
