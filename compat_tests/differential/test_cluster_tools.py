"""Kafka 4.4.0's own tools against a 3-node kafkalike cluster while a broker is down and after it
is back: ``kafka-topics --describe`` (leaders, replicas, ISR of an RF=3 topic;
``--under-replicated-partitions``, ``--under-min-isr-partitions``, ``--unavailable-partitions``),
``kafka-leader-election --election-type preferred --all-topic-partitions`` (leadership back on
the preferred replicas after the restart), ``kafka-metadata-quorum --bootstrap-server describe
--status / --replication``. What each prints is checked against what the cluster's Metadata and
DescribeQuorum answer, the facts a Kafka cluster's tools print in the same situation.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.failover_support import (
    PARTITIONS,
    ROOT,
    WAIT_S,
    Cluster,
    active_controller,
    every_broker,
    in_sync,
    kill,
    restart,
    running_cluster,
    wait_in_sync,
)
from kafkalike.testing.apache_kafka import java_executable
from kafkalike.testing.cluster_requests import partition_isrs
from kafkalike.testing.process_cluster import KafkalikeCluster, wait_until

# Kafka's tools need its jars: run with the differential suite, which scripts/compat.py gives them.
pytestmark = [pytest.mark.compat, pytest.mark.differential]
AK_LIB = Path(os.environ.get("KAFKALIKE_AK_LIB") or ROOT / "compat_tests" / ".work" / "ak-4.4.0" / "lib")
LOG4J = ROOT / "compat_tests" / ".work" / "tools-log4j2.properties"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
TOOL_TIMEOUT_S = 120
TOPIC, STRICT_TOPIC = "tools-replicated", "tools-strict"  # min.insync.replicas 2 and 3
PARTITION_LINE = re.compile(
    r"Topic: (?P<topic>\S+)\s+Partition: (?P<partition>\d+)\s+Leader: (?P<leader>-?\d+|none)\s+"
    r"Replicas: (?P<replicas>[\d,]*)\s+Isr: (?P<isr>[\d,]*)"
)


@dataclass(frozen=True)
class DescribedPartition:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def tool(main: str, *args: str) -> str:
    """Run one of Kafka's tools; its stdout (a non-zero exit fails the test with its output)."""
    assert AK_LIB.is_dir(), f"Kafka's jars (KAFKALIKE_AK_LIB, set by scripts/compat.py) are not in {AK_LIB}"
    command = [java_executable(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    if LOG4J.exists():
        command.append(f"-Dlog4j2.configurationFile={LOG4J}")
    ran = subprocess.run(
        [*command, "-cp", str(AK_LIB / "*"), main, *args],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        check=False,
    )
    assert ran.returncode == 0, f"{main} {' '.join(args)} exited {ran.returncode}: {ran.stdout}{ran.stderr}"
    return ran.stdout


def ids(text: str) -> tuple[int, ...]:
    return tuple(int(i) for i in text.split(",") if i)


def describe(cluster: Cluster, *args: str) -> list[DescribedPartition]:
    """``kafka-topics --describe ARGS``: its partition lines."""
    out = tool(TOPIC_COMMAND, "--bootstrap-server", every_live_broker(cluster), "--describe", *args)
    return [
        DescribedPartition(
            m["topic"],
            int(m["partition"]),
            -1 if m["leader"] == "none" else int(m["leader"]),
            ids(m["replicas"]),
            ids(m["isr"]),
        )
        for m in PARTITION_LINE.finditer(out)
    ]


def every_live_broker(cluster: Cluster) -> str:
    return cluster.bootstrap_servers


def create_topics(cluster: Cluster) -> None:
    """The two RF=3 topics the checks describe, every partition fully in sync."""
    admin = AdminClient({"bootstrap.servers": every_broker(cluster)})
    topics = [
        NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"}),
        NewTopic(STRICT_TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "3"}),
    ]
    for done in admin.create_topics(topics).values():
        done.result(WAIT_S)
    wait_in_sync(cluster, TOPIC, STRICT_TOPIC)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkalikeCluster]:
    for running in running_cluster(tmp_path_factory.mktemp("tools")):
        create_topics(running)
        yield running


def test_describe_shows_leaders_replicas_and_isr_and_follows_a_broker_down_and_back(
    cluster: KafkalikeCluster,
) -> None:
    check_describe_through_a_broker_down_and_back(cluster)


def test_metadata_quorum_status_and_replication_through_a_broker(cluster: KafkalikeCluster) -> None:
    check_metadata_quorum_through_a_broker(cluster)


# -- the checks, the same against Apache Kafka (differential/test_cluster_tools_kafka.py) ----------


