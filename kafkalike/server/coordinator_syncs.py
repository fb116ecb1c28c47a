"""The fsyncs of a coordinator's internal topic, on worker threads (``kafkalike.log.coordinator_log.SyncTracker``).

Rules:

- A coordinator call appends its records on the event loop and changes its state there, as
  before; the caller answers only once ``wait(appends)`` says they are durable.
- One task runs each partition's syncs in turn (``run``): the appends made while one sync is
  on its thread go into the next, so a later write is never durable before an earlier one.
- A failed sync cuts the partition's log back to its durable end and has the coordinator
  reload from its log (the tracker's ``on_cut``); every append the cut took answers False.
- Storage without a disk never waits for a thread. Until ``run`` has started (start-up, or a
  broker that is not serving) a waiter makes the sync itself, on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import trio

from kafkalike.log.coordinator_log import Appended, SyncTracker
from kafkalike.log.partition_log import FlushTicket

log = logging.getLogger("kafkalike.coordinator_syncs")


class CoordinatorSyncs:
    def __init__(
        self, on_cut: Callable[[int], None], on_durable: Callable[[int], None], wall_ms: Callable[[], int]
    ) -> None:
        self._wall_ms = wall_ms
        self.tracker = SyncTracker(on_cut, on_durable, on_behind=self._on_behind)
        self._changed = trio.Event()  # set (and replaced) whenever a sync completed or failed
        self._wakeup = trio.Event()
        self._flushing: set[int] = set()
        self._running = False

    def _on_behind(self, partition: int) -> None:
        self._wakeup.set()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Start a sync task for each partition with appends to make durable."""
        async with trio.open_nursery() as nursery:
            self._running = True
            task_status.started()
            try:
                while True:
                    self._wakeup = trio.Event()
                    for partition in self.tracker.behind():
                        if partition not in self._flushing:
                            self._flushing.add(partition)
                            nursery.start_soon(self._sync, partition)
                    await self._wakeup.wait()
            finally:
                self._running = False

    async def _sync(self, partition: int) -> None:
        try:
            while partition in self.tracker.behind():
                state = self.tracker.partitions[partition]
                before = (state.durable_end, state.cuts)
                syncs, ticket = self.tracker.prepare(partition)
                error: OSError | None = None
                if syncs and not isinstance(ticket, OSError):
                    with trio.CancelScope(shield=True):  # its outcome must reach the log
                        try:
                            await trio.to_thread.run_sync(syncs.run)
                        except OSError as exc:
                            error = exc
                self._complete(partition, ticket, error)
                if (state.durable_end, state.cuts) == before:  # nothing moved (a closed log): stop
                    log.warning("the sync of coordinator partition %d made no progress", partition)
                    return
        finally:
            self._flushing.discard(partition)

    def _complete(self, partition: int, ticket: FlushTicket | OSError, error: OSError | None) -> None:
        try:
            self.tracker.complete(partition, ticket, error, self._wall_ms())
        finally:
            changed, self._changed = self._changed, trio.Event()
            changed.set()

    def abandon(self, partition: int) -> None:
        """The partition's shard was unloaded: its waiting appends answer False now."""
        self.tracker.abandon(partition)
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    def sync_here(self, partition: int) -> None:
        """The sync on the event loop, for a waiter while no ``run`` task is there to make it."""
        syncs, ticket = self.tracker.prepare(partition)
        error: OSError | None = None
        if not isinstance(ticket, OSError):
            try:
                syncs.run()
            except OSError as exc:
                error = exc
        self._complete(partition, ticket, error)

    async def wait(self, appends: Sequence[Appended]) -> bool:
        """Until each append is durable (True) or one of them was cut (False)."""
        while True:
            states = [self.tracker.is_durable(a) for a in appends]
            if False in states:
                return False
            if None not in states:
                return True
            if not self._running:
                for partition in {a.partition for a, state in zip(appends, states, strict=True) if state is None}:
                    self.sync_here(partition)
                return all(self.tracker.is_durable(a) for a in appends)
            changed = self._changed
            await changed.wait()
