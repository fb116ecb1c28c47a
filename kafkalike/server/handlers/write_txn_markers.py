"""WriteTxnMarkers (key 27): v1 (v0 was removed in Apache Kafka 4.0). Write the commit or abort
markers that end transactions, as a partition leader does for a transaction coordinator.

Each marker is appended to each named partition as a control batch carrying the producer id,
epoch and coordinator epoch; the producer-state checks refuse a marker from an older producer
epoch (INVALID_PRODUCER_EPOCH) or an older coordinator (TRANSACTION_COORDINATOR_FENCED). A marker
reaching a ``__consumer_offsets`` partition also ends that producer's pending transactional
offsets there. This broker's own transaction coordinator writes its markers through the same
function (``txn_service.write_markers``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles
from kafkalike.server.txn_service import MarkerEntry


@handles(27, 1, 1)
async def handle_write_txn_markers(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    entries = [
        MarkerEntry(
            m.producer_id,
            m.producer_epoch,
            m.coordinator_epoch,
            m.transaction_result,
            tuple((t.name, p) for t in m.topics for p in t.partition_indexes),
        )
        for m in request.markers
    ]
    results = await ctx.services.write_txn_markers(entries)
    markers = []
    for entry, errors in zip(entries, results, strict=True):
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), error in errors.items():
            by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
        markers.append(
            {
                "producer_id": entry.producer_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
        )
    return {"markers": markers}
