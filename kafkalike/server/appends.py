"""Appends and rolls of a partition, with their file work on worker threads.

The replica layer appends in two steps (``Partition.append_as_leader``, then
``complete_append``); this runs them on the event loop with the fsyncs a flush needs, and the
files a segment roll needs, on a worker thread in between. Meanwhile ``write_in_flight`` is set
and the partition's next append waits for it (as Kafka's appends wait for the log's lock), so a
failed flush can cut its own append off alone.
"""

from __future__ import annotations

from collections.abc import Iterable

import trio

from kafkalike.log.errors import KafkaStorageError
from kafkalike.log.partition_log import RollNeeded
from kafkalike.log.storage import DeferredSyncs
from kafkalike.log.storage_errors import reporter
from kafkalike.protocol.records import RecordBatchHeader
from kafkalike.replica.partition import LeaderAppend, Partition
from kafkalike.server.clock import Clock
from kafkalike.server.waiters import PartitionWaiters


class PartitionWriter:
    def __init__(self, waiters: PartitionWaiters, clock: Clock) -> None:
        self.waiters = waiters
        self.clock = clock

    async def append(
        self,
        partition: Partition,
        records: bytearray | memoryview,
        *,
        log_append_time: bool,
        known_header: RecordBatchHeader | None = None,
    ) -> LeaderAppend:
        """Append a producer's batches as the partition's leader and make them visible.

        When flush.messages or flush.ms makes the append flush, its fsyncs run on a worker
        thread and the append counts (high watermark, waiters told, the caller's answer) only
        once they succeeded. An append that needs a new segment has its files made first
        (``roll``). Raises PartitionError (not the leader) and the log's errors
        (KafkaStorageError when the disk fails, and then nothing was appended). ``known_header``:
        ``records`` is one batch whose header validation read, not parsed again."""
        if partition.write_in_flight:
            await self.waiters.wait_idle(partition)
        syncs = DeferredSyncs()
        try:
            # An in-memory log rolls in place: it has no files to make.
            result = partition.append_as_leader(
                records,
                now_ms=self.clock.wall_ms(),
                log_append_time=log_append_time,
                syncs=syncs,
                defer_roll=partition.log.directory.on_disk,
                known_header=known_header,
            )
        except RollNeeded:
            await self.roll(partition)
            # Rolled (nothing ran in between): only a log changed meanwhile by another writer
            # (a transaction marker) can still need a roll, made here then.
            result = partition.append_as_leader(
                records,
                now_ms=self.clock.wall_ms(),
                log_append_time=log_append_time,
                syncs=syncs,
                known_header=known_header,
            )
        error: OSError | None = None
        if result.flush is not None and syncs:
            partition.write_in_flight = True
            try:
                with trio.CancelScope(shield=True):  # its outcome must be applied to the log
                    await trio.to_thread.run_sync(syncs.run)
            except OSError as exc:
                error = exc
            finally:
                self._done(partition)
        return partition.complete_append(result, error, self.clock.wall_ms())

    async def append_as_follower(self, partition: Partition, records: bytes | memoryview) -> int:
        """Append a leader's batches to the partition this broker follows (their offsets and
        epochs kept), with a flush's fsyncs and a roll's files off the loop as for a leader's
        append; the offset after the last batch appended. Raises the log's errors."""
        if partition.write_in_flight:
            await self.waiters.wait_idle(partition)
        syncs = DeferredSyncs()
        try:
            result = partition.append_as_follower(
                records, now_ms=self.clock.wall_ms(), syncs=syncs, defer_roll=partition.log.directory.on_disk
            )
        except RollNeeded as needed:
            # Past a gap (a compacted leader's), the new segment starts at the append's first offset.
            await self.roll(partition, needed.base_offset)
            result = partition.append_as_follower(records, now_ms=self.clock.wall_ms(), syncs=syncs)
        error: OSError | None = None
        if result.flush is not None and syncs:
            partition.write_in_flight = True
            try:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(syncs.run)
            except OSError as exc:
                error = exc
            finally:
                self._done(partition)
        partition.complete_follower_append(result, error, self.clock.wall_ms())
        return partition.log_end_offset

    async def roll(self, partition: Partition, base_offset: int | None = None) -> None:
        """A new active segment for the partition's log, its files made on a worker thread while
        the partition's next append waits (as behind a flush). KafkaStorageError if they cannot
        be made: then the log is as it was, and the next append tries again."""
        plog = partition.log
        prepared = plog.prepare_roll(base_offset)
        if prepared is None:
            return
        partition.write_in_flight = True
        try:
            with trio.CancelScope(shield=True):  # the files must be installed or discarded
                try:
                    await trio.to_thread.run_sync(prepared.create)
                    installed = plog.complete_roll(prepared, self.clock.wall_ms())
                except OSError as exc:
                    raise plog.storage_error("roll of", exc, self.clock.wall_ms()) from exc
                if installed is None:
                    await trio.to_thread.run_sync(prepared.discard)
        finally:
            self._done(partition)

    async def roll_for_retention(self, partitions: Iterable[Partition], unlinks: DeferredSyncs) -> int:
        """Partitions whose every segment retention would delete: the active one too, once a
        new one is rolled (off the loop, in the partition's append order), as Kafka does. The
        segments deleted; their files' unlinks left in ``unlinks``."""
        deleted = 0
        for partition in [p for p in partitions if p.log.roll_for_retention]:
            await self.wait_idle(partition)
            if partition.log.closed:  # deleted meanwhile
                continue
            try:
                await self.roll(partition)
                deleted += partition.log.apply_retention(self.clock.wall_ms(), unlinks)
            except KafkaStorageError:  # reported; the segments stay for the next round
                pass
            except OSError as exc:
                reporter.report("retention of", partition.directory_path, exc, self.clock.wall_ms())
        return deleted

    async def wait_idle(self, partition: Partition) -> None:
        """Until no append's or roll's file work is in flight on the partition."""
        if partition.write_in_flight:
            await self.waiters.wait_idle(partition)

    def _done(self, partition: Partition) -> None:
        partition.write_in_flight = False
        partition.notify_progress()
