"""The trio driver of a coordinator's shards (Kafka's CoordinatorRuntime), shared by the group
and the transaction coordinator (``group_service``, ``txn_service``).

Rules:

- One shard per partition of the coordinator's internal topic (``kafkalike.coordinator``):
  ``load`` replays that partition's log into a new shard at once (start-up, a new topic, a
  reload), ``schedule_load`` has the loader task replay it in the background while the shard
  answers COORDINATOR_LOAD_IN_PROGRESS (leadership arriving): the log is read and decoded on a
  worker thread (the coordinator's ``LogScan``), a chunk at a time, and only the shard updates
  run on the event loop, in log order, in steps; ``unload`` drops it: its parked requests
  and its appends still waiting are answered NOT_COORDINATOR, its timers stop with it. A key
  whose partition has no shard here is answered NOT_COORDINATOR.
- Shards are only touched in synchronous code between awaits, by handlers and by one timer
  task; the time is read here, from the broker's clock, and passed in.
- The write path: a call changes its shard and appends the records on the event loop; the
  fsync runs on a worker thread (``CoordinatorSyncs``); the call is answered once what its
  partition holds is committed (``committed``: today, durable on this node's disk; with
  replication, the partition's high watermark past it). A later write is never acknowledged
  before an earlier one.
- After a failed fsync the partition's log is cut back to what is durable and its shard
  unloaded and loaded again from that log (Kafka unloads and reloads a coordinator partition
  whose log write failed); the calls that waited on the cut records answer NOT_COORDINATOR.
- The timer task polls, at each shard's deadline or when a call woke it, every shard that is
  due or was used, and hands those shards to the coordinator's ``polled`` (parked results,
  transaction markers).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import trio

from kafkalike.coordinator import NotActive, Shard, ShardSlot, ShardTable
from kafkalike.log import LogError, PartitionLog
from kafkalike.log.coordinator_log import READ_CHUNK_BYTES, Appended, StoreError, partition_for
from kafkalike.log.partition_log import FileRange
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import RecordBatchHeader, iter_batches
from kafkalike.replica import AppliedChanges, Partition, ReplicaManager
from kafkalike.server.cluster_metadata import TopicView
from kafkalike.server.coordinator_syncs import CoordinatorSyncs
from kafkalike.server.waiters import PartitionWaiters

# How long a request that made an internal topic waits for its new (empty) shards to serve.
NEW_TOPIC_LOAD_WAIT_S = 5.0

DEFAULT_WRITE_TIMEOUT_MS = 5_000  # Kafka's offsets.commit.timeout.ms, its runtime's write timeout
log = logging.getLogger("kafkalike.coordinator")
LOAD_STEP_RECORDS = 1000  # records applied between two turns of the event loop while loading
_UNFINISHED = object()  # the scan's ``finish`` not taken yet
S = TypeVar("S", bound=Shard)
R = TypeVar("R")


class LogScan(Protocol):
    """A partition's log read back for a load, batch by batch in log order. It touches no shard
    (the records it gives are applied on the event loop), so it runs on a worker thread."""

    def feed(self, blob: bytes, pos: int, header: RecordBatchHeader) -> Sequence[Any]:
        """The decoded records of one batch to apply, in order."""
        ...

    def finish(self) -> Any:
        """Once every batch was fed: what only the whole log tells (handed to ``loaded``)."""
        ...


class ShardKind(Protocol[S]):
    """What a coordinator adds to the runtime: how its shards are made, loaded and let go."""

    def partition_count(self) -> int: ...

    def new_shard(self, partition: int, leader_epoch: int) -> S: ...

    def scan(self, partition: int) -> LogScan:
        """A new reader of the partition's log for a load."""
        ...

    def apply(self, shard: S, partition: int, records: Sequence[Any], now_ms: int) -> None:
        """Records the scan decoded, in log order, into the loading shard (on the event loop)."""
        ...

    def loaded(self, shard: S, partition: int, finished: Any, now_ms: int) -> None:
        """The whole log applied: what the scan's ``finish`` gave, then sessions and timers started."""
        ...

    def unloaded(self, shard: S, partition: int) -> None:
        """The shard is gone: its parked requests answered NOT_COORDINATOR."""
        ...

    def called(self, shard: S, partition: int) -> None:
        """After a call changed the shard (before its answer waits for the records)."""
        ...

    async def polled(self, slots: Sequence[ShardSlot[S]]) -> None:
        """After the timer task polled these shards."""
        ...


