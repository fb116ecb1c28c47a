"""One node of the KRaft quorum as a pure state machine (KIP-595 with KIP-996's pre-vote).

Events in: ``receive(message, now_ms)``, ``tick(now_ms)``, ``append(values, now_ms)`` on the leader,
``resign(now_ms)``, ``durable(end_offset, now_ms)`` when the log's written bytes reached the disk,
``quorum_state_durable(version, now_ms)`` when a quorum-state write did, and ``snapshot(end_offset,
data, now_ms)`` when the state machine above wrote a snapshot of the committed log. Out, drained by ``outputs()``:
:class:`SendMessage`, :class:`FlushLog` and :class:`PersistQuorumState`. ``poll(now_ms)`` is the next
deadline at which ``tick`` has work. No clock reads, no I/O; randomness from the ``random.Random`` given.

Rules that make it safe, each enforced here:
- Nothing leaves the node while a quorum-state write (epoch, leader, voted-for) is not yet durable:
  a vote is answered, a candidacy announced and a leadership claimed only once the disk has it.
- One vote per epoch: a voter grants a (real) vote only in the unattached state, to the first
  candidate whose log is at least as up to date as its own, or again to the same one. Pre-votes bind
  nobody; one carries its sender's own epoch, and a voter behind that moves up to it, as on any
  message of a later epoch (Kafka 4.0's handleVoteRequest).
- The leader's own log counts toward the high watermark only up to its durable end; a follower
  reports (fetches from) only a durable offset; the high watermark moves only past the epoch's first
  offset (the LeaderChange record), so that a leader commits nothing from older epochs before one of
  its own records.
- A follower appends only what the leader sent for the offset it asked, after the leader validated
  its last fetched epoch; otherwise it truncates to the diverging epoch's end and fetches again, or,
  when the leader's log no longer reaches back that far, downloads its snapshot (FetchSnapshot) and
  continues from the snapshot's end. Only followers load snapshots.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafkalike.protocol.errors import CorruptRecordError, ErrorCode
from kafkalike.protocol.records import iter_batches
from kafkalike.raft import messages as m
from kafkalike.raft import rules
from kafkalike.raft.config import (
    CHECK_QUORUM_TIMEOUT_FACTOR,
    NO_DIRECTORY_ID,
    QuorumConfig,
    VoterKey,
)
from kafkalike.raft.log import OffsetAndEpoch, RaftLog, RaftLogError
from kafkalike.raft.quorum_state_file import kafka_uuid_text
from kafkalike.raft.records import LeaderChange, data_batch, leader_change_batch
from kafkalike.raft.requests import InFlight, RequestManager
from kafkalike.raft.state import (
    Election,
    EpochState,
    Follower,
    Leader,
    QuorumStateRecord,
    ReplicaProgress,
    Resigned,
    Role,
    Unattached,
    VoterChange,
)
from kafkalike.raft.voters import (
    RECONFIG_KRAFT_VERSION,
    SUPPORTED_KRAFT_VERSIONS,
    VoterHistory,
    VoterNode,
    VoterSet,
    bootstrap_batch,
    control_changes,
    voters_batch,
)

logger = logging.getLogger(__name__)

NO_LEADER = -1
# As Kafka's raft client, the bootstrap servers of a node without known voters go by synthetic
# ids counting down from here (-1 is no node): the first -2, the next -3...
FIRST_BOOTSTRAP_ID = -2


@dataclass(frozen=True, slots=True)
class SendMessage:
    message: m.RaftMessage


@dataclass(frozen=True, slots=True)
class FlushLog:
    """Make the log durable up to ``end_offset``, then call ``RaftNode.durable``."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class PersistQuorumState:
    """Write ``state`` durably, then call ``RaftNode.quorum_state_durable(version)``."""

    state: QuorumStateRecord
    version: int


Output = SendMessage | FlushLog | PersistQuorumState


class NotLeaderError(Exception):
    """An append to a node that is not an active leader (Kafka's NotLeaderException)."""


@dataclass(slots=True)
class _ParkedFetch:
    request: m.RaftMessage
    fetch_offset: int
    deadline_ms: int
    known_high_watermark: int  # what its sender knew (KIP-1166)


