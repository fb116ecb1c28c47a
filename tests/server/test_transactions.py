"""Transactions over real sockets, through this project's raw protocol client: the coordinator
APIs, transactional produce, read_committed fetches, transactional offsets, restarts."""

from __future__ import annotations

import heapq
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import trio

from kafkalike.group import OFFSETS_TOPIC
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.testing.wire_client import AsyncWireClient
from kafkalike.txn import TRANSACTION_STATE_TOPIC
from tests.server.conftest import RunningBroker, find_coordinator
from tests.server.conftest import serving as serving_with
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FETCH, FIND_COORDINATOR, INIT_PID = 0, 1, 2, 9, 10, 22
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, WRITE_MARKERS, TXN_OFFSET_COMMIT = 24, 25, 26, 27, 28
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66
SMALL = {"transaction_state_log_num_partitions": "3", "offsets_topic_num_partitions": "3"}


def serving(tmp_path: Path, **overrides: str) -> AbstractAsyncContextManager[RunningBroker]:
    """The shared broker context, with few coordinator partitions unless ``overrides`` say otherwise."""
    return serving_with(tmp_path, **{**SMALL, **overrides})


class Producer:
    """A transactional producer spoken by hand: one transactional id, its producer id and epoch."""

    def __init__(self, client: AsyncWireClient, txn_id: str, timeout_ms: int = 60_000) -> None:
        self.client = client
        self.txn_id = txn_id
        self.timeout_ms = timeout_ms
        self.pid = -1
        self.epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}

    async def init(self) -> Message:
        body = {
            "transactional_id": self.txn_id,
            "transaction_timeout_ms": self.timeout_ms,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        # Retried as clients retry: CONCURRENT_TRANSACTIONS while markers are written, and
        # COORDINATOR_LOAD_IN_PROGRESS while the broker's first producer id block is on its way.
        for _ in range(50):
            response = await self.client.request(INIT_PID, 4, body)
            if response.error_code not in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS):
                break
            await trio.sleep(0.02)
        if response.error_code == E.NONE:
            self.pid, self.epoch = response.producer_id, response.producer_epoch
            self.sequences.clear()
        return response

    async def add(self, topic: str, *partitions: int, version: int = 3) -> Message:
        """AddPartitionsToTxn, tried again while the previous transaction's markers are still
        being written (CONCURRENT_TRANSACTIONS), as clients do."""
        body = {
            "v3_and_below_transactional_id": self.txn_id,
            "v3_and_below_producer_id": self.pid,
            "v3_and_below_producer_epoch": self.epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": list(partitions)}],
        }
        for _ in range(50):
            response = await self.client.request(ADD_PARTITIONS, version, body)
            errors = {
                p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition
            }
            if errors != {E.CONCURRENT_TRANSACTIONS}:
                break
            await trio.sleep(0.02)
        return response

    async def send(self, topic: str, partition: int, *values: bytes, version: int = 9) -> Message:
        seq = self.sequences.get((topic, partition), 0)
        batch = build_batch(
            [Record(value=v) for v in values],
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=seq,
            transactional=True,
            base_timestamp=1_700_000_000_000,
        )
        body = {**_produce_body(topic, partition, batch), "transactional_id": self.txn_id}
        response = await self.client.request(PRODUCE, version, body)
        part = response.responses[0].partition_responses[0]
        if part.error_code == E.NONE:
            self.sequences[(topic, partition)] = seq + len(values)
        return part  # type: ignore[no-any-return]

    async def end(self, commit: bool, version: int = 3) -> int:
        body = {
            "transactional_id": self.txn_id,
            "producer_id": self.pid,
            "producer_epoch": self.epoch,
            "committed": commit,
        }
        response = await self.client.request(END_TXN, version, body)
        return response.error_code  # type: ignore[no-any-return]

    async def add_offsets(self, group: str) -> int:
        body = {
            "transactional_id": self.txn_id,
            "producer_id": self.pid,
            "producer_epoch": self.epoch,
            "group_id": group,
        }
        return (await self.client.request(ADD_OFFSETS, 3, body)).error_code  # type: ignore[no-any-return]

    async def commit_offsets(self, group: str, topic: str, offsets: dict[int, int], version: int = 3) -> list[int]:
        body = {
            "transactional_id": self.txn_id,
            "group_id": group,
            "producer_id": self.pid,
            "producer_epoch": self.epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": o,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                        for p, o in offsets.items()
                    ],
                }
            ],
        }
        response = await self.client.request(TXN_OFFSET_COMMIT, version, body)
        return [p.error_code for p in response.topics[0].partitions]


