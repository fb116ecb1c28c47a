"""CreatePartitions adding more than 10,000 partitions in all, counted as Kafka 4.4 counts them:
per topic named once that exists, its new count less its current one (a count that does not grow
it adds nothing); above 10,000 every such topic is POLICY_VIOLATION, validate_only too."""

from __future__ import annotations

from typing import Any

from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker
from tests.server.test_broker_basics import _create

OVER = (ErrorCode.POLICY_VIOLATION, "Excessively large number of additional partitions per request.")


async def _grow(client: AsyncWireClient, counts: list[tuple[str, int]]) -> list[tuple[str, int, Any]]:
    body = {
        "topics": [{"name": name, "count": count, "assignments": None} for name, count in counts],
        "timeout_ms": 5000,
        "validate_only": True,
    }
    response = await client.request(37, 3, body)
    return sorted((r.name, r.error_code, r.error_message) for r in response.results)


async def test_the_partitions_added_are_counted_as_kafka_counts_them(running: RunningBroker) -> None:
    client = await running.client()
    for name in ("a", "b", "c"):
        await _create(client, name)
    # 5,000 + 5,000 added: exactly the limit.
    assert await _grow(client, [("a", 5001), ("b", 5001)]) == [("a", 0, None), ("b", 0, None)]
    assert await _grow(client, [("a", 5001), ("b", 5002)]) == [("a", *OVER), ("b", *OVER)]
    # A topic that does not exist adds nothing (and is answered as unknown).
    unknown = await _grow(client, [("a", 5001), ("nope", 9000)])
    assert unknown == [("a", 0, None), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown[1][2])]
    # A count below the current one takes nothing off the total.
    assert await _grow(client, [("a", 10_002), ("b", 0)]) == [("a", *OVER), ("b", *OVER)]
    # A name given twice is a duplicate, not counted; the others are.
    duplicate = await _grow(client, [("a", 10_002), ("a", 3), ("c", 2)])
    assert duplicate == [("a", ErrorCode.INVALID_REQUEST, "Duplicate topic name."), ("c", 0, None)]
    assert running.broker.controller.image.topics["a"].partitions == 1
