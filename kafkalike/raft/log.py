"""The replicated log as the quorum sees it, and an in-memory version for tests and simulation.

The node appends and truncates through this interface; bytes are *written* at once and become
*durable* only when the driver flushes them (``flush``), which it does when the node asks
(:class:`~kafkalike.raft.node.FlushLog`) and reports back with ``RaftNode.durable``. A crash keeps
only durable bytes. A truncation is durable at once: Kafka truncates segment files in place, and a
crash must not resurrect a tail the node has already disowned (a node truncates only a tail that the
leader's log does not have, so nothing it acknowledged).

Offsets are dense from ``start_offset`` (0 until snapshots exist: the seam for KIP-630 is
``start_offset`` and ``snapshot_id``); batches are Kafka record batches (magic 2) whose
``partition_leader_epoch`` is the epoch of the leader that wrote them.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple, Protocol

from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.records import batch_crc_ok, iter_batches


class OffsetAndEpoch(NamedTuple):
    offset: int
    epoch: int


class LogBatch(NamedTuple):
    base_offset: int
    last_offset: int
    epoch: int
    data: bytes
    serial: int = 0  # order of writing, to tell which bytes a flush started before covers


class FlushToken(NamedTuple):
    end_offset: int
    serial: int


class RaftLogError(Exception):
    """An append that would break the log's order (wrong base offset, falling epoch)."""


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def durable_end_offset(self) -> int: ...
    @property
    def snapshot_id(self) -> OffsetAndEpoch | None: ...
    def last_fetched_epoch(self) -> int: ...
    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...
    def append(self, data: bytes) -> LogBatch: ...
    def truncate_to(self, offset: int) -> None: ...
    def read(self, offset: int, max_bytes: int) -> bytes: ...
    def flush(self, offset: int) -> None: ...


class MemoryRaftLog:
    """A :class:`RaftLog` in memory; ``crash`` drops what was written but not flushed."""

    def __init__(self) -> None:
        self._batches: list[LogBatch] = []
        self._bases: list[int] = []
        # (epoch, start offset) for each epoch in the log, rising: Kafka's leader epoch cache.
        self._epochs: list[OffsetAndEpoch] = []
        self._durable_end = 0
        self._serial = 0

    @property
    def start_offset(self) -> int:
        return 0

    @property
    def end_offset(self) -> int:
        return self._batches[-1].last_offset + 1 if self._batches else 0

    @property
    def durable_end_offset(self) -> int:
        return self._durable_end

    @property
    def snapshot_id(self) -> OffsetAndEpoch | None:
        return None

    @property
    def batches(self) -> list[LogBatch]:
        return self._batches

    def batch_index(self, offset: int) -> int:
        """The index in ``batches`` of the first batch at or after ``offset``."""
        return bisect.bisect_left(self._bases, offset)

    def last_fetched_epoch(self) -> int:
        return self._batches[-1].epoch if self._batches else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch at most ``epoch`` in the log and where it ends (where the next epoch
        starts, or the log end); (start offset, 0) when the log has no such epoch."""
        found = None
        for i, entry in enumerate(self._epochs):
            if entry.epoch > epoch:
                break
            found = i
        if found is None:
            return OffsetAndEpoch(self.start_offset, 0)
        next_start = self._epochs[found + 1].offset if found + 1 < len(self._epochs) else self.end_offset
        return OffsetAndEpoch(next_start, self._epochs[found].epoch)

    def append(self, data: bytes) -> LogBatch:
        """Append the whole batches of ``data`` (a fetch response may end with part of one, which is
        left out), the first at the log end; returns the last. Checks each batch's CRC first."""
        last = None
        try:
            batches = list(iter_batches(data, partial_ok=True))
        except ProtocolError as exc:
            raise RaftLogError(f"records do not parse: {exc}") from exc
        for pos, header in batches:
            if not batch_crc_ok(data, pos, header):
                raise RaftLogError(f"batch at {header.base_offset} fails its CRC")
        for pos, header in batches:
            if header.base_offset != self.end_offset:
                raise RaftLogError(f"batch at {header.base_offset} appended at log end {self.end_offset}")
            epoch = header.partition_leader_epoch
            if epoch < self.last_fetched_epoch():
                raise RaftLogError(f"batch epoch {epoch} below the log's last epoch {self.last_fetched_epoch()}")
            if not self._epochs or self._epochs[-1].epoch != epoch:
                self._epochs.append(OffsetAndEpoch(header.base_offset, epoch))
            self._serial += 1
            last = LogBatch(
                header.base_offset, header.last_offset, epoch, bytes(data[pos : pos + header.size]), self._serial
            )
            self._batches.append(last)
            self._bases.append(header.base_offset)
        if last is None:
            raise RaftLogError("append of no batches")
        return last

    def truncate_to(self, offset: int) -> None:
        """Drop every batch from the one holding ``offset`` on (batches are whole: the cut is at a
        batch boundary, as the leader's diverging offsets always are)."""
        keep = bisect.bisect_left(self._bases, offset)
        if keep < len(self._batches) and self._batches[keep].base_offset < offset:
            keep += 1
        del self._batches[keep:]
        del self._bases[keep:]
        end = self.end_offset
        while self._epochs and self._epochs[-1].offset >= end:
            self._epochs.pop()
        self._durable_end = min(self._durable_end, end)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``, at least one, then up to ``max_bytes``."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0 or i >= len(self._batches) or self._batches[i].last_offset < offset:
            return b""
        out = [self._batches[i].data]
        size = len(out[0])
        for batch in self._batches[i + 1 :]:
            if size + len(batch.data) > max_bytes:
                break
            out.append(batch.data)
            size += len(batch.data)
        return b"".join(out)

    def flush(self, offset: int) -> None:
        self._durable_end = max(self._durable_end, min(offset, self.end_offset))

    def flush_token(self) -> FlushToken:
        """What a flush started now would cover, for a flush that completes later."""
        return FlushToken(self.end_offset, self._serial)

    def complete_flush(self, token: FlushToken) -> None:
        """Make durable what ``token`` covered and the log still holds: batches written before it
        that no truncation has since replaced."""
        i = bisect.bisect_left(self._bases, self._durable_end)
        while i < len(self._batches):
            batch = self._batches[i]
            if batch.serial > token.serial or batch.last_offset >= token.end_offset:
                break
            self._durable_end = batch.last_offset + 1
            i += 1

    def crash(self) -> None:
        """Lose everything not flushed."""
        self.truncate_to(self._durable_end)
