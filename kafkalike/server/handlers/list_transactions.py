"""ListTransactions (key 66): v0-1. The transactional ids this coordinator knows (KIP-664),
filtered by state names (unknown names are echoed back in ``unknown_state_filters``) and
producer ids; v1 adds ``duration_filter``, keeping only transactions running longer than that
many milliseconds (KIP-994).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(66, 0, 1)
async def handle_list_transactions(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    duration_ms = request.duration_filter if ctx.version >= 1 else -1
    result = ctx.txn.list_transactions(request.state_filters, request.producer_id_filters, duration_ms)
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "unknown_state_filters": list(result.unknown_state_filters),
        "transaction_states": [
            {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "transaction_state": t.state}
            for t in result.transactions
        ],
    }
