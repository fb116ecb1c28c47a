"""The quorum's file-backed log under the Raft simulation: a FileRaftLog in a real directory with
what the simulation asks of a log besides the node's interface (flushes that complete later, a
crash that loses what was not fsynced, the batches listed for the invariants).

A crash here is a power loss: the segment files are cut back to the durable end (the bytes after it
were only in the page cache), then the directory is opened again, as a restarted node does, so
that kafkalike.log's recovery, not this class, decides what the log holds afterwards.
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path

from kafkalike.protocol.records import iter_batches
from kafkalike.raft.file_log import FileRaftLog, PreparedFlush
from kafkalike.raft.log import LogBatch, OffsetAndEpoch


class SimFileRaftLog(FileRaftLog):
    """:class:`FileRaftLog` with the simulation's extras (see the module docstring)."""

    installed_snapshots: int
    crashes_with_a_lost_tail: int  # crashes that cut written bytes off the files
    _directory: Path
    _pending: list[PreparedFlush]

    @classmethod
    def create(cls, directory: str | os.PathLike[str]) -> SimFileRaftLog:
        opened = FileRaftLog.open(directory, now_ms=0)
        log = cls(opened.partition_log, 0)
        log._directory = Path(directory)
        log._pending = []
        log.installed_snapshots = 0
        log.crashes_with_a_lost_tail = 0
        return log

    @property
    def batches(self) -> list[LogBatch]:
        if self.end_offset == self.start_offset:
            return []
        data = self.read(self.start_offset, 1 << 30)
        return [
            LogBatch(h.base_offset, h.last_offset, h.partition_leader_epoch, bytes(data[pos : pos + h.size]))
            for pos, h in iter_batches(data)
        ]

    def batch_index(self, offset: int) -> int:
        return bisect.bisect_left([b.base_offset for b in self.batches], offset)

    def flush_token(self) -> PreparedFlush:
        prepared = self.prepare_flush()
        self._pending.append(prepared)
        return prepared

    def complete_flush(self, prepared: PreparedFlush) -> None:
        """The flush's fsyncs run now (its completion event), then it counts."""
        if prepared in self._pending:
            self._pending.remove(prepared)
            prepared.syncs.run()
        super().complete_flush(prepared)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> bool:
        self.installed_snapshots += 1
        return super().install_snapshot(snapshot_id, data)

    def crash(self) -> None:
        """Power lost: flushes under way never ran, and nothing after the durable end is left."""
        for prepared in self._pending:
            prepared.syncs.discard()
        self._pending.clear()
        log = self.partition_log
        durable = self.durable_end_offset
        cut: tuple[str, int] | None = None
        doomed: list[str] = []
        if durable < self.end_offset:
            self.crashes_with_a_lost_tail += 1
            first = log.read(durable, 0).ranges[0]
            assert first.path is not None
            cut = (first.path, first.position)
            doomed = [s.file.path for s in log.segments if s.base_offset > durable and s.file.path is not None]
        log.close()
        if cut is not None:
            os.truncate(cut[0], cut[1])
        for path in doomed:
            os.unlink(path)
        reopened = FileRaftLog.open(self._directory, now_ms=0)
        self._log = reopened.partition_log
        self._snapshots = reopened._snapshots