async def fetch(client: AsyncWireClient, topic: str, partition: int, committed: bool, offset: int = 0) -> Any:
    body = {**_fetch_body(topic, partition, offset), "isolation_level": 1 if committed else 0}
    return (await client.request(FETCH, 12, body)).responses[0].partitions[0]


def consume(part: Any) -> list[bytes]:
    """The values a read_committed consumer keeps from a fetched partition (Kafka's rule: an
    aborted transaction's batches are dropped from its first offset up to its abort marker)."""
    aborted = [(a.first_offset, a.producer_id) for a in (part.aborted_transactions or [])]
    heapq.heapify(aborted)
    aborting: set[int] = set()
    out = []
    blob = part.records or b""
    for pos, header in iter_batches(blob, partial_ok=True):
        if header.producer_id >= 0:
            while aborted and aborted[0][0] <= header.last_offset:
                aborting.add(heapq.heappop(aborted)[1])
            if header.is_control:
                aborting.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborting:
                continue
        if not header.is_control:
            out += [r.value or b"" for r in decode_records(blob, pos, header)]
    return out


async def latest(client: AsyncWireClient, topic: str, committed: bool) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 1 if committed else 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
        ],
    }
    response = await client.request(LIST_OFFSETS, 7, body)
    return response.topics[0].partitions[0].offset  # type: ignore[no-any-return]


# -- the basic flow -----------------------------------------------------------------------------


async def test_commit_and_abort_as_read_committed_and_read_uncommitted_see_them(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "t")
        found = await find_coordinator(running.broker, client, 4, {"key_type": 1, "coordinator_keys": ["tx"]})
        assert found.coordinators[0].error_code == E.NONE
        p = Producer(client, "tx")
        assert (await p.init()).error_code == E.NONE
        assert p.pid >= 0 and p.epoch == 0
        assert (await p.add("t", 0)).results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        assert (await p.send("t", 0, b"c1", b"c2")).error_code == E.NONE
        part = await fetch(client, "t", 0, committed=True)
        assert (part.last_stable_offset, part.high_watermark, consume(part)) == (0, 2, [])
        assert await latest(client, "t", committed=True) == 0
        assert await latest(client, "t", committed=False) == 2
        assert await p.end(commit=True) == E.NONE
        await completed(running, client, "tx")
        assert consume(await fetch(client, "t", 0, committed=True)) == [b"c1", b"c2"]

        await p.add("t", 0)
        await p.send("t", 0, b"a1")
        await p.send("t", 0, b"a2")
        assert await p.end(commit=False) == E.NONE
        await completed(running, client, "tx")
        await p.add("t", 0)
        await p.send("t", 0, b"c3")
        assert await p.end(commit=True) == E.NONE
        await completed(running, client, "tx")
        committed = await fetch(client, "t", 0, committed=True)
        assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(p.pid, 3)]
        assert consume(committed) == [b"c1", b"c2", b"c3"]
        assert committed.last_stable_offset == committed.high_watermark == 8
        uncommitted = await fetch(client, "t", 0, committed=False)
        assert uncommitted.aborted_transactions is None
        assert consume(uncommitted) == [b"c1", b"c2", b"a1", b"a2", b"c3"]
        assert await latest(client, "t", committed=True) == 8


async def test_produce_to_a_partition_not_in_the_transaction_is_refused(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "t", partitions=2)
        p = Producer(client, "tx")
        await p.init()
        await p.add("t", 0)
        assert (await p.send("t", 1, b"x")).error_code == E.INVALID_TXN_STATE
        assert (await p.send("t", 1, b"x", version=11)).error_code == E.TRANSACTION_ABORTABLE
        assert (await p.send("t", 0, b"ok")).error_code == E.NONE
        other = Producer(await running.client(), "tx")
        await other.init()  # fences p and aborts its transaction
        assert (await p.send("t", 0, b"zombie")).error_code == E.INVALID_PRODUCER_EPOCH
        assert await p.end(commit=True) == E.PRODUCER_FENCED
        assert await p.end(commit=True, version=1) == E.INVALID_PRODUCER_EPOCH
        assert consume(await fetch(client, "t", 0, committed=True)) == []


