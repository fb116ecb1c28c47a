#!/usr/bin/env python3
"""What validating every record costs the produce path, measured in this process.

    python scripts/bench_validation.py            # the validator alone, then produce through a broker
    python scripts/bench_validation.py --only validator
    python scripts/bench_validation.py --only produce --seconds 5

1. The validator alone (``protocol/validation.py``) on 1 MiB of records per batch (what a client
   sends with batch.size=1 MiB), 100 B and 1 KiB values, none/lz4/zstd: MB/s of record bytes and
   records/s, with the compiled walk, with the pure-Python reference walk, and for the header and
   CRC check that was all the produce path did before (the floor).
2. Produce through an in-process broker over loopback (file-backed, acks=1, one connection,
   batches of 64 KiB uncompressed), validation on and off. "Off" replaces the validator in this
   process only with the old header-and-CRC check: the switch exists in this script, not in the
   broker.

Side by side with Apache Kafka (validation on in both; ~50 min, do not run on a shared machine):
``python scripts/bench.py --reference=kafka --only produce``; the cost of validation against a
build without it: ``python scripts/bench.py --only produce --baseline-tree DIR`` with DIR a
checkout from before validation.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kafkalike.protocol import compression, record_walk  # noqa: E402
from kafkalike.protocol.errors import ErrorCode  # noqa: E402
from kafkalike.protocol.records import Record, batch_crc_ok, build_batch, read_batch_header  # noqa: E402
from kafkalike.protocol.validation import (  # noqa: E402
    RecordsRefused,
    TopicSettings,
    ValidBatch,
    validate_produce_records,
)
from kafkalike.server.config import BrokerConfig  # noqa: E402
from kafkalike.server.handlers import produce as produce_handler  # noqa: E402
from kafkalike.server.node import Node  # noqa: E402
from kafkalike.testing.wire_client import AsyncWireClient  # noqa: E402

CODECS = {"none": compression.NONE, "lz4": compression.LZ4, "zstd": compression.ZSTD}
VALUE_SIZES = (100, 1024)
NOW_MS = int(time.time() * 1000)


def values(size: int, count: int, rng: random.Random) -> list[bytes]:
    """Log-line-like values: compressible, not trivially (lz4 ~2-3x, zstd ~3-4x)."""
    words = [rng.randbytes(rng.randint(2, 8)).hex().encode() for _ in range(200)]
    out = []
    for _ in range(count):
        text = b" ".join(rng.choice(words) for _ in range(size // 6 + 1))
        out.append(text[:size])
    return out


def batch_of(value_size: int, codec: int, uncompressed_bytes: int, seed: int = 1) -> bytes:
    count = max(uncompressed_bytes // (value_size + 12), 1)
    rng = random.Random(seed)
    records = [
        Record(key=b"k%d" % i, value=v, timestamp_delta=i % 1000) for i, v in enumerate(values(value_size, count, rng))
    ]
    return build_batch(records, base_timestamp=NOW_MS, compression=codec)


def header_and_crc_only(records: Any, settings: TopicSettings, **_: Any) -> ValidBatch:
    """The produce path before record validation: one batch, its header and CRC."""
    buf = records if isinstance(records, bytearray | memoryview) else bytearray(records)
    header = read_batch_header(buf)
    if not batch_crc_ok(buf, 0, header):
        raise RecordsRefused(ErrorCode.CORRUPT_MESSAGE, "crc", with_log_start=False)
    return ValidBatch(memoryview(buf)[: header.size], header, header.records_count, header.max_timestamp, False)


def timed(fn: Callable[[], object], min_seconds: float) -> float:
    """Seconds per call, over at least ``min_seconds`` of calls."""
    fn()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def bench_validator(seconds: float) -> None:
    print("validator alone, 1 MiB of records per batch (MB/s of record bytes, records/s):")
    print(f"{'value':>6} {'codec':>5} {'walk':>9} {'MB/s':>9} {'records/s':>12}")
    settings = TopicSettings(max_message_bytes=8 << 20)
    for value_size in VALUE_SIZES:
        for name, codec in CODECS.items():
            batch = bytearray(batch_of(value_size, codec, 1 << 20))
            header = read_batch_header(batch)
            raw = len(compression.decompress(codec, batch[61:])) if codec else len(batch) - 61
            walks: list[tuple[str, Callable[..., object]]] = [("floor", header_and_crc_only)]
            if record_walk.NATIVE:
                walks.append(("compiled", validate_produce_records))
            walks.append(("python", validate_produce_records))
            for label, fn in walks:
                real = record_walk.walk
                if label == "python":
                    record_walk.walk = record_walk.walk_py
                try:
                    per_call = timed(
                        lambda fn=fn, batch=batch: fn(
                            batch, settings, now_ms=NOW_MS, api_version=9, topic_partition="t-0"
                        ),
                        seconds,
                    )
                finally:
                    record_walk.walk = real
                print(
                    f"{value_size:>6} {name:>5} {label:>9} {raw / per_call / 1e6:>9.0f}"
                    f" {header.records_count / per_call:>12,.0f}"
                )


async def produce_load(port: int, topic: str, batches: list[bytes], seconds: float) -> tuple[float, int]:
    client = await AsyncWireClient.connect("127.0.0.1", port)
    sent_bytes = records = 0
    start = time.perf_counter()
    i = 0
    while time.perf_counter() - start < seconds:
        batch = batches[i % len(batches)]
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        }
        answer = await client.request(0, 9, body)
        assert answer.responses[0].partition_responses[0].error_code == 0
        sent_bytes += len(batch)
        records += read_batch_header(batch).records_count
        i += 1
    elapsed = time.perf_counter() - start
    await client.aclose()
    return elapsed, records


async def bench_produce_once(value_size: int, codec: int, validate: bool, seconds: float) -> float:
    real = produce_handler.validate_produce_records
    if not validate:
        produce_handler.validate_produce_records = header_and_crc_only  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as data:
            node = Node(BrokerConfig({"log.dirs": data, "listeners": "PLAINTEXT://127.0.0.1:0"}))
            async with trio.open_nursery() as nursery:
                await nursery.start(node.run)
                assert node.client_address is not None
                port = node.client_address[1]
                client = await AsyncWireClient.connect("127.0.0.1", port)
                create = {
                    "topics": [
                        {
                            "name": "b",
                            "num_partitions": 1,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout_ms": 5000,
                    "validate_only": False,
                }
                await client.request(19, 7, create)
                await client.aclose()
                batches = [batch_of(value_size, codec, 64 << 10, seed) for seed in range(8)]
                elapsed, records = await produce_load(port, "b", batches, seconds)
                await node.stop()
    finally:
        produce_handler.validate_produce_records = real
    return records / elapsed


def bench_produce(seconds: float, runs: int) -> None:
    print(
        f"\nproduce through an in-process broker (records/s, acks=1, 64 KiB batches, one connection, best of {runs}):"
    )
    print(f"{'value':>6} {'codec':>5} {'on':>10} {'off':>10} {'cost':>6}")
    for value_size in VALUE_SIZES:
        for name, codec in CODECS.items():
            # Interleaved, best of each: on a shared machine the slowest runs are other people's load.
            on = off = 0.0
            for _ in range(runs):
                on = max(on, trio.run(bench_produce_once, value_size, codec, True, seconds))
                off = max(off, trio.run(bench_produce_once, value_size, codec, False, seconds))
            print(f"{value_size:>6} {name:>5} {on:>10,.0f} {off:>10,.0f} {1 - on / off:>6.1%}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("validator", "produce"))
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    parser.add_argument("--runs", type=int, default=3, help="produce runs on and off, interleaved; the best counts")
    args = parser.parse_args(argv)
    print(f"compiled record walk: {'yes' if record_walk.NATIVE else 'NO (pure Python)'}")
    if args.only in (None, "validator"):
        bench_validator(args.seconds)
    if args.only in (None, "produce"):
        bench_produce(max(args.seconds, 2.0), args.runs)


if __name__ == "__main__":
    main(sys.argv[1:])
