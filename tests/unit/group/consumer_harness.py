"""A coordinator serving KIP-848 consumer groups on in-memory logs, with a hand-driven clock.

``ConsumerHarness`` holds the coordinator, the topics it sees and the clock; ``Client`` plays a
consumer of the new protocol as the real ones behave: it adopts each assignment it is sent at
once (giving up revoked partitions, taking new ones) and reports what it owns on its next
heartbeat.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from grouptest_harness import FlakyStore

from kafkalike.group import GroupConfig, GroupCoordinator, LogGroupStore, read_records
from kafkalike.group.consumer_api import ConsumerHeartbeatRequest, ConsumerHeartbeatResult, TopicPartitions
from kafkalike.group.consumer_group import ConsumerGroup
from kafkalike.group.consumer_membership import ConsumerGroupConfig
from kafkalike.log import LogConfig, MemoryLogDirectory, PartitionLog
from kafkalike.protocol.errors import ErrorCode

PARTITIONS = 4
REBALANCE_MS = 30_000


@dataclass
class Topic:
    topic_id: uuid.UUID
    partitions: int


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


class ConsumerHarness:
    def __init__(self, topics: dict[str, int] | None = None, seed: int = 1, **consumer: Any) -> None:
        self.now = 1_000_000
        self.seed = seed
        self.topics: dict[str, Topic] = {}
        for name, count in (topics if topics is not None else {"t": 6}).items():
            self.create_topic(name, count)
        self.dirs = [MemoryLogDirectory(f"__consumer_offsets-{p}") for p in range(PARTITIONS)]
        self.logs: dict[int, PartitionLog] = {}
        self.store = FlakyStore(LogGroupStore(self._log_for))
        self.config = GroupConfig(offsets_topic_partitions=PARTITIONS)
        self.consumer_config = ConsumerGroupConfig(**consumer)
        self.coordinator = self._new_coordinator(seed)
        self.coordinator.on_loaded(self.now)

    def _new_coordinator(self, seed: int) -> GroupCoordinator:
        return GroupCoordinator(
            self.config,
            self.store,
            random.Random(seed),
            consumer_config=self.consumer_config,
            topics=lambda: self.topics,
        )

    def _log_for(self, partition: int) -> tuple[PartitionLog, int]:
        if partition not in self.logs:
            self.logs[partition] = PartitionLog.open(self.dirs[partition], LogConfig(), self.now)
        return self.logs[partition], 0

    def create_topic(self, name: str, partitions: int) -> None:
        self.topics[name] = Topic(topic_id(name), partitions)

    def advance(self, ms: int) -> None:
        """Move the clock, polling at every deadline on the way."""
        target = self.now + ms
        while True:
            deadline = self.coordinator.poll(self.now)
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
        self.now = target
        self.coordinator.poll(self.now)

    def restart(self) -> None:
        """A new coordinator replaying the reopened logs, as after a broker restart."""
        for partition, plog in list(self.logs.items()):
            plog.close()
            self.logs[partition] = PartitionLog.open(self.dirs[partition], LogConfig(), self.now)
        self.coordinator = self._new_coordinator(self.seed + 1)
        for plog in self.logs.values():
            for _, (key, value) in read_records(plog):
                self.coordinator.replay(key, value, self.now)
        self.coordinator.on_loaded(self.now)

    def heartbeat(self, member_id: str, epoch: int, group: str = "g", **fields: Any) -> ConsumerHeartbeatResult:
        request = ConsumerHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch, **fields)
        return self.coordinator.consumer_group_heartbeat(request, self.now)

    def join(self, member_id: str, *topics: str, group: str = "g", **fields: Any) -> ConsumerHeartbeatResult:
        fields.setdefault("rebalance_timeout_ms", REBALANCE_MS)
        fields.setdefault("subscribed_topic_names", topics or ("t",))
        fields.setdefault("owned_partitions", ())
        fields.setdefault("member_id_required", True)
        return self.heartbeat(member_id, 0, group, **fields)

    def group(self, group_id: str = "g") -> ConsumerGroup:
        return self.coordinator.consumer_groups[group_id]

    def client(self, member_id: str, *topics: str, group: str = "g", **fields: Any) -> Client:
        client = Client(self, member_id, group, topics or ("t",), fields)
        client.join()
        return client


@dataclass
class Client:
    h: ConsumerHarness
    member_id: str
    group: str
    topics: tuple[str, ...]
    fields: dict[str, Any]
    epoch: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    last: ConsumerHeartbeatResult | None = None

    def join(self) -> ConsumerHeartbeatResult:
        self.owned = {}
        result = self.h.join(self.member_id, *self.topics, group=self.group, **self.fields)
        return self._take(result)

    def beat(self, *, report: bool = True) -> ConsumerHeartbeatResult:
        """A heartbeat at the client's epoch; ``report`` sends the owned partitions (as after a change)."""
        owned: TopicPartitions | None = self.wire_owned() if report else None
        fields = {k: v for k, v in self.fields.items() if k == "instance_id"}
        result = self.h.heartbeat(self.member_id, self.epoch, self.group, owned_partitions=owned, **fields)
        return self._take(result)

    def leave(self, epoch: int = -1) -> ConsumerHeartbeatResult:
        fields = {k: v for k, v in self.fields.items() if k == "instance_id"}
        result = self.h.heartbeat(self.member_id, epoch, self.group, **fields)
        self.owned = {}
        return result

    def wire_owned(self) -> TopicPartitions:
        return tuple((t, tuple(sorted(ps))) for t, ps in sorted(self.owned.items()))

    def _take(self, result: ConsumerHeartbeatResult) -> ConsumerHeartbeatResult:
        self.last = result
        if result.error is ErrorCode.NONE:
            if result.member_id:
                self.member_id = result.member_id
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = {t: frozenset(ps) for t, ps in result.assignment if ps}
        return result

    def partitions(self, topic: str = "t") -> list[int]:
        return sorted(self.owned.get(topic_id(topic), ()))

    def count(self) -> int:
        return sum(len(ps) for ps in self.owned.values())
