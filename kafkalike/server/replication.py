"""Partition replication on a broker: followers fetching from leaders, the leaders' ISR changes
sent to the controller, and the ISR expiration task (Kafka's ReplicaFetcherManager and
ReplicaFetcherThread, AlterPartitionManager, and ReplicaManager's isr-expiration task).

- **Followers fetch.** For each leader broker this broker follows partitions of, one task sends
  Fetch requests (v17: the follower's broker id and epoch in ``replica_state``, each partition's
  log end as its fetch offset, its latest epoch as ``last_fetched_epoch``) on one connection of
  its own, long-polled by ``replica.fetch.wait.max.ms``. The leader's batches are appended with
  their offsets and epochs (``PartitionWriter.append_as_follower``) and the follower takes the
  leader's high watermark, clamped to its log. A ``DivergingEpoch`` answer makes it truncate
  (KIP-101/279: to the smaller of the leader's end offset for that epoch and its own) and fetch
  again; OFFSET_OUT_OF_RANGE makes it ask the leader's log start and end (ListOffsets as a
  replica) and truncate to the end, or start again empty at the start. A partition whose leader
  answers an error (not the leader, a fenced or unknown epoch...) waits
  ``replica.fetch.backoff.ms``; an answer for a partition whose leader or epoch changed while
  the request was out is dropped. The fetcher follows what the metadata publisher applies
  (``on_replica_changes``). Each loop keeps an incremental fetch session with its leader
  (KIP-227, Kafka's FetchSessionHandler): after a full fetch that opened it, a fetch names only
  the partitions whose fetch offset, epochs or log start changed and forgets the ones no longer
  fetched, and the leader answers only the partitions that moved; any error starts a new
  session with a full fetch.
- **ISR changes.** A leader's partition proposes an expansion when a follower catches up
  (from the Fetch handler) and a shrink when one lags (every ``replica.lag.time.max.ms`` / 2);
  each is sent to the active controller as AlterPartition (v3: the broker epochs of the new
  ISR), batched, and its answer given back to the partition (which keeps at most one in
  flight). A request no controller answered, or answered with a top-level error, is sent again
  after a back-off.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from kafkalike.controller.image import MetadataImage
from kafkalike.log.errors import LogError
from kafkalike.log.storage import DeferredSyncs
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.replica import AppliedChanges, Partition, ReplicaManager, TopicPartition
from kafkalike.replica.follower_state import IsrChange
from kafkalike.replica.partition import alter_partition_answer
from kafkalike.replica.quota import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS, ReplicationQuota
from kafkalike.server.appends import PartitionWriter
from kafkalike.server.clock import Clock
from kafkalike.server.controller_channel import ControllerChannel, ControllerUnavailable
from kafkalike.server.fetch_sessions import INITIAL_EPOCH
from kafkalike.server.inter_broker import BrokerUnreachable, InterBrokerClient

if TYPE_CHECKING:
    from kafkalike.server.config import BrokerConfig

log = logging.getLogger("kafkalike.replication")

FETCH, LIST_OFFSETS, ALTER_PARTITION = 1, 2, 56
FETCH_VERSION = 17
LIST_OFFSETS_VERSION = 7
ALTER_PARTITION_VERSION = 3
EARLIEST, LATEST = -2, -1
ALTER_PARTITION_RETRY_MS = 50  # Kafka's AlterPartitionManager retries after its request timeout's back-off
ALTER_PARTITION_RETRY_MAX_MS = 5_000
# The leader's errors that mean "ask again once the metadata moved": the fetcher backs off.
_BACK_OFF = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)
_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH})


class ImageBrokers:
    """Which brokers may join an ISR, from the published metadata image (KIP-841): registered,
    unfenced and not in controlled shutdown; and this broker's own epoch."""

    def __init__(self, image: Callable[[], MetadataImage], local_epoch: Callable[[], int]) -> None:
        self._image = image
        self._local_epoch = local_epoch

    def isr_eligible_epoch(self, broker_id: int) -> int | None:
        registration = self._image().brokers.get(broker_id)
        if registration is None or registration.fenced or registration.in_controlled_shutdown:
            return None
        return registration.epoch

    def local_broker_epoch(self) -> int:
        return self._local_epoch()

    def is_alive(self, broker_id: int) -> bool:
        registration = self._image().brokers.get(broker_id)
        return registration is not None and not registration.fenced


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The follower's fetch settings (Kafka's replica.fetch.* and replica.lag.time.max.ms)."""

    max_bytes: int = 1_048_576
    response_max_bytes: int = 10_485_760
    wait_max_ms: int = 500
    min_bytes: int = 1
    backoff_ms: int = 1_000
    socket_timeout_ms: int = 30_000
    lag_time_max_ms: int = 30_000

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> FetcherConfig:
        return cls(
            max_bytes=config.get_int("replica.fetch.max.bytes"),
            response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
            wait_max_ms=config.get_int("replica.fetch.wait.max.ms"),
            min_bytes=config.get_int("replica.fetch.min.bytes"),
            backoff_ms=config.get_int("replica.fetch.backoff.ms"),
            socket_timeout_ms=config.get_int("replica.socket.timeout.ms"),
            lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
        )


class ReplicationThrottles:
    """This broker's two replication throttles (``kafkalike.replica.quota``): the throttled
    replicas from the published image's topic configs, the bounds from the broker config
    (``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``, dynamic)."""

    def __init__(self, broker_id: int, config: BrokerConfig, image: Callable[[], MetadataImage]) -> None:
        samples = config.get_int("replication.quota.window.num")
        sample_ms = config.get_int("replication.quota.window.size.seconds") * 1000
        self.leader = ReplicationQuota(LEADER_THROTTLED_REPLICAS, broker_id, samples, sample_ms)
        self.follower = ReplicationQuota(FOLLOWER_THROTTLED_REPLICAS, broker_id, samples, sample_ms)
        self._config = config
        self._image = image

    def leader_throttles_any(self) -> bool:
        """Whether any topic lists replicas this leader throttles (most fetches: none, no walk)."""
        self.leader.update(self._image().configs)
        return self.leader.any_throttled

    def follower_throttles_any(self) -> bool:
        self.follower.update(self._image().configs)
        return self.follower.any_throttled

    def _throttled(self, quota: ReplicationQuota, partition: Partition) -> bool:
        quota.update(self._image().configs)
        return quota.is_throttled(partition.topic, partition.index)

    def leader_throttles(self, partition: Partition, replica_id: int, now_ms: int) -> bool:
        """Whether the leader answers follower ``replica_id``'s read of ``partition`` with no records."""
        if not self._throttled(self.leader, partition):
            return False
        bound = self._config.get_int("leader.replication.throttled.rate")
        return self.leader.throttles(partition.topic, partition.index, replica_id in partition.isr, bound, now_ms)

    def follower_throttles(self, partition: Partition, broker_id: int, now_ms: int) -> bool:
        """Whether this follower leaves ``partition`` out of its next fetch."""
        if not self._throttled(self.follower, partition):
            return False
        bound = self._config.get_int("follower.replication.throttled.rate")
        return self.follower.throttles(partition.topic, partition.index, broker_id in partition.isr, bound, now_ms)

    def leader_sent(self, partition: Partition, size: int, now_ms: int) -> None:
        if size and self._throttled(self.leader, partition):
            self.leader.record(size, now_ms)

    def follower_fetched(self, partition: Partition, size: int, now_ms: int) -> None:
        if size and self._throttled(self.follower, partition):
            self.follower.record(size, now_ms)


