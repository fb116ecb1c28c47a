"""DescribeQuorum over real sockets: the single-voter metadata quorum, as Apache Kafka's KRaft leader
describes it in combined mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.broker import Broker
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_channel import ControllerChannel
from kafkalike.testing.clock import TrioClock
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, serving
from tests.server.test_broker_basics import _create
from tests.server.test_cluster_broker import DEADLINE_S, NoLeader, cluster_broker, new_topic

METADATA = "__cluster_metadata"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def _body(topic: str = METADATA, partitions: tuple[int, ...] = (0,)) -> dict[str, Any]:
    return {"topics": [{"topic_name": topic, "partitions": [{"partition_index": p} for p in partitions]}]}


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_this_node_leads_and_is_the_only_voter(running: RunningBroker, version: int) -> None:
    client = await running.client()
    await _create(client, "moves-the-metadata-log")
    response = await client.request(55, version, _body())
    assert (response.error_code, len(response.topics)) == (0, 1)
    (topic,) = response.topics
    (partition,) = topic.partitions
    # The metadata log's end (the topic just made is below it), the only voter's log end too.
    end_offset = partition.high_watermark
    assert end_offset > 0
    assert (topic.topic_name, partition.partition_index, partition.error_code) == (METADATA, 0, 0)
    assert (partition.leader_id, partition.leader_epoch) == (1, 1)
    (voter,) = partition.current_voters
    assert (voter.replica_id, voter.log_end_offset) == (1, end_offset)
    assert partition.observers == []
    if version >= 1:
        # Kafka reports "now" for the leader itself; the two are read at the same instant.
        assert voter.last_fetch_timestamp == voter.last_caught_up_timestamp > 0
    if version >= 2:
        assert str(voter.replica_directory_id) == ZERO_UUID  # a static voter has no directory id
        assert (response.error_message, partition.error_message) == ("", "")
        (node,) = response.nodes
        host, port = running.broker.advertised
        assert [(listener.name, listener.host, listener.port) for listener in node.listeners] == [
            ("PLAINTEXT", host, port)
        ]
        assert node.node_id == 1


@pytest.mark.parametrize(
    "body",
    [_body("__consumer_offsets"), _body(partitions=(1,)), _body(partitions=(0, 0))],
    ids=["another-topic", "another-partition", "two-partitions"],
)
async def test_anything_but_the_metadata_partition_is_unknown(running: RunningBroker, body: dict[str, Any]) -> None:
    """As Kafka answers: an error for each partition named, none at the top, no nodes."""
    response = await (await running.client()).request(55, 2, body)
    assert (response.error_code, response.error_message, response.nodes) == (0, "", [])
    named = [(t["topic_name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
    answered = [
        (t.topic_name, p.partition_index, p.error_code, p.error_message, p.leader_id, p.current_voters)
        for t in response.topics
        for p in t.partitions
    ]
    unknown = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.", 0, [])
    assert answered == [(*tp, *unknown) for tp in named]
    nothing = await (await running.client()).request(55, 2, {"topics": []})
    assert (nothing.error_code, nothing.topics, nothing.nodes) == (0, [], [])


async def test_each_start_after_metadata_was_written_leads_a_new_epoch(tmp_path: Path) -> None:
    epochs = []
    for run in range(2):
        async with serving(tmp_path) as running:
            client = await running.client()
            await _create(client, f"topic-{run}")
            response = await client.request(55, 2, _body())
            epochs.append(response.topics[0].partitions[0].leader_epoch)
    assert epochs == [1, 2]


async def test_a_cluster_broker_forwards_it_to_the_active_controller(tmp_path: Path) -> None:
    """Answered by the controller (here reached in process, as a combined node's broker reaches its
    own): the quorum's real epoch and high watermark, the voter's CONTROLLER endpoint."""
    with trio.fail_after(DEADLINE_S):
        async with cluster_broker(tmp_path) as running:
            client = running.client
            await client.request(19, 7, {"topics": [new_topic("moves-it", 1)], "timeout_ms": 5000})
            response = await client.request(55, 2, _body())
            driver = running.node.driver
            (partition,) = response.topics[0].partitions
            assert (response.error_code, partition.error_code, partition.leader_id) == (0, 0, 1)
            assert partition.leader_epoch == driver.epoch
            assert 0 < partition.high_watermark <= (driver.high_watermark or 0)
            assert [v.replica_id for v in partition.current_voters] == [1]
            assert [(n.node_id, [(x.name, x.port) for x in n.listeners]) for n in response.nodes] == [
                (1, [("CONTROLLER", running.node.port)])
            ]
            # The same shaping as on the controller listener: anything else is unknown.
            other = await client.request(55, 2, _body(partitions=(1,)))
            assert other.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_a_cluster_broker_without_a_controller_answers_request_timed_out(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    broker = Broker(config, ephemeral=True, clock=trio_clock)
    broker.attach_controller(
        ControllerChannel(1, NoLeader(), {}, clock=trio_clock, request_timeout_ms=4000), lambda: None
    )
    broker.open()
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(broker.serve, "127.0.0.1", 0)
        client = await AsyncWireClient.connect(host, port)
        start = trio.current_time()
        response = await client.request(55, 2, _body())
        assert trio.current_time() - start == pytest.approx(4.0)
        assert (response.error_code, response.error_message) == (ErrorCode.REQUEST_TIMED_OUT, "The request timed out.")
        assert (response.topics, response.nodes) == ([], [])
        await client.aclose()
        nursery.cancel_scope.cancel()
