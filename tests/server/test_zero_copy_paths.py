"""The connection's copy-avoiding paths, end to end over a socket: large produce frames received
into their own buffer (also when they arrive in pieces), fetch answers sent from the segment
files with os.sendfile, small ones copied, and the memory-storage fallback."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkalike.protocol.api import RequestHeader, encode_request
from kafkalike.protocol.records import Record, build_batch, iter_batches, read_batch_header
from kafkalike.server import connection
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, serving


def produce_body(topic: str, partition: int, records: bytes) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def fetch_body(topic: str, partitions: list[int], max_bytes: int = 1 << 20) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 8 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                     "partition_max_bytes": max_bytes}
                    for p in partitions
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }  # fmt: skip


async def create(client: AsyncWireClient, name: str, partitions: int) -> None:
    body = {
        "topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        ],
        "timeout_ms": 5000,
        "validate_only": False,
    }
    assert (await client.request(19, 7, body)).topics[0].error_code == 0


def batches(count: int, value_size: int, seed: int) -> bytes:
    """One batch of ``count`` records (Produce v3+ carries one batch per partition)."""
    records = [
        Record(key=b"%d-%d" % (seed, i), value=bytes([seed + i & 0xFF]) * value_size, timestamp_delta=i)
        for i in range(count)
    ]
    return build_batch(records, base_timestamp=1_700_000_000_000)


def without_offsets(records: bytes) -> list[bytes]:
    """Each batch with its base offset and leader epoch zeroed (the broker fills both in)."""
    out = []
    for pos, header in iter_batches(records):
        batch = bytearray(records[pos : pos + header.size])
        batch[0:8] = bytes(8)
        batch[12:16] = bytes(4)
        out.append(bytes(batch))
    return out


@pytest.fixture
def sendfile_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = connection.os.sendfile

    def counting(out: int, fd: int, offset: int, count: int) -> int:
        sent = real(out, fd, offset, count)
        calls.append(sent)
        return sent

    monkeypatch.setattr(connection.os, "sendfile", counting)
    return calls


async def test_large_produce_and_fetch_round_trip_through_the_files(
    running: RunningBroker, sendfile_calls: list[int]
) -> None:
    client = await running.client()
    await create(client, "zc", 2)
    sent = {p: batches(40, 5000, p) for p in (0, 1)}  # ~200 KB per partition: a direct-received frame
    for p, records in sent.items():
        answer = await client.request(0, 9, produce_body("zc", p, records))
        assert answer.responses[0].partition_responses[0].error_code == 0
    fetched = await client.request(1, 12, fetch_body("zc", [0, 1]))
    assert sum(sendfile_calls) > 2 * 150_000  # both partitions' records came out of the files
    for part in fetched.responses[0].partitions:
        records = bytes(part.records)
        assert without_offsets(records) == without_offsets(sent[part.partition_index])
        assert [(h.base_offset, h.last_offset) for _, h in iter_batches(records)] == [(0, 39)]


async def test_large_frame_arriving_in_pieces(running: RunningBroker) -> None:
    client = await running.client()
    await create(client, "pieces", 1)
    records = batches(30, 4000, 3)
    frame = encode_request(RequestHeader(0, 9, 77, "c"), produce_body("pieces", 0, records))
    stream = await trio.open_tcp_stream(running.host, running.port)
    async with stream:
        for start in range(0, len(frame), 50_000):
            await stream.send_all(frame[start : start + 50_000])
            await trio.sleep(0.01)
        raw = b""
        while len(raw) < 4 or len(raw) < 4 + struct.unpack(">i", raw[:4])[0]:
            chunk = await stream.receive_some(1 << 16)
            assert chunk
            raw += chunk
    assert struct.unpack(">i", raw[4:8])[0] == 77
    fetched = await client.request(1, 12, fetch_body("pieces", [0]))
    assert without_offsets(bytes(fetched.responses[0].partitions[0].records)) == without_offsets(records)


async def test_small_fetch_is_copied_not_sendfiled(running: RunningBroker, sendfile_calls: list[int]) -> None:
    client = await running.client()
    await create(client, "small", 1)
    records = batches(3, 100, 1)
    await client.request(0, 9, produce_body("small", 0, records))
    fetched = await client.request(1, 12, fetch_body("small", [0]))
    assert not sendfile_calls
    assert without_offsets(bytes(fetched.responses[0].partitions[0].records)) == without_offsets(records)


async def test_a_fetch_limited_below_a_batch_still_gets_whole_batches(running: RunningBroker) -> None:
    client = await running.client()
    await create(client, "limit", 1)
    for seed in range(50):  # 50 batches of one record each
        await client.request(0, 9, produce_body("limit", 0, batches(1, 3000, seed)))
    fetched = await client.request(1, 12, fetch_body("limit", [0], max_bytes=100_000))
    records = bytes(fetched.responses[0].partitions[0].records)
    assert 90_000 < len(records) <= 100_000
    assert sum(h.size for _, h in iter_batches(records)) == len(records)
    assert read_batch_header(records).base_offset == 0


async def test_memory_storage_sends_copies(tmp_path: Path) -> None:
    async with serving(tmp_path, ephemeral=True) as running:
        client = await running.client()
        await create(client, "mem", 1)
        records = batches(40, 5000, 5)
        await client.request(0, 9, produce_body("mem", 0, records))
        fetched = await client.request(1, 12, fetch_body("mem", [0]))
        assert without_offsets(bytes(fetched.responses[0].partitions[0].records)) == without_offsets(records)
