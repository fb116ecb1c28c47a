"""DescribeQuorum (key 55): v0-2. The metadata quorum: ``__cluster_metadata`` partition 0.

As Apache Kafka's broker (``forwardToControllerOrFail``), the broker forwards the request to the
active controller and answers what it answers: the quorum's leader, epoch and high watermark,
each voter's and observer's progress, and (v2) the voters' controller endpoints; no controller
within ``request.timeout.ms`` makes it REQUEST_TIMED_OUT. ``kafka-metadata-quorum
--bootstrap-server`` works against any broker so, the single node's included (its controller
answers in process, naming its client listener as the only voter's endpoint).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(55, 0, 2)
async def handle_describe_quorum(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await ctx.controller.forward_to_quorum(55, ctx.version, request)  # type: ignore[no-any-return]
