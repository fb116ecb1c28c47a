"""What a partition's leader knows of each follower replica (Kafka's ``Replica`` and its
``ReplicaState``), and the ISR changes it proposes to the controller.

A follower's position is what its last Fetch said: the fetch offset is its log end offset,
its log start offset came with it, and the leader's own log end offset at that moment is
kept (``last_fetch_leader_log_end_offset``) for Kafka's caught-up rule:

- a fetch at or past the leader's log end makes the follower caught up at that fetch's time;
- a fetch at or past what the leader's log end was at the follower's *previous* fetch makes it
  caught up at the previous fetch's time (it had everything the leader had then);
- caught up now = its log end equals the leader's, or it was caught up within
  ``replica.lag.time.max.ms``.

A broker epoch (KIP-903) older than the one the metadata registers for the broker is a stale
fetch of a previous incarnation: refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

UNKNOWN_OFFSET = -1


class StaleBrokerEpoch(Exception):
    """A follower's fetch names a broker epoch older than the one registered (KIP-903)."""


@dataclass(slots=True)
class FollowerState:
    broker_id: int
    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int | None = None

    def update_fetch_state(
        self,
        fetch_offset: int,
        log_start_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        broker_epoch: int,
        registered_epoch: int | None,
    ) -> None:
        """Kafka's Replica.updateFetchStateOrThrow. ``registered_epoch``: the broker's epoch in
        the metadata (None: not registered, or not alive). Raises StaleBrokerEpoch."""
        if broker_epoch != -1 and registered_epoch is not None and registered_epoch > broker_epoch:
            raise StaleBrokerEpoch(
                f"Received stale fetch state update. broker epoch={broker_epoch} vs expected={registered_epoch}"
            )
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms
        self.broker_epoch = broker_epoch

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def reset(self, now_ms: int, *, new_leader: bool, in_sync: bool) -> None:
        """Kafka's resetReplicaState at a new leader epoch: an ISR member counts as caught up now
        (it is not shrunk away before it could fetch), anyone else as never; a replica that has
        just become leader knows nothing of its followers' positions yet."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if new_leader:
            self.log_start_offset = UNKNOWN_OFFSET
            self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0
            self.broker_epoch = None


class IsrChangeKind(Enum):
    EXPAND = "expand"
    SHRINK = "shrink"


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An AlterPartition proposal of the partition's leader (Kafka's PendingExpandIsr /
    PendingShrinkIsr): the ISR it asks for, at the epochs it knows. At most one is in flight per
    partition; until the controller answered, the high watermark counts the *maximal* ISR (the
    committed one plus an addition, a removal not yet applied)."""

    kind: IsrChangeKind
    topic: str
    index: int
    leader_epoch: int
    partition_epoch: int
    committed_isr: tuple[int, ...]
    new_isr: tuple[tuple[int, int], ...]  # (broker id, broker epoch; -1 when unknown)
    leader_recovery_state: int = 0

    @property
    def new_isr_ids(self) -> tuple[int, ...]:
        return tuple(b for b, _ in self.new_isr)

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.kind is IsrChangeKind.EXPAND:
            return self.new_isr_ids
        return self.committed_isr
