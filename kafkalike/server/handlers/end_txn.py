"""EndTxn (key 26): v0-5 advertised, v0-4 served. Commit or abort a producer's transaction.

The coordinator writes PrepareCommit / PrepareAbort to ``__transaction_state`` and answers;
the markers are then written to every partition of the transaction and CompleteCommit /
CompleteAbort follows (see txn_service.py). A retried end of a finished transaction answers
NONE; an end while markers are still going out answers CONCURRENT_TRANSACTIONS. PRODUCER_FENCED
is INVALID_PRODUCER_EPOCH before v2.

Transactions v2 (KIP-890 part 2) are not run here and the ``transaction.version`` feature is not
advertised, so clients end transactions with v4 at most. v5 stays in the advertised range
because Apache Kafka 4.0 lists it (kafka-python infers the broker version from such ranges),
but v5 *means* transactions v2: the coordinator would bump the epoch on every EndTxn and hand
back the new one, and the producer would then rely on partitions joining implicitly through
Produce v12. Serving it with v1 semantics would break such a producer later and less clearly,
so a v5 request is answered UNSUPPORTED_VERSION and the transaction is left as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

TRANSACTIONS_V2_VERSION = 5


@handles(26, 0, 5)
async def handle_end_txn(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    response = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    if ctx.version >= TRANSACTIONS_V2_VERSION:
        response["error_code"] = ErrorCode.UNSUPPORTED_VERSION
        return response
    error = await ctx.txn.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed
    )
    if error is ErrorCode.PRODUCER_FENCED and ctx.version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    response["error_code"] = error
    return response
