"""DeleteRecords (key 21): v0-2. Moves a partition's log start offset forward.

Offset -1 means "up to the high watermark". An offset past the high watermark is
OFFSET_OUT_OF_RANGE. Reads below the new start then get OFFSET_OUT_OF_RANGE; whole segments
below it are deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from kafkalike.log.storage import DeferredSyncs
from kafkalike.log.storage_errors import reporter
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.replica import PartitionError
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import handles
from kafkalike.server.routing import partition_or_error


@handles(21, 0, 2)
async def handle_delete_records(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    topics = []
    files = DeferredSyncs()
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition_index, "low_watermark": -1, "error_code": 0}
            partition = partition_or_error(ctx, topic.name, part.partition_index)
            if isinstance(partition, ErrorCode):
                entry["error_code"] = partition
            else:
                try:
                    entry["low_watermark"] = partition.delete_records_on_leader(
                        part.offset, now_ms=ctx.clock.wall_ms(), syncs=files
                    )
                except PartitionError as exc:
                    entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    if files:
        try:  # the segments' renames to .deleted, on a worker thread
            await trio.to_thread.run_sync(files.run)
        except OSError as exc:  # the records are deleted (the log start moved); the files go at the next start
            reporter.report("segment deletion in", str(ctx.log_dirs.path), exc, ctx.clock.wall_ms())
    await ctx.log_dirs.checkpoint_offsets()  # the new log starts are on disk before the answer, written off the loop
    return {"throttle_time_ms": 0, "topics": topics}
