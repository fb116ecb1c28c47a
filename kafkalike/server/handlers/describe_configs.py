"""DescribeConfigs (key 32): v1-4. Topic and broker configs with Kafka's values and sources.

A topic config set on the topic reports source TOPIC_CONFIG; otherwise it shows the value the
topic's log uses, sourced where the broker got it (dynamic per-broker, dynamic cluster default,
the static file, or the default). v1+ can list synonyms, strongest first, as Kafka lists them
(``BrokerConfig.synonyms``); v3+ adds the config type, and the documentation when the request
sets include_documentation (null otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kafkalike.configs import (
    BROKER_CONFIGS,
    INTERNAL_TOPIC_CONFIGS,
    LISTED_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigKey,
    ConfigType,
)
from kafkalike.controller.image import BROKER_RESOURCE, TOPIC_RESOURCE
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.config import DEFAULT_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, TOPIC_CONFIG, BrokerConfig
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles

BROKER_LOGGER_RESOURCE = 8
WHEN_SET = [name for name, key in BROKER_CONFIGS.items() if key.listed_when_set]
# DescribeConfigs' config_type numbers (v3+).
_WIRE_TYPES = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.SHORT: 4,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
    ConfigType.CLASS: 8,
    ConfigType.PASSWORD: 9,
}

Chain = list[tuple[str, str | None, int]]


@handles(32, 1, 4)
async def handle_describe_configs(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    results = [_describe(ctx, r, request.include_synonyms, request.include_documentation) for r in request.resources]
    return {"throttle_time_ms": 0, "results": results}


def _describe(ctx: RequestContext, resource: Message, synonyms: bool, docs: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "error_code": 0,
        "error_message": "",  # Apache Kafka's answer on success: an empty message, not null
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "configs": [],
    }
    config = ctx.metadata.config
    if resource.resource_type == TOPIC_RESOURCE:
        topic = ctx.metadata.image.topics.get(resource.resource_name)
        if topic is None:
            result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message="Topic does not exist")
            return result
        entries = [
            topic_config_entry(config, topic.configs, name, synonyms, docs)
            for name in topic_config_names(topic.configs)
        ]
    elif resource.resource_type == BROKER_RESOURCE:
        problem = _broker_name_problem(resource.resource_name, ctx.metadata.node_id)
        if problem is not None:
            result.update(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
            return result
        if resource.resource_name:
            names = sorted([*LISTED_BROKER_CONFIGS, *(n for n in WHEN_SET if config.source(n) != DEFAULT_CONFIG)])
            entries = [_broker_entry(config, name, synonyms, docs) for name in names]
        else:
            # The empty name is the cluster-wide default resource: only the dynamic cluster
            # defaults (set with AlterConfigs) show there, each its own only synonym, as in Kafka.
            entries = [_default_entry(config, name, synonyms, docs) for name in sorted(config.dynamic_default)]
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


def _broker_name_problem(name: str, node_id: int) -> str | None:
    """Kafka's ConfigHelper: the cluster default (""), or this broker's id."""
    if not name:
        return None
    if not re.fullmatch(r"[+-]?[0-9]+", name) or not -(2**31) <= int(name) < 2**31:  # Java's toInt
        return f"Broker id must be an integer, but it is: {name}"
    if int(name) != node_id:
        return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
    return None


def _entry(
    key: ConfigKey, value: str | None, chain: Chain, read_only: bool, synonyms: bool, docs: bool
) -> dict[str, Any]:
    source = chain[0][2] if chain else DEFAULT_CONFIG  # Kafka: the strongest synonym's source
    return {
        "name": key.name,
        "value": value,
        "read_only": read_only,
        "is_default": source == DEFAULT_CONFIG,
        "config_source": source,
        "is_sensitive": key.sensitive,
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in chain] if synonyms else [],
        "config_type": _WIRE_TYPES[key.type],
        "documentation": (key.doc or None) if docs and not key.listed_when_set else None,
    }


def topic_config_names(overrides: Mapping[str, str]) -> list[str]:
    """The configs a topic lists, sorted: every public one, and the internal ones it sets (as Kafka,
    which lists an internal config only among the topic's own)."""
    return sorted([*TOPIC_CONFIGS, *(name for name in INTERNAL_TOPIC_CONFIGS if name in overrides)])


def topic_config_entry(
    config: BrokerConfig, overrides: dict[str, str], name: str, synonyms: bool, docs: bool
) -> dict[str, Any]:
    key = TOPIC_CONFIGS.get(name) or INTERNAL_TOPIC_CONFIGS[name]
    chain: Chain = []
    if name in overrides:
        chain.append((name, overrides[name], TOPIC_CONFIG))
    if key.follows is not None:
        chain += config.synonyms(key.follows)
    # A topic-only config (no broker-level synonym) lists no default synonym, as Apache Kafka does.
    # The value the topic's log runs with, even where no synonym names where it comes from.
    value = overrides[name] if name in overrides else config.topic_default(name)
    return _entry(key, value, chain, False, synonyms, docs)


def _broker_entry(config: BrokerConfig, name: str, synonyms: bool, docs: bool) -> dict[str, Any]:
    key = BROKER_CONFIGS[name]
    chain = config.synonyms(name)
    value = chain[0][1] if chain else config.get(name)
    return _entry(key, value, chain, not key.dynamic, synonyms, docs)


def _default_entry(config: BrokerConfig, name: str, synonyms: bool, docs: bool) -> dict[str, Any]:
    # AlterConfigs stores only broker configs; a name no longer declared is shown as a plain string.
    key = BROKER_CONFIGS.get(name) or ConfigKey(name, ConfigType.STRING, None, "", dynamic=True)
    value = config.dynamic_default[name]
    chain: Chain = [(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG)]
    return _entry(key, value, chain, not key.dynamic, synonyms, docs)
