"""ApiVersions (key 18): v0-4. The broker's API version table, derived from the registered handlers.

v3+ carries the client's software name/version (ignored) and tagged supported/finalized
features; no feature flags are advertised because none (transaction.version, group.version)
are implemented at their newer levels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(18, 0, 4)
async def handle_api_versions(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    return {"error_code": 0, "api_keys": ctx.metadata.api_versions(), "throttle_time_ms": 0}
