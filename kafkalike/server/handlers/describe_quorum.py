"""DescribeQuorum (key 55): v0-2. The metadata quorum: ``__cluster_metadata`` partition 0.

A node on the metadata quorum answers from its quorum state (on the single node: itself the
leader and only voter; a broker that is not the leader gets the quorum's NOT_LEADER_OR_FOLLOWER,
where Kafka's broker would forward the request to the active controller). Otherwise:

Apache Kafka serves it on controllers, and a broker forwards it to the active controller (so
``kafka-metadata-quorum --bootstrap-server`` works); here one process is both, so the answer is
what Kafka's KRaft leader gives for a single static voter in combined mode: leader and only voter
this node, no observers, the high watermark and the voter's log end offset both the metadata
log's end offset (every metadata record is flushed before it is answered), and the leader's
fetch and caught-up timestamps both "now", as Kafka reports them for the leader itself. The
leader epoch is one past the newest epoch in the metadata log at start-up. v1 adds the
timestamps; v2 adds error messages, the voter's directory id (zero: a static voter has none) and
the nodes with their listeners (this node's advertised listener).

A request that does not name exactly ``__cluster_metadata`` partition 0 gets, as from Kafka,
UNKNOWN_TOPIC_OR_PARTITION for every partition it names (and nothing else: no top-level error,
no nodes). Not implemented: a quorum of several voters.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.broker import METADATA_TOPIC
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

METADATA_PARTITION = 0
NO_DIRECTORY_ID = uuid.UUID(int=0)  # Kafka's ReplicaKey.NO_DIRECTORY_ID
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


@handles(55, 0, 2)
async def handle_describe_quorum(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if not _names_the_metadata_partition(request):
        return _unknown_partitions(request)
    host, port = ctx.metadata.advertised
    listener = {"name": _listener_name(ctx.metadata.config.get("listeners")), "host": host, "port": port}
    describe = ctx.metadata.describe_quorum
    if describe is not None:
        # The node's own quorum state (a leader's per-voter state; an observer's error).
        answer: dict[str, Any] = await describe()
        answer["nodes"] = [{"node_id": ctx.metadata.node_id, "listeners": [listener]}]
        return answer
    end_offset = ctx.metadata.metadata_end_offset
    now = ctx.clock.wall_ms()
    leader = {
        "replica_id": ctx.metadata.node_id,
        "replica_directory_id": NO_DIRECTORY_ID,
        "log_end_offset": end_offset,
        "last_fetch_timestamp": now,
        "last_caught_up_timestamp": now,
    }
    partition = {
        "partition_index": METADATA_PARTITION,
        "error_code": ErrorCode.NONE,
        "error_message": "",
        "leader_id": ctx.metadata.node_id,
        "leader_epoch": ctx.metadata.metadata_epoch,
        "high_watermark": end_offset,
        "current_voters": [leader],
        "observers": [],
    }
    return {
        "error_code": ErrorCode.NONE,
        "error_message": "",
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
        "nodes": [{"node_id": ctx.metadata.node_id, "listeners": [listener]}],
    }


def _unknown_partitions(request: Message) -> Mapping[str, Any]:
    """Kafka's DescribeQuorumRequest.getPartitionLevelErrorResponse."""
    topics = [
        {
            "topic_name": topic.topic_name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "error_message": UNKNOWN_PARTITION_MESSAGE,
                    "leader_id": 0,
                    "leader_epoch": 0,
                    "high_watermark": 0,
                    "current_voters": [],
                    "observers": [],
                }
                for p in topic.partitions
            ],
        }
        for topic in request.topics
    ]
    return {"error_code": ErrorCode.NONE, "error_message": "", "topics": topics, "nodes": []}


def _names_the_metadata_partition(request: Message) -> bool:
    """Kafka's KafkaRaftClient.hasValidTopicPartition: one topic, one partition, exactly ours."""
    if len(request.topics) != 1:
        return False
    (topic,) = request.topics
    return (
        topic.topic_name == METADATA_TOPIC
        and len(topic.partitions) == 1
        and topic.partitions[0].partition_index == METADATA_PARTITION
    )


def _listener_name(listeners: str | None) -> str:
    """The name of the first listener (``NAME://host:port``); PLAINTEXT when it has none."""
    first = (listeners or "").split(",")[0]
    name, sep, _ = first.partition("://")
    return name.strip() if sep and name.strip() else "PLAINTEXT"
