"""AlterConfigs (key 33): v0-2, forwarded to the active controller. Replaces a resource's whole
set of dynamic configs.

Topic configs, per-broker and cluster-default ("" name) broker configs are config records in the
metadata log (controller/configuration_control.py checks them) and take effect once this
broker's published image has them. Incremental changes are IncrementalAlterConfigs' (key 44).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.config_forwarding import forward_alter_configs
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(33, 0, 2)
async def handle_alter_configs(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return await forward_alter_configs(ctx, 33, request)
