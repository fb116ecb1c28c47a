"""The coordinators' and the metadata log's fsyncs run on worker threads: while one waits for a
slow disk, other clients are answered, and the request that wrote is answered only once its
records are durable. A failed fsync cuts the records, answers the coordinator's error
(NOT_COORDINATOR; KAFKA_STORAGE_ERROR for topic changes), reloads the coordinator from what is
durable, and the next write works."""

from __future__ import annotations

import dataclasses
import errno
import os
import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkalike.group import OFFSETS_TOPIC
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.protocol.records import decode_records, iter_batches
from kafkalike.testing.wire_client import AsyncWireClient
from kafkalike.txn import TRANSACTION_STATE_TOPIC
from tests.server.conftest import RunningBroker
from tests.server.conftest import serving as serving_with
from tests.server.test_broker_basics import _create, _fetch_body
from tests.server.test_groups import assignment, subscription
from tests.server.test_transactions import Producer

HOLD_S = 5.0  # the longest a gated fsync waits for its release
METADATA_DIR = "__cluster_metadata"
SMALL = {"offsets_topic_num_partitions": "1", "transaction_state_log_num_partitions": "1"}
API_VERSIONS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 18, 3, 8, 9, 10
JOIN, SYNC, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 11, 14, 19, 20, 37


class GatedFsync:
    """``os.fsync`` that holds the syncs of files and directories whose path contains
    ``directory`` until ``release`` is set (at most HOLD_S), then fails the first ``failures``
    of them with EIO; records for each whether it ran on the event loop's thread."""

    def __init__(self, directory: str, failures: int = 0) -> None:
        self.real: Callable[[int], None] = os.fsync
        self.directory = directory
        self.failures = failures
        self.failed = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        self.on_event_loop: list[bool] = []
        self._lock = threading.Lock()

    def fsync(self, fd: int) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        if self.directory in path:
            with self._lock:
                self.on_event_loop.append(threading.current_thread() is threading.main_thread())
            self.entered.set()
            self.release.wait(HOLD_S)
            with self._lock:
                if self.failures:
                    self.failures -= 1
                    self.failed += 1
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.real(fd)

    def arm(self, failures: int) -> None:
        """From here on, the next ``failures`` gated fsyncs fail."""
        with self._lock:
            self.failures = failures

    async def wait_entered(self) -> None:
        await trio.to_thread.run_sync(self.entered.wait, HOLD_S)
        assert self.entered.is_set(), "no fsync of the gated directory began"


def serving(tmp_path: Path, **overrides: str) -> AbstractAsyncContextManager[RunningBroker]:
    """The shared broker context, with one partition per coordinator unless ``overrides`` say otherwise."""
    return serving_with(tmp_path, **{**SMALL, **overrides})


class Answer:
    """A request's answer, received by a task of its own, so a test can see that it has not come yet."""

    def __init__(self) -> None:
        self.message: Message | None = None
        self.arrived = trio.Event()

    async def receive(self, client: AsyncWireClient, api_key: int, version: int) -> None:
        _, self.message = await client.receive(api_key, version)
        self.arrived.set()

    async def get(self) -> Message:
        with trio.fail_after(HOLD_S * 2):
            await self.arrived.wait()
        assert self.message is not None
        return self.message


async def others_are_answered(client: AsyncWireClient) -> None:
    """ApiVersions and Metadata from another client, answered long before a held fsync returns."""
    with trio.fail_after(HOLD_S / 2):
        versions = await client.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert versions.error_code == 0
        metadata = await client.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
        assert metadata.brokers


def commit_body(group: str, offset: int, topic: str = "events") -> dict[str, Any]:
    partition = {
        "partition_index": 0,
        "committed_offset": offset,
        "committed_leader_epoch": -1,
        "committed_metadata": "",
    }
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [partition]}],
    }


def committed_error(answer: Message) -> int:
    return int(answer.topics[0].partitions[0].error_code)


def fetch_body(group: str) -> dict[str, Any]:
    return {
        "groups": [{"group_id": group, "topics": [{"name": "events", "partition_indexes": [0]}]}],
        "require_stable": False,
    }


async def fetch_committed(client: AsyncWireClient, group: str) -> int:
    answer = await client.request(OFFSET_FETCH, 8, fetch_body(group))
    return int(answer.groups[0].topics[0].partitions[0].committed_offset)


async def with_offsets_topic(running: RunningBroker) -> AsyncWireClient:
    """Topic "events" and ``__consumer_offsets`` made, group "g" committed at offset 1."""
    client = await running.client()
    assert (await _create(client, "events")).error_code == 0
    assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("g", 1))) == 0
    return client


