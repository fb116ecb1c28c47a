"""Broker sessions at the controller host, on trio's MockClock (autojump): a broker that stops
heartbeating is fenced once broker.session.timeout.ms has passed since its last heartbeat, and
one that keeps heartbeating is not. Requests go through ``ControllerHost.request`` (the wire codec
both ways, in process), so that no socket wait lets the mock clock jump."""

from __future__ import annotations

import uuid

import trio
from trio.testing import MockClock

from kafkalike.controller.cluster_control import DEFAULT_SESSION_TIMEOUT_MS
from kafkalike.controller.image import NO_LEADER
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.controller_host import ControllerHost
from kafkalike.testing.clock import TrioClock
from kafkalike.testing.controller_quorum import ControllerQuorum
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.quorum import CLUSTER_ID

HEARTBEAT_INTERVAL_S = 2
MOCK_DEADLINE_S = 120  # on the mock clock
CHECK_INTERVAL_MS = DEFAULT_SESSION_TIMEOUT_MS // 8  # Kafka's fence check period


async def register_unfenced(host: ControllerHost, broker_id: int) -> int:
    registered = await host.request(62, 4, registration(broker_id, CLUSTER_ID))
    assert registered.error_code == 0
    beat = await host.request(63, 1, heartbeat(broker_id, registered.broker_epoch, 2**40))
    assert (beat.error_code, beat.is_fenced) == (0, False)
    return int(registered.broker_epoch)


async def test_a_broker_that_stops_heartbeating_is_fenced_after_the_session_timeout(
    autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    quorum = ControllerQuorum(1, clock=trio_clock)
    async with quorum.running(deadline_s=MOCK_DEADLINE_S) as nursery:
        host = await quorum.active_host()
        epochs = {b: await register_unfenced(host, b) for b in (1, 2)}
        topic = {"name": "t", "num_partitions": 4, "replication_factor": 1, "assignments": [], "configs": []}
        created = await host.request(19, 7, {"topics": [topic], "timeout_ms": 5000})
        assert created.topics[0].error_code == 0
        last_beat_ms: dict[int, int] = {}

        async def keep_beating(broker_id: int, beats: int) -> None:
            for _ in range(beats):
                answer = await host.request(63, 1, heartbeat(broker_id, epochs[broker_id], 2**40))
                assert answer.error_code == 0
                last_beat_ms[broker_id] = trio_clock.wall_ms()
                await trio.sleep(HEARTBEAT_INTERVAL_S)

        nursery.start_soon(keep_beating, 1, 30)
        await keep_beating(2, 2)  # then broker 2 goes silent
        await quorum.wait(lambda: host.image.brokers[2].fenced)
        fenced_after_ms = trio_clock.wall_ms() - last_beat_ms[2]
        assert DEFAULT_SESSION_TIMEOUT_MS <= fenced_after_ms <= DEFAULT_SESSION_TIMEOUT_MS + CHECK_INTERVAL_MS + 100
        assert not host.image.brokers[1].fenced
        partitions = host.image.topic("t").partitions.values()  # type: ignore[union-attr]
        assert {p.leader for p in partitions if p.replicas == (2,)} == {NO_LEADER}
        assert {p.leader for p in partitions if p.replicas == (1,)} == {1}
        # Restarted (a new incarnation, the same log directory) and caught up, it is
        # unfenced and leads its partitions again, each leader change bumping the epoch.
        restarted = registration(2, CLUSTER_ID, incarnation=uuid.UUID(int=0x2222), previous_broker_epoch=epochs[2])
        again = await host.request(62, 4, restarted)
        assert again.error_code == 0 and again.broker_epoch > epochs[2]
        back = await host.request(63, 1, heartbeat(2, again.broker_epoch, 2**40))
        assert (back.error_code, back.is_fenced) == (0, False)
        assert not host.image.brokers[2].fenced
        partitions = host.image.topic("t").partitions.values()  # type: ignore[union-attr]
        assert {(p.leader, p.leader_epoch) for p in partitions if p.replicas == (2,)} == {(2, 2)}


async def test_a_heartbeat_kept_waiting_behind_other_writes_times_out_but_keeps_the_session(
    autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    quorum = ControllerQuorum(1, clock=trio_clock)
    async with quorum.running(deadline_s=MOCK_DEADLINE_S) as nursery:
        host = await quorum.active_host()
        epochs = {b: await register_unfenced(host, b) for b in (1, 2)}
        answers: list[int] = []
        # Writes stall for longer than a session (as behind a slow disk): broker 1 keeps
        # heartbeating, broker 2 says nothing.
        release = trio.Event()

        async def stall(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            async with host._write_lock:
                task_status.started()
                await release.wait()

        await nursery.start(stall)
        for _ in range(6):
            answer = await host.request(63, 1, heartbeat(1, epochs[1], 2**40))
            answers.append(answer.error_code)
            await trio.sleep(HEARTBEAT_INTERVAL_S - 1)  # the answer took half an interval
        assert trio_clock.wall_ms() - contact_ms(host, 2, epochs[2]) > DEFAULT_SESSION_TIMEOUT_MS
        release.set()
        assert set(answers) == {ErrorCode.REQUEST_TIMED_OUT}
        await quorum.wait(lambda: host.image.brokers[2].fenced)
        assert not host.image.brokers[1].fenced  # its timed-out heartbeats still counted


def contact_ms(host: ControllerHost, broker_id: int, epoch: int) -> int:
    assert host.cluster is not None and host.cluster.heartbeats is not None
    contact = host.cluster.heartbeats.contact_ms(broker_id, epoch)
    assert contact is not None
    return contact
