"""DeleteTopics (key 20): v1-6, by name or by topic id (v6+), forwarded to the active controller.

The data goes with the topic: once the removal is committed, the metadata publisher takes the
topic's partitions away and their directories are deleted on worker threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(20, 1, 6)
async def handle_delete_topics(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await ctx.controller.forward(20, ctx.version, request)  # type: ignore[no-any-return]
