"""Coordinator shards: one per partition of a coordinator's internal topic, as the contexts of
Kafka's CoordinatorRuntime.

Rules:

- A shard is the coordinator state of one partition of ``__consumer_offsets`` or
  ``__transaction_state``: the groups or transactional ids whose key hashes to it. A broker
  holds a shard for each of those partitions it leads, and for no other.
- ``begin_load`` makes a shard LOADING (its partition's log is replayed into it meanwhile);
  ``activate`` makes it ACTIVE; ``unload`` removes it. Only an ACTIVE shard is handed out
  (``active``): a partition with no shard here answers NOT_COORDINATOR, one still loading
  COORDINATOR_LOAD_IN_PROGRESS (``NotActive.error``), as Kafka's runtime answers.
- Leader epochs order the changes as Kafka orders them: a load is ignored unless its epoch is
  newer than the shard's; an unload with an epoch removes only a shard of an older epoch, one
  without (the topic deleted, a failed write to reload from) removes it whatever its epoch.
- Each shard has its own timers. ``poll(now_ms)`` polls every ACTIVE shard that is due or was
  handed out since its last poll (a call may have moved its deadline) and returns the earliest
  next deadline, or None.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kafkalike.protocol.errors import ErrorCode


class Shard(Protocol):
    def poll(self, now_ms: int) -> int | None: ...


S = TypeVar("S", bound=Shard)


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


class NotActive(Exception):
    """No ACTIVE shard for the partition here; ``error`` is what the request is answered."""

    def __init__(self, partition: int, error: ErrorCode) -> None:
        super().__init__(f"partition {partition}: {error.name}")
        self.partition = partition
        self.error = error


@dataclass(eq=False)
class ShardSlot(Generic[S]):
    partition: int
    leader_epoch: int
    shard: S
    state: ShardState = ShardState.LOADING
    deadline_ms: int | None = None  # the shard's next timer, as its last poll returned
    touched: bool = True  # handed out since its last poll


class ShardTable(Generic[S]):
    def __init__(self) -> None:
        self._slots: dict[int, ShardSlot[S]] = {}

    def begin_load(self, partition: int, leader_epoch: int, shard: S) -> ShardSlot[S] | None:
        """A LOADING slot for ``shard``; None when the shard here has this epoch or a newer one."""
        current = self._slots.get(partition)
        if current is not None and current.leader_epoch >= leader_epoch:
            return None
        slot = self._slots[partition] = ShardSlot(partition, leader_epoch, shard)
        return slot

    def activate(self, slot: ShardSlot[S]) -> bool:
        """The loaded slot serves; False when it was unloaded or replaced while loading."""
        if self._slots.get(slot.partition) is not slot:
            return False
        slot.state = ShardState.ACTIVE
        slot.touched = True
        return True

    def unload(self, partition: int, leader_epoch: int | None = None) -> ShardSlot[S] | None:
        """The slot removed, or None when there is none (or it is of ``leader_epoch`` or newer)."""
        current = self._slots.get(partition)
        if current is None or (leader_epoch is not None and current.leader_epoch >= leader_epoch):
            return None
        del self._slots[partition]
        return current

    def slot(self, partition: int) -> ShardSlot[S] | None:
        return self._slots.get(partition)

    def is_current(self, slot: ShardSlot[S]) -> bool:
        return self._slots.get(slot.partition) is slot

    def active(self, partition: int) -> S:
        """The partition's ACTIVE shard, marked for the next poll; raises NotActive."""
        slot = self._slots.get(partition)
        if slot is None:
            raise NotActive(partition, ErrorCode.NOT_COORDINATOR)
        if slot.state is not ShardState.ACTIVE:
            raise NotActive(partition, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        slot.touched = True
        return slot.shard

    def active_slots(self) -> Iterator[ShardSlot[S]]:
        """Every ACTIVE slot, by partition, each marked for the next poll."""
        for partition in sorted(self._slots):
            slot = self._slots[partition]
            if slot.state is ShardState.ACTIVE:
                slot.touched = True
                yield slot

    def loading(self) -> list[int]:
        """The partitions whose shard is still LOADING."""
        return sorted(p for p, slot in self._slots.items() if slot.state is ShardState.LOADING)

    def partitions(self) -> list[int]:
        """The partitions with a shard here, loading or active."""
        return sorted(self._slots)

    def poll(self, now_ms: int) -> tuple[list[ShardSlot[S]], int | None]:
        """Poll the due and touched ACTIVE shards: those polled, and the next deadline of all."""
        polled = []
        for slot in list(self._slots.values()):
            if slot.state is not ShardState.ACTIVE:
                continue
            if slot.touched or (slot.deadline_ms is not None and slot.deadline_ms <= now_ms):
                slot.touched = False
                slot.deadline_ms = slot.shard.poll(now_ms)
                polled.append(slot)
        deadlines = [
            s.deadline_ms for s in self._slots.values() if s.deadline_ms is not None and s.state is ShardState.ACTIVE
        ]
        return polled, min(deadlines) if deadlines else None
