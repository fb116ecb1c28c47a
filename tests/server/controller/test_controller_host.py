"""The controller host on its CONTROLLER listener, through the real wire codec: each write is
answered once committed, by the active controller only."""

from __future__ import annotations

import trio

from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.controller_quorum import ControllerQuorum
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.quorum import CLUSTER_ID
from kafkalike.testing.wire_client import AsyncWireClient

DEADLINE_S = 20


async def register_unfenced(client: AsyncWireClient, broker_id: int) -> int:
    """Register a broker and heartbeat it out of fencing; its broker epoch."""
    registered = await client.request(62, 4, registration(broker_id, CLUSTER_ID))
    assert registered.error_code == 0, registered
    epoch = registered.broker_epoch
    beat = await client.request(63, 1, heartbeat(broker_id, epoch, 2**40))
    assert (beat.error_code, beat.is_caught_up, beat.is_fenced) == (0, True, False), beat
    return int(epoch)


def new_topic(name: str, partitions: int = 3, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
        **extra,
    }


async def test_one_voter_creates_a_topic_once_committed() -> None:
    quorum = ControllerQuorum(1)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await quorum.start_all(nursery)
            host = await quorum.active_host()
            client = await AsyncWireClient.connect("127.0.0.1", quorum.port(1))
            await register_unfenced(client, 1)
            response = await client.request(19, 7, {"topics": [new_topic("orders")], "timeout_ms": 5000})
            (topic,) = response.topics
            assert (topic.name, topic.error_code, topic.num_partitions, topic.replication_factor) == ("orders", 0, 3, 1)
            # Answered once committed: the committed image already has it.
            assert host.image.topic("orders") is not None
            assert host.image.topic("orders").topic_id == topic.topic_id
            assert {c.name for c in topic.configs} >= {"cleanup.policy", "retention.ms"}
            again = await client.request(19, 7, {"topics": [new_topic("orders")], "timeout_ms": 5000})
            assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
            versions = await client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
            assert served[19] == (2, 7) and served[62] == (0, 4) and served[55] == (0, 2)
            await client.aclose()
            nursery.cancel_scope.cancel()