# -- OffsetCommit -----------------------------------------------------------------------------


async def test_an_offset_commit_is_answered_once_its_fsync_on_a_worker_thread_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as running:
        other = await with_offsets_topic(running)
        writer, reader = await running.client(), await running.client()
        gate = GatedFsync(OFFSETS_TOPIC)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        commit, fetch = Answer(), Answer()
        async with trio.open_nursery() as nursery:
            await writer.send(OFFSET_COMMIT, 8, commit_body("g", 2))
            nursery.start_soon(commit.receive, writer, OFFSET_COMMIT, 8)
            await gate.wait_entered()
            await others_are_answered(other)
            await reader.send(OFFSET_FETCH, 8, fetch_body("g"))  # waits: the commit is not durable yet
            nursery.start_soon(fetch.receive, reader, OFFSET_FETCH, 8)
            await others_are_answered(other)
            assert not commit.arrived.is_set() and not fetch.arrived.is_set()
            gate.release.set()
            assert committed_error(await commit.get()) == 0
            assert (await fetch.get()).groups[0].topics[0].partitions[0].committed_offset == 2
        assert gate.on_event_loop and not any(gate.on_event_loop)


async def test_a_failed_commit_fsync_answers_not_coordinator_reloads_and_the_next_commit_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as running:
        client = await with_offsets_topic(running)
        first, second = await running.client(), await running.client()
        broker = running.broker
        plog = broker.partitions[(OFFSETS_TOPIC, 0)].log
        durable_end = plog.log_end_offset
        gate = GatedFsync(OFFSETS_TOPIC, failures=1)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        refused, cut_too = Answer(), Answer()
        async with trio.open_nursery() as nursery:
            await first.send(OFFSET_COMMIT, 8, commit_body("g", 2))
            nursery.start_soon(refused.receive, first, OFFSET_COMMIT, 8)
            await gate.wait_entered()
            # Appended while the first one's fsync is on its thread: the cut takes it too.
            await second.send(OFFSET_COMMIT, 8, commit_body("fresh", 7))
            nursery.start_soon(cut_too.receive, second, OFFSET_COMMIT, 8)
            await others_are_answered(client)
            gate.release.set()
            assert committed_error(await refused.get()) == E.NOT_COORDINATOR
            assert committed_error(await cut_too.get()) == E.NOT_COORDINATOR
        assert gate.failed == 1
        assert plog.log_end_offset == durable_end  # cut back to what was durable
        assert await fetch_committed(client, "g") == 1  # the commit from before holds, the failed one is gone
        assert await fetch_committed(client, "fresh") == -1
        listed = await client.request(16, 4, {"states_filter": []})
        assert [g.group_id for g in listed.groups] == ["g"]
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("g", 3))) == 0
        assert await fetch_committed(client, "g") == 3
        assert not any(gate.on_event_loop)

    async with serving(tmp_path, **SMALL) as reopened:  # the log holds what was answered, nothing else
        offsets = reopened.broker.groups.shard_for("g").offsets
        assert offsets.get("g", "events", 0).committed_offset == 3  # type: ignore[union-attr]
        assert offsets.get("fresh", "events", 0) is None


# -- JoinGroup / SyncGroup --------------------------------------------------------------------


def join_body(member_id: str = "", instance: str | None = "static-1") -> dict[str, Any]:
    return {
        "group_id": "grp",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 5_000,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription("events")}],
    }


def sync_body(member_id: str, generation: int, instance: str | None = "static-1") -> dict[str, Any]:
    return {
        "group_id": "grp",
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": member_id, "assignment": assignment("events", 0)}],
    }


async def stable_static_group(client: AsyncWireClient) -> Message:
    """Group "grp" Stable with one static member; its JoinGroup answer."""
    joined = await client.request(JOIN, 7, join_body())
    assert joined.error_code == 0
    synced = await client.request(SYNC, 5, sync_body(joined.member_id, joined.generation_id))
    assert synced.error_code == 0
    return joined


async def test_a_static_member_rejoining_is_answered_once_its_group_record_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path, group_initial_rebalance_delay_ms="0") as running:
        other = await with_offsets_topic(running)
        member = await running.client()
        first = await stable_static_group(member)
        gate = GatedFsync(OFFSETS_TOPIC)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        rejoin = Answer()
        async with trio.open_nursery() as nursery:
            await member.send(JOIN, 7, join_body())  # a new member id for the instance: persisted (KIP-345)
            nursery.start_soon(rejoin.receive, member, JOIN, 7)
            await gate.wait_entered()
            await others_are_answered(other)
            assert not rejoin.arrived.is_set()
            gate.release.set()
            answer = await rejoin.get()
        assert answer.error_code == 0 and answer.member_id != first.member_id
        assert gate.on_event_loop and not any(gate.on_event_loop)


