"""KIP-853 on one node driven by hand: the voter set in the log, and AddRaftVoter / RemoveRaftVoter /
UpdateRaftVoter answered as Kafka's leader answers them (its error codes and messages, in its order)."""

from __future__ import annotations

import uuid

from rafttest_harness import CLUSTER, Harness, elect, only

from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterKey
from kafkalike.raft.log import MemoryRaftLog
from kafkalike.raft.state import Role
from kafkalike.raft.voters import ControlChange, VoterHistory, VoterNode, VoterSet, bootstrap_batch, control_changes

ADMIN = -1


def directory(node_id: int) -> uuid.UUID:
    return uuid.UUID(int=node_id)


def voter(node_id: int) -> VoterNode:
    return VoterNode(
        VoterKey(node_id, directory(node_id)), (("CONTROLLER", f"host-{node_id}", 9090 + node_id),), (0, 1)
    )


def leader_of(voter_ids: tuple[int, ...] = (1,), kraft_version: int = 1) -> Harness:
    """Node 1 leading a quorum whose voters are in its log (alone, it is elected at once)."""
    log = MemoryRaftLog()
    log.append(bootstrap_batch(VoterSet.of(voter(i) for i in voter_ids), kraft_version))
    log.complete_flush(log.flush_token())
    h = Harness(voters=(), log=log)
    if len(voter_ids) == 1:
        h.run_to_deadline()
    else:
        elect(h)
    h.settle()
    for other in voter_ids[1:]:
        caught_up(h, other)
    assert h.node.role is Role.LEADER
    assert h.node.high_watermark is not None
    return h


def caught_up(h: Harness, replica: int) -> None:
    h.advance(10)  # Kafka's caught-up times are positive
    h.fetch(replica, h.node.epoch, h.node.log.end_offset, h.node.log.last_fetched_epoch())


def ask(h: Harness, api_key: int, body: m.Body) -> list[m.RaftMessage]:
    return h.deliver(ADMIN, api_key, body)


def add(h: Harness, node_id: int, **kwargs: object) -> list[m.RaftMessage]:
    node = voter(node_id)
    return ask(h, m.ADD_RAFT_VOTER, m.add_voter_request(CLUSTER, node.key, list(node.listeners), **kwargs))  # type: ignore[arg-type]


def answer(messages: list[m.RaftMessage], api_key: int) -> m.Body:
    return only(messages, api_key, ADMIN).body


def kraft_supported(h: Harness, request: m.RaftMessage, versions: tuple[int, int] = (0, 1)) -> list[m.RaftMessage]:
    return h.respond(request, m.api_versions_response(versions))


def test_voters_come_from_the_log_and_a_caught_up_observer_is_added_once_committed() -> None:
    h = leader_of()
    assert h.node.voters.ids == {1} and h.node.kraft_version == 1
    caught_up(h, 2)
    asked = only(add(h, 2), m.API_VERSIONS_KEY, 2)  # the leader asks the new voter which kraft.version it has
    assert h.node.endpoints[2] == ("host-2", 9092)
    assert [x for x in kraft_supported(h, asked) if x.destination == ADMIN] == []
    # Appended, and in force at once: the leader now needs node 2 to commit.
    assert h.node.voters.ids == {1, 2}
    end = h.node.log.end_offset
    h.flush()
    assert h.node.high_watermark is not None and h.node.high_watermark < end
    done = h.fetch(2, h.node.epoch, end, h.node.log.last_fetched_epoch())
    assert answer(done, m.ADD_RAFT_VOTER)["error_code"] == ErrorCode.NONE
    assert h.node.high_watermark == end
    (change,) = [c for c in control_changes(h.node.log.read(0, 1 << 20)) if c.voters is not None][1:]
    assert change.voters == VoterSet.of([voter(1), voter(2)])


def test_ack_when_committed_false_is_answered_once_appended() -> None:
    h = leader_of()
    caught_up(h, 2)
    asked = only(add(h, 2, ack_when_committed=False), m.API_VERSIONS_KEY, 2)
    assert answer(kraft_supported(h, asked), m.ADD_RAFT_VOTER)["error_code"] == ErrorCode.NONE
    assert h.node.voters.ids == {1, 2}


