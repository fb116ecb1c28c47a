"""InitProducerId (key 22): v0-5. Producer ids for idempotent and transactional producers.

Without a transactional id: a new producer id from the controller's persisted blocks (so none is
reused after a restart); v3+ lets an idempotent producer bump its epoch (KIP-360) by sending its
current id and epoch. With one, the transaction coordinator answers: a new id, or the next epoch
of the id's producer, which fences any older instance; if that instance left a transaction
open, it is aborted first and the answer is CONCURRENT_TRANSACTIONS until that is done (the
client retries). The timeout must lie in (0, transaction.max.timeout.ms]
(INVALID_TRANSACTION_TIMEOUT). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4. A new
producer id block the metadata log cannot take (a disk error) is COORDINATOR_LOAD_IN_PROGRESS,
Kafka's retriable answer while it waits for a block.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kafkalike.controller.api_error import ControllerError
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

log = logging.getLogger("kafkalike.init_producer_id")
MAX_EPOCH = 32767


@handles(22, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    response = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    if request.transactional_id is not None:
        pid, epoch = (request.producer_id, request.producer_epoch) if ctx.version >= 3 else (-1, -1)
        result = await ctx.txn.init_producer_id(request.transactional_id, request.transaction_timeout_ms, pid, epoch)
        error = result.error
        if error is ErrorCode.PRODUCER_FENCED and ctx.version < 4:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        response.update(error_code=error, producer_id=result.producer_id, producer_epoch=result.producer_epoch)
        return response
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        response.update(producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1)
        return response
    try:
        await ctx.controller.reserve_producer_id()
        producer_id = ctx.controller.allocate_producer_id()
    except ControllerError as exc:  # no producer id block to be had: Kafka's retriable answer
        log.warning("no producer id block: %s", exc.message)
        response.update(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return response
    response.update(producer_id=producer_id, producer_epoch=0)
    return response