async def test_a_failed_sync_group_fsync_answers_not_coordinator_and_the_group_forms_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path, group_initial_rebalance_delay_ms="0") as running:
        other = await with_offsets_topic(running)
        member = await running.client()
        joined = await member.request(JOIN, 7, join_body())
        assert joined.error_code == 0
        gate = GatedFsync(OFFSETS_TOPIC, failures=1)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        synced = Answer()
        async with trio.open_nursery() as nursery:
            await member.send(SYNC, 5, sync_body(joined.member_id, joined.generation_id))
            nursery.start_soon(synced.receive, member, SYNC, 5)
            await gate.wait_entered()
            await others_are_answered(other)
            gate.release.set()
            assert (await synced.get()).error_code == E.NOT_COORDINATOR
        # The assignment never became durable: the reloaded group does not know it; it forms again.
        assert (await stable_static_group(member)).error_code == 0
        assert await fetch_committed(other, "g") == 1


async def test_a_failed_fsync_on_one_offsets_partition_leaves_a_join_parked_on_another_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overrides = {"offsets_topic_num_partitions": "2", "group_initial_rebalance_delay_ms": "500"}
    async with serving(tmp_path, **overrides) as running:
        client = await running.client()
        assert (await _create(client, "events")).error_code == 0
        groups = running.broker.groups
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("b", 1))) == 0
        parked_partition, cut_partition = groups.partition_for("a"), groups.partition_for("b")
        assert parked_partition != cut_partition
        gate = GatedFsync(f"{OFFSETS_TOPIC}-{cut_partition}/", failures=1)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        member, committer = await running.client(), await running.client()
        joined, refused = Answer(), Answer()
        async with trio.open_nursery() as nursery:
            await member.send(JOIN, 7, {**join_body(), "group_id": "a"})  # parked for the rebalance delay
            nursery.start_soon(joined.receive, member, JOIN, 7)
            await committer.send(OFFSET_COMMIT, 8, commit_body("b", 2))
            nursery.start_soon(refused.receive, committer, OFFSET_COMMIT, 8)
            await gate.wait_entered()
            gate.release.set()
            assert committed_error(await refused.get()) == E.NOT_COORDINATOR
            assert (await joined.get()).error_code == 0  # its partition was not reloaded
        assert await fetch_committed(client, "b") == 1


# -- transactions -----------------------------------------------------------------------------


async def open_transaction(running: RunningBroker) -> Producer:
    client = await running.client()
    assert (await _create(client, "events")).error_code == 0
    producer = Producer(client, "txn-1")
    assert (await producer.init()).error_code == 0
    assert (await producer.add("events", 0)).results_by_topic_v3_and_below[0].results_by_partition[
        0
    ].partition_error_code == 0
    assert (await producer.send("events", 0, b"a", b"b")).error_code == 0
    return producer


def control_batches(running: RunningBroker) -> int:
    plog = running.broker.partitions[("events", 0)].log
    data = plog.read_bytes(0, 1 << 20)
    return sum(1 for _, header in iter_batches(data) if header.is_control)


async def until_committed(running: RunningBroker, client: AsyncWireClient, values: list[bytes]) -> None:
    """Until a read_committed fetch returns ``values`` (the markers are written after EndTxn is answered)."""
    tp = ("events", 0)
    with trio.fail_after(HOLD_S):
        while True:
            appended = running.broker.waiters.next_progress(tp)  # before the read: an append during it is not missed
            if await committed_values(client) == values:
                return
            await appended.wait()


async def committed_values(client: AsyncWireClient) -> list[bytes]:
    body = {**_fetch_body("events", 0, 0), "isolation_level": 1}
    answer = await client.request(1, 12, body)
    data = bytes(answer.responses[0].partitions[0].records or b"")
    return [r.value or b"" for pos, h in iter_batches(data) if not h.is_control for r in decode_records(data, pos, h)]


