"""Replication step by step: fetch validation and DivergingEpoch, truncation, the high watermark
rules, fetch timeout, resignation, check quorum and observers."""

from __future__ import annotations

import pytest
from rafttest_harness import CLUSTER, Harness, elect, fetch_ok, fill_log, only, partition

from kafkalike.protocol.api import encode_response
from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterKey
from kafkalike.raft.describe import describe_quorum
from kafkalike.raft.log import MemoryRaftLog
from kafkalike.raft.node import NotLeaderError
from kafkalike.raft.records import data_batch, record_values
from kafkalike.raft.state import QuorumStateRecord, Role


def leader_over(epochs: list[tuple[int, int]], quorum_epoch: int) -> Harness:
    """Node 1 elected leader of epoch ``quorum_epoch + 1`` over a log of ``epochs``."""
    log = MemoryRaftLog()
    fill_log(log, epochs)
    h = Harness(log=log, quorum_state=QuorumStateRecord(quorum_epoch, -1, None))
    elect(h)
    h.flush()
    return h


def fetch_answer(h: Harness, replica: int, offset: int, last_epoch: int) -> dict:
    response = only(h.fetch(replica, h.node.epoch, offset, last_epoch), m.FETCH, replica)
    assert response.is_response
    return partition(response)


# -- leader: validating fetches -------------------------------------------------------------------


def test_fetch_on_the_leaders_log_returns_records() -> None:
    h = leader_over([(1, 3), (2, 2)], quorum_epoch=2)  # leader of 3; LeaderChange at offset 5
    p = fetch_answer(h, 2, 4, 2)
    assert p["diverging_epoch"]["epoch"] == -1
    assert p["current_leader"] == {"leader_id": 1, "leader_epoch": 3}
    assert bytes(p["records"]) == h.log.read(4, 1 << 20)


@pytest.mark.parametrize(
    ("offset", "last_epoch", "diverging"),
    [
        (6, 2, (2, 5)),  # the follower has more of epoch 2 than the leader
        (4, 1, (1, 3)),  # epoch 1 ended at 3 on the leader
        (2, 0, (0, 0)),  # an epoch the leader never had: below its first
    ],
)
def test_fetch_past_where_the_logs_part_gets_diverging_epoch(
    offset: int, last_epoch: int, diverging: tuple[int, int]
) -> None:
    h = leader_over([(1, 3), (2, 2)], quorum_epoch=2)
    p = fetch_answer(h, 2, offset, last_epoch)
    assert (p["diverging_epoch"]["epoch"], p["diverging_epoch"]["end_offset"]) == diverging
    assert not p["records"]