class FollowerReads:
    """Consumer reads this broker served as a follower (KIP-392), by partition: logged the first
    time for each partition, counted after (tests and stats)."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.counts: dict[TopicPartition, int] = {}

    def record(self, tp: TopicPartition) -> None:
        if tp not in self.counts:
            log.info("broker %d: serving consumer fetches of %s-%d as a follower", self.broker_id, *tp)
            self.counts[tp] = 0
        self.counts[tp] += 1


# -- ISR changes to the controller ----------------------------------------------------------------


class AlterPartitionSender:
    """See the module docstring: the leaders' ISR changes, sent to the controller in batches."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        channel: Callable[[], ControllerChannel | None],
        broker_epoch: Callable[[], int],
        clock: Clock,
    ) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self._channel = channel
        self._broker_epoch = broker_epoch
        self.clock = clock
        self._unsent: dict[TopicPartition, IsrChange] = {}
        self._wanted = trio.Event()
        self.sent_requests = 0

    def submit(self, change: IsrChange) -> None:
        self._unsent[(change.topic, change.index)] = change
        self._wanted.set()

    def unsent(self) -> int:
        return len(self._unsent)

    async def run(self) -> None:
        backoff_ms = ALTER_PARTITION_RETRY_MS
        while True:
            if not self._unsent:
                self._wanted = trio.Event()
                await self._wanted.wait()
                continue
            channel = self._channel()
            batch, self._unsent = self._unsent, {}
            answered = channel is not None and await self._send(channel, batch)
            if answered:
                backoff_ms = ALTER_PARTITION_RETRY_MS
                continue
            for tp, change in batch.items():  # a newer proposal of a partition wins
                self._unsent.setdefault(tp, change)
            await trio.sleep(backoff_ms / 1000)
            backoff_ms = min(backoff_ms * 2, ALTER_PARTITION_RETRY_MAX_MS)

    async def _send(self, channel: ControllerChannel, batch: dict[TopicPartition, IsrChange]) -> bool:
        """One AlterPartition for ``batch``; False when it must be sent again."""
        by_topic: dict[uuid.UUID, list[IsrChange]] = {}
        ids: dict[tuple[uuid.UUID, int], IsrChange | None] = {}
        for tp, change in batch.items():
            partition = self.replicas.get(tp)
            if partition is None or partition.pending_isr is not change:
                continue  # superseded by the metadata meanwhile
            by_topic.setdefault(partition.topic_id, []).append(change)
            ids[(partition.topic_id, change.index)] = change
        if not ids:
            return True
        body = {
            "broker_id": self.broker_id,
            "broker_epoch": self._broker_epoch(),
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            "partition_index": c.index,
                            "leader_epoch": c.leader_epoch,
                            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": e} for b, e in c.new_isr],
                            "leader_recovery_state": c.leader_recovery_state,
                            "partition_epoch": c.partition_epoch,
                        }
                        for c in changes
                    ],
                }
                for topic_id, changes in by_topic.items()
            ],
        }
        try:
            response = await channel.request(ALTER_PARTITION, ALTER_PARTITION_VERSION, body)
        except ControllerUnavailable as exc:
            log.info("broker %d: AlterPartition not answered, sent again: %s", self.broker_id, exc)
            return False
        self.sent_requests += 1
        top = ErrorCode(response.error_code)
        if top is not ErrorCode.NONE:
            log.warning("broker %d: AlterPartition answered %s, sent again", self.broker_id, top.name)
            return False
        now_ms = self.clock.wall_ms()
        for topic in response.topics:
            for entry in topic.partitions:
                answered = ids.pop((topic.topic_id, entry.partition_index), None)
                if answered is not None:
                    self._answer(answered, entry, now_ms)
        for unanswered in ids.values():  # not in the answer: Kafka's "not answered", tried again
            if unanswered is not None:
                self._unsent.setdefault((unanswered.topic, unanswered.index), unanswered)
        return True

    def _answer(self, change: IsrChange, entry: Message, now_ms: int) -> None:
        partition = self.replicas.get((change.topic, change.index))
        if partition is None:
            return
        error, answer = alter_partition_answer(entry, partition.replicas)
        if answer is not None:
            log.info(
                "ISR of %s-%d is now %s (partition epoch %d)",
                change.topic,
                change.index,
                list(entry.isr),
                entry.partition_epoch,
            )
        else:
            log.info(
                "ISR change of %s-%d to %s refused: %s", change.topic, change.index, change.new_isr_ids, error.name
            )
        partition.isr_change_answered(change, error, answer, now_ms)


