"""DescribeCluster (key 60): v0-2. The brokers, the cluster id, and a controller id.
v1 adds the endpoint type (1 = brokers); v2 adds fenced-broker listing. Answered from the
published image: the unfenced brokers (and the fenced ones when v2 asks), with any live broker as
the controller id, as a KRaft broker does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.controller.image import MetadataImage
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.handlers.metadata import any_of
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
    cluster_image = ctx.metadata.cluster_image
    include_fenced = ctx.version >= 2 and request.include_fenced_brokers
    brokers = _registered_brokers(cluster_image, ctx.listener, include_fenced)
    # Any live broker, whichever listeners it has (Kafka's getRandomAliveBrokerId).
    controller_id = any_of([b.broker_id for b in cluster_image.unfenced_brokers()])
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": BROKERS_ENDPOINT,
        "cluster_id": ctx.metadata.cluster_id,
        "controller_id": controller_id,
        "brokers": brokers,
        "cluster_authorized_operations": NOT_REQUESTED,
    }


def _registered_brokers(image: MetadataImage, listener: str, include_fenced: bool) -> list[dict[str, Any]]:
    """The registered brokers with an endpoint on ``listener``: the unfenced ones, and the fenced
    ones too (``is_fenced``) when asked (v2)."""
    out = []
    for broker_id, broker in sorted(image.brokers.items()):
        if broker.fenced and not include_fenced:
            continue
        endpoint = next((e for e in broker.listeners if e.name == listener), None)
        if endpoint is not None:
            out.append(
                {
                    "broker_id": broker_id,
                    "host": endpoint.host,
                    "port": endpoint.port,
                    "rack": broker.rack,
                    "is_fenced": broker.fenced,
                }
            )
    return out
