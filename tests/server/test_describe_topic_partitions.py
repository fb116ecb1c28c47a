"""DescribeTopicPartitions over real sockets, on the single node and on a broker of a cluster:
topics in name order, paging with a cursor, errors for unknown topics and bad cursors."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import trio

from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.handlers.describe_topic_partitions import TOPIC_OPERATIONS
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, serving
from tests.server.test_broker_basics import _create
from tests.server.test_cluster_broker import DEADLINE_S, cluster_broker, new_topic, register

ZERO_UUID = uuid.UUID(int=0)


def body(*names: str, limit: int = 2000, cursor: tuple[str, int] | None = None) -> dict[str, Any]:
    return {
        "topics": [{"name": n} for n in names],
        "response_partition_limit": limit,
        "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]},
    }


def listed(response: Any) -> list[tuple[str, int]]:
    return [(t.name, p.partition_index) for t in response.topics for p in t.partitions]


async def all_pages(client: AsyncWireClient, names: tuple[str, ...], limit: int) -> tuple[list[Any], int]:
    """Every partition, page after page as a client follows NextCursor; and how many pages."""
    seen: list[Any] = []
    cursor = None
    for pages in range(1, 1000):
        response = await client.request(75, 0, body(*names, limit=limit, cursor=cursor))
        seen += listed(response)
        if response.next_cursor is None:
            return seen, pages
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
    raise AssertionError("the cursor never ended")


async def test_topics_in_name_order_with_their_partitions(running: RunningBroker) -> None:
    client = await running.client()
    ids = {name: (await _create(client, name, partitions)).topic_id for name, partitions in [("b", 2), ("a", 1)]}
    response = await client.request(75, 0, body("b", "a"))
    assert response.next_cursor is None
    assert [(t.error_code, t.name, t.topic_id, t.is_internal) for t in response.topics] == [
        (0, "a", ids["a"], False),
        (0, "b", ids["b"], False),
    ]
    assert all(t.topic_authorized_operations == TOPIC_OPERATIONS for t in response.topics)
    (p,) = response.topics[0].partitions
    assert (p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == (0, 1, 0, [1], [1])
    assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ([], [], [])
    everything = await client.request(75, 0, body())  # no names: every topic
    assert listed(everything) == [("a", 0), ("b", 0), ("b", 1)]


async def test_a_client_pages_through_every_partition_once(running: RunningBroker) -> None:
    client = await running.client()
    layout = {"t1": 3, "t2": 1, "t3": 4}
    for name, partitions in layout.items():
        await _create(client, name, partitions)
    every = [(name, i) for name in sorted(layout) for i in range(layout[name])]
    for limit in (1, 2, 3, 4, 8, 9):
        for names in ((), tuple(layout)):
            seen, pages = await all_pages(client, names, limit)
            assert seen == every, (limit, names)
            assert pages >= -(-len(every) // limit)
    # Where the limit falls between two topics, the cursor names the next one at partition 0.
    first = await client.request(75, 0, body(limit=3))
    assert listed(first) == [("t1", 0), ("t1", 1), ("t1", 2)]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("t2", 0)
    inside = await client.request(75, 0, body(limit=2, cursor=("t3", 1)))
    assert listed(inside) == [("t3", 1), ("t3", 2)]
    assert (inside.next_cursor.topic_name, inside.next_cursor.partition_index) == ("t3", 3)


async def test_unknown_and_illegal_names_are_answered_only_when_named(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "known")
    response = await client.request(75, 0, body("known", "missing", "bad name!"))
    assert [(t.name, t.error_code, t.topic_id, t.partitions) for t in response.topics] == [
        ("bad name!", ErrorCode.INVALID_TOPIC_EXCEPTION, ZERO_UUID, []),
        ("known", 0, response.topics[1].topic_id, response.topics[1].partitions),
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID, []),
    ]
    # A page that ends on a topic that does not exist still points at it.
    cut = await client.request(75, 0, body("known", "missing", limit=1))
    assert listed(cut) == [("known", 0)]
    assert (cut.next_cursor.topic_name, cut.next_cursor.partition_index) == ("missing", 0)


async def test_a_cursor_outside_the_request_is_an_invalid_request(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "known")
    for request in (body("known", cursor=("other", 0)), body("known", "known", cursor=("known", -1))):
        response = await client.request(75, 0, request)
        assert [(t.name, t.error_code, t.partitions) for t in response.topics] == [
            ("known", ErrorCode.INVALID_REQUEST, [])
        ]
        assert response.next_cursor is None
    # With no names, a cursor at a topic that does not exist only says where to start.
    from_cursor = await client.request(75, 0, body(cursor=("kn", 0)))
    assert listed(from_cursor) == [("known", 0)]


async def test_the_broker_caps_the_page_with_its_limit(tmp_path: Path) -> None:
    async with serving(tmp_path, **{"max.request.partition.size.limit": "2"}) as running:
        client = await running.client()
        await _create(client, "wide", 5)
        response = await client.request(75, 0, body("wide", limit=100))
        assert listed(response) == [("wide", 0), ("wide", 1)]
        assert response.next_cursor.partition_index == 2
        at_least_one = await client.request(75, 0, body("wide", limit=0))
        assert listed(at_least_one) == [("wide", 0)]


async def test_a_cluster_broker_answers_from_the_registrations(tmp_path: Path) -> None:
    with trio.fail_after(DEADLINE_S):
        async with cluster_broker(tmp_path) as running:
            client = running.client
            await register(running.node, 2, 19092)
            assignments = [{"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": [2]}]
            topic = {**new_topic("split", -1), "assignments": assignments}
            created = await client.request(19, 7, {"topics": [topic], "timeout_ms": 5000})
            assert created.topics[0].error_code == 0
            channel = running.node.channel()
            gone = await channel.request(64, 0, {"broker_id": 2})  # broker 2 unregisters
            await channel.aclose()
            assert gone.error_code == 0, gone
            assert await running.broker.publisher.wait_until(lambda i: 2 not in i.brokers)
            response = await client.request(75, 0, body("split"))
            (entry,) = response.topics
            assert entry.topic_id == created.topics[0].topic_id
            rows = [(p.partition_index, p.replica_nodes, p.offline_replicas) for p in entry.partitions]
            assert rows == [(0, [1], []), (1, [2], [2])]
            # No partition errors (Metadata says LEADER_NOT_AVAILABLE): just no leader.
            assert [(p.error_code, p.leader_id) for p in entry.partitions] == [(0, 1), (0, -1)]
