"""Partition reassignment on a 4-node cluster (in-process nodes), through the wire APIs Kafka's
admin client and ``kafka-reassign-partitions`` use: AlterPartitionReassignments moves a
partition onto brokers that did not hold it (they copy its log from the leader, join the ISR,
and the old replicas are removed and delete their logs), ListPartitionReassignments shows a move
still in progress with its adding and removing replicas, and a cancel puts the replicas back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.cluster import Cluster, NodeThread
from kafkalike.testing.wire_client import WireClient
from tests.server.test_partition_replication import log_bytes, node, produce, values

WAIT_S = 30.0  # a bound on waits that end within seconds when the cluster is right
ALTER, LIST, METADATA = 45, 46, 3


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=4, overrides={"replica.lag.time.max.ms": "2000"}) as running:
        yield running


def request(cluster: Cluster, api_key: int, version: int, body: dict[str, Any], via: int | None = None) -> Any:
    target = node(cluster, via if via is not None else cluster.active_controller())
    with WireClient(target.address.host, target.address.client_port, timeout_s=WAIT_S) as client:
        return client.request(api_key, version, body)


def reassign(cluster: Cluster, topic: str, moves: dict[int, list[int] | None], via: int | None = None) -> Any:
    partitions = [{"partition_index": p, "replicas": r} for p, r in moves.items()]
    body = {
        "timeout_ms": 10_000,
        "allow_replication_factor_change": True,
        "topics": [{"name": topic, "partitions": partitions}],
    }
    return request(cluster, ALTER, 1, body, via)


def errors(response: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {
        (t.name, p.partition_index): (p.error_code, p.error_message) for t in response.responses for p in t.partitions
    }


def ongoing(
    cluster: Cluster, topics: dict[str, list[int]] | None = None
) -> dict[tuple[str, int], tuple[list[int], ...]]:
    asked = None if topics is None else [{"name": n, "partition_indexes": ps} for n, ps in topics.items()]
    response = request(cluster, LIST, 0, {"timeout_ms": 10_000, "topics": asked})
    assert response.error_code == 0
    return {
        (t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in response.topics
        for p in t.partitions
    }


def replicas(cluster: Cluster, topic: str, via: int | None = None) -> dict[int, list[int]]:
    body = {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False}
    response = request(cluster, METADATA, 12, body, via)
    return {p.partition_index: list(p.replica_nodes) for t in response.topics for p in t.partitions}


def partition_dir(cluster: Cluster, node_id: int, topic: str, partition: int) -> Path:
    found = cluster.broker(node_id)
    assert isinstance(found, NodeThread)
    return Path(found.config["log.dirs"]) / f"{topic}-{partition}"


def test_a_partition_moves_onto_brokers_that_did_not_hold_it(cluster: Cluster) -> None:
    cluster.create_topic("moving", partitions=1, replication_factor=2, configs={"min.insync.replicas": "2"})
    acked = [b"record-%d" % i for i in range(40)]
    for value in acked:
        assert produce(cluster, "moving", [value]) is ErrorCode.NONE
    (before,) = replicas(cluster, "moving").values()
    target = [n for n in cluster.node_ids if n not in before]

    answer = reassign(cluster, "moving", {0: target}, via=before[0])
    assert answer.error_code == 0
    assert errors(answer) == {("moving", 0): (0, None)}

    # The new replicas copy the log, join the ISR, and the old ones are removed: the move is
    # over once the controller's image (and so every broker's Metadata) names only the target.
    def moved() -> bool:
        return all(replicas(cluster, "moving", via=n) == {0: target} for n in cluster.node_ids)

    cluster.wait_for(moved, "the partition on its target replicas", WAIT_S)
    assert ongoing(cluster) == {}
    cluster.wait_in_sync("moving", replicas=target, timeout_s=WAIT_S)
    assert cluster.leader("moving", 0) in target
    assert values(cluster, "moving") == acked
    new_leader = cluster.leader("moving", 0)
    for node_id in target:
        assert log_bytes(cluster, node_id, "moving", 0) == log_bytes(cluster, new_leader, "moving", 0)
    # The removed replicas stopped and deleted their logs.
    cluster.wait_for(
        lambda: not any(partition_dir(cluster, n, "moving", 0).exists() for n in before),
        "the old replicas' directories deleted",
        WAIT_S,
    )
    # The partition takes writes on its new replicas.
    assert produce(cluster, "moving", [b"after"]) is ErrorCode.NONE
    assert values(cluster, "moving") == [*acked, b"after"]


def test_a_move_waiting_on_a_stopped_broker_is_listed_and_can_be_cancelled(cluster: Cluster) -> None:
    cluster.create_topic("stuck", partitions=2, replication_factor=2)
    assert produce(cluster, "stuck", [b"one", b"two"]) is ErrorCode.NONE
    before = replicas(cluster, "stuck")
    spare = next(n for n in cluster.node_ids if n not in before[0] and n != cluster.active_controller())
    node(cluster, spare).stop()
    target = [spare, before[0][0]]

    answer = reassign(cluster, "stuck", {0: target, 7: [1, 2]})
    assert errors(answer) == {
        ("stuck", 0): (0, None),
        ("stuck", 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition stuck:7."),
    }
    # The stopped broker cannot catch up: the move stays in progress, the target first.
    dropped = [r for r in before[0] if r not in target]
    expected = ([*target, *dropped], [spare], dropped)
    assert ongoing(cluster) == {("stuck", 0): expected}
    assert ongoing(cluster, {"stuck": [0, 1], "missing": [0]}) == {("stuck", 0): expected}
    assert replicas(cluster, "stuck")[0] == expected[0]

    cancelled = reassign(cluster, "stuck", {0: None, 1: None})
    assert errors(cancelled) == {
        ("stuck", 0): (0, None),
        ("stuck", 1): (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."),
    }
    assert ongoing(cluster) == {}
    assert replicas(cluster, "stuck") == before
    assert values(cluster, "stuck") == [b"one", b"two"]


def alter_configs(
    cluster: Cluster, resources: list[tuple[int, str, dict[str, str | None]]], via: int | None = None
) -> list[int]:
    """IncrementalAlterConfigs: SET each value, DELETE each None; the error code of each resource."""
    body = {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [
                    {"name": k, "config_operation": 0 if v is not None else 1, "value": v} for k, v in configs.items()
                ],
            }
            for resource_type, name, configs in resources
        ],
        "validate_only": False,
    }
    return [r.error_code for r in request(cluster, 44, 1, body, via).responses]


def set_on_every_broker(cluster: Cluster, name: str, value: str | None) -> None:
    """A broker config set (None: deleted) on each broker, through that broker (as the admin
    client sends a broker's resource to it)."""
    for n in cluster.node_ids:
        assert alter_configs(cluster, [(4, str(n), {name: value})], via=n) == [0]


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_throttled_move_waits_on_the_rate_until_the_throttle_is_cleared(side: str) -> None:
    # Small fetches, so that copying the partition takes several; the first one's bytes put the
    # rate above 1 byte a second for the next ~11 s (11 one-second samples).
    overrides = {"replica.lag.time.max.ms": "2000", "replica.fetch.max.bytes": "16384"}
    with Cluster(brokers=4, overrides=overrides) as cluster:
        cluster.create_topic("slow", configs={f"{side}.replication.throttled.replicas": "*"})
        for i in range(8):
            assert produce(cluster, "slow", [bytes([i]) * 10_000] * 2) is ErrorCode.NONE
        (before,) = replicas(cluster, "slow").values()
        added = next(n for n in cluster.node_ids if n not in before)
        rate = f"{side}.replication.throttled.rate"
        set_on_every_broker(cluster, rate, "1")
        assert errors(reassign(cluster, "slow", {0: [*before, added]})) == {("slow", 0): (0, None)}

        follower = node(cluster, added).node
        leader = node(cluster, before[0]).node
        assert follower is not None and follower.broker is not None
        assert leader is not None and leader.broker is not None
        fetchers = follower.broker.fetchers
        leader_end = leader.broker.replicas[("slow", 0)].log_end_offset
        hosted = follower.broker.replicas

        def copied() -> int:
            found = hosted.get(("slow", 0))
            return 0 if found is None else found.log_end_offset

        def held_back() -> int:
            # The leader answers with no records; the follower does not ask.
            return fetchers.fetches if side == "leader" else fetchers.throttled

        cluster.wait_for(lambda: copied() > 0, "the first throttled fetch's records", WAIT_S)
        first, held = copied(), held_back()
        cluster.wait_for(lambda: held_back() >= held + 3, "three more fetches held back", WAIT_S)
        assert copied() == first < leader_end
        assert ("slow", 0) in ongoing(cluster)

        # Cleared (as kafka-reassign-partitions --verify clears it): the move completes.
        set_on_every_broker(cluster, rate, None)
        cluster.wait_for(lambda: ongoing(cluster) == {}, "the move completed", WAIT_S)
        assert replicas(cluster, "slow") == {0: [*before, added]}
        assert log_bytes(cluster, added, "slow", 0) == log_bytes(cluster, before[0], "slow", 0)
