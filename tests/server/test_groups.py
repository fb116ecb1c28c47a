"""Consumer groups and committed offsets over real sockets: join, sync, heartbeat, commit, restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from kafkalike.group import OFFSETS_TOPIC, partition_for, read_records
from kafkalike.group.records import OffsetRecord, decode_record
from kafkalike.protocol.codec import Message, schema
from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.server.node import Node
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, find_coordinator, make_config, serving
from tests.server.test_broker_basics import _create

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST = 10, 11, 12, 13, 14, 15, 16
OFFSET_COMMIT, OFFSET_FETCH, DELETE_GROUPS, OFFSET_DELETE = 8, 9, 42, 47
FAST = {"group_initial_rebalance_delay_ms": "100", "offsets_topic_num_partitions": "5"}


async def connect(running: RunningBroker, client_id: str) -> AsyncWireClient:
    client = await running.client()
    client.client_id = client_id
    return client


def subscription(*topics: str) -> bytes:
    return b"\x00\x00" + schema("ConsumerProtocolSubscription", "message", 0).encode({"topics": list(topics)})


def assignment(topic: str, *partitions: int) -> bytes:
    body = {"assigned_partitions": [{"topic": topic, "partitions": list(partitions)}], "user_data": None}
    return b"\x00\x00" + schema("ConsumerProtocolAssignment", "message", 0).encode(body)


def join_body(member_id: str = "", topic: str = "events", **extra: Any) -> dict[str, Any]:
    body = {
        "group_id": "g",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 5_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(topic)}],
    }
    body.update(extra)
    return body


async def join(client: AsyncWireClient, version: int = 7, **extra: Any) -> Message:
    """The two-step join of JoinGroup v4+: MEMBER_ID_REQUIRED, then the real join."""
    first = await client.request(JOIN, version, join_body(**extra))
    assert first.error_code == E.MEMBER_ID_REQUIRED
    return await client.request(JOIN, version, join_body(first.member_id, **extra))


async def sync(client: AsyncWireClient, member_id: str, generation: int, assignments: Any = ()) -> Message:
    body = {
        "group_id": "g",
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments],
    }
    return await client.request(SYNC, 5, body)


async def heartbeat(client: AsyncWireClient, member_id: str, generation: int) -> int:
    body = {"group_id": "g", "generation_id": generation, "member_id": member_id, "group_instance_id": None}
    return int((await client.request(HEARTBEAT, 4, body)).error_code)


async def commit(
    client: AsyncWireClient, offsets: dict[int, int], generation: int = -1, member_id: str = ""
) -> Message:
    body = {
        "group_id": "g",
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": [
            {
                "name": "events",
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": 0,
                        "committed_metadata": "m",
                    }
                    for p, o in offsets.items()
                ],
            }
        ],
    }
    return await client.request(OFFSET_COMMIT, 8, body)


async def fetch_committed(client: AsyncWireClient, *partitions: int, group: str = "g") -> list[int]:
    body = {
        "groups": [{"group_id": group, "topics": [{"name": "events", "partition_indexes": list(partitions)}]}],
        "require_stable": True,
    }
    response = await client.request(OFFSET_FETCH, 8, body)
    return [p.committed_offset for p in response.groups[0].topics[0].partitions]


async def test_two_members_join_sync_heartbeat_commit_and_rebalance(tmp_path: Path) -> None:
    async with serving(tmp_path, **FAST) as running:
        admin = await connect(running, "admin")
        await _create(admin, "events", 2)
        # As Kafka: the first answer is "not available" while __consumer_offsets is being made.
        first = await admin.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert (first.error_code, first.node_id, first.host, first.port) == (E.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
        assert first.error_message == "The coordinator is not available."
        found = await find_coordinator(running.broker, admin, 3, {"key": "g", "key_type": 0})
        assert (found.error_code, found.node_id, found.port) == (0, running.broker.node_id, running.port)
        assert found.error_message == "NONE"
        batched = await admin.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g", "h"]})
        assert [c.key for c in batched.coordinators] == ["g", "h"]
        assert OFFSETS_TOPIC in running.broker.controller.image.topics

        a = await connect(running, "consumer-a")
        joined_a = await join(a)
        assert joined_a.error_code == 0 and joined_a.generation_id == 1
        member_a = joined_a.member_id
        assert member_a.startswith("consumer-a-") and joined_a.leader == member_a
        synced = await sync(a, member_a, 1, [(member_a, assignment("events", 0, 1))])
        assert synced.error_code == 0 and synced.assignment == assignment("events", 0, 1)
        assert await heartbeat(a, member_a, 1) == 0

        # B joins: A learns of the rebalance from its heartbeat and rejoins.
        b = await connect(running, "consumer-b")
        results: dict[str, Message] = {}
        async with trio.open_nursery() as nursery:

            async def join_b() -> None:
                results["b"] = await join(b)

            nursery.start_soon(join_b)
            while await heartbeat(a, member_a, 1) != E.REBALANCE_IN_PROGRESS:
                await trio.sleep(0.01)
            results["a"] = await a.request(JOIN, 7, join_body(member_a))
        ja, jb = results["a"], results["b"]
        assert ja.generation_id == jb.generation_id == 2
        assert ja.leader == member_a and len(ja.members) == 2 and jb.members == []
        member_b = jb.member_id

        async with trio.open_nursery() as nursery:

            async def sync_b() -> None:
                results["sb"] = await sync(b, member_b, 2)

            nursery.start_soon(sync_b)
            await trio.sleep(0.05)
            plan = [(member_a, assignment("events", 0)), (member_b, assignment("events", 1))]
            results["sa"] = await sync(a, member_a, 2, plan)
        assert results["sa"].assignment == assignment("events", 0)
        assert results["sb"].assignment == assignment("events", 1)
        assert (results["sb"].protocol_type, results["sb"].protocol_name) == ("consumer", "range")

        assert (await commit(a, {0: 10}, 2, member_a)).topics[0].partitions[0].error_code == 0
        assert (await commit(b, {1: 20}, 2, member_b)).topics[0].partitions[0].error_code == 0
        assert (await commit(b, {1: 21}, 1, member_b)).topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
        assert await fetch_committed(admin, 0, 1, 2) == [10, 20, -1]

        described = (await admin.request(DESCRIBE, 5, {"groups": ["g"], "include_authorized_operations": False})).groups
        assert (described[0].group_state, described[0].protocol_data) == ("Stable", "range")
        assert {m.client_id for m in described[0].members} == {"consumer-a", "consumer-b"}
        assert described[0].members[0].client_host == "/127.0.0.1"
        listed = await admin.request(LIST, 5, {"states_filter": ["Stable"], "types_filter": []})
        assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [("g", "Stable", "classic")]

        left = await b.request(LEAVE, 5, {"group_id": "g", "members": [{"member_id": member_b, "reason": "bye"}]})
        assert left.error_code == 0 and left.members[0].error_code == 0
        assert await heartbeat(a, member_a, 2) == E.REBALANCE_IN_PROGRESS

        # The commit is in the group's partition of __consumer_offsets, in Kafka's layout.
        plog = running.broker.partitions[(OFFSETS_TOPIC, partition_for("g", 5))].log
        offsets = [r for _, (k, v) in read_records(plog) if isinstance(r := decode_record(k, v), OffsetRecord)]
        assert [(r.topic, r.partition, r.offset.committed_offset if r.offset else None) for r in offsets] == [
            ("events", 0, 10),
            ("events", 1, 20),
        ]


async def test_old_versions_of_the_group_apis(tmp_path: Path) -> None:
    async with serving(tmp_path, **FAST) as running:
        client = await connect(running, "old")
        await _create(client, "events", 1)
        found = await find_coordinator(running.broker, client, 0, {"key": "g"})
        assert found.error_code == 0 and found.port == running.port
        # JoinGroup v0 needs no member id round trip and has no rebalance timeout.
        joined = await client.request(JOIN, 0, join_body())
        assert joined.error_code == 0 and joined.generation_id == 1 and joined.protocol_name == "range"
        member = joined.member_id
        synced = await client.request(
            SYNC, 0, {"group_id": "g", "generation_id": 1, "member_id": member, "assignments": []}
        )
        assert synced.error_code == 0 and synced.assignment == b""
        assert (
            await client.request(HEARTBEAT, 0, {"group_id": "g", "generation_id": 1, "member_id": member})
        ).error_code == 0
        body = {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": member, "retention_time_ms": -1}
        body["topics"] = [{"name": "events", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]
        assert (await client.request(OFFSET_COMMIT, 2, body)).topics[0].partitions[0].error_code == 0
        fetched = await client.request(
            OFFSET_FETCH, 1, {"group_id": "g", "topics": [{"name": "events", "partition_indexes": [0]}]}
        )
        assert fetched.topics[0].partitions[0].committed_offset == 5
        every = await client.request(OFFSET_FETCH, 2, {"group_id": "g", "topics": None})
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in every.topics] == [("events", [5])]
        left = await client.request(LEAVE, 0, {"group_id": "g", "member_id": member})
        assert left.error_code == 0
        again = await client.request(LEAVE, 0, {"group_id": "g", "member_id": member})
        assert again.error_code == E.UNKNOWN_MEMBER_ID
        listed = await client.request(LIST, 0, {})
        assert [(g.group_id, g.protocol_type) for g in listed.groups] == [("g", "consumer")]


async def test_admin_group_apis(tmp_path: Path) -> None:
    async with serving(tmp_path, **FAST) as running:
        client = await connect(running, "admin")
        await _create(client, "events", 2)
        body = {"group_id": "simple", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None}
        body["topics"] = [
            {"name": "events", "partitions": [{"partition_index": 0, "committed_offset": 3}]},
            {"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 3}]},
        ]
        committed = await client.request(OFFSET_COMMIT, 9, body)
        assert [t.partitions[0].error_code for t in committed.topics] == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
        deleted = await client.request(
            OFFSET_DELETE,
            0,
            {"group_id": "simple", "topics": [{"name": "events", "partitions": [{"partition_index": 0}]}]},
        )
        assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
        assert await fetch_committed(client, 0, group="simple") == [-1]
        missing = await client.request(OFFSET_DELETE, 0, {"group_id": "ghost", "topics": []})
        assert missing.error_code == E.GROUP_ID_NOT_FOUND
        described = await client.request(DESCRIBE, 6, {"groups": ["ghost"], "include_authorized_operations": True})
        assert described.groups[0].error_code == E.GROUP_ID_NOT_FOUND
        assert described.groups[0].group_state == "Dead"
        old = await client.request(DESCRIBE, 0, {"groups": ["ghost"]})
        assert old.groups[0].error_code == 0 and old.groups[0].group_state == "Dead"
        results = await client.request(DELETE_GROUPS, 2, {"groups_names": ["simple", "ghost"]})
        assert [(r.group_id, r.error_code) for r in results.results] == [
            ("simple", 0),
            ("ghost", E.GROUP_ID_NOT_FOUND),
        ]
        unknown_type = await client.request(FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": ["s"]})
        assert unknown_type.coordinators[0].error_code == E.INVALID_REQUEST


async def test_committed_offsets_survive_a_restart(tmp_path: Path) -> None:
    async with serving(tmp_path, **FAST) as running:
        client = await connect(running, "app")
        await _create(client, "events", 2)
        response = await commit(client, {0: 100, 1: 200})
        assert [p.error_code for p in response.topics[0].partitions] == [0, 0]
    async with serving(tmp_path, **FAST) as running:
        client = await connect(running, "app")
        assert await fetch_committed(client, 0, 1) == [100, 200]


async def test_offsets_survive_a_crash_without_clean_shutdown(tmp_path: Path, monkeypatch: Any) -> None:
    # A killed broker's session outlives it: the restarted one registers once it expires.
    crashing = {**FAST, "broker_session_timeout_ms": "1000", "broker_heartbeat_interval_ms": "100"}
    node = Node(make_config(tmp_path, **crashing))
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        assert node.broker is not None and node.client_address is not None
        # The logs are never closed nor checkpointed, as after kill -9.
        monkeypatch.setattr(node.broker.logs, "close_all", lambda: None)
        client = await AsyncWireClient.connect(*node.client_address)
        await _create(client, "events", 2)
        await commit(client, {0: 7})
        await client.aclose()
        await node.kill()
    async with serving(tmp_path, **crashing) as running:
        client = await connect(running, "app")
        assert await fetch_committed(client, 0, 1) == [7, -1]


async def test_a_silent_member_is_expired_and_the_group_empties(tmp_path: Path) -> None:
    async with serving(tmp_path, group_min_session_timeout_ms="100", **FAST) as running:
        client = await connect(running, "app")
        await _create(client, "events", 1)
        joined = await join(client, session_timeout_ms=200)
        assert joined.error_code == 0
        await sync(client, joined.member_id, 1)
        await trio.sleep(0.5)
        described = await client.request(DESCRIBE, 5, {"groups": ["g"], "include_authorized_operations": False})
        assert described.groups[0].group_state == "Empty" and described.groups[0].members == []
        assert await heartbeat(client, joined.member_id, 1) == E.UNKNOWN_MEMBER_ID


async def test_the_default_fifty_offsets_partitions_are_cheap(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await connect(running, "app")
        start = trio.current_time()
        found = await find_coordinator(running.broker, client, 3, {"key": "g", "key_type": 0})
        assert found.error_code == 0
        assert trio.current_time() - start < 2.0
        assert running.broker.controller.image.topics[OFFSETS_TOPIC].partitions == 50
        assert running.broker.controller.image.topics[OFFSETS_TOPIC].configs["cleanup.policy"] == "compact"
