"""Three ``kafkalike serve`` controller processes, formatted by ``kafkalike storage format``:
one leader; its SIGKILL → a later epoch led by a survivor, which commits; the killed node
restarted follows it again. And a controller on an unformatted directory refuses to start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kafkalike.testing.controller_processes import ControllerQuorumProcesses, node_properties, wait_until

WAIT_S = 30.0
# Half Kafka's defaults: the same paths, sooner.
TIMEOUTS = {"controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000"}


def test_three_controller_processes_elect_and_replace_a_killed_leader(tmp_path: Path) -> None:
    with ControllerQuorumProcesses(tmp_path, 3, TIMEOUTS) as quorum:
        leader_id, epoch, _ = wait_until(quorum.leader, WAIT_S, "a leader")
        partitions = [quorum.describe(i) for i in quorum.nodes]
        assert sum(1 for p in partitions if p is not None and p.error_code == 0) == 1  # only the leader describes
        quorum.kill(leader_id)
        survivors = [i for i in quorum.nodes if i != leader_id]
        new_id, new_epoch, hw = wait_until(
            lambda: found if (found := quorum.leader(survivors)) and found[1] > epoch else None,
            WAIT_S,
            "a new leader among the survivors",
        )
        assert new_id in survivors and new_epoch > epoch
        quorum.nodes[leader_id].start()

        def restarted_follows() -> bool:
            p = quorum.describe(new_id)
            if p is None or p.error_code != 0:
                return False
            ends = {v.replica_id: v.log_end_offset for v in p.current_voters}
            return ends[leader_id] == p.high_watermark >= hw

        wait_until(restarted_follows, WAIT_S, f"node {leader_id} catching up with leader {new_id}")
        for node in quorum.nodes.values():
            assert not [line for line in node.output if "Traceback" in line or " ERROR " in line], node.output


def test_a_controller_on_an_unformatted_directory_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "controller.properties"
    config.write_text(node_properties(1, {1: 1, 2: 2, 3: 3}, tmp_path / "data"))
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
