"""The quorum's disk work never runs on the event loop: log opens, appends with their rolls,
truncations, snapshots, fsyncs and quorum-state writes of three file-backed members, checked by
the loop-blocking recorder (with a negative control: steps run on the loop are caught)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkalike.server.quorum.driver import NotControllerError, QuorumDriver, _Step
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


async def test_a_shielded_append_ends_when_its_driver_stops(tmp_path: Path) -> None:
    """A node shutting down (a listener that failed to bind at start-up) cancels its driver
    while the controller's first append waits, shielded, to be seen through: the append is
    refused instead of waiting for ever (the node then never exited)."""
    quorum = InProcessQuorum(1, tmp_path)
    async with quorum.running(deadline_s=DEADLINE_S) as nursery:
        leader = await quorum.wait_for_leader()
        outcomes: list[BaseException | int] = []
        finished = trio.Event()

        async def append_shielded() -> None:
            # Shielded as the controller's append is, with a deadline of its own: a hang fails the test.
            with trio.CancelScope(shield=True), trio.move_on_after(DEADLINE_S):
                try:
                    outcomes.append(await leader.append([b"late"]))
                except NotControllerError as exc:
                    outcomes.append(exc)
            finished.set()

        nursery.start_soon(append_shielded)
        await quorum.stop(leader.node_id)  # before the driver's task carried the append out
        await finished.wait()
        assert outcomes and isinstance(outcomes[0], NotControllerError), outcomes
        with pytest.raises(NotControllerError):
            await leader.append([b"after"])
