"""An observer that knows no voters, only controller.quorum.bootstrap.servers (KIP-853): it asks
a bootstrap server, learns the leader's id, epoch and endpoint from the answer, and follows the
leader; voters put the leader's endpoint into their Fetch responses."""

from __future__ import annotations

from rafttest_harness import Harness, elect, only, partition

from kafkalike.protocol.api import decode_response, encode_response
from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterEndpoint, VoterKey
from kafkalike.raft.state import QuorumStateRecord, Role

BOOTSTRAP = (("ctl-a", 9093), ("ctl-b", 9093), ("ctl-c", 9093))
VOTER_ENDPOINTS = tuple(VoterEndpoint(VoterKey(i), f"ctl-{i}", 9090 + i) for i in (1, 2, 3))


def bootstrap_observer(**kwargs: object) -> Harness:
    return Harness(node_id=4, voters=(), bootstrap_servers=BOOTSTRAP, **kwargs)  # type: ignore[arg-type]


def not_leader(epoch: int, leader_id: int, endpoint: tuple[str, int] | None) -> dict[str, object]:
    return m.fetch_response(ErrorCode.NOT_LEADER_OR_FOLLOWER, epoch, leader_id, -1, 0, leader_endpoint=endpoint)


def test_bootstrap_servers_go_by_synthetic_negative_ids() -> None:
    h = bootstrap_observer()
    assert h.node.bootstrap_ids == (-2, -3, -4)
    assert {i: h.node.endpoints[i] for i in h.node.bootstrap_ids} == dict(zip((-2, -3, -4), BOOTSTRAP, strict=True))
    probe = only(h.advance(0), m.FETCH)
    assert probe.destination in (-2, -3, -4)
    assert m.fetch_replica_id(probe.body) == 4


def test_observer_follows_the_leader_a_bootstrap_server_names_at_its_endpoint() -> None:
    h = bootstrap_observer()
    probe = only(h.advance(0), m.FETCH)
    h.respond(probe, not_leader(5, 2, ("ctl-2", 9092)))
    assert (h.node.role, h.node.epoch, h.node.leader_id) == (Role.FOLLOWER, 5, 2)
    assert h.node.endpoints[2] == ("ctl-2", 9092)
    fetch = only(h.persist(), m.FETCH, 2)
    assert partition(fetch)["current_leader_epoch"] == 5


def test_a_leader_named_without_its_endpoint_is_not_followed() -> None:
    h = bootstrap_observer()
    probe = only(h.advance(0), m.FETCH)
    h.respond(probe, not_leader(5, 2, None))  # an answer below Fetch v17, say
    assert (h.node.role, h.node.epoch, h.node.leader_id) == (Role.UNATTACHED, 5, -1)
    h.persist()
    retry = only(h.run_to_deadline(), m.FETCH)
    assert retry.destination in h.node.bootstrap_ids
    h.respond(retry, not_leader(5, 2, ("ctl-2", 9092)))
    assert (h.node.role, h.node.leader_id) == (Role.FOLLOWER, 2)


def test_one_bootstrap_server_at_a_time_and_another_after_a_failure() -> None:
    h = bootstrap_observer()
    first = only(h.advance(0), m.FETCH)
    assert not h.advance(h.config.retry_backoff_ms)  # one request in flight at most
    second = only(h.respond(first, m.fetch_top_level_error(ErrorCode.BROKER_NOT_AVAILABLE)), m.FETCH)
    assert second.destination != first.destination  # the failed one backs off
    assert h.node.role is Role.UNATTACHED


def test_a_leaderless_answer_keeps_the_observer_asking() -> None:
    h = bootstrap_observer()
    probe = only(h.advance(0), m.FETCH)
    h.respond(probe, not_leader(3, -1, None))
    assert (h.node.role, h.node.epoch, h.node.leader_id) == (Role.UNATTACHED, 3, -1)
    h.persist()
    assert only(h.run_to_deadline(), m.FETCH).destination in h.node.bootstrap_ids


def test_observer_that_loses_its_leader_asks_the_bootstrap_servers_again() -> None:
    h = bootstrap_observer()
    h.respond(only(h.advance(0), m.FETCH), not_leader(5, 2, ("ctl-2", 9092)))
    h.persist()
    h.advance(h.config.fetch_timeout_ms)
    assert h.node.role is Role.UNATTACHED
    assert only(h.persist() + h.advance(0), m.FETCH).destination in h.node.bootstrap_ids


def test_restarted_observer_without_the_leaders_endpoint_starts_unattached() -> None:
    h = bootstrap_observer(quorum_state=QuorumStateRecord(5, 2, None))
    assert (h.node.role, h.node.epoch) == (Role.UNATTACHED, 5)
    assert only(h.advance(0), m.FETCH).destination in h.node.bootstrap_ids


def test_a_static_observer_still_starts_following_its_stored_leader() -> None:
    h = Harness(node_id=4, quorum_state=QuorumStateRecord(5, 2, None))
    assert (h.node.role, h.node.leader_id) == (Role.FOLLOWER, 2)


def test_follower_voter_names_the_leaders_endpoint() -> None:
    h = Harness(node_id=2, endpoints=VOTER_ENDPOINTS)
    h.begin_epoch(3, 4)
    h.persist()
    answer = only(h.fetch(4, 0, 0, 0), m.FETCH, 4)
    assert partition(answer)["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    assert answer.body["node_endpoints"] == [{"node_id": 3, "host": "ctl-3", "port": 9093, "rack": None}]


def test_leader_names_its_own_endpoint_and_a_voter_without_a_leader_none() -> None:
    h = Harness(endpoints=VOTER_ENDPOINTS)
    unattached = only(h.fetch(4, 0, 0, 0), m.FETCH, 4)
    assert unattached.body["node_endpoints"] == []
    elect(h)
    h.flush()
    answer = only(h.fetch(4, h.node.epoch, 0, 0), m.FETCH, 4)
    assert partition(answer)["error_code"] == ErrorCode.NONE
    assert answer.body["node_endpoints"] == [{"node_id": 1, "host": "ctl-1", "port": 9091, "rack": None}]


def test_endpoint_learned_through_the_wire_and_not_below_v17() -> None:
    h = bootstrap_observer()
    probe = only(h.advance(0), m.FETCH)
    body = not_leader(5, 2, ("ctl-2", 9092))
    _, decoded = decode_response(m.FETCH, 17, encode_response(m.FETCH, 17, probe.correlation_id, body)[4:])
    h.respond(probe, decoded)
    assert h.node.endpoints[2] == ("ctl-2", 9092)
    assert m.without_node_endpoints(body)["node_endpoints"] == []


def test_a_voters_configured_endpoint_is_not_replaced_by_an_answer() -> None:
    h = Harness(node_id=4, endpoints=VOTER_ENDPOINTS)
    probe = only(h.advance(0), m.FETCH)
    h.respond(probe, not_leader(5, 2, ("elsewhere", 1)))
    assert h.node.endpoints[2] == ("ctl-2", 9092)
