"""InitProducerId (key 22): v0-5. Producer ids for idempotent producers.

Ids come from the controller in persisted blocks, so none is reused after a restart. v3+
lets an idempotent producer bump its epoch (KIP-360) by sending its current id and epoch.
Transactional ids need the transaction coordinator, which this broker does not run yet:
they get COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

MAX_EPOCH = 32767


@handles(22, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    response = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    if request.transactional_id is not None:
        response["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return response
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        response.update(producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1)
        return response
    response.update(producer_id=ctx.broker.controller.allocate_producer_id(), producer_epoch=0)
    return response
