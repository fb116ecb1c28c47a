"""What a CONTROLLER listener answers besides the quorum's own traffic: ApiVersions,
DescribeQuorum with per-voter state, DescribeCluster of the controllers, refusals, bad frames
and the network fault hook at the listener."""

from __future__ import annotations

import struct

import trio

from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.spec import api_specs
from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterKey
from kafkalike.server.quorum.handlers import HANDLERS
from kafkalike.testing.quorum import CLUSTER_ID, InProcessQuorum
from kafkalike.testing.wire_client import AsyncWireClient

DEADLINE_S = 20
CREATE_TOPICS = 19
METADATA = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


async def test_api_versions_lists_the_controller_apis_only() -> None:
    quorum = InProcessQuorum(3)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await quorum.start_all(nursery)
            client = await AsyncWireClient.connect("127.0.0.1", quorum.port(1))
            response = await client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            assert response.error_code == 0
            assert served == {
                1: (4, 18),  # v18 since Kafka 4.1 (KIP-1166)
                18: (0, 4),
                52: (0, 2),
                53: (0, 1),
                54: (0, 1),
                55: (0, 2),
                59: (0, 1),
                60: (0, 2),
            }
            await client.aclose()
            # An API this listener does not enable closes the connection, as Kafka's SocketServer.
            refused = await AsyncWireClient.connect("127.0.0.1", quorum.port(1))
            topic = {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            await refused.send(CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 1000})
            assert await refused.receive_frame() is None
            await refused.aclose()
            again = await AsyncWireClient.connect("127.0.0.1", quorum.port(1))
            assert (await again.request(18, 0, {})).error_code == 0
            await again.aclose()
            nursery.cancel_scope.cancel()


async def test_describe_quorum_reports_every_voter_from_the_leader_and_refers_others_to_it() -> None:
    quorum = InProcessQuorum(3)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await quorum.start_all(nursery)
            leader = await quorum.wait_for_leader()
            last = await leader.append([b"x"])
            await quorum.wait(lambda: all(d.delivered_offset > last for d in quorum.drivers()))
            client = await AsyncWireClient.connect("127.0.0.1", quorum.port(leader.node_id))
            response = await client.request(55, 2, METADATA)
            (p,) = response.topics[0].partitions
            assert (p.error_code, p.leader_id, p.leader_epoch) == (0, leader.node_id, leader.epoch)
            assert p.high_watermark == last + 1
            assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3]
            assert all(v.log_end_offset == last + 1 for v in p.current_voters)
            assert sorted(n.node_id for n in response.nodes) == [1, 2, 3]
            assert {n.listeners[0].port for n in response.nodes} == {quorum.port(i) for i in (1, 2, 3)}
            assert response.nodes[0].listeners[0].name == "CONTROLLER"
            other = next(i for i in quorum.node_ids if i != leader.node_id)
            follower = await AsyncWireClient.connect("127.0.0.1", quorum.port(other))
            (fp,) = (await follower.request(55, 2, METADATA)).topics[0].partitions
            assert fp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            wrong = {"topics": [{"topic_name": "other", "partitions": [{"partition_index": 0}]}]}
            (wp,) = (await follower.request(55, 2, wrong)).topics[0].partitions
            assert wp.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            await client.aclose()
            await follower.aclose()
            nursery.cancel_scope.cancel()


async def test_describe_cluster_lists_the_controllers_and_the_active_one() -> None:
    quorum = InProcessQuorum(3)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await quorum.start_all(nursery)
            leader = await quorum.wait_for_leader()
            client = await AsyncWireClient.connect("127.0.0.1", quorum.port(1))
            response = await client.request(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2})
            assert (response.error_code, response.cluster_id, response.endpoint_type) == (0, CLUSTER_ID, 2)
            assert response.controller_id == leader.node_id
            assert sorted((b.broker_id, b.port) for b in response.brokers) == [(i, quorum.port(i)) for i in (1, 2, 3)]
            brokers = await client.request(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
            assert brokers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
            unknown = await client.request(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 7})
            assert unknown.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            await client.aclose()
            nursery.cancel_scope.cancel()


async def test_a_fetch_from_v17_names_the_leaders_endpoint() -> None:
    """What an observer that knows only bootstrap servers asks any voter: the answer names the
    leader and, from Fetch v17 as Kafka's raft, the leader's controller endpoint."""
    quorum = InProcessQuorum(3)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await quorum.start_all(nursery)
            leader = await quorum.wait_for_leader()
            other = next(i for i in quorum.node_ids if i != leader.node_id)
            await quorum.wait(lambda: quorum.driver(other).leader_id == leader.node_id)
            client = await AsyncWireClient.connect("127.0.0.1", quorum.port(other))
            body = m.fetch_request(CLUSTER_ID, VoterKey(9), 0, 0, 0, 0, 1024)
            for version, endpoints in ((17, [(leader.node_id, quorum.port(leader.node_id))]), (16, [])):
                answer = await client.request(m.FETCH, version, body)
                (p,) = answer.responses[0].partitions
                assert p.error_code == ErrorCode.FENCED_LEADER_EPOCH
                assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader.node_id, leader.epoch)
                assert [(n.node_id, n.port) for n in answer.node_endpoints] == endpoints
            await client.aclose()
            nursery.cancel_scope.cancel()


async def test_a_malformed_frame_closes_only_its_connection() -> None:
    quorum = InProcessQuorum(3)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await quorum.start_all(nursery)
            await quorum.wait_for_leader()
            bad = await trio.open_tcp_stream("127.0.0.1", quorum.port(1))
            garbage = b"\x00\x34\x00\x02\xff\xff"  # Vote v2, then a header cut short
            await bad.send_all(struct.pack(">i", len(garbage)) + garbage)
            assert await bad.receive_some(100) == b""  # closed
            good = await AsyncWireClient.connect("127.0.0.1", quorum.port(1))
            assert (await good.request(18, 0, {})).error_code == 0
            leader = await quorum.wait_for_leader()
            last = await leader.append([b"still works"])
            await leader.wait_committed(last)
            await good.aclose()
            await bad.aclose()
            nursery.cancel_scope.cancel()


async def test_requests_from_an_isolated_node_are_not_answered_and_a_wrong_cluster_is_refused() -> None:
    quorum = InProcessQuorum(3)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await quorum.start_all(nursery)
            leader = await quorum.wait_for_leader()
            client = await AsyncWireClient.connect("127.0.0.1", quorum.port(leader.node_id))
            other = next(i for i in quorum.node_ids if i != leader.node_id)
            body = m.begin_quorum_epoch_request("another-cluster", other, 0, leader.node.key)
            refused = await client.request(m.BEGIN_QUORUM_EPOCH, 1, body)
            assert refused.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
            quorum.faults.isolate(other)
            await client.send(
                m.BEGIN_QUORUM_EPOCH, 1, m.begin_quorum_epoch_request(CLUSTER_ID, other, 0, leader.node.key)
            )
            with trio.move_on_after(0.5) as waited:
                await client.receive_frame()
            assert waited.cancelled_caught  # dropped, as by a network partition
            await client.aclose()
            nursery.cancel_scope.cancel()


def test_every_advertised_version_is_one_the_codec_speaks() -> None:
    specs = api_specs()
    for api_key, handler in HANDLERS.items():
        versions = specs[api_key].versions
        assert handler.min_version in versions and handler.max_version in versions, api_key
