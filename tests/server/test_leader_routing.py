"""Requests for partitions this broker does not lead, through the real codec: NOT_LEADER_OR_FOLLOWER
for a partition the metadata has but this broker does not host (UNKNOWN_TOPIC_OR_PARTITION for one
it does not have), and KIP-951's hints (Produce v10+, Fetch v16+): the current leader per
partition and the endpoints of the live leaders on the request's listener."""

from __future__ import annotations

import uuid
from typing import Any

import trio

from kafkalike.controller.image import (
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.protocol.records import Record, build_batch
from kafkalike.replica import LeaderAndIsr
from kafkalike.server.routing import ImageRouting
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body

PRODUCE, FETCH, LIST_OFFSETS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_PRODUCERS = 0, 1, 2, 21, 23, 61
LOCAL, OTHER, FENCED = 1, 2, 3
OTHER_HOST, OTHER_PORT, OTHER_RACK = "127.0.0.1", 19093, "rack-b"
BOUND_S = 10  # a bound on waits that end at once when the broker is right
ELSEWHERE = "elsewhere"  # in the metadata, partitions led by brokers 2 (p0, epoch 5) and 3 (p1, fenced)


def _image(running: RunningBroker) -> MetadataImage:
    """This broker, broker 2 (unfenced, with a listener of the same name) and broker 3 (fenced)."""
    host, port = running.host, running.port

    def broker(node: int, h: str, p: int, fenced: bool, rack: str | None = None) -> BrokerRegistration:
        return BrokerRegistration(
            node, 10 + node, uuid.uuid4(), (Endpoint("PLAINTEXT", h, p, 0),), rack=rack, fenced=fenced
        )

    topic = TopicImage(
        ELSEWHERE,
        uuid.uuid4(),
        {
            0: PartitionRegistration((OTHER,), (OTHER,), leader=OTHER, leader_epoch=5),
            1: PartitionRegistration((FENCED,), (FENCED,), leader=FENCED, leader_epoch=2),
        },
    )
    return MetadataImage(
        brokers={
            LOCAL: broker(LOCAL, host, port, False),
            OTHER: broker(OTHER, OTHER_HOST, OTHER_PORT, False, OTHER_RACK),
            FENCED: broker(FENCED, OTHER_HOST, OTHER_PORT + 1, True),
        },
        topics_by_name={ELSEWHERE: topic},
        topics_by_id={topic.topic_id: topic},
    )


async def _produce(client: AsyncWireClient, version: int, topic: str, partition: int = 0) -> Any:
    answer = await client.request(PRODUCE, version, _produce_body(topic, partition, build_batch([Record(value=b"v")])))
    return answer, answer.responses[0].partition_responses[0]


def _leader(entry: Any) -> tuple[int, int]:
    return entry.current_leader.leader_id, entry.current_leader.leader_epoch


def _endpoints(answer: Any) -> list[tuple[int, str, int, str | None]]:
    return [(n.node_id, n.host, n.port, n.rack) for n in answer.node_endpoints]


async def test_produce_to_a_partition_led_elsewhere_names_the_leader(running: RunningBroker) -> None:
    running.broker.routing = ImageRouting(lambda: _image(running))
    client = await running.client()
    answer, entry = await _produce(client, 10, ELSEWHERE)
    assert entry.error_code == E.NOT_LEADER_OR_FOLLOWER
    assert _leader(entry) == (OTHER, 5)
    assert _endpoints(answer) == [(OTHER, OTHER_HOST, OTHER_PORT, OTHER_RACK)]
    # A fenced leader is named but has no endpoint (Kafka's getAliveBrokerNode).
    answer, entry = await _produce(client, 12, ELSEWHERE, partition=1)
    assert (entry.error_code, _leader(entry), _endpoints(answer)) == (E.NOT_LEADER_OR_FOLLOWER, (FENCED, 2), [])
    # v9 has no hint fields: the same error, the defaults.
    answer, entry = await _produce(client, 9, ELSEWHERE)
    assert entry.error_code == E.NOT_LEADER_OR_FOLLOWER
    # A topic the metadata does not have: unknown, and no hint.
    answer, entry = await _produce(client, 10, "nowhere")
    assert (entry.error_code, _leader(entry), _endpoints(answer)) == (E.UNKNOWN_TOPIC_OR_PARTITION, (-1, -1), [])


async def test_produce_to_a_local_follower_names_the_leader_it_follows(running: RunningBroker) -> None:
    client = await running.client()
    assert (await _create(client, "followed")).error_code == 0
    running.broker.routing = ImageRouting(lambda: _image(running))
    running.broker.replicas[("followed", 0)].make_follower(
        LeaderAndIsr(OTHER, 7, 7, (LOCAL, OTHER), (LOCAL, OTHER)), now_ms=0
    )
    answer, entry = await _produce(client, 11, "followed")
    assert (entry.error_code, _leader(entry)) == (E.NOT_LEADER_OR_FOLLOWER, (OTHER, 7))
    assert _endpoints(answer) == [(OTHER, OTHER_HOST, OTHER_PORT, OTHER_RACK)]
    answer, entry = await _produce(client, 11, "followed")  # no endpoint listed twice in one answer either
    assert len(answer.node_endpoints) == 1


def _fetch_v16(topic_id: uuid.UUID, epoch: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = _fetch_body("", 0, 0)
    body["replica_state"] = {"replica_id": -1, "replica_epoch": -1}
    body["topics"][0]["topic_id"] = topic_id
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
    return body


async def test_fetch_v16_hints_on_not_leader_and_fenced_epoch(running: RunningBroker) -> None:
    client = await running.client()
    assert (await _create(client, "fetched")).error_code == 0
    running.broker.routing = ImageRouting(lambda: _image(running))
    partition = running.broker.replicas[("fetched", 0)]
    topic_id = partition.topic_id
    # The leader here, a stale epoch in the request: FENCED_LEADER_EPOCH names this broker's term.
    partition.make_leader(LeaderAndIsr(LOCAL, 3, 3, (LOCAL,), (LOCAL,)), now_ms=0)
    answer = await client.request(FETCH, 16, _fetch_v16(topic_id, epoch=1))
    entry = answer.responses[0].partitions[0]
    assert (entry.error_code, _leader(entry)) == (E.FENCED_LEADER_EPOCH, (LOCAL, 3))
    assert _endpoints(answer) == [(LOCAL, running.host, running.port, None)]
    # A follower serves a consumer's v11+ fetch (KIP-392: Kafka's fetchOnlyLeader is false once
    # the request carries client metadata); a stale epoch is fenced with the leader's term and endpoint.
    partition.make_follower(LeaderAndIsr(OTHER, 4, 4, (LOCAL, OTHER), (LOCAL, OTHER)), now_ms=0)
    answer = await client.request(FETCH, 16, _fetch_v16(topic_id))
    assert answer.responses[0].partitions[0].error_code == E.NONE
    answer = await client.request(FETCH, 16, _fetch_v16(topic_id, epoch=1))
    entry = answer.responses[0].partitions[0]
    assert (entry.error_code, _leader(entry)) == (E.FENCED_LEADER_EPOCH, (OTHER, 4))
    assert _endpoints(answer) == [(OTHER, OTHER_HOST, OTHER_PORT, OTHER_RACK)]
    # v15: the same error, no hint (Kafka fills them from v16).
    answer = await client.request(FETCH, 15, _fetch_v16(topic_id, epoch=1))
    entry = answer.responses[0].partitions[0]
    assert (entry.error_code, _leader(entry), _endpoints(answer)) == (E.FENCED_LEADER_EPOCH, (-1, -1), [])
    # Before v11 a consumer reads from the leader only: NOT_LEADER_OR_FOLLOWER here.
    answer = await client.request(FETCH, 10, _fetch_body("fetched", 0, 0))
    assert answer.responses[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER


async def test_fetch_of_a_partition_not_hosted_here_ends_the_wait(running: RunningBroker) -> None:
    client = await running.client()
    assert (await _create(client, "idle")).error_code == 0
    running.broker.routing = ImageRouting(lambda: _image(running))
    body: dict[str, Any] = _fetch_body("idle", 0, 0, max_wait_ms=600_000)
    body["topics"].append({**body["topics"][0], "topic": ELSEWHERE})
    # A long poll with nothing to read on "idle": answered at once, since the other partition's read failed.
    with trio.fail_after(BOUND_S):
        answer = await client.request(FETCH, 12, body)
    codes = [t.partitions[0].error_code for t in answer.responses]
    assert codes == [E.NONE, E.NOT_LEADER_OR_FOLLOWER]


async def test_offset_apis_on_a_partition_not_hosted_here(running: RunningBroker) -> None:
    running.broker.routing = ImageRouting(lambda: _image(running))
    client = await running.client()

    async def codes(topic: str) -> list[int]:
        listed = await client.request(
            LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )
        ends = await client.request(
            OFFSET_FOR_LEADER_EPOCH,
            4,
            {
                "replica_id": -1,
                "topics": [
                    {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
                ],
            },
        )
        deleted = await client.request(
            DELETE_RECORDS,
            2,
            {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 1000},
        )
        producers = await client.request(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        return [
            listed.topics[0].partitions[0].error_code,
            ends.topics[0].partitions[0].error_code,
            deleted.topics[0].partitions[0].error_code,
            producers.topics[0].partitions[0].error_code,
        ]

    assert await codes(ELSEWHERE) == [E.NOT_LEADER_OR_FOLLOWER] * 4
    assert await codes("nowhere") == [E.UNKNOWN_TOPIC_OR_PARTITION] * 4


async def test_describe_producers_is_answered_by_a_follower(running: RunningBroker) -> None:
    client = await running.client()
    assert (await _create(client, "followed")).error_code == 0
    running.broker.replicas[("followed", 0)].make_follower(
        LeaderAndIsr(OTHER, 1, 1, (LOCAL, OTHER), (LOCAL, OTHER)), now_ms=0
    )
    producers = await client.request(
        DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "followed", "partition_indexes": [0]}]}
    )
    assert producers.topics[0].partitions[0].error_code == E.NONE
