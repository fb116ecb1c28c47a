"""ConsumerGroupHeartbeat (key 68): v0-1. The one call of the KIP-848 consumer group protocol.

A member joins with epoch 0, heartbeats with its epoch (and the partitions it owns when they
changed), and leaves with epoch -1; a static member leaving for a while sends -2. The
coordinator computes the assignment and the response carries it when it changed (see
kafkalike.group.consumer_membership). v0: the broker makes up the id of a joining member;
v1: the member brings its own (KIP-1082) and may subscribe by regular expression, matched
here with Python's ``re`` against the topic names at every heartbeat (Kafka uses RE2/J, whose
syntax agrees for the usual patterns). Not served: classic-protocol members inside a
consumer group (Kafka's online migration between the protocols) and rack-aware assignment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.group.consumer_api import ConsumerHeartbeatRequest
from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(68, 0, 1)
async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    v = ctx.version
    owned = request.topic_partitions
    result = await ctx.groups.consumer_group_heartbeat(
        ConsumerHeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=None
            if request.subscribed_topic_names is None
            else tuple(request.subscribed_topic_names),
            subscribed_topic_regex=request.subscribed_topic_regex if v >= 1 else None,
            server_assignor=request.server_assignor,
            owned_partitions=None if owned is None else tuple((t.topic_id, tuple(t.partitions)) for t in owned),
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.client_host,
            member_id_required=v >= 1,
        )
    )
    assignment = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": t, "partitions": list(ps)} for t, ps in result.assignment]}
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "error_message": result.error_message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval_ms": result.heartbeat_interval_ms,
        "assignment": assignment,
    }
