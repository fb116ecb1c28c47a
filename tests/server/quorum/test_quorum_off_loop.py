"""The quorum's disk work never runs on the event loop: log opens, appends with their rolls,
truncations, snapshots, fsyncs and quorum-state writes of three file-backed members, checked by
the loop-blocking recorder (with a negative control: steps run on the loop are caught)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalike.server.quorum.driver import QuorumDriver, _Step
from kafkalike.testing.loop_blocking import LoopBlockingCalls
from kafkalike.testing.quorum import InProcessQuorum

DEADLINE_S = 20


async def elect_commit_fail_over_snapshot_catch_up(tmp_path: Path) -> None:
    quorum = InProcessQuorum(3, tmp_path)
    async with quorum.running(deadline_s=DEADLINE_S) as nursery:
        leader = await quorum.wait_for_leader()
        lagging = next(i for i in quorum.node_ids if i != leader.node_id)
        await quorum.stop(lagging)
        last = await leader.append([b"a", b"b"])
        await leader.wait_committed(last)
        await leader.snapshot(last + 1, b"state")
        await quorum.start(nursery, lagging)
        await quorum.wait(lambda: len(quorum.recorders[lagging].snapshots) == 1)
        await quorum.stop(leader.node_id)
        new = await quorum.wait_for_leader()
        last = await new.append([b"c"])
        await new.wait_committed(last)


async def test_no_quorum_disk_call_runs_on_the_event_loop(tmp_path: Path) -> None:
    with LoopBlockingCalls(roots=[tmp_path]) as calls:
        await elect_commit_fail_over_snapshot_catch_up(tmp_path)
    calls.check()


async def test_negative_control_steps_on_the_loop_are_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def step_on_the_loop(self: QuorumDriver, events: list) -> _Step:  # type: ignore[type-arg]
        return self._step(events, self.clock.wall_ms())

    monkeypatch.setattr(QuorumDriver, "_run_step", step_on_the_loop)
    with LoopBlockingCalls(roots=[tmp_path]) as calls:
        await elect_commit_fail_over_snapshot_catch_up(tmp_path)
    found = calls.unexpected()
    assert any("file_log" in frame for call in found for frame in call.stack), found
