"""Followers' incremental fetch sessions (KIP-227) on a 3-node cluster: a full fetch opens one,
a later fetch naming nothing is answered with only the partition that moved, the epoch and the
session id are checked as Kafka checks them, and a consumer's fetch stays sessionless."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from kafkalike.replica import Partition
from kafkalike.server.clock import SystemClock
from kafkalike.testing.cluster import Cluster, NodeThread
from kafkalike.testing.wire_client import WireClient


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3) as running:
        yield running


def fetch(client: WireClient, replica: int, session_id: int, epoch: int, parts: Sequence[Partition]) -> Message:
    topics: list[dict[str, Any]] = []
    if parts:
        topics.append(
            {
                "topic_id": parts[0].topic_id,
                "partitions": [
                    {
                        "partition": p.index,
                        "current_leader_epoch": p.leader_epoch,
                        "fetch_offset": p.log_end_offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": p.log_start_offset,
                        "partition_max_bytes": 1 << 20,
                    }
                    for p in parts
                ],
            }
        )
    body = {
        "replica_state": {"replica_id": replica, "replica_epoch": -1},
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": topics,
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return client.request(1, 17, body)


def answered(response: Message) -> dict[int, int]:
    """Each answered partition's records size."""
    return {e.partition_index: len(e.records or b"") for t in response.responses for e in t.partitions}


def test_a_followers_session_answers_only_the_partitions_that_moved(cluster: Cluster) -> None:
    cluster.create_topic("sessions", partitions=6, replication_factor=3)
    leaders = {p: cluster.leader("sessions", p) for p in range(6)}
    leader_id = leaders[0]
    idle = next(p for p in range(1, 6) if leaders[p] == leader_id)
    node = cluster.broker(leader_id)
    assert isinstance(node, NodeThread) and node.node is not None
    broker = node.node.broker
    moving, quiet = broker.replicas[("sessions", 0)], broker.replicas[("sessions", idle)]
    follower = next(n for n in cluster.node_ids if n != leader_id)
    with WireClient(node.address.host, node.address.client_port) as client:
        full = fetch(client, follower, 0, 0, [moving, quiet])
        assert full.error_code == 0 and full.session_id != 0
        assert set(answered(full)) == {0, idle}
        session = full.session_id

        batch = build_batch([Record(value=b"moved")], base_timestamp=SystemClock().wall_ms())
        produce = {
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": "sessions", "partition_data": [{"index": 0, "records": batch}]}],
        }
        assert client.request(0, 9, produce).responses[0].partition_responses[0].error_code == 0

        # Naming no partition: both are read at the offsets the session holds; only the one
        # with new records (and a moved high watermark) is answered.
        incremental = fetch(client, follower, session, 1, [])
        assert incremental.error_code == 0 and incremental.session_id == session
        assert list(answered(incremental)) == [0] and answered(incremental)[0] > 0

        stale = fetch(client, follower, session, 1, [])
        assert ErrorCode(stale.error_code) is ErrorCode.INVALID_FETCH_SESSION_EPOCH
        unknown = fetch(client, follower, session ^ 0x5A5A5A, 1, [])
        assert ErrorCode(unknown.error_code) is ErrorCode.FETCH_SESSION_ID_NOT_FOUND

        consumer = fetch(client, -1, 0, 0, [moving, quiet])
        assert consumer.error_code == 0 and consumer.session_id == 0  # consumers: sessionless


def test_followers_keep_sessions_with_their_leaders_and_stay_in_sync(cluster: Cluster) -> None:
    cluster.create_topic("followed", partitions=6, replication_factor=3, configs={"min.insync.replicas": "2"})
    cluster.wait_in_sync("followed", timeout_s=30)
    for node_id in cluster.node_ids:
        node = cluster.broker(node_id)
        assert isinstance(node, NodeThread) and node.node is not None
        fetchers = node.node.broker.fetchers
        others = set(cluster.node_ids) - {node_id}
        # each broker follows partitions of the two others, in a session with each
        cluster.wait_for(
            lambda f=fetchers, o=others: set(f.sessions()) == o and all(f.sessions().values()),  # type: ignore[misc]
            f"broker {node_id} in sessions with {others}",
            30,
        )
    for p in range(6):
        assert len(cluster.isr("followed", p)) == 3
