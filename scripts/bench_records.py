"""Sanity benchmark: walk a 1 MiB records blob of 16 KiB batches, reading headers and checking CRCs.

Run: ``python scripts/bench_records.py``. Also times full record decoding, for comparison.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from kafkalike.protocol.records import Record, batch_crc_ok, build_batch, decode_records, iter_batches

BLOB_SIZE = 1 << 20
BATCH_SIZE = 16 << 10
VALUE_SIZE = 1000


def make_blob() -> bytes:
    per_batch = BATCH_SIZE // (VALUE_SIZE + 20)
    batches: list[bytes] = []
    size = 0
    while size < BLOB_SIZE:
        records = [Record(value=os.urandom(VALUE_SIZE // 2).hex().encode()) for _ in range(per_batch)]
        batch = build_batch(records, base_offset=len(batches) * per_batch, base_timestamp=1_700_000_000_000)
        batches.append(batch)
        size += len(batch)
    return b"".join(batches)


def headers_and_crcs(blob: bytes) -> int:
    n = 0
    for pos, header in iter_batches(blob):
        if not batch_crc_ok(blob, pos, header):
            raise AssertionError("bad CRC")
        n += 1
    return n


def full_decode(blob: bytes) -> int:
    return sum(len(decode_records(blob, pos, header)) for pos, header in iter_batches(blob))


def measure(name: str, blob: bytes, fn: Callable[[bytes], int], min_seconds: float = 1.0) -> None:
    fn(blob)  # warm up
    rounds = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_seconds:
        fn(blob)
        rounds += 1
    print(f"{name:<18} {rounds * len(blob) / elapsed / 1e6:9.1f} MB/s  ({elapsed / rounds * 1e3:.3f} ms per MiB blob)")


def main() -> None:
    blob = make_blob()
    batches = headers_and_crcs(blob)
    print(f"blob: {len(blob)} bytes, {batches} batches of ~{len(blob) // batches} bytes")
    measure("header + CRC", blob, headers_and_crcs)
    measure("decode records", blob, full_decode)


if __name__ == "__main__":
    main()
