"""DescribeCluster (key 60): v0-2. This broker, the cluster id, and the controller (itself).
v1 adds the endpoint type (1 = brokers); v2 adds fenced-broker listing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

BROKERS_ENDPOINT = 1
NOT_REQUESTED = -2147483648


@handles(60, 0, 2)
async def handle_describe_cluster(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if request.endpoint_type not in (BROKERS_ENDPOINT,):
        return {
            "error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            "error_message": "Only brokers can be described here.",
            "endpoint_type": request.endpoint_type,
            "cluster_id": ctx.metadata.cluster_id,
            "controller_id": -1,
            "brokers": [],
        }
    host, port = ctx.metadata.advertised
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": BROKERS_ENDPOINT,
        "cluster_id": ctx.metadata.cluster_id,
        "controller_id": ctx.metadata.node_id,
        "brokers": [{"broker_id": ctx.metadata.node_id, "host": host, "port": port, "rack": None, "is_fenced": False}],
        "cluster_authorized_operations": NOT_REQUESTED,
    }
