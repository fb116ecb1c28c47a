"""DeleteRecords (key 21): v0-2. Moves a partition's log start offset forward.

Offset -1 means "up to the high watermark". An offset past the high watermark is
OFFSET_OUT_OF_RANGE. Reads below the new start then get OFFSET_OUT_OF_RANGE; whole segments
below it are deleted. As Kafka's DelayedDeleteRecords, the answer waits (at most timeout_ms)
until the low watermark, the smallest log start over the leader and its alive followers (which
learn the new start from their next fetch), reached the offset: then NONE with it, after the
timeout REQUEST_TIMED_OUT with the low watermark the delete left, and NOT_LEADER_OR_FOLLOWER
(low watermark -1) if the leadership moved meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import trio

from kafkalike.log.storage import DeferredSyncs
from kafkalike.log.storage_errors import reporter
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.replica import Partition, PartitionError
from kafkalike.server.context import RequestContext
from kafkalike.server.registry import AnswerLater, handles
from kafkalike.server.routing import partition_or_error

log = logging.getLogger("kafkalike.delete_records")


@handles(21, 0, 2)
async def handle_delete_records(ctx: RequestContext, request: Message) -> Mapping[str, Any] | AnswerLater:
    topics = []
    files = DeferredSyncs()
    waiting: list[tuple[dict[str, Any], Partition, int]] = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition_index, "low_watermark": -1, "error_code": 0}
            partition = partition_or_error(ctx, topic.name, part.partition_index)
            if isinstance(partition, ErrorCode):
                entry["error_code"] = partition
            else:
                requested = partition.high_watermark if part.offset == -1 else part.offset
                try:
                    entry["low_watermark"] = partition.delete_records_on_leader(
                        part.offset, now_ms=ctx.clock.wall_ms(), syncs=files
                    )
                except PartitionError as exc:
                    entry["error_code"] = exc.code
                else:
                    if entry["low_watermark"] < requested:
                        waiting.append((entry, partition, requested))
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    if files:
        try:  # the segments' renames to .deleted, on a worker thread
            await trio.to_thread.run_sync(files.run)
        except OSError as exc:  # the records are deleted (the log start moved); the files go at the next start
            reporter.report("segment deletion in", str(ctx.log_dirs.path), exc, ctx.clock.wall_ms())
    await ctx.log_dirs.checkpoint_offsets()  # the new log starts are on disk before the answer, written off the loop
    answer = {"throttle_time_ms": 0, "topics": topics}
    if not waiting:
        return answer
    deadline_s = ctx.clock.monotonic_s() + max(request.timeout_ms, 0) / 1000

    async def followed() -> Mapping[str, Any]:
        await _until_followed(ctx, waiting, deadline_s)
        return answer

    return AnswerLater(followed)


async def _until_followed(
    ctx: RequestContext, waiting: list[tuple[dict[str, Any], Partition, int]], deadline_s: float
) -> None:
    """Kafka's DelayedDeleteRecords: until every partition's low watermark reached its offset or
    its leadership moved, at most until ``deadline_s``."""

    def settled(partition: Partition, requested: int) -> bool:
        return not partition.is_leader or partition.low_watermark >= requested

    await ctx.waiters.wait_until(
        [p.tp for _, p, _ in waiting], lambda: all(settled(p, r) for _, p, r in waiting), deadline_s
    )
    for entry, partition, requested in waiting:
        if not partition.is_leader:
            entry["error_code"], entry["low_watermark"] = ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        elif partition.low_watermark >= requested:
            entry["low_watermark"] = partition.low_watermark
        else:
            entry["error_code"] = ErrorCode.REQUEST_TIMED_OUT
            log.info("DeleteRecords on %s-%d timed out at low watermark %d", *partition.tp, entry["low_watermark"])
