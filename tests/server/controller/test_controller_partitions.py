"""AlterPartition and ElectLeaders at the controller host, through the wire codec, over
replicated partitions; the periodic unclean election on trio's MockClock (autojump): it runs
unclean.leader.election.interval.ms after a write that leaves a partition without a leader."""

from __future__ import annotations

from typing import Any

from trio.testing import MockClock

from kafkalike.controller.image import NO_LEADER, PartitionRegistration
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_host import ControllerHost
from kafkalike.testing.clock import TrioClock
from kafkalike.testing.controller_quorum import ControllerQuorum
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.quorum import CLUSTER_ID

DEADLINE_S = 30
MOCK_DEADLINE_S = 120  # on the mock clock
CREATE_TOPICS, ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS, ALTER_PARTITION = 19, 43, 44, 56
UNCLEAN_INTERVAL_MS = 1000


async def start_brokers(host: ControllerHost, *broker_ids: int) -> dict[int, int]:
    epochs = {}
    for b in broker_ids:
        registered = await host.request(62, 4, registration(b, CLUSTER_ID))
        assert registered.error_code == 0
        beat = await host.request(63, 1, heartbeat(b, registered.broker_epoch, 2**40))
        assert (beat.error_code, beat.is_fenced) == (0, False)
        epochs[b] = int(registered.broker_epoch)
    return epochs


async def create_replicated(host: ControllerHost, name: str, configs: dict[str, str] | None = None) -> Any:
    topic = {
        "name": name,
        "num_partitions": 1,
        "replication_factor": 3,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }
    created = await host.request(CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 5000})
    assert (created.topics[0].error_code, created.topics[0].replication_factor) == (0, 3)
    return created.topics[0].topic_id


def partition(host: ControllerHost, name: str) -> PartitionRegistration:
    topic = host.image.topic(name)
    assert topic is not None
    return topic.partitions[0]


async def alter(
    host: ControllerHost, epochs: dict[int, int], topic_id: Any, p: PartitionRegistration, isr: list[int]
) -> Any:
    body = {
        "broker_id": p.leader,
        "broker_epoch": epochs[p.leader],
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_epoch": p.leader_epoch,
                        "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": epochs[b]} for b in isr],
                        "leader_recovery_state": 0,
                        "partition_epoch": p.partition_epoch,
                    }
                ],
            }
        ],
    }
    return await host.request(ALTER_PARTITION, 3, body)


async def test_alter_partition_and_a_preferred_election_over_the_wire() -> None:
    quorum = ControllerQuorum(1)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        epochs = await start_brokers(host, 1, 2, 3)
        topic_id = await create_replicated(host, "r")
        before = partition(host, "r")
        assert sorted(before.replicas) == [1, 2, 3] and before.isr == before.replicas
        preferred, follower = before.replicas[0], before.replicas[2]
        kept = [b for b in before.replicas if b != follower]
        response = await alter(host, epochs, topic_id, before, kept)
        assert response.error_code == 0
        [answer] = response.topics[0].partitions
        assert (answer.error_code, answer.leader_id, list(answer.isr), answer.partition_epoch) == (
            0,
            preferred,
            kept,
            1,
        )
        assert partition(host, "r").isr == tuple(kept)  # answered once committed
        # The preferred leader fenced: the next ISR member leads; back and in the ISR again, an
        # election of the preferred replica gives it the leadership back.
        await host.request(63, 1, heartbeat(preferred, epochs[preferred], 2**40, want_fence=True))
        moved = partition(host, "r")
        assert moved.leader == kept[1] and moved.leader_epoch == 1
        await host.request(63, 1, heartbeat(preferred, epochs[preferred], 2**40))
        assert (await alter(host, epochs, topic_id, moved, [kept[1], preferred])).error_code == 0
        elected = await host.request(
            ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": [{"topic": "r", "partitions": [0]}]}
        )
        [result] = elected.replica_election_results
        assert (result.topic, [(r.partition_id, r.error_code) for r in result.partition_result]) == ("r", [(0, 0)])
        assert partition(host, "r").leader == preferred
        served = host.api_versions()  # what its ApiVersions lists
        assert served[ALTER_PARTITION] == (2, 3) and served[ELECT_LEADERS] == (
            0,
            2,
        )  # Kafka 4.0 removed AlterPartition v0-1


