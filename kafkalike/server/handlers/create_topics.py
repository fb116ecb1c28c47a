"""CreateTopics (key 19): v2-7. validate_only, per-topic configs, default partitions.

v5+ returns the topic's configs, partitions and replication factor; v7 adds topic ids.
A replication factor above the number of brokers gets INVALID_REPLICATION_FACTOR; manual
replica assignments must name this broker only. The request's topics are one metadata
operation with Kafka's limits (controller/limits.py): too many partitions or records and
every topic of the request gets POLICY_VIOLATION, nothing created. Partition files are made
on worker threads; a disk error answers KAFKA_STORAGE_ERROR with nothing created.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kafkalike.controller.limits import MAX_RECORDS_PER_USER_OP, PARTITIONS_OVER_LIMIT, requested_partitions
from kafkalike.controller.metadata import ControllerError, TopicImage
from kafkalike.log.errors import LogError
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.broker import NewTopic, OperationTooLarge
from kafkalike.server.context import RequestContext
from kafkalike.server.handlers.describe_configs import topic_config_entry, topic_config_names
from kafkalike.server.registry import handles

log = logging.getLogger("kafkalike.create_topics")


@handles(19, 2, 7)
async def handle_create_topics(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if ctx.controller.forwarding:  # a node of a cluster: the active controller decides
        return await ctx.controller.forward(19, ctx.version, request)  # type: ignore[no-any-return]
    seen: set[str] = set()
    duplicates = {t.name for t in request.topics if t.name in seen or seen.add(t.name)}  # type: ignore[func-returns-value]
    unique = [t for t in request.topics if t.name not in duplicates]
    asked = requested_partitions(
        ((t.num_partitions, len(t.assignments)) for t in unique), ctx.metadata.config.get_int("num.partitions")
    )
    if asked > MAX_RECORDS_PER_USER_OP:
        return _refuse_all(ctx, request, PARTITIONS_OVER_LIMIT)
    checked = [_check_one(ctx, topic) for topic in unique]
    wanted = [c for c in checked if isinstance(c, NewTopic)]
    try:
        outcomes = iter(await ctx.controller.create_topics(wanted, request.validate_only))
    except OperationTooLarge as exc:
        return _refuse_all(ctx, request, exc.message)
    except (OSError, LogError) as exc:  # a full disk, or a directory left that is not this topic's
        log.error("CreateTopics failed on the disk: %s", exc)
        storage_error = ErrorCode.KAFKA_STORAGE_ERROR
        results = [
            _error(c.name, storage_error, f"Disk error: {exc}") if isinstance(c, NewTopic) else c for c in checked
        ]
    else:
        results = []
        config_lists: dict[tuple[tuple[str, str], ...], Any] = {}
        for c in checked:
            if not isinstance(c, NewTopic):
                results.append(c)
                continue
            outcome = next(outcomes)
            if isinstance(outcome, ControllerError):
                results.append(_error(c.name, outcome.code, outcome.message))
            else:
                results.append(_created(ctx, outcome, c, config_lists))
    # As Apache Kafka's controller answers: one INVALID_REQUEST result per duplicated name.
    for name in sorted(duplicates):
        results.append(_error(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
    return {"throttle_time_ms": 0, "topics": results}


def _refuse_all(ctx: RequestContext, request: Message, message: str | None) -> Mapping[str, Any]:
    """Kafka's answer to a request refused as a whole: every topic named, duplicates included."""
    log.warning("CreateTopics of %d topic(s) refused: %s", len(request.topics), message)
    return {
        "throttle_time_ms": 0,
        "topics": [_error(t.name, ErrorCode.POLICY_VIOLATION, message) for t in request.topics],
    }


def _check_one(ctx: RequestContext, topic: Message) -> NewTopic | dict[str, Any]:
    """The topic as the broker should create it, or this request's error for it."""
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
        if any(b != ctx.metadata.node_id for a in topic.assignments for b in a.broker_ids):
            return _error(
                topic.name, ErrorCode.BROKER_NOT_AVAILABLE, "Replica assignment names a broker that does not exist."
            )
    if partitions == -1:
        partitions = ctx.metadata.config.get_int("num.partitions")
    if replication == -1:
        replication = ctx.metadata.config.get_int("default.replication.factor")
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
            f"Unable to replicate the partition {replication} time(s): The target replication factor of {replication} "
            "cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories "
            "cordoned.",
        )
    configs = {c.name: c.value for c in topic.configs}
    if any(v is None for v in configs.values()):
        return _error(topic.name, ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs.")
    return NewTopic(topic.name, partitions, configs)


def _created(
    ctx: RequestContext, created: TopicImage, asked: NewTopic, config_lists: dict[tuple[tuple[str, str], ...], Any]
) -> dict[str, Any]:
    key = tuple(sorted(asked.configs.items()))
    if key not in config_lists:  # the same for every topic of the request with the same configs
        config_lists[key] = [
            {k: entry[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
            for entry in (
                topic_config_entry(ctx.metadata.config, asked.configs, name, False, False)
                for name in topic_config_names(asked.configs)
            )
        ]
    return {
        "name": created.name,
        "topic_id": created.topic_id,
        "error_code": 0,
        "error_message": None,
        "num_partitions": asked.partitions,
        "replication_factor": 1,
        # Every topic config with its value and source, as DescribeConfigs reports them.
        "configs": config_lists[key],
    }


def _error(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "error_code": code,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }
