"""Offline checks of a data directory (``kafkalike storage verify``): read only, nothing repaired.

For every partition directory (``<topic>-<partition>/``, or the one directory given):

- every batch of every ``.log`` segment: framing (a v2 header whose length fits the file), CRC-32C,
  offsets rising across batches and segments and inside the segment's offset range, and the
  record structure (lengths, varints, headers, record count) read by produce validation's record
  walk as produce stored the batch: a compressed batch decompressed with the bound the broker uses
  and read field by field, as Kafka reads one it keeps as it came, so the record lengths inside it
  are not checked (Kafka accepts a batch whose lengths lie there); a segment whose framing breaks
  is not walked further (recovery would cut it there: the problem says how many bytes that would
  drop);
- the ``.index`` entries (rising, each at the start of a batch whose last offset it names), the
  ``.timeindex`` entries (rising, inside the segment, no timestamp above what the batches up to
  the entry's offset hold) and the ``.txnindex`` entries (rising, inside the segment);
- the producer-state snapshots (CRC), ``leader-epoch-checkpoint`` and ``partition.metadata``;

and the log dir's own checkpoint files. Files left by interrupted operations (``.deleted``,
``.cleaned``, ``.swap``, ``.tmp``) are listed as notes: start-up clears them.

Segments are mapped read-only (``mmap``), so a large log costs address space, not memory.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kafkalike.log.checkpoint import (
    CheckpointError,
    parse_epoch_checkpoint,
    parse_offset_checkpoint,
    parse_partition_metadata,
)
from kafkalike.log.cleaner import CLEANER_OFFSET_CHECKPOINT
from kafkalike.log.config import INT_MAX
from kafkalike.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from kafkalike.log.loader import CLEANED_SUFFIX, SWAP_SUFFIX, TMP_SUFFIX, offset_of_name
from kafkalike.log.manager import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, parse_partition_dir
from kafkalike.log.partition_log import PARTITION_METADATA
from kafkalike.log.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager
from kafkalike.log.segment import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, parse_header
from kafkalike.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from kafkalike.protocol.records import BATCH_HEADER_SIZE, RecordBatchHeader, batch_crc_ok
from kafkalike.protocol.validation import RecordsRefused, check_stored_batch

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, TMP_SUFFIX)
_LOG_DIR_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)


@dataclass
class Problem:
    file: str
    kind: str  # framing, crc, offsets, records, index, timeindex, txnindex, snapshot, checkpoint
    message: str
    position: int | None = None  # byte in the file
    offset: int | None = None  # the record offset concerned, when one is


@dataclass
class Report:
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}


def check_records(buf: memoryview, position: int, header: RecordBatchHeader) -> str | None:
    """Why the records of the batch at ``position`` do not read, or None: produce validation's
    record walk over the batch as it is stored (``check_stored_batch``), so what produce accepted
    passes here and one definition of a well-formed batch serves both."""
    try:
        check_stored_batch(buf[position : position + header.size], header)
    except RecordsRefused as exc:
        return str(exc)
    return None


def verify(path: str | os.PathLike[str]) -> Report:
    """Check a log dir (holding partition directories) or a single partition directory."""
    root = Path(path)
    report = Report()
    if not root.is_dir():
        report.problems.append(Problem(str(root), "missing", "not a directory"))
        return report
    if parse_partition_dir(root.name) is not None and any(root.glob(f"*{LOG_SUFFIX}")):
        _verify_partition(root, report)
        return report
    for name in _LOG_DIR_CHECKPOINTS:
        _check_document(root / name, "checkpoint", parse_offset_checkpoint, report)
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and parse_partition_dir(entry.name) is not None:
            _verify_partition(entry, report)
    return report


def _check_document(path: Path, kind: str, parse: object, report: Report) -> None:
    if not path.exists():
        return
    try:
        parse(path.read_bytes())  # type: ignore[operator]
    except CheckpointError as exc:
        report.problems.append(Problem(str(path), kind, str(exc)))


@dataclass
class _Segment:
    base_offset: int
    path: Path
    # (position, header) of every batch whose framing held, in file order
    batches: list[tuple[int, RecordBatchHeader]] = field(default_factory=list)
    next_offset: int = 0


def _verify_partition(directory: Path, report: Report) -> None:
    report.partitions += 1
    names = sorted(p.name for p in directory.iterdir())
    report.notes += [
        f"{directory / n}: left by an interrupted operation; start-up clears it"
        for n in names
        if n.endswith(_LEFTOVER_SUFFIXES)
    ]
    bases = sorted(b for n in names if n.endswith(LOG_SUFFIX) and (b := offset_of_name(n)) is not None)
    expected = bases[0] if bases else 0
    for i, base in enumerate(bases):
        segment = _Segment(base, directory / f"{base:020d}{LOG_SUFFIX}", next_offset=base)
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        expected = _verify_segment(segment, max(expected, base), next_base, report)
        _verify_offset_index(segment, directory / f"{base:020d}{INDEX_SUFFIX}", report)
        _verify_time_index(segment, directory / f"{base:020d}{TIME_INDEX_SUFFIX}", report)
        _verify_txn_index(segment, directory / f"{base:020d}{TXN_INDEX_SUFFIX}", report)
    for name in names:
        if name.endswith(SNAPSHOT_SUFFIX):
            data = (directory / name).read_bytes()
            if not ProducerStateManager().load_snapshot(data, 0, 1 << 62):
                report.problems.append(Problem(str(directory / name), "snapshot", "unreadable or CRC mismatch"))
    _check_document(directory / LEADER_EPOCH_CHECKPOINT, "checkpoint", parse_epoch_checkpoint, report)
    _check_document(directory / PARTITION_METADATA, "checkpoint", parse_partition_metadata, report)


def _mapped(path: Path) -> Iterator[memoryview]:
    """The file's bytes, mapped read-only (the one iteration of this generator)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield memoryview(b"")
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                yield view
            finally:
                view.release()  # before the map closes, which refuses while a view is exported


