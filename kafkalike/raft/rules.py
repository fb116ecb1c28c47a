"""The quorum's rules as plain functions of state, each the counterpart of a Kafka method: who may
get a vote, how long to back off, where a follower's log parts from the leader's, where to cut it."""

from __future__ import annotations

import random

from kafkalike.raft.config import ELECTION_BACKOFF_BASE_MS, VoterKey
from kafkalike.raft.log import OffsetAndEpoch, RaftLog
from kafkalike.raft.state import Election, EpochState, Follower, Leader, QuorumStateRecord, Resigned, Role, Unattached


def can_grant_vote(
    state: EpochState, stored: QuorumStateRecord, candidate: VoterKey, log_ok: bool, pre_vote: bool
) -> bool:
    """Kafka's EpochState.canGrantVote, state by state (``state`` already in the request's epoch for
    a real vote). A pre-vote binds nothing: only a live leader, or a follower that hears from one,
    refuses a candidate whose log is up to date. A real vote goes to one candidate per epoch."""
    if isinstance(state, (Leader, Resigned)):
        return False
    if pre_vote:
        if isinstance(state, Follower) and state.has_fetched:
            return False  # the leader is alive as far as this voter knows
        return log_ok
    if isinstance(state, Unattached):
        if state.voted_for is not None:
            return state.voted_for.matches(candidate.node_id, candidate.directory_id)
        return log_ok
    if isinstance(state, Election) and state.role is Role.PROSPECTIVE:
        # A prospective has not moved to a new epoch: it votes as an unattached voter would, keeping
        # a vote it gave in this epoch before its own round started.
        voted = stored.voted_for if stored.epoch == state.epoch else None
        if voted is not None:
            return voted.matches(candidate.node_id, candidate.directory_id)
        return log_ok
    return False  # a candidate voted for itself; a follower's epoch has a leader


def election_backoff_ms(rng: random.Random, retries: int, max_ms: int) -> int:
    """Kafka's binaryExponentialElectionBackoffMs: random, doubling its range with each retry."""
    bound = 2 << min(20, retries - 1)
    return min(ELECTION_BACKOFF_BASE_MS * rng.randrange(bound), max_ms)


def end_epoch_backoff_ms(node_id: int, successors: list[int], max_ms: int) -> int:
    """Kafka's strictExponentialElectionBackoffMs: after a resignation the most caught-up voter runs
    at once, the next ones later and later, the rest after ``max_ms``."""
    if node_id not in successors:
        return max_ms
    position = successors.index(node_id)
    if position == 0:
        return 0
    base = max_ms >> (len(successors) - 1)
    return min(max_ms, base << (position - 1))


def snapshot_for_fetch(log: RaftLog, fetch_offset: int, last_epoch: int) -> OffsetAndEpoch | None:
    """The snapshot a fetcher must download first (the latest), or None. As Kafka: a fetcher with an
    empty log, or one whose position the log no longer holds (before its start, or at its start in
    another epoch, or in an epoch older than the earliest snapshot)."""
    latest = log.latest_snapshot_id()
    if latest is None:
        return None
    if fetch_offset == 0:
        # A snapshot at offset 0 (a bootstrap one) holds no record the log lacks.
        return latest if latest.offset > 0 else None
    earliest = log.earliest_snapshot_id()
    assert earliest is not None
    start = log.start_offset
    if fetch_offset < start or (fetch_offset == start and last_epoch != earliest.epoch) or last_epoch < earliest.epoch:
        return latest
    return None


def diverging_epoch(log: RaftLog, fetch_offset: int, last_epoch: int) -> tuple[int, int] | None:
    """Kafka's validateOffsetAndEpoch (no snapshots yet): None when the fetcher's log matches ours up
    to ``fetch_offset``, else our (epoch, end offset) where it parts from ours."""
    if fetch_offset == 0 and last_epoch == 0 and log.start_offset == 0:
        return None
    end = log.end_offset_for_epoch(last_epoch)
    if end.epoch != last_epoch or end.offset < fetch_offset:
        return (end.epoch, end.offset)
    return None


def truncation_offset(log: RaftLog, epoch: int, end_offset: int) -> int:
    """Kafka's ReplicatedLog.truncateToEndOffset: where a follower cuts its log when the leader says
    that its ``epoch`` ends at ``end_offset``."""
    if epoch == 0:
        return min(end_offset, log.end_offset)
    local = log.end_offset_for_epoch(epoch)
    return min(local.offset, end_offset) if local.epoch == epoch else local.offset
