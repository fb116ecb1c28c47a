"""AlterPartitionReassignments and ListPartitionReassignments on the controller, over an RF=3
partition of brokers 1-3 with a fourth broker registered: a move onto broker 4 writes the
adding and removing replicas, the leader's AlterPartition that brings 4 into the ISR completes
it (and moves the leadership off the removed leader), a cancel goes back, and each refusal is
Kafka's code and message while the request's other partitions still move."""

from __future__ import annotations

from typing import Any

from kafkalike.controller.reassignment_control import alter_partition_reassignments, list_partition_reassignments
from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.broker_simulation import as_message
from tests.unit.controller.test_partition_control import Cluster

E = ErrorCode


class FourBrokers(Cluster):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.epochs[4] = self.start(4)

    def reassign(
        self, *partitions: tuple[str, int, list[int] | None], version: int = 1, allow_rf_change: bool = True
    ) -> list[tuple[str, int, int, str | None]]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for name, index, replicas in partitions:
            topics.setdefault(name, []).append({"partition_index": index, "replicas": replicas})
        body = {
            "timeout_ms": 1000,
            "allow_replication_factor_change": allow_rf_change,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
        }
        request = as_message("AlterPartitionReassignments", "request", version, body)
        response = self.apply(
            alter_partition_reassignments(self.image, self.manager.partitions, request, version)
        ).to_response()
        return [
            (t["name"], p["partition_index"], p["error_code"], p["error_message"])
            for t in response["responses"]
            for p in t["partitions"]
        ]

    def listed(
        self, topics: dict[str, list[int]] | None = None
    ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        asked = None if topics is None else [{"name": n, "partition_indexes": ps} for n, ps in topics.items()]
        request = as_message("ListPartitionReassignments", "request", 0, {"timeout_ms": 1000, "topics": asked})
        response = list_partition_reassignments(self.image, request)
        return [
            (t["name"], p["partition_index"], p["replicas"], p["adding_replicas"], p["removing_replicas"])
            for t in response["topics"]
            for p in t["partitions"]
        ]


def test_a_move_onto_a_new_broker_completes_when_it_joins_the_isr() -> None:
    c = FourBrokers()
    assert c.reassign(("t", 0, [2, 3, 4])) == [("t", 0, E.NONE, None)]
    p = c.partition()
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == ((2, 3, 4, 1), (4,), (1,), 1)
    assert c.listed() == [("t", 0, [2, 3, 4, 1], [4], [1])]
    assert c.listed({"t": [0, 7], "missing": [0]}) == [("t", 0, [2, 3, 4, 1], [4], [1])]

    assert c.alter([1, 2, 3])["error_code"] == E.NONE  # 4 not caught up: still moving
    assert c.partition().adding_replicas == (4,)
    # The leader reports 4 in sync: the move completes, and 1 (removed) stops leading.
    assert c.alter([1, 2, 3, 4])["error_code"] == E.NEW_LEADER_ELECTED
    p = c.partition()
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader) == ((2, 3, 4), (2, 3, 4), (), (), 2)
    assert c.listed() == []


def test_a_reorder_completes_at_once_and_keeps_the_leader() -> None:
    c = FourBrokers()
    epoch = c.partition().leader_epoch
    assert c.reassign(("t", 0, [3, 2, 1])) == [("t", 0, E.NONE, None)]
    p = c.partition()
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader, p.leader_epoch) == (
        (3, 2, 1),
        (),
        (),
        1,
        epoch,
    )
    assert c.reassign(("t", 0, [3, 2, 1])) == [("t", 0, E.NONE, None)]  # the same again: nothing written


def test_a_cancel_goes_back_to_the_original_replicas() -> None:
    c = FourBrokers()
    c.reassign(("t", 0, [2, 3, 4]))
    assert c.reassign(("t", 0, None)) == [("t", 0, E.NONE, None)]
    p = c.partition()
    # As Kafka's revert: the moving replicas without the added ones, so in the target's order
    # (2, 3) with the removed 1 after them, not the order before the move.
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader) == ((2, 3, 1), (1, 2, 3), (), (), 1)
    assert c.reassign(("t", 0, None)) == [
        ("t", 0, E.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    ]


def test_refusals_answer_per_partition_and_the_others_still_move() -> None:
    c = FourBrokers(partitions=2)
    answers = c.reassign(
        ("t", 0, [1, 2, 2]),
        ("t", 1, [2, 3, 4]),
        ("t", 9, [1, 2, 3]),
        ("t", 0, [1, 2, 9]),
        ("t", 0, []),
        ("nope", 0, [1, 2, 3]),
    )
    duplicate = "The manual partition assignment includes the broker 2 more than once."
    unregistered = "The manual partition assignment includes broker 9, but no such broker is registered."
    assert answers == [
        ("t", 0, E.INVALID_REPLICA_ASSIGNMENT, duplicate),
        ("t", 1, E.NONE, None),
        ("t", 9, E.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:9."),
        ("t", 0, E.INVALID_REPLICA_ASSIGNMENT, unregistered),
        ("t", 0, E.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        ("nope", 0, E.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
    ]
    assert c.partition(1).adding_replicas == (4,) and c.partition(0).adding_replicas == ()


def test_v1_may_forbid_changing_the_replication_factor() -> None:
    c = FourBrokers()
    refused = c.reassign(("t", 0, [2, 3]), allow_rf_change=False)
    assert refused == [("t", 0, E.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2")]
    assert c.reassign(("t", 0, [2, 3, 4]), allow_rf_change=False) == [("t", 0, E.NONE, None)]
    # During a move the factor is the original one's (3), not the 4 replicas held meanwhile.
    assert c.reassign(("t", 0, [4, 3, 1]), allow_rf_change=False) == [("t", 0, E.NONE, None)]
    assert c.reassign(("t", 0, [1, 2]), version=0, allow_rf_change=False) == [
        ("t", 0, E.NONE, None)
    ]  # v0: always allowed
