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
from kafkalike.testing.apache_kafka import mixed_quorum
from kafkalike.testing.process_cluster import NodeProcess, ProcessCluster, wait_until

pytestmark = pytest.mark.differential
KAFKA_NODE = 3
WAIT_S = 60.0
PATIENT = {"controller.quorum.election.timeout.ms": "6000"}


def wait_all_caught_up(quorum: ProcessCluster[NodeProcess], leader_id: int, high_watermark: int) -> None:
    def caught_up() -> bool:
        view = quorum.describe_quorum(leader_id)
        if view is None or view.high_watermark < high_watermark:
            return False
        return all(end >= high_watermark for end in view.voters.values())

    wait_until(caught_up, WAIT_S, f"every voter reaching leader {leader_id}'s high watermark {high_watermark}")


def test_kafkalike_and_kafka_controllers_form_one_quorum(tmp_path: Path) -> None:
    quorum = mixed_quorum(tmp_path, kafka_nodes={KAFKA_NODE}, lib_dir=AK_LIB, overrides_for={1: PATIENT, 2: PATIENT})
    try:
        quorum.start(order=[KAFKA_NODE, 1, 2])
        first = quorum.leader_after(0, timeout_s=WAIT_S)
        assert first.leader_id == KAFKA_NODE
        wait_all_caught_up(quorum, KAFKA_NODE, first.high_watermark + 1)  # Kafka's controller keeps writing records
        quorum.node(KAFKA_NODE).kill()
        second = quorum.leader_after(first.leader_epoch, [1, 2], WAIT_S)
        assert second.leader_id in (1, 2)
        quorum.node(KAFKA_NODE).start()
        wait_all_caught_up(quorum, second.leader_id, second.high_watermark)
        view = quorum.describe_quorum(second.leader_id)
        assert view is not None and (view.leader_id, view.leader_epoch) == (second.leader_id, second.leader_epoch)
        kafka_output = "".join(quorum.node(KAFKA_NODE).output)
        assert f"leader={second.leader_id}" in kafka_output  # Kafka's FollowerState of the kafkalike leader
    finally:
        quorum.stop()