class _Load:
    """One partition's log being read back into a shard: the offsets still to read, bounded by
    the log end when the load began (what is appended later is the shard's own writing)."""

    def __init__(self, plog: PartitionLog, scan: LogScan) -> None:
        self.plog = plog
        self.scan = scan
        self.offset = plog.log_start_offset
        self.end = plog.log_end_offset
        self.records = 0

    def next_ranges(self) -> list[FileRange] | None:
        """Where the next chunk's batches lie (an index lookup, on the loop); None at the end."""
        if self.offset >= self.end:
            return None
        try:
            ranges = self.plog.read(self.offset, READ_CHUNK_BYTES, min_one_batch=True).ranges
        except LogError as exc:
            log.warning("reading a coordinator log back from offset %d stopped: %s", self.offset, exc)
            return None
        return ranges or None

    def advance(self, next_offset: int | None) -> None:
        # Nothing readable at ``offset``: stop rather than loop.
        self.offset = self.end if next_offset is None or next_offset <= self.offset else next_offset


def _read_chunk(scan: LogScan, ranges: Sequence[FileRange]) -> tuple[list[Any], int | None]:
    """The chunk's bytes read and its batches decoded (on a worker thread): the records to apply
    and the offset after its last batch."""
    blob = b"".join(r.read() for r in ranges)
    records: list[Any] = []
    next_offset = None
    for pos, header in iter_batches(blob):
        records.extend(scan.feed(blob, pos, header))
        next_offset = header.last_offset + 1
    return records, next_offset