# -- followers fetching --------------------------------------------------------------------------


@dataclass(slots=True)
class Followed:
    """A partition this broker follows, as its fetcher sees it."""

    partition: Partition
    leader_id: int
    leader_epoch: int
    ready_at_s: float = 0.0  # backing off until then
    fetch_offset: int = -1  # the offset the fetch out now asked from

    @property
    def tp(self) -> TopicPartition:
        return self.partition.tp

    def still_current(self) -> bool:
        p = self.partition
        return (
            not p.is_leader
            and p.leader_id == self.leader_id
            and p.leader_epoch == self.leader_epoch
            and not p.log.closed
        )

    def answers_current_fetch(self) -> bool:
        """Its answer is for what its log asks now (nothing appended or cut since it was sent)."""
        return self.still_current() and self.partition.log_end_offset == self.fetch_offset


PartitionKey = tuple[uuid.UUID, int]
FetchParams = tuple[int, int, int, int, int]  # fetch offset, leader epoch, last fetched epoch, log start, max bytes


@dataclass
class FollowerSession:
    """The follower's side of its fetch session with one leader (Kafka's FetchSessionHandler):
    the session id (0: none), the next epoch, and what the leader's session holds."""

    session_id: int = 0
    epoch: int = INITIAL_EPOCH
    held: dict[PartitionKey, FetchParams] | None = None

    def reset(self) -> None:
        self.session_id, self.epoch, self.held = 0, INITIAL_EPOCH, None

    @property
    def incremental(self) -> bool:
        return self.session_id != 0 and self.held is not None

    def answered(self, session_id: int, sent: dict[PartitionKey, FetchParams]) -> None:
        """A fetch answered without error: the leader's session holds what was sent."""
        if session_id == 0:  # the leader keeps no session for us: full fetches again
            self.reset()
            return
        if not self.incremental:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = self.epoch + 1 if self.epoch < 2**31 - 1 else 1
        self.held = sent


