"""Compacted topics through the broker: keyless records refused, the background cleaner keeps the
latest value per key and drops deleted keys."""

from __future__ import annotations

from pathlib import Path

import trio

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import serving
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body


async def _read_all(client: AsyncWireClient, topic: str) -> dict[bytes, bytes | None]:
    latest: dict[bytes, bytes | None] = {}
    offset = 0
    while True:
        response = await client.request(1, 12, _fetch_body(topic, 0, offset))
        part = response.responses[0].partitions[0]
        if not part.records:
            return latest
        for pos, header in iter_batches(part.records, partial_ok=True):
            for record in decode_records(part.records, pos, header):
                if record.key is not None:
                    latest[record.key] = record.value
            offset = header.last_offset + 1


async def _batch_count(client: AsyncWireClient, topic: str) -> int:
    response = await client.request(1, 12, _fetch_body(topic, 0, 0))
    records = response.responses[0].partitions[0].records
    return sum(header.records_count for _, header in iter_batches(records, partial_ok=True))


async def test_compacted_topic_keeps_the_latest_value_per_key(tmp_path: Path) -> None:
    async with serving(tmp_path, log_cleaner_backoff_ms="20") as running:
        client = await running.client()
        await _create(
            client,
            "state",
            1,
            cleanup_policy="compact",
            internal_segment_bytes="2048",
            min_cleanable_dirty_ratio="0.01",
            delete_retention_ms="0",
        )
        keyless = await client.request(0, 9, _produce_body("state", 0, build_batch([Record(value=b"no key")])))
        assert keyless.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
        expected: dict[bytes, bytes | None] = {}
        for version in range(20):
            for key in range(10):
                value = None if key == 3 and version == 19 else b"v%d" % version
                batch = build_batch([Record(key=b"k%d" % key, value=value)])
                await client.request(0, 9, _produce_body("state", 0, batch))
                expected[b"k%d" % key] = value
        assert await _read_all(client, "state") == expected
        # The cleaner runs in the background; wait (bounded) until it has removed old versions.
        with trio.fail_after(30):
            while await _batch_count(client, "state") > 60:
                await trio.sleep(0.05)
        latest = await _read_all(client, "state")
        assert {k: v for k, v in latest.items() if v is not None} == {
            k: v for k, v in expected.items() if v is not None
        }
