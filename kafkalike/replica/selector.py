"""Fetching from the closest replica (KIP-392): which replica a leader tells a consumer to read
from (Kafka's ReplicaManager.findPreferredReadReplica with the RackAwareReplicaSelector).

- Only the leader chooses, only for a consumer's fetch (Fetch v11+, which carries the client's
  rack), and only with ``replica.selector.class`` set to the rack-aware selector.
- The candidates are the leader and each follower in the ISR whose log holds the fetch offset
  (log start <= offset <= log end).
- A client without a rack, or with no candidate in its rack, reads from the leader; so does one
  whose rack holds the leader. Otherwise the most caught-up replica of its rack: the longest
  log, then the most recently caught up, then the highest broker id (Kafka's
  ReplicaView.comparator and ``max``).
- A replica with no endpoint on the client's listener (or fenced) is never sent; the leader is
  never sent either: None means "read here".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkalike.replica.partition import Partition

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    broker_id: int
    rack: str | None
    reachable: bool  # an endpoint on the client's listener
    log_end_offset: int
    time_since_caught_up_ms: int

    def rank(self) -> tuple[int, int, int]:
        return (self.log_end_offset, -self.time_since_caught_up_ms, self.broker_id)


def rack_aware_select(client_rack: str, leader: ReplicaView, replicas: list[ReplicaView]) -> ReplicaView:
    """Kafka's RackAwareReplicaSelector.select over the candidates (the leader among them)."""
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=ReplicaView.rank)


def preferred_read_replica(
    partition: Partition,
    client_rack: str,
    fetch_offset: int,
    now_ms: int,
    endpoint_rack: Callable[[int], tuple[bool, str | None]],
) -> int | None:
    """The replica the leader sends a consumer to, or None to read from the leader.
    ``endpoint_rack(broker_id)``: whether the broker has an endpoint on the client's listener,
    and its rack."""
    if not partition.is_leader:
        return None
    leader_id = partition.local_broker_id
    reachable, rack = endpoint_rack(leader_id)
    leader = ReplicaView(leader_id, rack, reachable, partition.log_end_offset, 0)
    candidates = [leader]
    for broker_id, follower in sorted(partition.followers.items()):
        if (
            broker_id in partition.isr
            and follower.log_end_offset >= fetch_offset
            and follower.log_start_offset <= fetch_offset
        ):
            reachable, rack = endpoint_rack(broker_id)
            since = now_ms - follower.last_caught_up_time_ms
            candidates.append(ReplicaView(broker_id, rack, reachable, follower.log_end_offset, since))
    selected = rack_aware_select(client_rack, leader, candidates)
    if selected == leader or not selected.reachable:
        return None
    return selected.broker_id