class ReplicaFetchers:
    """See the module docstring: one fetch loop per leader broker."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        writer: PartitionWriter,
        client: Callable[[], InterBrokerClient | None],
        broker_epoch: Callable[[], int],
        config: FetcherConfig,
        clock: Clock,
        throttles: ReplicationThrottles | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.throttles = throttles
        self.replicas = replicas
        self.writer = writer
        self._client = client
        self._broker_epoch = broker_epoch
        self.config = config
        self.clock = clock
        self._by_leader: dict[int, dict[TopicPartition, Followed]] = {}
        self._sessions: dict[int, FollowerSession] = {}
        self._changed: dict[int, trio.Event] = {}
        self._start_send, self._start_receive = trio.open_memory_channel[int](math.inf)
        self.fetches = 0
        self.truncations = 0
        self.throttled = 0  # fetches that left a partition out for the follower throttle

    # -- what to follow ---------------------------------------------------------------------

    def on_replica_changes(self, changes: AppliedChanges) -> None:
        for partition in changes.became_follower:
            self.follow(partition)
        for partition in changes.became_leader:
            self.unfollow(partition.tp)
        for tp in changes.removed:
            self.unfollow(tp)

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its leader (none while it has no leader)."""
        self.unfollow(partition.tp)
        leader = partition.leader_id
        if partition.is_leader or leader < 0 or leader == self.broker_id:
            return
        followed = self._by_leader.setdefault(leader, {})
        if not followed:
            self._start_send.send_nowait(leader)
        followed[partition.tp] = Followed(partition, leader, partition.leader_epoch)
        self._wake(leader)

    def unfollow(self, tp: TopicPartition) -> None:
        for leader, followed in self._by_leader.items():
            if followed.pop(tp, None) is not None:
                self._wake(leader)
                return

    def sessions(self) -> dict[int, int]:
        """Each leader's fetch session id, 0 while there is none (tests and stats)."""
        return {leader: session.session_id for leader, session in self._sessions.items()}

    def followed(self) -> dict[TopicPartition, int]:
        """Each followed partition's leader (tests and stats)."""
        return {tp: f.leader_id for followed in self._by_leader.values() for tp, f in followed.items()}

    def _wake(self, leader: int) -> None:
        event = self._changed.pop(leader, None)
        if event is not None:
            event.set()

    # -- the fetch loops -----------------------------------------------------------------------

    async def run(self) -> None:
        running: set[int] = set()
        async with trio.open_nursery() as nursery:
            async for leader in self._start_receive:
                if leader not in running:
                    running.add(leader)
                    nursery.start_soon(self._fetch_from, leader, running)

    async def _fetch_from(self, leader: int, running: set[int]) -> None:
        session = self._sessions[leader] = FollowerSession()
        try:
            while True:
                followed = self._by_leader.get(leader)
                if not followed:
                    self._by_leader.pop(leader, None)
                    return
                now_s = self.clock.monotonic_s()
                ready = [f for f in followed.values() if f.ready_at_s <= now_s]
                if not ready:
                    await self._pause(leader, min(f.ready_at_s for f in followed.values()))
                    continue
                ready = self._unthrottled(ready)
                if not ready:  # every one throttled: Kafka's fetcher backs off an empty fetch
                    await self._pause(leader, now_s + self.config.backoff_ms / 1000)
                    continue
                client = self._client()
                if client is None:
                    await self._pause(leader, now_s + self.config.backoff_ms / 1000)
                    continue
                body, sent = self._fetch_body(ready, session)
                try:
                    response = await client.request(
                        leader,
                        FETCH,
                        FETCH_VERSION,
                        body,
                        timeout_ms=self.config.wait_max_ms + self.config.socket_timeout_ms,
                    )
                except BrokerUnreachable as exc:
                    log.info("broker %d: fetch from leader %d failed: %s", self.broker_id, leader, exc)
                    session.reset()
                    self._back_off(ready)
                    continue
                self.fetches += 1
                if response.error_code != 0:
                    error = ErrorCode(response.error_code)
                    log.info("broker %d: fetch from leader %d answered %s", self.broker_id, leader, error.name)
                    session.reset()
                    if error not in _SESSION_ERRORS:  # those: a full fetch opens a new session at once
                        self._back_off(ready)
                    continue
                incremental = session.incremental
                session.answered(response.session_id, sent)
                await self._process(leader, ready, response, incremental=incremental)
        finally:
            running.discard(leader)
            if self._sessions.get(leader) is session:
                del self._sessions[leader]
            if self._by_leader.get(leader):  # followed again while ending: start again
                self._start_send.send_nowait(leader)

    def _unthrottled(self, ready: list[Followed]) -> list[Followed]:
        """``ready`` but the partitions the follower throttle holds back for now."""
        throttles = self.throttles
        if throttles is None or not throttles.follower_throttles_any():
            return ready
        now_ms = self.clock.wall_ms()
        kept = [f for f in ready if not throttles.follower_throttles(f.partition, self.broker_id, now_ms)]
        if len(kept) < len(ready):
            self.throttled += 1
        return kept

    async def _pause(self, leader: int, until_s: float) -> None:
        event = self._changed.setdefault(leader, trio.Event())
        with trio.move_on_at(until_s):
            await event.wait()

    def _back_off(self, followed: Iterable[Followed]) -> None:
        until = self.clock.monotonic_s() + self.config.backoff_ms / 1000
        for f in followed:
            f.ready_at_s = until

    def _fetch_body(
        self, ready: list[Followed], session: FollowerSession
    ) -> tuple[dict[str, Any], dict[PartitionKey, FetchParams]]:
        """The Fetch request for ``ready``, and each partition's parameters (what the leader's
        session holds once it is answered). In a session, only the partitions whose parameters
        changed are named, and the ones no longer fetched are forgotten."""
        sent: dict[PartitionKey, FetchParams] = {}
        by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
        held = session.held if session.incremental else None
        for f in ready:
            f.fetch_offset = f.partition.log_end_offset
            key = (f.partition.topic_id, f.partition.index)
            params = sent[key] = (
                f.fetch_offset,
                f.leader_epoch,
                _latest_epoch(f.partition),
                f.partition.log_start_offset,
                self.config.max_bytes,
            )
            if held is not None and held.get(key) == params:
                continue
            by_topic.setdefault(key[0], []).append(
                {
                    "partition": key[1],
                    "current_leader_epoch": params[1],
                    "fetch_offset": params[0],
                    "last_fetched_epoch": params[2],
                    "log_start_offset": params[3],
                    "partition_max_bytes": params[4],
                }
            )
        forgotten: dict[uuid.UUID, list[int]] = {}
        for topic_id, index in (held.keys() - sent.keys()) if held is not None else ():
            forgotten.setdefault(topic_id, []).append(index)
        body = {
            "replica_state": {"replica_id": self.broker_id, "replica_epoch": self._broker_epoch()},
            "max_wait_ms": self.config.wait_max_ms,
            "min_bytes": self.config.min_bytes,
            "max_bytes": self.config.response_max_bytes,
            "isolation_level": 0,
            "session_id": session.session_id,
            "session_epoch": session.epoch,
            "topics": [{"topic_id": topic_id, "partitions": parts} for topic_id, parts in by_topic.items()],
            "forgotten_topics_data": [
                {"topic_id": topic_id, "partitions": sorted(indexes)} for topic_id, indexes in forgotten.items()
            ],
            "rack_id": "",
        }
        return body, sent

    async def _process(self, leader: int, ready: list[Followed], response: Message, *, incremental: bool) -> None:
        """The answer's partitions applied. An incremental answer leaves out the partitions that
        did not move; a full one answers them all."""
        sent = {(f.partition.topic_id, f.partition.index): f for f in ready}
        for topic in response.responses:
            for entry in topic.partitions:
                f = sent.pop((topic.topic_id, entry.partition_index), None)
                if f is None or not f.answers_current_fetch():
                    continue  # its leader, epoch or log changed while the fetch was out
                try:
                    await self._process_partition(leader, f, entry)
                except LogError as exc:
                    log.warning("broker %d: replicating %s-%d failed: %s", self.broker_id, *f.tp, exc)
                    self._back_off([f])
                except OSError as exc:
                    log.warning("broker %d: replicating %s-%d: disk error %s", self.broker_id, *f.tp, exc)
                    self._back_off([f])
        if not incremental:
            self._back_off(sent.values())  # not answered: Kafka retries them after its back-off

    async def _process_partition(self, leader: int, f: Followed, entry: Message) -> None:
        partition = f.partition
        error = ErrorCode(entry.error_code)
        if error is ErrorCode.NONE:
            diverging = entry.diverging_epoch
            if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
                self._truncate_on_divergence(partition, diverging.epoch, diverging.end_offset)
                return
            records = entry.records
            if records:
                if self.throttles is not None:
                    self.throttles.follower_fetched(partition, len(records), self.clock.wall_ms())
                await self.writer.append_as_follower(partition, records)
                if not f.still_current():
                    return
            partition.update_follower_high_watermark(entry.high_watermark)
            await self._follow_log_start(partition, entry.log_start_offset)
            return
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._handle_out_of_range(leader, f)
            return
        if error not in _BACK_OFF:
            log.warning("broker %d: fetch of %s-%d answered %s", self.broker_id, *f.tp, error.name)
        self._back_off([f])

    async def _follow_log_start(self, partition: Partition, leader_log_start: int) -> None:
        files = DeferredSyncs()
        if partition.follow_log_start(leader_log_start, now_ms=self.clock.wall_ms(), syncs=files) and files:
            try:  # the segments' renames to .deleted, on a worker thread (as DeleteRecords on the leader)
                await trio.to_thread.run_sync(files.run)
            except OSError as exc:  # the log start moved; the files go at the next start
                log.warning(
                    "broker %d: deleting segments of %s-%d below %d: %s",
                    self.broker_id,
                    *partition.tp,
                    leader_log_start,
                    exc,
                )

    def _truncate_on_divergence(self, partition: Partition, leader_epoch: int, leader_end_offset: int) -> None:
        offset = partition.truncation_offset(leader_epoch, leader_end_offset)
        if offset < partition.high_watermark:
            log.warning(
                "broker %d: truncating %s-%d to %d, below its high watermark %d",
                self.broker_id,
                *partition.tp,
                offset,
                partition.high_watermark,
            )
        if partition.truncate_to(offset, self.clock.wall_ms()):
            self.truncations += 1
            log.info(
                "broker %d: truncated %s-%d to %d (diverging epoch %d)",
                self.broker_id,
                *partition.tp,
                offset,
                leader_epoch,
            )

    async def _handle_out_of_range(self, leader: int, f: Followed) -> None:
        """Kafka's fetchOffsetAndTruncate: behind the leader's log start, start again there; past
        the leader's log end (only after an unclean election), cut to it."""
        partition = f.partition
        client = self._client()
        if client is None:
            self._back_off([f])
            return
        try:
            end = await self._leader_offset(client, leader, f, LATEST)
            start = await self._leader_offset(client, leader, f, EARLIEST) if end is not None else None
        except BrokerUnreachable:
            self._back_off([f])
            return
        if end is None or start is None or not f.still_current():
            self._back_off([f])
            return
        now_ms = self.clock.wall_ms()
        local_end = partition.log_end_offset
        if end < local_end:
            log.warning("broker %d: %s-%d ends past its leader's log end %d: truncated", self.broker_id, *f.tp, end)
            partition.truncate_to(end, now_ms)
        elif start > local_end:
            log.info("broker %d: %s-%d starts again at its leader's log start %d", self.broker_id, *f.tp, start)
            partition.truncate_fully_and_start_at(start, now_ms)
            self.truncations += 1
        else:  # within the leader's log after all (it moved meanwhile): ask again after the back-off
            self._back_off([f])

    async def _leader_offset(self, client: InterBrokerClient, leader: int, f: Followed, target: int) -> int | None:
        body = {
            "replica_id": self.broker_id,
            "isolation_level": 0,
            "topics": [
                {
                    "name": f.partition.topic,
                    "partitions": [
                        {
                            "partition_index": f.partition.index,
                            "current_leader_epoch": f.leader_epoch,
                            "timestamp": target,
                        }
                    ],
                }
            ],
        }
        response = await client.request(leader, LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
        (entry,) = response.topics[0].partitions
        if entry.error_code != 0:
            return None
        return int(entry.offset)


def _latest_epoch(partition: Partition) -> int:
    latest = partition.log.epoch_cache.latest_epoch
    return -1 if latest is None else latest


# -- the ISR expiration task -------------------------------------------------------------------


async def expire_isr_members(replicas: ReplicaManager, sender: AlterPartitionSender, clock: Clock, lag_ms: int) -> None:
    """Every replica.lag.time.max.ms / 2, the led partitions' lagging followers leave their ISR
    (Kafka's isr-expiration task)."""
    while True:
        await trio.sleep(lag_ms / 2000)
        now_ms = clock.wall_ms()
        for tp in list(replicas):
            partition = replicas.get(tp)
            if partition is None or not partition.is_leader or len(partition.isr) <= 1:
                continue
            change = partition.maybe_shrink_isr(now_ms)
            if change is not None:
                log.info("shrinking the ISR of %s-%d from %s to %s", *tp, list(partition.isr), list(change.new_isr_ids))
                sender.submit(change)
