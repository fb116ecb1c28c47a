"""Elections step by step: pre-vote, candidacy, vote granting rules, BeginQuorumEpoch, restart."""

from __future__ import annotations

from rafttest_harness import CLUSTER, Harness, elect, fill_log, only, partition, stored, vote_granted, vote_requests

from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterKey
from kafkalike.raft.log import MemoryRaftLog
from kafkalike.raft.records import LeaderChange, parse_leader_change
from kafkalike.raft.state import QuorumStateRecord, Role

# -- becoming leader ------------------------------------------------------------------------------


def test_election_timeout_starts_a_pre_vote_that_keeps_the_epoch() -> None:
    h = Harness()
    assert (h.node.role, h.node.epoch) == (Role.UNATTACHED, 0)
    pre_votes = vote_requests(h.run_to_deadline())
    assert h.node.role is Role.PROSPECTIVE
    assert h.node.epoch == 0
    assert h.persisted == []  # a pre-vote changes nothing on disk
    assert sorted(pre_votes) == [2, 3]
    for request in pre_votes.values():
        assert partition(request)["pre_vote"] is True
        assert partition(request)["replica_epoch"] == 0  # its own epoch, as Kafka 4.0 sends it


def test_pre_vote_majority_makes_a_candidate_whose_votes_wait_for_the_disk() -> None:
    h = Harness()
    pre_votes = vote_requests(h.run_to_deadline())
    sent = h.respond(pre_votes[3], vote_granted(0))
    assert (h.node.role, h.node.epoch) == (Role.CANDIDATE, 1)
    assert h.persisted[-1] == QuorumStateRecord(1, -1, VoterKey(1))
    assert vote_requests(sent) == {}  # held: the vote for itself is not durable yet
    votes = vote_requests(h.persist())
    assert sorted(votes) == [2, 3]
    for request in votes.values():
        assert partition(request)["pre_vote"] is False
        assert partition(request)["replica_epoch"] == 1


def test_without_pre_vote_the_timeout_makes_a_candidate_at_once() -> None:
    h = Harness(pre_vote=False)
    h.run_to_deadline()
    assert (h.node.role, h.node.epoch) == (Role.CANDIDATE, 1)


def test_majority_of_votes_makes_a_leader_that_writes_leader_change_first() -> None:
    h = Harness()
    elect(h)
    assert h.node.epoch == 1
    (batch,) = h.log.batches
    assert (batch.base_offset, batch.epoch) == (0, 1)
    assert parse_leader_change(batch.data) == LeaderChange(1, (1, 2, 3), (1, 2))
    begin = [x for x in h.sent if x.api_key == m.BEGIN_QUORUM_EPOCH]
    assert sorted(x.destination for x in begin) == [2, 3]
    assert all(partition(x)["leader_epoch"] == 1 and partition(x)["leader_id"] == 1 for x in begin)
    assert h.persisted[-1] == QuorumStateRecord(1, 1, VoterKey(1))


def test_majority_of_rejections_backs_off_then_tries_again() -> None:
    h = Harness()
    pre_votes = vote_requests(h.run_to_deadline())
    h.respond(pre_votes[2], vote_granted(0, granted=False))
    sent = h.respond(pre_votes[3], vote_granted(0, granted=False))
    for _ in range(3):  # the random backoff (possibly none), then a new round
        if vote_requests(sent):
            break
        sent = h.run_to_deadline()
    assert sorted(vote_requests(sent)) == [2, 3]
    assert (h.node.role, h.node.epoch, h.node.state.retries) == (Role.PROSPECTIVE, 0, 2)


def test_single_voter_elects_itself() -> None:
    h = Harness(voters=(1,))
    h.run_to_deadline()
    h.persist()
    assert (h.node.role, h.node.epoch) == (Role.LEADER, 1)


def test_the_only_voter_stands_for_election_at_start_without_waiting() -> None:
    """As Kafka's KafkaRaftClient.initialize; a voter among others waits its election timeout."""
    alone = Harness(voters=(1,))
    assert alone.node.poll(0) == 0
    alone.node.tick(0)
    alone.persist()
    assert (alone.node.role, alone.node.epoch) == (Role.LEADER, 1)
    among_others = Harness(voters=(1, 2, 3))
    assert among_others.node.poll(0) >= among_others.config.election_timeout_ms
    # Restarted after leading (its quorum state names itself): at once again, one epoch on.
    restarted = Harness(voters=(1,), quorum_state=QuorumStateRecord(1, 1, None))
    assert restarted.node.poll(0) == 0
    restarted.node.tick(0)
    restarted.persist()
    assert (restarted.node.role, restarted.node.epoch) == (Role.LEADER, 2)


def test_a_single_voter_leader_has_no_quorum_check_deadline_to_wake_for() -> None:
    """It never resigns for want of a majority, so the check's deadline must not stay in the
    past: a driver sleeping until ``poll`` would otherwise step in a busy loop."""
    h = Harness(voters=(1,))
    h.run_to_deadline()
    h.persist()
    h.flush()
    for _ in range(5):
        h.now = h.node.poll(h.now)
        h.node.tick(h.now)
        assert h.node.role is Role.LEADER
        assert h.node.poll(h.now) > h.now


