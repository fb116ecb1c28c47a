"""Helpers shared by the log cleaner tests (this module holds no tests of its own)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafkalike.log import AppendOrigin, FileLogDirectory, LogConfig, LogDirectory, MemoryLogDirectory, PartitionLog
from kafkalike.protocol.records import (
    Record,
    RecordBatchHeader,
    batch_crc_ok,
    build_batch,
    build_end_txn_marker,
    decode_records,
    iter_batches,
)

STORAGES = ["memory", "file"]

# Small segments and a dense index so a few dozen records exercise rolls, groups and lookups.
CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=1024,
    index_interval_bytes=64,
    file_delete_delay_ms=60_000,
    delete_retention_ms=1_000,
)

Row = tuple[int, bytes | None, bytes | None]


class Crash(BaseException):
    """A simulated process death: a BaseException, so the cleaner's error handling never sees it
    and nothing runs after the point it is raised at."""


def crash_at(point: str) -> Callable[[str], None]:
    def fault(name: str) -> None:
        if name == point:
            raise Crash(name)

    return fault


class Storage:
    """Where a test's partition lives; ``open`` reads it back as a restarted broker would."""

    def __init__(self, kind: str, tmp_path: Path, name: str = "t-0") -> None:
        self.kind = kind
        self.directory: LogDirectory = MemoryLogDirectory() if kind == "memory" else FileLogDirectory(tmp_path / name)

    def open(self, config: LogConfig = CONFIG, now_ms: int = 0, *, clean_shutdown: bool = False) -> PartitionLog:
        log = PartitionLog.open(self.directory, config, now_ms, clean_shutdown=clean_shutdown)
        log.high_watermark = log.log_end_offset
        return log

    def names(self) -> list[str]:
        return self.directory.list_names()


def produce(
    log: PartitionLog,
    rows: list[tuple[bytes | None, bytes | None]],
    now_ms: int,
    *,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> int:
    """Append one batch of (key, value) records stamped ``now_ms``; returns its first offset."""
    batch = build_batch(
        [Record(key=k, value=v) for k, v in rows],
        base_timestamp=now_ms,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
    )
    result = log.append(bytearray(batch), leader_epoch=0, now_ms=now_ms)
    log.high_watermark = log.log_end_offset
    return result.first_offset


def end_txn(log: PartitionLog, *, commit: bool, producer_id: int, producer_epoch: int, now_ms: int) -> int:
    marker = build_end_txn_marker(
        commit=commit, producer_id=producer_id, producer_epoch=producer_epoch, coordinator_epoch=0, timestamp=now_ms
    )
    result = log.append(bytearray(marker), leader_epoch=0, now_ms=now_ms, origin=AppendOrigin.COORDINATOR)
    log.high_watermark = log.log_end_offset
    return result.first_offset


def batches(log: PartitionLog) -> list[tuple[RecordBatchHeader, list[Record]]]:
    """Every batch a consumer reading from the log start gets, each CRC checked."""
    blob = log.read_bytes(log.log_start_offset, 1 << 30)
    out = []
    for pos, header in iter_batches(blob):
        assert batch_crc_ok(blob, pos, header), f"bad CRC at offset {header.base_offset}"
        out.append((header, decode_records(blob, pos, header)))
    return out


def rows(log: PartitionLog) -> list[Row]:
    """(offset, key, value) of every data record from the log start, in log order."""
    return [(r.offset(h), r.key, r.value) for h, records in batches(log) if not h.is_control for r in records]


def latest_per_key(written: list[Row]) -> list[Row]:
    """The newest record of each key, in offset order."""
    newest: dict[bytes | None, Row] = {}
    for row in written:
        newest[row[1]] = row
    return sorted(newest.values())


def fold(found: list[Row]) -> dict[bytes | None, bytes | None]:
    """What a consumer that reads from offset 0 and keeps the last value per key ends up with."""
    state: dict[bytes | None, bytes | None] = {}
    for _offset, key, value in found:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def check_lookups(log: PartitionLog) -> None:
    """Every offset reads back from the batch holding it, or the next one when it was cleaned away."""
    survivors = [offset for offset, _k, _v in rows(log)]
    for offset in range(log.log_start_offset, log.log_end_offset):
        data = log.read_bytes(offset, 1)
        header = next(iter_batches(data, partial_ok=True))[1]
        assert header.last_offset >= offset
        assert not [s for s in survivors if offset <= s < header.base_offset], f"read of {offset} skipped records"
