"""The trio adapter around the pure group coordinator (kafkalike.group).

Rules:

- One ``GroupCoordinator`` shard per partition of ``__consumer_offsets`` this broker leads,
  run by the coordinator runtime (``coordinator_runtime``: loading, unloading, the write path,
  timers, the reload after a failed fsync). A call goes to its group's shard; a group whose
  partition has no shard here is answered NOT_COORDINATOR, one still loading
  COORDINATOR_LOAD_IN_PROGRESS.
- After every shard call the timer task is woken (the call may have moved the shard's next
  deadline closer) and the shard's completed parked requests are handed to their handlers.
- The records go to ``__consumer_offsets``, created on first use with
  ``offsets.topic.num.partitions`` compacted partitions (before the call that needs it, as a
  metadata operation of its own), whose shards are then loaded. A call is answered, and a
  parked request it completed handed its result, only once what its group's partition holds
  is committed (its own records and any written before them).
- When a shard is unloaded (leadership gone, or a failed fsync, after which it is loaded
  again from the cut log) its parked JoinGroup / SyncGroup and its waiting calls answer
  NOT_COORDINATOR (Kafka's answer for a KAFKA_STORAGE_ERROR on a coordinator write): clients
  find the coordinator again and retry.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

import trio

from kafkalike.controller.api_error import ControllerError
from kafkalike.coordinator import ShardSlot
from kafkalike.group import (
    OFFSETS_TOPIC,
    CommitRequest,
    DescribedGroup,
    FetchResult,
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    ListedGroup,
    LogGroupStore,
    Pending,
    SyncRequest,
    SyncResult,
)
from kafkalike.group.consumer_api import ConsumerHeartbeatRequest, ConsumerHeartbeatResult, DescribedConsumerGroup
from kafkalike.group.consumer_membership import ConsumerGroupConfig
from kafkalike.group.txn_offsets import (
    LogTxnOffsetWriter,
    OffsetsLogScan,
    PlainRecord,
    TransactionalOffsets,
    TxnCommitRequest,
    TxnWriteError,
    apply_transactional_offsets,
    commit_transactional_offsets,
    complete_transaction,
)
from kafkalike.log import PartitionLog
from kafkalike.log.coordinator_log import Appended
from kafkalike.protocol.errors import ErrorCode
from kafkalike.replica import AppliedChanges
from kafkalike.server.coordinator_runtime import NEW_TOPIC_LOAD_WAIT_S, CoordinatorRuntime, internal_topic_replication
from kafkalike.server.coordinator_syncs import CoordinatorSyncs

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker

log = logging.getLogger("kafkalike.groups")


E = ErrorCode
R = TypeVar("R", JoinResult, SyncResult)
WaiterKey = tuple[int, int]  # (partition, token): each shard numbers its parked requests


@dataclass
class _Waiter:
    partition: int
    done: trio.Event = field(default_factory=trio.Event)
    result: JoinResult | SyncResult | None = None
    pending: list[Appended] = field(default_factory=list)  # to be durable before it is answered


def group_config(broker: Broker) -> GroupConfig:
    config = broker.config
    existing = broker.controller.image.topics.get(OFFSETS_TOPIC)
    return GroupConfig(
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        max_size=config.get_int("group.max.size"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        # An existing topic keeps its partition count: groups must not move.
        offsets_topic_partitions=existing.partitions if existing else config.get_int("offsets.topic.num.partitions"),
    )


def consumer_group_config(broker: Broker) -> ConsumerGroupConfig:
    """The KIP-848 settings, under Kafka's group.consumer.* names."""
    config = broker.config
    return ConsumerGroupConfig(
        heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        max_size=config.get_int("group.consumer.max.size"),
        assignors=tuple((config.get("group.consumer.assignors") or "").split(",")),
    )