def test_fetch_errors_name_the_current_leader() -> None:
    h = leader_over([], quorum_epoch=0)
    stale = partition(only(h.fetch(2, 0, 0, 0), m.FETCH, 2))
    assert stale["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    assert stale["current_leader"] == {"leader_id": 1, "leader_epoch": 1}
    ahead = partition(only(h.fetch(2, 2, 0, 0), m.FETCH, 2))
    assert ahead["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
    invalid = partition(only(h.fetch(2, 1, 0, 2), m.FETCH, 2))  # last fetched epoch beyond the current
    assert invalid["error_code"] == ErrorCode.INVALID_REQUEST


def test_fetch_to_a_follower_is_not_leader_or_follower() -> None:
    h = Harness()
    h.begin_epoch(3, 1)
    h.persist()
    p = partition(only(h.fetch(4, 1, 0, 0), m.FETCH, 4))
    assert p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p["current_leader"] == {"leader_id": 3, "leader_epoch": 1}


def test_fetch_with_nothing_new_waits_for_data() -> None:
    h = leader_over([], quorum_epoch=0)
    assert h.fetch(2, 1, 1, 1, max_wait_ms=500) == []  # parked
    h.node.append([b"v"], h.now)
    p = partition(only(h.collect(), m.FETCH, 2))
    assert [*record_values(bytes(p["records"]))] == [b"v"]


def test_parked_fetch_is_answered_empty_at_its_deadline() -> None:
    h = leader_over([], quorum_epoch=0)
    h.fetch(2, 1, 1, 1, max_wait_ms=500)
    assert [x for x in h.advance(499) if x.api_key == m.FETCH] == []
    p = partition(only(h.advance(1), m.FETCH, 2))
    assert not p["records"]


# -- the high watermark ---------------------------------------------------------------------------


def test_high_watermark_needs_a_majority() -> None:
    h = leader_over([], quorum_epoch=0)  # LeaderChange at 0, flushed
    assert h.node.high_watermark is None  # the leader alone is no majority of three
    fetch_answer(h, 2, 0, 0)
    assert h.node.high_watermark is None  # node 2 has not got offset 0 yet
    p = fetch_answer(h, 2, 1, 1)
    assert h.node.high_watermark == 1
    assert p["high_watermark"] == 1


def test_leader_counts_only_its_durable_log() -> None:
    h = leader_over([], quorum_epoch=0)
    fetch_answer(h, 2, 1, 1)
    assert h.node.high_watermark == 1
    h.node.append([b"a"], h.now)  # offset 1, written but not flushed on the leader
    h.collect()
    fetch_answer(h, 2, 2, 1)  # node 2 has offset 1 on disk; the leader does not yet
    assert h.node.high_watermark == 1
    h.flush()
    assert h.node.high_watermark == 2


def test_records_of_older_epochs_wait_for_one_of_the_leaders_own() -> None:
    h = leader_over([(1, 3)], quorum_epoch=1)  # leader of 2, LeaderChange at offset 3
    fetch_answer(h, 2, 3, 1)  # node 2 has everything of epoch 1
    assert h.node.high_watermark is None  # 3 is not past the epoch's start
    fetch_answer(h, 2, 4, 2)
    assert h.node.high_watermark == 4


def test_follower_learns_the_high_watermark_and_appends() -> None:
    h = Harness()
    h.begin_epoch(3, 1)
    fetch = only(h.persist(), m.FETCH, 3)
    records = data_batch([b"a", b"b"], base_offset=0, epoch=1, timestamp_ms=0)
    h.respond(fetch, fetch_ok(1, 3, 2, records))
    assert h.node.high_watermark == 2
    assert h.log.end_offset == 2
    assert h.flushes[-1] == 2
    assert h.collect() == []  # no next fetch until the appended records are durable
    nxt = partition(only(h.flush(), m.FETCH, 3))
    assert (nxt["fetch_offset"], nxt["last_fetched_epoch"]) == (2, 1)


# -- the high watermark pushed (KIP-1166, as Kafka 4.4) ---------------------------------------------


def test_fetch_from_a_follower_behind_the_high_watermark_is_answered_at_once() -> None:
    h = leader_over([], quorum_epoch=0)
    fetch_answer(h, 2, 1, 1)  # the high watermark moves to 1
    p = partition(only(h.fetch(3, 1, 1, 1, max_wait_ms=500, high_watermark=0), m.FETCH, 3))
    assert not p["records"]
    assert p["high_watermark"] == 1
    assert h.fetch(3, 1, 1, 1, max_wait_ms=500, high_watermark=1) == []  # nothing new: parked


def test_the_fetch_that_moves_the_high_watermark_learns_it_at_once() -> None:
    h = leader_over([], quorum_epoch=0)
    assert h.node.high_watermark is None
    p = partition(only(h.fetch(2, 1, 1, 1, max_wait_ms=500, high_watermark=None), m.FETCH, 2))
    assert h.node.high_watermark == 1
    assert p["high_watermark"] == 1


def test_a_new_high_watermark_completes_every_parked_fetch() -> None:
    h = leader_over([], quorum_epoch=0)
    fetch_answer(h, 2, 1, 1)
    h.node.append([b"a"], h.now)
    h.flush()
    # Observers 4 and 5 have everything and know high watermark 1: parked (they count for nothing).
    assert h.fetch(4, 1, 2, 1, max_wait_ms=500, high_watermark=1) == []
    assert h.fetch(5, 1, 2, 1, max_wait_ms=500, high_watermark=1) == []
    assert h.node.parked_fetches() == {4: 1, 5: 1}
    # Voter 2 reports offset 2 on disk: the high watermark moves to 2, and everyone hears at once.
    sent = h.fetch(2, 1, 2, 1, max_wait_ms=500, high_watermark=1)
    assert sorted(x.destination for x in sent if x.api_key == m.FETCH) == [2, 4, 5]
    assert {partition(x)["high_watermark"] for x in sent} == {2}
    assert h.node.parked_fetches() == {}


def test_new_records_complete_only_fetches_below_the_new_end() -> None:
    h = leader_over([], quorum_epoch=0)
    fetch_answer(h, 2, 1, 1)
    assert h.fetch(3, 1, 1, 1, max_wait_ms=500, high_watermark=1) == []
    h.node.append([b"a"], h.now)
    p = partition(only(h.collect(), m.FETCH, 3))
    assert [*record_values(bytes(p["records"]))] == [b"a"]


def test_follower_keeps_the_high_watermark_within_its_log_and_reports_it() -> None:
    h = Harness()
    h.begin_epoch(3, 1)
    fetch = only(h.persist(), m.FETCH, 3)
    assert partition(fetch)["high_watermark"] == -1  # knows none yet
    records = data_batch([b"a", b"b"], base_offset=0, epoch=1, timestamp_ms=0)
    h.respond(fetch, fetch_ok(1, 3, 5, records))  # the leader's is past what it sent
    assert h.node.high_watermark == 2
    nxt = partition(only(h.flush(), m.FETCH, 3))
    assert (nxt["fetch_offset"], nxt["high_watermark"]) == (2, 2)


def test_a_fetch_before_v18_is_never_answered_early_for_the_high_watermark() -> None:
    h = leader_over([], quorum_epoch=0)
    fetch_answer(h, 2, 1, 1)
    body = m.fetch_request(CLUSTER, VoterKey(3), 1, 1, 1, 500, 1 << 20)
    del body["topics"][0]["partitions"][0]["high_watermark"]  # as a v17 request decodes
    assert h.deliver(3, m.FETCH, body) == []


# -- the follower: truncation ---------------------------------------------------------------------


def test_follower_truncates_to_the_diverging_epoch_and_fetches_again() -> None:
    log = MemoryRaftLog()
    fill_log(log, [(1, 3), (2, 3)])  # 0-2 in epoch 1, 3-5 in epoch 2 (from a leader that lost)
    h = Harness(log=log, quorum_state=QuorumStateRecord(2, -1, None))
    h.begin_epoch(3, 3)
    fetch = only(h.persist(), m.FETCH, 3)
    assert (partition(fetch)["fetch_offset"], partition(fetch)["last_fetched_epoch"]) == (6, 2)
    sent = h.respond(fetch, fetch_ok(3, 3, -1, diverging=(1, 3)))
    assert h.log.end_offset == 3
    again = partition(only(sent, m.FETCH, 3))
    assert (again["fetch_offset"], again["last_fetched_epoch"]) == (3, 1)


def test_truncation_is_capped_by_the_followers_own_epoch_end() -> None:
    log = MemoryRaftLog()
    fill_log(log, [(1, 2), (3, 2)])  # epoch 1 ends at 2 here
    h = Harness(log=log, quorum_state=QuorumStateRecord(3, -1, None))
    h.begin_epoch(2, 4)
    fetch = only(h.persist(), m.FETCH, 2)
    h.respond(fetch, fetch_ok(4, 2, -1, diverging=(2, 5)))  # leader: epoch 2 ends at 5
    assert h.log.end_offset == 2  # our largest epoch at most 2 is 1, which ends at 2


# -- timeouts, resignation, observers -------------------------------------------------------------


def test_fetch_timeout_makes_the_follower_run() -> None:
    h = Harness()
    h.begin_epoch(3, 1)
    h.persist()
    h.advance(h.config.fetch_timeout_ms - 1)
    assert h.node.role is Role.FOLLOWER
    h.advance(1)
    assert h.node.role is Role.PROSPECTIVE


def test_resign_sends_end_quorum_epoch_with_the_most_caught_up_first() -> None:
    h = leader_over([], quorum_epoch=0)
    fetch_answer(h, 3, 1, 1)
    fetch_answer(h, 2, 0, 0)
    h.node.resign(h.now)
    end = [x for x in h.collect() if x.api_key == m.END_QUORUM_EPOCH]
    assert sorted(x.destination for x in end) == [2, 3]
    assert partition(end[0])["preferred_successors"] == [3, 2]
    assert h.node.role is Role.RESIGNED
    with pytest.raises(NotLeaderError):
        h.node.append([b"late"], h.now)
    refused = partition(only(h.fetch(2, 1, 1, 1), m.FETCH, 2))
    assert refused["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_end_quorum_epoch_lets_the_first_successor_run_at_once() -> None:
    h = Harness()
    h.begin_epoch(3, 1)
    h.persist()
    h.end_epoch(3, 1, [1, 2])
    assert h.node.role is Role.PROSPECTIVE
    later = Harness()
    later.begin_epoch(3, 1)
    later.persist()
    later.end_epoch(3, 1, [2, 1])
    assert later.node.role is Role.FOLLOWER  # second in line waits its backoff
    later.advance(later.config.election_backoff_max_ms // 2)
    assert later.node.role is Role.PROSPECTIVE


def test_leader_without_a_fetching_majority_resigns() -> None:
    h = leader_over([], quorum_epoch=0)
    h.advance(int(h.config.fetch_timeout_ms * 1.5) - 1)
    assert h.node.role is Role.LEADER
    h.advance(1)
    assert h.node.role is Role.RESIGNED


def test_append_only_on_the_leader() -> None:
    h = Harness()
    with pytest.raises(NotLeaderError):
        h.node.append([b"x"], 0)
    elect(h)
    assert h.node.append([b"x"], 0) == 1


def test_observer_finds_the_leader_through_any_voter() -> None:
    h = Harness(node_id=4)
    probe = only(h.advance(0), m.FETCH)
    assert probe.destination in (1, 2, 3)
    h.respond(probe, m.fetch_response(ErrorCode.NOT_LEADER_OR_FOLLOWER, 2, 3, -1, 0))
    assert (h.node.role, h.node.epoch, h.node.leader_id) == (Role.FOLLOWER, 2, 3)
    fetch = partition(only(h.persist(), m.FETCH, 3))
    assert fetch["current_leader_epoch"] == 2


# -- DescribeQuorum -------------------------------------------------------------------------------


def test_describe_quorum_reports_each_voter_and_observer() -> None:
    h = leader_over([], quorum_epoch=0)
    h.now += 10
    fetch_answer(h, 2, 1, 1)  # caught up: the leader's end is 1
    h.fetch(4, 1, 0, 0)  # an observer, behind
    h.collect()
    body = describe_quorum(h.node, h.now + 5)
    encode_response(55, 2, 7, body)  # the codec takes it as it is
    (p,) = body["topics"][0]["partitions"]
    assert (p["error_code"], p["leader_id"], p["leader_epoch"], p["high_watermark"]) == (0, 1, 1, 1)
    voters = {v["replica_id"]: v for v in p["current_voters"]}
    assert voters[1]["log_end_offset"] == 1
    assert voters[1]["last_fetch_timestamp"] == h.now + 5  # the leader itself: "now", as Kafka
    assert (voters[2]["log_end_offset"], voters[2]["last_caught_up_timestamp"]) == (1, h.now)
    assert (voters[3]["log_end_offset"], voters[3]["last_fetch_timestamp"]) == (-1, -1)
    (observer,) = p["observers"]
    assert (observer["replica_id"], observer["log_end_offset"], observer["last_caught_up_timestamp"]) == (4, 0, -1)


def test_describe_quorum_on_a_follower_is_not_leader_or_follower() -> None:
    h = Harness()
    h.begin_epoch(3, 1)
    (p,) = describe_quorum(h.node, 0)["topics"][0]["partitions"]
    assert p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