async def test_end_txn_v5_is_refused_without_transactions_v2(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "t")
        p = Producer(client, "tx")
        await p.init()
        await p.add("t", 0)
        assert await p.end(commit=True, version=5) == E.UNSUPPORTED_VERSION
        assert await p.end(commit=True, version=4) == E.NONE


async def test_init_producer_id_errors(tmp_path: Path) -> None:
    async with serving(tmp_path, transaction_max_timeout_ms="10000") as running:
        client = await running.client()
        assert (await Producer(client, "tx", timeout_ms=10_001).init()).error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert (await Producer(client, "", timeout_ms=1000).init()).error_code == E.INVALID_REQUEST


# -- offsets in transactions -------------------------------------------------------------------


async def completed(running: RunningBroker, client: AsyncWireClient, txn_id: str) -> str:
    """The transaction's state as DescribeTransactions shows it once its markers are all written
    (they follow EndTxn's answer): waits on its ``__transaction_state`` partition's appends."""
    tp = (TRANSACTION_STATE_TOPIC, running.broker.txn.runtime.partition_for(txn_id))
    with trio.fail_after(10):
        while True:
            appended = running.broker.waiters.next_progress(tp)  # before the read: an append during it is not missed
            described = await client.request(DESCRIBE_TXNS, 0, {"transactional_ids": [txn_id]})
            found = str(described.transaction_states[0].transaction_state)
            if not found.startswith("Prepare"):
                return found
            await appended.wait()


async def test_transactional_offsets_are_unstable_until_the_commit(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "in", partitions=2)
        await _create(client, "out")
        p = Producer(client, "ctp")
        await p.init()
        await p.add("out", 0)
        await p.send("out", 0, b"derived")
        assert await p.commit_offsets("g", "in", {0: 5}) == [E.INVALID_TXN_STATE]  # no AddOffsetsToTxn yet
        assert await p.add_offsets("g") == E.NONE
        assert await p.commit_offsets("g", "in", {0: 5, 1: 7}) == [E.NONE, E.NONE]

        async def fetched(stable: bool) -> list[tuple[int, int, int]]:
            body = {"group_id": "g", "topics": [{"name": "in", "partition_indexes": [0, 1]}], "require_stable": stable}
            response = await client.request(OFFSET_FETCH, 7, body)
            return [(x.partition_index, x.committed_offset, x.error_code) for x in response.topics[0].partitions]

        assert await fetched(stable=True) == [(0, -1, E.UNSTABLE_OFFSET_COMMIT), (1, -1, E.UNSTABLE_OFFSET_COMMIT)]
        assert await fetched(stable=False) == [(0, -1, 0), (1, -1, 0)]
        assert await p.end(commit=True) == E.NONE
        assert await fetched(stable=True) == [(0, 5, 0), (1, 7, 0)]
        assert await completed(running, client, "ctp") == "CompleteCommit"


async def test_aborted_transactional_offsets_are_dropped(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "in")
        p = Producer(client, "ctp")
        await p.init()
        await p.add_offsets("g")
        assert await p.commit_offsets("g", "in", {0: 9}) == [E.NONE]
        assert await p.end(commit=False) == E.NONE
        body = {"group_id": "g", "topics": [{"name": "in", "partition_indexes": [0]}], "require_stable": True}
        response = await client.request(OFFSET_FETCH, 7, body)
        assert (response.topics[0].partitions[0].committed_offset, response.topics[0].partitions[0].error_code) == (
            -1,
            0,
        )


# -- admin APIs ---------------------------------------------------------------------------------


