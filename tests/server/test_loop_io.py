"""Nothing blocks the event loop: a broker on a data directory, driven through rolls, retention
by size and by time, compaction, group commits, a transaction, topic creation and deletion and a
clean shutdown (and flushes, DeleteRecords, an aborted transaction), makes no blocking file-system call on its loop's thread (the checker of
kafkalike.testing.loop_blocking, whose negative control is in tests/testing/test_loop_blocking.py).

Start-up (``Broker.open``, before the broker serves anyone) is left out."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import trio

from kafkalike.protocol.records import Record, build_batch, iter_batches
from kafkalike.server.node import Node
from kafkalike.testing.loop_blocking import LoopBlockingCalls
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import make_config
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body
from tests.server.test_disk_errors import _commit_body
from tests.server.test_transactions import Producer

ALLOWED = {
    # Kafka's TransactionIndex also creates its file on the request thread, at the first aborted
    # transaction of a segment: one open (and the read of an empty index) per segment holding one.
    "kafkalike.log.txn_index.TransactionIndex.append": "first aborted transaction of a segment",
    # Not yet off the loop: retention and DeleteRecords list the partition's directory for the
    # producer snapshots below the new log start (a listing of one directory per deletion).
    "kafkalike.log.loader.snapshot_offsets": "producer snapshots found by listing the directory",
}
WAIT_S = 20
SMALL_SEGMENTS = {"internal_segment_bytes": "1024", "file_delete_delay_ms": "0"}
ZERO_UUID = uuid.UUID(int=0)


COORDINATOR_NOT_AVAILABLE = 15


def _ok(answer: Any) -> None:
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == 0, part


async def _coordinator_error(client: AsyncWireClient, group: str) -> int:
    """FindCoordinator's answer for the group, asked again while its topic is being made."""
    with trio.fail_after(WAIT_S):
        while True:
            found = await client.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
            if found.coordinators[0].error_code != COORDINATOR_NOT_AVAILABLE:
                return int(found.coordinators[0].error_code)
            await trio.sleep(0.02)


async def _partition(client: AsyncWireClient, topic: str, offset: int = 0) -> Any:
    return (await client.request(1, 12, _fetch_body(topic, 0, offset))).responses[0].partitions[0]


async def _log_start(client: AsyncWireClient, topic: str) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}
        ],
    }
    return (await client.request(2, 7, body)).topics[0].partitions[0].offset  # type: ignore[no-any-return]


async def _wait_until_log_start(client: AsyncWireClient, topic: str, at_least: int) -> None:
    with trio.fail_after(WAIT_S):
        while await _log_start(client, topic) < at_least:
            await trio.sleep(0.02)


async def _read_from_log_start(client: AsyncWireClient, topic: str) -> Any:
    # Retention may still be deleting segments: a log start read just before it moved is out of
    # range by the time the fetch arrives, so read again from the new start.
    with trio.fail_after(WAIT_S):
        while True:
            readable = await _partition(client, topic, await _log_start(client, topic))
            if readable.error_code != 1:  # OFFSET_OUT_OF_RANGE
                return readable


