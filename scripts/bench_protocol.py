#!/usr/bin/env python3
"""Throughput of the protocol layer's hot paths.

    python scripts/bench_protocol.py [--seconds 2]

Each case runs for about ``--seconds`` and reports operations per second, MB/s of frame bytes
(decoded or produced) and the time per operation. The last row is the cost of compiling every
schema of every spec file from scratch, as a process does once as requests arrive.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalike.protocol import codec
from kafkalike.protocol.api import RequestHeader, decode_request, encode_request, encode_response
from kafkalike.protocol.spec import load_specs

KIB = 1024
MIB = 1024 * KIB


def produce_frame(version: int, partitions: int, records_size: int) -> bytes:
    records = bytes(range(256)) * (records_size // 256)
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [
            {"name": "bench", "partition_data": [{"index": i, "records": records} for i in range(partitions)]}
        ],
    }
    return encode_request(RequestHeader(0, version, 1, "bench-client"), body)[4:]


def fetch_response_body(partitions: int, records_size: int) -> dict[str, Any]:
    records = bytes(range(256)) * (records_size // 256)
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "bench",
                "partitions": [
                    {
                        "partition_index": i,
                        "error_code": 0,
                        "high_watermark": 1_000_000,
                        "last_stable_offset": 1_000_000,
                        "log_start_offset": 0,
                        "aborted_transactions": [],
                        "preferred_read_replica": -1,
                        "records": records,
                    }
                    for i in range(partitions)
                ],
            }
        ],
    }


def metadata_frame() -> bytes:
    body = {
        "topics": [{"topic_id": uuid.UUID(int=i + 1), "name": f"topic-{i}"} for i in range(3)],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": True,
    }
    return encode_request(RequestHeader(3, 12, 1, "bench-client"), body)[4:]


def run(seconds: float, op: Callable[[], Any]) -> tuple[int, float]:
    """Calls ``op`` in batches until ``seconds`` have passed; returns (calls, elapsed)."""
    op()  # warm up: compiles the schema
    calls, batch = 0, 1
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            op()
        calls += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls, elapsed
        batch = min(batch * 2, max(1, int(calls / elapsed * 0.25)))


def compile_all() -> tuple[int, float]:
    names = [
        (spec.name, section, version)
        for spec in load_specs().values()
        for section in spec.messages
        for version in range(spec.versions.low, (spec.versions.high or spec.versions.low) + 1)
    ]
    codec._schema.cache_clear()
    start = time.perf_counter()
    for name, section, version in names:
        codec.schema(name, section, version)
    return len(names), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per case (default 2)")
    args = parser.parse_args()

    produce_v9 = produce_frame(9, 1, MIB)
    produce_v3 = produce_frame(3, 1, MIB)
    produce_v9_16 = produce_frame(9, 16, 64 * KIB)
    fetch_body = fetch_response_body(100, 16 * KIB)
    fetch_size = len(encode_response(1, 12, 1, fetch_body))
    metadata = metadata_frame()

    cases: list[tuple[str, int, Callable[[], Any]]] = [
        ("decode Produce v9 request, 1 x 1 MiB", len(produce_v9), lambda: decode_request(produce_v9)),
        ("decode Produce v3 request, 1 x 1 MiB", len(produce_v3), lambda: decode_request(produce_v3)),
        ("decode Produce v9 request, 16 x 64 KiB", len(produce_v9_16), lambda: decode_request(produce_v9_16)),
        ("encode Fetch v12 response, 100 x 16 KiB", fetch_size, lambda: encode_response(1, 12, 1, fetch_body)),
        ("decode Metadata v12 request, 3 topics", len(metadata), lambda: decode_request(metadata)),
    ]

    print(f"{'case':<42} {'ops/s':>12} {'MB/s':>10} {'us/op':>10} {'frame bytes':>12}")
    print("-" * 90)
    for name, size, op in cases:
        calls, elapsed = run(args.seconds, op)
        rate = calls / elapsed
        print(f"{name:<42} {rate:>12,.0f} {rate * size / 1e6:>10,.1f} {elapsed / calls * 1e6:>10,.1f} {size:>12,}")
    count, elapsed = compile_all()
    print(
        f"{f'compile all {count} schemas':<42} {count / elapsed:>12,.0f} {'':>10} {elapsed / count * 1e6:>10,.1f}"
        f" {'':>12}  total {elapsed:.2f} s"
    )


if __name__ == "__main__":
    main()
