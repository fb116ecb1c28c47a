"""TxnOffsetCommit (key 28): v0-5. Commit consumer offsets inside a producer's transaction
(the producer's sendOffsetsToTransaction); they become the group's offsets only if the
transaction commits.

First the transaction is verified with the coordinator, as Kafka does since KIP-890 part 1:
the group's ``__consumer_offsets`` partition must have joined it through AddOffsetsToTxn
(otherwise INVALID_TXN_STATE, or TRANSACTION_ABORTABLE from v4), the producer epoch must be
current (INVALID_PRODUCER_EPOCH otherwise, what producers expect here). Then the group checks
the member: v3+ carry the member id, generation and group instance id (KIP-447:
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); without them (generation -1) the
commit is accepted even from a group with members, as Kafka accepts it. The offsets are written
to ``__consumer_offsets`` in a transactional batch and stay pending until the marker. Partitions
of unknown topics get UNKNOWN_TOPIC_OR_PARTITION. v2 adds the committed leader epoch. v5 means
transactions v2, where the offsets partition joins implicitly; this broker does not run those
(see end_txn.py), so v5 is verified like v4.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.group.txn_offsets import TxnCommitRequest
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.offset_requests import known_commits, topics_answer
from kafkalike.server.registry import handles

E = ErrorCode


def _verify(ctx: RequestContext, request: Message) -> ErrorCode | None:
    """The error every partition gets when the transaction does not hold the group's offsets."""
    tp = ctx.txn.offsets_partition(request.group_id)
    error = ctx.txn.verify(request.transactional_id, request.producer_id, request.producer_epoch, [tp])[tp]
    if error is E.NONE:
        return None
    if error is E.PRODUCER_FENCED:
        return E.INVALID_PRODUCER_EPOCH
    if error is E.TRANSACTION_ABORTABLE:
        return E.TRANSACTION_ABORTABLE if ctx.version >= 4 else E.INVALID_TXN_STATE
    if error is E.CONCURRENT_TRANSACTIONS:
        # The end of the previous transaction is still being written: retriable for every client.
        return E.COORDINATOR_LOAD_IN_PROGRESS if ctx.version >= 2 else E.COORDINATOR_NOT_AVAILABLE
    return error


@handles(28, 0, 5)
async def handle_txn_offset_commit(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    v = ctx.version
    valid, errors = known_commits(ctx, request.topics, with_leader_epoch=v >= 2)
    if valid:
        refused = _verify(ctx, request)
        if refused is not None:
            errors.update({(p.topic, p.partition): refused for p in valid})
        else:
            commit = TxnCommitRequest(
                group_id=request.group_id,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
                generation_id=request.generation_id if v >= 3 else -1,
                member_id=request.member_id if v >= 3 else "",
                group_instance_id=request.group_instance_id if v >= 3 else None,
                partitions=tuple(valid),
            )
            for topic_name, partition, error in await ctx.txn.commit_offsets(commit):
                errors[(topic_name, partition)] = error
    return {
        "throttle_time_ms": 0,
        "topics": topics_answer(request.topics, errors),
    }
