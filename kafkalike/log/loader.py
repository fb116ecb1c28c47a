"""Opening a partition directory: Kafka's LogLoader.

Steps, in Kafka's order: clear leftovers of interrupted operations (``*.deleted``, ``*.cleaned``,
``*.tmp``, and ``*.swap`` files, which finish their swap); open every ``%020d.log`` segment; after
an unclean shutdown revalidate every segment from the recovery point on (framing, CRC, rising
offsets), truncating a torn or corrupt tail and dropping the segments after it; otherwise trust the
indexes unless one is missing or insane, which also forces that segment's recovery. Then rebuild the
leader epoch cache (checkpoint, plus epochs seen by recovery) and the producer state (latest usable
``.snapshot`` at or below the log end, plus the batches after it). When segments were recovered, the
producer state is replayed from a snapshot at or below the first of them instead, and the
transaction indexes of that segment and every later one are rebuilt from the transactions the
replay sees aborted (Kafka rebuilds them in LogSegment.recover, with the same producer state).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkalike.log.config import LogConfig
from kafkalike.log.epoch_cache import LeaderEpochCache
from kafkalike.log.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager, parse_control_marker
from kafkalike.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    LogSegment,
    iter_batches,
    records_in_headers,
    segment_name,
)
from kafkalike.log.storage import LogDirectory
from kafkalike.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from kafkalike.protocol.records import RecordBatchHeader

log = logging.getLogger("kafkalike.log.loader")
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
TMP_SUFFIX = ".tmp"


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    recovered_segments: int = 0
    truncated_bytes: int = 0
    # The base offset of the first recovered segment: transaction indexes are rebuilt from there.
    rebuild_txn_index_from: int | None = None
    deleted_segments: list[int] = field(default_factory=list)


def offset_of_name(name: str) -> int | None:
    """The offset a ``%020d.<suffix>`` file is named after, or None for other names."""
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def snapshot_offsets(directory: LogDirectory) -> list[int]:
    return sorted(
        offset
        for name in directory.list_names()
        if name.endswith(SNAPSHOT_SUFFIX) and (offset := offset_of_name(name)) is not None
    )


def load_log(
    directory: LogDirectory,
    config: LogConfig,
    now_ms: int,
    *,
    clean_shutdown: bool,
    recovery_point: int | None,
    log_start_offset: int | None,
    producer_state: ProducerStateManager,
) -> LoadedLog:
    _clear_leftovers(directory)
    bases = sorted(
        offset
        for name in directory.list_names()
        if name.endswith(LOG_SUFFIX) and (offset := offset_of_name(name)) is not None
    )
    segments = [LogSegment.open_existing(directory, base, config) for base in bases]
    epochs_seen: list[tuple[int, int]] = []
    loaded = LoadedLog(segments, 0, 0, LeaderEpochCache(directory), producer_state)
    _recover_segments(loaded, clean_shutdown, recovery_point or 0, epochs_seen, now_ms)
    start = max(log_start_offset or 0, segments[0].base_offset if segments else 0)
    if not segments or start > segments[-1].next_offset:
        # Checkpointed log start beyond everything that survived (DeleteRecords, then lost data):
        # start afresh there, as Kafka's truncateFullyAndStartAt.
        for segment in segments:
            segment.delete_files()
        segments[:] = [LogSegment.create(directory, start, config, now_ms)]
        directory.sync()
    log_end = segments[-1].next_offset
    loaded.log_start_offset = start
    loaded.recovery_point = log_end if clean_shutdown else min(recovery_point or 0, log_end)
    _load_epoch_cache(loaded, epochs_seen)
    load_producer_state(loaded, directory, config, now_ms, rebuild_txn_index_from=loaded.rebuild_txn_index_from)
    return loaded


def _recover_segments(
    loaded: LoadedLog, clean_shutdown: bool, recovery_point: int, epochs: list[tuple[int, int]], now_ms: int
) -> None:
    segments = loaded.segments

    def track_epoch(_pos: int, header: RecordBatchHeader) -> None:
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not epochs or epoch > epochs[-1][0]):
            epochs.append((epoch, header.base_offset))

    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        unflushed = next_base is None or next_base > recovery_point
        if (clean_shutdown or not unflushed) and segment.load():
            continue
        truncated = segment.recover(track_epoch)
        if loaded.rebuild_txn_index_from is None:
            loaded.rebuild_txn_index_from = segment.base_offset
        loaded.recovered_segments += 1
        loaded.truncated_bytes += truncated
        if truncated:
            _warn_truncated(segment, segments[i + 1 :])
        if truncated and i + 1 < len(segments):
            # Everything after a corrupt batch is suspect: Kafka drops the following segments too.
            for later in segments[i + 1 :]:
                loaded.deleted_segments.append(later.base_offset)
                later.delete_files()
            del segments[i + 1 :]
            break


def _warn_truncated(segment: LogSegment, later: list[LogSegment]) -> None:
    """One WARN per cut: data is lost here, and an operator must be able to see how much."""
    cut = segment.truncation
    assert cut is not None
    name = os.path.join(segment.directory.path, segment_name(segment.base_offset, LOG_SUFFIX))
    log.warning(
        "recovery truncated %s at byte %d (offset %d): %s; dropped %d bytes (%d records)",
        name,
        cut.position,
        cut.offset,
        cut.reason,
        cut.bytes_dropped,
        cut.records_dropped,
    )
    if later:
        log.warning(
            "recovery deleted the %d segment(s) after it, from offset %d on: %d more bytes (%d records)",
            len(later),
            later[0].base_offset,
            sum(s.size for s in later),
            sum(records_in_headers(s.file, 0, s.size) for s in later),
        )


def _load_epoch_cache(loaded: LoadedLog, epochs_seen: list[tuple[int, int]]) -> None:
    directory = loaded.segments[0].directory
    cache, usable = LeaderEpochCache.load(directory)
    if not usable:
        cache = LeaderEpochCache(directory)
        epochs_seen = []

        def track(_pos: int, header: RecordBatchHeader) -> None:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (not epochs_seen or epoch > epochs_seen[-1][0]):
                epochs_seen.append((epoch, header.base_offset))

        scan_log(loaded.segments, loaded.log_start_offset, track)
    for epoch, offset in epochs_seen:
        if cache.latest_epoch is None or epoch > cache.latest_epoch:
            cache.assign(epoch, offset)
    cache.truncate_from_end(loaded.segments[-1].next_offset)
    cache.truncate_from_start(loaded.log_start_offset)
    loaded.epoch_cache = cache


def load_producer_state(
    loaded: LoadedLog,
    directory: LogDirectory,
    config: LogConfig,
    now_ms: int,
    *,
    rebuild_txn_index_from: int | None = None,
) -> None:
    """Latest readable snapshot at or below the log end, then the batches after it (also used
    after a truncation, which may have cut batches the current state already reflects).

    With ``rebuild_txn_index_from`` the snapshot must lie at or below that offset too, and the
    transaction index of every segment from there on is rebuilt during the replay.
    """
    state = loaded.producer_state
    log_end = loaded.segments[-1].next_offset
    limit = log_end if rebuild_txn_index_from is None else min(log_end, rebuild_txn_index_from)
    replay_from = loaded.log_start_offset
    state.clear()
    for offset in reversed(snapshot_offsets(directory)):
        name = segment_name(offset, SNAPSHOT_SUFFIX)
        if offset > limit:
            if offset > log_end:
                directory.delete(name)  # beyond the recovered log: useless
            continue
        data = directory.read_document(name)
        if data is None or not state.load_snapshot(data, now_ms, config.producer_id_expiration_ms):
            directory.delete(name)  # unreadable
            continue
        replay_from = max(offset, loaded.log_start_offset)
        break
    rebuild_from = log_end + 1 if rebuild_txn_index_from is None else rebuild_txn_index_from
    for segment in loaded.segments:
        if segment.base_offset >= rebuild_from:
            segment.txn_index.reset()

    def replay(pos: int, header: RecordBatchHeader, segment: LogSegment) -> None:
        marker = None
        if header.is_control and header.producer_id >= 0:
            marker = parse_control_marker(segment.file.read(pos, header.size), 0, header)
        completed = state.replay(header, marker)
        if completed is not None and completed.is_aborted and segment.base_offset >= rebuild_from:
            first_unstable = state.first_unstable_offset()
            lso = completed.last_offset + 1 if first_unstable is None else first_unstable
            segment.txn_index.append(
                AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
            )

    scan_log(loaded.segments, replay_from, None, replay)


def scan_log(
    segments: list[LogSegment],
    from_offset: int,
    on_batch: Callable[[int, RecordBatchHeader], None] | None,
    on_batch_in: Callable[[int, RecordBatchHeader, LogSegment], None] | None = None,
) -> None:
    """Walk the headers of every batch holding an offset >= ``from_offset``, in log order."""
    for segment in segments:
        if segment.next_offset <= from_offset:
            continue
        found = segment.translate_offset(from_offset) if from_offset > segment.base_offset else None
        start = found[0] if found else 0
        for pos, header in iter_batches(segment.file, start, segment.size):
            if on_batch is not None:
                on_batch(pos, header)
            if on_batch_in is not None:
                on_batch_in(pos, header, segment)


def _clear_leftovers(directory: LogDirectory) -> None:
    names = directory.list_names()
    # Kafka (KAFKA-6264): a .swap at or above a .cleaned file's offset belongs to an operation that
    # had not finished writing, so it is dropped rather than swapped in.
    min_cleaned = min(
        (o for n in names if n.endswith(CLEANED_SUFFIX) and (o := offset_of_name(n)) is not None), default=None
    )
    for name in names:
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, TMP_SUFFIX)):
            directory.delete(name)
        elif name.endswith(SWAP_SUFFIX):
            offset = offset_of_name(name)
            complete = min_cleaned is None or (offset is not None and offset < min_cleaned)
            if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and complete:
                _complete_swap(directory, name)
            else:
                directory.delete(name)  # index swaps (recovery rebuilds indexes), or an unfinished one
    existing = set(directory.list_names())
    for name in existing:
        base = offset_of_name(name)
        orphan = base is not None and segment_name(base, LOG_SUFFIX) not in existing
        if orphan and name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
            directory.delete(name)


def _complete_swap(directory: LogDirectory, name: str) -> None:
    """A ``.log.swap`` is a finished replacement (log compaction's output) whose rename was
    interrupted: as Kafka, drop the segments it replaces and put it in place."""
    base = offset_of_name(name)
    if base is None:
        directory.delete(name)
        return
    swap = directory.open_file(name, create=False)
    next_offset = base
    for _pos, header in iter_batches(swap, 0, swap.size):
        next_offset = header.last_offset + 1
    swap.close()
    for other in directory.list_names():
        offset = offset_of_name(other)
        if offset is not None and other.endswith(SEGMENT_SUFFIXES) and base <= offset < max(next_offset, base + 1):
            directory.delete(other)
    directory.rename(name, segment_name(base, LOG_SUFFIX))
