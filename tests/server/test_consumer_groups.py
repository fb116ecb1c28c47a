"""KIP-848 consumer groups over real sockets: heartbeats, describe, list, offsets, restart."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import trio

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.test_broker_basics import _create
from tests.server.test_groups import FAST, connect, join_body, serving

HEARTBEAT, DESCRIBE = 68, 69
JOIN, CLASSIC_DESCRIBE, LIST, OFFSET_COMMIT, OFFSET_FETCH, DELETE_GROUPS = 11, 15, 16, 8, 9, 42


async def heartbeat(client: AsyncWireClient, member_id: str, epoch: int, version: int = 1, **fields: Any) -> Message:
    body: dict[str, Any] = {"group_id": "cg", "member_id": member_id, "member_epoch": epoch}
    body.update(fields)
    return await client.request(HEARTBEAT, version, body)


async def join(client: AsyncWireClient, member_id: str, topic: str = "events", version: int = 1) -> Message:
    return await heartbeat(
        client, member_id, 0, version, rebalance_timeout_ms=30_000, subscribed_topic_names=[topic], topic_partitions=[]
    )


class Member:
    """A consumer of the new protocol that adopts each assignment at once, as real clients do."""

    def __init__(self, client: AsyncWireClient, member_id: str) -> None:
        self.client = client
        self.member_id = member_id
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}

    def take(self, response: Message) -> Message:
        assert response.error_code == 0, (response.error_code, response.error_message)
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.owned = {t.topic_id: sorted(t.partitions) for t in response.assignment.topic_partitions}
        return response

    async def join(self) -> Message:
        return self.take(await join(self.client, self.member_id))

    async def beat(self) -> Message:
        owned = [{"topic_id": t, "partitions": ps} for t, ps in self.owned.items()]
        return self.take(await heartbeat(self.client, self.member_id, self.epoch, topic_partitions=owned))

    def partitions(self) -> list[int]:
        return sorted(p for ps in self.owned.values() for p in ps)


async def commit(client: AsyncWireClient, member_id: str, epoch: int, version: int = 9) -> int:
    body = {
        "group_id": "cg",
        "generation_id_or_member_epoch": epoch,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": [{"name": "events", "partitions": [{"partition_index": 0, "committed_offset": 5}]}],
    }
    response = await client.request(OFFSET_COMMIT, version, body)
    return int(response.topics[0].partitions[0].error_code)


async def fetch(client: AsyncWireClient, member_id: str | None, epoch: int) -> Message:
    group = {"group_id": "cg", "member_id": member_id, "member_epoch": epoch, "topics": None}
    return (await client.request(OFFSET_FETCH, 9, {"groups": [group], "require_stable": False})).groups[0]


async def test_api_versions_advertise_the_consumer_group_apis(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await connect(running, "admin")
        table = {k.api_key: (k.min_version, k.max_version) for k in (await client.request(18, 3, {})).api_keys}
        assert table[HEARTBEAT] == (0, 1) and table[DESCRIBE] == (0, 0)


async def test_three_members_share_a_topic_and_rebalance(tmp_path: Path) -> None:
    async with serving(tmp_path, **FAST) as running:
        admin = await connect(running, "admin")
        await _create(admin, "events", 6)
        topic_id = running.broker.controller.image.topics["events"].topic_id
        members = [Member(await connect(running, f"consumer-{n}"), f"member-{n}") for n in "abc"]
        for m in members:
            await m.join()
        for _ in range(4):
            for m in members:
                await m.beat()
        assert sorted(p for m in members for p in m.partitions()) == [0, 1, 2, 3, 4, 5]
        assert [len(m.partitions()) for m in members] == [2, 2, 2]
        assert {m.epoch for m in members} == {3}
        assert members[0].owned.keys() == {topic_id}

        described = await admin.request(
            DESCRIBE, 0, {"group_ids": ["cg", "nope"], "include_authorized_operations": True}
        )
        group, missing = described.groups
        assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch) == (0, "Stable", 3, 3)
        assert group.assignor_name == "uniform" and group.authorized_operations > 0
        by_id = {m.member_id: m for m in group.members}
        assert by_id["member-a"].client_id == "consumer-a" and by_id["member-a"].client_host == "/127.0.0.1"
        assert by_id["member-a"].assignment.topic_partitions[0].topic_name == "events"
        assert (missing.error_code, missing.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")

        listed = await admin.request(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]})
        assert [(g.group_id, g.group_state, g.group_type, g.protocol_type) for g in listed.groups] == [
            ("cg", "Stable", "consumer", "consumer")
        ]
        assert (await admin.request(LIST, 5, {"states_filter": [], "types_filter": ["classic"]})).groups == []
        classic = (
            await admin.request(CLASSIC_DESCRIBE, 6, {"groups": ["cg"], "include_authorized_operations": False})
        ).groups[0]
        assert (classic.error_code, classic.group_state) == (E.GROUP_ID_NOT_FOUND, "Dead")

        a = members[0]
        assert await commit(a.client, a.member_id, a.epoch) == 0
        assert await commit(a.client, a.member_id, a.epoch - 1) == E.STALE_MEMBER_EPOCH
        assert await commit(a.client, "nobody", a.epoch) == E.UNKNOWN_MEMBER_ID
        assert await commit(a.client, a.member_id, a.epoch, version=8) == E.UNSUPPORTED_VERSION
        fetched = await fetch(a.client, a.member_id, a.epoch)
        assert fetched.error_code == 0 and fetched.topics[0].partitions[0].committed_offset == 5
        assert (await fetch(a.client, a.member_id, a.epoch + 1)).error_code == E.STALE_MEMBER_EPOCH
        assert (await fetch(admin, None, -1)).error_code == 0

        # A classic consumer cannot join a group of the new protocol.
        refused = await admin.request(JOIN, 7, join_body(group_id="cg"))
        assert refused.error_code == E.INCONSISTENT_GROUP_PROTOCOL

        # c leaves; a and b take over its partitions once the group has moved on.
        left = await heartbeat(members[2].client, "member-c", -1)
        assert (left.error_code, left.member_id, left.member_epoch) == (0, "member-c", -1)
        deleted = await admin.request(DELETE_GROUPS, 2, {"groups_names": ["cg"]})
        assert deleted.results[0].error_code == E.NON_EMPTY_GROUP
        for _ in range(3):
            for m in members[:2]:
                await m.beat()
        assert sorted(members[0].partitions() + members[1].partitions()) == [0, 1, 2, 3, 4, 5]
        for m in members[:2]:
            assert (await heartbeat(m.client, m.member_id, -1)).error_code == 0
        deleted = await admin.request(DELETE_GROUPS, 2, {"groups_names": ["cg"]})
        assert deleted.results[0].error_code == 0


async def test_v0_gets_a_member_id_and_errors_carry_messages(tmp_path: Path) -> None:
    async with serving(tmp_path, **FAST) as running:
        admin = await connect(running, "admin")
        await _create(admin, "events", 2)
        client = await connect(running, "consumer")
        joined = await join(client, "", version=0)
        assert joined.error_code == 0 and len(joined.member_id) == 22 and joined.member_epoch == 1
        assert joined.heartbeat_interval_ms == 5000
        assert len(joined.assignment.topic_partitions[0].partitions) == 2
        invalid = await join(client, "")
        assert (invalid.error_code, invalid.error_message) == (E.INVALID_REQUEST, "MemberId can't be empty.")
        unknown = await heartbeat(client, "ghost", 3)
        assert unknown.error_code == E.UNKNOWN_MEMBER_ID and unknown.member_id is None
        fenced = await heartbeat(client, joined.member_id, 7, version=0)
        assert fenced.error_code == E.FENCED_MEMBER_EPOCH
        assignor = await heartbeat(client, joined.member_id, 1, server_assignor="sticky")
        assert assignor.error_code == E.UNSUPPORTED_ASSIGNOR


async def test_broker_settings_for_consumer_groups(tmp_path: Path) -> None:
    settings = {
        "group_consumer_heartbeat_interval_ms": "1000",
        "group_consumer_session_timeout_ms": "3000",
        # Below Kafka's lower bounds for both (5 s, 45 s): the bounds come down with them, as Kafka requires.
        "group_consumer_min_heartbeat_interval_ms": "1000",
        "group_consumer_min_session_timeout_ms": "3000",
        "group_consumer_assignors": "range,uniform",
        "group_consumer_max_size": "1",
    }
    async with serving(tmp_path, **FAST, **settings) as running:
        admin = await connect(running, "admin")
        await _create(admin, "events", 2)
        client = await connect(running, "consumer")
        joined = await join(client, "m1")
        assert joined.heartbeat_interval_ms == 1000
        assert (await join(client, "m2")).error_code == E.GROUP_MAX_SIZE_REACHED
        described = await client.request(DESCRIBE, 0, {"group_ids": ["cg"], "include_authorized_operations": False})
        assert described.groups[0].assignor_name == "range"
        with trio.fail_after(10):
            while running.broker.groups.shard_for("cg").consumer_groups["cg"].members:
                await trio.sleep(0.2)  # the session ends after 3 s without a heartbeat


async def test_consumer_groups_survive_a_restart(tmp_path: Path) -> None:
    async with serving(tmp_path, **FAST) as running:
        admin = await connect(running, "admin")
        await _create(admin, "events", 4)
        a = Member(await connect(running, "consumer-a"), "member-a")
        await a.join()
        assert await commit(a.client, a.member_id, a.epoch) == 0
    async with serving(tmp_path, **FAST) as running:
        client = await connect(running, "consumer-a")
        again = await heartbeat(client, "member-a", 1)
        assert (again.error_code, again.member_epoch) == (0, 1)
        described = (
            await client.request(DESCRIBE, 0, {"group_ids": ["cg"], "include_authorized_operations": False})
        ).groups[0]
        assert [m.member_id for m in described.members] == ["member-a"]
        assert described.members[0].assignment.topic_partitions[0].partitions == [0, 1, 2, 3]
        assert (await fetch(client, "member-a", 1)).topics[0].partitions[0].committed_offset == 5