def check_describe_through_a_broker_down_and_back(cluster: Cluster) -> None:
    described = describe(cluster, "--topic", TOPIC)
    assert [p.partition for p in described] == list(range(PARTITIONS))
    leaders = cluster.partition_leaders(TOPIC)
    for p in described:
        assert sorted(p.replicas) == cluster.broker_ids and sorted(p.isr) == cluster.broker_ids, p
        assert p.leader == leaders[p.partition] and p.leader in p.replicas, p
    # Leadership spread by the preferred replica, the first of each partition's replicas.
    assert {p.leader for p in described} == set(cluster.broker_ids)
    assert all(p.leader == p.replicas[0] for p in described)
    assert describe(cluster, "--under-replicated-partitions") == []
    assert describe(cluster, "--under-min-isr-partitions") == []

    controller = active_controller(cluster)
    down = next(b for b in cluster.broker_ids if b != controller)
    kill(cluster, down, TOPIC)
    survivor = cluster.live_brokers()[0]

    def shrunk() -> bool:
        return all(
            down not in isr
            for topic in (TOPIC, STRICT_TOPIC)
            for isr in partition_isrs(survivor.address, topic).values()
        )

    wait_until(shrunk, WAIT_S, f"ISRs without broker {down}")
    # Every partition has a replica on the broker that is down: all are under-replicated.
    under = describe(cluster, "--under-replicated-partitions")
    assert sorted((p.topic, p.partition) for p in under) == sorted(
        (t, i) for t in (TOPIC, STRICT_TOPIC) for i in range(PARTITIONS)
    )
    assert all(down in p.replicas and down not in p.isr and p.leader != down for p in under), under
    # Two in sync: below min.insync.replicas=3 only.
    below_min = describe(cluster, "--under-min-isr-partitions")
    assert sorted((p.topic, p.partition) for p in below_min) == [(STRICT_TOPIC, i) for i in range(PARTITIONS)]
    assert describe(cluster, "--unavailable-partitions") == []

    restart(cluster, down)
    wait_until(lambda: in_sync(cluster, TOPIC) and in_sync(cluster, STRICT_TOPIC), WAIT_S, "both topics in sync")
    assert describe(cluster, "--under-replicated-partitions") == []
    assert describe(cluster, "--under-min-isr-partitions") == []

    # The restarted broker leads nothing (no automatic rebalance here); a preferred election
    # gives it back the partitions whose first replica it is.
    preferred_of_down = [d.partition for d in describe(cluster, "--topic", TOPIC) if d.replicas[0] == down]
    assert preferred_of_down, "the broker that was down is no partition's preferred replica"
    assert all(cluster.leader(TOPIC, index) != down for index in preferred_of_down)
    out = tool(
        LEADER_ELECTION,
        "--bootstrap-server",
        every_live_broker(cluster),
        "--election-type",
        "preferred",
        "--all-topic-partitions",
    )
    assert "Successfully completed leader election (PREFERRED) for partitions" in out, out
    for index in preferred_of_down:
        assert f"{TOPIC}-{index}" in out, out

    def back_on_preferred() -> bool:
        return all(p.leader == p.replicas[0] for p in describe(cluster, "--topic", TOPIC))

    wait_until(back_on_preferred, WAIT_S, "every partition led by its preferred replica")
    # A second run finds nothing to move: Kafka says so, and exits 0.
    again = tool(
        LEADER_ELECTION,
        "--bootstrap-server",
        every_live_broker(cluster),
        "--election-type",
        "preferred",
        "--topic",
        TOPIC,
        "--partition",
        "0",
    )
    assert "Valid replica already elected for partitions" in again, again


def check_metadata_quorum_through_a_broker(cluster: Cluster) -> None:
    controller = active_controller(cluster)
    status = tool(METADATA_QUORUM, "--bootstrap-server", every_live_broker(cluster), "describe", "--status")
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in status.splitlines()) if v}
    assert fields["ClusterId"] == cluster.cluster_id
    assert int(fields["LeaderId"]) == controller
    voters = re.findall(r'"id":\s*(\d+)', fields["CurrentVoters"])
    assert sorted(int(v) for v in voters) == cluster.node_ids
    replication = tool(METADATA_QUORUM, "--bootstrap-server", every_live_broker(cluster), "describe", "--replication")
    rows = [line.split() for line in replication.strip().splitlines()[1:]]
    statuses = {int(row[0]): row[-1] for row in rows}
    assert statuses[controller] == "Leader"
    assert sorted(n for n, s in statuses.items() if s == "Follower") == sorted(set(cluster.node_ids) - {controller})