async def test_a_stale_broker_epoch_is_refused_at_the_top() -> None:
    quorum = ControllerQuorum(1)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        epochs = await start_brokers(host, 1, 2, 3)
        topic_id = await create_replicated(host, "r")
        p = partition(host, "r")
        stale = {**epochs, p.leader: epochs[p.leader] - 1}
        response = await alter(host, stale, topic_id, p, list(p.isr))
        assert (response.error_code, list(response.topics)) == (ErrorCode.STALE_BROKER_EPOCH, [])


async def test_a_follower_refuses_both_apis_with_not_controller() -> None:
    quorum = ControllerQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S):
        active = await quorum.active_host()
        follower = next(h for n, h in quorum.hosts.items() if n != active.node_id)
        asked = {"election_type": 1, "topic_partitions": [{"topic": "r", "partitions": [0, 1]}]}
        elected = await follower.request(ELECT_LEADERS, 2, asked)
        assert elected.error_code == ErrorCode.NOT_CONTROLLER
        codes = [r.error_code for t in elected.replica_election_results for r in t.partition_result]
        assert codes == [ErrorCode.NOT_CONTROLLER] * 2
        body = {"broker_id": 1, "broker_epoch": 1, "topics": []}
        assert (await follower.request(ALTER_PARTITION, 3, body)).error_code == ErrorCode.NOT_CONTROLLER


async def test_the_unclean_election_pass_runs_an_interval_after_a_partition_lost_its_leader(
    autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    config = BrokerConfig({"unclean.leader.election.interval.ms": str(UNCLEAN_INTERVAL_MS)})
    quorum = ControllerQuorum(1, config=config, clock=trio_clock)
    async with quorum.running(deadline_s=MOCK_DEADLINE_S):
        host = await quorum.active_host()
        epochs = await start_brokers(host, 1, 2, 3)
        topic_id = await create_replicated(host, "u")
        p = partition(host, "u")
        assert (await alter(host, epochs, topic_id, p, [p.leader])).error_code == 0
        await host.request(63, 1, heartbeat(p.leader, epochs[p.leader], 2**40, want_fence=True))
        leaderless_at_ms = trio_clock.wall_ms()
        assert partition(host, "u").leader == NO_LEADER  # unclean election not allowed yet
        allowed = {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "u",
                    "configs": [{"name": "unclean.leader.election.enable", "config_operation": 0, "value": "true"}],
                }
            ],
            "validate_only": False,
        }
        assert (await host.request(INCREMENTAL_ALTER_CONFIGS, 1, allowed)).responses[0].error_code == 0
        allowed_at_ms = trio_clock.wall_ms()
        await quorum.wait(lambda: partition(host, "u").leader != NO_LEADER)
        # Due an interval after the write that left the partition leaderless, not sooner.
        assert trio_clock.wall_ms() - leaderless_at_ms >= UNCLEAN_INTERVAL_MS
        assert trio_clock.wall_ms() - allowed_at_ms < 2 * UNCLEAN_INTERVAL_MS  # by the first pass
        after = partition(host, "u")
        assert after.leader not in (NO_LEADER, p.leader) and after.isr == (after.leader,)
        assert after.leader_recovery_state == 1  # RECOVERING
        assert host.cluster is not None and host.cluster.partitions.unclean_elections == 1


async def test_leader_balancing_gives_leadership_back_to_the_preferred_replica(
    autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    config = BrokerConfig({"leader.imbalance.check.interval.seconds": "2"})
    quorum = ControllerQuorum(1, config=config, clock=trio_clock)
    async with quorum.running(deadline_s=MOCK_DEADLINE_S):
        host = await quorum.active_host()
        epochs = await start_brokers(host, 1, 2, 3)
        topic_id = await create_replicated(host, "b")
        preferred = partition(host, "b").replicas[0]
        await host.request(63, 1, heartbeat(preferred, epochs[preferred], 2**40, want_fence=True))
        moved_at_ms = trio_clock.wall_ms()
        await host.request(63, 1, heartbeat(preferred, epochs[preferred], 2**40))
        moved = partition(host, "b")
        assert moved.leader != preferred
        assert (await alter(host, epochs, topic_id, moved, [*moved.isr, preferred])).error_code == 0
        await quorum.wait(lambda: partition(host, "b").leader == preferred)
        # The pass was due an interval after the write that moved the leadership.
        assert 2000 <= trio_clock.wall_ms() - moved_at_ms < 4000