async def test_end_txn_is_answered_once_prepare_commit_is_durable_and_markers_follow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as running:
        producer = await open_transaction(running)
        other = await running.client()
        gate = GatedFsync(TRANSACTION_STATE_TOPIC)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        ended = Answer()
        body = {"transactional_id": "txn-1", "producer_id": producer.pid, "producer_epoch": producer.epoch}
        async with trio.open_nursery() as nursery:
            await producer.client.send(26, 3, {**body, "committed": True})
            nursery.start_soon(ended.receive, producer.client, 26, 3)
            await gate.wait_entered()
            await others_are_answered(other)
            assert not ended.arrived.is_set()
            assert control_batches(running) == 0  # no marker before PrepareCommit is durable
            gate.release.set()
            assert (await ended.get()).error_code == 0
        await until_committed(running, other, [b"a", b"b"])
        assert gate.on_event_loop and not any(gate.on_event_loop)


async def test_a_failed_prepare_commit_fsync_answers_not_coordinator_and_a_retry_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as running:
        producer = await open_transaction(running)
        other = await running.client()
        gate = GatedFsync(TRANSACTION_STATE_TOPIC, failures=1)
        gate.release.set()
        monkeypatch.setattr(os, "fsync", gate.fsync)
        assert await producer.end(True) == E.NOT_COORDINATOR
        assert gate.failed == 1
        state = running.broker.txn.shard_for("txn-1").txns["txn-1"]
        assert state.state.display_name == "Ongoing"  # reloaded: PrepareCommit was never durable
        assert control_batches(running) == 0
        assert await producer.end(True) == 0  # the client's retry
        await until_committed(running, other, [b"a", b"b"])
        assert control_batches(running) == 1


# -- the metadata log -------------------------------------------------------------------------


def _create_body(name: str) -> dict[str, Any]:
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    return {"topics": [topic], "timeout_ms": 5000, "validate_only": False}


def _delete_body(name: str) -> dict[str, Any]:
    return {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "timeout_ms": 5000}


def _grow_body(name: str, count: int) -> dict[str, Any]:
    return {"topics": [{"name": name, "count": count, "assignments": None}], "timeout_ms": 5000, "validate_only": False}


# (setup topic or None, api key, version, body, what Metadata shows of "meta" before / after the fsync)
METADATA_CASES = {
    "CreateTopics": (None, CREATE_TOPICS, 7, _create_body("meta"), (E.UNKNOWN_TOPIC_OR_PARTITION, 0), (0, 1)),
    "CreatePartitions": ("meta", CREATE_PARTITIONS, 3, _grow_body("meta", 3), (0, 1), (0, 3)),
    "DeleteTopics": ("meta", DELETE_TOPICS, 6, _delete_body("meta"), (0, 1), (E.UNKNOWN_TOPIC_OR_PARTITION, 0)),
}
RESULTS = {CREATE_TOPICS: "topics", DELETE_TOPICS: "responses", CREATE_PARTITIONS: "results"}


async def meta_topic(client: AsyncWireClient) -> tuple[int, int]:
    answer = await client.request(METADATA, 12, {"topics": [{"name": "meta"}], "allow_auto_topic_creation": False})
    return answer.topics[0].error_code, len(answer.topics[0].partitions)


@pytest.mark.parametrize("case", METADATA_CASES)
async def test_a_topic_change_is_applied_and_answered_once_its_metadata_fsync_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    setup, api_key, version, body, before, after = METADATA_CASES[case]
    async with serving(tmp_path) as running:
        writer, other = await running.client(), await running.client()
        if setup is not None:
            assert (await _create(other, setup)).error_code == 0
        gate = GatedFsync(METADATA_DIR)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        changed = Answer()
        async with trio.open_nursery() as nursery:
            await writer.send(api_key, version, body)
            nursery.start_soon(changed.receive, writer, api_key, version)
            await gate.wait_entered()
            await others_are_answered(other)
            with trio.fail_after(HOLD_S / 2):
                assert await meta_topic(other) == before  # not applied before it is durable
            assert not changed.arrived.is_set()
            gate.release.set()
            answer = await changed.get()
        assert [r.error_code for r in getattr(answer, RESULTS[api_key])] == [0]
        assert await meta_topic(other) == after
        assert gate.on_event_loop and not any(gate.on_event_loop)


