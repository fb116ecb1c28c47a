"""A broker that starts again registers with the same log directory id, so the partitions the
controller assigned to that directory get their leader back when it is unfenced (with a new id
they would stay leaderless, as in Kafka)."""

from __future__ import annotations

from pathlib import Path

import trio

from kafkalike.controller.image import MetadataImage
from tests.server.node.test_node_roles import Nodes, create_topic

DEADLINE_S = 60
TOPIC = "kept"


def _leader(image: MetadataImage) -> tuple[int, int] | None:
    topic = image.topic(TOPIC)
    partition = None if topic is None else topic.partitions.get(0)
    return None if partition is None else (partition.leader, partition.leader_epoch)


async def test_a_restarted_broker_leads_its_partitions_again(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 1, brokers_only=1)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            controller = await nodes.start(nursery, 1, "controller")
            broker = await nodes.start(nursery, 2, "broker")
            assert controller.controller is not None
            await create_topic(nodes.ports[1], TOPIC, 1)
            host = controller.controller
            await nodes.wait(lambda: _leader(host.image) == (2, 0))
            directories = host.image.brokers[2].directories
            assert len(directories) == 1
            await broker.stop()
            await nodes.wait(lambda: host.image.brokers[2].fenced and _leader(host.image) == (-1, 1))
            again = await nodes.start(nursery, 2, "broker")
            await nodes.wait(lambda: not host.image.brokers[2].fenced and _leader(host.image) == (2, 2))
            assert host.image.brokers[2].directories == directories
            await again.stop()
            await controller.stop()
            nursery.cancel_scope.cancel()
