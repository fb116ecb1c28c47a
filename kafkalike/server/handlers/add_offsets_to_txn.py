"""AddOffsetsToTxn (key 25): v0-4. A consumer group's offsets partition joins a producer's
ongoing transaction, ahead of TxnOffsetCommit (the producer's sendOffsetsToTransaction).

The partition is the group's partition of ``__consumer_offsets`` (created if needed), so the
transaction's marker reaches it and ends the pending offsets there. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2; v4 may return TRANSACTION_ABORTABLE, which this coordinator
never needs to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(25, 0, 4)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    error = await ctx.txn.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
    )
    if error is ErrorCode.PRODUCER_FENCED and ctx.version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": error}
