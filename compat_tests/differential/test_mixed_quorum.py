"""A quorum of two ``kafkalike serve`` controllers and one Apache Kafka 4.0.2 controller: the same
Vote (with pre-vote), BeginQuorumEpoch, EndQuorumEpoch and Fetch bytes on both sides of every
pair. The Kafka node leads first (the kafkalike nodes are given a long election timeout and
start after it), and both kafkalike nodes follow it to its high watermark (the records Kafka's
own controller writes); it is SIGKILLed, the kafkalike survivors elect one of themselves, and the
Kafka node, restarted, follows the kafkalike leader and fetches up to its high watermark."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_LIB
from kafkalike.testing.controller_processes import ControllerQuorumProcesses, wait_until

pytestmark = pytest.mark.differential
KAFKA_NODE = 3
WAIT_S = 60.0
PATIENT = {"controller.quorum.election.timeout.ms": "6000"}


def leader_past(quorum: ControllerQuorumProcesses, epoch: int, among: list[int] | None = None) -> tuple[int, int, int]:
    return wait_until(
        lambda: found if (found := quorum.leader(among)) and found[1] > epoch else None,
        WAIT_S,
        f"a leader past epoch {epoch}",
    )


def wait_all_caught_up(quorum: ControllerQuorumProcesses, leader_id: int, high_watermark: int) -> None:
    def caught_up() -> bool:
        p = quorum.describe(leader_id)
        if p is None or p.error_code != 0 or p.high_watermark < high_watermark:
            return False
        return all(v.log_end_offset >= high_watermark for v in p.current_voters)

    wait_until(caught_up, WAIT_S, f"every voter reaching leader {leader_id}'s high watermark {high_watermark}")


def test_kafkalike_and_kafka_controllers_form_one_quorum(tmp_path: Path) -> None:
    quorum = ControllerQuorumProcesses(
        tmp_path,
        3,
        kafka_lib=Path(AK_LIB),
        kafka_nodes=frozenset({KAFKA_NODE}),
        extra_for={1: PATIENT, 2: PATIENT},
    )
    try:
        quorum.start(order=[KAFKA_NODE, 1, 2])
        leader_id, epoch, hw = leader_past(quorum, 0)
        assert leader_id == KAFKA_NODE
        wait_all_caught_up(quorum, KAFKA_NODE, hw + 1)  # Kafka's controller keeps writing records
        quorum.kill(KAFKA_NODE)
        new_id, new_epoch, new_hw = leader_past(quorum, epoch, [1, 2])
        assert new_id in (1, 2)
        quorum.nodes[KAFKA_NODE].start()
        wait_all_caught_up(quorum, new_id, new_hw)
        p = quorum.describe(new_id)
        assert p is not None and (p.leader_id, p.leader_epoch) == (new_id, new_epoch)
        kafka_output = "".join(quorum.nodes[KAFKA_NODE].output)
        assert f"leader={new_id}" in kafka_output  # Kafka's FollowerState of the kafkalike leader
    finally:
        quorum.close()
