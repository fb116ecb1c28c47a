"""DescribeConfigs (key 32): v1-4. Topic and broker configs with Kafka's values and sources.

A topic config set on the topic reports source TOPIC_CONFIG; otherwise it shows the broker's
value, sourced where the broker got it (dynamic per-broker, dynamic cluster default, the
static file, or the default). v1+ can list synonyms, strongest first; v3+ adds the config
type and documentation (documentation is null: not carried).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.controller.metadata import BROKER_RESOURCE, TOPIC_RESOURCE
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.config import BROKER_CONFIGS, DEFAULT_CONFIG, TOPIC_CONFIG, TOPIC_CONFIGS, BrokerConfig
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

BROKER_LOGGER_RESOURCE = 8
_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8, "password": 9}


@handles(32, 1, 4)
async def handle_describe_configs(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    results = [_describe(ctx, r, request.include_synonyms) for r in request.resources]
    return {"throttle_time_ms": 0, "results": results}


def _describe(ctx: RequestContext, resource: Message, synonyms: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "error_code": 0,
        "error_message": "",  # Apache Kafka's answer on success: an empty message, not null
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "configs": [],
    }
    config = ctx.broker.config
    if resource.resource_type == TOPIC_RESOURCE:
        topic = ctx.broker.controller.image.topics.get(resource.resource_name)
        if topic is None:
            result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message="Topic does not exist")
            return result
        entries = [_topic_entry(config, topic.configs, name, synonyms) for name in sorted(TOPIC_CONFIGS)]
    elif resource.resource_type == BROKER_RESOURCE:
        if resource.resource_name not in ("", str(ctx.broker.node_id)):
            result.update(
                error_code=ErrorCode.INVALID_REQUEST, error_message=f"Unexpected broker id {resource.resource_name}"
            )
            return result
        # The empty name is the cluster-wide default resource: only dynamic cluster defaults
        # (set with AlterConfigs) show there, and this broker has none, as Apache Kafka shows.
        names = sorted(BROKER_CONFIGS) if resource.resource_name else []
        entries = [_broker_entry(config, name, synonyms) for name in names]
    elif resource.resource_type == BROKER_LOGGER_RESOURCE:
        entries = []
    else:
        result.update(
            error_code=ErrorCode.INVALID_REQUEST, error_message=f"Unsupported resource type {resource.resource_type}"
        )
        return result
    wanted = resource.configuration_keys
    result["configs"] = [e for e in entries if not wanted or e["name"] in wanted]
    return result


def _entry(
    name: str, chain: list[tuple[str, str | None, int]], type_: str, read_only: bool, synonyms: bool
) -> dict[str, Any]:
    _, value, source = chain[0] if chain else (name, None, DEFAULT_CONFIG)
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "is_default": source == DEFAULT_CONFIG,
        "config_source": source,
        "is_sensitive": type_ == "password",
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in chain] if synonyms else [],
        "config_type": _TYPES.get(type_, 0),
        "documentation": None,
    }


def _topic_entry(config: BrokerConfig, overrides: dict[str, str], name: str, synonyms: bool) -> dict[str, Any]:
    type_, broker_name, fixed = TOPIC_CONFIGS[name]
    chain: list[tuple[str, str | None, int]] = []
    if name in overrides:
        chain.append((name, overrides[name], TOPIC_CONFIG))
    if broker_name is not None:
        chain += config.synonyms(broker_name)
    else:
        chain.append((name, fixed, DEFAULT_CONFIG))
    return _entry(name, chain, type_, False, synonyms)


def _broker_entry(config: BrokerConfig, name: str, synonyms: bool) -> dict[str, Any]:
    d = BROKER_CONFIGS[name]
    chain = config.synonyms(name)
    if not chain:
        chain = [(name, config.get(name), config.source(name))]
    return _entry(name, chain, d.type, d.read_only, synonyms)
