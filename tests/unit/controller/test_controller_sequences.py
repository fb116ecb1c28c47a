"""Seeded random sequences of operations, appends, commits and lost leaderships: whatever the
order, the controller's latest image is its committed image plus what it appended, a standby
replaying the committed batches has its committed image, and nothing a client was told survives
(a topic, a producer id block) is contradicted by what was committed."""

from __future__ import annotations

import itertools
import random
import uuid
from typing import Any

import pytest
from controllertest_harness import cluster, create_partitions, create_topics, request, topic_spec

from kafkalike.controller.delta import ControllerResult, replay_records
from kafkalike.controller.quorum_controller import QuorumController
from kafkalike.protocol.metadata_records import (
    MetadataBatch,
    MetadataRecordType,
    build_metadata_batch,
    read_metadata_batches,
)

T = MetadataRecordType
NAMES = ["a", "b", "c", "d.e", "d_e", "f"]


def random_operation(controller: QuorumController, rng: random.Random) -> ControllerResult[Any]:
    kind = rng.randrange(6)
    name = rng.choice(NAMES)
    if kind == 0:
        configs = {"retention.ms": str(rng.randrange(1, 10**6))} if rng.random() < 0.5 else {}
        return controller.create_topics(create_topics(topic_spec(name, rng.randint(1, 4), configs=configs)), now_ms=0)
    if kind == 1:
        return controller.create_partitions(create_partitions((name, rng.randint(1, 8))), now_ms=0)
    if kind == 2:
        body = {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "timeout_ms": 1}
        return controller.delete_topics(request(20, 6, body), 6, now_ms=0)
    if kind == 3:
        ops = [{"name": "segment.ms", "config_operation": rng.choice([0, 1]), "value": str(rng.randrange(1, 10**6))}]
        body = {"resources": [{"resource_type": 2, "resource_name": name, "configs": ops}], "validate_only": False}
        return controller.incremental_alter_configs(request(44, 1, body), now_ms=0)
    if kind == 4:
        broker = rng.choice([1, 2, 3])
        return controller.allocate_producer_ids(
            request(67, 0, {"broker_id": broker, "broker_epoch": 100 + broker}), now_ms=0
        )
    return controller.create_topics(create_topics(topic_spec(name, rng.randint(1, 3)), validate_only=True), now_ms=0)


def run_sequence(seed: int, steps: int = 60) -> None:
    rng = random.Random(seed)
    base = cluster([1, 2, 3])
    controller = QuorumController(node_id=1, rng=random.Random(seed), image=base)
    standby = QuorumController(node_id=2, rng=random.Random(seed + 1), image=base)
    log: list[MetadataBatch] = []  # appended, committed or not
    committed = 0  # batches of ``log`` below this are committed
    blocks: list[tuple[int, int]] = []
    for _ in range(steps):
        action = rng.random()
        if action < 0.6:
            result = random_operation(controller, rng)
            if result.records:
                data = build_metadata_batch(
                    result.records, base_offset=log[-1].last_offset + 1 if log else 0, leader_epoch=1, append_time_ms=0
                )
                [batch] = read_metadata_batches(data)
                log.append(batch)
                controller.appended(batch.last_offset)
        elif action < 0.9 and committed < len(log):
            for batch in log[committed : committed + rng.randint(1, len(log) - committed)]:
                controller.replay(batch)
                standby.replay(batch)
                blocks += [
                    (r.next_producer_id - 1000, r.next_producer_id)
                    for r in batch.records
                    if r.type == T.PRODUCER_IDS_RECORD
                ]
                committed += 1
        elif action >= 0.9:
            controller.revert()  # leadership lost: what was not committed is truncated away
            del log[committed:]
        uncommitted = [r for batch in log[committed:] for r in batch.records]
        assert controller.latest_image == replay_records(controller.image, uncommitted), seed
        assert standby.image == controller.image, seed
        for topic in controller.latest_image.topics_by_name.values():
            assert sorted(topic.partitions) == list(range(len(topic.partitions)))
            for partition in topic.partitions.values():
                assert partition.leader in partition.replicas and partition.leader in (1, 2, 3)
        keys = [n.replace(".", "_") for n in controller.latest_image.topics_by_name]
        assert len(keys) == len(set(keys)), ("colliding topics", seed)
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(blocks)), ("blocks overlap", seed)


@pytest.mark.parametrize("first_seed", range(0, 200, 50))
def test_random_sequences_keep_the_images_consistent(first_seed: int) -> None:
    for seed in range(first_seed, first_seed + 50):
        run_sequence(seed)


def test_the_consistency_check_catches_a_controller_that_forgets_its_appended_records() -> None:
    """Negative control: a controller that holds its appended records but checks the next
    operations without them is caught."""
    original = QuorumController._pending

    def forgetful(self: QuorumController, result: ControllerResult[Any]) -> ControllerResult[Any]:
        latest = self.latest_image
        original(self, result)
        self._latest = latest  # the records are held, but checks do not see them
        return result

    QuorumController._pending = forgetful  # type: ignore[method-assign]
    try:
        with pytest.raises(AssertionError):
            for seed in range(50):
                run_sequence(seed)
    finally:
        QuorumController._pending = original  # type: ignore[method-assign]
