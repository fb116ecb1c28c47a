"""The Raft quorum under the deterministic simulation: a thousand seeds per scenario family, with
Kafka's invariants after every event and liveness at the end; one seed replays exactly; and each
invariant catches a node broken on purpose (its negative control)."""

from __future__ import annotations

import dataclasses

import pytest

from kafkalike.protocol.api import RequestHeader, decode_request, encode_request
from kafkalike.raft.config import VoterKey
from kafkalike.raft.messages import VOTE, partition_of, vote_request
from kafkalike.raft.node import RaftNode, SendMessage
from kafkalike.raft.state import Role, Unattached
from kafkalike.raft.voters import VoterNode
from kafkalike.testing.raft_scenarios import FAMILIES, WIRE, Family, run_seed
from kafkalike.testing.raft_simulation import Invariants, InvariantViolation, NodeFactory

SEEDS_PER_FAMILY = 1000
# A seed of the dynamic-voters family is ten times the events of the others: half as many seeds
# here (scripts/simulate.py runs thousands).
SEEDS_OF_FAMILY = {"voters_change_under_faults": 500}


def first_violation(
    family: Family, seeds: range, node_factory: NodeFactory = RaftNode, unchecked: frozenset[str] = frozenset()
) -> InvariantViolation | None:
    for seed in seeds:
        try:
            run_seed(family, seed, node_factory=node_factory, unchecked=unchecked)
        except InvariantViolation as violation:
            return violation
    return None


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_holds_every_invariant_over_its_seeds(name: str) -> None:
    violation = first_violation(FAMILIES[name], range(SEEDS_OF_FAMILY.get(name, SEEDS_PER_FAMILY)))
    assert violation is None, str(violation)


def test_voters_change_and_every_answer_is_kafkas() -> None:
    """Over many seeds, voters are added and removed (KIP-853), each change committed before the
    next, and the admin only ever hears answers Kafka gives."""
    answers: dict[str, int] = {}
    for seed in range(40):
        sim = run_seed(FAMILIES["voters_change_under_faults"], seed)
        for name, count in sim.voter_changes.items():
            answers[name] = answers.get(name, 0) + count
        leader = sim.leader()
        assert leader is not None and leader.is_voter
    assert answers.get("NONE", 0) >= 80, answers
    assert set(answers) <= {"NONE", "REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER", "DUPLICATE_VOTER", "VOTER_NOT_FOUND"}


def test_messages_survive_the_codec() -> None:
    """Every message, encoded and decoded by the project's codec on its way, pre-votes as Vote v2."""
    violation = first_violation(WIRE, range(100))
    assert violation is None, str(violation)


def test_bootstrap_observers_find_and_follow_the_leader_by_its_endpoint() -> None:
    sim = run_seed(FAMILIES["bootstrap_observers_following"], 0)
    leader = sim.leader()
    assert leader is not None
    for node_id in sim.bootstrap_observer_ids:
        observer = sim.nodes[node_id].node
        assert observer is not None and not observer.config.voters
        assert observer.leader_id == leader.node_id
        assert observer.endpoints[leader.node_id] == (f"node-{leader.node_id}", 9093)


def test_a_seed_replays_exactly() -> None:
    family = FAMILIES["leader_partitioned"]
    first = run_seed(family, 7, trace=True)
    second = run_seed(family, 7, trace=True)
    assert first.trace == second.trace
    assert first.trace is not None and len(first.trace) > 100
    other = run_seed(family, 8, trace=True)
    assert other.trace != first.trace


def test_a_violation_names_its_seed_and_the_replay_command() -> None:
    violation = first_violation(FAMILIES["leader_killed"], range(5), node_factory=HighWatermarkWithoutMajority)
    assert violation is not None
    assert "seed 0" in str(violation)
    assert "python scripts/simulate.py --family leader_killed --seed 0" in str(violation)


# -- negative controls: nodes broken on purpose ---------------------------------------------------


class VotesTwiceInAnEpoch(RaftNode):
    """Votes again in an epoch, for any other candidate with an up-to-date log, and records the new
    vote on disk (so that only the single-leader invariant can tell)."""

    def _can_grant_vote(self, candidate, log_ok, pre_vote, now_ms):  # type: ignore[no-untyped-def]
        state = self.state
        if not pre_vote and log_ok and isinstance(state, Unattached) and state.voted_for not in (None, candidate):
            state.voted_for = None
            return True
        return super()._can_grant_vote(candidate, log_ok, pre_vote, now_ms)


class IgnoresTheLogCheck(RaftNode):
    """Grants votes to candidates whose logs are behind its own."""

    def _can_grant_vote(self, candidate, log_ok, pre_vote, now_ms):  # type: ignore[no-untyped-def]
        return super()._can_grant_vote(candidate, True, pre_vote, now_ms)


class HighWatermarkWithoutMajority(RaftNode):
    """Commits whatever the leader has written."""

    def _update_high_watermark(self, leader):  # type: ignore[no-untyped-def]
        if self.log.end_offset > (leader.high_watermark or 0):
            leader.high_watermark = self.high_watermark = self.log.end_offset
            return True
        return False


class AnswersBeforeTheDiskHasIt(RaftNode):
    """Sends votes (and everything else) before the quorum-state write is durable."""

    def _emit(self, message):  # type: ignore[no-untyped-def]
        self._held.append(message)
        held, self._held = self._held, []
        self._outputs.extend(SendMessage(x) for x in held)


class KeepsItsDivergingTail(RaftNode):
    """Does not truncate when the leader answers with a diverging epoch."""

    def _truncate_diverging(self, epoch, end_offset, now_ms):  # type: ignore[no-untyped-def]
        return None


