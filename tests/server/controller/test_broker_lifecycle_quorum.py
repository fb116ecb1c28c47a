"""The broker lifecycle task against a real 3-voter controller quorum, over the controller channel:
registered, caught up and unfenced; the active controller killed, the heartbeats go to the new one
and the broker stays unfenced past several session timeouts, while a broker that stopped
heartbeating is fenced by the new controller (the negative control); then a controlled shutdown
the controller approves."""

from __future__ import annotations

import random
import uuid

import trio

from kafkalike.controller.broker_lifecycle import BrokerState, Listener
from kafkalike.server.broker_lifecycle_task import BrokerLifecycleTask, lifecycle_from_config
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_channel import ControllerChannel
from kafkalike.server.controller_host import ControllerHost
from kafkalike.server.quorum.driver import QuorumDriver
from kafkalike.testing.controller_quorum import ControllerQuorum
from kafkalike.testing.quorum import CLUSTER_ID

DEADLINE_S = 60
SESSION_MS, HEARTBEAT_MS = 2000, 200
TIMINGS = {"broker.session.timeout.ms": str(SESSION_MS), "broker.heartbeat.interval.ms": str(HEARTBEAT_MS)}


def _task(
    quorum: ControllerQuorum, source: QuorumDriver, broker_id: int
) -> tuple[BrokerLifecycleTask, ControllerChannel]:
    endpoints = {n: ("127.0.0.1", quorum.port(n)) for n in quorum.voter_ids}
    channel = ControllerChannel(broker_id, source, endpoints)
    config = BrokerConfig({"node.id": str(broker_id), **TIMINGS})
    lifecycle = lifecycle_from_config(
        config,
        cluster_id=CLUSTER_ID,
        listeners=[Listener("PLAINTEXT", "127.0.0.1", 19000 + broker_id, 0)],
        log_dirs=[uuid.UUID(int=(broker_id << 64) | 1)],
        rng=random.Random(broker_id),
    )
    # The offset of the last record this node applied: what the voter it follows has delivered.
    return BrokerLifecycleTask(lifecycle, channel, channel.clock, lambda: source.delivered_offset - 1), channel


async def _until_fenced(quorum: ControllerQuorum, host: ControllerHost, broker_id: int, fenced: bool) -> None:
    await quorum.wait(lambda: broker_id in host.image.brokers and host.image.brokers[broker_id].fenced is fenced)


async def test_heartbeats_follow_the_new_active_controller() -> None:
    quorum = ControllerQuorum(3, config=BrokerConfig(TIMINGS))
    async with quorum.running(deadline_s=DEADLINE_S) as nursery:
        first = await quorum.active_host()
        old_leader = (await quorum.wait_for_leader()).node_id
        survivor = next(n for n in quorum.voter_ids if n != old_leader)
        source = quorum.driver(survivor)  # as a combined node's own driver: it outlives the leader
        kept, kept_channel = _task(quorum, source, 100)
        dropped, dropped_channel = _task(quorum, source, 101)
        dropped_scope = trio.CancelScope()

        async def run_dropped() -> None:
            with dropped_scope:
                await dropped.run()

        await nursery.start(kept.run)
        nursery.start_soon(run_dropped)
        await kept.startup()
        await dropped.startup()
        assert kept.state == BrokerState.RUNNING
        await _until_fenced(quorum, first, 100, False)
        epoch = first.image.brokers[100].epoch
        assert epoch == kept.broker_epoch
        dropped_scope.cancel()  # broker 101 stops heartbeating (its process is gone)
        await dropped_channel.aclose()

        await quorum.stop(old_leader)
        survivors = set(quorum.voter_ids) - {old_leader}
        new = await quorum.active_host(among=survivors)
        sent_before = kept_channel.sent_over_network
        await _until_fenced(quorum, new, 101, True)  # the new controller's session clock ran out for 101
        # Three session timeouts after the failover broker 100 is still unfenced, at the same
        # epoch: its heartbeats reached the new controller.
        await trio.sleep(3 * SESSION_MS / 1000)
        assert new.image.brokers[100].fenced is False
        assert new.image.brokers[100].epoch == epoch
        assert kept_channel.sent_over_network - sent_before >= 3 * SESSION_MS // HEARTBEAT_MS // 2
        assert kept.state == BrokerState.RUNNING
        assert await kept.controlled_shutdown(timeout_s=DEADLINE_S)  # the controller let it go
        await kept_channel.aclose()