def _verify_segment(segment: _Segment, expected: int, next_base: int | None, report: Report) -> int:
    """Walk the segment's batches; returns the offset the next batch in the log should reach."""
    report.segments += 1
    name = str(segment.path)
    for buf in _mapped(segment.path):
        size = len(buf)
        report.bytes += size
        position = 0
        while position < size:
            header = parse_header(buf, position) if size - position >= BATCH_HEADER_SIZE else None
            if header is None or position + header.size > size:
                reason = _framing_problem(buf, position, header)
                report.problems.append(
                    Problem(
                        name,
                        "framing",
                        f"{reason}: recovery would drop the last {size - position} bytes of the segment",
                        position,
                        expected,
                    )
                )
                break
            report.batches += 1
            report.records += max(header.records_count, 0)
            segment.batches.append((position, header))
            if not batch_crc_ok(buf, position, header):
                report.problems.append(Problem(name, "crc", "CRC-32C mismatch", position, header.base_offset))
            else:
                problem = check_records(buf, position, header)
                if problem is not None:
                    report.problems.append(Problem(name, "records", problem, position, header.base_offset))
            if header.base_offset < expected:
                report.problems.append(
                    Problem(
                        name,
                        "offsets",
                        f"batch at offset {header.base_offset} does not follow offset {expected - 1}",
                        position,
                        header.base_offset,
                    )
                )
            if (next_base is not None and header.last_offset >= next_base) or (
                header.last_offset - segment.base_offset > INT_MAX
            ):
                report.problems.append(
                    Problem(
                        name,
                        "offsets",
                        f"batch ending at offset {header.last_offset} lies outside the segment"
                        + (f" (the next segment starts at {next_base})" if next_base is not None else ""),
                        position,
                        header.base_offset,
                    )
                )
            expected = max(expected, header.last_offset + 1)
            segment.next_offset = max(segment.next_offset, header.last_offset + 1)
            position += header.size
    return expected


def _framing_problem(buf: memoryview, position: int, header: RecordBatchHeader | None) -> str:
    remaining = len(buf) - position
    if remaining < BATCH_HEADER_SIZE:
        return f"torn batch header ({remaining} of {BATCH_HEADER_SIZE} bytes)"
    if buf[position + 16] != 2:
        return f"not a v2 batch (magic byte {buf[position + 16]})"
    if header is None:
        return "malformed batch header (length or offset delta out of range)"
    return f"torn batch ({remaining} of its {header.size} bytes)"


