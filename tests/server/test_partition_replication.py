"""Partition replication on a 3-node cluster (in-process nodes): acks=all answered only once every
ISR member has the batch, followers' logs byte-identical to the leader's, failover without losing
an acknowledged write, ISR shrinking when a follower stops and expanding when it catches up,
NOT_ENOUGH_REPLICAS below min.insync.replicas."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from kafkalike.server.clock import SystemClock
from kafkalike.testing.cluster import Cluster, NodeThread
from kafkalike.testing.wire_client import WireClient

WAIT_S = 30.0  # a bound on waits that end within seconds when the cluster is right


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    # ISR expiry in seconds rather than Kafka's 30 s: the same rule, sooner.
    with Cluster(brokers=3, overrides={"replica.lag.time.max.ms": "2000"}) as running:
        yield running


def node(cluster: Cluster, node_id: int) -> NodeThread:
    found = cluster.broker(node_id)
    assert isinstance(found, NodeThread)
    return found


def log_bytes(cluster: Cluster, node_id: int, topic: str, partition: int) -> bytes:
    """The partition's segment files on the node, in offset order."""
    directory = Path(node(cluster, node_id).config["log.dirs"]) / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def produce(cluster: Cluster, topic: str, values: list[bytes], acks: int = -1, partition: int = 0) -> ErrorCode:
    """One batch to the partition's leader; the answer's error code."""
    leader = node(cluster, cluster.leader(topic, partition))
    # Stamped now: a record of 1970 is past any retention, and deleted by it.
    batch = build_batch([Record(value=v) for v in values], base_timestamp=SystemClock().wall_ms())
    body = {
        "acks": acks,
        "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    with WireClient(leader.address.host, leader.address.client_port) as client:
        response = client.request(0, 9, body)
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def values(cluster: Cluster, topic: str, partition: int = 0) -> list[bytes | None]:
    return [record.value for _, record in cluster.consume(topic, partition)]


def test_acks_all_writes_are_on_every_replica_byte_for_byte(cluster: Cluster) -> None:
    cluster.create_topic("copied", partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"})
    for i in range(20):
        assert produce(cluster, "copied", [b"record-%d" % i, b"second-%d" % i]) is ErrorCode.NONE
    assert len(values(cluster, "copied")) == 40
    leader = cluster.leader("copied", 0)
    expected = log_bytes(cluster, leader, "copied", 0)
    # acks=all answered: every ISR member has the batches; with their offsets and epochs kept,
    # a follower's log is the leader's, byte for byte.
    for node_id in cluster.node_ids:
        assert log_bytes(cluster, node_id, "copied", 0) == expected, node_id


def test_the_new_leader_has_every_acknowledged_write(cluster: Cluster) -> None:
    cluster.create_topic("failover", partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"})
    acked = [b"before-%d" % i for i in range(30)]
    for value in acked:
        assert produce(cluster, "failover", [value]) is ErrorCode.NONE
    old_leader = cluster.leader("failover", 0)
    node(cluster, old_leader).kill()
    cluster.wait_for(lambda: cluster.leader("failover", 0) not in (old_leader, -1), "a new leader", timeout_s=WAIT_S)
    # The new leader's high watermark was learned from its last fetch, one round behind: it
    # reaches the old one once the other follower fetched from it (Kafka's new leaders do the same).
    cluster.wait_for(lambda: values(cluster, "failover") == acked, "every acknowledged write readable", WAIT_S)
    # The survivors take writes (min.insync.replicas=2 of the two left) ...
    assert produce(cluster, "failover", [b"after"]) is ErrorCode.NONE
    # ... and the old leader, back, catches up and joins the ISR again.
    node(cluster, old_leader).start()
    cluster.wait_in_sync("failover", timeout_s=WAIT_S)
    assert log_bytes(cluster, old_leader, "failover", 0) == log_bytes(
        cluster, cluster.leader("failover", 0), "failover", 0
    )


def test_a_follower_cut_off_leaves_the_isr_and_rejoins_once_it_caught_up(cluster: Cluster) -> None:
    cluster.create_topic("lagging", partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"})
    leader = cluster.leader("lagging", 0)
    follower = next(n for n in cluster.node_ids if n != leader and n != cluster.active_controller())
    cluster.isolate(follower)
    cluster.wait_for(
        lambda: follower not in cluster.isr("lagging", 0, via=leader), "the ISR without the follower", WAIT_S
    )
    # Two of three in sync: acks=all still succeeds, and the follower falls behind.
    for i in range(10):
        assert produce(cluster, "lagging", [b"while-cut-%d" % i]) is ErrorCode.NONE
    cluster.heal()
    cluster.wait_in_sync("lagging", timeout_s=WAIT_S)
    assert log_bytes(cluster, follower, "lagging", 0) == log_bytes(cluster, leader, "lagging", 0)


def test_acks_all_is_refused_below_min_insync_replicas_and_acks_1_is_not(cluster: Cluster) -> None:
    cluster.create_topic("strict", partitions=1, replication_factor=3, configs={"min.insync.replicas": "3"})
    assert produce(cluster, "strict", [b"all three"]) is ErrorCode.NONE
    leader = cluster.leader("strict", 0)
    follower = next(n for n in cluster.node_ids if n != leader)
    node(cluster, follower).kill()
    cluster.wait_for(lambda: follower not in cluster.isr("strict", 0, via=leader), "the ISR shrunk", WAIT_S)
    assert produce(cluster, "strict", [b"refused"]) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce(cluster, "strict", [b"leader only"], acks=1) is ErrorCode.NONE
    node(cluster, follower).start()
    cluster.wait_in_sync("strict", timeout_s=WAIT_S)
    assert produce(cluster, "strict", [b"all three again"]) is ErrorCode.NONE
    assert values(cluster, "strict") == [b"all three", b"leader only", b"all three again"]


def delete_records(cluster: Cluster, topic: str, offset: int, timeout_ms: int) -> tuple[ErrorCode, int]:
    leader = node(cluster, cluster.leader(topic, 0))
    body = {
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}],
        "timeout_ms": timeout_ms,
    }
    with WireClient(leader.address.host, leader.address.client_port) as client:
        (answer,) = client.request(21, 2, body).topics[0].partitions
    return ErrorCode(answer.error_code), answer.low_watermark


def log_starts(cluster: Cluster, topic: str, node_ids: Iterable[int]) -> set[int]:
    starts = set()
    for node_id in node_ids:
        running = node(cluster, node_id).node
        assert running is not None
        starts.add(running.broker.replicas[(topic, 0)].log_start_offset)
    return starts


def test_deleted_records_are_answered_once_every_replica_deleted_them(cluster: Cluster) -> None:
    cluster.create_topic("trimmed", partitions=1, replication_factor=3)
    for i in range(10):
        assert produce(cluster, "trimmed", [b"r-%d" % i]) is ErrorCode.NONE
    # Kafka's DelayedDeleteRecords: the answer waits until the low watermark (the smallest log
    # start over the replicas, each follower's from its fetches) reached the offset.
    assert delete_records(cluster, "trimmed", 6, timeout_ms=10_000) == (ErrorCode.NONE, 6)
    assert log_starts(cluster, "trimmed", cluster.node_ids) == {6}


def test_deleted_records_time_out_while_an_alive_follower_has_not_followed(cluster: Cluster) -> None:
    cluster.create_topic("held", partitions=1, replication_factor=3)
    for i in range(10):
        assert produce(cluster, "held", [b"r-%d" % i]) is ErrorCode.NONE
    leader = cluster.leader("held", 0)
    follower = next(n for n in cluster.node_ids if n != leader and n != cluster.active_controller())
    cluster.isolate(follower)  # still registered and unfenced for its session timeout
    assert delete_records(cluster, "held", 6, timeout_ms=1_000) == (ErrorCode.REQUEST_TIMED_OUT, 0)
    others = [n for n in cluster.node_ids if n != follower]
    cluster.wait_for(lambda: log_starts(cluster, "held", others) == {6}, "the others' log starts at 6", WAIT_S)
    cluster.heal()
    assert delete_records(cluster, "held", 6, timeout_ms=int(WAIT_S * 1000)) == (ErrorCode.NONE, 6)
    assert log_starts(cluster, "held", cluster.node_ids) == {6}
