"""A coordinator shard loaded in the background reads and decodes its log on worker threads (Kafka
loads on a thread of its own): over a large ``__consumer_offsets`` partition no task step holds
the event loop long (``LongSteps``) and no file is touched on it (``LoopBlockingCalls``), and the
shard ends with what the log says, transactional offsets included. The negative control: the
same log loaded at once on the loop trips the checker."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from kafkalike.group import OFFSETS_TOPIC
from kafkalike.group.offsets import OffsetAndMetadata
from kafkalike.group.records import offset_commit_record
from kafkalike.log import AppendOrigin
from kafkalike.log.storage import DeferredSyncs
from kafkalike.protocol.records import Record, build_batch, build_end_txn_marker
from kafkalike.testing.loop_blocking import LongSteps, LoopBlockingCalls
from tests.server.conftest import RunningBroker
from tests.server.test_broker_basics import _create
from tests.server.test_coordinator_off_loop import OFFSET_COMMIT, OFFSET_FETCH, commit_body, committed_error, serving
from tests.server.test_coordinator_shards import leader_epoch

GROUP = "big"
PARTITIONS_COMMITTED = 50  # (topic "events", partition p) for p below this
BATCHES, PER_BATCH = 80, 250  # 20,000 plain OffsetCommit records
# Far above one step of the background load (a few milliseconds), far below the whole log
# decoded in one go (seconds): a step this long is the loop held, not a busy machine.
LONG_STEP_S = 0.5
AT_ONCE_STEP_S = LONG_STEP_S / 5
TXN_PID = 4242


def _plain_batches() -> list[bytes]:
    """Every batch commits each partition once more; the last batch's offsets are what must be read back."""
    batches = []
    for b in range(BATCHES):
        records = []
        for i in range(PER_BATCH):
            n = b * PER_BATCH + i
            offset = OffsetAndMetadata(n, -1, "", 1_700_000_000_000)
            key, value = offset_commit_record(GROUP, "events", n % PARTITIONS_COMMITTED, offset)
            records.append(Record(key=key, value=value))
        batches.append(build_batch(records, base_timestamp=1_700_000_000_000))
    return batches


def _transactional_batches() -> list[bytes]:
    """Partition 1000 committed by a transaction that commits; 1001 by one still open."""
    out = []
    for partition, ends in ((1000, True), (1001, False)):
        pid = TXN_PID + partition
        key, value = offset_commit_record(GROUP, "events", partition, OffsetAndMetadata(77, -1, "", 0))
        out.append(
            build_batch(
                [Record(key=key, value=value)],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                transactional=True,
                base_timestamp=0,
            )
        )
        if ends:
            out.append(
                build_end_txn_marker(commit=True, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=0)
            )
    return out


async def _large_partition(running: RunningBroker) -> int:
    """``__consumer_offsets`` made, and the group's partition filled; its index."""
    client = await running.client()
    assert (await _create(client, "events")).error_code == 0
    assert committed_error(await client.request(OFFSET_COMMIT, 8, commit_body(GROUP, 0))) == 0
    groups = running.broker.groups
    partition = groups.partition_for(GROUP)
    state = running.broker.replicas[(OFFSETS_TOPIC, partition)]
    now = running.broker.clock.wall_ms()
    first = state.log.log_end_offset
    for batch in _plain_batches() + _transactional_batches():
        state.log.append(bytearray(batch), leader_epoch=state.leader_epoch, now_ms=now, origin=AppendOrigin.COORDINATOR)
    # Made durable the coordinator's way, so that reads (OffsetFetch) do not wait for it.
    groups.syncs.tracker.appended(partition, state.log, first, DeferredSyncs())
    await groups.runtime.all_committed()
    return partition


async def _committed(running: RunningBroker, partitions: list[int]) -> dict[int, int]:
    client = await running.client()
    body = {"groups": [{"group_id": GROUP, "topics": [{"name": "events", "partition_indexes": partitions}]}]}
    answer = await client.request(OFFSET_FETCH, 8, {**body, "require_stable": False})
    return {p.partition_index: p.committed_offset for p in answer.groups[0].topics[0].partitions}


def _expected() -> dict[int, int]:
    last = BATCHES * PER_BATCH - 1
    plain = {
        p: max(n for n in range(last - PARTITIONS_COMMITTED, last + 1) if n % PARTITIONS_COMMITTED == p)
        for p in range(PARTITIONS_COMMITTED)
    }
    return {**plain, 1000: 77, 1001: -1}  # the open transaction's offset stays pending


async def test_a_large_offsets_partition_loads_in_the_background_without_holding_the_loop(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        partition = await _large_partition(running)
        runtime = running.broker.groups.runtime
        epoch = leader_epoch(running.broker.groups, GROUP)
        loaded = runtime.loaded
        with LoopBlockingCalls(roots=[tmp_path]) as calls, LongSteps(LONG_STEP_S) as steps:
            assert runtime.schedule_load(partition, epoch + 1)
            with trio.fail_after(120):
                await loaded.wait()
        steps.check()
        calls.check()
        assert leader_epoch(running.broker.groups, GROUP) == epoch + 1
        assert await _committed(running, [*range(PARTITIONS_COMMITTED), 1000, 1001]) == _expected()
        shard = runtime.shards.active(partition)
        assert shard.txn_offsets.by_producer.keys() == {TXN_PID + 1001}


async def test_the_same_partition_loaded_at_once_on_the_loop_trips_the_checker(tmp_path: Path) -> None:
    async with serving(tmp_path) as running:
        partition = await _large_partition(running)
        runtime = running.broker.groups.runtime
        epoch = leader_epoch(running.broker.groups, GROUP)
        # A fifth of the bound the background load keeps: 20,000 records replayed in one step take
        # longer than that on any machine, but not always longer than the bound itself (a quiet
        # machine loads them in about 0.35 s).
        with LongSteps(AT_ONCE_STEP_S) as steps:
            runtime.unload(partition)
            assert runtime.load(partition, epoch + 1)  # the at-once path: the whole log in one step
            await trio.lowlevel.checkpoint()
        assert steps.steps and steps.longest_s > AT_ONCE_STEP_S
        assert await _committed(running, [*range(PARTITIONS_COMMITTED), 1000, 1001]) == _expected()


def test_the_long_step_checker_names_the_step(tmp_path: Path) -> None:
    async def main() -> LongSteps:
        with LongSteps(0.05) as steps:
            os.sched_yield()
            await trio.lowlevel.checkpoint()
            _busy(0.1)  # held on the loop
            await trio.lowlevel.checkpoint()
        return steps

    steps = trio.run(main)
    assert len(steps.steps) == 1 and steps.steps[0].seconds >= 0.1 and "main" in steps.steps[0].task
    try:
        steps.check()
    except AssertionError as exc:
        assert "held the event loop" in str(exc)
    else:
        raise AssertionError("check() passed over a long step")


def _busy(seconds: float) -> None:
    import time

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
