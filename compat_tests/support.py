"""What the client tests share: the messages they send, how they check what came back, deadlines.

Each client test produces the same kind of message set (keyed and unkeyed, with headers and
explicit CreateTime timestamps), turns what its consumer returns into ``Received`` records and
hands both to ``check_round_trip``, so every client is held to the same checks.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from kafkalike.protocol.records import iter_batches
from kafkalike.testing.wire_client import WireClient

T = TypeVar("T")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# The codec id in bits 0-2 of a record batch's attributes.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
FETCH_API, FETCH_VERSION = 1, 12
API_VERSIONS_API = 18
FIND_COORDINATOR_API = 10
CONSUME_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Sent:
    index: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


@dataclass(frozen=True)
class Received:
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int
    create_time: bool


def now_ms() -> int:
    return int(time.time() * 1000)


def make_messages(count: int = 40, keys: int = 3) -> list[Sent]:
    """Every fourth message unkeyed, the rest spread over ``keys`` keys; values compress well.

    Timestamps are explicit, an hour in the past (well inside retention) and strictly
    increasing. Headers include a repeated name, whose values must come back in order.
    """
    base = now_ms() - 3_600_000
    out = []
    for i in range(count):
        key = None if i % 4 == 3 else b"user-%d" % (i % keys)
        value = b"%06d|" % i + b"kafkalike compatibility payload " * 8
        headers = (("index", b"%d" % i), ("trace", b"first"), ("trace", b"second-%d" % i))
        out.append(Sent(i, key, value, headers, base + 10 * i))
    return out


def index_of(value: bytes) -> int:
    return int(value.split(b"|", 1)[0])


def check_round_trip(sent: list[Sent], received: list[Received], partitions: int) -> None:
    """Everything sent came back once, intact, each key on one partition, each partition in send order."""
    by_index: dict[int, Received] = {}
    for record in received:
        index = index_of(record.value)
        assert index not in by_index, f"message {index} consumed twice"
        by_index[index] = record
    assert sorted(by_index) == [m.index for m in sent]
    partitions_of_key: dict[bytes, set[int]] = defaultdict(set)
    for message in sent:
        got = by_index[message.index]
        assert (got.key, got.value, got.headers) == (message.key, message.value, message.headers)
        assert got.timestamp_ms == message.timestamp_ms and got.create_time, message.index
        assert 0 <= got.partition < partitions
        if message.key is not None:
            partitions_of_key[message.key].add(got.partition)
    assert all(len(found) == 1 for found in partitions_of_key.values()), partitions_of_key
    per_partition: dict[int, list[Received]] = defaultdict(list)
    for record in received:
        per_partition[record.partition].append(record)
    for partition, records in per_partition.items():
        records.sort(key=lambda r: r.offset)
        assert [r.offset for r in records] == list(range(len(records))), partition
        indexes = [index_of(r.value) for r in records]
        assert indexes == sorted(indexes), f"partition {partition} is not in send order: {indexes}"


def consume_until(poll: Callable[[], Iterable[T]], count: int, timeout_s: float = CONSUME_TIMEOUT_S) -> list[T]:
    """Call ``poll`` (which blocks briefly) until ``count`` items came back or the deadline passes."""
    got: list[T] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got.extend(poll())
    return got


def advertised_apis(bootstrap: str) -> set[int]:
    """The API keys the broker lists in its ApiVersions answer."""
    host, _, port = bootstrap.rpartition(":")
    with WireClient(host, int(port)) as client:
        response = client.request(
            API_VERSIONS_API, 3, {"client_software_name": "compat", "client_software_version": "1"}
        )
    assert response.error_code == 0
    return {api.api_key for api in response.api_keys}


def librdkafka_codec(bootstrap: str, codec: str) -> str:
    """The codec librdkafka really uses for ``codec``: it enables LZ4 only on brokers that list
    FindCoordinator (its sign of Kafka >= 0.8.2) and sends other batches uncompressed."""
    if codec == "lz4" and FIND_COORDINATOR_API not in advertised_apis(bootstrap):
        return "none"
    return codec


def stored_codecs(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The compression codec of every record batch in the topic, read with a raw Fetch."""
    host, _, port = bootstrap.rpartition(":")
    codecs = []
    with WireClient(host, int(port)) as client:
        for partition in range(partitions):
            offset = 0
            while True:
                response = client.request(FETCH_API, FETCH_VERSION, _fetch_body(topic, partition, offset))
                part = response.responses[0].partitions[0]
                assert part.error_code == 0, part.error_code
                records = bytes(part.records or b"")
                batches = list(iter_batches(records, partial_ok=True))
                if not batches:
                    break
                codecs += [header.compression for _, header in batches]
                offset = batches[-1][1].last_offset + 1
    return codecs


def _fetch_body(topic: str, partition: int, offset: int) -> dict[str, object]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
