"""ApiVersions (key 18): v0-5. The broker's API version table, derived from the registered handlers.

v3+ carries the client's software name/version (ignored) and tagged supported/finalized
features; no feature flags are advertised because none (transaction.version, group.version)
are implemented at their newer levels. v5 (KIP-1242) may name the cluster and node the client
means to reach: both or neither, else INVALID_REQUEST; REBOOTSTRAP_REQUIRED if either is not
this one. An error answer lists no APIs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

NO_NODE = -1


@handles(18, 0, 5)
async def handle_api_versions(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    error = _intended_node_error(ctx, request) if ctx.version >= 5 else None
    if error is not None:
        return {"error_code": error, "api_keys": [], "throttle_time_ms": 0}
    return {"error_code": 0, "api_keys": ctx.metadata.api_versions(), "throttle_time_ms": 0}


def _intended_node_error(ctx: RequestContext, request: Message) -> ErrorCode | None:
    named_cluster, named_node = request.cluster_id is not None, request.node_id != NO_NODE
    if not named_cluster and not named_node:
        return None
    if named_cluster != named_node:
        return ErrorCode.INVALID_REQUEST
    if request.cluster_id != ctx.metadata.cluster_id or request.node_id != ctx.metadata.node_id:
        return ErrorCode.REBOOTSTRAP_REQUIRED
    return None
