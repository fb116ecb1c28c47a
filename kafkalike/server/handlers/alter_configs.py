"""AlterConfigs (key 33): v0-2. Replaces a resource's whole set of dynamic configs.

Topic configs, per-broker and cluster-default ("" name) broker configs are stored as records
in the metadata log and take effect at once. validate_only checks without changing anything.
Incremental changes are IncrementalAlterConfigs' job (key 44), which shares the logic here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.configs import BROKER_CONFIGS, is_topic_config, validate_value
from kafkalike.controller.metadata import BROKER_RESOURCE, TOPIC_RESOURCE, ControllerError
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


class ConfigError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def current_configs(ctx: RequestContext, resource_type: int, resource_name: str) -> dict[str, str]:
    """The resource's dynamic configs as stored now; raises ConfigError for unknown resources."""
    image = ctx.metadata.image
    if resource_type == TOPIC_RESOURCE:
        topic = image.topics.get(resource_name)
        if topic is None:
            raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource_name} does not exist")
        return dict(topic.configs)
    if resource_type == BROKER_RESOURCE:
        if resource_name not in ("", str(ctx.metadata.node_id)):
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {resource_name}")
        return dict(image.broker_configs.get(resource_name, {}))
    raise ConfigError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


async def apply_new_configs(
    ctx: RequestContext, resource_type: int, resource_name: str, new: dict[str, str], validate_only: bool
) -> None:
    """Validate ``new`` (the full desired dynamic set) and store the difference."""
    on_topic = resource_type == TOPIC_RESOURCE
    # Kafka refuses a bad broker value as an invalid request, a bad topic value as an invalid config.
    invalid = ErrorCode.INVALID_CONFIG if on_topic else ErrorCode.INVALID_REQUEST
    for name, value in new.items():
        if not (is_topic_config(name) if on_topic else name in BROKER_CONFIGS):
            raise ConfigError(
                ErrorCode.INVALID_CONFIG, f"Unknown {'topic' if on_topic else 'broker'} config name: {name}"
            )
        if resource_type == BROKER_RESOURCE and not BROKER_CONFIGS[name].dynamic:
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({name})")
        problem = validate_value(name, value)
        if problem is not None:
            raise ConfigError(invalid, problem)
    # Nothing is stored that a log could not run with (it would fail here and at every start).
    if resource_type == TOPIC_RESOURCE:
        problem = ctx.controller.log_config_problem(new)
    else:
        problem = ctx.controller.broker_config_problem(resource_name, new)
    if problem is not None:
        raise ConfigError(invalid, problem)
    if validate_only:
        return
    old = current_configs(ctx, resource_type, resource_name)
    changes: dict[str, str | None] = {k: v for k, v in new.items() if old.get(k) != v}
    changes.update({k: None for k in old if k not in new})
    if changes:
        try:
            await ctx.controller.set_configs(resource_type, resource_name, changes)
        except ControllerError as exc:  # the metadata log's disk refused the records: nothing changed
            raise ConfigError(exc.code, exc.message or "the configs could not be written") from None
        ctx.controller.apply_configs()


@handles(33, 0, 2)
async def handle_alter_configs(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    if ctx.controller.forwarding:  # a node of a cluster: the active controller decides
        return await ctx.controller.forward(33, ctx.version, request)  # type: ignore[no-any-return]
    responses = []
    for resource in request.resources:
        entry: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        try:
            current_configs(ctx, resource.resource_type, resource.resource_name)
            new = {c.name: c.value for c in resource.configs}
            if any(v is None for v in new.values()):
                raise ConfigError(ErrorCode.INVALID_REQUEST, "Null value not supported for AlterConfigs")
            await apply_new_configs(ctx, resource.resource_type, resource.resource_name, new, request.validate_only)
        except ConfigError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}