# -- granting votes -------------------------------------------------------------------------------


def test_vote_is_granted_only_once_the_vote_is_durable() -> None:
    h = Harness()
    assert h.vote(2, 1) == []  # the answer waits for the quorum-state write
    assert h.persisted[-1] == QuorumStateRecord(1, -1, VoterKey(2))
    reply = only(h.persist(), m.VOTE, 2)
    p = partition(reply)
    assert (p["error_code"], p["vote_granted"], p["leader_epoch"]) == (ErrorCode.NONE, True, 1)


def test_one_vote_per_epoch() -> None:
    h = Harness()
    h.vote(2, 1)
    h.persist()
    rival = partition(only(h.vote(3, 1), m.VOTE, 3))
    assert rival["vote_granted"] is False
    same = partition(only(h.vote(2, 1), m.VOTE, 2))
    assert same["vote_granted"] is True  # a retry of the same candidate is answered the same
    assert h.node.stored_state.voted_for == VoterKey(2)


def test_vote_refused_to_a_candidate_whose_log_is_behind() -> None:
    log = MemoryRaftLog()
    fill_log(log, [(1, 3)])
    h = Harness(log=log, quorum_state=QuorumStateRecord(1, -1, None))
    for last_epoch, last_offset in [(1, 2), (0, 9)]:
        h.vote(2, 2, last_epoch=last_epoch, last_offset=last_offset)
        p = partition(only(h.persist() or h.sent[-1:], m.VOTE, 2))
        assert p["vote_granted"] is False, (last_epoch, last_offset)
    granted = h.vote(3, 2, last_epoch=1, last_offset=3) + h.persist()
    assert partition(only(granted, m.VOTE, 3))["vote_granted"] is True


def test_vote_for_an_older_epoch_is_fenced() -> None:
    h = Harness(quorum_state=QuorumStateRecord(5, -1, None))
    p = partition(only(h.vote(2, 3), m.VOTE, 2))
    assert (p["error_code"], p["leader_epoch"], p["vote_granted"]) == (ErrorCode.FENCED_LEADER_EPOCH, 5, False)


def test_pre_vote_binds_nothing() -> None:
    h = Harness()
    p = partition(only(h.vote(2, 0, pre_vote=True), m.VOTE, 2))
    assert p["vote_granted"] is True
    assert (h.node.epoch, h.persisted) == (0, [])
    h.vote(3, 1)  # the real vote of the next epoch is still free
    assert partition(only(h.persist(), m.VOTE, 3))["vote_granted"] is True


def test_a_pre_vote_from_a_later_epoch_moves_the_voter_up_to_it_without_a_vote() -> None:
    """As Kafka 4.0's handleVoteRequest: any Vote naming a later epoch is news of that epoch."""
    h = Harness()
    assert h.vote(2, 3, last_epoch=3, pre_vote=True) == []  # the answer waits for the new epoch on disk
    assert (h.node.role, h.node.epoch) == (Role.UNATTACHED, 3)
    p = partition(only(h.persist(), m.VOTE, 2))
    assert (p["vote_granted"], p["leader_epoch"]) == (True, 3)
    assert h.persisted == [QuorumStateRecord(3)]  # no vote recorded
    invalid = partition(only(h.vote(2, 3, last_epoch=4, pre_vote=True), m.VOTE, 2))
    assert invalid["error_code"] == ErrorCode.INVALID_REQUEST  # its last record cannot be of a later epoch


def test_follower_refuses_pre_votes_while_its_leader_answers() -> None:
    h = Harness()
    h.begin_epoch(3, 1)
    fetch = only(h.persist(), m.FETCH, 3)
    h.respond(fetch, m.fetch_response(ErrorCode.NONE, 1, 3, -1, 0))
    refused = partition(only(h.vote(2, 1, pre_vote=True), m.VOTE, 2))
    assert (refused["vote_granted"], refused["leader_id"]) == (False, 3)
    h.end_epoch(3, 1, [2, 1])  # the leader resigns: now a pre-vote may pass
    assert h.node.role is Role.FOLLOWER
    assert partition(only(h.vote(2, 1, pre_vote=True), m.VOTE, 2))["vote_granted"] is True


def test_leader_refuses_votes_of_its_epoch() -> None:
    h = Harness()
    elect(h)
    p = partition(only(h.vote(2, 1, last_epoch=0, last_offset=9, pre_vote=True), m.VOTE, 2))
    assert (p["vote_granted"], p["leader_id"]) == (False, 1)


