"""AddRaftVoter (key 80): v0-1. Add a controller to the metadata quorum's voters (KIP-853).

As Kafka's broker, the request is forwarded to the active controller, whose quorum leader adds the
voter once it has caught up and answers when the new voter set is committed (v1: or once written,
when ``ack_when_committed`` is false). ``kafka-metadata-quorum --bootstrap-server … add-controller``
comes this way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(80, 0, 1)
async def handle_add_raft_voter(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await ctx.controller.forward_to_quorum(80, ctx.version, request)  # type: ignore[no-any-return]