async def test_describe_and_list_transactions_and_producers(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "t", partitions=2)
        p = Producer(client, "tx", timeout_ms=30_000)
        await p.init()
        await p.add("t", 1, 0)
        await p.send("t", 1, b"x", b"y")
        described = await client.request(DESCRIBE_TXNS, 0, {"transactional_ids": ["tx", "nope"]})
        tx, nope = described.transaction_states
        assert (tx.error_code, tx.transaction_state, tx.producer_id, tx.transaction_timeout_ms) == (
            0,
            "Ongoing",
            p.pid,
            30_000,
        )
        assert [(t.topic, list(t.partitions)) for t in tx.topics] == [("t", [0, 1])]
        assert nope.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        listed = await client.request(
            LIST_TXNS, 1, {"state_filters": ["Ongoing", "Weird"], "producer_id_filters": [], "duration_filter": -1}
        )
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [("tx", "Ongoing")]
        assert list(listed.unknown_state_filters) == ["Weird"]
        producers = await client.request(
            DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "t", "partition_indexes": [1, 0, 9]}]}
        )
        one, zero, missing = producers.topics[0].partitions
        (state,) = one.active_producers
        assert (state.producer_id, state.producer_epoch, state.last_sequence, state.current_txn_start_offset) == (
            p.pid,
            p.epoch,
            1,
            0,
        )
        assert zero.active_producers == [] and missing.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        await p.end(commit=False)
        await completed(running, client, "tx")
        producers = await client.request(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "t", "partition_indexes": [1]}]})
        assert producers.topics[0].partitions[0].active_producers[0].current_txn_start_offset == -1


