"""Kafka 4.0.2's own ``kafka-metadata-quorum --bootstrap-controller`` against three ``kafkalike
serve`` controller processes: ``describe --status`` and ``describe --replication`` (also
``--human-readable``, whose relative times Kafka's tool computes from our wall-clock fetch
timestamps) show the cluster id, one leader, three voters with their CONTROLLER endpoints, and
each voter's lag; after the leader is SIGKILLed, the tool finds the new leader through any survivor."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_LIB
from kafkalike.testing.apache_kafka import java_executable
from kafkalike.testing.controller_processes import CLUSTER_ID, ControllerQuorumProcesses, wait_until

pytestmark = pytest.mark.differential
WAIT_S = 30.0


def metadata_quorum(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            java_executable(),
            "-Xmx256m",
            "-cp",
            str(Path(AK_LIB) / "*"),
            "org.apache.kafka.tools.MetadataQuorumCommand",
            "--bootstrap-controller",
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


def test_kafka_metadata_quorum_describes_a_kafkalike_controller_quorum(tmp_path: Path) -> None:
    with ControllerQuorumProcesses(tmp_path, 3) as quorum:
        leader_id, epoch, _ = wait_until(quorum.leader, WAIT_S, "a leader")
        follower_id = next(i for i in quorum.nodes if i != leader_id)

        status = metadata_quorum(quorum.bootstrap(follower_id), "--status")  # found through a follower
        assert status.returncode == 0, status.stderr
        fields = status_fields(status.stdout)
        assert fields["ClusterId"] == CLUSTER_ID
        assert (int(fields["LeaderId"]), int(fields["LeaderEpoch"])) == (leader_id, epoch)
        assert int(fields["HighWatermark"]) >= 1
        assert fields["MaxFollowerLag"].isdigit() and fields["CurrentObservers"] == "[]"
        voters = re.findall(
            r'\{"id": (\d+), "directoryId": (\S+), "endpoints": \["CONTROLLER://([^"]+)"\]\}', status.stdout
        )
        assert sorted((int(i), address) for i, _, address in voters) == [
            (i, quorum.bootstrap(i)) for i in sorted(quorum.nodes)
        ]

        replication = metadata_quorum(quorum.bootstrap(leader_id), "--replication")
        assert replication.returncode == 0, replication.stderr
        rows = replication_rows(replication.stdout)
        assert next((int(r[0]), r[6]) for r in rows) == (leader_id, "Leader")
        assert sorted(int(r[0]) for r in rows) == [1, 2, 3]
        assert [r[6] for r in rows].count("Follower") == 2
        leader_end = int(rows[0][2])
        for row in rows:
            assert int(row[3]) == leader_end - int(row[2]) >= 0  # the lag column
            assert int(row[4]) > 0 and int(row[5]) > 0  # wall-clock fetch timestamps

        readable = metadata_quorum(quorum.bootstrap(leader_id), "--replication", "--human-readable")
        assert readable.returncode == 0, readable.stderr
        assert all(r[4].isdigit() and r[5:7] == ["ms", "ago"] for r in replication_rows(readable.stdout))

        quorum.kill(leader_id)
        survivors = [i for i in quorum.nodes if i != leader_id]
        new_id, new_epoch, _ = wait_until(
            lambda: found if (found := quorum.leader(survivors)) and found[1] > epoch else None,
            WAIT_S,
            "a new leader",
        )
        after = metadata_quorum(quorum.bootstrap(survivors[0]), "--status")
        assert after.returncode == 0, after.stderr
        fields = status_fields(after.stdout)
        assert (int(fields["LeaderId"]), int(fields["LeaderEpoch"])) == (new_id, new_epoch)
