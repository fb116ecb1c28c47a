"""FindCoordinator (key 10): v0-6. The coordinator of a key is the leader of its partition of
``__consumer_offsets`` / ``__transaction_state`` (``coordinator_node``): this broker, or another
one named with its endpoint on the request's listener (COORDINATOR_NOT_AVAILABLE while the
partition has no leader, or its leader is fenced).

As Kafka's KafkaApis.getCoordinator: while the key's topic is not in this broker's metadata, its
creation is asked for in the background (DefaultAutoTopicCreationManager) and the answer is
COORDINATOR_NOT_AVAILABLE with no node; clients ask again and find the leader once the topic is
made. A topic that cannot be made (a setting it refuses, a disk error) keeps that answer, and is
asked for again by each FindCoordinator.

v0 looks up a group; v1 adds the key type (0 group, 1 transaction, 2 share group); v4+
looks up several keys at once (KIP-699). Share groups (v6) are not served: INVALID_REQUEST,
which is also Kafka's answer when no share coordinator runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
NOT_AVAILABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)  # and Node.noNode()
# Errors.message() for v1-3 responses: the exception's message, or the name for NONE.
_MESSAGES = {
    ErrorCode.NONE: "NONE",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library "
    "or the message was sent to an incompatible broker. See the broker logs for more details.",
}


async def _lookup(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, int, str, int]:
    if key_type == GROUP_KEY_TYPE:
        if not ctx.groups.request_offsets_topic():
            return NOT_AVAILABLE
        node_id = ctx.groups.coordinator_node(key)
    elif key_type == TRANSACTION_KEY_TYPE:
        if not ctx.txn.request_state_topic():
            return NOT_AVAILABLE
        node_id = ctx.txn.coordinator_node(key)
    else:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    if node_id is None:  # no leader for the key's partition now
        return NOT_AVAILABLE
    # The leader's endpoint on this request's listener; none there is COORDINATOR_NOT_AVAILABLE,
    # as Kafka's getPartitionLeaderEndpoint answering noNode.
    if node_id == ctx.metadata.node_id:
        here = ctx.metadata.advertised_on(ctx.listener)
        if here is None:
            return NOT_AVAILABLE
        return ErrorCode.NONE, node_id, here[0], here[1]
    # Another broker leads it: its endpoint there, while it is alive.
    endpoint = ctx.metadata.routing.alive_endpoint(node_id, ctx.listener)
    if endpoint is None:
        return NOT_AVAILABLE
    return ErrorCode.NONE, node_id, endpoint.host, endpoint.port


@handles(10, 0, 6)
async def handle_find_coordinator(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    key_type = request.key_type if ctx.version >= 1 else GROUP_KEY_TYPE
    if ctx.version >= 4:
        coordinators = []  # error messages unset, as Kafka leaves them ("")
        for key in request.coordinator_keys:
            error, node_id, host, port = await _lookup(ctx, key_type, key)
            coordinators.append(
                {"key": key, "node_id": node_id, "host": host, "port": port, "error_code": error, "error_message": ""}
            )
        return {"throttle_time_ms": 0, "coordinators": coordinators}
    error, node_id, host, port = await _lookup(ctx, key_type, request.key)
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": _MESSAGES.get(error),
        "node_id": node_id,
        "host": host,
        "port": port,
    }
