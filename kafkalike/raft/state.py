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

from dataclasses import dataclass, field
from enum import Enum

from kafkalike.raft.config import VoterKey


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


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica: its log end (validated fetch offset) and fetch time."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    acknowledged: bool = False


@dataclass(slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int
    replicas: dict[int, ReplicaProgress]
    check_quorum_deadline_ms: int
    begin_epoch_deadline_ms: int = 0
    granting_voters: frozenset[int] = frozenset()
    fetched_voters: set[int] = field(default_factory=set)
    high_watermark: int | None = None
    resign_requested: bool = False
    role: Role = Role.LEADER


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline_ms: int
    # KIP-996: a follower that hears from its leader refuses pre-votes.
    has_fetched: bool = False
    role: Role = Role.FOLLOWER


@dataclass(slots=True)
class Resigned:
    epoch: int
    election_deadline_ms: int
    successors: list[VoterKey]
    unacknowledged: set[int]
    role: Role = Role.RESIGNED


EpochState = Unattached | Election | Leader | Follower | Resigned