class GroupService:
    """The group coordinator's shards, and the calls handlers make (``ShardKind`` of the runtime)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.runtime: CoordinatorRuntime[GroupCoordinator] = CoordinatorRuntime(
            OFFSETS_TOPIC,
            self,
            broker.replicas,
            broker.clock.wall_ms,
            lambda: broker.controller.image.topics,
            lambda topic, partition: broker.routing.leader_of(topic, partition),
            waiters=broker.waiters,
            monotonic_s=broker.clock.monotonic_s,
        )
        self._config: GroupConfig | None = None
        self._waiters: dict[WaiterKey, _Waiter] = {}
        self._store = LogGroupStore(self.runtime.log_for, on_append=self.on_durable, tracker=self.syncs.tracker)
        self._txn_offsets = LogTxnOffsetWriter(
            self._txn_offsets_log, on_append=self.on_durable, tracker=self.syncs.tracker
        )

    @property
    def syncs(self) -> CoordinatorSyncs:
        return self.runtime.syncs

    @property
    def config(self) -> GroupConfig:
        assert self._config is not None, "GroupService.open() first"
        return self._config

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def shard_for(self, group_id: str) -> GroupCoordinator:
        """The group's ACTIVE shard; raises NotActive (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
        return self.runtime.shard_for(group_id)

    # -- the runtime's ShardKind ------------------------------------------------------------

    def partition_count(self) -> int:
        return self.config.offsets_topic_partitions

    def new_shard(self, partition: int, leader_epoch: int) -> GroupCoordinator:
        return GroupCoordinator(
            self.config,
            self._store,
            random.Random(),
            consumer_config=consumer_group_config(self.broker),
            topics=lambda: self.broker.controller.image.topics,
        )

    def scan(self, partition: int) -> OffsetsLogScan:
        return OffsetsLogScan()

    def apply(self, shard: GroupCoordinator, partition: int, records: Sequence[PlainRecord], now_ms: int) -> None:
        for r in records:
            shard.replay_decoded(r.key, r.value, r.record, now_ms)

    def loaded(self, shard: GroupCoordinator, partition: int, finished: TransactionalOffsets, now_ms: int) -> None:
        """Plain records first, then what transactions left (``txn_offsets``), then sessions."""
        apply_transactional_offsets(shard, finished, now_ms)
        shard.on_loaded(now_ms)

    def unloaded(self, shard: GroupCoordinator, partition: int) -> None:
        shard.unload_partition(partition)  # parked JoinGroup / SyncGroup answered NOT_COORDINATOR
        self._deliver(partition, shard)

    def called(self, shard: GroupCoordinator, partition: int) -> None:
        self._deliver(partition, shard)  # the call may have completed other members' requests

    async def polled(self, slots: Sequence[ShardSlot[GroupCoordinator]]) -> None:
        for slot in slots:
            self._deliver(slot.partition, slot.shard)

    # -- start-up and storage ---------------------------------------------------------------

    def open(self) -> None:
        """The config fixed, and a shard loaded for each ``__consumer_offsets`` partition led here."""
        self._config = group_config(self.broker)
        self.runtime.load_led_partitions()

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` the first time a group needs it (FindCoordinator, or a
        call that writes), as a metadata operation that waits its turn; then load its shards."""
        if OFFSETS_TOPIC in self.broker.controller.image.topics:
            return
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.broker.config.get_int("offsets.topic.segment.bytes")),
        }
        factor = internal_topic_replication(
            self.broker.config.get_int("offsets.topic.replication.factor"),
            "offsets.topic.replication.factor",
            OFFSETS_TOPIC,
            self.broker.registered_brokers(),
        )
        created = await self.broker.create_internal_topic(
            OFFSETS_TOPIC, self.config.offsets_topic_partitions, configs, factor
        )
        self.runtime.load_led_partitions()
        if created:
            log.info("created %s", OFFSETS_TOPIC)
            # The shards of a topic just made hold nothing yet: the request that made it is
            # answered once they serve, not with COORDINATOR_LOAD_IN_PROGRESS.
            await self.runtime.wait_loaded(NEW_TOPIC_LOAD_WAIT_S)

    def request_offsets_topic(self) -> bool:
        """Whether ``__consumer_offsets`` is in this broker's metadata; if not, it is asked for
        in the background (FindCoordinator's first answer is COORDINATOR_NOT_AVAILABLE)."""
        if self.runtime.topic_exists():
            return True
        self.broker.request_internal_topic(OFFSETS_TOPIC, self.ensure_offsets_topic)
        return False

    async def ready(self) -> None:
        """Before a call that may write: the topic exists (a failure to make it surfaces as the
        call's NOT_COORDINATOR: no shard)."""
        try:
            await self.ensure_offsets_topic()
        except ControllerError as exc:
            log.debug("cannot create %s: %s", OFFSETS_TOPIC, exc)

    def _txn_offsets_log(self, partition: int) -> tuple[PartitionLog, int]:
        if not self.runtime.topic_exists():
            raise TxnWriteError(E.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} could not be created")
        led = self.runtime.led_here(partition)
        if led is None:
            raise TxnWriteError(E.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{partition} is not led here")
        return led.log, led.leader_epoch

    def on_durable(self, partition: int) -> None:
        self.runtime.on_durable(partition)

    def coordinator_node(self, group_id: str) -> int | None:
        """The node coordinating the group (the leader of its partition), None while there is none."""
        return self.runtime.leader_of(group_id)

    # -- parked requests --------------------------------------------------------------------

    def _deliver(self, partition: int, shard: GroupCoordinator) -> None:
        """Hand the shard's parked requests their results, with the appends they must wait for."""
        for token, result in shard.take_completions():
            waiter = self._waiters.pop((partition, token), None)
            if waiter is not None:  # its handler may have been cancelled meanwhile
                waiter.result = result
                waiter.pending = self.runtime.pending([partition])
                waiter.done.set()

    def pending(self, *group_ids: str) -> list[Appended]:
        """What the groups' partitions hold that is not committed yet (``CoordinatorRuntime.pending``)."""
        return self.runtime.pending([self.partition_for(g) for g in group_ids])

    async def _parked(
        self, group_id: str, call: Callable[[GroupCoordinator, int], R | Pending], failed: Callable[[ErrorCode], R]
    ) -> R:
        """A JoinGroup / SyncGroup: answered at once, or parked until the shard completes it."""
        partition = self.partition_for(group_id)
        parked: list[tuple[WaiterKey, _Waiter]] = []

        def park(shard: GroupCoordinator, now_ms: int) -> R | Pending:
            result = call(shard, now_ms)
            if isinstance(result, Pending):
                parked.append(((partition, result.token), _Waiter(partition)))
                self._waiters[parked[-1][0]] = parked[-1][1]
            return result

        try:
            result = await self.runtime.write(group_id, park, failed)
            if not isinstance(result, Pending):
                return result
            waiter = parked[0][1]
            await waiter.done.wait()
        finally:
            for key, _ in parked:
                self._waiters.pop(key, None)
        assert waiter.result is not None
        if not await self.runtime.committed(waiter.pending):
            return failed(E.NOT_COORDINATOR)
        return cast(R, waiter.result)

    # -- the calls handlers make ------------------------------------------------------------

    async def join_group(self, request: JoinRequest) -> JoinResult:
        await self.ready()
        return await self._parked(request.group_id, lambda shard, now: shard.join_group(request, now), JoinResult)

    async def sync_group(self, request: SyncRequest) -> SyncResult:
        await self.ready()
        return await self._parked(request.group_id, lambda shard, now: shard.sync_group(request, now), SyncResult)

    async def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        return await self.runtime.write(
            group_id,
            lambda shard, now: shard.heartbeat(group_id, member_id, instance_id, generation_id, now),
            _heartbeat_error,
        )

    async def leave_group(self, group_id: str, members: Sequence[LeavingMember]) -> LeaveResult:
        return await self.runtime.write(
            group_id,
            lambda shard, now: shard.leave_group(group_id, members, now),
            LeaveResult,
            lambda result: replace(result, error=E.NOT_COORDINATOR),
        )

    async def commit_offsets(self, request: CommitRequest) -> list[tuple[str, int, ErrorCode]]:
        """OffsetCommit, answered once its records are committed; NOT_COORDINATOR for each
        partition it stored if they were cut (the shard reloaded without them)."""
        await self.ready()
        return await self.runtime.write(
            request.group_id,
            lambda shard, now: shard.commit_offsets(request, now),
            lambda error: [(p.topic, p.partition, error) for p in request.partitions],
            _stored_but_cut,
        )

    async def commit_transactional_offsets(self, request: TxnCommitRequest) -> list[tuple[str, int, ErrorCode]]:
        """TxnOffsetCommit's group part (the transaction was verified by the handler), answered
        once committed with the shard's records; NOT_COORDINATOR if they were cut."""
        await self.ready()
        return await self.runtime.write(
            request.group_id,
            lambda shard, now: commit_transactional_offsets(shard, self._txn_offsets, request, now),
            lambda error: [(p.topic, p.partition, error) for p in request.partitions],
            _stored_but_cut,
        )

    def complete_transaction(self, partition: int, producer_id: int, commit: bool, now_ms: int) -> None:
        """A transaction's marker went into ``__consumer_offsets-{partition}``: its pending
        offsets there applied or dropped (the caller checked that the shard is ACTIVE)."""
        shard = self.runtime.shards.active(partition)
        complete_transaction(shard, partition, producer_id, commit, now_ms)

    async def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchResult:
        """The group's offsets once what its partition holds is committed: never ahead of the log."""
        await self.runtime.committed(self.pending(group_id))
        return self.runtime.read(
            group_id, lambda shard: shard.fetch_offsets(group_id, topics, member_id, member_epoch), FetchResult
        )

    def mark_unstable(self, group_id: str, result: FetchResult) -> FetchResult:
        """OffsetFetch with require_stable: UNSTABLE_OFFSET_COMMIT where a transaction holds offsets."""
        return self.runtime.read(group_id, lambda shard: shard.txn_offsets.mark_unstable(group_id, result), FetchResult)

    async def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        return await self.runtime.write(
            group_id, lambda shard, now: shard.delete_offsets(group_id, topics, now), _no_offsets
        )

    async def delete_groups(self, group_ids: Sequence[str]) -> list[tuple[str, ErrorCode]]:
        """Each partition's groups deleted by its shard, the shards' answers awaited together."""
        by_partition = list(self._by_partition(group_ids).values())
        answers: dict[str, ErrorCode] = {}

        async def delete(ids: list[str]) -> None:
            answered = await self.runtime.write(
                ids[0],
                lambda shard, now: shard.delete_groups(ids, now),
                lambda error: [(g, error) for g in ids],
                lambda result: [(g, E.NOT_COORDINATOR if e is E.NONE else e) for g, e in result],
            )
            answers.update(answered)

        async with trio.open_nursery() as nursery:
            for ids in by_partition:
                nursery.start_soon(delete, ids)
        return [(g, answers[g]) for g in group_ids]

    def _by_partition(self, group_ids: Sequence[str]) -> dict[int, list[str]]:
        by_partition: dict[int, list[str]] = {}
        for group_id in dict.fromkeys(group_ids):
            by_partition.setdefault(self.partition_for(group_id), []).append(group_id)
        return by_partition

    def describe_groups(self, group_ids: Sequence[str]) -> list[DescribedGroup]:
        return [self._described(g) for g in group_ids]

    def _described(self, group_id: str) -> DescribedGroup:
        return self.runtime.read(
            group_id,
            lambda shard: shard.describe_groups([group_id])[0],
            lambda error: DescribedGroup(group_id, False, error=error),
        )

    def list_groups(self, states: Sequence[str], types: Sequence[str]) -> list[ListedGroup]:
        """Every shard's groups; none while one is still loading (``list_groups_error``)."""
        if self.list_groups_error() is not E.NONE:
            return []
        return [g for slot in self.runtime.shards.active_slots() for g in slot.shard.list_groups(states, types)]

    def list_groups_error(self) -> ErrorCode:
        """ListGroups' error: COORDINATOR_LOAD_IN_PROGRESS while a shard is loading, as Kafka's
        runtime answers a read of every shard when one of them is."""
        return E.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.shards.loading() else E.NONE

    async def consumer_group_heartbeat(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        await self.ready()
        return await self.runtime.write(
            request.group_id,
            lambda shard, now: shard.consumer_group_heartbeat(request, now),
            ConsumerHeartbeatResult,
        )

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[DescribedConsumerGroup]:
        return [self._consumer_group_described(g) for g in group_ids]

    def _consumer_group_described(self, group_id: str) -> DescribedConsumerGroup:
        return self.runtime.read(
            group_id,
            lambda shard: shard.consumer_group_describe([group_id])[0],
            lambda error: DescribedConsumerGroup(group_id, error),
        )

    async def durable(self) -> None:
        """Until what every partition holds now is committed (or was cut)."""
        await self.runtime.all_committed()

    def on_topic_deleted(self, topic: str) -> None:
        if self._config is None:
            return
        if topic == OFFSETS_TOPIC:
            for partition in self.runtime.shards.partitions():
                self.runtime.unload(partition)
            return
        now = self.broker.clock.wall_ms()
        for slot in list(self.runtime.shards.active_slots()):
            slot.shard.on_topic_deleted(topic, now)
            self._deliver(slot.partition, slot.shard)
        self.runtime.wake()

    def on_replica_changes(self, changes: AppliedChanges) -> None:
        """The replica manager applied a metadata delta: shards follow ``__consumer_offsets``' leadership."""
        self.runtime.on_replica_changes(changes)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await self.runtime.run(task_status=task_status)


def _no_offsets(error: ErrorCode) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
    return error, []


def _stored_but_cut(result: list[tuple[str, int, ErrorCode]]) -> list[tuple[str, int, ErrorCode]]:
    """An offset commit whose records were cut: NOT_COORDINATOR where it had stored one."""
    return [(t, p, E.NOT_COORDINATOR if e is E.NONE else e) for t, p, e in result]


def _heartbeat_error(error: ErrorCode) -> ErrorCode:
    """A classic Heartbeat without an active shard. While the group is still loading Kafka's
    GroupCoordinatorService answers NONE ("blindly respond"): a member that heartbeats right after
    its coordinator's broker restarted keeps its place (some clients give up on LOAD_IN_PROGRESS)."""
    return E.NONE if error is E.COORDINATOR_LOAD_IN_PROGRESS else error
