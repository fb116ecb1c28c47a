"""The trio adapter around the pure group coordinator (kafkalike.group).

Rules:

- The coordinator is only touched in synchronous code between awaits, by handlers and by one
  timer task; the clock is read here (``now_ms()``) and passed in.
- After every coordinator call the timer task is woken (the call may have moved the next
  deadline closer) and completed parked requests are handed to their waiting handlers.
- The timer task sleeps until the coordinator's next deadline or until woken, then polls.
- The coordinator's records go to ``__consumer_offsets``, created on first use with
  ``offsets.topic.num.partitions`` compacted partitions; each append is flushed before the
  call returns, so it is durable before the response is sent. At start-up the topic is read
  back and replayed.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
from kafkalike.log import PartitionLog
from kafkalike.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker

log = logging.getLogger("kafkalike.groups")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Waiter:
    done: trio.Event = field(default_factory=trio.Event)
    result: JoinResult | SyncResult | None = None


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

    @property
    def coordinator(self) -> GroupCoordinator:
        assert self._coordinator is not None, "GroupService.open() first"
        return self._coordinator

    # -- start-up and storage ---------------------------------------------------------------

    def open(self) -> None:
        """Build the coordinator and replay ``__consumer_offsets`` if it exists."""
        config = group_config(self.broker)
        store = LogGroupStore(self._offsets_log, on_append=self._appended)
        self._coordinator = GroupCoordinator(
            config,
            store,
            random.Random(),
            consumer_config=consumer_group_config(self.broker),
            topics=lambda: self.broker.controller.image.topics,
        )
        start = now_ms()
        topic = self.broker.controller.image.topics.get(OFFSETS_TOPIC)
        records = 0
        for partition in range(topic.partitions if topic else 0):
            state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
            if state is None:
                continue
            for _, (key, value) in read_records(state.log):
                self.coordinator.replay(key, value, start)
                records += 1
        self.coordinator.on_loaded(now_ms())
        if records:
            log.info("replayed %d record(s) of %s in %d ms", records, OFFSETS_TOPIC, now_ms() - start)

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` the first time a group needs it."""
        if OFFSETS_TOPIC in self.broker.controller.image.topics:
            return
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": self.broker.config.get("offsets.topic.segment.bytes") or "104857600",
        }
        try:
            self.broker.create_topic(OFFSETS_TOPIC, self.coordinator.config.offsets_topic_partitions, configs)
        except ControllerError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        log.info("created %s", OFFSETS_TOPIC)

    def _offsets_log(self, partition: int) -> tuple[PartitionLog, int]:
        try:
            self.ensure_offsets_topic()
        except ControllerError as exc:
            raise StoreError(f"cannot create {OFFSETS_TOPIC}: {exc}") from exc
        state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
        if state is None:
            raise StoreError(f"{OFFSETS_TOPIC}-{partition} is not hosted here")
        return state.log, state.leader_epoch

    def _appended(self, partition: int) -> None:
        state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
        if state is not None:
            state.log.high_watermark = state.log.log_end_offset
            state.notify()

    # -- timers -----------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Poll the coordinator at each deadline, or sooner when a call wakes us."""
        task_status.started()
        while True:
            wakeup = self._wakeup = trio.Event()
            deadline = self.coordinator.poll(now_ms())
            self._deliver()
            wait_s = math.inf if deadline is None else max(deadline - now_ms(), 0) / 1000
            with trio.move_on_after(wait_s):
                await wakeup.wait()

    def _deliver(self) -> None:
        for token, result in self.coordinator.take_completions():
            waiter = self._waiters.pop(token, None)
            if waiter is not None:  # its handler may have been cancelled meanwhile
                waiter.result = result
                waiter.done.set()

    def _after_call(self) -> None:
        self._deliver()
        self._wakeup.set()

    async def _wait(self, pending: Pending) -> JoinResult | SyncResult:
        waiter = self._waiters[pending.token]
        try:
            await waiter.done.wait()
        finally:
            self._waiters.pop(pending.token, None)
        assert waiter.result is not None
        return waiter.result

    # -- the calls handlers make ------------------------------------------------------------

    async def join_group(self, request: JoinRequest) -> JoinResult:
        result = self.coordinator.join_group(request, now_ms())
        if isinstance(result, Pending):
            self._waiters[result.token] = _Waiter()
        self._after_call()
        if not isinstance(result, Pending):
            return result
        done = await self._wait(result)
        assert isinstance(done, JoinResult)
        return done

    async def sync_group(self, request: SyncRequest) -> SyncResult:
        result = self.coordinator.sync_group(request, now_ms())
        if isinstance(result, Pending):
            self._waiters[result.token] = _Waiter()
        self._after_call()
        if not isinstance(result, Pending):
            return result
        done = await self._wait(result)
        assert isinstance(done, SyncResult)
        return done

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self.coordinator.heartbeat(group_id, member_id, instance_id, generation_id, now_ms())
        self._after_call()
        return error

    def leave_group(self, group_id: str, members: Sequence[LeavingMember]) -> LeaveResult:
        result = self.coordinator.leave_group(group_id, members, now_ms())
        self._after_call()
        return result

    def commit_offsets(self, request: CommitRequest) -> list[tuple[str, int, ErrorCode]]:
        result = self.coordinator.commit_offsets(request, now_ms())
        self._after_call()
        return result

    def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchResult:
        return self.coordinator.fetch_offsets(group_id, topics, member_id, member_epoch)

    def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        result = self.coordinator.delete_offsets(group_id, topics, now_ms())
        self._after_call()
        return result

    def delete_groups(self, group_ids: Sequence[str]) -> list[tuple[str, ErrorCode]]:
        result = self.coordinator.delete_groups(group_ids, now_ms())
        self._after_call()
        return result

    def describe_groups(self, group_ids: Sequence[str]) -> list[DescribedGroup]:
        return self.coordinator.describe_groups(group_ids)

    def list_groups(self, states: Sequence[str], types: Sequence[str]) -> list[ListedGroup]:
        return self.coordinator.list_groups(states, types)

    def consumer_group_heartbeat(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        result = self.coordinator.consumer_group_heartbeat(request, now_ms())
        self._after_call()
        return result

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[DescribedConsumerGroup]:
        return self.coordinator.consumer_group_describe(group_ids)

    def on_topic_deleted(self, topic: str) -> None:
        if topic != OFFSETS_TOPIC and self._coordinator is not None:
            self.coordinator.on_topic_deleted(topic, now_ms())
            self._after_call()