async def test_a_failed_metadata_fsync_is_written_again_and_an_internal_topic_behind_it_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quorum writes its log again after a failed fsync (nothing unflushed counts as
    written): the change is answered once durable, and what queued behind it follows."""
    async with serving(tmp_path, **SMALL) as running:
        writer, finder, other = await running.client(), await running.client(), await running.client()
        gate = GatedFsync(METADATA_DIR, failures=1)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        created, found = Answer(), Answer()
        async with trio.open_nursery() as nursery:
            await writer.send(CREATE_TOPICS, 7, _create_body("meta"))
            nursery.start_soon(created.receive, writer, CREATE_TOPICS, 7)
            await gate.wait_entered()
            # FindCoordinator asks for __consumer_offsets in the background and answers at once;
            # the topic is a metadata operation that waits its turn behind the held one.
            await finder.send(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
            nursery.start_soon(found.receive, finder, FIND_COORDINATOR, 3)
            await others_are_answered(other)
            assert (await found.get()).error_code == E.COORDINATOR_NOT_AVAILABLE
            assert await meta_topic(other) == (E.UNKNOWN_TOPIC_OR_PARTITION, 0)  # not applied before it is durable
            assert not created.arrived.is_set()
            gate.release.set()
            with trio.fail_after(HOLD_S):
                assert (await created.get()).topics[0].error_code == 0
        assert gate.failed == 1
        await running.broker.wait_internal_topics()
        assert (await finder.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})).error_code == 0
        assert await meta_topic(other) == (0, 1)
        assert not any(gate.on_event_loop)

    async with serving(tmp_path, **SMALL) as restarted:
        topics = restarted.broker.publisher.image.topics_by_name
        assert sorted(topics) == [OFFSETS_TOPIC, "meta"]


# -- no disk, no thread -----------------------------------------------------------------------


async def test_an_in_memory_broker_waits_for_no_thread_for_coordinator_or_metadata_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path, ephemeral=True, **SMALL) as running:
        real_run_sync = trio.to_thread.run_sync
        threads: list[str] = []

        async def run_sync(fn: Callable[..., object], *args: object, **kwargs: object) -> object:
            threads.append(getattr(fn, "__qualname__", repr(fn)))
            return await real_run_sync(fn, *args, **kwargs)  # type: ignore[arg-type]

        client = await with_offsets_topic(running)  # topics made before the count starts
        producer = await open_transaction_on(running, client)
        monkeypatch.setattr(trio.to_thread, "run_sync", run_sync)
        assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body("g", 4))) == 0
        assert await fetch_committed(client, "g") == 4
        assert await producer.end(True) == 0
        assert (await client.request(DELETE_TOPICS, 6, _delete_body("events"))).responses[0].error_code == 0
        assert threads == []  # no fsync, no file work: nothing for a worker thread
        monkeypatch.undo()


async def open_transaction_on(running: RunningBroker, client: AsyncWireClient) -> Producer:
    producer = Producer(client, "txn-mem")
    assert (await producer.init()).error_code == 0
    assert (await producer.add("events", 0)).results_by_topic_v3_and_below[0].results_by_partition[
        0
    ].partition_error_code == 0
    assert (await producer.send("events", 0, b"m")).error_code == 0
    return producer


# -- a real client ----------------------------------------------------------------------------


async def test_kafka_python_finds_the_coordinator_again_after_a_failed_commit_and_reads_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "events")).error_code == 0
        broker = running.broker
        lookups: list[int] = []
        find = broker.handlers[FIND_COORDINATOR]

        async def counted(ctx: Any, request: Message) -> Any:
            lookups.append(ctx.version)
            return await find.fn(ctx, request)

        broker.handlers[FIND_COORDINATOR] = dataclasses.replace(find, fn=counted)
        gate = GatedFsync(OFFSETS_TOPIC)
        gate.release.set()
        monkeypatch.setattr(os, "fsync", gate.fsync)

        def commit_twice() -> tuple[int | None, int | None, int]:
            consumer = KafkaConsumer(
                bootstrap_servers=f"{running.host}:{running.port}",
                group_id="kp",
                enable_auto_commit=False,
                request_timeout_ms=10_000,
            )
            try:
                tp = TopicPartition("events", 0)
                consumer.assign([tp])
                consumer.commit({tp: OffsetAndMetadata(3, "", -1)})
                before = consumer.committed(tp)
                lookups_before = len(lookups)
                gate.arm(1)  # the next fsync of __consumer_offsets fails
                consumer.commit({tp: OffsetAndMetadata(5, "", -1)})  # NOT_COORDINATOR, then again
                return before, consumer.committed(tp), len(lookups) - lookups_before
            finally:
                consumer.close()

        before, after, lookups_after_fault = await trio.to_thread.run_sync(commit_twice)
        assert (before, after) == (3, 5)
        assert gate.failed == 1  # the first try of the second commit was refused
        assert lookups_after_fault >= 1  # the client found its coordinator again before retrying
        assert await fetch_committed(client, "kp") == 5
