"""The coordinators run a shard per partition of their internal topics: what a shard holds
survives its unload and the next load (which replays its partition's log), an unloaded shard
answers NOT_COORDINATOR (its parked and waiting calls too), a loading one
COORDINATOR_LOAD_IN_PROGRESS, and one shard's unload leaves the others serving."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkalike.coordinator import NotActive
from kafkalike.group import OFFSETS_TOPIC
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.replica import AppliedChanges, LeaderAndIsr
from kafkalike.server import coordinator_runtime
from kafkalike.server.group_service import GroupService
from kafkalike.testing.wire_client import AsyncWireClient
from kafkalike.txn import TRANSACTION_STATE_TOPIC
from tests.server.test_broker_basics import _create
from tests.server.test_coordinator_off_loop import (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    Answer,
    GatedFsync,
    commit_body,
    committed_error,
    fetch_body,
    fetch_committed,
    serving,
)
from tests.server.test_groups import DESCRIBE, FIND_COORDINATOR, HEARTBEAT, JOIN, LIST, assignment, join_body, sync
from tests.server.test_transactions import DESCRIBE_TXNS, LIST_TXNS, Producer, completed, consume, fetch

TWO_PARTITIONS = {"offsets_topic_num_partitions": "2", "transaction_state_log_num_partitions": "2"}


def leader_epoch(groups: GroupService, group_id: str) -> int:
    slot = groups.runtime.shards.slot(groups.partition_for(group_id))
    assert slot is not None
    return slot.leader_epoch


async def describe(client: AsyncWireClient, group_id: str) -> Message:
    answer = await client.request(DESCRIBE, 5, {"groups": [group_id], "include_authorized_operations": False})
    return answer.groups[0]


async def fetch_error(client: AsyncWireClient, group_id: str) -> int:
    return int((await client.request(OFFSET_FETCH, 8, fetch_body(group_id))).groups[0].error_code)


async def stable_member(client: AsyncWireClient) -> tuple[str, int]:
    """Group "g" Stable with one member, which owns events-0: its member id and generation."""
    first = await client.request(JOIN, 7, join_body())
    joined = await client.request(JOIN, 7, join_body(first.member_id))
    assert joined.error_code == E.NONE
    synced = await sync(client, joined.member_id, joined.generation_id, [(joined.member_id, assignment("events", 0))])
    assert synced.error_code == E.NONE
    return joined.member_id, joined.generation_id


def heartbeat_body(member_id: str, generation: int) -> dict[str, Any]:
    return {"group_id": "g", "generation_id": generation, "member_id": member_id, "group_instance_id": None}


async def test_offsets_and_a_stable_group_survive_an_unload_and_the_next_load(tmp_path: Path) -> None:
    async with serving(tmp_path, group_initial_rebalance_delay_ms="0") as running:
        client = await running.client()
        assert (await _create(client, "events")).error_code == 0
        member_id, generation = await stable_member(client)
        as_member = {"generation_id_or_member_epoch": generation, "member_id": member_id}
        assert committed_error(await client.request(OFFSET_COMMIT, 8, {**commit_body("g", 5), **as_member})) == 0
        groups = running.broker.groups
        partition, epoch = groups.partition_for("g"), leader_epoch(groups, "g")

        assert groups.runtime.unload(partition)
        assert await fetch_error(client, "g") == E.NOT_COORDINATOR
        refused = await client.request(OFFSET_COMMIT, 8, {**commit_body("g", 6), **as_member})
        assert committed_error(refused) == E.NOT_COORDINATOR
        assert (await describe(client, "g")).error_code == E.NOT_COORDINATOR
        beat = await client.request(HEARTBEAT, 4, heartbeat_body(member_id, generation))
        assert beat.error_code == E.NOT_COORDINATOR

        assert groups.runtime.load(partition, epoch)
        assert await fetch_committed(client, "g") == 5
        described = await describe(client, "g")
        assert (described.error_code, described.group_state) == (E.NONE, "Stable")
        assert [m.member_id for m in described.members] == [member_id]
        beat = await client.request(HEARTBEAT, 4, heartbeat_body(member_id, generation))
        assert beat.error_code == E.NONE


async def test_an_unload_answers_a_parked_join_and_a_waiting_commit_not_coordinator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path, group_initial_rebalance_delay_ms="3000") as running:
        client = await running.client()
        assert (await _create(client, "events")).error_code == 0
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("other", 1))) == E.NONE
        groups = running.broker.groups
        partition = groups.partition_for("g")
        joiner, committer = await running.client(), await running.client()
        first = await joiner.request(JOIN, 7, join_body())
        gate = GatedFsync(OFFSETS_TOPIC)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        parked, waiting = Answer(), Answer()
        async with trio.open_nursery() as nursery:
            await joiner.send(JOIN, 7, join_body(first.member_id))  # parked for the rebalance delay
            nursery.start_soon(parked.receive, joiner, JOIN, 7)
            await committer.send(OFFSET_COMMIT, 8, commit_body("other", 2))  # its fsync held
            nursery.start_soon(waiting.receive, committer, OFFSET_COMMIT, 8)
            await gate.wait_entered()
            assert not parked.arrived.is_set() and not waiting.arrived.is_set()
            assert groups.runtime.unload(partition)
            assert (await parked.get()).error_code == E.NOT_COORDINATOR
            assert committed_error(await waiting.get()) == E.NOT_COORDINATOR
            gate.release.set()


async def test_a_loading_shard_answers_coordinator_load_in_progress_until_it_is_loaded(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "events")).error_code == 0
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("g", 3))) == E.NONE
        txn_client = await running.client()
        producer = Producer(txn_client, "tx")
        assert (await producer.init()).error_code == E.NONE
        groups, txns = running.broker.groups, running.broker.txn
        group_partition, txn_partition = groups.partition_for("g"), txns.runtime.partition_for("tx")
        epoch = leader_epoch(groups, "g")
        assert groups.runtime.unload(group_partition) and txns.runtime.unload(txn_partition)

        group_slot = groups.runtime.begin_load(group_partition, epoch)
        txn_slot = txns.runtime.begin_load(txn_partition, epoch)
        assert group_slot is not None and txn_slot is not None
        loading = E.COORDINATOR_LOAD_IN_PROGRESS
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("g", 4))) == loading
        assert await fetch_error(client, "g") == loading
        assert (await producer.init()).error_code == loading
        described = await txn_client.request(DESCRIBE_TXNS, 0, {"transactional_ids": ["tx"]})
        assert described.transaction_states[0].error_code == loading
        listed = await txn_client.request(LIST_TXNS, 0, {"state_filters": [], "producer_id_filters": []})
        assert listed.error_code == loading
        listed = await client.request(LIST, 4, {"states_filter": []})
        assert (listed.error_code, listed.groups) == (loading, [])
        # A Heartbeat is answered NONE while its group loads, as Kafka's coordinator answers it.
        assert (await client.request(HEARTBEAT, 4, heartbeat_body("m", 1))).error_code == E.NONE

        assert groups.runtime.finish_load(group_slot) and txns.runtime.finish_load(txn_slot)
        assert await fetch_committed(client, "g") == 3
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("g", 4))) == E.NONE
        pid = producer.pid
        assert (await producer.init()).error_code == E.NONE and producer.pid == pid  # the id's state came back


async def test_a_transactions_outcome_survives_an_unload_and_the_next_load(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "t", 1)).error_code == 0
        producer = Producer(client, "tx")
        assert (await producer.init()).error_code == E.NONE
        assert (await producer.add("t", 0)).error_code == E.NONE
        assert (await producer.send("t", 0, b"kept")).error_code == E.NONE
        assert await producer.end(commit=True) == E.NONE
        assert await completed(running, client, "tx") == "CompleteCommit"
        txns = running.broker.txn
        partition = txns.runtime.partition_for("tx")
        slot = txns.runtime.shards.slot(partition)
        assert slot is not None

        assert txns.runtime.unload(partition)
        described = await client.request(DESCRIBE_TXNS, 0, {"transactional_ids": ["tx"]})
        assert described.transaction_states[0].error_code == E.NOT_COORDINATOR
        assert await producer.end(commit=False) == E.NOT_COORDINATOR

        assert txns.runtime.load(partition, slot.leader_epoch)
        described = await client.request(DESCRIBE_TXNS, 0, {"transactional_ids": ["tx"]})
        state = described.transaction_states[0]
        assert (state.error_code, state.transaction_state, state.producer_id) == (
            E.NONE,
            "CompleteCommit",
            producer.pid,
        )
        assert consume(await fetch(client, "t", 0, committed=True)) == [b"kept"]


async def test_a_transaction_left_preparing_by_an_unloaded_shard_is_completed_by_the_next_load(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "t", 1)).error_code == 0
        producer = Producer(client, "tx")
        assert (await producer.init()).error_code == E.NONE
        assert (await producer.add("t", 0)).error_code == E.NONE
        assert (await producer.send("t", 0, b"one")).error_code == E.NONE
        running.broker.faults.paused_partitions.add(("t", 0))  # its marker cannot be written
        assert await producer.end(commit=True) == E.NONE
        txns = running.broker.txn
        partition = txns.runtime.partition_for("tx")
        with trio.fail_after(10):  # the first attempt at the marker came back refused
            await txns.markers_answered.wait()
        assert txns.shard_for("tx").txns["tx"].state.display_name == "PrepareCommit"
        slot = txns.runtime.shards.slot(partition)
        assert slot is not None and txns.runtime.unload(partition)

        running.broker.faults.paused_partitions.clear()
        assert txns.runtime.load(partition, slot.leader_epoch)
        assert await completed(running, client, "tx") == "CompleteCommit"
        assert consume(await fetch(client, "t", 0, committed=True)) == [b"one"]


async def test_unloading_one_offsets_shard_leaves_the_other_serving(tmp_path: Path) -> None:
    async with serving(tmp_path, **TWO_PARTITIONS) as running:
        client = await running.client()
        assert (await _create(client, "events")).error_code == 0
        groups = running.broker.groups
        gone, kept = "a", "b"
        assert groups.partition_for(gone) != groups.partition_for(kept)
        for group_id in (gone, kept):
            assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body(group_id, 1))) == E.NONE

        assert groups.runtime.unload(groups.partition_for(gone))
        assert await fetch_error(client, gone) == E.NOT_COORDINATOR
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body(kept, 2))) == E.NONE
        assert await fetch_committed(client, kept) == 2
        listed = await client.request(16, 4, {"states_filter": []})
        assert [g.group_id for g in listed.groups] == [kept]
        assert groups.runtime.shards.partitions() == [groups.partition_for(kept)]
        assert running.broker.txn.runtime.shards.partitions() == []  # __transaction_state not made yet
        assert TRANSACTION_STATE_TOPIC not in running.broker.controller.image.topics


async def test_leadership_arriving_loads_the_shard_in_the_background_while_it_answers_load_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(coordinator_runtime, "LOAD_STEP_RECORDS", 1)  # a turn of the loop per record
    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "events")).error_code == 0
        for offset in range(5):
            assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("g", offset))) == E.NONE
        groups = running.broker.groups
        runtime, partition, epoch = groups.runtime, groups.partition_for("g"), leader_epoch(groups, "g")
        gate = GatedFsync(OFFSETS_TOPIC)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        committer, waiting = await running.client(), Answer()
        loaded = runtime.loaded
        async with trio.open_nursery() as nursery:
            await committer.send(OFFSET_COMMIT, 8, commit_body("other", 1))  # its fsync held
            nursery.start_soon(waiting.receive, committer, OFFSET_COMMIT, 8)
            await gate.wait_entered()
            # A newer leader epoch while the shard serves: loaded anew, the old shard let go.
            assert runtime.schedule_load(partition, epoch + 1)
            assert not runtime.schedule_load(partition, epoch + 1)  # that epoch is loading already
            with pytest.raises(NotActive) as raised:
                runtime.shards.active(partition)
            assert raised.value.error is E.COORDINATOR_LOAD_IN_PROGRESS
            assert committed_error(await waiting.get()) == E.NOT_COORDINATOR
            gate.release.set()
        with trio.fail_after(10):
            await loaded.wait()
        assert leader_epoch(groups, "g") == epoch + 1
        assert await fetch_committed(client, "g") == 4


async def test_the_shard_moves_with_its_partitions_leadership(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "events")).error_code == 0
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("g", 7))) == E.NONE
        groups = running.broker.groups
        replica = running.broker.replicas[(OFFSETS_TOPIC, groups.partition_for("g"))]
        other_node = running.broker.node_id + 1
        nodes = (running.broker.node_id, other_node)

        replica.make_follower(LeaderAndIsr(other_node, 1, 1, nodes, nodes), now_ms=0)
        groups.on_replica_changes(AppliedChanges(became_follower=[replica]))
        assert await fetch_error(client, "g") == E.NOT_COORDINATOR
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("g", 8))) == E.NOT_COORDINATOR
        assert groups.coordinator_node("g") == other_node
        found = await client.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert found.error_code == E.COORDINATOR_NOT_AVAILABLE  # the other node's address is not known here yet

        loaded = groups.runtime.loaded
        replica.make_leader(LeaderAndIsr(running.broker.node_id, 2, 2, nodes, nodes), now_ms=0)
        groups.on_replica_changes(AppliedChanges(became_leader=[replica]))
        with trio.fail_after(10):
            await loaded.wait()
        assert leader_epoch(groups, "g") == 2
        assert await fetch_committed(client, "g") == 7
        found = await client.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert (found.error_code, found.node_id) == (E.NONE, running.broker.node_id)
