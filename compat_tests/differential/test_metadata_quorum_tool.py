"""Kafka's own ``kafka-metadata-quorum --bootstrap-controller`` against three ``kafkalike serve``
controller processes, and against three combined (broker and controller) nodes: ``describe
--status`` and ``describe --replication`` (also ``--human-readable``, whose relative times Kafka's
tool computes from our wall-clock fetch timestamps) show the cluster id, one leader, three voters
with their CONTROLLER endpoints, and each voter's lag; after the leader is SIGKILLed, the tool
finds the new leader through any survivor."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_LIB
from kafkalike.testing.apache_kafka import java_executable
from kafkalike.testing.process import BrokerProcess
from kafkalike.testing.process_cluster import COMBINED_ROLES, CONTROLLER_ROLE, KafkalikeCluster

pytestmark = pytest.mark.differential
WAIT_S = 30.0


def metadata_quorum(
    bootstrap: str, *args: str, via: str = "--bootstrap-controller"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            java_executable(),
            "-Xmx256m",
            "-cp",
            str(Path(AK_LIB) / "*"),
            "org.apache.kafka.tools.MetadataQuorumCommand",
            via,
            bootstrap,
            "describe",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def status_fields(output: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in output.splitlines()) if v}


def replication_rows(output: str) -> list[list[str]]:
    lines = [line.split() for line in output.strip().splitlines()]
    assert lines[0] == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    return lines[1:]


@pytest.mark.parametrize("roles", [CONTROLLER_ROLE, COMBINED_ROLES])
def test_kafka_metadata_quorum_describes_a_kafkalike_quorum(tmp_path: Path, roles: str) -> None:
    """Three controllers, or three combined nodes (whose brokers are not observers, as Kafka's)."""
    with KafkalikeCluster(3, tmp_path, roles=roles) as quorum:
        first = quorum.leader_after(0, timeout_s=WAIT_S)
        leader_id, epoch = first.leader_id, first.leader_epoch
        follower_id = next(i for i in quorum.node_ids if i != leader_id)

        def controller(node_id: int) -> str:
            return quorum.node(node_id).controller_bootstrap

        status = metadata_quorum(controller(follower_id), "--status")  # found through a follower
        assert status.returncode == 0, status.stderr
        fields = status_fields(status.stdout)
        assert fields["ClusterId"] == quorum.cluster_id
        assert (int(fields["LeaderId"]), int(fields["LeaderEpoch"])) == (leader_id, epoch)
        assert int(fields["HighWatermark"]) >= 1
        assert fields["MaxFollowerLag"].isdigit() and fields["CurrentObservers"] == "[]"
        voters = re.findall(
            r'\{"id": (\d+), (?:"directoryId": \S+, )?"endpoints": \["CONTROLLER://([^"]+)"\]\}', status.stdout
        )  # 4.0's tool prints each voter's directoryId (null), 4.4's does not
        assert sorted((int(i), address) for i, address in voters) == [
            (i, controller(i)) for i in sorted(quorum.node_ids)
        ]

        replication = metadata_quorum(controller(leader_id), "--replication")
        assert replication.returncode == 0, replication.stderr
        rows = replication_rows(replication.stdout)
        assert next((int(r[0]), r[6]) for r in rows) == (leader_id, "Leader")
        assert sorted(int(r[0]) for r in rows) == [1, 2, 3]
        assert [r[6] for r in rows].count("Follower") == 2
        leader_end = int(rows[0][2])
        for row in rows:
            assert int(row[3]) == leader_end - int(row[2]) >= 0  # the lag column
            assert int(row[4]) > 0 and int(row[5]) > 0  # wall-clock fetch timestamps

        readable = metadata_quorum(controller(leader_id), "--replication", "--human-readable")
        assert readable.returncode == 0, readable.stderr
        assert all(r[4].isdigit() and r[5:7] == ["ms", "ago"] for r in replication_rows(readable.stdout))

        quorum.node(leader_id).kill()
        survivors = [i for i in quorum.node_ids if i != leader_id]
        second = quorum.leader_after(epoch, survivors, WAIT_S)
        after = metadata_quorum(controller(survivors[0]), "--status")
        assert after.returncode == 0, after.stderr
        fields = status_fields(after.stdout)
        assert (int(fields["LeaderId"]), int(fields["LeaderEpoch"])) == (second.leader_id, second.leader_epoch)


def test_through_any_broker_of_a_cluster(tmp_path: Path) -> None:
    """``--bootstrap-server``: each broker forwards DescribeQuorum to the active controller (its
    own, in process, or another node's over the network), and every one shows the same quorum."""
    with KafkalikeCluster(3, tmp_path, roles=COMBINED_ROLES) as cluster:
        first = cluster.leader_after(0, timeout_s=WAIT_S)
        for node_id in cluster.node_ids:
            status = metadata_quorum(cluster.node(node_id).bootstrap, "--status", via="--bootstrap-server")
            assert status.returncode == 0, status.stderr
            fields = status_fields(status.stdout)
            assert fields["ClusterId"] == cluster.cluster_id
            assert int(fields["LeaderId"]) == first.leader_id
            assert int(fields["LeaderEpoch"]) >= first.leader_epoch
            voters = re.findall(r'\{"id": (\d+), (?:"directoryId": \S+, )?"endpoints": \["CONTROLLER://', status.stdout)
            assert sorted(map(int, voters)) == sorted(cluster.node_ids)
            replication = metadata_quorum(cluster.node(node_id).bootstrap, "--replication", via="--bootstrap-server")
            assert replication.returncode == 0, replication.stderr
            rows = replication_rows(replication.stdout)
            assert sorted(int(r[0]) for r in rows) == sorted(cluster.node_ids)
            assert [r[6] for r in rows].count("Leader") == 1


def test_through_the_single_node(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "single")
    node.start()
    try:
        status = metadata_quorum(node.bootstrap, "--status", via="--bootstrap-server")
        assert status.returncode == 0, status.stderr
        fields = status_fields(status.stdout)
        assert (fields["LeaderId"], fields["CurrentObservers"], fields["MaxFollowerLag"]) == ("1", "[]", "0")
        assert int(fields["HighWatermark"]) >= 0 and int(fields["LeaderEpoch"]) >= 1
        replication = metadata_quorum(node.bootstrap, "--replication", via="--bootstrap-server")
        assert replication.returncode == 0, replication.stderr
        (row,) = replication_rows(replication.stdout)
        assert (row[0], row[3], row[6]) == ("1", "0", "Leader")
    finally:
        node.stop()
