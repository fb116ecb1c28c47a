"""DescribeLogDirs (key 35): v1-4. Each log directory, its partitions and their sizes.

v3 adds a top-level error code; v4 adds the directory's total and usable bytes (-1, unknown,
for an ephemeral broker). A null topic list means every topic.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Any

from kafkalike.protocol.codec import Message
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles


@handles(35, 1, 4)
async def handle_describe_log_dirs(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    wanted: dict[str, set[int] | None] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (name, index), partition in sorted(ctx.replicas.items()):
        if wanted is not None and (name not in wanted or index not in (wanted[name] or ())):
            continue
        by_topic.setdefault(name, []).append(
            {
                "partition_index": index,
                "partition_size": partition.size_in_bytes,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    # An ephemeral broker's logs live in memory: its directory need not exist, and -1 is the
    # schema's "unknown" for the volume's size.
    total_bytes, usable_bytes = -1, -1
    if not ctx.log_dirs.in_memory:
        usage = shutil.disk_usage(ctx.log_dirs.path)
        total_bytes, usable_bytes = usage.total, usage.free
    result = {
        "error_code": 0,
        "log_dir": str(ctx.log_dirs.path.resolve()),
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        "total_bytes": total_bytes,
        "usable_bytes": usable_bytes,
    }
    return {"throttle_time_ms": 0, "error_code": 0, "results": [result]}
