"""``Cluster(brokers=3)``: three combined Nodes in threads, one metadata quorum. Per-node kill,
stop and start keep a node's ports and data; ``isolate`` cuts a node off from the others at
every inter-node channel (its quorum traffic first), ``heal`` undoes it; topics are spread over
the brokers and records reach the partition's leader."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkalike.testing.cluster import Cluster

WAIT_S = 30.0


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3) as running:
        yield running
    assert running.logged_errors == []


def follows(cluster: Cluster, node_id: int, leader_id: int) -> bool:
    view = cluster.quorum_state().get(node_id)
    return view is not None and view[0] == leader_id


def test_isolating_the_active_controller_elects_another_and_heal_brings_it_back(cluster: Cluster) -> None:
    leader = cluster.active_controller()
    epoch = cluster.quorum_state()[leader][1]
    cluster.isolate(leader)
    successor = cluster.active_controller(WAIT_S, exclude={leader})
    assert successor != leader and cluster.quorum_state()[successor][1] > epoch
    assert all(follows(cluster, n, successor) for n in cluster.node_ids if n != leader)
    cluster.heal()
    cluster.wait_for(lambda: follows(cluster, leader, successor), f"node {leader} following {successor}", WAIT_S)
    assert cluster.active_controller() == successor  # the healed node rejoins, it does not disrupt


def test_a_killed_node_restarts_on_its_ports_and_follows_again(cluster: Cluster) -> None:
    leader = cluster.active_controller()
    follower = next(n for n in cluster.node_ids if n != leader)
    address = cluster.broker(follower).bootstrap
    cluster.broker(follower).kill()
    assert not cluster.broker(follower).running and follower not in cluster.quorum_state()
    assert cluster.active_controller() == leader  # a follower's loss is no election
    cluster.broker(follower).start()
    assert cluster.broker(follower).bootstrap == address and cluster.broker(follower).running
    cluster.wait_for(lambda: follows(cluster, follower, leader), f"node {follower} following {leader}", WAIT_S)


def test_a_leader_stopped_gracefully_hands_over_at_once(cluster: Cluster) -> None:
    leader = cluster.active_controller()
    cluster.broker(leader).stop()  # resigns (EndQuorumEpoch) before it stops
    successor = cluster.active_controller(WAIT_S, exclude={leader})
    assert successor != leader
    cluster.broker(leader).start()
    cluster.wait_for(lambda: follows(cluster, leader, successor), f"node {leader} following {successor}", WAIT_S)


def test_isolate_names_a_node_of_the_cluster(cluster: Cluster) -> None:
    with pytest.raises(KeyError, match="no broker with node id 9"):
        cluster.isolate(9)


def test_a_topic_is_spread_over_the_brokers_and_records_reach_each_leader(cluster: Cluster) -> None:
    cluster.create_topic("spread", partitions=6)
    leaders = {p: cluster.leader("spread", p) for p in range(6)}
    assert sorted(leaders.values()) == [1, 1, 2, 2, 3, 3]  # round-robin placement
    assert all(cluster.leader("spread", p, via=n) == leaders[p] for n in cluster.node_ids for p in range(6))
    for p in range(6):
        assert cluster.produce("spread", b"to-%d" % p, partition=p) == 0
    assert [[r.value for _, r in cluster.consume("spread", p)] for p in range(6)] == [[b"to-%d" % p] for p in range(6)]


def test_kafka_python_produces_and_consumes_across_the_brokers(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    cluster.create_topic("clients", partitions=3)
    first = cluster.broker(1).bootstrap  # the client finds the other brokers through Metadata
    producer = KafkaProducer(bootstrap_servers=first, acks="all")
    for i in range(30):
        producer.send("clients", b"%d" % i, partition=i % 3)
    producer.flush(WAIT_S)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=first, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition("clients", p) for p in range(3)])
    got: list[bytes] = []
    cluster.wait_for(
        lambda: bool(got.extend(r.value for rs in consumer.poll(200).values() for r in rs)) or len(got) >= 30,
        "30 records",
        WAIT_S,
    )
    consumer.close()
    assert sorted(got, key=int) == [b"%d" % i for i in range(30)]


def test_a_topic_replicated_on_every_broker_is_created_with_a_leader_per_partition(cluster: Cluster) -> None:
    cluster.create_topic("replicated", partitions=3, replication_factor=3)  # returns once leaders are listed
    assert all(cluster.leader("replicated", p) in cluster.node_ids for p in range(3))


def test_a_killed_broker_leaves_metadata_loses_its_partitions_leadership_and_comes_back(cluster: Cluster) -> None:
    cluster.create_topic("fenced", partitions=3)
    controller = cluster.active_controller()
    victim = next(n for n in cluster.node_ids if n != controller)
    survivor = next(n for n in cluster.node_ids if n not in (controller, victim))
    on_victim = [p for p in range(3) if cluster.leader("fenced", p) == victim]
    assert on_victim
    cluster.broker(victim).kill()
    cluster.wait_for(lambda: victim not in cluster.metadata_brokers(via=survivor), "fencing", WAIT_S)
    assert all(cluster.leader("fenced", p, via=survivor) == -1 for p in on_victim)
    cluster.broker(victim).start()
    cluster.wait_for(lambda: victim in cluster.metadata_brokers(via=survivor), "the broker listed again", WAIT_S)


def test_a_killed_leader_of_a_replicated_partition_hands_it_to_another_replica(cluster: Cluster) -> None:
    cluster.create_topic("handed", partitions=3, replication_factor=3)  # leaders spread over the nodes
    controller = cluster.active_controller()
    # A partition led by another node than the quorum's leader: this is about the partition's leader.
    partition, victim = next((p, v) for p in range(3) if (v := cluster.leader("handed", p)) != controller)
    survivor = next(n for n in cluster.node_ids if n not in (controller, victim))
    cluster.broker(victim).kill()
    cluster.wait_for(
        lambda: cluster.leader("handed", partition, via=survivor) not in (victim, -1), "another replica leading", WAIT_S
    )
    cluster.broker(victim).start()
    cluster.wait_for(lambda: victim in cluster.metadata_brokers(via=survivor), "the broker listed again", WAIT_S)


def test_an_isolated_broker_is_fenced_and_comes_back_when_healed(cluster: Cluster) -> None:
    controller = cluster.active_controller()
    victim = next(n for n in cluster.node_ids if n != controller)
    cluster.isolate(victim)  # its heartbeats no longer reach the controller
    cluster.wait_for(lambda: victim not in cluster.metadata_brokers(via=controller), "fencing", WAIT_S)
    cluster.heal()
    cluster.wait_for(lambda: victim in cluster.metadata_brokers(via=controller), "the broker back", WAIT_S)
