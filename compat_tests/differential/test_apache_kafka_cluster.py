"""A 3-node Apache Kafka cluster through the process-cluster kit (the nodes of $KAFKALIKE_AK_LIB):
what a node's SIGKILL does to Metadata, and to the quorum when it was the active controller. The
same kit starts kafkalike's nodes; these are the behaviours a kafkalike cluster must show.

One cluster for the module (three JVMs, ~400 MB each); the session timeout is shortened so that
fencing takes seconds, not Kafka's default nine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_LIB
from kafkalike.testing.apache_kafka import ApacheKafkaCluster
from kafkalike.testing.cluster_requests import metadata_brokers

pytestmark = pytest.mark.differential

SESSION_TIMEOUT_MS = 4000
NO_LEADER = -1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaCluster]:
    overrides = {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS), "broker.heartbeat.interval.ms": "500"}
    with ApacheKafkaCluster(
        3, data_dir=tmp_path_factory.mktemp("ak-cluster"), lib_dir=Path(AK_LIB), overrides=overrides
    ) as running:
        yield running


def led(leaders: dict[int, int], partitions: int) -> bool:
    """Every partition is listed (the asked broker knows the topic) and has a leader."""
    return len(leaders) == partitions and NO_LEADER not in leaders.values()


def test_a_killed_broker_leaves_metadata_once_fenced_and_comes_back(cluster: ApacheKafkaCluster) -> None:
    controller = cluster.active_controller()
    victim, survivor = (n for n in cluster.node_ids if n != controller)
    assert cluster.create_topic("spread", partitions=6, via=survivor) == 0
    cluster.wait_for(lambda: led(cluster.partition_leaders("spread", via=survivor), 6), "leaders")
    on_victim = [p for p, leader in cluster.partition_leaders("spread", via=survivor).items() if leader == victim]
    assert on_victim  # round-robin placement put some of the six partitions there

    cluster.node(victim).kill()
    assert victim in cluster.metadata_brokers(via=survivor)  # not fenced before its session times out
    cluster.wait_for(
        lambda: victim not in cluster.metadata_brokers(via=survivor), "fencing", 6 * SESSION_TIMEOUT_MS / 1000
    )
    assert cluster.metadata_brokers(via=survivor) == set(cluster.node_ids) - {victim}
    leaders = cluster.partition_leaders("spread", via=survivor)
    assert all(leaders[p] == NO_LEADER for p in on_victim)  # replication factor 1: nobody to take over
    assert cluster.active_controller() == controller  # a broker's loss is no election

    cluster.node(victim).start()
    assert metadata_brokers(cluster.node(victim).address) >= {victim}
    cluster.wait_for(lambda: cluster.metadata_brokers(via=survivor) == set(cluster.node_ids), "the node back")
    cluster.wait_for(
        lambda: all(cluster.leader("spread", p, via=survivor) == victim for p in on_victim), "leaders back"
    )


def test_the_active_controller_killed_a_new_one_takes_over(cluster: ApacheKafkaCluster) -> None:
    controller = cluster.active_controller()
    survivor = next(n for n in cluster.node_ids if n != controller)
    cluster.node(controller).kill()
    successor = cluster.active_controller(timeout_s=30, exclude={controller})
    assert successor != controller
    assert cluster.create_topic("after-failover", via=survivor) == 0
    cluster.node(controller).start()
    cluster.wait_for(lambda: cluster.metadata_brokers(via=survivor) == set(cluster.node_ids), "the node back")
