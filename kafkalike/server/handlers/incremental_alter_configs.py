"""IncrementalAlterConfigs (key 44): v0-1, forwarded to the active controller: SET, DELETE,
APPEND and SUBTRACT on single configs (controller/configuration_control.py applies them, as
Kafka's ConfigurationControlManager does)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.config_forwarding import forward_alter_configs
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(44, 0, 1)
async def handle_incremental_alter_configs(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await forward_alter_configs(ctx, 44, request)
