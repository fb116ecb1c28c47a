"""The replica manager's file work, run on worker threads: opening new partitions' logs,
removing deleted partitions' directories, and applying a metadata delta's local changes.

The replica layer hands out the pieces (``plan_new`` / ``open_logs`` / ``adopt``,
``plan_changes`` / ``complete_changes``); this runs the file work off the event loop, a few
threads at once, and gives back what a failure left half made.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from kafkalike.controller.delta import LocalReplicaChanges
from kafkalike.log import LogConfig
from kafkalike.replica import AppliedChanges, NewReplica, ReplicaManager, delete_directories, open_logs

log = logging.getLogger("kafkalike.replica")
# New partitions are made on a worker thread this many at a time, so an abandoned request (the
# broker shutting down) stops after the current group.
PARTITIONS_PER_THREAD_CALL = 64
PARTITION_THREADS = 4


async def open_logs_off_loop(new: list[NewReplica], now_ms: int, *, memory: bool = False) -> None:
    """Every planned partition's log made, on up to PARTITION_THREADS worker threads (the time
    goes to fsyncs, which overlap well); the first error raised once every thread stopped (the
    caller gives the places back with ``undo_new``). ``memory``: logs in memory, made here (an
    in-memory broker never waits for a thread, so a mock clock never jumps past one)."""
    if memory:
        if new and (error := open_logs(new, now_ms)) is not None:
            raise error
        return
    errors: list[Exception] = []

    async def lane(lane_jobs: list[NewReplica]) -> None:
        for start in range(0, len(lane_jobs), PARTITIONS_PER_THREAD_CALL):
            if errors:
                return
            error = await trio.to_thread.run_sync(
                open_logs, lane_jobs[start : start + PARTITIONS_PER_THREAD_CALL], now_ms
            )
            if error is not None:
                errors.append(error)
                return

    async with trio.open_nursery() as nursery:
        for first in range(PARTITION_THREADS):
            nursery.start_soon(lane, new[first::PARTITION_THREADS])
    if errors:
        raise errors[0]


async def undo_new(replicas: ReplicaManager, new: list[NewReplica], cause: BaseException) -> None:
    """Give back the places of partitions not adopted, their logs released; their directories
    removed on a worker thread unless ``cause`` is a cancellation (then start-up removes what
    no topic names)."""
    for replica in new:
        replicas.unplan(replica)
    if not isinstance(cause, trio.Cancelled) and not replicas.logs.memory:
        log.error("creating %d partition(s) failed, undone: %s", len(new), cause)
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(delete_directories, [replica.planned.path for replica in new])


async def apply_replica_changes(
    replicas: ReplicaManager, changes: LocalReplicaChanges, config_for: Callable[[str], LogConfig], now_ms: int
) -> AppliedChanges:
    """A metadata delta's ``local_changes`` applied: deleted partitions detached first, new
    partitions' logs made off the loop, then every role taken on the loop, the deleted
    directories removed off the loop. A failed open takes no new partition and no role."""
    plan = replicas.plan_changes(changes, config_for)
    memory = replicas.logs.memory
    try:
        if plan.applied.removed_paths and not memory:  # before a topic made again under the same name opens
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(plan.rename_removed)
        await open_logs_off_loop(plan.new, now_ms, memory=memory)
    except BaseException as exc:
        await undo_new(replicas, plan.new, exc)
        if plan.applied.removed_paths and not memory:  # the deletes stand: they were committed
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(delete_directories, plan.applied.removed_paths)
        raise
    applied = replicas.complete_changes(plan, now_ms)
    if applied.removed_paths and not memory:
        await trio.to_thread.run_sync(delete_directories, applied.removed_paths)
    return applied
