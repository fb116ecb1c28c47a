"""CreateTopics (key 19): v2-7, forwarded to the active controller, which decides every topic.

As Kafka's brokers forward it (controller/replication_control.py has the checks and the limits:
validate_only, per-topic configs, default partitions and replication, assignments, too many
partitions or records refusing the whole request with POLICY_VIOLATION); answered once this
broker's published image shows the topics (server/cluster_metadata.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(19, 2, 7)
async def handle_create_topics(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await ctx.controller.forward(19, ctx.version, request)  # type: ignore[no-any-return]
