"""Throughput of the partition log: append ~200 MB of 16 KiB batches, then read them back.

Prints MB/s per tenth of the append so it is visible that the cost of an append does not grow
with the size of the log, then sequential read throughput (bytes copied out, and ranges only, as
the server would hand them to sendfile), random-offset lookup latency, a follower's log built
from the leader's bytes (``append_as_follower``, batch by batch and in 1 MiB fetches), and
reopen times.

    python scripts/bench_log.py [--mb 200] [--batch-kb 16] [--segment-mb 64] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from kafkalike.log import LogConfig, PartitionLog
from kafkalike.protocol.records import Record, RecordBatchHeader, build_batch, iter_batches, read_batch_header


def template_batch(batch_bytes: int) -> bytes:
    record_size = 1000
    count = max(1, (batch_bytes - 61) // (record_size + 12))
    records = [Record(value=bytes([i % 251]) * record_size, timestamp_delta=i) for i in range(count)]
    return build_batch(records, base_timestamp=1_700_000_000_000)


def bench_append(log: PartitionLog, batch: bytes, total: int) -> int:
    appends = max(1, total // len(batch))
    tenth = max(1, appends // 10)
    print(f"append: {appends} batches of {len(batch)} bytes, {len(batch) * appends / 1e6:.0f} MB")
    started = chunk_start = time.perf_counter()
    now = 1_700_000_000_000
    for i in range(1, appends + 1):
        log.append(bytearray(batch), leader_epoch=0, now_ms=now + i)
        if i % tenth == 0:
            elapsed = time.perf_counter() - chunk_start
            size_mb = log.size_in_bytes / 1e6
            rate = tenth * len(batch) / elapsed / 1e6
            print(f"  log at {size_mb:5.0f} MB: {rate:6.0f} MB/s, {elapsed / tenth * 1e6:6.1f} us/append")
            chunk_start = time.perf_counter()
    elapsed = time.perf_counter() - started
    print(f"  total: {appends * len(batch) / elapsed / 1e6:.0f} MB/s, {appends / elapsed:.0f} appends/s")
    log.flush()
    log.high_watermark = log.log_end_offset
    return appends


def bench_read(log: PartitionLog, fetch_bytes: int, copy: bool, batch: RecordBatchHeader) -> None:
    """Consume the log front to back. With ``copy`` the bytes are read and their batch headers
    walked as a consumer would; without, only the ranges are produced, as handed to sendfile
    (the next offset then follows from the uniform batch size)."""
    offset, total, fetches = log.log_start_offset, 0, 0
    started = time.perf_counter()
    while offset < log.high_watermark:
        result = log.read(offset, fetch_bytes, max_offset=log.high_watermark)
        if copy:
            data = result.read_all()
            for _pos, header in iter_batches(data):
                offset = header.last_offset + 1
        else:
            offset += result.size // batch.size * batch.records_count
        total += result.size
        fetches += 1
    elapsed = time.perf_counter() - started
    kind = "read, bytes copied out" if copy else "read, ranges only (sendfile)"
    print(f"{kind}: {total / elapsed / 1e6:.0f} MB/s, {fetches / elapsed:.0f} fetches/s of {fetch_bytes >> 10} KiB")


def bench_follower(leader: PartitionLog, path: Path, config: LogConfig, fetch_bytes: int | None) -> None:
    """Replicate the leader's log into a new one: each batch alone (``fetch_bytes`` None, the
    leader append's unit) or as fetches of up to ``fetch_bytes`` cut wherever the limit falls."""
    follower = PartitionLog.open(path, config, 0)
    fetches: list[bytes] = []
    offset = leader.log_start_offset
    while offset < leader.log_end_offset:  # the reads are not what is measured
        data = leader.read_bytes(offset, 0 if fetch_bytes is None else fetch_bytes)
        if fetch_bytes is not None:
            data = data[:fetch_bytes]
        whole = [header for _pos, header in iter_batches(data, partial_ok=True)]
        fetches.append(data)
        offset = whole[-1].last_offset + 1
    total = sum(len(f) for f in fetches)
    started = time.perf_counter()
    now = 1_700_000_000_000
    for data in fetches:
        follower.append_as_follower(data, now_ms=now)
    elapsed = time.perf_counter() - started
    unit = "one batch" if fetch_bytes is None else f"fetches of {fetch_bytes >> 10} KiB"
    print(
        f"follower append, {unit}: {total / elapsed / 1e6:.0f} MB/s, "
        f"{elapsed / len(fetches) * 1e6:.1f} us per append_as_follower"
    )
    follower.delete()


def bench_lookups(log: PartitionLog, samples: int = 20_000) -> None:
    rng = random.Random(7)
    offsets = [rng.randrange(log.log_start_offset, log.log_end_offset) for _ in range(samples)]
    started = time.perf_counter()
    for offset in offsets:
        log.read(offset, 1)
    elapsed = time.perf_counter() - started
    print(f"random offset lookups: {elapsed / samples * 1e6:.1f} us each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--batch-kb", type=int, default=16)
    parser.add_argument("--segment-mb", type=int, default=64)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-log-"))
    path = root / "bench-0"
    config = LogConfig(segment_bytes=args.segment_mb << 20)
    try:
        log = PartitionLog.open(path, config, 0)
        batch = template_batch(args.batch_kb << 10)
        bench_append(log, batch, args.mb * 1_000_000)
        bench_read(log, 1 << 20, copy=True, batch=read_batch_header(batch))
        bench_read(log, 1 << 20, copy=False, batch=read_batch_header(batch))
        bench_lookups(log)
        bench_follower(log, root / "follower-0", config, None)
        bench_follower(log, root / "follower-1", config, 1 << 20)
        log.close()
        started = time.perf_counter()
        log = PartitionLog.open(path, config, 0, clean_shutdown=True)
        print(f"reopen after clean shutdown: {(time.perf_counter() - started) * 1e3:.0f} ms")
        log.release()
        started = time.perf_counter()
        log = PartitionLog.open(path, config, 0)
        print(f"reopen with full recovery (CRC of every batch): {(time.perf_counter() - started) * 1e3:.0f} ms")
        log.close()
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