class LosesItsSnapshot(RaftNode):
    """Deletes the log before a snapshot, then loses the snapshot itself."""

    def snapshot(self, end_offset, data, now_ms):  # type: ignore[no-untyped-def]
        snapshot_id = super().snapshot(end_offset, data, now_ms)
        self.log._snapshots.clear()  # type: ignore[attr-defined]
        return snapshot_id


class LeaderLoadsItsSnapshot(RaftNode):
    """Loads its own snapshot into its log while leading."""

    def snapshot(self, end_offset, data, now_ms):  # type: ignore[no-untyped-def]
        snapshot_id = super().snapshot(end_offset, data, now_ms)
        if self.role is Role.LEADER:
            self.log.install_snapshot(snapshot_id, data)
        return snapshot_id


class ServesACorruptSnapshot(RaftNode):
    """Flips the last byte of the first batch of the snapshots it serves."""

    def _handle_fetch_snapshot(self, body, p, now_ms):  # type: ignore[no-untyped-def]
        response = super()._handle_fetch_snapshot(body, p, now_ms)
        part = response["topics"][0]["partitions"][0]
        chunk = bytearray(part["unaligned_records"])
        if p["position"] == 0 and len(chunk) >= 12:
            end = int.from_bytes(chunk[8:12], "big") + 12
            if end <= len(chunk):
                chunk[end - 1] ^= 0xFF
                part["unaligned_records"] = bytes(chunk)
        return response


class KeepsFetchesParkedOnANewHighWatermark(RaftNode):
    """Answers parked fetches on new records and at their deadline, not when the high watermark moves."""

    def _complete_parked_fetches(self, now_ms, *, only_due, except_source=None, below=None):  # type: ignore[no-untyped-def]
        if only_due or below is not None:
            super()._complete_parked_fetches(now_ms, only_due=only_due, except_source=except_source, below=below)


class AddsTwoVotersAtOnce(RaftNode):
    """Adds another observer along with the one asked for."""

    def _append_voters(self, leader, voters, now_ms):  # type: ignore[no-untyped-def]
        extra = sorted({4, 5} - voters.ids - self.voters.ids)
        if len(voters) > len(self.voters) and extra:
            voters = voters.add(VoterNode(VoterKey(extra[0]), (("CONTROLLER", f"node-{extra[0]}", 9093),)))
        return super()._append_voters(leader, voters, now_ms)


class CountsItselfOnceRemoved(RaftNode):
    """A leader removing itself still counts its own log toward the high watermark."""

    def _update_high_watermark(self, leader):  # type: ignore[no-untyped-def]
        if not leader.update_high_watermark(self.log.durable_end_offset, self.voters.majority):
            return False
        self.high_watermark = leader.high_watermark
        self._voter_change_committed(leader)
        if not self.is_voter and self.history.latest_offset() < self.high_watermark:
            leader.resign_requested = True
        return True


ONE_VOTE = frozenset({Invariants.ONE_VOTE_PER_EPOCH})


@pytest.mark.parametrize(
    ("broken", "family", "unchecked", "expected"),
    [
        # The disk check sees the second vote first; without it, two leaders of one epoch follow.
        (VotesTwiceInAnEpoch, "leader_killed", frozenset(), "one vote per epoch"),
        (VotesTwiceInAnEpoch, "leader_killed", ONE_VOTE, "single leader"),
        (IgnoresTheLogCheck, "leader_partitioned", frozenset(), "consistent committed data"),
        (HighWatermarkWithoutMajority, "leader_killed", frozenset(), "majority reached the high watermark"),
        (AnswersBeforeTheDiskHasIt, "leader_killed", frozenset(), "durable before sending"),
        (KeepsItsDivergingTail, "leader_partitioned", frozenset(), "liveness"),
        (LosesItsSnapshot, "follower_behind_the_log_start", frozenset(), "snapshot at log start"),
        (LeaderLoadsItsSnapshot, "follower_behind_the_log_start", frozenset(), "leader never loads a snapshot"),
        (ServesACorruptSnapshot, "follower_behind_the_log_start", frozenset(), "consistent committed data"),
        (KeepsFetchesParkedOnANewHighWatermark, "leader_killed", frozenset(), "high watermark pushed"),
        (AddsTwoVotersAtOnce, "voters_change_under_faults", frozenset(), "one voter change at a time"),
        (CountsItselfOnceRemoved, "voters_change_under_faults", frozenset(), "majority reached the high watermark"),
    ],
)
def test_negative_control_is_caught(
    broken: type[RaftNode], family: str, unchecked: frozenset[str], expected: str
) -> None:
    violation = first_violation(FAMILIES[family], range(SEEDS_PER_FAMILY), broken, unchecked)
    assert violation is not None, f"{broken.__name__} ran {SEEDS_PER_FAMILY} seeds of {family} unnoticed"
    assert expected in str(violation), str(violation)


def test_a_pre_vote_stays_a_pre_vote_through_the_codec() -> None:
    """Vote v2 carries the flag; at v1, which has no such field, it would arrive as a binding vote."""
    body = vote_request("c", VoterKey(1), 3, VoterKey(2), 0, 0, pre_vote=True)
    header = RequestHeader(VOTE, 2, 7, "node-1")
    _, decoded = decode_request(encode_request(header, body)[4:])
    assert partition_of(decoded)["pre_vote"] is True
    assert partition_of(decoded)["replica_epoch"] == 3
    _, old = decode_request(encode_request(dataclasses.replace(header, api_version=1), body)[4:])
    assert partition_of(old)["pre_vote"] is False  # the default of a field the version lacks
