#!/usr/bin/env python3
"""CPU time per Produce request through the broker's request path, in this process, no sockets.

    python scripts/bench_produce_path.py                  # the loads below, µs of CPU per request
    python scripts/bench_produce_path.py --profile        # and a cProfile of the first load
    python scripts/bench_produce_path.py --requests 5000
    python scripts/bench_produce_path.py --tree /path/to/other/checkout   # that checkout's code

What kafka-producer-perf-test sends (batch.size=65536, one ~64 KiB batch per partition per
request, acks=all) goes through ``connection._handle_frame`` (decode, the Produce handler with
its validation, the append to a file-backed log, the response encoded) on an in-process broker.
The figure is the thread's CPU time, not wall time, so it holds on a shared machine and paired
A/B runs of two checkouts compare (``--tree``). The socket side (receive, send, the scheduler) is not
in it: ``scripts/bench.py --only java`` measures the whole.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio


def _tree(argv: list[str]) -> str:
    """The checkout whose kafkalike is measured: ``--tree DIR``, or this script's own."""
    if "--tree" in argv and argv.index("--tree") + 1 < len(argv):
        return argv[argv.index("--tree") + 1]
    return str(Path(__file__).resolve().parents[1])


sys.path.insert(0, _tree(sys.argv))

from kafkalike.protocol.api import RequestHeader, encode_request  # noqa: E402
from kafkalike.protocol.compression import NONE, ZSTD  # noqa: E402
from kafkalike.protocol.records import Record, build_batch  # noqa: E402
from kafkalike.server import connection  # noqa: E402
from kafkalike.server.broker import Broker  # noqa: E402
from kafkalike.server.config import BrokerConfig  # noqa: E402
from kafkalike.server.node import Node  # noqa: E402

# (value bytes, partitions per request, Produce version, codec): the shapes of the slow bench rows.
LOADS = ((1024, 1, 11, NONE), (1024, 6, 11, NONE), (100, 6, 11, NONE), (1024, 1, 11, ZSTD), (100, 6, 11, ZSTD))
CODEC_NAMES = {NONE: "none", ZSTD: "zstd"}
LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
BATCH_BYTES = 64 * 1024


def produce_frame(value_size: int, partitions: int, version: int, codec: int, rng: random.Random) -> bytes:
    count = max(BATCH_BYTES // (value_size + 8), 1)
    now_ms = int(time.time() * 1000)

    def value() -> bytes:
        # Compressed loads get kafka-producer-perf-test's payload (random capital letters), which compresses.
        return bytes(rng.choices(LETTERS, k=value_size)) if codec != NONE else rng.randbytes(value_size)

    batch = build_batch(
        [Record(key=None, value=value()) for _ in range(count)], base_timestamp=now_ms, compression=codec
    )
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {"name": "bench", "partition_data": [{"index": p, "records": batch} for p in range(partitions)]}
        ],
    }
    return encode_request(RequestHeader(0, version, 7, "producer-1"), body)[4:]


async def _serve(broker: Broker, frame: bytes) -> Any:
    # A fresh writable copy per request, as the connection receives one: offsets are stamped in place.
    return await connection._handle_frame(broker, bytearray(frame), "127.0.0.1", "PLAINTEXT")


async def measure(frames: dict[tuple[int, int, int, int], bytes], requests: int, profile: bool) -> None:
    with tempfile.TemporaryDirectory() as data:
        node = Node(BrokerConfig({"log.dirs": data, "listeners": "PLAINTEXT://127.0.0.1:0"}))
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            broker = node.broker
            assert broker is not None
            create = {
                "topics": [
                    {"name": "bench", "num_partitions": 6, "replication_factor": 1, "assignments": [], "configs": []}
                ],
                "timeout_ms": 5000,
                "validate_only": False,
            }
            await connection._handle_frame(
                broker, bytearray(encode_request(RequestHeader(19, 5, 1, "a"), create)[4:]), "h", "PLAINTEXT"
            )
            print(f"{'value':>6} {'parts':>5} {'ver':>3} {'codec':>5} {'CPU µs/request':>15}  (best of 5 x {requests})")
            for (size, parts, version, codec), frame in frames.items():
                for _ in range(200):  # warm: schemas compiled, segment files open
                    await _serve(broker, frame)
                best = float("inf")
                for _ in range(5):
                    started = time.thread_time()
                    for _ in range(requests):
                        await _serve(broker, frame)
                    best = min(best, (time.thread_time() - started) / requests)
                print(f"{size:>6} {parts:>5} {version:>3} {CODEC_NAMES[codec]:>5} {best * 1e6:>15.1f}")
            if profile:
                frame = next(iter(frames.values()))
                profiler = cProfile.Profile()
                profiler.enable()
                for _ in range(requests):
                    await _serve(broker, frame)
                profiler.disable()
                pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
            await node.stop()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--tree", help="measure the kafkalike package of this checkout")
    args = parser.parse_args(argv)
    rng = random.Random(1)
    frames = {load: produce_frame(*load, rng) for load in LOADS}
    trio.run(measure, frames, args.requests, args.profile)


if __name__ == "__main__":
    main(sys.argv[1:])
