"""The broker's metadata publisher over a one-voter quorum: committed topics become partitions
(opened before the image shows them), configs reach open logs and the broker, deletions stop
partitions, coordinators hear of leadership, and a batch it cannot read is skipped, counted."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import trio
from trio.testing import MockClock

from kafkalike.controller.image import MetadataImage
from kafkalike.log import LogConfig, LogManager
from kafkalike.replica import AppliedChanges, ReplicaManager
from kafkalike.server.clock import SystemClock
from kafkalike.server.controller_channel import ControllerChannel
from kafkalike.server.metadata_publisher import MetadataPublisher
from kafkalike.server.quorum.driver import CommittedBatch
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.metadata_node import one_voter_controller
from kafkalike.testing.quorum import CLUSTER_ID

DEADLINE_S = 20
TOPIC = 2
BROKER = 4


def log_config(overrides: Mapping[str, str]) -> LogConfig:
    return LogConfig(retention_ms=int(overrides.get("retention.ms", 604_800_000)))


def new_topic(name: str, partitions: int) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}


async def register_unfenced(channel: ControllerChannel, broker_id: int) -> None:
    registered = await channel.request(62, 4, registration(broker_id, CLUSTER_ID))
    assert registered.error_code == 0, registered
    beat = await channel.request(63, 1, heartbeat(broker_id, registered.broker_epoch, 2**40))
    assert beat.error_code == 0 and not beat.is_fenced, beat


def alter(resource_type: int, name: str, key: str, value: str | None) -> dict[str, Any]:
    operation = 0 if value is not None else 1  # SET, DELETE
    config = {"name": key, "config_operation": operation, "value": value}
    return {"resources": [{"resource_type": resource_type, "resource_name": name, "configs": [config]}]}


class Coordinator:
    """Records what the publisher told it, and what the image showed at that moment."""

    def __init__(self, publisher: MetadataPublisher) -> None:
        self.publisher = publisher
        self.led: set[tuple[str, int]] = set()
        self.removed: set[tuple[str, int]] = set()
        self.topics_published_at_change: list[set[str]] = []

    def __call__(self, changes: AppliedChanges) -> None:
        self.led |= {p.tp for p in changes.became_leader}
        self.removed |= set(changes.removed)
        self.topics_published_at_change.append(set(self.publisher.image.topics_by_name))


def has_topic(name: str, partitions: int | None = None) -> Any:
    def check(image: MetadataImage) -> bool:
        topic = image.topic(name)
        return topic is not None and (partitions is None or len(topic.partitions) == partitions)

    return check


@contextlib.asynccontextmanager
async def publishing_with_topic(
    publisher: MetadataPublisher, name: str, partitions: int
) -> AsyncIterator[tuple[ControllerChannel, Any]]:
    """``publisher`` running behind a one-voter controller with broker 1 registered and topic
    ``name`` created and published; yields the controller channel and the CreateTopics answer."""
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(publisher.run)
            async with one_voter_controller(listeners=[publisher]) as node:
                channel = node.channel()
                await register_unfenced(channel, 1)
                created = await channel.request(19, 7, {"topics": [new_topic(name, partitions)], "timeout_ms": 5000})
                assert created.topics[0].error_code == 0
                assert await publisher.wait_until(has_topic(name))
                yield channel, created
                await channel.aclose()
            nursery.cancel_scope.cancel()


async def test_committed_topics_configs_and_deletions_reach_the_broker(tmp_path: Path) -> None:
    replicas = ReplicaManager(LogManager([tmp_path], storage="memory"), 1)
    broker_configs: list[tuple[dict[str, str], dict[str, str]]] = []
    publisher = MetadataPublisher(
        1,
        replicas,
        clock=SystemClock(),
        log_config=log_config,
        on_configs=lambda default, own: broker_configs.append((dict(default), dict(own))),
    )
    coordinator = Coordinator(publisher)
    publisher.on_replica_changes.append(coordinator)
    async with publishing_with_topic(publisher, "orders", 3) as (channel, created):
        assert sorted(tp for tp in replicas if tp[0] == "orders") == [("orders", i) for i in range(3)]
        assert all(replicas[("orders", i)].is_leader for i in range(3))
        assert replicas[("orders", 0)].topic_id == created.topics[0].topic_id
        assert coordinator.led == {("orders", i) for i in range(3)}
        # The partitions were there before the image showed the topic.
        assert "orders" not in coordinator.topics_published_at_change[-1]

        grown = await channel.request(
            37,
            3,
            {
                "topics": [{"name": "orders", "count": 5, "assignments": None}],
                "timeout_ms": 5000,
                "validate_only": False,
            },
        )
        assert grown.results[0].error_code == 0
        assert await publisher.wait_until(has_topic("orders", 5))
        assert ("orders", 4) in replicas

        changed = await channel.request(44, 1, alter(TOPIC, "orders", "retention.ms", "1000"))
        assert changed.responses[0].error_code == 0
        assert await publisher.wait_until(lambda i: i.topic_configs("orders").get("retention.ms") == "1000")
        assert replicas[("orders", 0)].config.retention_ms == 1000

        changed = await channel.request(44, 1, alter(BROKER, "1", "log.retention.ms", "5000"))
        assert changed.responses[0].error_code == 0, changed
        assert await publisher.wait_until(lambda i: bool(broker_configs) and bool(broker_configs[-1][1]))
        # the cluster-level min.insync.replicas of a new cluster under ELR, and ours
        assert broker_configs[-1] == ({"min.insync.replicas": "1"}, {"log.retention.ms": "5000"})

        deleted = await channel.request(
            20, 6, {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 5000}
        )
        assert deleted.responses[0].error_code == 0
        assert await publisher.wait_until(lambda i: i.topic("orders") is None)
        assert not any(tp[0] == "orders" for tp in replicas)
        assert coordinator.removed == {("orders", i) for i in range(5)}
        assert publisher.replay_errors == 0


async def test_a_batch_that_cannot_be_read_is_skipped_and_counted(tmp_path: Path) -> None:
    replicas = ReplicaManager(LogManager([tmp_path], storage="memory"), 1)
    publisher = MetadataPublisher(1, replicas, clock=SystemClock(), log_config=log_config)
    publisher.handle_commit(CommittedBatch(0, 0, 1, (b"\x00\xff\xff not a record",), False))
    await publisher.publish_pending()
    assert publisher.replay_errors == 1
    assert publisher.published_offset == -1 and publisher.caught_up


async def test_waiting_for_an_image_that_never_comes_ends_at_the_deadline(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    replicas = ReplicaManager(LogManager([tmp_path], storage="memory"), 1)
    publisher = MetadataPublisher(1, replicas, clock=SystemClock(), log_config=log_config)
    start = trio.current_time()
    assert not await publisher.wait_for_offset(5, start + 30)
    assert trio.current_time() - start == 30


async def test_a_committed_config_the_broker_cannot_run_with_is_logged_and_the_old_one_kept(
    tmp_path: Path, caplog: Any
) -> None:
    def strict_log_config(overrides: Mapping[str, str]) -> LogConfig:
        if overrides.get("retention.ms") == "0":  # a check the controller did not make
            raise ValueError("retention.ms must be positive here")
        return log_config(overrides)

    def retention_shown(value: str) -> Any:
        return lambda image: image.topic_configs("kept").get("retention.ms") == value

    replicas = ReplicaManager(LogManager([tmp_path], storage="memory"), 1)
    publisher = MetadataPublisher(1, replicas, clock=SystemClock(), log_config=strict_log_config)
    async with publishing_with_topic(publisher, "kept", 1) as (channel, _):
        for value, expected in (("0", 604_800_000), ("1000", 1000)):
            changed = await channel.request(44, 1, alter(TOPIC, "kept", "retention.ms", value))
            assert changed.responses[0].error_code == 0
            assert await publisher.wait_until(retention_shown(value))
            # The refused value leaves the partition as it ran; the publisher goes on.
            assert replicas[("kept", 0)].config.retention_ms == expected
        assert "the new configs of topic kept not applied" in caplog.text