class CoordinatorRuntime(Generic[S]):
    def __init__(
        self,
        topic: str,
        kind: ShardKind[S],
        replicas: ReplicaManager,
        wall_ms: Callable[[], int],
        topics: Callable[[], Mapping[str, TopicView]],
        leaders: Callable[[str, int], tuple[int, int] | None] | None = None,
        *,
        waiters: PartitionWaiters | None = None,
        monotonic_s: Callable[[], float] | None = None,
        write_timeout_ms: int = DEFAULT_WRITE_TIMEOUT_MS,
    ) -> None:
        """``replicas``: this broker's partitions; ``topics()``: the metadata image's topics;
        ``leaders(topic, partition)``: (leader id, epoch) in the metadata, for partitions hosted
        by other brokers (None: the metadata does not know it). ``waiters`` (with the clock's
        ``monotonic_s``): where a write waits for its partition's high watermark, at most
        ``write_timeout_ms``; without them a durable write is committed."""
        self.topic = topic
        self.kind = kind
        self.replicas = replicas
        self._wall_ms = wall_ms
        self._topics = topics
        self._leaders = leaders
        self._waiters = waiters
        self._monotonic_s = monotonic_s
        self.write_timeout_ms = write_timeout_ms
        self.shards: ShardTable[S] = ShardTable()
        self.syncs = CoordinatorSyncs(self._reload, self.on_durable, wall_ms)
        self._wakeup = trio.Event()
        # Replaced after each shard that finished loading, so a waiter wakes once per load.
        self.loaded = trio.Event()
        self._load_started_ms: dict[int, int] = {}
        # Each queued slot is one partition's load: at most one per partition and epoch.
        self._load_send, self._load_receive = trio.open_memory_channel[ShardSlot[S]](math.inf)
        self._loader_running = False

    # -- keys and partitions ----------------------------------------------------------------

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.kind.partition_count())

    def shard_for(self, key: str) -> S:
        """The ACTIVE shard of the key's partition; raises NotActive."""
        return self.shards.active(self.partition_for(key))

    def topic_exists(self) -> bool:
        return self.topic in self._topics()

    def led_here(self, partition: int) -> Partition | None:
        """The partition when this broker leads it."""
        replica = self.replicas.get((self.topic, partition))
        return replica if replica is not None and replica.is_leader else None

    def leader_of(self, key: str) -> int | None:
        """The node leading the key's partition as this broker knows it, None while the topic
        or the partition is not known here."""
        if not self.topic_exists():
            return None
        partition = self.partition_for(key)
        replica = self.replicas.get((self.topic, partition))
        if replica is not None:
            return replica.leader_id
        found = None if self._leaders is None else self._leaders(self.topic, partition)
        return None if found is None or found[0] < 0 else found[0]

    def log_for(self, partition: int) -> tuple[PartitionLog, int]:
        """For the shards' stores: where a partition's records go."""
        if not self.topic_exists():
            raise StoreError(f"{self.topic} does not exist yet")
        led = self.led_here(partition)
        if led is None:
            raise StoreError(f"{self.topic}-{partition} is not led here")
        return led.log, led.leader_epoch

    # -- loading and unloading --------------------------------------------------------------

    def begin_load(self, partition: int, leader_epoch: int) -> ShardSlot[S] | None:
        """A new shard for the partition, LOADING; None when one of that epoch or a newer one
        is here already. A shard of an older epoch is unloaded first (its parked and waiting
        calls answered NOT_COORDINATOR), so nothing waits on a shard that no longer serves."""
        current = self.shards.slot(partition)
        if current is not None and current.leader_epoch < leader_epoch:
            self.unload(partition)
        slot = self.shards.begin_load(partition, leader_epoch, self.kind.new_shard(partition, leader_epoch))
        if slot is not None:
            log.debug("loading %s-%d at leader epoch %d", self.topic, partition, leader_epoch)
        return slot

    def finish_load(self, slot: ShardSlot[S]) -> bool:
        """The partition's log replayed into the slot's shard at once, on the event loop (at
        start-up, after a topic is made, after a failed write); then it serves. False when the
        partition is not led here any more, or the slot was unloaded or replaced."""
        load = self._begin_replay(slot)
        if load is None:
            return False
        while (ranges := load.next_ranges()) is not None:
            records, next_offset = _read_chunk(load.scan, ranges)
            load.advance(next_offset)
            self._apply(slot, load, records)
        return self._activate(slot, load)

    async def finish_load_in_steps(self, slot: ShardSlot[S]) -> bool:
        """``finish_load`` in the background (Kafka loads on a thread of its own): each chunk of
        the log read and decoded on a worker thread, its records applied on the event loop in
        order, LOAD_STEP_RECORDS at a time, other work running in between (the shard answers
        COORDINATOR_LOAD_IN_PROGRESS meanwhile); given up once the slot is not current."""
        load = self._begin_replay(slot)
        if load is None:
            return False
        while (ranges := load.next_ranges()) is not None:
            records, next_offset = await trio.to_thread.run_sync(_read_chunk, load.scan, ranges)
            load.advance(next_offset)
            for start in range(0, len(records), LOAD_STEP_RECORDS):
                if not self.shards.is_current(slot):
                    log.info("loading %s-%d given up: unloaded meanwhile", self.topic, slot.partition)
                    return False
                self._apply(slot, load, records[start : start + LOAD_STEP_RECORDS])
                await trio.lowlevel.checkpoint()
            if not self.shards.is_current(slot):
                log.info("loading %s-%d given up: unloaded meanwhile", self.topic, slot.partition)
                return False
        finished = await trio.to_thread.run_sync(load.scan.finish)
        return self._activate(slot, load, finished)

    def _begin_replay(self, slot: ShardSlot[S]) -> _Load | None:
        if not self.shards.is_current(slot):
            return None
        led = self.led_here(slot.partition)
        if led is None:
            self.shards.unload(slot.partition)
            return None
        self._load_started_ms[slot.partition] = self._wall_ms()
        return _Load(led.log, self.kind.scan(slot.partition))

    def _apply(self, slot: ShardSlot[S], load: _Load, records: Sequence[Any]) -> None:
        self.kind.apply(slot.shard, slot.partition, records, self._load_started_ms[slot.partition])
        load.records += len(records)

    def _activate(self, slot: ShardSlot[S], load: _Load, finished: Any = _UNFINISHED) -> bool:
        started_ms = self._load_started_ms.pop(slot.partition, None)
        if started_ms is None or not self.shards.is_current(slot):
            return False
        if finished is _UNFINISHED:
            finished = load.scan.finish()
        self.kind.loaded(slot.shard, slot.partition, finished, started_ms)
        if not self.shards.activate(slot):
            return False
        if load.records:
            elapsed_ms = self._wall_ms() - started_ms
            log.info("loaded %s-%d: %d record(s) in %d ms", self.topic, slot.partition, load.records, elapsed_ms)
        self.wake()
        loaded, self.loaded = self.loaded, trio.Event()
        loaded.set()
        return True

    async def wait_loaded(self, timeout_s: float) -> None:
        """Until no shard here is LOADING, for at most ``timeout_s``."""
        with trio.move_on_after(timeout_s):
            while self.shards.loading():
                await self.loaded.wait()

    def load(self, partition: int, leader_epoch: int) -> bool:
        """Load the partition's shard at once (``finish_load``)."""
        slot = self.begin_load(partition, leader_epoch)
        return slot is not None and self.finish_load(slot)

    def schedule_load(self, partition: int, leader_epoch: int) -> bool:
        """This broker became the partition's leader: its shard LOADING now, loaded by the
        loader task (at once while no ``run`` task is there); False when a shard of this epoch
        or a newer one is here already."""
        slot = self.begin_load(partition, leader_epoch)
        if slot is None:
            return False
        if self._loader_running and not self._empty_here(partition):
            self._load_send.send_nowait(slot)
        else:
            self.finish_load(slot)
        return True

    def _empty_here(self, partition: int) -> bool:
        """The partition is led here and its log holds nothing to replay (a topic just made):
        its shard is loaded at once, not on the loader, so it serves as soon as the topic exists."""
        led = self.led_here(partition)
        return led is not None and led.log.log_end_offset == led.log.log_start_offset

    def load_led_partitions(self) -> None:
        """A shard for every partition of the topic this broker leads and has none for yet."""
        image = self._topics().get(self.topic)
        for partition in range(image.partitions if image else 0):
            led = self.led_here(partition)
            if led is not None and self.shards.slot(partition) is None:
                self.load(partition, led.leader_epoch)

    def on_replica_changes(self, changes: AppliedChanges) -> None:
        """Shards move with leadership: loaded (in the background) for the topic's partitions
        this broker now leads, unloaded for those it follows now or no longer holds."""
        for replica in changes.became_leader:
            if replica.topic == self.topic:
                self.schedule_load(replica.index, replica.leader_epoch)
        for replica in changes.became_follower:
            if replica.topic == self.topic:
                self.unload(replica.index, replica.leader_epoch)
        for topic, partition in changes.removed:
            if topic == self.topic:
                self.unload(partition)

    def unload(self, partition: int, leader_epoch: int | None = None) -> bool:
        """Drop the partition's shard (this broker stopped leading it, at ``leader_epoch``, or
        the topic is gone): its parked requests and its appends still waiting answer
        NOT_COORDINATOR, its timers stop."""
        slot = self.shards.unload(partition, leader_epoch)
        if slot is None:
            return False
        log.info("unloaded %s-%d", self.topic, partition)
        self.syncs.abandon(partition)
        self.kind.unloaded(slot.shard, partition)
        self.wake()
        return True

    def _reload(self, partition: int) -> None:
        """After a failed fsync cut the partition's log: its shard made again from what the
        log holds now; the calls that waited on the cut records answer NOT_COORDINATOR."""
        log.info("reloading %s-%d after a failed write", self.topic, partition)
        self.on_durable(partition)
        slot = self.shards.unload(partition)
        if slot is None:
            return
        self.kind.unloaded(slot.shard, partition)
        self.load(partition, slot.leader_epoch)
        self.wake()

    # -- the write path ---------------------------------------------------------------------

    async def write(
        self,
        key: str,
        call: Callable[[S, int], R],
        failed: Callable[[ErrorCode], R],
        cut: Callable[[R], R] | None = None,
    ) -> R:
        """``call(shard, now_ms)`` on the key's ACTIVE shard, answered once what the shard's
        partition holds is committed (Kafka's scheduleWriteOperation). ``failed(error)`` when
        the key has no ACTIVE shard here, or (``cut(result)`` if given) when the records were
        cut or the shard unloaded before they were committed."""
        partition = self.partition_for(key)
        try:
            shard = self.shards.active(partition)
        except NotActive as exc:
            return failed(exc.error)
        result = call(shard, self._wall_ms())
        self.kind.called(shard, partition)
        if await self.committed(self.after_call([partition])):
            return result
        return failed(ErrorCode.NOT_COORDINATOR) if cut is None else cut(result)

    def read(self, key: str, call: Callable[[S], R], failed: Callable[[ErrorCode], R]) -> R:
        """``call(shard)`` on the key's ACTIVE shard, or ``failed(error)`` without one."""
        try:
            return call(self.shard_for(key))
        except NotActive as exc:
            return failed(exc.error)

    def pending(self, partitions: Sequence[int]) -> list[Appended]:
        """What the partitions hold that is not committed yet. A call is answered only once
        that is committed, whether or not it wrote any of it (as Kafka's runtime defers even a
        write that produced no records to the last pending offset): its answer may rest on it,
        and it is never ahead of the log."""
        tracker = self.syncs.tracker
        return [a for a in (tracker.log_end(p) for p in dict.fromkeys(partitions)) if a is not None]

    def after_call(self, partitions: Sequence[int]) -> list[Appended]:
        """After a shard call: the timer task woken, and what the call must wait for."""
        self.wake()
        return self.pending(partitions)

    async def committed(self, appends: Sequence[Appended]) -> bool:
        """Until every append is committed (True) or one was cut or abandoned (False): durable
        here, and then replicated: its partition's high watermark passed it (as Kafka's runtime
        completes a write at the high watermark). False too when the partition stopped being
        led here meanwhile, or the write timeout passed first."""
        if not appends:
            return True
        if not await self.syncs.wait(appends):
            return False
        return await self._replicated(appends)

    async def _replicated(self, appends: Sequence[Appended]) -> bool:
        if self._waiters is None or self._monotonic_s is None:
            return True
        targets: list[tuple[Partition, int]] = []
        for append in appends:
            replica = self.replicas.get((self.topic, append.partition))
            if replica is None:
                return False
            targets.append((replica, append.end))

        def replicated() -> bool:
            return all(p.is_leader and p.high_watermark >= end for p, end in targets)

        def settled() -> bool:
            return all(not p.is_leader or p.high_watermark >= end for p, end in targets)

        deadline = self._monotonic_s() + self.write_timeout_ms / 1000
        await self._waiters.wait_until([p.tp for p, _ in targets], settled, deadline)
        if not replicated():
            log.info("%s: a write was not replicated in time, or its partition moved", self.topic)
            return False
        return True

    async def all_committed(self) -> None:
        """Until what every partition holds now is committed (or was cut)."""
        tracker = self.syncs.tracker
        await self.committed(self.pending(tracker.behind()))

    def on_durable(self, partition: int) -> None:
        """Records became durable (or were cut): the high watermark follows what is durable."""
        replica = self.replicas.get((self.topic, partition))
        if replica is not None:
            synced = self.syncs.tracker.partitions.get(partition)
            end = replica.log_end_offset
            durable = end if synced is None else min(synced.durable_end, end)
            replica.update_high_watermark(durable, self._wall_ms())

    # -- timers -----------------------------------------------------------------------------

    def wake(self) -> None:
        self._wakeup.set()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The loader task, and the shards polled at their deadlines, or sooner when a call
        wakes us."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._loader)
            task_status.started()
            while True:
                wakeup = self._wakeup = trio.Event()
                polled, deadline = self.shards.poll(self._wall_ms())
                await self.kind.polled(polled)
                wait_s = math.inf if deadline is None else max(deadline - self._wall_ms(), 0) / 1000
                with trio.move_on_after(wait_s):
                    await wakeup.wait()

    async def _loader(self) -> None:
        """Loads what ``schedule_load`` queued, one partition at a time, in order."""
        self._loader_running = True
        try:
            async for slot in self._load_receive:
                await self.finish_load_in_steps(slot)
        finally:
            self._loader_running = False


def internal_topic_replication(configured: int, config_name: str, topic: str, brokers: int) -> int:
    """The replication factor an internal topic is made with: ``configured`` capped by the
    registered brokers (at least 1), so that a cluster smaller than the configured factor still
    gets its coordinators; said in the log when the cap applies. (Kafka 4's brokers ask for the
    configured factor as it is, and the topic cannot be made until enough brokers are registered.)"""
    capped = max(1, min(configured, brokers))
    if capped < configured:
        log.info(
            "creating %s with replication factor %d: %s=%d but %d broker(s) registered",
            topic,
            capped,
            config_name,
            configured,
            brokers,
        )
    return capped
