"""The leader epoch cache: which offset each leader epoch started at.

Persisted as ``leader-epoch-checkpoint`` in the partition directory, Kafka's checkpoint format
(version line ``0``, entry count, then ``<epoch> <start offset>`` lines, rising in both). It is
rewritten only when an epoch starts or the log is truncated at either end, so it costs nothing per
append, and made durable by the log's next flush. It answers OffsetForLeaderEpoch and ListOffsets' leader epochs.
"""

from __future__ import annotations

import contextlib
from bisect import bisect_left, bisect_right

from kafkalike.log.checkpoint import CheckpointError, format_epoch_checkpoint, parse_epoch_checkpoint
from kafkalike.log.storage import LogDirectory

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: LogDirectory | None) -> None:
        self._directory = directory
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        # Rewrites of the checkpoint made / made durable. A rewrite is not fsynced when it is
        # made (an append must not wait for the disk; Kafka 3.7 made the same change, KAFKA-15046):
        # the log's next flush syncs it. A crash before that can leave the old, a torn or no file:
        # the loader then cuts the old entries to the recovered log, or rebuilds them from it.
        self.changes = 0
        self.synced_changes = 0
        # The file may hold older entries: a rewrite failed (the disk), or was left (``defer``)
        # for the log's next flush to write, on a worker thread. ``modifications`` counts every
        # change, so that flush knows whether what it wrote is still the latest.
        self.unwritten = False
        self.modifications = 0

    @classmethod
    def load(cls, directory: LogDirectory) -> tuple[LeaderEpochCache, bool]:
        """The cache from the checkpoint, and whether the checkpoint was usable."""
        cache = cls(directory)
        data = directory.read_document(LEADER_EPOCH_CHECKPOINT)
        if data is None:
            return cache, False
        try:
            entries = parse_epoch_checkpoint(data)
        except CheckpointError:
            return cache, False
        for epoch, offset in entries:
            if (
                epoch < 0
                or offset < 0
                or (cache._epochs and (epoch <= cache._epochs[-1] or offset < cache._offsets[-1]))
            ):
                return cls(directory), False
            cache._epochs.append(epoch)
            cache._offsets.append(offset)
        return cache, True

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def assign(self, epoch: int, start_offset: int, *, defer: bool = False) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns True when the cache changed.
        With ``defer`` the checkpoint is left for the log's next flush (``unwritten``).

        Like Kafka, entries that would break monotonicity (a same-or-later epoch, or a start offset
        at or past the new one) are dropped first: they belong to a leader whose log was truncated.
        """
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and self._epochs[-1] == epoch and self._offsets[-1] <= start_offset:
            return False
        before = self._epochs[:], self._offsets[:]
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        if defer:
            self._defer()
            return True
        try:
            self._persist()
        except OSError:
            self._epochs, self._offsets = before  # not on disk, so not assigned: the next append retries
            raise
        return True

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at ``offset`` was written in, or -1 if unknown."""
        i = bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (largest epoch <= requested, start offset of the next epoch).

        For the latest epoch the end offset is the log end offset; for an epoch newer than any known
        or when there is no epoch information, (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = higher - 1
        if floor < 0:
            # Older than anything known: the start of the first known epoch is the best answer.
            return requested_epoch, self._offsets[higher]
        return self._epochs[floor], self._offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was truncated there)."""
        keep = bisect_left(self._offsets, end_offset)
        if keep < len(self._offsets):
            del self._epochs[keep:]
            del self._offsets[keep:]
            self._persist_later_on_error()

    def truncate_from_start(self, start_offset: int, *, defer: bool = False) -> None:
        """Forget epochs wholly below ``start_offset``; the one covering it now starts there.
        With ``defer`` the checkpoint is left for the log's next flush (``unwritten``)."""
        floor = bisect_right(self._offsets, start_offset) - 1
        if floor < 0 or (floor == 0 and self._offsets[0] == start_offset):
            return
        del self._epochs[:floor]
        del self._offsets[:floor]
        self._offsets[0] = start_offset
        if defer:
            self._defer()
        else:
            self._persist_later_on_error()

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        self._persist_later_on_error()

    def write_if_behind(self) -> None:
        """Rewrite the checkpoint if a rewrite failed or was deferred since (the log's flush
        calls this first, or ``checkpoint_bytes`` for a write on a worker thread)."""
        if self.unwritten:
            self._persist()

    def checkpoint_bytes(self) -> bytes:
        return format_epoch_checkpoint(self.entries())

    def written_durably(self, modifications: int) -> None:
        """A flush wrote ``checkpoint_bytes()`` of ``modifications`` durably (a worker thread)."""
        if modifications == self.modifications and self.unwritten:
            self.unwritten = False
            self.changes += 1
            self.synced_changes = self.changes

    def _defer(self) -> None:
        if self._directory is not None:
            self.modifications += 1
            self.unwritten = True

    def _persist_later_on_error(self) -> None:
        # A checkpoint left with entries beyond the log's ends is harmless: the loader cuts them
        # to the recovered log. So a cut need not fail for the disk; the next flush writes it.
        with contextlib.suppress(OSError):
            self._persist()

    def _persist(self) -> None:
        if self._directory is None:
            return
        self.modifications += 1
        try:
            self._directory.write_document(
                LEADER_EPOCH_CHECKPOINT, format_epoch_checkpoint(self.entries()), durable=False
            )
        except OSError:
            self.unwritten = True
            raise
        self.unwritten = False
        self.changes += 1
