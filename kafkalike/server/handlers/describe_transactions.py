"""DescribeTransactions (key 65): v0. The coordinator's view of transactional ids (KIP-664):
state, producer id and epoch, timeout, start time and the partitions of the open transaction
(while committing or aborting, those still waiting for their marker). An unknown id gets
TRANSACTIONAL_ID_NOT_FOUND, an empty one INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(65, 0, 0)
async def handle_describe_transactions(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    states = [
        {
            "error_code": d.error,
            "transactional_id": d.transactional_id,
            "transaction_state": d.state,
            "transaction_timeout_ms": d.timeout_ms,
            "transaction_start_time_ms": d.start_ms,
            "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch,
            "topics": [{"topic": t, "partitions": list(ps)} for t, ps in d.topics],
        }
        for d in ctx.txn.describe(request.transactional_ids)
    ]
    return {"throttle_time_ms": 0, "transaction_states": states}
