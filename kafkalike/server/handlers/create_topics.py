"""CreateTopics (key 19): v2-7. validate_only, per-topic configs, default partitions.

v5+ returns the topic's configs, partitions and replication factor; v7 adds topic ids.
A replication factor above the number of brokers gets INVALID_REPLICATION_FACTOR; manual
replica assignments must name this broker only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.controller.metadata import ControllerError
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.config import TOPIC_CONFIGS
from kafkalike.server.context import RequestContext
from kafkalike.server.handlers.describe_configs import topic_config_entry
from kafkalike.server.registry import handles


@handles(19, 2, 7)
async def handle_create_topics(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    results = []
    seen: set[str] = set()
    duplicates = {t.name for t in request.topics if t.name in seen or seen.add(t.name)}  # type: ignore[func-returns-value]
    for topic in request.topics:
        if topic.name not in duplicates:
            results.append(_create_one(ctx, topic, request.validate_only))
    # As Apache Kafka's controller answers: one INVALID_REQUEST result per duplicated name.
    for name in sorted(duplicates):
        results.append(_error(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
    return {"throttle_time_ms": 0, "topics": results}


def _create_one(ctx: RequestContext, topic: Message, validate_only: bool) -> dict[str, Any]:
    broker = ctx.broker
    partitions = topic.num_partitions
    replication = topic.replication_factor
    if topic.assignments:
        if partitions != -1 or replication != -1:
            return _error(
                topic.name,
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
            )
        partitions = len(topic.assignments)
        replication = len(topic.assignments[0].broker_ids)
        if any(b != broker.node_id for a in topic.assignments for b in a.broker_ids):
            return _error(
                topic.name, ErrorCode.BROKER_NOT_AVAILABLE, "Replica assignment names a broker that does not exist."
            )
    if partitions == -1:
        partitions = broker.config.get_int("num.partitions")
    if replication == -1:
        replication = broker.config.get_int("default.replication.factor")
    if replication <= 0:
        return _error(
            topic.name,
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if replication > 1:
        return _error(
            topic.name,
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication} time(s): The target replication factor of {replication} cannot be reached because only 1 broker(s) are registered.",
        )
    configs = {c.name: c.value for c in topic.configs}
    if any(v is None for v in configs.values()):
        return _error(topic.name, ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs.")
    try:
        created = broker.create_topic(topic.name, partitions, configs, validate_only)  # type: ignore[arg-type]
    except ControllerError as exc:
        return _error(topic.name, exc.code, exc.message)
    return {
        "name": topic.name,
        "topic_id": created.topic_id,
        "error_code": 0,
        "error_message": None,
        "num_partitions": partitions,
        "replication_factor": replication,
        # Every topic config with its value and source, as DescribeConfigs reports them.
        "configs": [
            {k: entry[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
            for entry in (
                topic_config_entry(broker.config, configs, name, False, False) for name in sorted(TOPIC_CONFIGS)
            )
        ],
    }


def _error(name: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "name": name,
        "error_code": code,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }
