"""The trio adapter around the pure group coordinator (kafkalike.group).

Rules:

- The coordinator is only touched in synchronous code between awaits, by handlers and by one
  timer task; the time is read here, from the broker's clock, and passed in.
- After every coordinator call the timer task is woken (the call may have moved the next
  deadline closer) and completed parked requests are handed to their waiting handlers.
- The timer task sleeps until the coordinator's next deadline or until woken, then polls.
- The coordinator's records go to ``__consumer_offsets``, created on first use with
  ``offsets.topic.num.partitions`` compacted partitions (before the call that needs it, as a
  metadata operation of its own). Appends are fsynced on a worker thread (``CoordinatorSyncs``);
  a call is answered, and a parked request it completed handed its result, only once what its
  group's partition holds is durable (its own records and any written before them), so a
  later write is never acknowledged before an earlier one. At start-up the topic is replayed.
- A failed fsync cuts the partition's log back to what is durable; then, as Kafka unloads and
  reloads a coordinator partition whose log write failed, that partition's groups are forgotten
  and replayed from its log, and every call that waited on the cut records, and every parked
  JoinGroup / SyncGroup of those groups, is answered NOT_COORDINATOR (Kafka's answer for a
  KAFKA_STORAGE_ERROR on a coordinator write): clients find the coordinator again and retry.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from kafkalike.controller.metadata import ControllerError
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
    StoreError,
    SyncRequest,
    SyncResult,
    read_records,
)
from kafkalike.group.consumer_api import ConsumerHeartbeatRequest, ConsumerHeartbeatResult, DescribedConsumerGroup
from kafkalike.group.consumer_membership import ConsumerGroupConfig
from kafkalike.group.txn_offsets import replay_transactional_offsets
from kafkalike.log import PartitionLog
from kafkalike.log.coordinator_log import Appended
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.coordinator_syncs import CoordinatorSyncs

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker

log = logging.getLogger("kafkalike.groups")


E = ErrorCode
Result = TypeVar("Result", JoinResult, SyncResult, LeaveResult, ConsumerHeartbeatResult)


@dataclass
class _Waiter:
    group_id: str
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
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._coordinator: GroupCoordinator | None = None
        self._waiters: dict[int, _Waiter] = {}
        self._wakeup = trio.Event()
        self.syncs = CoordinatorSyncs(self._reload, self.on_durable, broker.clock.wall_ms)

    @property
    def coordinator(self) -> GroupCoordinator:
        assert self._coordinator is not None, "GroupService.open() first"
        return self._coordinator

    # -- start-up and storage ---------------------------------------------------------------

    def open(self) -> None:
        """Build the coordinator and replay ``__consumer_offsets`` if it exists."""
        config = group_config(self.broker)
        store = LogGroupStore(self._offsets_log, on_append=self.on_durable, tracker=self.syncs.tracker)
        self._coordinator = GroupCoordinator(
            config,
            store,
            random.Random(),
            consumer_config=consumer_group_config(self.broker),
            topics=lambda: self.broker.controller.image.topics,
        )
        start = self.broker.clock.wall_ms()
        topic = self.broker.controller.image.topics.get(OFFSETS_TOPIC)
        records = 0
        for partition in range(topic.partitions if topic else 0):
            state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
            if state is None:
                continue
            for _, (key, value) in read_records(state.log):
                self.coordinator.replay(key, value, start)
                records += 1
        self.coordinator.on_loaded(self.broker.clock.wall_ms())
        if records:
            log.info(
                "replayed %d record(s) of %s in %d ms", records, OFFSETS_TOPIC, self.broker.clock.wall_ms() - start
            )

    def _reload(self, partition: int) -> None:
        """After a failed fsync cut ``__consumer_offsets-{partition}``: the groups of that
        partition forgotten and replayed from what its log holds now (transactional offsets
        too), their parked requests answered NOT_COORDINATOR; other partitions' groups go on."""
        log.info("group coordinator reloading %s-%d after a failed write", OFFSETS_TOPIC, partition)
        self.on_durable(partition)
        coordinator = self.coordinator
        coordinator.unload_partition(partition)
        state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
        if state is not None:
            now = self.broker.clock.wall_ms()
            coordinator.load_partition((record for _, record in read_records(state.log)), now)
            replay_transactional_offsets(coordinator, state.log, now)
        self._deliver()
        self._wakeup.set()

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` the first time a group needs it (FindCoordinator, or a
        call that writes), as a metadata operation that waits its turn."""
        if OFFSETS_TOPIC in self.broker.controller.image.topics:
            return
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.broker.config.get_int("offsets.topic.segment.bytes")),
        }
        if await self.broker.create_internal_topic(
            OFFSETS_TOPIC, self.coordinator.config.offsets_topic_partitions, configs
        ):
            log.info("created %s", OFFSETS_TOPIC)

    async def ready(self) -> None:
        """Before a call that may write: the topic exists (a failure to make it surfaces as the
        call's NOT_COORDINATOR, from ``_offsets_log``)."""
        try:
            await self.ensure_offsets_topic()
        except ControllerError as exc:
            log.debug("cannot create %s: %s", OFFSETS_TOPIC, exc)

    def _offsets_log(self, partition: int) -> tuple[PartitionLog, int]:
        if OFFSETS_TOPIC not in self.broker.controller.image.topics:
            raise StoreError(f"{OFFSETS_TOPIC} does not exist yet")
        state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
        if state is None:
            raise StoreError(f"{OFFSETS_TOPIC}-{partition} is not hosted here")
        return state.log, state.leader_epoch

    def on_durable(self, partition: int) -> None:
        """Records became durable (or were cut): the high watermark follows what is durable."""
        state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
        if state is not None:
            synced = self.syncs.tracker.partitions.get(partition)
            end = state.log.log_end_offset
            state.update_high_watermark(end if synced is None else min(synced.durable_end, end))

    # -- timers -----------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Poll the coordinator at each deadline, or sooner when a call wakes us."""
        task_status.started()
        while True:
            wakeup = self._wakeup = trio.Event()
            deadline = self.coordinator.poll(self.broker.clock.wall_ms())
            self._deliver()
            wait_s = math.inf if deadline is None else max(deadline - self.broker.clock.wall_ms(), 0) / 1000
            with trio.move_on_after(wait_s):
                await wakeup.wait()

    def _deliver(self) -> None:
        """Hand parked requests their results, with the appends they must wait for."""
        for token, result in self.coordinator.take_completions():
            waiter = self._waiters.pop(token, None)
            if waiter is not None:  # its handler may have been cancelled meanwhile
                waiter.result = result
                waiter.pending = self.pending(waiter.group_id)
                waiter.done.set()

    def pending(self, *group_ids: str) -> list[Appended]:
        """What the groups' partitions hold that is not durable yet. A call is answered only
        once that is durable, whether or not it wrote any of it (as Kafka's coordinator runtime
        defers even a write that produced no records to the last pending offset): its answer
        may rest on it, and it is never ahead of the disk."""
        tracker = self.syncs.tracker
        partitions = dict.fromkeys(self.coordinator.partition_for(g) for g in group_ids)
        return [a for a in (tracker.log_end(p) for p in partitions) if a is not None]

    def _after_call(self, *group_ids: str) -> list[Appended]:
        """After a coordinator call: what it must wait for before answering."""
        self._deliver()
        self._wakeup.set()
        return self.pending(*group_ids)

    async def _durable(self, appends: list[Appended], result: Result, failed: Result) -> Result:
        """``result`` once ``appends`` are durable; ``failed`` (NOT_COORDINATOR) if they were cut."""
        if not appends or await self.syncs.wait(appends):
            return result
        return failed

    async def _wait(self, pending: Pending, failed: JoinResult | SyncResult) -> JoinResult | SyncResult:
        waiter = self._waiters[pending.token]
        try:
            await waiter.done.wait()
        finally:
            self._waiters.pop(pending.token, None)
        assert waiter.result is not None
        if waiter.pending and not await self.syncs.wait(waiter.pending):
            return failed
        return waiter.result

    # -- the calls handlers make ------------------------------------------------------------

    async def join_group(self, request: JoinRequest) -> JoinResult:
        await self.ready()
        result = self.coordinator.join_group(request, self.broker.clock.wall_ms())
        if isinstance(result, Pending):
            self._waiters[result.token] = _Waiter(request.group_id)
        appends = self._after_call(request.group_id)
        if not isinstance(result, Pending):
            return await self._durable(appends, result, JoinResult(E.NOT_COORDINATOR))
        done = await self._wait(result, JoinResult(E.NOT_COORDINATOR))
        assert isinstance(done, JoinResult)
        return done

    async def sync_group(self, request: SyncRequest) -> SyncResult:
        await self.ready()
        result = self.coordinator.sync_group(request, self.broker.clock.wall_ms())
        if isinstance(result, Pending):
            self._waiters[result.token] = _Waiter(request.group_id)
        appends = self._after_call(request.group_id)
        if not isinstance(result, Pending):
            return await self._durable(appends, result, SyncResult(E.NOT_COORDINATOR))
        done = await self._wait(result, SyncResult(E.NOT_COORDINATOR))
        assert isinstance(done, SyncResult)
        return done

    async def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self.coordinator.heartbeat(group_id, member_id, instance_id, generation_id, self.broker.clock.wall_ms())
        appends = self._after_call(group_id)
        return error if not appends or await self.syncs.wait(appends) else E.NOT_COORDINATOR

    async def leave_group(self, group_id: str, members: Sequence[LeavingMember]) -> LeaveResult:
        result = self.coordinator.leave_group(group_id, members, self.broker.clock.wall_ms())
        return await self._durable(self._after_call(group_id), result, replace(result, error=E.NOT_COORDINATOR))

    async def commit_offsets(self, request: CommitRequest) -> list[tuple[str, int, ErrorCode]]:
        """OffsetCommit, answered once its records are durable; NOT_COORDINATOR for each
        partition it stored if they were cut (the coordinator reloaded without them)."""
        await self.ready()
        result = self.coordinator.commit_offsets(request, self.broker.clock.wall_ms())
        appends = self._after_call(request.group_id)
        if not appends or await self.syncs.wait(appends):
            return result
        return [(t, p, E.NOT_COORDINATOR if e is E.NONE else e) for t, p, e in result]

    async def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchResult:
        """The group's offsets once what its partition holds is durable: never ahead of the disk."""
        pending = self.pending(group_id)
        if pending:
            await self.syncs.wait(pending)
        return self.coordinator.fetch_offsets(group_id, topics, member_id, member_epoch)

    async def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        result = self.coordinator.delete_offsets(group_id, topics, self.broker.clock.wall_ms())
        appends = self._after_call(group_id)
        return result if not appends or await self.syncs.wait(appends) else (E.NOT_COORDINATOR, [])

    async def delete_groups(self, group_ids: Sequence[str]) -> list[tuple[str, ErrorCode]]:
        result = self.coordinator.delete_groups(group_ids, self.broker.clock.wall_ms())
        appends = self._after_call(*group_ids)
        if not appends or await self.syncs.wait(appends):
            return result
        return [(g, E.NOT_COORDINATOR if e is E.NONE else e) for g, e in result]

    def describe_groups(self, group_ids: Sequence[str]) -> list[DescribedGroup]:
        return self.coordinator.describe_groups(group_ids)

    def list_groups(self, states: Sequence[str], types: Sequence[str]) -> list[ListedGroup]:
        return self.coordinator.list_groups(states, types)

    async def consumer_group_heartbeat(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        await self.ready()
        result = self.coordinator.consumer_group_heartbeat(request, self.broker.clock.wall_ms())
        return await self._durable(
            self._after_call(request.group_id), result, ConsumerHeartbeatResult(E.NOT_COORDINATOR)
        )

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[DescribedConsumerGroup]:
        return self.coordinator.consumer_group_describe(group_ids)

    async def durable(self) -> None:
        """Until what every partition holds now is durable (or was cut)."""
        tracker = self.syncs.tracker
        pending = [a for a in (tracker.log_end(p) for p in tracker.behind()) if a is not None]
        if pending:
            await self.syncs.wait(pending)

    def on_topic_deleted(self, topic: str) -> None:
        if topic != OFFSETS_TOPIC and self._coordinator is not None:
            self.coordinator.on_topic_deleted(topic, self.broker.clock.wall_ms())
            self._after_call()
