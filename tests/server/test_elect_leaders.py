"""ElectLeaders from a client and AlterPartition from the broker itself, on a single node: both
reach the node's controller (the client's forwarded by the broker, the broker's own through its
controller channel) and come back as Kafka answers them."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalike.protocol.errors import ErrorCode
from tests.server.conftest import RunningBroker
from tests.server.test_broker_basics import _create

ELECT_LEADERS, ALTER_PARTITION = 43, 56


def _elect(election_type: int, topics: dict[str, list[int]] | None) -> dict[str, Any]:
    asked = None if topics is None else [{"topic": n, "partitions": ps} for n, ps in topics.items()]
    return {"election_type": election_type, "topic_partitions": asked, "timeout_ms": 5000}


def _results(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.topic, r.partition_id): r.error_code for t in response.replica_election_results for r in t.partition_result
    }


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_elect_leaders_is_answered_by_the_controller(running: RunningBroker, version: int) -> None:
    client = await running.client()
    await _create(client, "elected", partitions=2)
    response = await client.request(ELECT_LEADERS, version, _elect(0, {"elected": [0, 1], "missing": [0]}))
    assert _results(response) == {
        ("elected", 0): ErrorCode.ELECTION_NOT_NEEDED,  # its only replica leads
        ("elected", 1): ErrorCode.ELECTION_NOT_NEEDED,
        ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    if version >= 1:
        assert response.error_code == 0
        unclean = await client.request(ELECT_LEADERS, version, _elect(1, {"elected": [0]}))
        assert _results(unclean) == {("elected", 0): ErrorCode.ELECTION_NOT_NEEDED}
    # Every partition: those needing no election are left out.
    everything = await client.request(ELECT_LEADERS, version, _elect(0, None))
    assert _results(everything) == {}
    assert "elected" in {t.topic for t in everything.replica_election_results}


async def test_the_broker_sends_alter_partition_through_its_controller_channel(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "isr")
    metadata = running.broker.controller
    topic = metadata.image.topics["isr"]
    node_id = metadata.node_id
    body = {
        "broker_id": node_id,
        "broker_epoch": metadata.broker_epoch,
        "topics": [
            {
                "topic_id": topic.topic_id,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_epoch": 0,
                        "new_isr_with_epochs": [{"broker_id": node_id, "broker_epoch": metadata.broker_epoch}],
                        "leader_recovery_state": 0,
                        "partition_epoch": 0,
                    }
                ],
            }
        ],
    }
    response = await metadata.channel.request(ALTER_PARTITION, 3, body)
    assert response.error_code == 0
    [answer] = response.topics[0].partitions
    assert (answer.error_code, answer.leader_id, list(answer.isr), answer.leader_epoch, answer.partition_epoch) == (
        0,
        node_id,
        [node_id],
        0,
        0,
    )  # nothing to change: the partition as it is
    stale = {**body, "broker_epoch": metadata.broker_epoch + 1}
    refused = await metadata.channel.request(ALTER_PARTITION, 3, stale)
    assert (refused.error_code, list(refused.topics)) == (ErrorCode.STALE_BROKER_EPOCH, [])
    # Another broker id in the ISR: not registered, so not eligible.
    bad_isr = body["topics"][0]["partitions"][0]
    bad_isr["new_isr_with_epochs"] = [*bad_isr["new_isr_with_epochs"], {"broker_id": node_id + 7, "broker_epoch": 1}]
    invalid = await metadata.channel.request(ALTER_PARTITION, 3, body)
    assert invalid.topics[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST  # not a replica
