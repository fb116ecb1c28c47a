"""AddPartitionsToTxn (key 24): v0-5. Partitions join a producer's ongoing transaction.

v0-3 come from producers: one transaction at the top level, one error for all its partitions
(PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2). v4+ come from partition leaders and
batch several transactions; ``verify_only`` asks whether the partitions are already in the
transaction without adding them (KIP-890 part 1), answered per partition: NONE, or
TRANSACTION_ABORTABLE for one that was never added. A partition of an unknown topic fails the
whole transaction: UNKNOWN_TOPIC_OR_PARTITION for it, OPERATION_NOT_ATTEMPTED for the others; so
does, from a producer (v0-3), a partition of an internal topic (TOPIC_AUTHORIZATION_FAILED, as
Kafka's authorizer answers: offsets join through AddOffsetsToTxn).
v5 differs from v4 only in that it may return TRANSACTION_ABORTABLE from a broker that runs
transactions v2; this one does not (see end_txn.py), so v4 and v5 answer alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.group import OFFSETS_TOPIC
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles
from kafkalike.txn import TRANSACTION_STATE_TOPIC, TopicPartition

E = ErrorCode
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def _partitions(topics: Any) -> list[TopicPartition]:
    return [(t.name, p) for t in topics for p in t.partitions]


def _refused(ctx: RequestContext, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode] | None:
    """The answer when some partition cannot join (internal, or missing), else None."""
    errors = {}
    for tp in partitions:
        if ctx.version < 4 and tp[0] in INTERNAL_TOPICS:
            errors[tp] = E.TOPIC_AUTHORIZATION_FAILED
        elif not ctx.metadata.routing.knows(*tp):  # in the metadata, on whichever broker (Kafka's metadataCache)
            errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
    if not errors:
        return None
    return {tp: errors.get(tp, E.OPERATION_NOT_ATTEMPTED) for tp in partitions}


async def _transaction(
    ctx: RequestContext, txn_id: str, pid: int, epoch: int, topics: Any, verify_only: bool
) -> dict[TopicPartition, ErrorCode]:
    partitions = _partitions(topics)
    failed = _refused(ctx, partitions)
    if failed is not None:
        return failed
    if verify_only:
        return ctx.txn.verify(txn_id, pid, epoch, partitions)
    error = await ctx.txn.add_partitions(txn_id, pid, epoch, partitions)
    if error is E.PRODUCER_FENCED and ctx.version < 2:
        error = E.INVALID_PRODUCER_EPOCH
    return dict.fromkeys(partitions, error)


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": error})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


@handles(24, 0, 5)
async def handle_add_partitions_to_txn(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if ctx.version < 4:
        errors = await _transaction(
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            request.v3_and_below_topics,
            verify_only=False,
        )
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(errors)}
    results = []
    for txn in request.transactions:
        errors = await _transaction(
            ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only
        )
        results.append({"transactional_id": txn.transactional_id, "topic_results": _topic_results(errors)})
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}