def test_add_voter_refusals_in_kafkas_words() -> None:
    h = leader_of()
    key = voter(2).key
    # No directory id.
    body = m.add_voter_request(CLUSTER, VoterKey(2), [("CONTROLLER", "h", 1)])
    refused = answer(ask(h, m.ADD_RAFT_VOTER, body), m.ADD_RAFT_VOTER)
    assert (refused["error_code"], refused["error_message"]) == (
        ErrorCode.INVALID_REQUEST,
        "Add voter request didn't include a valid voter",
    )
    # No endpoint on the quorum's listener.
    body = m.add_voter_request(CLUSTER, key, [("OTHER", "h", 1)])
    refused = answer(ask(h, m.ADD_RAFT_VOTER, body), m.ADD_RAFT_VOTER)
    assert refused["error_code"] == ErrorCode.INVALID_REQUEST
    assert "for the default listener CONTROLLER" in refused["error_message"]
    # Already a voter.
    body = m.add_voter_request(CLUSTER, voter(1).key, list(voter(1).listeners))
    refused = answer(ask(h, m.ADD_RAFT_VOTER, body), m.ADD_RAFT_VOTER)
    assert refused["error_code"] == ErrorCode.DUPLICATE_VOTER
    assert refused["error_message"].startswith("The voter id for ReplicaKey(id=1, directoryId=AAAAAAAAAAAAAAAAAAAAAQ)")
    # Another cluster.
    body = m.add_voter_request("another", key, list(voter(2).listeners))
    refused = answer(ask(h, m.ADD_RAFT_VOTER, body), m.ADD_RAFT_VOTER)
    assert refused["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert refused["error_message"] == 'The given id "another" doesn\'t match the cluster id "test-cluster"'
    # Never fetched: lagging behind, after the ApiVersions round trip.
    asked = only(add(h, 2), m.API_VERSIONS_KEY, 2)
    refused = answer(kraft_supported(h, asked), m.ADD_RAFT_VOTER)
    assert refused["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    assert refused["error_message"].endswith("since it is lagging behind")
    # A voter-to-be that does not support kraft.version 1.
    caught_up(h, 3)
    asked = only(add(h, 3), m.API_VERSIONS_KEY, 3)
    refused = answer(kraft_supported(h, asked, (0, 0)), m.ADD_RAFT_VOTER)
    assert refused["error_code"] == ErrorCode.INVALID_REQUEST
    assert "kraft.version range (min: 0, max: 0 doesn't support the finalized version 1" in refused["error_message"]
    assert h.node.voters.ids == {1}


def test_one_change_at_a_time_and_the_pending_one_times_out() -> None:
    h = leader_of()
    caught_up(h, 2)
    add(h, 2)  # waiting for the ApiVersions answer
    busy = answer(add(h, 3), m.ADD_RAFT_VOTER)
    assert (busy["error_code"], busy["error_message"]) == (
        ErrorCode.REQUEST_TIMED_OUT,
        "Request timed out waiting for leader to handle previous voter change request",
    )
    expired = answer(h.advance(h.config.request_timeout_ms), m.ADD_RAFT_VOTER)
    assert (expired["error_code"], expired["error_message"]) == (ErrorCode.REQUEST_TIMED_OUT, None)


def test_kraft_version_0_serves_no_voter_change() -> None:
    h = leader_of(kraft_version=0)
    refused = answer(add(h, 2), m.ADD_RAFT_VOTER)
    assert (refused["error_code"], refused["error_message"]) == (
        ErrorCode.UNSUPPORTED_VERSION,
        "Cluster doesn't support adding voter because the kraft.version feature is 0",
    )
    static = Harness(voters=(1,))
    static.run_to_deadline()
    static.settle()
    body = m.remove_voter_request(CLUSTER, voter(1).key)
    refused = answer(ask(static, m.REMOVE_RAFT_VOTER, body), m.REMOVE_RAFT_VOTER)
    assert refused["error_message"] == "Cluster doesn't support removing voter because the kraft.version feature is 0"


def test_a_follower_refuses_voter_changes() -> None:
    h = Harness()
    refused = answer(add(h, 4), m.ADD_RAFT_VOTER)
    assert refused["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_remove_voter_and_the_leader_that_removes_itself_resigns_once_committed() -> None:
    h = leader_of((1, 2, 3))
    epoch = h.node.epoch
    unknown = answer(ask(h, m.REMOVE_RAFT_VOTER, m.remove_voter_request(CLUSTER, VoterKey(2))), m.REMOVE_RAFT_VOTER)
    assert unknown["error_code"] == ErrorCode.INVALID_REQUEST
    wrong_dir = m.remove_voter_request(CLUSTER, VoterKey(2, uuid.UUID(int=99)))
    missing = answer(ask(h, m.REMOVE_RAFT_VOTER, wrong_dir), m.REMOVE_RAFT_VOTER)
    assert missing["error_code"] == ErrorCode.VOTER_NOT_FOUND
    assert missing["error_message"].startswith(
        "Cannot remove voter ReplicaKey(id=2, directoryId=AAAAAAAAAAAAAAAAAAAAYw)"
    )
    assert ask(h, m.REMOVE_RAFT_VOTER, m.remove_voter_request(CLUSTER, voter(1).key)) == []
    assert h.node.voters.ids == {2, 3} and not h.node.is_voter
    end = h.node.log.end_offset
    h.flush()  # the leader's own log no longer counts: nodes 2 and 3 must have it
    h.fetch(2, epoch, end, h.node.log.last_fetched_epoch())
    assert h.node.role is Role.LEADER
    done = h.fetch(3, epoch, end, h.node.log.last_fetched_epoch())
    assert answer(done, m.REMOVE_RAFT_VOTER)["error_code"] == ErrorCode.NONE
    assert h.node.role is Role.RESIGNED


def test_history_a_truncation_takes_back_and_a_snapshot_replaces() -> None:
    history = VoterHistory(VoterSet())
    one, two = VoterSet.of([voter(1)]), VoterSet.of([voter(1), voter(2)])
    history.apply(control_changes(bootstrap_batch(one)))
    assert (history.latest(), history.kraft_version(), history.latest_offset()) == (one, 1, 1)
    history.apply([ControlChange(7, voters=two)])
    assert history.at(6) == one and history.at(7) == two
    assert history.truncate_to(7) and history.latest() == one
    history.apply([ControlChange(9, voters=two)])
    assert history.reset_to_snapshot(5, None, None) and history.latest() == one  # in force at offset 4
    assert history.reset_to_snapshot(20, two, 1) and (history.latest_offset(), history.latest()) == (19, two)
