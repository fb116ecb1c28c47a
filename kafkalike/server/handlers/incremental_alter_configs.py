"""IncrementalAlterConfigs (key 44): v0-1. SET, DELETE, APPEND and SUBTRACT on single configs.

APPEND and SUBTRACT work on list-typed configs only (e.g. cleanup.policy), as in Kafka.
A config named twice for one resource is INVALID_REQUEST. validate_only checks only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.configs import TOPIC_CONFIGS, ConfigType, config_type
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.handlers.alter_configs import ConfigError, apply_new_configs, current_configs
from kafkalike.server.registry import handles

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@handles(44, 0, 1)
async def handle_incremental_alter_configs(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if ctx.controller.forwarding:  # a node of a cluster: the active controller decides
        return await ctx.controller.forward(44, ctx.version, request)  # type: ignore[no-any-return]
    responses = []
    for resource in request.resources:
        entry: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        try:
            configs = current_configs(ctx, resource.resource_type, resource.resource_name)
            names = [c.name for c in resource.configs]
            if len(names) != len(set(names)):
                raise ConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            for op in resource.configs:
                _apply(ctx, configs, op)
            await apply_new_configs(ctx, resource.resource_type, resource.resource_name, configs, request.validate_only)
        except ConfigError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}


def _apply(ctx: RequestContext, configs: dict[str, str], op: Message) -> None:
    name, value, kind = op.name, op.value, op.config_operation
    if kind == SET:
        if value is None:
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
        configs[name] = value
    elif kind == DELETE:
        configs.pop(name, None)
    elif kind in (APPEND, SUBTRACT):
        if config_type(name) != ConfigType.LIST:
            verb = "append" if kind == APPEND else "subtract"
            raise ConfigError(ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}")
        base = configs.get(name)
        if base is None:
            base = ctx.metadata.config.topic_default(name) if name in TOPIC_CONFIGS else ctx.metadata.config.get(name)
        items = [v for v in (base or "").split(",") if v]
        given = [v for v in (value or "").split(",") if v]
        if kind == APPEND:
            items += [v for v in given if v not in items]
        else:
            items = [v for v in items if v not in given]
        configs[name] = ",".join(items)
    else:
        raise ConfigError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {kind}")
