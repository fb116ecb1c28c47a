"""DescribeTopicPartitions (key 75): v0. Topics and their partitions with eligible leader
replicas (KIP-966), paged with a cursor, as Kafka 4.x's broker answers it
(DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.describeTopicResponse):

- an empty topic list means every topic; topics are answered in name order (Java's string order)
  from the cursor's topic on, and a topic before the cursor's is left out;
- at most ``min(ResponsePartitionLimit, max.request.partition.size.limit)`` partitions (at least
  one) per response: where the limit cuts a topic, ``NextCursor`` names that topic and its first
  partition left out; where it falls between two topics, the next topic and partition 0 (a topic
  that may not exist);
- a named topic that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
  for an illegal name) with no partitions; not when every topic was asked for;
- a cursor whose topic is not among the named topics, or whose partition is negative, is an
  invalid request: every named topic gets INVALID_REQUEST;
- a partition's leader is -1 when its broker has no endpoint on this listener; no partition error
  codes (unlike Metadata); replicas and ISR unfiltered, offline replicas as Metadata's;
- every topic answered from the metadata carries its authorized operations: all of a topic's,
  since no authorizer is configured.

Version notes: only v0 exists, flexible. Not implemented: authorization (there is none).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kafkalike.controller.api_error import ControllerApiError
from kafkalike.controller.image import MetadataImage
from kafkalike.controller.topic_names import CLUSTER_METADATA_TOPIC, check_topic_name
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

ZERO_UUID = uuid.UUID(int=0)
NO_LEADER = -1
# Kafka's Topic.INTERNAL_TOPICS.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
# AclEntry.supportedOperations(TOPIC) as a bit field: READ, WRITE, CREATE, DELETE, ALTER,
# DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (what AuthHelper answers without an authorizer).
TOPIC_OPERATIONS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))
NOT_REQUESTED = -(2**31)


def java_order(name: str) -> bytes:
    """A sort key that orders names as Java's String.compareTo (by UTF-16 code unit)."""
    return name.encode("utf-16-be", "surrogatepass")


@handles(75, 0, 0)
async def handle_describe_topic_partitions(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    cursor = request.cursor
    cursor_topic = java_order(cursor.topic_name if cursor is not None else "")
    fetch_all = not request.topics
    if fetch_all:
        candidates = [n for n in ctx.metadata.image.topics if n != CLUSTER_METADATA_TOPIC]
    else:
        candidates = [t.name for t in request.topics]
    names = sorted({n for n in candidates if java_order(n) >= cursor_topic}, key=java_order)
    if cursor is not None and ((not fetch_all and cursor.topic_name not in names) or cursor.partition_index < 0):
        return _invalid_request(request)
    limit = max(
        min(ctx.metadata.config.get_int("max.request.partition.size.limit"), request.response_partition_limit), 1
    )
    remaining = limit
    topics: list[dict[str, Any]] = []
    next_cursor: dict[str, Any] | None = None
    for name in names:
        if remaining == 0:
            # The limit fell between two topics: the next response starts at this one.
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        described = _describe(ctx, name, start, remaining)
        if described is None:
            if not fetch_all:
                topics.append(_unknown_topic(name))
            continue
        entry, next_index = described
        topics.append(entry)
        if next_index != -1:
            next_cursor = {"topic_name": name, "partition_index": next_index}
            break
        remaining -= len(entry["partitions"])
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


def _describe(ctx: RequestContext, name: str, start: int, max_count: int) -> tuple[dict[str, Any], int] | None:
    """The topic's entry with partitions ``start`` up to ``max_count`` of them, and the index of
    the first partition left out (-1: none); None when the topic does not exist."""
    if name == CLUSTER_METADATA_TOPIC:
        return None
    cluster_image = ctx.metadata.cluster_image
    registered = cluster_image.topic(name)
    if registered is None:
        return None
    topic_id, count = registered.topic_id, len(registered.partitions)
    upper = min(count, _int32(start + max_count))
    partitions = _registered(ctx, cluster_image, name, range(start, upper))
    entry = {
        "error_code": ErrorCode.NONE,
        "name": name,
        "topic_id": topic_id,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": TOPIC_OPERATIONS,
    }
    return entry, upper if upper < count else -1


def _int32(value: int) -> int:
    """``value`` as Java's int arithmetic leaves it (a cursor near 2**31 wraps, as in Kafka)."""
    return (value + 2**31) % 2**32 - 2**31


def _registered(ctx: RequestContext, image: MetadataImage, name: str, indexes: range) -> list[dict[str, Any]]:
    """Partitions as the controller registered them (KRaftMetadataCache): the leader only while
    its broker is registered with an endpoint on this listener; a replica offline when its broker
    is unregistered, fenced or without that endpoint."""
    topic = image.topic(name)
    assert topic is not None
    listener = ctx.listener
    reachable = {b.broker_id for b in image.brokers.values() if any(e.name == listener for e in b.listeners)}
    online = {b for b in reachable if not image.brokers[b].fenced}
    out = []
    for index in indexes:
        reg = topic.partitions.get(index)
        if reg is None:
            continue  # Kafka logs it and leaves the partition out
        leader = reg.leader if reg.leader in reachable and not ctx.faults.is_paused(name, index) else NO_LEADER
        out.append(
            {
                "error_code": ErrorCode.NONE,
                "partition_index": index,
                "leader_id": leader,
                "leader_epoch": reg.leader_epoch,
                "replica_nodes": list(reg.replicas),
                "isr_nodes": list(reg.isr),
                "eligible_leader_replicas": list(reg.elr),
                "last_known_elr": list(reg.last_known_elr),
                "offline_replicas": [r for r in reg.replicas if r not in online],
            }
        )
    return out


def _unknown_topic(name: str) -> dict[str, Any]:
    try:
        check_topic_name(name)
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except ControllerApiError:
        error = ErrorCode.INVALID_TOPIC_EXCEPTION
    return {
        "error_code": error,
        "name": name,
        "topic_id": ZERO_UUID,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [],
        "topic_authorized_operations": TOPIC_OPERATIONS,
    }


def _invalid_request(request: Message) -> Mapping[str, Any]:
    """Kafka's DescribeTopicPartitionsRequest.getErrorResponse for INVALID_REQUEST: each named
    topic once, with the error and nothing else."""
    topics: dict[str, dict[str, Any]] = {}
    for t in request.topics:
        topics.setdefault(
            t.name,
            {
                "error_code": ErrorCode.INVALID_REQUEST,
                "name": t.name,
                "topic_id": ZERO_UUID,
                "is_internal": False,
                "partitions": [],
                "topic_authorized_operations": NOT_REQUESTED,
            },
        )
    return {"throttle_time_ms": 0, "topics": list(topics.values()), "next_cursor": None}