class RaftNode:
    """A voter or observer of the metadata quorum (see the module docstring for its rules)."""

    def __init__(
        self,
        node_id: int,
        config: QuorumConfig,
        log: RaftLog,
        rng: random.Random,
        now_ms: int,
        *,
        directory_id: Any = NO_DIRECTORY_ID,
        cluster_id: str | None = None,
        quorum_state: QuorumStateRecord | None = None,
    ) -> None:
        self.node_id = node_id
        self.key = VoterKey(node_id, directory_id)
        self.config = config
        self.log = log
        self.cluster_id = cluster_id
        self._random = rng
        self._outputs: list[Output] = []
        self._held: list[m.RaftMessage] = []
        self._stored = quorum_state if quorum_state is not None else QuorumStateRecord(0)
        self._state_version = 0
        self._durable_state_version = 0
        self._requests = RequestManager(config.request_timeout_ms, config.retry_backoff_ms)
        self._parked: dict[int, _ParkedFetch] = {}  # by the node that sent the fetch
        self._flush_requested = log.durable_end_offset
        # Where the nodes it talks to listen (the voters' controller endpoints, the bootstrap
        # servers by their synthetic ids, leaders learned from responses' NodeEndpoints): what
        # its responses tell others of the leader, and where a driver sends its requests.
        self.endpoints: dict[int, tuple[str, int]] = {e.key.node_id: (e.host, e.port) for e in config.endpoints}
        # Whom an observer without a leader asks (Kafka's RequestManager bootstrap servers): the
        # voters when it knows them, else controller.quorum.bootstrap.servers.
        self.bootstrap_ids: tuple[int, ...] = tuple(v.node_id for v in config.voters)
        if not config.voters:
            self.bootstrap_ids = tuple(FIRST_BOOTSTRAP_ID - i for i in range(len(config.bootstrap_servers)))
            self.endpoints.update(zip(self.bootstrap_ids, config.bootstrap_servers, strict=True))
        self.high_watermark: int | None = None
        # The voter sets of the log (KIP-853): the static voters before any VotersRecord.
        self.history = VoterHistory(VoterSet.static(config.endpoints, config.voters, config.listener_name))
        self._load_voter_history()
        self._refresh_voter_endpoints()
        self.state: EpochState = self._initial_state(now_ms)

    # -- views ------------------------------------------------------------------------------------

    @property
    def voters(self) -> VoterSet:
        """The voter set in force: the latest in the log, committed or not (KIP-853)."""
        return self.history.latest()

    @property
    def is_voter(self) -> bool:
        return self.voters.is_voter(self.node_id, self.key.directory_id)

    @property
    def kraft_version(self) -> int:
        return self.history.kraft_version()

    def voters_at(self, offset: int) -> tuple[VoterSet, int]:
        """The voter set and kraft.version in force at ``offset`` (what a snapshot ending just
        after it must carry)."""
        return self.history.at(offset), self.history.kraft_version_at(offset)

    def _load_voter_history(self) -> None:
        """The voter sets of the log this node starts with: its latest snapshot's, then every
        VotersRecord and KRaftVersionRecord after it (control batches only are decoded)."""
        snapshot_id = self.log.latest_snapshot_id()
        if snapshot_id is not None:
            data = self.log.read_snapshot(snapshot_id)
            if data is not None:
                self._reset_voters_to_snapshot(snapshot_id, data)
        offset = self.log.start_offset
        while offset < self.log.end_offset:
            chunk = self.log.read(offset, self.config.fetch_max_bytes)
            if not chunk:
                break
            last = offset
            for _, header in iter_batches(chunk):
                last = header.last_offset
            self.history.apply(control_changes(chunk))
            offset = last + 1

    def _reset_voters_to_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """The voters a snapshot's control records hold. The quorum does not otherwise read a
        snapshot: bytes that are no record batches carry no voters (the state machine above
        judges them)."""
        voters, kraft = None, None
        try:
            for change in control_changes(data):
                voters = change.voters if change.voters is not None else voters
                kraft = change.kraft_version if change.kraft_version is not None else kraft
        except (CorruptRecordError, ValueError) as exc:
            logger.warning("node %d: snapshot %s holds no readable voters: %s", self.node_id, snapshot_id, exc)
        self.history.reset_to_snapshot(snapshot_id.offset, voters, kraft)

    def _refresh_voter_endpoints(self) -> None:
        """Where each voter of the set in force listens, on this quorum's listener."""
        for node in self.voters.nodes:
            address = node.address(self.config.listener_name)
            if address is not None and self.endpoints.get(node.node_id) != address:
                self.endpoints[node.node_id] = address

    def _voters_changed(self, now_ms: int) -> None:
        """The voter set in force changed (an append, a truncation, a snapshot): a leader moves
        its replicas' progress between voters and observers, and its high watermark may move."""
        self._refresh_voter_endpoints()
        logger.info("node %d: voters now %s", self.node_id, self.voters)
        state = self.state
        if not isinstance(state, Leader):
            return
        replicas: dict[int, ReplicaProgress] = {}
        for node_id in sorted(self.voters.ids - {self.node_id}):
            progress = state.replicas.pop(node_id, None) or state.observers.pop(node_id, None)
            replicas[node_id] = progress if progress is not None else ReplicaProgress()
        state.observers.update(state.replicas)
        state.replicas = replicas
        if self._update_high_watermark(state):
            self._complete_parked_fetches(now_ms, only_due=False)

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        state = self.state
        if isinstance(state, Follower):
            return state.leader_id
        if isinstance(state, (Leader, Resigned)):
            return self.node_id
        return NO_LEADER

    def _knows_leader(self) -> bool:
        """Kafka's hasLeader: whether this epoch's leader is known here (a prospective still knows
        the leader it followed: only a successful fetch from it, not another node's say-so, brings
        it back as a follower, or a resigned leader's answers would keep it from running)."""
        state = self.state
        if isinstance(state, Election):
            return state.leader_id >= 0
        return self.leader_id != NO_LEADER

    @property
    def stored_state(self) -> QuorumStateRecord:
        """The quorum state as last handed to the disk (durable once reported)."""
        return self._stored

    @property
    def quorum_state_pending(self) -> bool:
        return self._durable_state_version < self._state_version

    def outputs(self) -> list[Output]:
        out, self._outputs = self._outputs, []
        return out

    def _initial_state(self, now_ms: int) -> EpochState:
        """Kafka's QuorumState.initialize: resume from the durable election state."""
        stored = self._stored
        # As Kafka's KafkaRaftClient.initialize: the only voter stands for election at once
        # (nobody else could lead, so waiting out an election timeout only delays the start).
        alone = self.is_voter and len(self.voters) == 1
        if stored.leader_id == self.node_id:
            return Resigned(stored.epoch, now_ms if alone else self._election_deadline(now_ms), [], set())
        if stored.voted_for is not None and stored.voted_for.node_id == self.node_id and self.is_voter:
            return Election(stored.epoch, self._election_deadline(now_ms), granted={self.node_id})
        # A node that knows no voters has no endpoint for a leader it followed before (the
        # quorum-state file keeps none): as Kafka's QuorumState, it starts unattached and asks
        # the bootstrap servers again.
        if stored.leader_id >= 0 and self._can_reach(stored.leader_id):
            return Follower(stored.epoch, stored.leader_id, now_ms + self.config.fetch_timeout_ms)
        if alone:
            return Unattached(stored.epoch, now_ms, stored.voted_for)
        return Unattached(stored.epoch, self._election_deadline(now_ms), stored.voted_for)

    # -- events -----------------------------------------------------------------------------------

    def receive(self, message: m.RaftMessage, now_ms: int) -> None:
        if message.destination != self.node_id:
            logger.warning("node %d: dropped %s meant for another node", self.node_id, message)
            return
        if message.is_response:
            self._receive_response(message, now_ms)
        else:
            self._receive_request(message, now_ms)
        self.tick(now_ms)

    def tick(self, now_ms: int) -> None:
        self._requests.expire(now_ms)
        for _ in range(4):  # a state entered here may have work at once (bounded: each step moves on)
            state = self.state
            self._poll_state(state, now_ms)
            if self.state is state:
                return

    def _poll_state(self, state: EpochState, now_ms: int) -> None:
        if isinstance(state, Leader):
            self._poll_leader(state, now_ms)
        elif isinstance(state, Follower):
            self._poll_follower(state, now_ms)
        elif isinstance(state, Election):
            self._poll_election(state, now_ms)
        elif isinstance(state, Resigned):
            self._poll_resigned(state, now_ms)
        else:
            self._poll_unattached(state, now_ms)

    def append(self, values: Sequence[bytes], now_ms: int) -> int:
        """Append one batch of records as the leader; returns its last offset (committed once the
        high watermark passes it)."""
        state = self.state
        if not isinstance(state, Leader) or state.resign_requested:
            raise NotLeaderError(f"node {self.node_id} is not the leader (epoch {self.epoch}, {self.role.value})")
        batch = data_batch(values, base_offset=self.log.end_offset, epoch=state.epoch, timestamp_ms=now_ms)
        last = self.log.append(batch).last_offset
        self._request_flush()
        self._complete_parked_fetches(now_ms, only_due=False, below=self.log.end_offset)
        return last

    def resign(self, now_ms: int) -> None:
        """Step down gracefully (Kafka's resign on shutdown): the voters are told to elect another."""
        state = self.state
        if isinstance(state, Leader):
            state.resign_requested = True
            self.tick(now_ms)

    def durable(self, end_offset: int, now_ms: int) -> None:
        """The log reached the disk up to ``end_offset`` (the log itself says how far it is durable)."""
        state = self.state
        if isinstance(state, Leader) and self._update_high_watermark(state):
            self._complete_parked_fetches(now_ms, only_due=False)
        self.tick(now_ms)

    def quorum_state_durable(self, version: int, now_ms: int) -> None:
        self._durable_state_version = max(self._durable_state_version, version)
        if not self.quorum_state_pending:
            held, self._held = self._held, []
            self._outputs.extend(SendMessage(msg) for msg in held)
        self.tick(now_ms)

    def poll(self, now_ms: int) -> int:
        """The next time (ms) at which ``tick`` has something to do."""
        deadlines = self._requests.deadlines(now_ms)
        state = self.state
        if isinstance(state, Leader):
            deadlines.append(state.begin_epoch_deadline_ms)
            if self._checks_quorum():
                deadlines.append(state.check_quorum_deadline_ms)
            deadlines += [p.deadline_ms for p in self._parked.values()]
            if state.voter_change is not None:
                deadlines.append(state.voter_change.deadline_ms)
        elif isinstance(state, Follower):
            deadlines.append(state.fetch_deadline_ms)
        elif isinstance(state, Election):
            deadlines.append(
                state.backoff_until_ms if state.backoff_until_ms is not None else state.election_deadline_ms
            )
        elif isinstance(state, Resigned) or self.is_voter:
            deadlines.append(state.election_deadline_ms)
        return min(deadlines) if deadlines else now_ms + self.config.election_timeout_ms

    # -- sending ----------------------------------------------------------------------------------

    def _emit(self, message: m.RaftMessage) -> None:
        if self.quorum_state_pending:
            self._held.append(message)
        else:
            self._outputs.append(SendMessage(message))

    def _send_request(
        self, destination: int, api_key: int, body: m.Body, now_ms: int, *, pre_vote: bool = False
    ) -> None:
        cid = self._requests.start(destination, api_key, self.state, now_ms, pre_vote=pre_vote)
        self._emit(m.RaftMessage(self.node_id, destination, api_key, cid, body))

    def _respond(self, request: m.RaftMessage, body: m.Body) -> None:
        self._emit(m.RaftMessage(self.node_id, request.source, request.api_key, request.correlation_id, body, True))

    # -- transitions ------------------------------------------------------------------------------

    def _election_deadline(self, now_ms: int) -> int:
        timeout = self.config.election_timeout_ms
        return now_ms + timeout + self._random.randrange(timeout)

    def _transition(self, state: EpochState, now_ms: int) -> None:
        """Enter ``state``: drop requests of the old one (Kafka's resetConnections), answer fetches
        parked by a leader that no longer leads, and persist the election state if it changed."""
        old = self.state
        was_leader = isinstance(old, Leader)
        if state.epoch < self.state.epoch:
            raise AssertionError(f"epoch would fall from {self.state.epoch} to {state.epoch}")
        self.state = state
        self._requests.reset()
        self._persist(now_ms)  # first: what follows is held until the disk has the new state
        if was_leader and not isinstance(state, Leader):
            if isinstance(old, Leader) and old.voter_change is not None:
                self._answer_voter_change(old.voter_change, ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
                old.voter_change = None
            for parked in self._parked.values():
                self._respond(parked.request, self._fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER))
            self._parked.clear()
        logger.debug("node %d: %s in epoch %d", self.node_id, state.role.value, state.epoch)

    def _persist(self, now_ms: int) -> None:
        state = self.state
        voted = self._stored.voted_for if self._stored.epoch == state.epoch else None
        if isinstance(state, Unattached):
            voted = state.voted_for or voted
        elif isinstance(state, Election) and state.role is Role.CANDIDATE:
            voted = self.key
        record = QuorumStateRecord(state.epoch, self.leader_id, voted)
        if record != self._stored:
            self._stored = record
            self._state_version += 1
            self._outputs.append(PersistQuorumState(record, self._state_version))

    def _become_unattached(self, epoch: int, now_ms: int) -> None:
        """A higher epoch without a known leader. As Kafka's QuorumState.transitionToUnattached, a
        node already waiting for an election keeps its deadline: otherwise a voter that keeps
        bumping the epoch with hopeless candidacies would keep every other voter from running."""
        state = self.state
        if isinstance(state, (Unattached, Election)):
            deadline = state.election_deadline_ms
        else:
            deadline = self._election_deadline(now_ms)
        self._transition(Unattached(epoch, deadline), now_ms)

    def _become_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        self._transition(Follower(epoch, leader_id, now_ms + self.config.fetch_timeout_ms), now_ms)

    def _start_election(self, now_ms: int, retries: int = 1) -> None:
        """Election timeout: pre-vote first when enabled (KIP-996), else a candidacy straight away."""
        if self.config.pre_vote and len(self.voters) > 1:
            state = self.state
            leader = state.leader_id if isinstance(state, Follower) else NO_LEADER
            deadline = self._election_deadline(now_ms)
            election = Election(state.epoch, deadline, retries, {self.node_id}, leader_id=leader, role=Role.PROSPECTIVE)
            self._transition(election, now_ms)
            self._maybe_win(election, now_ms)
        else:
            self._become_candidate(now_ms, retries)

    def _become_candidate(self, now_ms: int, retries: int) -> None:
        candidate = Election(self.epoch + 1, self._election_deadline(now_ms), retries, {self.node_id})
        self._transition(candidate, now_ms)
        self._maybe_win(candidate, now_ms)

    def _maybe_win(self, election: Election, now_ms: int) -> None:
        if len(election.granted & self.voters.ids) < self.voters.majority:
            return
        if election.role is Role.PROSPECTIVE:
            self._become_candidate(now_ms, election.retries)
        else:
            self._become_leader(election, now_ms)

    def _become_leader(self, election: Election, now_ms: int) -> None:
        replicas = {node_id: ReplicaProgress() for node_id in sorted(self.voters.ids - {self.node_id})}
        leader = Leader(
            election.epoch,
            self.log.end_offset,
            replicas,
            check_quorum_deadline_ms=now_ms + self._check_quorum_timeout_ms(),
            begin_epoch_deadline_ms=now_ms,
            granting_voters=frozenset(election.granted),
        )
        self._transition(leader, now_ms)
        # The high watermark moves only past a record of this epoch: write one at once.
        change = LeaderChange(self.node_id, tuple(sorted(self.voters.ids)), tuple(sorted(election.granted)))
        batch = leader_change_batch(change, base_offset=self.log.end_offset, epoch=leader.epoch, timestamp_ms=now_ms)
        self.log.append(batch)
        if self.kraft_version >= RECONFIG_KRAFT_VERSION and self.history.latest_offset() < 0:
            # As Kafka's appendStartOfEpochControlRecords: voters known only from a bootstrap
            # snapshot go into the log, where a replica that starts empty (an observer formatted
            # without initial controllers) reads them.
            start = bootstrap_batch(
                self.voters,
                self.kraft_version,
                base_offset=self.log.end_offset,
                epoch=leader.epoch,
                timestamp_ms=now_ms,
            )
            self.log.append(start)
            self.history.apply(control_changes(start))
        self._request_flush()
        self._update_high_watermark(leader)

    def _become_resigned(self, leader: Leader, now_ms: int) -> None:
        successors = [self.voters.key_of(node_id) or VoterKey(node_id) for node_id in leader.successors()]
        resigned = Resigned(leader.epoch, self._election_deadline(now_ms), successors, set(leader.replicas))
        self._transition(resigned, now_ms)

    def _checks_quorum(self) -> bool:
        """Whether a leader resigns when no majority fetched in time: not when it is the only
        voter (Kafka's LeaderState.timeUntilCheckQuorumExpires)."""
        return not (len(self.voters) == 1 and self.is_voter)

    def _quorum_fetches_needed(self) -> int:
        """How many other voters must fetch per check-quorum interval: a majority, of which a
        leader that is a voter is one."""
        majority = self.voters.majority
        return majority - 1 if self.is_voter else majority

    def _check_quorum_timeout_ms(self) -> int:
        return int(self.config.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)

    # -- polling by state -------------------------------------------------------------------------

    def _poll_unattached(self, state: Unattached, now_ms: int) -> None:
        if self.is_voter:
            if now_ms >= state.election_deadline_ms:
                self._start_election(now_ms)
        else:
            self._fetch_from_any_voter(now_ms)

    def _poll_election(self, election: Election, now_ms: int) -> None:
        if election.backoff_until_ms is not None:
            if now_ms >= election.backoff_until_ms:
                self._start_election(now_ms, election.retries + 1)
            return
        if now_ms >= election.election_deadline_ms:
            election.backoff_until_ms = now_ms + self._election_backoff_ms(election.retries)
            return
        if (
            election.role is Role.PROSPECTIVE
            and election.leader_id >= 0
            and self._requests.can_send(election.leader_id, now_ms)
        ):
            self._send_fetch(election.leader_id, now_ms)
        # As Kafka 4.0's buildVoteRequest, a pre-vote carries the prospective's own epoch (the
        # candidate it would become asks for the next one); a voter behind it moves up to it.
        pre_vote = election.role is Role.PROSPECTIVE
        epoch = election.epoch
        for voter in self.voters.keys:
            node_id = voter.node_id
            if (
                node_id in election.granted
                or node_id in election.rejected
                or not self._requests.can_send(node_id, now_ms)
            ):
                continue
            body = m.vote_request(
                self.cluster_id,
                self.key,
                epoch,
                voter,
                self.log.last_fetched_epoch(),
                self.log.end_offset,
                pre_vote,
            )
            self._send_request(node_id, m.VOTE, body, now_ms, pre_vote=pre_vote)

    def _election_backoff_ms(self, retries: int) -> int:
        return rules.election_backoff_ms(self._random, retries, self.config.election_backoff_max_ms)

    def _poll_leader(self, leader: Leader, now_ms: int) -> None:
        if leader.resign_requested or (self._checks_quorum() and now_ms >= leader.check_quorum_deadline_ms):
            self._become_resigned(leader, now_ms)
            return
        if not self._checks_quorum():
            # The only voter: its timer keeps moving, so that a voter it adds gets a whole interval.
            leader.check_quorum_deadline_ms = now_ms + self._check_quorum_timeout_ms()
        self._expire_voter_change(leader, now_ms)
        if now_ms >= leader.begin_epoch_deadline_ms:
            for voter in self.voters.keys:
                if voter.node_id != self.node_id and self._requests.can_send(voter.node_id, now_ms):
                    body = m.begin_quorum_epoch_request(
                        self.cluster_id, self.node_id, leader.epoch, voter, *self._own_endpoint()
                    )
                    self._send_request(voter.node_id, m.BEGIN_QUORUM_EPOCH, body, now_ms)
            leader.begin_epoch_deadline_ms = now_ms + self.config.fetch_timeout_ms // 2
        self._complete_parked_fetches(now_ms, only_due=True)

    def _poll_follower(self, state: Follower, now_ms: int) -> None:
        if now_ms >= state.fetch_deadline_ms:
            if self.is_voter:
                self._start_election(now_ms)
            else:
                self._become_unattached(state.epoch, now_ms)
            return
        if not self._requests.can_send(state.leader_id, now_ms):
            return
        if state.fetching_snapshot is not None:
            snapshot = (state.fetching_snapshot.offset, state.fetching_snapshot.epoch)
            body = m.fetch_snapshot_request(
                self.cluster_id, self.key, state.epoch, snapshot, len(state.snapshot_bytes), self.config.fetch_max_bytes
            )
            self._send_request(state.leader_id, m.FETCH_SNAPSHOT, body, now_ms)
        else:
            self._send_fetch(state.leader_id, now_ms)

    def _poll_resigned(self, state: Resigned, now_ms: int) -> None:
        if now_ms >= state.election_deadline_ms:
            if self.is_voter:
                self._start_election(now_ms)
            else:  # a leader that removed itself from the voters stays on as an observer
                self._become_unattached(state.epoch, now_ms)
            return
        for node_id in sorted(state.unacknowledged):
            if self._requests.can_send(node_id, now_ms):
                body = m.end_quorum_epoch_request(
                    self.cluster_id, self.node_id, state.epoch, state.successors, *self._own_endpoint()
                )
                self._send_request(node_id, m.END_QUORUM_EPOCH, body, now_ms)

    def _fetch_from_any_voter(self, now_ms: int) -> None:
        """An observer without a leader asks a voter, or a bootstrap server when it knows no
        voters (Kafka's maybeSendFetchToAnyBootstrap): the answer names the leader."""
        if self._requests.has_inflight():
            return
        candidates = [node_id for node_id in self.bootstrap_ids if self._requests.can_send(node_id, now_ms)]
        if candidates:
            self._send_fetch(self._random.choice(candidates), now_ms)

    def _send_fetch(self, destination: int, now_ms: int) -> None:
        # Report only what is on disk: the leader counts this offset toward the high watermark.
        if self.log.durable_end_offset < self.log.end_offset:
            return
        body = m.fetch_request(
            self.cluster_id,
            self.key,
            self.epoch,
            self.log.end_offset,
            self.log.last_fetched_epoch(),
            self.config.fetch_max_wait_ms,
            self.config.fetch_max_bytes,
            self.high_watermark,
        )
        self._send_request(destination, m.FETCH, body, now_ms)

    def _request_flush(self) -> None:
        end = self.log.end_offset
        if end > self._flush_requested:
            self._flush_requested = end
            self._outputs.append(FlushLog(end))

    # -- requests ---------------------------------------------------------------------------------

    def _receive_request(self, request: m.RaftMessage, now_ms: int) -> None:
        body = request.body
        if request.api_key == m.API_VERSIONS_KEY:  # a leader asking which kraft.version we support
            self._respond(request, m.api_versions_response(SUPPORTED_KRAFT_VERSIONS))
            return
        if request.api_key in m.VOTER_CHANGES:
            self._respond_voter_change(request, now_ms)
            return
        cluster_id = body.get("cluster_id")
        if cluster_id is not None and self.cluster_id is not None and cluster_id != self.cluster_id:
            self._respond(request, self._top_level_error(request.api_key, ErrorCode.INCONSISTENT_CLUSTER_ID))
            return
        partition = m.partition_of(body)
        if partition is None:
            self._respond(request, self._top_level_error(request.api_key, ErrorCode.INVALID_REQUEST))
            return
        if request.api_key == m.VOTE:
            self._respond(request, self._handle_vote(body, partition, now_ms))
        elif request.api_key == m.BEGIN_QUORUM_EPOCH:
            self._respond(request, self._handle_begin_quorum_epoch(body, partition, now_ms))
        elif request.api_key == m.END_QUORUM_EPOCH:
            self._respond(request, self._handle_end_quorum_epoch(body, partition, now_ms))
        elif request.api_key == m.FETCH:
            self._handle_fetch(request, partition, now_ms)
        elif request.api_key == m.FETCH_SNAPSHOT:
            self._respond(request, self._handle_fetch_snapshot(body, partition, now_ms))

    @staticmethod
    def _top_level_error(api_key: int, error: ErrorCode) -> dict[str, Any]:
        return m.fetch_top_level_error(error) if api_key == m.FETCH else m.top_level_error(error)

    def _handle_vote(self, body: m.Body, p: Any, now_ms: int) -> dict[str, Any]:
        pre_vote = bool(p.get("pre_vote", False))  # absent before v2
        candidate_id, candidate_epoch = p["replica_id"], p["replica_epoch"]
        last_epoch, last_offset = p["last_offset_epoch"], p["last_offset"]
        # A pre-vote's epoch is the sender's own, which its last record may be of (Kafka's isIllegalEpoch).
        illegal_epoch = last_epoch > candidate_epoch if pre_vote else last_epoch >= candidate_epoch
        if last_offset < 0 or last_epoch < 0 or illegal_epoch:
            return self._vote_reply(ErrorCode.INVALID_REQUEST, False)
        if candidate_epoch < self.epoch:
            return self._vote_reply(ErrorCode.FENCED_LEADER_EPOCH, False)
        if candidate_id < 0:
            return self._vote_reply(ErrorCode.INVALID_REQUEST, False)
        # As Kafka since KIP-853, a candidate missing from this node's voter set is not refused:
        # this node may not have the VotersRecord that made it a voter yet.
        voter_id = body.get("voter_id", -1)
        if voter_id >= 0 and not self.key.matches(voter_id, m.directory_id(p.get("voter_directory_id"))):
            return self._vote_reply(ErrorCode.INVALID_VOTER_KEY, False)
        if candidate_epoch > self.epoch:
            self._become_unattached(candidate_epoch, now_ms)
        candidate = VoterKey(candidate_id, m.directory_id(p.get("replica_directory_id")))
        log_ok = (last_epoch, last_offset) >= (self.log.last_fetched_epoch(), self.log.end_offset)
        granted = self._can_grant_vote(candidate, log_ok, pre_vote, now_ms)
        state = self.state
        if granted and not pre_vote and not (isinstance(state, Unattached) and state.voted_for is not None):
            # Record the vote (from unattached, or a prospective that had not voted in this epoch);
            # the answer waits for the disk. As Kafka, voting restarts the election timer.
            self._transition(Unattached(state.epoch, self._election_deadline(now_ms), candidate), now_ms)
        return self._vote_reply(ErrorCode.NONE, granted)

    def _can_grant_vote(self, candidate: VoterKey, log_ok: bool, pre_vote: bool, now_ms: int) -> bool:
        return rules.can_grant_vote(self.state, self._stored, candidate, log_ok, pre_vote)

    def _vote_reply(self, error: ErrorCode, granted: bool) -> dict[str, Any]:
        return m.vote_response(error, self.epoch, self.leader_id, granted, self._leader_endpoint())

    def _own_endpoint(self) -> tuple[str, tuple[str, int] | None]:
        """This node's listener name and address, as a leader announces them."""
        return self.config.listener_name, self.endpoints.get(self.node_id)

    def _epoch_announcement_error(self, body: m.Body, p: Any, now_ms: int) -> dict[str, Any] | None:
        """BeginQuorumEpoch's and EndQuorumEpoch's common part: refuse an older epoch or no
        leader, else follow the announced leader; None when accepted."""
        leader_id, epoch = p["leader_id"], p["leader_epoch"]
        if epoch < self.epoch:
            return m.epoch_response(ErrorCode.FENCED_LEADER_EPOCH, self.epoch, self.leader_id, self._leader_endpoint())
        if leader_id < 0:
            return m.epoch_response(ErrorCode.INVALID_REQUEST, self.epoch, self.leader_id, self._leader_endpoint())
        announced = m.leader_endpoint(body, self.config.listener_name)
        if announced is not None and leader_id not in self.voters.ids and self.endpoints.get(leader_id) != announced:
            self.endpoints[leader_id] = announced  # a leader this node's voter set does not hold yet
        self._follow_if_new(leader_id, epoch, now_ms)
        return None

    def _handle_begin_quorum_epoch(self, body: m.Body, p: Any, now_ms: int) -> dict[str, Any]:
        refused = self._epoch_announcement_error(body, p, now_ms)
        if refused is not None:
            return refused
        return m.epoch_response(ErrorCode.NONE, self.epoch, self.leader_id, self._leader_endpoint())

    def _handle_end_quorum_epoch(self, body: m.Body, p: Any, now_ms: int) -> dict[str, Any]:
        refused = self._epoch_announcement_error(body, p, now_ms)
        if refused is not None:
            return refused
        leader_id = p["leader_id"]
        state = self.state
        if isinstance(state, Follower) and state.leader_id == leader_id:
            successors = [c["candidate_id"] for c in p.get("preferred_candidates") or []]
            if not successors:
                successors = list(p.get("preferred_successors") or [])
            state.fetch_deadline_ms = now_ms + rules.end_epoch_backoff_ms(
                self.node_id, successors, self.config.election_backoff_max_ms
            )
            state.has_fetched = False
        return m.epoch_response(ErrorCode.NONE, self.epoch, self.leader_id, self._leader_endpoint())

    def _follow_if_new(self, leader_id: int, epoch: int, now_ms: int) -> None:
        """Kafka's maybeTransition: a higher epoch, or a leader for this epoch we did not know."""
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.node_id and self._can_reach(leader_id):
                self._become_follower(epoch, leader_id, now_ms)
            else:
                self._become_unattached(epoch, now_ms)
        elif (
            epoch == self.epoch
            and leader_id >= 0
            and leader_id != self.node_id
            and not self._knows_leader()
            and self._can_reach(leader_id)
        ):
            self._become_follower(epoch, leader_id, now_ms)

    def _can_reach(self, leader_id: int) -> bool:
        """Whether this node could fetch from ``leader_id``: a node that knows no voters needs
        the leader's endpoint (from a response's NodeEndpoints), else it asks the bootstrap
        servers again rather than follow a leader it cannot find."""
        return bool(self.config.voters and not self.config.endpoints) or leader_id in self.endpoints

    # -- fetch, leader side -----------------------------------------------------------------------

    def _handle_fetch(self, request: m.RaftMessage, p: Any, now_ms: int) -> None:
        body = request.body
        fetch_offset, last_epoch = p["fetch_offset"], p["last_fetched_epoch"]
        request_epoch = p["current_leader_epoch"]
        if body["max_wait_ms"] < 0 or fetch_offset < 0 or last_epoch < 0 or last_epoch > request_epoch:
            self._respond(request, self._fetch_error(ErrorCode.INVALID_REQUEST))
            return
        error = self._leader_only_error(request_epoch)
        state = self.state
        if error is not ErrorCode.NONE or not isinstance(state, Leader):
            self._respond(request, self._fetch_error(error))
            return
        replica_id = m.fetch_replica_id(body)
        if replica_id == self.node_id:
            self._respond(request, self._fetch_error(ErrorCode.INVALID_REQUEST))
            return
        self._parked.pop(request.source, None)  # a newer fetch from the same node replaces it
        snapshot = rules.snapshot_for_fetch(self.log, fetch_offset, last_epoch)
        if snapshot is not None:
            self._respond(request, self._fetch_answer(fetch_offset, None, snapshot))
            return
        diverging = rules.diverging_epoch(self.log, fetch_offset, last_epoch)
        directory = m.fetch_replica_directory_id(p)
        if diverging is None and state.record_fetch(replica_id, fetch_offset, self.log.end_offset, now_ms, directory):
            state.note_voter_fetched(replica_id, self._quorum_fetches_needed(), now_ms, self._check_quorum_timeout_ms())
            if self._update_high_watermark(state):
                self._complete_parked_fetches(now_ms, only_due=False, except_source=request.source)
        response = self._fetch_answer(fetch_offset, diverging)
        known = m.fetch_high_watermark(p)
        answered = response["responses"][0]["partitions"][0]
        # As Kafka 4.4's handleFetchRequest (KIP-1166): answer at once when there is something to
        # send, including a high watermark the follower does not know yet (this very fetch may have
        # moved it), so that followers and observers learn of a commit within one round trip.
        if (
            diverging is not None
            or answered["records"]
            or body["max_wait_ms"] == 0
            or known < answered["high_watermark"]
        ):
            self._respond(request, response)
            return
        self._parked[request.source] = _ParkedFetch(request, fetch_offset, now_ms + body["max_wait_ms"], known)

    def _leader_only_error(self, request_epoch: int) -> ErrorCode:
        """Kafka's validateLeaderOnlyRequest."""
        if request_epoch < self.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if request_epoch > self.epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        state = self.state
        if not isinstance(state, Leader) or state.resign_requested:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def _fetch_error(self, error: ErrorCode) -> dict[str, Any]:
        return m.fetch_response(
            error,
            self.epoch,
            self.leader_id,
            self._wire_high_watermark(),
            self.log.start_offset,
            leader_endpoint=self._leader_endpoint(),
        )

    def _leader_endpoint(self) -> tuple[str, int] | None:
        """The current leader's controller endpoint, as far as this node knows it."""
        leader_id = self.leader_id
        return self.endpoints.get(leader_id) if leader_id >= 0 else None

    def _wire_high_watermark(self) -> int:
        """The leader's high watermark of this epoch; -1 until it has one (as Kafka: a new leader
        does not pass on a watermark it learned as a follower, which may be behind its followers')."""
        state = self.state
        if isinstance(state, Leader) and state.high_watermark is not None:
            return state.high_watermark
        return -1

    def _fetch_answer(
        self, fetch_offset: int, diverging: tuple[int, int] | None, snapshot: OffsetAndEpoch | None = None
    ) -> dict[str, Any]:
        records = b""
        if diverging is None and snapshot is None:
            records = self.log.read(fetch_offset, self.config.fetch_max_bytes)
        return m.fetch_response(
            ErrorCode.NONE,
            self.epoch,
            self.node_id,
            self._wire_high_watermark(),
            self.log.start_offset,
            records,
            diverging,
            (snapshot.offset, snapshot.epoch) if snapshot is not None else None,
            self._leader_endpoint(),
        )

    def _handle_fetch_snapshot(self, body: m.Body, p: Any, now_ms: int) -> dict[str, Any]:
        """Kafka's handleFetchSnapshotRequest: a chunk of a snapshot, for a follower behind the log start."""
        error = self._leader_only_error(p["current_leader_epoch"])
        state = self.state
        if error is not ErrorCode.NONE or not isinstance(state, Leader):
            return m.fetch_snapshot_response(error, self.epoch, self.leader_id)
        snapshot_id = OffsetAndEpoch(p["snapshot_id"]["end_offset"], p["snapshot_id"]["epoch"])
        data = self.log.read_snapshot(snapshot_id)
        if data is None:
            return m.fetch_snapshot_response(ErrorCode.SNAPSHOT_NOT_FOUND, self.epoch, self.node_id)
        position = p["position"]
        if position < 0 or position >= len(data):
            return m.fetch_snapshot_response(ErrorCode.POSITION_OUT_OF_RANGE, self.epoch, self.node_id)
        replica_id = int(body.get("replica_id", -1))
        if replica_id in state.replicas:
            state.note_voter_fetched(replica_id, self._quorum_fetches_needed(), now_ms, self._check_quorum_timeout_ms())
        chunk = data[position : position + max(1, min(body["max_bytes"], self.config.fetch_max_bytes))]
        snapshot = (snapshot_id.offset, snapshot_id.epoch)
        return m.fetch_snapshot_response(ErrorCode.NONE, self.epoch, self.node_id, snapshot, len(data), position, chunk)

    def _complete_parked_fetches(
        self, now_ms: int, *, only_due: bool, except_source: int | None = None, below: int | None = None
    ) -> None:
        """Answer parked fetches that are due; or, as Kafka's fetch purgatory, on new records those
        that asked for an offset ``below`` the new log end, and on a new high watermark all of them."""
        for source, parked in list(self._parked.items()):
            if source == except_source or (only_due and parked.deadline_ms > now_ms):
                continue
            if below is not None and parked.fetch_offset >= below:
                continue
            del self._parked[source]
            self._respond(parked.request, self._fetch_answer(parked.fetch_offset, None))

    def parked_fetches(self) -> dict[int, int]:
        """The fetches this leader holds back, by sender: the high watermark each sender knows."""
        return {source: parked.known_high_watermark for source, parked in self._parked.items()}

    def _update_high_watermark(self, leader: Leader) -> bool:
        local = self.log.durable_end_offset if self.is_voter else None
        if not leader.update_high_watermark(local, self.voters.majority):
            return False
        hw = self.high_watermark = leader.high_watermark
        self._voter_change_committed(leader)
        if not self.is_voter and hw is not None and self.history.latest_offset() < hw and not leader.resign_requested:
            # Committed without this node (the removal's answer may have timed out meanwhile).
            logger.info(
                "node %d: not in the committed voters %s, resigning epoch %d", self.node_id, self.voters, leader.epoch
            )
            leader.resign_requested = True
        return True

    # -- responses --------------------------------------------------------------------------------

    def _receive_response(self, response: m.RaftMessage, now_ms: int) -> None:
        inflight = self._requests.complete(response.source, response.correlation_id)
        if inflight is None:
            return  # a duplicate, or an answer to a request an older state sent
        body = response.body
        self._learn_endpoints(body)
        if response.api_key == m.API_VERSIONS_KEY:
            self._handle_api_versions_response(response, now_ms)
            return
        if body.get("error_code", 0) != ErrorCode.NONE:
            self._requests.fail(response.source, now_ms)
            return
        p = m.partition_of(body)
        if p is None:
            self._requests.fail(response.source, now_ms)
            return
        if response.api_key == m.FETCH:
            self._handle_fetch_response(response, p, now_ms)
            return
        if response.api_key == m.FETCH_SNAPSHOT:
            self._handle_fetch_snapshot_response(response, p, now_ms)
            return
        error, leader_id, epoch = ErrorCode(p["error_code"]), p["leader_id"], p["leader_epoch"]
        if response.api_key == m.VOTE and inflight.pre_vote and error is ErrorCode.NONE and epoch <= self.epoch:
            # A pre-vote answer may come from a voter behind our epoch; it counts all the same.
            self._record_vote(inflight, response.source, bool(p["vote_granted"]), leader_id, epoch, now_ms)
            return
        if self._handle_common_response(error, leader_id, epoch, now_ms):
            return
        if error is not ErrorCode.NONE:
            self._requests.fail(response.source, now_ms)
            return
        if response.api_key == m.VOTE:
            self._record_vote(inflight, response.source, bool(p["vote_granted"]), leader_id, epoch, now_ms)
        elif response.api_key == m.BEGIN_QUORUM_EPOCH:
            state = self.state
            if isinstance(state, Leader) and response.source in state.replicas:
                state.replicas[response.source].acknowledged = True
        elif response.api_key == m.END_QUORUM_EPOCH:
            state = self.state
            if isinstance(state, Resigned):
                state.unacknowledged.discard(response.source)

    def _learn_endpoints(self, body: m.Body) -> None:
        """A response's NodeEndpoints (the leader's): where an observer that knows no voters
        finds the leader. A voter's configured endpoint stays as configured."""
        for node_id, address in m.node_endpoints(body).items():
            if node_id not in self.voters.ids and self.endpoints.get(node_id) != address:
                logger.info("node %d: node %d is at %s:%d", self.node_id, node_id, *address)
                self.endpoints[node_id] = address

    def _handle_common_response(self, error: ErrorCode, leader_id: int, epoch: int, now_ms: int) -> bool:
        """Kafka's maybeHandleCommonResponse; True when the response needs no further handling."""
        if epoch < self.epoch or error is ErrorCode.UNKNOWN_LEADER_EPOCH:
            return True
        if epoch > self.epoch or error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
            self._follow_if_new(leader_id, epoch, now_ms)
            return True
        if leader_id >= 0 and leader_id != self.node_id and not self._knows_leader() and self._can_reach(leader_id):
            self._become_follower(epoch, leader_id, now_ms)
            return error is not ErrorCode.NONE
        return False

    def _record_vote(
        self, inflight: InFlight, voter: int, granted: bool, leader_id: int, epoch: int, now_ms: int
    ) -> None:
        state = self.state
        if not isinstance(state, Election) or inflight.context is not state:
            return
        if (
            not granted
            and inflight.pre_vote
            and epoch == self.epoch
            and leader_id >= 0
            and leader_id != self.node_id
            and self._can_reach(leader_id)
        ):
            self._become_follower(epoch, leader_id, now_ms)  # the leader we lost is alive to others
            return
        if voter not in self.voters.ids:
            return  # a vote from a node the voter set no longer holds counts for nothing
        if granted:
            state.granted.add(voter)
            self._maybe_win(state, now_ms)
            return
        state.rejected.add(voter)
        if len(self.voters) - len(state.rejected) < self.voters.majority and state.backoff_until_ms is None:
            state.backoff_until_ms = now_ms + self._election_backoff_ms(state.retries)

    # -- fetch, follower side ---------------------------------------------------------------------

    def _handle_fetch_response(self, response: m.RaftMessage, p: Any, now_ms: int) -> None:
        error = ErrorCode(p["error_code"])
        current = p["current_leader"]
        leader_id, epoch = current["leader_id"], current["leader_epoch"]
        if self._handle_common_response(error, leader_id, epoch, now_ms):
            return
        if error is not ErrorCode.NONE:
            self._requests.fail(response.source, now_ms)
            return
        state = self.state
        if isinstance(state, Election) and state.leader_id == response.source and epoch == self.epoch:
            self._become_follower(epoch, response.source, now_ms)  # a prospective rejoins its leader
            state = self.state
        if not isinstance(state, Follower) or state.leader_id != response.source or state.epoch != epoch:
            return
        state.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        state.has_fetched = True
        diverging = p["diverging_epoch"]
        if diverging["epoch"] >= 0:
            self._truncate_diverging(diverging["epoch"], diverging["end_offset"], now_ms)
            return
        snapshot = p["snapshot_id"]
        if snapshot["end_offset"] >= 0 and snapshot["epoch"] >= 0:
            state.fetching_snapshot = OffsetAndEpoch(snapshot["end_offset"], snapshot["epoch"])
            state.snapshot_bytes = bytearray()
            return
        records = p["records"]
        if records:
            data = bytes(records)
            try:
                self.log.append(data)
            except RaftLogError as exc:
                logger.warning("node %d: fetch response from %d not appended: %s", self.node_id, response.source, exc)
                self._requests.fail(response.source, now_ms)
                return
            self._request_flush()
            if self.history.apply(control_changes(data)):
                self._voters_changed(now_ms)
        high_watermark = p["high_watermark"]
        if high_watermark >= 0:
            # Kafka's updateFollowerHighWatermark: no further than this log reaches (what the next
            # fetch reports as known, so the leader answers it at once while it is ahead).
            known = min(high_watermark, self.log.end_offset)
            if self.high_watermark is None or known > self.high_watermark:
                self.high_watermark = known

    def _truncate_diverging(self, epoch: int, end_offset: int, now_ms: int) -> None:
        offset = rules.truncation_offset(self.log, epoch, end_offset)
        logger.info("node %d: truncating to %d (leader's epoch %d ends at %d)", self.node_id, offset, epoch, end_offset)
        self.log.truncate_to(offset)
        self._flush_requested = min(self._flush_requested, self.log.end_offset)
        if self.history.truncate_to(self.log.end_offset):
            self._voters_changed(now_ms)

    def _handle_fetch_snapshot_response(self, response: m.RaftMessage, p: Any, now_ms: int) -> None:
        """Kafka's handleFetchSnapshotResponse: append the chunk; once whole, the snapshot replaces
        the log (its end becomes the log start) and the next fetch continues from it."""
        error = ErrorCode.of(p["error_code"])
        current = p["current_leader"]
        if self._handle_common_response(error, current["leader_id"], current["leader_epoch"], now_ms):
            return
        state = self.state
        if not isinstance(state, Follower) or state.leader_id != response.source or state.fetching_snapshot is None:
            return
        state.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        state.has_fetched = True
        snapshot_id = OffsetAndEpoch(p["snapshot_id"]["end_offset"], p["snapshot_id"]["epoch"])
        if error is not ErrorCode.NONE or snapshot_id != state.fetching_snapshot:
            # The leader no longer has it (a newer snapshot replaced it): start over with a fetch.
            state.fetching_snapshot = None
            return
        if p["position"] != len(state.snapshot_bytes):
            return  # a chunk for another position (a duplicate): ask again from ours
        state.snapshot_bytes += bytes(p["unaligned_records"])
        if len(state.snapshot_bytes) < p["size"]:
            return
        data = bytes(state.snapshot_bytes)
        replaced_log = self.log.install_snapshot(snapshot_id, data)
        self._flush_requested = min(self._flush_requested, self.log.end_offset)
        if replaced_log:  # the log restarts at the snapshot: its voters are those in force
            before = self.voters
            self._reset_voters_to_snapshot(snapshot_id, data)
            if self.voters != before:
                self._voters_changed(now_ms)
        state.fetching_snapshot = None
        state.snapshot_bytes = bytearray()
        if self.high_watermark is None or self.high_watermark < snapshot_id.offset:
            self.high_watermark = snapshot_id.offset
        logger.info("node %d: installed snapshot %s from leader %d", self.node_id, snapshot_id, response.source)

    # -- voter changes (KIP-853), leader side ------------------------------------------------------

    def _respond_voter_change(self, request: m.RaftMessage, now_ms: int) -> None:
        """AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter, checked in Kafka's order (its
        KafkaRaftClient.handle*VoterRequest, then Add/Remove/UpdateVoterHandler). Add and remove are
        answered once their VotersRecord is committed, or fail with what Kafka answers."""
        body = request.body
        cluster_id = body.get("cluster_id")
        if cluster_id is not None and self.cluster_id is not None and cluster_id != self.cluster_id:
            if request.api_key == m.UPDATE_RAFT_VOTER:
                self._respond(request, self._update_voter_reply(ErrorCode.INCONSISTENT_CLUSTER_ID))
                return
            message = f'The given id "{cluster_id}" doesn\'t match the cluster id "{self.cluster_id}"'
            self._respond(request, m.voter_change_response(ErrorCode.INCONSISTENT_CLUSTER_ID, message))
            return
        if request.api_key == m.UPDATE_RAFT_VOTER:
            self._respond(request, self._handle_update_voter(body, now_ms))
            return
        error = self._leader_only_error(self.epoch)
        state = self.state
        if error is not ErrorCode.NONE or not isinstance(state, Leader):
            self._respond(request, m.voter_change_response(error))
            return
        key = VoterKey(int(body["voter_id"]), m.directory_id(body.get("voter_directory_id")))
        adding = request.api_key == m.ADD_RAFT_VOTER
        if key.node_id < 0 or key.directory_id == NO_DIRECTORY_ID:
            verb = "Add" if adding else "Remove"
            self._respond(
                request,
                m.voter_change_response(
                    ErrorCode.INVALID_REQUEST, f"{verb} voter request didn't include a valid voter"
                ),
            )
            return
        refused = self._voter_change_refusal(state, "adding" if adding else "removing", now_ms)
        if refused is not None:
            self._respond(request, m.voter_change_response(*refused))
            return
        if adding:
            self._start_add_voter(state, request, key, now_ms)
        else:
            self._start_remove_voter(state, request, key, now_ms)

    def _voter_change_refusal(self, leader: Leader, verb: str, now_ms: int) -> tuple[ErrorCode, str] | None:
        """What every voter change must wait for: none other pending, this epoch's high
        watermark known, kraft.version 1, the latest voter set committed."""
        self._expire_voter_change(leader, now_ms)
        if leader.voter_change is not None:
            return (
                ErrorCode.REQUEST_TIMED_OUT,
                "Request timed out waiting for leader to handle previous voter change request",
            )
        hw = leader.high_watermark
        if hw is None:
            return (
                ErrorCode.REQUEST_TIMED_OUT,
                "Request timed out waiting for leader to establish HWM and fence previous voter changes",
            )
        if self.kraft_version < RECONFIG_KRAFT_VERSION:
            return (
                ErrorCode.UNSUPPORTED_VERSION,
                f"Cluster doesn't support {verb} voter because the kraft.version feature is {self.kraft_version}",
            )
        latest = self.history.latest_offset()
        if latest >= hw:
            return (
                ErrorCode.REQUEST_TIMED_OUT,
                f"Request timed out waiting for voters to commit the latest voter change at Optional[{latest}] "
                f"with HWM {hw}",
            )
        return None

    def _start_add_voter(self, leader: Leader, request: m.RaftMessage, key: VoterKey, now_ms: int) -> None:
        body = request.body
        listeners = tuple((str(e["name"]), str(e["host"]), int(e["port"])) for e in body.get("listeners") or [])
        node = VoterNode(key, listeners)
        address = node.address(self.config.listener_name)
        if address is None:
            endpoints = ", ".join(f"ListenerName({n})={h}/<unresolved>:{p}" for n, h, p in listeners)
            message = (
                f"Add voter request didn't include the endpoint (Endpoints(endpoints={{{endpoints}}})) "
                f"for the default listener {self.config.listener_name}"
            )
            self._respond(request, m.voter_change_response(ErrorCode.INVALID_REQUEST, message))
            return
        if key.node_id in self.voters.ids:
            message = (
                f"The voter id for {java_key(key)} is already part of the set of voters {java_keys(self.voters.keys)}."
            )
            self._respond(request, m.voter_change_response(ErrorCode.DUPLICATE_VOTER, message))
            return
        # Ask the new voter which kraft.version it supports (its answer goes on with the change).
        self.endpoints[key.node_id] = address
        if not self._requests.can_send(key.node_id, now_ms):
            message = f"New voter {java_key(key)} is not ready to receive requests"
            self._respond(request, m.voter_change_response(ErrorCode.REQUEST_TIMED_OUT, message))
            return
        self._send_request(key.node_id, m.API_VERSIONS_KEY, m.api_versions_request(), now_ms)
        leader.voter_change = VoterChange(
            request,
            key,
            now_ms + self.config.request_timeout_ms,
            adding=node,
            ack_when_committed=bool(body.get("ack_when_committed", True)),
        )
        logger.info("node %d: adding voter %s at %s:%d", self.node_id, key, *address)

    def _handle_api_versions_response(self, response: m.RaftMessage, now_ms: int) -> None:
        """Kafka's AddVoterHandler.handleApiVersionsResponse: the voter-to-be supports the finalized
        kraft.version and has caught up -> the new voter set is appended."""
        leader = self.state
        if not isinstance(leader, Leader) or leader.voter_change is None or leader.voter_change.adding is None:
            return
        change = leader.voter_change
        key = change.voter
        if key.node_id != response.source or change.last_offset is not None:
            return
        error = ErrorCode.of(int(response.body.get("error_code", 0)))
        failure: tuple[ErrorCode, str] | None = None
        versions = m.supported_kraft_versions(response.body)
        kraft = self.kraft_version
        if error is not ErrorCode.NONE:
            failure = (
                ErrorCode.REQUEST_TIMED_OUT,
                f"Aborted add voter operation for since API_VERSIONS returned an error {error.name}",
            )
        elif versions is None or not versions[0] <= kraft <= versions[1]:
            shown = f"(min: {versions[0]}, max: {versions[1]}" if versions is not None else "(min: 0, max: 0)"
            failure = (
                ErrorCode.INVALID_REQUEST,
                f"Aborted add voter operation for {java_key(key)} since the kraft.version range {shown} doesn't "
                f"support the finalized version {kraft}",
            )
        elif not leader.is_caught_up_observer(key, now_ms):
            failure = (
                ErrorCode.REQUEST_TIMED_OUT,
                f"Aborted add voter operation for {java_key(key)} since it is lagging behind",
            )
        if failure is not None or versions is None:
            logger.info("node %d: not adding voter %s: %s", self.node_id, key, failure)
            self._answer_voter_change(change, *(failure or (ErrorCode.UNKNOWN_SERVER_ERROR, None)))
            leader.voter_change = None
            return
        voters = self.voters.add(VoterNode(key, change.adding.listeners, versions))
        if voters is None:  # became a voter meanwhile: cannot happen while this change is pending
            self._answer_voter_change(change, ErrorCode.DUPLICATE_VOTER, None)
            leader.voter_change = None
            return
        change.adding = None
        change.last_offset = self._append_voters(leader, voters, now_ms)
        if not change.ack_when_committed:  # AddRaftVoter v1 (KIP-1186): answered once appended
            self._answer_voter_change(change, ErrorCode.NONE, None)
            leader.voter_change = None

    def _start_remove_voter(self, leader: Leader, request: m.RaftMessage, key: VoterKey, now_ms: int) -> None:
        voters = self.voters.remove(key)
        if voters is None:
            message = f"Cannot remove voter {java_key(key)} from the set of voters {java_keys(self.voters.keys)}"
            self._respond(request, m.voter_change_response(ErrorCode.VOTER_NOT_FOUND, message))
            return
        change = VoterChange(request, key, now_ms + self.config.request_timeout_ms)
        leader.voter_change = change
        logger.info("node %d: removing voter %s", self.node_id, key)
        change.last_offset = self._append_voters(leader, voters, now_ms)

    def _handle_update_voter(self, body: m.Body, now_ms: int) -> dict[str, Any]:
        """Kafka's handleUpdateVoterRequest and UpdateVoterHandler: a voter's new listeners or
        kraft.version range, appended and answered at once (not waiting for the commit)."""
        error = self._leader_only_error(int(body["current_leader_epoch"]))
        leader = self.state
        if error is not ErrorCode.NONE or not isinstance(leader, Leader):
            return self._update_voter_reply(error)
        key = VoterKey(int(body["voter_id"]), m.directory_id(body.get("voter_directory_id")))
        listeners = tuple((str(e["name"]), str(e["host"]), int(e["port"])) for e in body.get("listeners") or [])
        feature = body["k_raft_version_feature"]
        versions = (int(feature["min_supported_version"]), int(feature["max_supported_version"]))
        node = VoterNode(key, listeners, versions)
        if (
            key.node_id < 0
            or key.directory_id == NO_DIRECTORY_ID
            or node.address(self.config.listener_name) is None
            or versions[0] < 0
            or versions[1] < versions[0]
        ):
            return self._update_voter_reply(ErrorCode.INVALID_REQUEST)
        refused = self._voter_change_refusal(leader, "updating", now_ms)
        if refused is not None:
            return self._update_voter_reply(refused[0])
        if not versions[0] <= self.kraft_version <= versions[1]:
            return self._update_voter_reply(ErrorCode.INVALID_REQUEST)
        voters = self.voters.update(node)
        if voters is None:
            return self._update_voter_reply(ErrorCode.VOTER_NOT_FOUND)
        if voters != self.voters:
            self._append_voters(leader, voters, now_ms)
        return self._update_voter_reply(ErrorCode.NONE)

    def _update_voter_reply(self, error: ErrorCode) -> dict[str, Any]:
        return m.update_voter_response(error, self.leader_id, self.epoch, self._leader_endpoint())

    def _append_voters(self, leader: Leader, voters: VoterSet, now_ms: int) -> int:
        """Append a VotersRecord: the set is in force at once, on the leader as on each follower
        that appends it."""
        batch = voters_batch(voters, base_offset=self.log.end_offset, epoch=leader.epoch, timestamp_ms=now_ms)
        offset = self.log.append(batch).last_offset
        self._request_flush()
        self.history.apply(control_changes(batch))
        self._voters_changed(now_ms)
        self._complete_parked_fetches(now_ms, only_due=False, below=self.log.end_offset)
        return offset

    def _voter_change_committed(self, leader: Leader) -> None:
        """Kafka's highWatermarkUpdated of the add and remove handlers: answer once the
        VotersRecord is committed (a leader that removed itself then resigns: _update_high_watermark)."""
        change = leader.voter_change
        hw = leader.high_watermark
        if change is None or change.last_offset is None or hw is None or hw <= change.last_offset:
            return
        self._answer_voter_change(change, ErrorCode.NONE, None)
        leader.voter_change = None

    def _expire_voter_change(self, leader: Leader, now_ms: int) -> None:
        change = leader.voter_change
        if change is not None and now_ms >= change.deadline_ms:
            self._answer_voter_change(change, ErrorCode.REQUEST_TIMED_OUT, None)
            leader.voter_change = None

    def _answer_voter_change(self, change: VoterChange, error: ErrorCode, message: str | None) -> None:
        self._respond(change.request, m.voter_change_response(error, message))

    # -- snapshots of the state machine -----------------------------------------------------------

    def snapshot(self, end_offset: int, data: bytes, now_ms: int) -> OffsetAndEpoch:
        """The state machine above wrote ``data``, its state after every record before
        ``end_offset``: keep it as a snapshot and delete the log before it. Only committed records
        may be covered (``end_offset`` at most the high watermark), and only at a batch boundary."""
        hw = self.high_watermark
        if hw is None or not self.log.start_offset < end_offset <= min(hw, self.log.durable_end_offset):
            raise ValueError(f"snapshot end {end_offset} outside the committed log ({self.log.start_offset}, {hw}]")
        epoch = self.log.epoch_at(end_offset - 1)
        if epoch is None or not self.log.is_batch_end(end_offset):
            raise ValueError(f"snapshot end {end_offset} is not the end of a batch in the log")
        snapshot_id = OffsetAndEpoch(end_offset, epoch)
        self.log.create_snapshot(snapshot_id, data)
        self.log.delete_before_snapshot(snapshot_id)
        self.history.prune_before(self.log.start_offset)
        return snapshot_id


def java_key(key: VoterKey) -> str:
    """A voter key as Kafka's ReplicaKey prints it in its error messages."""
    directory = "<undefined>" if key.directory_id == NO_DIRECTORY_ID else kafka_uuid_text(key.directory_id)
    return f"ReplicaKey(id={key.node_id}, directoryId={directory})"


def java_keys(keys: Sequence[VoterKey]) -> str:
    return "[" + ", ".join(java_key(k) for k in keys) + "]"
