"""The rack-aware replica selector (KIP-392) as Kafka's RackAwareReplicaSelector chooses."""

from __future__ import annotations

from kafkalike.replica.selector import ReplicaView, rack_aware_select

LEADER = ReplicaView(1, "a", True, 100, 0)


def view(broker_id: int, rack: str | None, end: int = 100, since_ms: int = 0) -> ReplicaView:
    return ReplicaView(broker_id, rack, True, end, since_ms)


def test_no_rack_or_no_replica_in_it_reads_from_the_leader() -> None:
    replicas = [LEADER, view(2, "b"), view(3, "c")]
    assert rack_aware_select("", LEADER, replicas) == LEADER
    assert rack_aware_select("z", LEADER, replicas) == LEADER


def test_the_leader_in_the_clients_rack_is_kept() -> None:
    assert rack_aware_select("a", LEADER, [LEADER, view(2, "a", end=200)]) == LEADER


def test_the_most_caught_up_replica_of_the_rack_is_chosen() -> None:
    behind, ahead = view(2, "b", end=90), view(3, "b", end=95)
    assert rack_aware_select("b", LEADER, [LEADER, behind, ahead]) == ahead
    # The same log end: the most recently caught up, then the highest id.
    stale, fresh = view(2, "b", since_ms=500), view(3, "b", since_ms=10)
    assert rack_aware_select("b", LEADER, [LEADER, fresh, stale]) == fresh
    assert rack_aware_select("b", LEADER, [LEADER, view(2, "b"), view(4, "b")]).broker_id == 4
