"""A group coordinator on in-memory partition logs with a hand-driven clock, for scripted tests."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from kafkalike.group import (
    CommitPartition,
    CommitRequest,
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    LogGroupStore,
    Pending,
    StoreError,
    SyncRequest,
    SyncResult,
)
from kafkalike.group.records import CoordinatorRecord
from kafkalike.log import LogConfig, MemoryLogDirectory, PartitionLog
from kafkalike.protocol.codec import schema
from kafkalike.protocol.errors import ErrorCode

PARTITIONS = 4


def subscription(*topics: str, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription as consumers put it in JoinGroup metadata."""
    body = {"topics": list(topics), "user_data": None}
    return version.to_bytes(2, "big") + schema("ConsumerProtocolSubscription", "message", version).encode(body)


class FlakyStore:
    """Wraps a store; while ``failing`` is set every append raises StoreError."""

    def __init__(self, inner: LogGroupStore) -> None:
        self.inner = inner
        self.failing = False
        self.appends = 0

    def append(self, partition: int, records: Sequence[CoordinatorRecord], now_ms: int) -> None:
        if self.failing:
            raise StoreError("disk on fire")
        self.appends += 1
        self.inner.append(partition, records, now_ms)


class Harness:
    def __init__(self, seed: int = 1, **config: Any) -> None:
        defaults: dict[str, Any] = {"initial_rebalance_delay_ms": 3000, "offsets_topic_partitions": PARTITIONS}
        defaults.update(config)
        self.config = GroupConfig(**defaults)
        self.now = 1_000_000
        self.dirs = [MemoryLogDirectory(f"__consumer_offsets-{p}") for p in range(PARTITIONS)]
        self.logs: dict[int, PartitionLog] = {}
        self.store = FlakyStore(LogGroupStore(self._log_for))
        self.seed = seed
        self.coordinator = GroupCoordinator(self.config, self.store, random.Random(seed))
        self.coordinator.on_loaded(self.now)
        self.results: dict[int, JoinResult | SyncResult] = {}

    def _log_for(self, partition: int) -> tuple[PartitionLog, int]:
        if partition not in self.logs:
            self.logs[partition] = PartitionLog.open(self.dirs[partition], LogConfig(), self.now)
        return self.logs[partition], 0

    # -- driving --------------------------------------------------------------------------------

    def _collect(self) -> None:
        self.results.update(self.coordinator.take_completions())

    def advance(self, ms: int) -> None:
        """Move the clock in steps, polling at every deadline on the way, as the adapter does."""
        target = self.now + ms
        while True:
            deadline = self.coordinator.poll(self.now)
            self._collect()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
        self.now = target
        self.coordinator.poll(self.now)
        self._collect()

    def restart(self) -> None:
        """A new coordinator replaying the same logs (reopened, as after a broker restart)."""
        from kafkalike.group import read_records

        for partition, plog in list(self.logs.items()):
            plog.close()
            self.logs[partition] = PartitionLog.open(self.dirs[partition], LogConfig(), self.now)
        self.coordinator = GroupCoordinator(self.config, self.store, random.Random(self.seed + 1))
        for plog in self.logs.values():
            for _, (key, value) in read_records(plog):
                self.coordinator.replay(key, value, self.now)
        self.coordinator.on_loaded(self.now)
        self.results.clear()

    # -- requests -------------------------------------------------------------------------------

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        *,
        instance: str | None = None,
        client_id: str = "client",
        protocols: Sequence[tuple[str, bytes]] = (("range", b"m"),),
        protocol_type: str = "consumer",
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        require_known: bool = True,
        skip_assignment: bool = False,
    ) -> JoinResult | Pending:
        request = JoinRequest(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            client_id=client_id,
            client_host="/127.0.0.1",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type=protocol_type,
            protocols=tuple(protocols),
            require_known_member_id=require_known,
            supports_skip_assignment=skip_assignment,
        )
        result = self.coordinator.join_group(request, self.now)
        self._collect()
        return result

    def join_new(self, group: str = "g", **kwargs: Any) -> tuple[str, Pending]:
        """MEMBER_ID_REQUIRED, then the second JoinGroup, which parks."""
        first = self.join(group, **kwargs)
        assert isinstance(first, JoinResult) and first.error is ErrorCode.MEMBER_ID_REQUIRED, first
        second = self.join(group, first.member_id, **kwargs)
        assert isinstance(second, Pending), second
        return first.member_id, second

    def sync(
        self,
        member_id: str,
        generation: int,
        group: str = "g",
        *,
        assignments: Sequence[tuple[str, bytes]] = (),
        instance: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResult | Pending:
        request = SyncRequest(group, generation, member_id, instance, None, protocol_name, tuple(assignments))
        result = self.coordinator.sync_group(request, self.now)
        self._collect()
        return result

    def leave(self, *members: LeavingMember, group: str = "g") -> LeaveResult:
        result = self.coordinator.leave_group(group, members, self.now)
        self._collect()
        return result

    def heartbeat(self, member_id: str, generation: int, group: str = "g", instance: str | None = None) -> ErrorCode:
        return self.coordinator.heartbeat(group, member_id, instance, generation, self.now)

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        group: str = "g",
        *,
        generation: int = -1,
        member_id: str = "",
        instance: str | None = None,
        metadata: str | None = None,
        v9: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        parts = tuple(CommitPartition(t, p, o, metadata=metadata) for (t, p), o in offsets.items())
        request = CommitRequest(group, generation, member_id, instance, parts, group_id_not_found_error=v9)
        return {(t, p): e for t, p, e in self.coordinator.commit_offsets(request, self.now)}

    def committed(self, group: str, topic: str, *partitions: int) -> list[int]:
        result = self.coordinator.fetch_offsets(group, [(topic, partitions)])
        return [f.offset for f in result.topics[0][1]]

    def result(self, pending: JoinResult | SyncResult | Pending) -> Any:
        """The result of a parked request, which must have completed."""
        if not isinstance(pending, Pending):
            return pending
        assert pending.token in self.results, f"token {pending.token} still parked"
        return self.results.pop(pending.token)

    def settle(self, *pending: JoinResult | SyncResult | Pending, step_ms: int = 1000, limit_ms: int = 600_000) -> None:
        """Advance the clock until none of ``pending`` is parked any more."""
        waited = 0
        while any(self.parked(p) for p in pending):
            assert waited < limit_ms, "still parked"
            self.advance(step_ms)
            waited += step_ms

    def parked(self, pending: JoinResult | SyncResult | Pending) -> bool:
        return isinstance(pending, Pending) and pending.token not in self.results

    def state(self, group: str = "g") -> str:
        return self.coordinator.groups[group].state.value

    # -- composite steps ------------------------------------------------------------------------

    def stable_group(self, *names: str, group: str = "g", **kwargs: Any) -> dict[str, str]:
        """Members joining an empty group together and syncing: name -> member id; generation 1."""
        ids: dict[str, str] = {}
        parked: dict[str, Pending] = {}
        for name in names:
            ids[name], parked[name] = self.join_new(group, client_id=name, **kwargs)
        self.settle(*parked.values())
        joined = {name: self.result(p) for name, p in parked.items()}
        leader = next(r.leader for r in joined.values())
        generation = next(r.generation_id for r in joined.values())
        assignments = [(ids[n], n.encode()) for n in names]
        syncs = {}
        for name in names:
            if ids[name] != leader:
                syncs[name] = self.sync(ids[name], generation, group)
        syncs["leader"] = self.sync(leader, generation, group, assignments=assignments)
        for pending in syncs.values():
            assert self.result(pending).error is ErrorCode.NONE
        assert self.state(group) == "Stable"
        return ids
