"""DescribeQuorum's answer, shaped in one place for every place that serves it: the controller
listener (``quorum/handlers.py``), the active controller reached in process by a combined node's
broker (``ControllerHost.handle``), and the single node's broker (``handlers/describe_quorum.py``),
whose own metadata log is the quorum.

As Kafka's KafkaRaftClient.handleDescribeQuorumRequest: a request that does not name exactly
``__cluster_metadata`` partition 0 gets UNKNOWN_TOPIC_OR_PARTITION for every partition it names
(no top-level error, no nodes); else the quorum's description (``describe``), with v2's nodes.
A broker of a cluster does not answer it: it forwards the request to the active controller
(``ControllerFacade.describe_quorum``), and a controller that did not answer in time makes it
REQUEST_TIMED_OUT at the top level (Kafka's getErrorResponse for a forwarding timeout).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft.config import VoterEndpoint
from kafkalike.raft.messages import METADATA_PARTITION, METADATA_TOPIC

UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."
TIMED_OUT_MESSAGE = "The request timed out."


class QuorumNode(NamedTuple):
    """A node of v2's ``nodes``: its id and one listener."""

    node_id: int
    listener: str
    host: str
    port: int


async def describe_quorum_answer(
    request: Message, describe: Callable[[], Awaitable[dict[str, Any]]], nodes: Iterable[QuorumNode]
) -> dict[str, Any]:
    """The response body (see the module docstring); ``describe`` is called only for a request
    that names the metadata partition."""
    if not names_the_metadata_partition(request):
        return unknown_partitions(request)
    answer = await describe()
    answer["nodes"] = [
        {"node_id": n.node_id, "listeners": [{"name": n.listener, "host": n.host, "port": n.port}]} for n in nodes
    ]
    return answer


def voter_nodes(voters: Iterable[VoterEndpoint], listener_name: str) -> list[QuorumNode]:
    """v2's nodes on a controller: each voter with its controller listener."""
    return [QuorumNode(v.key.node_id, listener_name, v.host, v.port) for v in voters]


def timed_out() -> dict[str, Any]:
    """Kafka's DescribeQuorumRequest.getErrorResponse(TimeoutException): the top-level error only."""
    return {"error_code": ErrorCode.REQUEST_TIMED_OUT, "error_message": TIMED_OUT_MESSAGE, "topics": [], "nodes": []}


def names_the_metadata_partition(request: Message) -> bool:
    """Kafka's RaftUtil.hasValidTopicPartition: one topic, one partition, exactly ours."""
    if len(request.topics) != 1:
        return False
    (topic,) = request.topics
    return (
        topic.topic_name == METADATA_TOPIC
        and len(topic.partitions) == 1
        and topic.partitions[0].partition_index == METADATA_PARTITION
    )


def unknown_partitions(request: Message) -> dict[str, Any]:
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