def test_vote_request_errors() -> None:
    h = Harness()
    invalid = partition(only(h.vote(2, 1, last_epoch=1), m.VOTE, 2))
    assert invalid["error_code"] == ErrorCode.INVALID_REQUEST
    other_cluster = only(h.vote(2, 1, cluster_id="another"), m.VOTE, 2)
    assert other_cluster.body["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert h.node.epoch == 0


def test_a_candidate_missing_from_the_voter_set_gets_the_vote() -> None:
    """As Kafka since KIP-853: the voter may not have the VotersRecord that added the candidate."""
    h = Harness()
    assert h.vote(9, 1) == []  # held until the vote is on disk
    granted = partition(only(h.persist(), m.VOTE, 9))
    assert (granted["error_code"], granted["vote_granted"]) == (ErrorCode.NONE, True)
    assert stored(h).voted_for == VoterKey(9)


def test_vote_for_another_voter_key_is_refused() -> None:
    h = Harness()
    body = m.vote_request(CLUSTER, VoterKey(2), 1, VoterKey(3), 0, 0, False)  # meant for node 3
    p = partition(only(h.deliver(2, m.VOTE, body), m.VOTE, 2))
    assert (p["error_code"], p["vote_granted"]) == (ErrorCode.INVALID_VOTER_KEY, False)


def test_observer_never_runs_but_votes_as_kafka_does() -> None:
    """An observer never stands for election; it grants a vote as any unattached replica does
    (Kafka's UnattachedState.canGrantVote): its voter set may be behind the candidate's."""
    h = Harness(node_id=4)
    assert h.node.is_voter is False
    h.advance(10_000)
    assert h.node.role is Role.UNATTACHED
    assert not [x for x in h.sent if x.api_key == m.VOTE]
    h.vote(2, 1)
    assert partition(only(h.persist(), m.VOTE, 2))["vote_granted"] is True


# -- BeginQuorumEpoch and restarts ----------------------------------------------------------------


def test_begin_quorum_epoch_makes_a_follower_that_fetches_from_the_leader() -> None:
    h = Harness()
    assert h.begin_epoch(3, 4) == []
    assert (h.node.role, h.node.epoch, h.node.leader_id) == (Role.FOLLOWER, 4, 3)
    released = h.persist()
    assert partition(only(released, m.BEGIN_QUORUM_EPOCH, 3))["error_code"] == ErrorCode.NONE
    fetch = partition(only(released, m.FETCH, 3))
    assert (fetch["current_leader_epoch"], fetch["fetch_offset"], fetch["last_fetched_epoch"]) == (4, 0, 0)


def test_begin_quorum_epoch_of_an_older_epoch_is_fenced() -> None:
    h = Harness(quorum_state=QuorumStateRecord(5, -1, None))
    p = partition(only(h.begin_epoch(3, 4), m.BEGIN_QUORUM_EPOCH, 3))
    assert (p["error_code"], p["leader_epoch"]) == (ErrorCode.FENCED_LEADER_EPOCH, 5)
    assert h.node.role is Role.UNATTACHED


def test_restart_resumes_from_the_durable_election_state() -> None:
    assert Harness(quorum_state=QuorumStateRecord(3, 1, VoterKey(1))).node.role is Role.RESIGNED
    candidate = Harness(quorum_state=QuorumStateRecord(3, -1, VoterKey(1))).node
    assert (candidate.role, candidate.epoch) == (Role.CANDIDATE, 3)
    follower = Harness(quorum_state=QuorumStateRecord(3, 2, VoterKey(2))).node
    assert (follower.role, follower.leader_id) == (Role.FOLLOWER, 2)
    voted = Harness(quorum_state=QuorumStateRecord(3, -1, VoterKey(2)))
    assert partition(only(voted.vote(3, 3), m.VOTE, 3))["vote_granted"] is False


def test_prospective_votes_like_an_unattached_voter() -> None:
    h = Harness(quorum_state=QuorumStateRecord(2, -1, None))
    h.run_to_deadline()
    assert (h.node.role, h.node.epoch) == (Role.PROSPECTIVE, 2)
    h.vote(2, 2)  # a candidate of this very epoch while this node only asks for pre-votes
    reply = partition(only(h.persist(), m.VOTE, 2))
    assert reply["vote_granted"] is True
    assert (h.node.role, h.node.stored_state) == (Role.UNATTACHED, QuorumStateRecord(2, -1, VoterKey(2)))
    assert partition(only(h.vote(3, 2), m.VOTE, 3))["vote_granted"] is False


def test_a_lost_begin_quorum_epoch_is_sent_again_once_it_times_out() -> None:
    """As Kafka's RequestManager, a request that timed out leaves its destination ready at once
    (only an error response backs off): the leader's next BeginQuorumEpoch round, every half fetch
    timeout, sends it again, before check quorum (1.5 fetch timeouts) would make it resign."""
    h = Harness()
    elect(h)
    elected_ms = h.now

    def begins_to_3(sent: list[m.RaftMessage]) -> int:
        return sum(x.api_key == m.BEGIN_QUORUM_EPOCH and x.destination == 3 and not x.is_response for x in sent)

    sent_at = [0] * begins_to_3(h.sent + h.settle())
    h.respond(only(h.sent, m.BEGIN_QUORUM_EPOCH, 2), {"error_code": 0, "topics": [], "node_endpoints": []})
    while h.now - elected_ms < 2900:
        sent = h.advance(100)
        sent_at += [h.now - elected_ms] * begins_to_3(sent)
    assert sent_at == [0, 2000]  # the first lost, the second once the first timed out (request.timeout.ms)
    assert h.node.role is Role.LEADER
