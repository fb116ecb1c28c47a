"""Three ``kafkalike serve`` controller processes (``KafkalikeCluster(roles="controller")``),
formatted by ``kafkalike storage format``: one leader; its SIGKILL → a later epoch led by a
survivor, which commits; the killed node restarted follows it again. And a controller on an
unformatted directory refuses to start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kafkalike.testing.process_cluster import (
    CONTROLLER_ROLE,
    KafkalikeCluster,
    node_properties,
    plan_addresses,
    wait_until,
    write_properties,
)

WAIT_S = 30.0
# Half Kafka's defaults: the same paths, sooner.
TIMEOUTS = {"controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000"}


def test_three_controller_processes_elect_and_replace_a_killed_leader(tmp_path: Path) -> None:
    with KafkalikeCluster(3, tmp_path, roles=CONTROLLER_ROLE, overrides=TIMEOUTS) as cluster:
        first = cluster.leader_after(0, timeout_s=WAIT_S)
        answering = [i for i in cluster.node_ids if cluster.describe_quorum(i) is not None]
        assert answering == [first.leader_id]  # only the leader describes the quorum
        cluster.node(first.leader_id).kill()
        survivors = [i for i in cluster.node_ids if i != first.leader_id]
        second = cluster.leader_after(first.leader_epoch, survivors, WAIT_S)
        assert second.leader_id in survivors
        cluster.node(first.leader_id).start()

        def restarted_follows() -> bool:
            view = cluster.describe_quorum(second.leader_id)
            return view is not None and view.voters[first.leader_id] == view.high_watermark >= second.high_watermark

        wait_until(restarted_follows, WAIT_S, f"node {first.leader_id} catching up with leader {second.leader_id}")
        for node in cluster.nodes:
            assert not [line for line in node.output if "Traceback" in line or " ERROR " in line], list(node.output)


def test_a_controller_on_an_unformatted_directory_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    addresses = plan_addresses(3)
    config = tmp_path / "controller.properties"
    write_properties(config, node_properties(addresses[0], addresses, tmp_path / "data", CONTROLLER_ROLE))
    result = subprocess.run(
        [sys.executable, "-m", "kafkalike", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("kafkalike: No readable meta.properties files found in ")
    assert result.stderr.count("\n") == 1
