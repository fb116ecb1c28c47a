"""Deleting old data: retention by time and size, DeleteRecords, and the delayed file deletion.

Kept apart from ``PartitionLog`` (which mixes this in) because it only ever removes whole segments
from the front of the log and moves the log start offset; it never touches the append path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkalike.log.config import LogConfig
from kafkalike.log.epoch_cache import LeaderEpochCache
from kafkalike.log.errors import OffsetOutOfRange
from kafkalike.log.loader import snapshot_offsets
from kafkalike.log.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager
from kafkalike.log.segment import LogSegment, segment_name
from kafkalike.log.storage import IMMEDIATE, DeferredSyncs, LogDirectory, Syncs
from kafkalike.log.storage_errors import reporter

SegmentPredicate = Callable[[LogSegment, "LogSegment | None"], bool]


class RetentionMixin:
    directory: LogDirectory
    config: LogConfig
    segments: list[LogSegment]
    _bases: list[int]
    epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    _log_start_offset: int
    _log_end_offset: int
    _high_watermark: int
    _stop_cache: tuple[int, int, int] | None
    _pending_deletes: list[tuple[int, LogSegment]]
    roll_for_retention: bool
    swapping: bool

    if TYPE_CHECKING:

        def roll(self, now_ms: int) -> LogSegment: ...

        def _ensure_open(self) -> None: ...

    def apply_retention(self, now_ms: int, syncs: Syncs = IMMEDIATE) -> int:
        """Kafka's deleteOldSegments: segments wholly below the log start offset, then (for
        cleanup.policy=delete) by ``retention.ms`` against each segment's largest timestamp and by
        ``retention.bytes``. Also finishes due delayed deletions and expires idle producers.
        Returns the number of segments deleted.

        A ``DeferredSyncs`` defers the renames to ``.deleted`` and the unlinks to a worker
        thread (the segment list changes here, at once; a rename that fails there leaves its
        file under its name, below the log start, for retention after the next start). It also
        never rolls: when every segment is due, the active one stays and ``roll_for_retention``
        is set, for the caller to roll (off the loop) and call this again."""
        self._ensure_open()
        self.roll_for_retention = False
        if self.swapping:  # a compaction swap is renaming segments: the next round
            return 0
        self.delete_due_files(now_ms, syncs)
        self.producer_state.remove_expired(now_ms, self.config.producer_id_expiration_ms)
        deleted = self._delete_log_start_breached(now_ms, syncs)
        if not self.config.deletes:
            return deleted
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_segments(lambda s, _n: now_ms - s.largest_timestamp > retention_ms, now_ms, syncs)
        if self.config.retention_bytes >= 0:
            excess = sum(s.size for s in self.segments) - self.config.retention_bytes

            def over_size(segment: LogSegment, _next: LogSegment | None) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_segments(over_size, now_ms, syncs)
        return deleted

    def delete_records_before(self, offset: int, *, now_ms: int, syncs: Syncs = IMMEDIATE) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (at most the high watermark)
        and drop the segments now wholly below it. Returns the new log start offset. ``syncs``
        may defer the file work, as ``apply_retention``'s."""
        self._ensure_open()
        if offset > self._high_watermark or offset < 0:
            raise OffsetOutOfRange(offset, self._log_start_offset, self._high_watermark)
        if offset > self._log_start_offset:
            self._move_log_start(offset, defer=isinstance(syncs, DeferredSyncs))
            if self.swapping:  # the files go with a later retention round
                return self._log_start_offset
            try:
                self._delete_log_start_breached(now_ms, syncs)
            except OSError as exc:
                # The records are deleted (the log start moved); retention removes their files later.
                reporter.report("segment deletion in", self.directory.path, exc, now_ms)
        return self._log_start_offset

    def _delete_log_start_breached(self, now_ms: int, syncs: Syncs = IMMEDIATE) -> int:
        start = self._log_start_offset
        return self._delete_segments(lambda _s, n: n is not None and n.base_offset <= start, now_ms, syncs)

    def _delete_segments(self, predicate: SegmentPredicate, now_ms: int, syncs: Syncs = IMMEDIATE) -> int:
        """Delete the longest prefix of segments matching ``predicate`` that lies below the high
        watermark; the active segment too, after rolling a fresh one, as Kafka does (with a
        ``DeferredSyncs``: see ``apply_retention``)."""
        count = 0
        for i, segment in enumerate(self.segments):
            following = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = following.base_offset if following is not None else self._log_end_offset
            if following is None and segment.size == 0:
                break
            if self._high_watermark < upper or not predicate(segment, following):
                break
            count += 1
        if count == len(self.segments):
            if isinstance(syncs, DeferredSyncs):
                self.roll_for_retention = True
                count -= 1
            else:
                self.roll(now_ms)
        if count == 0:
            return 0
        doomed = self.segments[:count]
        deleted = 0
        try:
            for segment in doomed:
                self._schedule_delete(segment, now_ms, syncs)  # a rename: a disk error stops the deletion here
                deleted += 1
        finally:
            # The segments renamed so far are gone, the others stay live for the next round.
            if deleted:
                del self.segments[:deleted]
                del self._bases[:deleted]
                self._stop_cache = None
                self._move_log_start(self.segments[0].base_offset, defer=isinstance(syncs, DeferredSyncs))
        for snapshot in snapshot_offsets(self.directory):
            if snapshot < self.segments[0].base_offset:
                syncs.unlink(self.directory, segment_name(snapshot, SNAPSHOT_SUFFIX))
        return count

    def _move_log_start(self, offset: int, *, defer: bool = False) -> None:
        """``defer``: the epoch checkpoint is rewritten by the next flush (off the loop)."""
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.epoch_cache.truncate_from_start(offset, defer=defer and self.directory.on_disk)

    def _schedule_delete(self, segment: LogSegment, now_ms: int, syncs: Syncs = IMMEDIATE) -> None:
        """Rename to ``.deleted`` now (or on the worker thread ``syncs`` runs on), remove after
        ``file.delete.delay.ms`` so in-flight reads (file ranges already handed to the network
        layer) can finish."""
        segment.mark_deleted(syncs)
        self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))

    def delete_due_files(self, now_ms: int, syncs: Syncs = IMMEDIATE) -> int:
        """Remove the files of segments whose delay is up; one the disk refuses waits for the next round."""
        due = [entry for entry in self._pending_deletes if entry[0] <= now_ms]
        for entry in due:
            entry[1].delete_files(syncs)
            self._pending_deletes.remove(entry)
        return len(due)
