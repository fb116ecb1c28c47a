"""AlterConfigs, IncrementalAlterConfigs, DeleteRecords and DescribeLogDirs over real sockets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, serving
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def _describe(client: AsyncWireClient, rtype: int, name: str) -> dict[str, Any]:
    response = await client.request(
        32,
        4,
        {
            "resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": True,
            "include_documentation": False,
        },
    )
    assert response.results[0].error_code == 0, response.results[0].error_message
    return {c.name: c for c in response.results[0].configs}


async def _incremental(
    client: AsyncWireClient, rtype: int, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False
) -> Any:
    response = await client.request(
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": rtype,
                    "resource_name": name,
                    "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops],
                }
            ],
            "validate_only": validate_only,
        },
    )
    return response.responses[0]


async def test_alter_configs_take_effect_and_are_described(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "alt")
    response = await client.request(
        33,
        2,
        {
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": "alt",
                    "configs": [
                        {"name": "retention.ms", "value": "60000"},
                        {"name": "max.message.bytes", "value": "2000"},
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    assert response.responses[0].error_code == 0
    configs = await _describe(client, TOPIC, "alt")
    assert configs["retention.ms"].value == "60000" and configs["retention.ms"].config_source == 1
    assert running.broker.partitions[("alt", 0)].log.config.retention_ms == 60000
    # The new max.message.bytes applies to the next produce at once.
    too_big = build_batch([Record(value=b"x" * 3000)])
    produced = await client.request(0, 9, _produce_body("alt", 0, too_big))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE


async def test_invalid_configs_are_rejected_without_change(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "inv")
    bad = await _incremental(client, TOPIC, "inv", [("retention.ms", SET, "soon")])
    assert bad.error_code == ErrorCode.INVALID_CONFIG
    unknown = await _incremental(client, TOPIC, "inv", [("no.such.thing", SET, "1")])
    assert unknown.error_code == ErrorCode.INVALID_CONFIG
    policy = await _incremental(client, TOPIC, "inv", [("cleanup.policy", SET, "shred")])
    assert policy.error_code == ErrorCode.INVALID_CONFIG
    append = await _incremental(client, TOPIC, "inv", [("retention.ms", APPEND, "5")])
    assert append.error_code == ErrorCode.INVALID_CONFIG
    only_validate = await _incremental(client, TOPIC, "inv", [("retention.ms", SET, "5")], validate_only=True)
    assert only_validate.error_code == 0
    assert (await _describe(client, TOPIC, "inv"))["retention.ms"].config_source != 1
    missing = await _incremental(client, TOPIC, "ghost", [("retention.ms", SET, "5")])
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_incremental_set_delete_append_subtract(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "inc")
    assert (await _incremental(client, TOPIC, "inc", [("cleanup.policy", APPEND, "compact")])).error_code == 0
    assert (await _describe(client, TOPIC, "inc"))["cleanup.policy"].value == "delete,compact"
    assert (await _incremental(client, TOPIC, "inc", [("cleanup.policy", SUBTRACT, "delete")])).error_code == 0
    assert (await _describe(client, TOPIC, "inc"))["cleanup.policy"].value == "compact"
    assert (await _incremental(client, TOPIC, "inc", [("cleanup.policy", DELETE, None)])).error_code == 0
    described = (await _describe(client, TOPIC, "inc"))["cleanup.policy"]
    assert described.value == "delete" and described.config_source == 5


async def test_dynamic_broker_configs_report_their_source(running: RunningBroker) -> None:
    client = await running.client()
    assert (await _incremental(client, BROKER, "", [("log.retention.ms", SET, "1000")])).error_code == 0
    assert (await _describe(client, BROKER, "1"))["log.retention.ms"].config_source == 3
    assert (await _incremental(client, BROKER, "1", [("log.retention.ms", SET, "2000")])).error_code == 0
    entry = (await _describe(client, BROKER, "1"))["log.retention.ms"]
    assert entry.value == "2000" and entry.config_source == 2
    assert [s.source for s in entry.synonyms][:2] == [2, 3]
    await _create(client, "inherits")
    assert (await _describe(client, TOPIC, "inherits"))["retention.ms"].value == "2000"
    read_only = await _incremental(client, BROKER, "1", [("node.id", SET, "7")])
    assert read_only.error_code == ErrorCode.INVALID_REQUEST


async def test_delete_records_moves_the_log_start(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "dr")
    for _ in range(4):
        await client.request(0, 9, _produce_body("dr", 0, build_batch([Record(value=b"x")] * 5)))
    response = await client.request(
        21, 2, {"topics": [{"name": "dr", "partitions": [{"partition_index": 0, "offset": 10}]}], "timeout_ms": 1000}
    )
    assert response.topics[0].partitions[0].low_watermark == 10
    below = await client.request(1, 12, _fetch_body("dr", 0, 3))
    assert below.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert below.responses[0].partitions[0].log_start_offset == -1  # unknown, as Apache Kafka answers
    past = await client.request(
        21, 2, {"topics": [{"name": "dr", "partitions": [{"partition_index": 0, "offset": 999}]}], "timeout_ms": 1000}
    )
    assert past.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    dirs = await client.request(35, 4, {"topics": None})
    parts = {(t.name, p.partition_index): p.partition_size for t in dirs.results[0].topics for p in t.partitions}
    assert parts[("dr", 0)] > 0 and dirs.results[0].total_bytes > 0


async def test_configs_survive_a_restart(tmp_path: Path) -> None:
    for round_ in range(2):
        async with serving(tmp_path) as running:
            client = await running.client()
            if round_ == 0:
                await _create(client, "kept")
                await _incremental(client, TOPIC, "kept", [("retention.ms", SET, "777")])
            else:
                assert (await _describe(client, TOPIC, "kept"))["retention.ms"].value == "777"
                assert running.broker.partitions[("kept", 0)].log.config.retention_ms == 777
