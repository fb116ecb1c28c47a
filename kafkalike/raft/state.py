"""The states of one quorum node, and the rules of moving between them.

Roles as KRaft names them (``QuorumState``), plus KIP-996's prospective state:

- **unattached**: knows the epoch but no leader; may have voted (``voted_for``) in this epoch.
  Voter: on election timeout -> prospective (or candidate without pre-vote). Observer: fetches from
  any voter to learn the leader.
- **prospective**: asks the voters for pre-votes for ``epoch + 1``, which bind nobody and bump no
  epoch; a majority -> candidate; may still follow the leader it knew, and rejoins it as follower.
- **candidate**: has bumped the epoch and voted for itself; a majority of votes -> leader; election
  timeout or a majority of rejections -> backoff, then prospective again.
- **leader**: writes LeaderChange first, replicates by answering fetches, advances the high
  watermark; resigns (-> resigned) on request or when no majority has fetched within
  1.5 x fetch timeout (check quorum).
- **follower**: fetches from the leader of its epoch; fetch timeout -> prospective (voters) or
  unattached (observers).
- **resigned**: a former leader that stopped accepting appends and told the voters (EndQuorumEpoch);
  on election timeout -> prospective.

From any state, learning of a higher epoch -> unattached in it (follower when the leader is known);
learning of the leader of the current epoch -> follower. Observers are only unattached or follower.
Each state is a plain record; :class:`~kafkalike.raft.node.RaftNode` makes the transitions.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kafkalike.raft.config import NO_DIRECTORY_ID, VoterKey
from kafkalike.raft.log import OffsetAndEpoch


class Role(Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(frozen=True, slots=True)
class QuorumStateRecord:
    """What the quorum-state file holds (Kafka's ElectionState): written durably before any message
    that depends on it leaves the node."""

    epoch: int
    leader_id: int = -1
    voted_for: VoterKey | None = None


@dataclass(slots=True)
class Unattached:
    epoch: int
    election_deadline_ms: int
    voted_for: VoterKey | None = None
    role: Role = Role.UNATTACHED


@dataclass(slots=True)
class Election:
    """A prospective's or candidate's round: who granted, who refused, when it times out."""

    epoch: int
    election_deadline_ms: int
    retries: int = 1
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until_ms: int | None = None
    # A prospective keeps following the leader it knew, so that it rejoins it when it answers.
    leader_id: int = -1
    role: Role = Role.CANDIDATE


# Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS: an observer silent this long is forgotten.
OBSERVER_SESSION_TIMEOUT_MS = 300_000


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica: its log end (validated fetch offset), fetch times."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end: int = -1
    acknowledged: bool = False
    directory_id: uuid.UUID = NO_DIRECTORY_ID  # as its last fetch named it

    def record_fetch(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        """Kafka's ReplicaState.updateFollowerState: caught up when the fetch reaches the leader's
        end now, or the end the leader had at the previous fetch (caught up as of that fetch)."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif self.last_fetch_leader_end > 0 and fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.last_fetch_leader_end = leader_end_offset
        self.last_fetch_ms = max(self.last_fetch_ms, now_ms)
        self.end_offset = fetch_offset
        self.acknowledged = True


# Kafka's LeaderState.isReplicaCaughtUp: an observer that caught up with the leader within the last
# hour may become a voter.
CAUGHT_UP_FOR_ADD_VOTER_MS = 3_600_000


@dataclass(slots=True)
class VoterChange:
    """An AddRaftVoter or RemoveRaftVoter the leader is carrying out (one at a time, KIP-853): the
    request to answer, until when, and the offset of its VotersRecord once appended."""

    request: Any  # the RaftMessage to answer
    voter: VoterKey
    deadline_ms: int
    adding: Any = None  # the VoterNode to add, while its ApiVersions answer is awaited
    last_offset: int | None = None
    ack_when_committed: bool = True


@dataclass(slots=True)
class Leader:
    """The leader's view of its epoch (Kafka's LeaderState)."""

    epoch: int
    epoch_start_offset: int
    replicas: dict[int, ReplicaProgress]  # the other voters
    check_quorum_deadline_ms: int
    begin_epoch_deadline_ms: int = 0
    granting_voters: frozenset[int] = frozenset()
    observers: dict[int, ReplicaProgress] = field(default_factory=dict)
    fetched_voters: set[int] = field(default_factory=set)
    high_watermark: int | None = None
    resign_requested: bool = False
    voter_change: VoterChange | None = None
    role: Role = Role.LEADER

    def record_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        leader_end_offset: int,
        now_ms: int,
        directory_id: uuid.UUID = NO_DIRECTORY_ID,
    ) -> bool:
        """A validated fetch; True when it came from a voter (whose offset counts)."""
        progress = self.replicas.get(replica_id)
        is_voter = progress is not None
        if progress is None:
            if replica_id < 0:
                return False  # an anonymous reader, not a replica
            progress = self.observers.setdefault(replica_id, ReplicaProgress())
        progress.record_fetch(fetch_offset, leader_end_offset, now_ms)
        progress.directory_id = directory_id
        return is_voter

    def note_voter_fetched(self, replica_id: int, needed: int, now_ms: int, timeout_ms: int) -> None:
        """Kafka's updateCheckQuorumForFollowingVoter: ``needed`` other voters (a majority, less
        the leader when it is a voter) fetched in this interval -> the check-quorum timer restarts."""
        self.fetched_voters.add(replica_id)
        if len(self.fetched_voters) >= needed:
            self.fetched_voters.clear()
            self.check_quorum_deadline_ms = now_ms + timeout_ms

    def is_caught_up_observer(self, key: VoterKey, now_ms: int) -> bool:
        """Kafka's isReplicaCaughtUp: an observer with this key that fetched and caught up."""
        progress = self.observers.get(key.node_id)
        return (
            progress is not None
            and key.matches(key.node_id, progress.directory_id)
            and progress.last_caught_up_ms > 0
            and progress.last_fetch_ms > 0
            and progress.last_fetch_ms > now_ms - CAUGHT_UP_FOR_ADD_VOTER_MS
        )

    def update_high_watermark(self, local_durable_end: int | None, majority: int) -> bool:
        """Kafka's maybeUpdateHighWatermark: the offset a majority of voters reached, counting the
        leader's durable end when it is a voter (None when it is not: a leader removing itself),
        once past the epoch's first record; True when it moved."""
        own = [] if local_durable_end is None else [local_durable_end]
        ends = sorted([*own, *(r.end_offset for r in self.replicas.values())], reverse=True)
        if len(ends) < majority:
            return False
        candidate = ends[majority - 1]
        if candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is not None and candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        return True

    def successors(self) -> list[int]:
        """The other voters, most caught up first (preferred successors when resigning)."""
        return [node_id for node_id, _ in sorted(self.replicas.items(), key=lambda item: -item[1].end_offset)]

    def active_observers(self, now_ms: int) -> dict[int, ReplicaProgress]:
        for node_id, progress in list(self.observers.items()):
            if now_ms - progress.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS:
                del self.observers[node_id]
        return self.observers


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline_ms: int
    # KIP-996: a follower that hears from its leader refuses pre-votes.
    has_fetched: bool = False
    # A snapshot being downloaded (FetchSnapshot) instead of fetching records, and its bytes so far.
    fetching_snapshot: OffsetAndEpoch | None = None
    snapshot_bytes: bytearray = field(default_factory=bytearray)
    role: Role = Role.FOLLOWER


@dataclass(slots=True)
class Resigned:
    epoch: int
    election_deadline_ms: int
    successors: list[VoterKey]
    unacknowledged: set[int]
    role: Role = Role.RESIGNED


EpochState = Unattached | Election | Leader | Follower | Resigned
