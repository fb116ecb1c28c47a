"""Transaction markers on their way to the partition leaders (Kafka's TransactionMarkerChannelManager).

Rules, as Kafka's:

- A marker job's partitions are routed by their leader in the published metadata: this broker's
  own are written here, the others queued for their leader. Each destination has one queue and
  one sender task; it takes *everything* queued for that broker and sends it in one
  WriteTxnMarkers request (one call to ``write_markers`` here, one flush for all of them), so N
  transactions ending together cost one request per broker, not N.
- A partition the metadata no longer has (its topic deleted) is answered
  UNKNOWN_TOPIC_OR_PARTITION at once: the coordinator drops it from the transaction. One whose
  leader is not known now (no leader, or a leader without a live endpoint on the inter-broker
  listener) waits in the unknown-destination queue, routed again whenever the metadata changes.
- An answer's written (or no longer needed) partitions are reported to the shard; the failed
  ones are routed again at once with the metadata of now. Those that go to another broker now
  are sent there without waiting; those whose leader did not change wait for the next metadata
  change, or the destination's backoff (Kafka's reconnect backoff: 50 ms doubling to 1 s,
  reset by an answer), whichever comes first: a broker cut off or behind on its metadata gets
  them again as soon as it answers, without a request per marker meanwhile.
- A job is dropped, never sent nor reported, once its shard is unloaded or the transaction is
  no longer the one preparing (a reload found it and made jobs of its own).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import trio

from kafkalike.coordinator import ShardSlot
from kafkalike.protocol.errors import ErrorCode
from kafkalike.txn import MarkerJob, TopicPartition, TransactionCoordinator
from kafkalike.txn.coordinator import MARKER_DONE

if TYPE_CHECKING:
    from kafkalike.server.txn_service import MarkerEntry

log = logging.getLogger("kafkalike.transactions")
E = ErrorCode
RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms
RECONNECT_BACKOFF_MAX_MS = 1000  # Kafka's reconnect.backoff.max.ms
UNKNOWN = -1  # the unknown-destination queue's key
MAX_QUEUED = 100_000  # markers queued per destination at most (beyond: the shard retries them later)

Slot = ShardSlot[TransactionCoordinator]
Answer = dict[TopicPartition, ErrorCode]


@dataclass
class Queued:
    """Some partitions of one job, waiting for one destination."""

    slot: Slot
    job: MarkerJob
    partitions: frozenset[TopicPartition]


@dataclass
class _Destination:
    queue: list[Queued] = field(default_factory=list)
    arrived: trio.Event = field(default_factory=trio.Event)
    backoff_ms: int = 0  # 0: none; else the wait before the next attempt
    requests: int = 0  # requests answered (or local writes made)
    markers: int = 0  # marker entries they carried


class MarkerChannel:
    """See the module docstring. ``write_local(entries)``: the errors per entry of writing them
    here; ``send(broker, entries)``: the same from a WriteTxnMarkers to ``broker``, or None when
    it could not be reached; ``route(tp)``: the leader id, -1 when none is known now, None when
    the metadata does not have the partition; ``report(slot, job, answer)``: the written
    partitions of a job, handed to its shard; ``wanted(slot, job)``: whether the job still
    matters; ``metadata_changed()``: waits for the next published image."""

    def __init__(
        self,
        node_id: int,
        *,
        route: Callable[[TopicPartition], int | None],
        write_local: Callable[[Sequence[MarkerEntry]], Awaitable[list[Answer]]],
        send: Callable[[int, Sequence[MarkerEntry]], Awaitable[list[Answer] | None]],
        report: Callable[[Slot, MarkerJob, Answer], None],
        wanted: Callable[[Slot, MarkerJob], bool],
        metadata_changed: Callable[[], Awaitable[None]],
        entry: Callable[[MarkerJob, frozenset[TopicPartition]], MarkerEntry],
        answered: Callable[[], None] = lambda: None,
    ) -> None:
        self.node_id = node_id
        self._route = route
        self._write_local = write_local
        self._send = send
        self._report = report
        self._wanted = wanted
        self._metadata_changed = metadata_changed
        self._entry = entry
        self._answered = answered
        self._destinations: dict[int, _Destination] = {}
        self._nursery: trio.Nursery | None = None
        self.changed = trio.Event()  # replaced after each change of a queue (tests wait on it)

    # -- what the coordinator calls -----------------------------------------------------------

    def add(self, slot: Slot, job: MarkerJob) -> None:
        """Queue a job's markers by destination (see the module docstring)."""
        self._enqueue(slot, job, job.partitions)

    def queued(self, destination: int) -> int:
        """Marker entries waiting for ``destination`` (UNKNOWN: for a leader not known now)."""
        found = self._destinations.get(destination)
        return 0 if found is None else len(found.queue)

    def stats(self, destination: int) -> tuple[int, int]:
        """(requests answered, marker entries they carried) for ``destination``."""
        found = self._destinations.get(destination)
        return (0, 0) if found is None else (found.requests, found.markers)

    # -- routing --------------------------------------------------------------------------------

    def _enqueue(self, slot: Slot, job: MarkerJob, partitions: Iterable[TopicPartition]) -> None:
        by_destination: dict[int, set[TopicPartition]] = {}
        gone: Answer = {}
        for tp in partitions:
            leader = self._route(tp)
            if leader is None:
                log.info("marker of producer %d: %s-%d gone from the metadata, dropped", job.producer_id, *tp)
                gone[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                by_destination.setdefault(leader if leader >= 0 else UNKNOWN, set()).add(tp)
        if gone:
            self._report(slot, replace(job, partitions=frozenset(gone)), gone)
        for destination, tps in by_destination.items():
            queue = self._destination(destination)
            if len(queue.queue) >= MAX_QUEUED:  # bounded: the shard tries these again after its backoff
                log.warning("marker queue for broker %d full: markers of producer %d", destination, job.producer_id)
                self._report(slot, replace(job, partitions=frozenset(tps)), {})
                continue
            queue.queue.append(Queued(slot, job, frozenset(tps)))
            queue.arrived.set()
        self._note_change()

    def _destination(self, destination: int) -> _Destination:
        found = self._destinations.get(destination)
        if found is None:
            found = self._destinations[destination] = _Destination()
            if destination != UNKNOWN and self._nursery is not None:
                self._nursery.start_soon(self._sender, destination)
        return found

    def _note_change(self) -> None:
        changed, self.changed = self.changed, trio.Event()
        changed.set()

    # -- the tasks ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The senders (one per destination, started on first use) and the re-routing of the
        unknown-destination queue at every metadata change."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for destination in list(self._destinations):
                    if destination != UNKNOWN:
                        nursery.start_soon(self._sender, destination)
                task_status.started()
                while True:
                    await self._metadata_changed()
                    self._reroute_unknown()
                    for queue in self._destinations.values():
                        queue.arrived.set()  # a sender backing off tries again with the new metadata
        finally:
            self._nursery = None  # queued from now on, sent by the next run (if any)

    def _reroute_unknown(self) -> None:
        unknown = self._destinations.get(UNKNOWN)
        if unknown is None or not unknown.queue:
            return
        waiting, unknown.queue = unknown.queue, []
        for queued in waiting:
            if self._wanted(queued.slot, queued.job):
                self._enqueue(queued.slot, queued.job, queued.partitions)

    async def _sender(self, destination: int) -> None:
        queue = self._destinations[destination]
        while True:
            while not queue.queue:
                await queue.arrived.wait()
                queue.arrived = trio.Event()
            if queue.backoff_ms:
                with trio.move_on_after(queue.backoff_ms / 1000):
                    await queue.arrived.wait()  # cut short by new metadata or new markers
                queue.arrived = trio.Event()
            batch = self._take(destination, queue)
            if batch:
                await self._deliver(destination, queue, batch)
                queue.arrived = trio.Event()  # its own re-queued markers do not cut the backoff short
                self._answered()

    def _take(self, destination: int, queue: _Destination) -> list[Queued]:
        """Everything queued for the destination, still wanted and still led there (what the
        metadata now says is led elsewhere goes to its new leader's queue)."""
        batch, queue.queue = queue.queue, []
        taken = []
        for q in batch:
            if not self._wanted(q.slot, q.job):
                continue
            here = frozenset(tp for tp in q.partitions if self._route(tp) == destination)
            if here != q.partitions:
                self._enqueue(q.slot, q.job, q.partitions - here)
            if here:
                taken.append(replace(q, partitions=here))
        return taken

    async def _deliver(self, destination: int, queue: _Destination, batch: list[Queued]) -> None:
        entries = [self._entry(q.job, q.partitions) for q in batch]
        if destination == self.node_id:
            answers: list[Answer] | None = await self._write_local(entries)
        else:
            answers = await self._send(destination, entries)
        if answers is None:  # not reached: all of it again, after the backoff
            queue.backoff_ms = _next_backoff(queue.backoff_ms)
            log.info("markers to broker %d not sent; again in %d ms", destination, queue.backoff_ms)
            for q in batch:
                self._enqueue(q.slot, q.job, q.partitions)
            return
        queue.requests += 1
        queue.markers += len(entries)
        retried = False
        for q, answer in zip(batch, answers, strict=True):
            if not self._wanted(q.slot, q.job):
                continue
            done = {tp: e for tp, e in answer.items() if tp in q.partitions and e in MARKER_DONE}
            retry = q.partitions - done.keys()
            if done:
                self._report(q.slot, replace(q.job, partitions=frozenset(done)), done)
            if retry:
                retried = True
                errors = sorted({answer.get(tp, E.REQUEST_TIMED_OUT).name for tp in retry})
                log.info("markers of producer %d for %s retried: %s", q.job.producer_id, sorted(retry), errors)
                self._enqueue(q.slot, q.job, retry)
        queue.backoff_ms = _next_backoff(queue.backoff_ms) if retried else 0


def _next_backoff(backoff_ms: int) -> int:
    return min(max(backoff_ms * 2, RECONNECT_BACKOFF_MS), RECONNECT_BACKOFF_MAX_MS)
