"""Three combined nodes in one trio run, as clients see them: a topic created through any node
(forwarded to the active controller) is spread over the brokers, every broker's Metadata names
the same leaders, a partition is served by its leader and refused NOT_LEADER_OR_FOLLOWER by the
others, and a deletion through another node removes it everywhere."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import trio

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.node.test_node_roles import Nodes, _start_in_background
from tests.server.test_broker_basics import _fetch_body, _produce_body

DEADLINE_S = 60
ZERO = uuid.UUID(int=0)


async def start_combined_nodes(nursery: trio.Nursery, nodes: Nodes) -> dict[int, AsyncWireClient]:
    """Every voter started as a combined node in ``nursery``, once all reported started (a
    combined node does once its broker is unfenced, which needs a leader: they start together);
    a wire client to each node's broker, by node id, for the caller to close."""
    for node_id in nodes.voter_ids:
        await nursery.start(_start_in_background, nodes, node_id, "broker,controller")
    await nodes.wait(lambda: nodes.started == set(nodes.voter_ids))
    clients = {}
    for node_id, node in nodes.nodes.items():
        assert node.client_address is not None
        clients[node_id] = await AsyncWireClient.connect(*node.client_address)
    return clients


async def test_a_topic_created_anywhere_is_led_across_the_brokers(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 3)
    await nodes.bind()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            clients = await start_combined_nodes(nursery, nodes)
            try:
                # Through a node that is not the active controller: forwarded.
                (leader,) = nodes.leaders()
                via = next(i for i in nodes.voter_ids if i != leader.node_id)
                topic = {
                    "name": "spread",
                    "num_partitions": 6,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                created = await clients[via].request(19, 7, {"topics": [topic], "timeout_ms": 10000})
                assert created.topics[0].error_code == 0, created

                # Every broker's image comes to the same leaders (the others may lag a little).
                async def leaders_at(node_id: int) -> dict[int, int]:
                    answer = await clients[node_id].request(3, 12, {"topics": [{"name": "spread", "topic_id": ZERO}]})
                    assert sorted(b.node_id for b in answer.brokers) == [1, 2, 3]
                    return {p.partition_index: p.leader_id for p in answer.topics[0].partitions}

                placed = await leaders_at(via)
                assert sorted(placed) == list(range(6)) and set(placed.values()) == {1, 2, 3}
                for node_id in nodes.voter_ids:
                    node = nodes.nodes[node_id]
                    assert node.broker is not None
                    await node.broker.publisher.wait_until(lambda i: i.topic("spread") is not None)
                    assert await leaders_at(node_id) == placed
                    hosted = {tp[1] for tp in node.broker.replicas if tp[0] == "spread"}
                    assert hosted == {p for p, b in placed.items() if b == node_id}

                partition = 0
                owner = placed[partition]
                other = next(i for i in nodes.voter_ids if i != owner)
                batch = build_batch([Record(value=b"routed")], base_timestamp=int(time.time() * 1000))
                refused = await clients[other].request(0, 9, _produce_body("spread", partition, batch))
                assert refused.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                produced = await clients[owner].request(0, 9, _produce_body("spread", partition, batch))
                assert produced.responses[0].partition_responses[0].error_code == 0
                fetched = await clients[owner].request(1, 12, _fetch_body("spread", partition, 0))
                data = bytes(fetched.responses[0].partitions[0].records or b"")
                assert [r.value for pos, h in iter_batches(data) for r in decode_records(data, pos, h)] == [b"routed"]

                deleted = await clients[other].request(
                    20, 6, {"topics": [{"name": "spread", "topic_id": ZERO}], "timeout_ms": 10000}
                )
                assert deleted.responses[0].error_code == 0
                for node in nodes.nodes.values():
                    assert node.broker is not None
                    await node.broker.publisher.wait_until(lambda i: i.topic("spread") is None)
                    assert not any(tp[0] == "spread" for tp in node.broker.replicas)
            finally:
                for client in clients.values():
                    await client.aclose()
            await nodes.stop_in_turn()
            nursery.cancel_scope.cancel()