async def _drive(client: AsyncWireClient) -> None:
    # Rolls, then retention by size deleting the oldest segments.
    assert (await _create(client, "rolling", retention_bytes="4096", **SMALL_SEGMENTS)).error_code == 0
    for i in range(60):
        _ok(await client.request(0, 9, _produce_body("rolling", 0, build_batch([Record(value=b"r%03d" % i * 40)]))))
    await _wait_until_log_start(client, "rolling", 1)
    readable = await _read_from_log_start(client, "rolling")
    assert readable.error_code == 0 and readable.records

    # Retention by time deleting every segment, the active one after a roll.
    assert (await _create(client, "expiring", retention_ms="60000", **SMALL_SEGMENTS)).error_code == 0
    hour_ago = int(time.time() * 1000) - 3_600_000
    for i in range(20):
        batch = build_batch([Record(value=b"e%03d" % i * 40)], base_timestamp=hour_ago)
        _ok(await client.request(0, 9, _produce_body("expiring", 0, batch)))
    await _wait_until_log_start(client, "expiring", 20)

    # A compacted topic, cleaned in the background.
    assert (
        await _create(
            client,
            "compacted",
            cleanup_policy="compact",
            internal_segment_bytes="2048",
            min_cleanable_dirty_ratio="0.01",
            delete_retention_ms="0",
            file_delete_delay_ms="0",
        )
    ).error_code == 0
    for version in range(20):
        for key in range(10):
            batch = build_batch([Record(key=b"k%d" % key, value=b"v%d" % version)])
            _ok(await client.request(0, 9, _produce_body("compacted", 0, batch)))
    with trio.fail_after(WAIT_S):
        while True:
            records = (await _partition(client, "compacted")).records
            if sum(h.records_count for _, h in iter_batches(records, partial_ok=True)) <= 60:
                break
            await trio.sleep(0.02)

    # Every append flushed (flush.messages=1), past index.interval.bytes and a roll; DeleteRecords.
    durable = {"flush_messages": "1", "index_interval_bytes": "100", "internal_segment_bytes": "2048"}
    assert (await _create(client, "durable", file_delete_delay_ms="0", **durable)).error_code == 0
    for _ in range(12):
        _ok(await client.request(0, 9, _produce_body("durable", 0, build_batch([Record(value=b"d" * 300)]))))
    body = {"topics": [{"name": "durable", "partitions": [{"partition_index": 0, "offset": 8}]}], "timeout_ms": 5000}
    trimmed = (await client.request(21, 2, body)).topics[0].partitions[0]
    assert (trimmed.error_code, trimmed.low_watermark) == (0, 8)

    # A consumer group's commit, and a transaction; the group's first lookup has
    # __consumer_offsets made in the background, and is asked again (as clients do) meanwhile.
    assert await _coordinator_error(client, "g") == 0
    committed = await client.request(8, 8, _commit_body("g", "rolling", 1))
    assert committed.topics[0].partitions[0].error_code == 0
    producer = Producer(client, "tx")
    assert (await producer.init()).error_code == 0
    await producer.add("rolling", 0)
    assert (await producer.send("rolling", 0, b"in a transaction")).error_code == 0
    assert await producer.end(commit=True) == 0
    await producer.add("rolling", 0)
    assert (await producer.send("rolling", 0, b"aborted")).error_code == 0
    assert await producer.end(commit=False) == 0

    # Topics created, written and deleted.
    assert (await _create(client, "temporary", 3)).error_code == 0
    _ok(await client.request(0, 9, _produce_body("temporary", 1, build_batch([Record(value=b"t")]))))
    deleted = await client.request(
        20, 6, {"topics": [{"name": "temporary", "topic_id": ZERO_UUID}], "timeout_ms": 5000}
    )
    assert deleted.responses[0].error_code == 0


async def _after_restart(client: AsyncWireClient) -> None:
    """Reads of segments loaded at start-up, appends that flush and roll."""
    for topic in ("rolling", "compacted", "durable"):
        readable = await _partition(client, topic, await _log_start(client, topic))
        assert readable.error_code == 0 and readable.records
    for _ in range(4):
        _ok(await client.request(0, 9, _produce_body("durable", 0, build_batch([Record(value=b"d" * 300)]))))
        _ok(await client.request(0, 9, _produce_body("rolling", 0, build_batch([Record(value=b"r" * 300)]))))


async def _serve_checked(tmp_path: Path, calls: LoopBlockingCalls, drive: Any) -> None:
    """The single node on ``tmp_path``: started first (start-up, before anyone is served, is not
    checked), then driven and stopped under ``calls``."""
    node = Node(
        make_config(
            tmp_path,
            log_retention_check_interval_ms="20",
            log_cleaner_backoff_ms="20",
            offsets_topic_num_partitions="2",
            transaction_state_log_num_partitions="2",
        )
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        assert node.client_address is not None
        with calls:
            client = await AsyncWireClient.connect(*node.client_address)
            try:
                await drive(client)
            finally:
                await client.aclose()
            await node.stop()


async def test_a_broker_on_a_data_dir_makes_no_blocking_file_call_on_its_event_loop(tmp_path: Path) -> None:
    calls = LoopBlockingCalls(roots=[tmp_path])
    await _serve_checked(tmp_path, calls, _drive)
    calls.check(allow=ALLOWED)
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()

    restarted = LoopBlockingCalls(roots=[tmp_path])
    await _serve_checked(tmp_path, restarted, _after_restart)
    restarted.check(allow=ALLOWED)
