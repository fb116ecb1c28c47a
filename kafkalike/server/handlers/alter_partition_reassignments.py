"""AlterPartitionReassignments (key 45): v0-1, forwarded to the active controller (Kafka's
brokers forward it too), which starts, overrides or cancels each named partition's move to its
target replicas (controller/reassignment_control.py); answered once this broker's image has
caught up with what the controller committed. The replicas added then fetch from the leader
and, once in the ISR, complete the move."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(45, 0, 1)
async def handle_alter_partition_reassignments(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await ctx.controller.forward(45, ctx.version, request)  # type: ignore[no-any-return]
