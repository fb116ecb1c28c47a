"""CreatePartitions (key 37): v0-3. Grows a topic's partition count; validate_only supported.
Keys hash to partitions by count, so growing a topic moves where new records of a key land.

Adding more than 10,000 partitions in all refuses every topic named once (POLICY_VIOLATION), as
Kafka 4.4 does. The request is one metadata operation capped at 10,000 records
(controller/limits.py): the topic whose new partitions overflow it, and every later one, get
UNKNOWN_SERVER_ERROR as in Kafka 4.0.
A name given twice gets INVALID_REQUEST ("Duplicate topic name."). New partition files are made
on worker threads; a disk error answers KAFKA_STORAGE_ERROR with nothing grown. Topics are taken,
and answered, in the order Kafka takes them: a Java HashSet's of their names."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kafkalike.controller.limits import (
    ADDITIONAL_PARTITIONS_OVER_LIMIT,
    MAX_RECORDS_PER_USER_OP,
    additional_partitions,
    java_hash_set_order,
)
from kafkalike.controller.metadata import ControllerError
from kafkalike.log.errors import LogError
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

log = logging.getLogger("kafkalike.create_partitions")


@handles(37, 0, 3)
async def handle_create_partitions(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if ctx.controller.forwarding:  # a node of a cluster: the active controller decides
        return await ctx.controller.forward(37, ctx.version, request)  # type: ignore[no-any-return]
    counts = Counter(t.name for t in request.topics)
    results: list[dict[str, Any]] = [
        _result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for name, n in counts.items() if n > 1
    ]
    by_name = {t.name: t for t in request.topics}
    once = [name for name in java_hash_set_order(by_name) if counts[name] == 1]
    existing = ctx.metadata.image.topics
    growths = [(existing[name].partitions, by_name[name].count) for name in once if name in existing]
    if additional_partitions(growths) > MAX_RECORDS_PER_USER_OP:
        results += [_result(name, ErrorCode.POLICY_VIOLATION, ADDITIONAL_PARTITIONS_OVER_LIMIT) for name in once]
        return {"throttle_time_ms": 0, "results": results}
    asked = []
    # Kafka's order, which decides the topic that overflows the operation (controller/limits.py).
    for topic in (by_name[name] for name in java_hash_set_order(by_name)):
        if counts[topic.name] > 1:
            continue
        if topic.assignments and any(b != ctx.metadata.node_id for a in topic.assignments for b in a.broker_ids):
            results.append(
                _result(topic.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Replica assignment names an unknown broker.")
            )
            continue
        asked.append((topic.name, topic.count))
    try:
        outcomes = await ctx.controller.grow_topics(asked, request.validate_only)
    except (OSError, LogError) as exc:  # a full disk, or a directory left that is not this topic's
        log.error("CreatePartitions failed on the disk: %s", exc)
        results += [_result(name, ErrorCode.KAFKA_STORAGE_ERROR, f"Disk error: {exc}") for name, _ in asked]
        return {"throttle_time_ms": 0, "results": results}
    for (name, _), outcome in zip(asked, outcomes, strict=True):
        if isinstance(outcome, ControllerError):
            results.append(_result(name, outcome.code, outcome.message))
        else:
            results.append(_result(name, ErrorCode.NONE, None))
    return {"throttle_time_ms": 0, "results": results}


def _result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}
