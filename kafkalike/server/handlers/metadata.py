"""Metadata (key 3): v0-13. Brokers, topics, partitions and leaders; auto-creates topics.

Version notes: v0 treats an empty topic list as "all topics" (v1+ uses null for that); v4+
lets the client forbid auto-creation; v10+ carries topic ids; v8-10 cluster/topic authorized
operations are returned as "not requested" (-2147483648); v13 adds a top-level error code.
The answer comes from the published image of the committed metadata: the unfenced brokers with
an endpoint on the request's listener, each partition's registration (leader -1:
LEADER_NOT_AVAILABLE), and any live broker as the controller id, as a KRaft broker does.
Endpoints are those of the listener the request arrived on; a leader without one there is
LISTENER_NOT_FOUND from v6 (see ``_partition``).

Auto-creation answers as Kafka's does: an unknown topic is answered UNKNOWN_TOPIC_OR_PARTITION
and created in the background, one CreateTopics (with its limits) per request; the client asks
again and finds it once its partitions are ready.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio

from kafkalike.controller.api_error import ControllerApiError
from kafkalike.controller.image import MetadataImage
from kafkalike.controller.topic_names import check_topic_name
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.cluster_metadata import TopicView
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

AUTHORIZED_OPERATIONS_NOT_REQUESTED = -2147483648
_pick = random.Random(0)  # which live broker a response names as the controller: any will do


def any_of(broker_ids: list[int]) -> int:
    return _pick.choice(broker_ids) if broker_ids else -1


LOOKUPS_BETWEEN_CHECKPOINTS = 1000
# From v6 a leader without an endpoint on the request's listener is LISTENER_NOT_FOUND (KafkaApis).
LISTENER_NOT_FOUND_VERSION = 6


@dataclass(frozen=True, slots=True)
class _Reach:
    """Which brokers a request's listener reaches (Kafka's KRaftMetadataCache): ``registered``;
    ``with_endpoint``, registered with an endpoint on the listener (a leader there is named);
    ``online``, those unfenced too (replicas counted online)."""

    registered: frozenset[int]
    with_endpoint: frozenset[int]
    online: frozenset[int]


def topic_entry(ctx: RequestContext, topic: TopicView) -> dict[str, Any]:
    return _entry(topic, _registered_partitions(ctx, ctx.metadata.cluster_image, topic))


def _entry(topic: TopicView, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name.startswith("__"),
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_NOT_REQUESTED,
    }


def _registered_partitions(ctx: RequestContext, image: MetadataImage, topic: TopicView) -> list[dict[str, Any]]:
    """A topic's partitions as the controller registered them (Kafka's KRaftMetadataCache)."""
    registered = image.topic(topic.name)
    if registered is None:
        return []
    listener = ctx.listener
    with_endpoint = {b.broker_id for b in image.brokers.values() if any(e.name == listener for e in b.listeners)}
    reach = _Reach(
        frozenset(image.brokers),
        frozenset(with_endpoint),
        frozenset(b for b in with_endpoint if not image.brokers[b].fenced),
    )
    partitions = []
    for index, reg in sorted(registered.partitions.items()):
        leaderless = not reg.has_leader or ctx.faults.is_paused(topic.name, index)
        leader = -1 if leaderless else reg.leader
        partitions.append(_partition(ctx, reach, index, leader, reg.leader_epoch, list(reg.replicas), list(reg.isr)))
    return partitions


def _partition(
    ctx: RequestContext, reach: _Reach, index: int, leader: int, leader_epoch: int, replicas: list[int], isr: list[int]
) -> dict[str, Any]:
    """One partition as Kafka's getPartitionMetadata answers it on the request's listener: a
    leader not registered is LEADER_NOT_AVAILABLE, one registered without an endpoint on the
    listener LISTENER_NOT_FOUND from v6 (LEADER_NOT_AVAILABLE before), both with leader -1; v0
    lists only the replicas online on the listener and says REPLICA_NOT_AVAILABLE when it left one
    out; a replica is offline when its broker is not registered, fenced, or has no endpoint on the
    listener."""
    if ctx.version == 0:
        shown_replicas = [r for r in replicas if r in reach.online]
        shown_isr = [r for r in isr if r in reach.online]
    else:
        shown_replicas, shown_isr = replicas, isr
    error = ErrorCode.NONE
    if leader not in reach.with_endpoint:
        if leader in reach.registered and ctx.version >= LISTENER_NOT_FOUND_VERSION:
            error = ErrorCode.LISTENER_NOT_FOUND
        else:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        leader = -1
    elif len(shown_replicas) < len(replicas) or len(shown_isr) < len(isr):
        error = ErrorCode.REPLICA_NOT_AVAILABLE
    return {
        "error_code": error,
        "partition_index": index,
        "leader_id": leader,
        "leader_epoch": leader_epoch,
        "replica_nodes": shown_replicas,
        "isr_nodes": shown_isr,
        "offline_replicas": [r for r in replicas if r not in reach.online],
    }


def live_brokers(image: MetadataImage, listener: str) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of each unfenced broker with an endpoint on ``listener``, by id."""
    out = []
    for broker in image.unfenced_brokers():
        endpoint = next((e for e in broker.listeners if e.name == listener), None)
        if endpoint is not None:
            out.append((broker.broker_id, endpoint.host, endpoint.port, broker.rack))
    return out


def _error_entry(name: str | None, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "is_internal": False, "partitions": []}


@handles(3, 0, 13)
async def handle_metadata(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    image = ctx.metadata.image
    wanted = request.topics
    if ctx.version == 0 and wanted == []:
        wanted = None  # v0: an empty list means every topic
    if wanted is None:
        topics = [topic_entry(ctx, t) for t in image.topics.values() if t.name != "__cluster_metadata"]
    else:
        to_create: list[str] = []
        topics = []
        for index, t in enumerate(wanted):
            topics.append(_lookup(ctx, request, t.name, t.topic_id, to_create))
            if index % LOOKUPS_BETWEEN_CHECKPOINTS == LOOKUPS_BETWEEN_CHECKPOINTS - 1:
                await trio.lowlevel.checkpoint()  # a request naming 100,000 topics lets others in
        if to_create:
            ctx.controller.request_auto_create(to_create)
    cluster_image = ctx.metadata.cluster_image
    alive = live_brokers(cluster_image, ctx.listener)
    brokers = [{"node_id": b, "host": h, "port": p, "rack": r} for b, h, p, r in alive]
    # As a KRaft broker answers: any live broker (on whichever listeners), since brokers forward
    # controller requests.
    controller_id = any_of([b.broker_id for b in cluster_image.unfenced_brokers()])
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": ctx.metadata.cluster_id,
        "controller_id": controller_id,
        "topics": topics,
        "cluster_authorized_operations": AUTHORIZED_OPERATIONS_NOT_REQUESTED,
        "error_code": 0,
    }


def _lookup(
    ctx: RequestContext, request: Message, name: str | None, topic_id: Any, to_create: list[str]
) -> dict[str, Any]:
    image = ctx.metadata.image
    if name is None:
        found = image.topic_names_by_id.get(topic_id)
        if found is None:
            entry = _error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID)
            entry["topic_id"] = topic_id
            return entry
        name = found
    topic = image.topics.get(name)
    if topic is not None:
        return topic_entry(ctx, topic)
    try:
        check_topic_name(name)
    except ControllerApiError:
        return _error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    allowed = ctx.version < 4 or request.allow_auto_topic_creation
    if allowed and ctx.controller.may_auto_create(name):
        to_create.append(name)
    return _error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