def _entries(path: Path, entry: struct.Struct, kind: str, report: Report) -> list[tuple[int, ...]] | None:
    if not path.exists():
        report.problems.append(Problem(str(path), kind, "missing (the broker rebuilds it at start-up)"))
        return None
    data = path.read_bytes()
    if len(data) % entry.size:
        report.problems.append(Problem(str(path), kind, f"size {len(data)} is not a multiple of {entry.size}"))
        return None
    return [entry.unpack_from(data, i) for i in range(0, len(data), entry.size)]


def _verify_offset_index(segment: _Segment, path: Path, report: Report) -> None:
    entries = _entries(path, _OFFSET_ENTRY, "index", report)
    if entries is None:
        return
    starts = {position: header for position, header in segment.batches}
    previous: tuple[int, int] | None = None
    for i, (relative, position) in enumerate(entries):
        offset = segment.base_offset + relative
        where = i * _OFFSET_ENTRY.size
        if previous is not None and (relative <= previous[0] or position <= previous[1]):
            report.problems.append(Problem(str(path), "index", f"entry {i} does not rise", where, offset))
        header = starts.get(position)
        if header is None:
            report.problems.append(
                Problem(str(path), "index", f"entry {i} points at byte {position}, not a batch start", where, offset)
            )
        elif header.last_offset != offset:
            report.problems.append(
                Problem(
                    str(path),
                    "index",
                    f"entry {i} says offset {offset} but the batch at byte {position} ends at {header.last_offset}",
                    where,
                    offset,
                )
            )
        previous = (relative, position)


def _verify_time_index(segment: _Segment, path: Path, report: Report) -> None:
    entries = _entries(path, _TIME_ENTRY, "timeindex", report)
    if entries is None:
        return
    previous: tuple[int, int] | None = None
    headers = [header for _, header in segment.batches]
    walked = 0
    seen = -1  # the largest timestamp of the batches walked so far (entries rise, so one walk serves all)
    for i, (timestamp, relative) in enumerate(entries):
        offset = segment.base_offset + relative
        where = i * _TIME_ENTRY.size
        if previous is not None and (timestamp < previous[0] or relative < previous[1]):
            report.problems.append(Problem(str(path), "timeindex", f"entry {i} does not rise", where, offset))
        if not segment.base_offset <= offset < max(segment.next_offset, segment.base_offset + 1):
            report.problems.append(
                Problem(str(path), "timeindex", f"entry {i} names offset {offset}, outside the segment", where, offset)
            )
        else:
            while walked < len(headers) and headers[walked].base_offset <= offset:
                seen = max(seen, headers[walked].max_timestamp)
                walked += 1
            if timestamp > seen:
                report.problems.append(
                    Problem(
                        str(path),
                        "timeindex",
                        f"entry {i} says timestamp {timestamp} by offset {offset}; the batches hold at most {seen}",
                        where,
                        offset,
                    )
                )
        previous = (timestamp, relative)


def _verify_txn_index(segment: _Segment, path: Path, report: Report) -> None:
    if not path.exists():
        return  # only segments with an aborted transaction have one
    entries = _entries(path, _TXN_ENTRY, "txnindex", report)
    if entries is None:
        return
    last = -1
    for i, (version, _pid, first_offset, last_offset, _lso) in enumerate(entries):
        where = i * TransactionIndex.ENTRY_SIZE
        if version != 0:
            report.problems.append(Problem(str(path), "txnindex", f"entry {i} has version {version}", where))
        if last_offset <= last or first_offset > last_offset:
            report.problems.append(Problem(str(path), "txnindex", f"entry {i} does not rise", where, last_offset))
        if not segment.base_offset <= last_offset < max(segment.next_offset, segment.base_offset + 1):
            report.problems.append(
                Problem(str(path), "txnindex", f"entry {i}'s marker offset {last_offset} is outside the segment", where)
            )
        last = last_offset


def format_text(report: Report) -> str:
    lines = []
    for problem in report.problems:
        where = []
        if problem.position is not None:
            where.append(f"byte {problem.position}")
        if problem.offset is not None:
            where.append(f"offset {problem.offset}")
        lines.append(f"{problem.file}: {' '.join(where) + ': ' if where else ''}{problem.kind}: {problem.message}")
    lines += [f"note: {note}" for note in report.notes]
    lines.append(
        f"checked {report.partitions} partition(s), {report.segments} segment(s), {report.batches} batch(es), "
        f"{report.records} record(s), {report.bytes} bytes: "
        + ("no problems" if report.ok else f"{len(report.problems)} problem(s)")
    )
    return "\n".join(lines)