async def test_write_txn_markers_is_served(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "t")
        p = Producer(client, "tx")
        await p.init()
        await p.add("t", 0)
        await p.send("t", 0, b"x")
        body = {
            "markers": [
                {
                    "producer_id": p.pid,
                    "producer_epoch": p.epoch - 1,  # an older epoch: refused
                    "transaction_result": True,
                    "topics": [{"name": "t", "partition_indexes": [0]}, {"name": "nope", "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        }
        response = await client.request(WRITE_MARKERS, 1, body)
        errors = {(t.name, x.partition_index): x.error_code for t in response.markers[0].topics for x in t.partitions}
        assert errors == {("t", 0): E.INVALID_PRODUCER_EPOCH, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        body["markers"][0]["producer_epoch"] = p.epoch
        response = await client.request(WRITE_MARKERS, 1, body)
        assert response.markers[0].topics[0].partitions[0].error_code == E.NONE
        assert consume(await fetch(client, "t", 0, committed=True)) == [b"x"]


# -- time and restarts ---------------------------------------------------------------------------


async def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(tmp_path: Path) -> None:
    overrides = {"transaction_abort_timed_out_transaction_cleanup_interval_ms": "50"}
    async with serving(tmp_path, **overrides) as running:
        client = await running.client()
        await _create(client, "t")
        p = Producer(client, "tx", timeout_ms=200)
        await p.init()
        await p.add("t", 0)
        await p.send("t", 0, b"doomed")
        with trio.fail_after(10):
            while (await fetch(client, "t", 0, committed=True)).last_stable_offset == 0:
                await trio.sleep(0.05)
        assert consume(await fetch(client, "t", 0, committed=True)) == []
        assert await p.end(commit=True) == E.PRODUCER_FENCED
        assert (await p.send("t", 0, b"late")).error_code == E.INVALID_PRODUCER_EPOCH


async def test_an_open_transaction_survives_a_restart(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "t")
        p = Producer(client, "tx")
        await p.init()
        await p.add("t", 0)
        await p.send("t", 0, b"before")
        pid, epoch = p.pid, p.epoch
    async with serving(tmp_path) as running:
        client = await running.client()
        p = Producer(client, "tx")
        p.pid, p.epoch, p.sequences = pid, epoch, {("t", 0): 1}
        assert (await fetch(client, "t", 0, committed=True)).last_stable_offset == 0
        await p.send("t", 0, b"after")
        assert await p.end(commit=True) == E.NONE
        await completed(running, client, "tx")
        assert consume(await fetch(client, "t", 0, committed=True)) == [b"before", b"after"]


async def test_a_commit_cut_off_by_a_crash_completes_at_start_up(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "t", partitions=2)
        p = Producer(client, "tx")
        await p.init()
        await p.add("t", 0, 1)
        await p.add_offsets("g")
        await p.send("t", 0, b"zero")
        await p.send("t", 1, b"one")
        await p.commit_offsets("g", "t", {0: 1})
        running.broker.faults.paused_partitions.add(("t", 1))  # its marker cannot be written
        assert await p.end(commit=True) == E.NONE
        txn = running.broker.txn
        with trio.fail_after(10):  # the markers follow EndTxn's answer: until the coordinator has theirs
            while (state := txn.shard_for("tx").txns["tx"]).partitions != {("t", 1)}:
                await txn.markers_answered.wait()
        assert consume(await fetch(client, "t", 0, committed=True)) == [b"zero"]
        assert (await fetch(client, "t", 1, committed=False)).last_stable_offset == -1  # paused
        assert state.state.display_name == "PrepareCommit"
    # The broker stopped with the transaction half-way: its next start finishes it.
    async with serving(tmp_path) as running:
        client = await running.client()
        txn = running.broker.txn
        with trio.fail_after(10):  # the loaded shard sends the markers it found due, as Kafka's does
            while txn.shard_for("tx").txns["tx"].state.display_name != "CompleteCommit":
                await txn.markers_answered.wait()
        assert consume(await fetch(client, "t", 1, committed=True)) == [b"one"]
        assert consume(await fetch(client, "t", 0, committed=True)) == [b"zero"]
        body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": True}
        response = await client.request(OFFSET_FETCH, 7, body)
        assert response.topics[0].partitions[0].committed_offset == 1
        topics = running.broker.controller.image.topics
        assert TRANSACTION_STATE_TOPIC in topics and OFFSETS_TOPIC in topics
        assert topics[TRANSACTION_STATE_TOPIC].partitions == 3


async def test_add_partitions_refuses_unknown_and_internal_topics_as_a_whole(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        await _create(client, "t")
        p = Producer(client, "tx")
        await p.init()
        body = {
            "v3_and_below_transactional_id": "tx",
            "v3_and_below_producer_id": p.pid,
            "v3_and_below_producer_epoch": p.epoch,
            "v3_and_below_topics": [
                {"name": "t", "partitions": [0]},
                {"name": "missing", "partitions": [0]},
                {"name": OFFSETS_TOPIC, "partitions": [0]},
            ],
        }
        response = await client.request(ADD_PARTITIONS, 3, body)
        errors = {
            (t.name, r.partition_index): r.partition_error_code
            for t in response.results_by_topic_v3_and_below
            for r in t.results_by_partition
        }
        assert errors == {
            ("t", 0): E.OPERATION_NOT_ATTEMPTED,
            ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
            (OFFSETS_TOPIC, 0): E.TOPIC_AUTHORIZATION_FAILED,
        }
        described = await client.request(DESCRIBE_TXNS, 0, {"transactional_ids": ["tx"]})
        assert described.transaction_states[0].transaction_state == "Empty"
        batched = {
            "transactions": [
                {
                    "transactional_id": "tx",
                    "producer_id": p.pid,
                    "producer_epoch": p.epoch,
                    "verify_only": False,
                    "topics": [{"name": "t", "partitions": [0]}],
                },
                {
                    "transactional_id": "tx",
                    "producer_id": p.pid,
                    "producer_epoch": p.epoch,
                    "verify_only": True,
                    "topics": [{"name": "t", "partitions": [0]}],
                },
            ]
        }
        response = await client.request(ADD_PARTITIONS, 4, batched)
        assert response.error_code == 0
        codes = [
            r.topic_results[0].results_by_partition[0].partition_error_code for r in response.results_by_transaction
        ]
        assert codes == [E.NONE, E.NONE]


async def test_verification_can_be_turned_off(tmp_path: Path) -> None:
    async with serving(tmp_path, transaction_partition_verification_enable="false") as running:
        client = await running.client()
        await _create(client, "t")
        p = Producer(client, "tx")
        await p.init()
        # Not added to the transaction, yet accepted (a hanging transaction until it times out).
        assert (await p.send("t", 0, b"unverified")).error_code == E.NONE
        assert (await fetch(client, "t", 0, committed=True)).last_stable_offset == 0
