"""A deterministic simulation of the Raft quorum: one seeded scheduler over N nodes.

As Kafka's RaftEventSimulationTest: a simulated clock, an in-memory network that delays, drops,
duplicates and reorders messages and can partition nodes, disks whose writes complete later (a
crash loses what was written but not flushed, and the quorum-state write not yet done), clients that
append to whoever leads, and invariants checked after every event:

- **single leader**: at most one node ever leads a given epoch;
- **monotonic epoch**: a node's epoch never falls (in memory within a life, on disk across lives);
- **monotonic high watermark**: a node's known high watermark never falls;
- **majority reached the high watermark**: the highest high watermark any node knows is on the
  disks of a majority of voters;
- **consistent committed data**: every node holds the same batch bytes at every committed offset,
  in its log or its snapshots, and never truncates an offset it knew committed;
- **snapshot at log start**: a log that starts past offset 0 starts where its earliest snapshot
  ends; **a leader never loads a snapshot** (only followers download them);
- **durable before sending**: no message leaves a node with an epoch its disk does not hold, and a
  granted (real) vote leaves only once the disk has recorded it;
- **one vote per epoch**: a node's disk never records two different votes in one epoch;
- **high watermark pushed**: a leader never holds back a fetch whose sender knows an older high
  watermark than its own (KIP-1166), so every follower and observer with a fetch in flight learns
  of a commit within one round trip;
- **one voter change at a time** (KIP-853, dynamic voters): each voter set in a node's log differs
  from the one before it by at most one voter. The majority that reached the high watermark is
  then counted over the voter set in force at it, or over a later one not yet committed (a leader
  counts with the latest set in its log).

With ``dynamic_voters`` the voters are not configured: every node starts with the same log, a
control batch with kraft.version 1 and the first voter set (as ``kafka-storage format
--initial-controllers`` bootstraps a quorum), finds the others by address, and an admin asks the
leader to add an observer or remove a voter (AddRaftVoter, RemoveRaftVoter) every so often.

A run is a function of its seed alone: every random choice comes from one ``random.Random(seed)``
(nodes get their own, derived from it), and the event queue breaks time ties by insertion order. A
failure names the seed and the command that replays it (``scripts/simulate.py --family F --seed N``).
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn, Protocol

from kafkalike.protocol.api import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import iter_batches
from kafkalike.raft import messages as m
from kafkalike.raft.config import QuorumConfig, VoterEndpoint, VoterKey
from kafkalike.raft.log import LogBatch, MemoryRaftLog, OffsetAndEpoch, RaftLog
from kafkalike.raft.node import FlushLog, NotLeaderError, PersistQuorumState, RaftNode, SendMessage
from kafkalike.raft.state import Leader, QuorumStateRecord, Role
from kafkalike.raft.voters import SUPPORTED_KRAFT_VERSIONS, VoterNode, VoterSet, bootstrap_batch

NodeFactory = Callable[..., RaftNode]
MAX_EVENTS_PER_RUN = 2_000_000
# The node id the admin's voter changes come from (node ids start at 1).
ADMIN_ID = 0
CONTROLLER_PORT = 9093


class InvariantViolation(AssertionError):
    """An invariant the quorum broke; the message names the seed and how to replay it."""

    trace: list[str] | None = None


@dataclass(frozen=True)
class SimConfig:
    voters: int = 3
    observers: int = 0
    network_delay_ms: tuple[int, int] = (1, 10)
    disk_delay_ms: tuple[int, int] = (1, 6)
    drop_rate: float = 0.02
    duplicate_rate: float = 0.01
    append_interval_ms: int = 200
    # Each node snapshots its committed log about this often (0: never), once it has this many
    # committed records past its log start; the log before a snapshot is deleted.
    snapshot_interval_ms: int = 0
    snapshot_min_records: int = 4
    # Put every message through the real codec (encode, then decode) on its way.
    wire: bool = False
    # How many of the observers know no voters, only the voters' addresses as
    # controller.quorum.bootstrap.servers (KIP-853): their messages are routed by address.
    bootstrap_observers: int = 0
    quorum: QuorumConfig | None = None
    # KIP-853: the voters live in the log (see the module docstring); an admin asks for a voter
    # change about this often (0: never).
    dynamic_voters: bool = False
    voter_change_interval_ms: int = 0


class SimLog(RaftLog, Protocol):
    """What the simulation asks of a node's log besides the node's interface."""

    installed_snapshots: int

    @property
    def batches(self) -> list[LogBatch]: ...
    def batch_index(self, offset: int) -> int: ...
    def snapshot_ids(self) -> list[OffsetAndEpoch]: ...
    def flush_token(self) -> Any: ...
    def complete_flush(self, token: Any) -> None: ...
    def crash(self) -> None: ...


# Makes the log of a node (by id); the default keeps it in memory.
LogFactory = Callable[[int], SimLog]


@dataclass
class SimNode:
    node_id: int
    log: SimLog = field(default_factory=MemoryRaftLog)
    durable_state: QuorumStateRecord = field(default_factory=lambda: QuorumStateRecord(0))
    node: RaftNode | None = None
    incarnation: int = 0
    wake_at: int | None = None
    disk_free_at: int = 0

    @property
    def up(self) -> bool:
        return self.node is not None


class Simulation:
    def __init__(
        self,
        seed: int,
        config: SimConfig | None = None,
        *,
        node_factory: NodeFactory = RaftNode,
        trace: bool = False,
        family: str = "custom",
        unchecked: frozenset[str] = frozenset(),
        log_factory: LogFactory = lambda _node_id: MemoryRaftLog(),
    ) -> None:
        self.seed = seed
        self.family = family
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.now = 0
        self.events = 0
        self.trace: list[str] | None = [] if trace else None
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._node_factory = node_factory
        voters = tuple(VoterKey(i) for i in range(1, self.config.voters + 1))
        base = self.config.quorum or QuorumConfig(voters=voters)
        self.quorum = replace(base, voters=voters)
        ids = list(range(1, self.config.voters + self.config.observers + 1))
        # Node ids by address, for the nodes that send by address (bootstrap observers); then
        # every voter has an address, which its Fetch responses give for the leader.
        self.addresses: dict[tuple[str, int], int] = {}
        self.bootstrap_observer_ids = ids[len(ids) - self.config.bootstrap_observers :]
        self.bootstrap_quorum = self.quorum
        self.directory_ids: dict[int, uuid.UUID] = {}
        self.voter_changes_enabled = self.config.voter_change_interval_ms > 0
        self.voter_changes: dict[str, int] = {}  # answers to the admin, by error name
        self._admin_correlation = itertools.count(1)
        if self.config.dynamic_voters:
            self.directory_ids = {i: uuid.UUID(int=self.rng.getrandbits(128)) for i in ids}
            self.addresses = {(f"node-{i}", CONTROLLER_PORT): i for i in ids}
            self.bootstrap_observer_ids = list(ids)  # everyone routes by address
            # Every controller, as an operator lists them: an observer asks only these for the
            # leader (Kafka's maybeSendAnyVoterFetch), and the first voters may all be removed.
            bootstrap = tuple((f"node-{i}", CONTROLLER_PORT) for i in ids)
            self.bootstrap_quorum = replace(self.quorum, voters=(), endpoints=(), bootstrap_servers=bootstrap)
        elif self.bootstrap_observer_ids:
            endpoints = tuple(VoterEndpoint(v, f"node-{v.node_id}", 9093) for v in voters)
            self.addresses = {(e.host, e.port): e.key.node_id for e in endpoints}
            self.quorum = replace(self.quorum, endpoints=endpoints)
            bootstrap = tuple((e.host, e.port) for e in endpoints)
            self.bootstrap_quorum = replace(self.quorum, voters=(), endpoints=(), bootstrap_servers=bootstrap)
        # A request sent to a bootstrap server's synthetic id: its sender and correlation id ->
        # that id, which the answer comes from.
        self._aliases: dict[tuple[int, int], int] = {}
        self.nodes = {i: SimNode(i, log_factory(i)) for i in ids}
        self.voter_ids = [v.node_id for v in voters]
        if self.config.dynamic_voters:
            first = VoterSet.of(self.voter_node(v.node_id) for v in voters)
            for sim_node in self.nodes.values():
                sim_node.log.append(bootstrap_batch(first))
                sim_node.log.complete_flush(sim_node.log.flush_token())
        self.blocked: set[tuple[int, int]] = set()
        self.appended = 0
        self.truncations = 0
        self.elections_ms: list[int] = []  # how long scenarios waited for a new leader, for scripts
        self.invariants = Invariants(self, unchecked)
        for sim_node in self.nodes.values():
            self._start(sim_node)
        self._push(self.config.append_interval_ms, "client", ())
        if self.config.snapshot_interval_ms:
            for node_id in self.nodes:
                self._push(self.rng.randint(1, self.config.snapshot_interval_ms), "snapshot", (node_id,))
        if self.voter_changes_enabled:
            self._push(self.config.voter_change_interval_ms, "voter_change", ())

    def voter_node(self, node_id: int) -> VoterNode:
        """Node ``node_id`` as a voter: its directory id and controller address."""
        key = VoterKey(node_id, self.directory_ids[node_id])
        return VoterNode(key, (("CONTROLLER", f"node-{node_id}", CONTROLLER_PORT),), SUPPORTED_KRAFT_VERSIONS)

    # -- scheduling -------------------------------------------------------------------------------

    def _push(self, at_ms: int, kind: str, args: tuple[Any, ...]) -> None:
        heapq.heappush(self._queue, (at_ms, next(self._seq), kind, args))

    def at(self, at_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` (a fault, a restart) at simulated time ``at_ms``."""
        self._push(at_ms, "action", (action,))

    def run_until(self, predicate: Callable[[], bool] | None = None, *, until_ms: int) -> bool:
        """Process events until ``predicate`` holds (True) or the clock passes ``until_ms`` (False)."""
        while True:
            if predicate is not None and predicate():
                return True
            if not self._queue or self._queue[0][0] > until_ms:
                self.now = max(self.now, until_ms)
                return predicate is None
            self._step()

    def _step(self) -> None:
        at_ms, _, kind, args = heapq.heappop(self._queue)
        self.now = at_ms
        self.events += 1
        if self.events > MAX_EVENTS_PER_RUN:
            self.fail(f"more than {MAX_EVENTS_PER_RUN} events")
        touched = getattr(self, "_on_" + kind)(*args)
        if touched is not None:
            self._drain(touched)
            self.invariants.check_node(touched)
        self.invariants.check_global()

    def _note(self, text: str) -> None:
        if self.trace is not None:
            self.trace.append(f"{self.now} {text}")

    # -- nodes ------------------------------------------------------------------------------------

    def _start(self, sim_node: SimNode) -> None:
        sim_node.incarnation += 1
        sim_node.wake_at = None
        rng = random.Random(self.rng.getrandbits(64))
        extra = {}
        if self.directory_ids:
            extra["directory_id"] = self.directory_ids[sim_node.node_id]
        sim_node.node = self._node_factory(
            sim_node.node_id,
            self.bootstrap_quorum if sim_node.node_id in self.bootstrap_observer_ids else self.quorum,
            sim_node.log,
            rng,
            self.now,
            cluster_id="sim-cluster",
            quorum_state=sim_node.durable_state,
            **extra,
        )
        self._note(f"start {sim_node.node_id}#{sim_node.incarnation} {sim_node.node.role.value} e{sim_node.node.epoch}")
        self.invariants.on_start(sim_node)
        self._drain(sim_node)

    def crash(self, node_id: int) -> None:
        """Kill a node: it loses unflushed log bytes and quorum-state writes not yet done."""
        sim_node = self.nodes[node_id]
        if sim_node.node is None:
            return
        sim_node.node = None
        sim_node.log.crash()
        self._note(f"crash {node_id} log durable to {sim_node.log.end_offset}")

    def restart(self, node_id: int) -> None:
        sim_node = self.nodes[node_id]
        if sim_node.node is None:
            self._start(sim_node)

    def resign(self, node_id: int) -> None:
        """Ask a leader to step down gracefully (as on shutdown)."""
        sim_node = self.nodes[node_id]
        if sim_node.node is not None:
            sim_node.node.resign(self.now)
            self._note(f"resign {node_id}")
            self._drain(sim_node)
            self.invariants.check_node(sim_node)

    def partition(self, *groups: Iterable[int]) -> None:
        """Cut every link between nodes of different groups (nodes in no group are cut off too)."""
        member = {n: i for i, g in enumerate(groups) for n in g}
        self.blocked = {
            (a, b)
            for a in self.nodes
            for b in self.nodes
            if a != b and (a not in member or b not in member or member[a] != member[b])
        }
        self._note(f"partition {[sorted(g) for g in groups]}")

    def isolate(self, node_id: int) -> None:
        self.partition([n for n in self.nodes if n != node_id], [node_id])

    def heal(self) -> None:
        self.blocked = set()
        self._note("heal")

    def live(self) -> list[RaftNode]:
        return [s.node for s in self.nodes.values() if s.node is not None]

    def leaders(self) -> list[RaftNode]:
        return [n for n in self.live() if n.role is Role.LEADER]

    def leader(self) -> RaftNode | None:
        """The leader of the highest epoch among live nodes, if a node leads it."""
        leaders = self.leaders()
        return max(leaders, key=lambda n: n.epoch) if leaders else None

    def has_stable_leader(self) -> bool:
        """A live leader that every live node follows in its epoch."""
        leader = self.leader()
        if leader is None:
            return False
        return all(n.epoch == leader.epoch and n.leader_id == leader.node_id for n in self.live())

    def fail(self, what: str) -> NoReturn:
        violation = InvariantViolation(
            f"{what}\n  seed {self.seed}, family {self.family}, at {self.now} ms after {self.events} events"
            f"\n  replay: python scripts/simulate.py --family {self.family} --seed {self.seed} --trace"
        )
        violation.trace = self.trace
        raise violation

    # -- events -----------------------------------------------------------------------------------

    def _on_action(self, action: Callable[[], None]) -> None:
        action()

    def client_append(self, node_id: int, value: bytes) -> int:
        """Append through ``node_id`` now, as a client would (raises NotLeaderError)."""
        sim_node = self.nodes[node_id]
        assert sim_node.node is not None
        offset = sim_node.node.append([value], self.now)
        self._note(f"append {node_id} @{offset}")
        self._drain(sim_node)
        self.invariants.check_node(sim_node)
        return offset

    def _on_client(self) -> SimNode | None:
        self._push(self.now + self.rng.randint(1, 2 * self.config.append_interval_ms), "client", ())
        leaders = self.leaders()
        if not leaders:
            return None
        leader = self.rng.choice(leaders)
        self.appended += 1
        value = f"s{self.seed}-v{self.appended}".encode()
        try:
            offset = leader.append([value], self.now)
        except NotLeaderError:
            return None
        self._note(f"append {leader.node_id} @{offset}")
        return self.nodes[leader.node_id]

    def request_voter_change(self, node_id: int, body: dict[str, Any], api_key: int) -> None:
        """An admin's AddRaftVoter or RemoveRaftVoter, sent to ``node_id``; its answer is counted
        in ``voter_changes`` (by error name) when it comes."""
        sim_node = self.nodes[node_id]
        if sim_node.node is None:
            return
        message = m.RaftMessage(ADMIN_ID, node_id, api_key, next(self._admin_correlation), body)
        self._note(f"admin {message}")
        sim_node.node.receive(message, self.now)
        self._drain(sim_node)
        self.invariants.check_node(sim_node)

    def _on_voter_change(self) -> None:
        """Add a node that is no voter, or remove a voter (never below two), through the leader."""
        if not self.voter_changes_enabled:
            return
        interval = self.config.voter_change_interval_ms
        self._push(self.now + self.rng.randint(interval // 2, interval * 3 // 2), "voter_change", ())
        leader = self.leader()
        if leader is None:
            return
        voters = leader.voters
        outside = sorted(set(self.nodes) - voters.ids)
        if outside and (len(voters) <= 1 or self.rng.random() < 0.5):
            node = self.voter_node(self.rng.choice(outside))
            body = m.add_voter_request("sim-cluster", node.key, list(node.listeners))
            self.request_voter_change(leader.node_id, body, m.ADD_RAFT_VOTER)
        elif len(voters) > 2:
            # Not from two voters to one: were the leader removing itself to crash before the
            # other voter had the record, neither could ever be elected (the leader is no voter in
            # its log, the other needs its vote and has the shorter log), in Kafka as in Raft.
            key = self.rng.choice(voters.keys)
            self.request_voter_change(leader.node_id, m.remove_voter_request("sim-cluster", key), m.REMOVE_RAFT_VOTER)

    def voter_sets_for(self, high_watermark: int) -> list[VoterSet]:
        """The voter sets a majority may have counted ``high_watermark`` over: the one in force
        at it, as the live nodes' logs hold it, and every later one any node's log has held (the
        leader that counted may have crashed since, its log with it); the static voters otherwise."""
        if not self.config.dynamic_voters:
            return [VoterSet.of(VoterNode(VoterKey(i)) for i in self.voter_ids)]
        sets: list[VoterSet] = []
        later = [v for o, v in self.invariants.voter_sets_seen if o >= high_watermark]
        for candidate in [node.history.at(high_watermark - 1) for node in self.live()] + later:
            if candidate not in sets:
                sets.append(candidate)
        return sets

    def _on_snapshot(self, node_id: int) -> SimNode | None:
        """The state machine of ``node_id`` snapshots what it has committed: here, the log itself
        (the previous snapshot's batches, then the committed batches after the log start)."""
        interval = self.config.snapshot_interval_ms
        self._push(self.now + self.rng.randint(interval // 2, interval * 3 // 2), "snapshot", (node_id,))
        sim_node = self.nodes[node_id]
        node, log = sim_node.node, sim_node.log
        if node is None or node.high_watermark is None:
            return None
        limit = min(node.high_watermark, log.durable_end_offset)
        ends = [b.last_offset + 1 for b in log.batches if b.last_offset < limit]
        if not ends or ends[-1] - log.start_offset < self.config.snapshot_min_records:
            return None
        end = ends[-1]
        latest = log.latest_snapshot_id()
        previous = log.read_snapshot(latest) if latest is not None else b""
        data = (previous or b"") + b"".join(b.data for b in log.batches if b.last_offset < end)
        snapshot_id = node.snapshot(end, data, self.now)
        self._note(f"snapshot {node_id} {snapshot_id}")
        return sim_node

    def _on_wake(self, node_id: int, incarnation: int, deadline: int) -> SimNode | None:
        sim_node = self.nodes[node_id]
        if sim_node.node is None or sim_node.incarnation != incarnation or sim_node.wake_at != deadline:
            return None
        sim_node.wake_at = None
        sim_node.node.tick(self.now)
        return sim_node

    def _on_deliver(
        self, message: m.RaftMessage, src_inc: int, dst_inc: int, alias: int | None = None
    ) -> SimNode | None:
        dst, src = self.nodes[message.destination], self.nodes[message.source]
        if dst.node is None or dst.incarnation != dst_inc or src.incarnation != src_inc:
            return None  # the connection died with one of its ends
        if (message.source, message.destination) in self.blocked:
            return None
        if alias is not None:
            message = replace(message, source=alias)  # an answer from the bootstrap server asked
        self._note(f"deliver {message}")
        end = dst.log.end_offset
        dst.node.receive(message, self.now)
        if dst.log.end_offset < end:
            self.truncations += 1
            self._note(f"truncated {dst.node_id} from {end} to {dst.log.end_offset}")
        return dst

    def _on_flush(self, node_id: int, incarnation: int, token: Any) -> SimNode | None:
        sim_node = self.nodes[node_id]
        if sim_node.node is None or sim_node.incarnation != incarnation:
            return None
        sim_node.log.complete_flush(token)
        self._note(f"flushed {node_id} to {sim_node.log.durable_end_offset}")
        sim_node.node.durable(sim_node.log.durable_end_offset, self.now)
        return sim_node

    def _on_persist(self, node_id: int, incarnation: int, record: QuorumStateRecord, version: int) -> SimNode | None:
        sim_node = self.nodes[node_id]
        if sim_node.node is None or sim_node.incarnation != incarnation:
            return None
        self.invariants.on_durable_state(sim_node, record)
        sim_node.durable_state = record
        self._note(f"persisted {node_id} {record}")
        sim_node.node.quorum_state_durable(version, self.now)
        return sim_node

    # -- outputs ----------------------------------------------------------------------------------

    def _drain(self, sim_node: SimNode) -> None:
        node = sim_node.node
        if node is None:
            return
        for out in node.outputs():
            if isinstance(out, SendMessage):
                self.invariants.on_send(sim_node, out.message)
                self._send(out.message)
            elif isinstance(out, FlushLog):
                self._disk(sim_node, "flush", (sim_node.log.flush_token(),))
            elif isinstance(out, PersistQuorumState):
                self._disk(sim_node, "persist", (out.state, out.version))
        deadline = max(node.poll(self.now), self.now)
        if sim_node.wake_at is None or deadline < sim_node.wake_at or sim_node.wake_at < self.now:
            sim_node.wake_at = deadline
            self._push(deadline, "wake", (sim_node.node_id, sim_node.incarnation, deadline))

    def _disk(self, sim_node: SimNode, kind: str, args: tuple[Any, ...]) -> None:
        """Disk writes of one node complete in order, each after a random delay."""
        low, high = self.config.disk_delay_ms
        done = max(self.now, sim_node.disk_free_at) + self.rng.randint(low, high)
        sim_node.disk_free_at = done
        self._push(done, kind, (sim_node.node_id, sim_node.incarnation, *args))

    def _route(self, message: m.RaftMessage) -> tuple[m.RaftMessage, int | None] | None:
        """The message between real node ids, and the id its answer must come from when that is
        another (a bootstrap server's); None when its sender knows no address for it."""
        if message.is_response:
            alias = self._aliases.pop((message.destination, message.correlation_id), None)
            return message, alias
        if message.source not in self.bootstrap_observer_ids:
            return message, None
        sender = self.nodes[message.source].node
        address = sender.endpoints.get(message.destination) if sender is not None else None
        node_id = self.addresses.get(address) if address is not None else None
        if node_id is None:
            self._note(f"no address for {message}")
            return None
        if node_id != message.destination:
            self._aliases[(message.source, message.correlation_id)] = message.destination
            message = replace(message, destination=node_id)
        return message, None

    def _send(self, message: m.RaftMessage) -> None:
        if message.destination == ADMIN_ID and message.is_response:
            name = ErrorCode.of(int(message.body["error_code"])).name
            self.voter_changes[name] = self.voter_changes.get(name, 0) + 1
            self._note(f"admin answered {name}: {message.body.get('error_message')}")
            return
        routed = self._route(message)
        if routed is None:
            return
        message, alias = routed
        if (message.source, message.destination) in self.blocked or self.rng.random() < self.config.drop_rate:
            return
        if self.config.wire:
            message = _through_the_wire(message)
        copies = 2 if self.rng.random() < self.config.duplicate_rate else 1
        src, dst = self.nodes[message.source], self.nodes[message.destination]
        low, high = self.config.network_delay_ms
        for _ in range(copies):
            delivery = (message, src.incarnation, dst.incarnation, alias)
            self._push(self.now + self.rng.randint(low, high), "deliver", delivery)


def _through_the_wire(message: m.RaftMessage) -> m.RaftMessage:
    """The message as the peer would decode it from the bytes the codec makes of it."""
    version = message.api_version
    if message.is_response:
        frame = encode_response(message.api_key, version, message.correlation_id, message.body)
        _, body = decode_response(message.api_key, version, frame[4:])
    else:
        header = RequestHeader(message.api_key, version, message.correlation_id, f"node-{message.source}")
        _, body = decode_request(encode_request(header, message.body)[4:])
    return replace(message, body=body)


def message_epoch(message: m.RaftMessage) -> int:
    """The epoch a message speaks for: the sender's own (a pre-vote's too, as Kafka sends it)."""
    p = m.partition_of(message.body)
    if p is None:
        return -1
    if message.api_key in (m.FETCH, m.FETCH_SNAPSHOT):
        return int(p["current_leader"]["leader_epoch"] if message.is_response else p["current_leader_epoch"])
    if message.api_key == m.VOTE and not message.is_response:
        return int(p["replica_epoch"])
    return int(p["leader_epoch"])


class Invariants:
    """Kafka's RaftEventSimulationTest invariants, checked incrementally after every event."""

    DURABLE_BEFORE_SENDING = "durable before sending"
    ONE_VOTE_PER_EPOCH = "one vote per epoch"

    def __init__(self, sim: Simulation, unchecked: frozenset[str] = frozenset()) -> None:
        """``unchecked`` names invariants to skip: only for a negative control that must reach
        another invariant first."""
        self.sim = sim
        self.check_durable = self.DURABLE_BEFORE_SENDING not in unchecked
        self.check_one_vote = self.ONE_VOTE_PER_EPOCH not in unchecked
        self.leader_of_epoch: dict[int, int] = {}
        self.epoch_seen: dict[int, int] = {}
        self.high_watermark_seen: dict[int, int] = {}
        self.max_high_watermark = 0
        self.committed: dict[int, bytes] = {}  # base offset -> batch bytes
        self.verified_end: dict[int, int] = {}
        self.vote_requests: dict[tuple[int, int, int], bool] = {}
        self.durable_votes: set[tuple[int, int, int]] = set()  # (voter, epoch, candidate) once on disk
        self.snapshots_checked: set[tuple[int, Any]] = set()
        self.voter_sets_seen: set[tuple[int, VoterSet]] = set()  # (offset, voters) in any node's log
        self.installs_seen: dict[int, int] = {}

    def on_start(self, sim_node: SimNode) -> None:
        node = sim_node.node
        assert node is not None
        self.epoch_seen[node.node_id] = node.epoch
        self.verified_end[node.node_id] = min(self.verified_end.get(node.node_id, 0), sim_node.log.end_offset)

    def on_durable_state(self, sim_node: SimNode, record: QuorumStateRecord) -> None:
        previous = sim_node.durable_state
        if (
            self.check_one_vote
            and record.epoch == previous.epoch
            and previous.voted_for is not None
            and record.voted_for != previous.voted_for
        ):
            self.sim.fail(
                f"{self.ONE_VOTE_PER_EPOCH}: node {sim_node.node_id} voted for {previous.voted_for.node_id} "
                f"and then {record.voted_for} in epoch {record.epoch}"
            )
        if record.voted_for is not None:
            self.durable_votes.add((sim_node.node_id, record.epoch, record.voted_for.node_id))
        if record.epoch < sim_node.durable_state.epoch:
            self.sim.fail(
                f"monotonic epoch: node {sim_node.node_id} wrote epoch {record.epoch} over {sim_node.durable_state.epoch}"
            )

    def on_send(self, sim_node: SimNode, message: m.RaftMessage) -> None:
        if not self.check_durable:
            return
        durable = sim_node.durable_state
        epoch = message_epoch(message)
        if epoch > durable.epoch:
            self.sim.fail(
                f"durable before sending: node {sim_node.node_id} sent {message} for epoch {epoch}, disk has {durable}"
            )
        if message.api_key != m.VOTE:
            return
        key = (message.source, message.destination, message.correlation_id)
        if not message.is_response:
            request = m.partition_of(message.body)
            self.vote_requests[key] = bool(request is not None and request.get("pre_vote"))
            return
        pre_vote = self.vote_requests.pop((message.destination, message.source, message.correlation_id), True)
        p = m.partition_of(message.body)
        if p is None or pre_vote or not p["vote_granted"]:
            return
        # The disk must have recorded this vote (a later write may since have moved to a later epoch).
        if (sim_node.node_id, p["leader_epoch"], message.destination) not in self.durable_votes:
            self.sim.fail(
                f"durable before sending: node {sim_node.node_id} granted its vote in epoch {p['leader_epoch']} "
                f"to {message.destination}, a vote its disk never recorded (it has {durable})"
            )

    def check_node(self, sim_node: SimNode) -> None:
        node = sim_node.node
        if node is None:
            return
        node_id = node.node_id
        if node.role is Role.LEADER:
            leader = self.leader_of_epoch.setdefault(node.epoch, node_id)
            if leader != node_id:
                self.sim.fail(f"single leader: nodes {leader} and {node_id} both lead epoch {node.epoch}")
        if node.epoch < self.epoch_seen.get(node_id, 0):
            self.sim.fail(f"monotonic epoch: node {node_id} went from {self.epoch_seen[node_id]} to {node.epoch}")
        self.epoch_seen[node_id] = node.epoch
        state = node.state
        if isinstance(state, Leader) and state.high_watermark is not None:
            for source, known in node.parked_fetches().items():
                if known < state.high_watermark:
                    self.sim.fail(
                        f"high watermark pushed: leader {node_id} holds the fetch of node {source}, which knows "
                        f"high watermark {known}, while its own is {state.high_watermark}"
                    )
        hw = node.high_watermark
        if hw is not None:
            if hw < self.high_watermark_seen.get(node_id, 0):
                self.sim.fail(
                    f"monotonic high watermark: node {node_id} from {self.high_watermark_seen[node_id]} to {hw}"
                )
            self.high_watermark_seen[node_id] = hw
            self.max_high_watermark = max(self.max_high_watermark, hw)
        if node.role is Role.LEADER and sim_node.log.installed_snapshots != self.installs_seen.get(node_id, 0):
            self.sim.fail(f"leader never loads a snapshot: node {node_id} installed one while leading")
        self.installs_seen[node_id] = sim_node.log.installed_snapshots
        if self.sim.config.dynamic_voters:
            self._check_voter_changes(node)
        self._check_snapshots(sim_node)
        self._check_committed(sim_node, hw or 0)

    def _check_voter_changes(self, node: RaftNode) -> None:
        previous = node.history.base
        for offset, voters in node.history.entries():
            self.voter_sets_seen.add((offset, voters))
            if previous.nodes and not previous.differs_by_at_most_one(voters):
                self.sim.fail(
                    f"one voter change at a time: node {node.node_id} went from voters {previous} "
                    f"to {voters} at offset {offset}"
                )
            previous = voters

    def _check_snapshots(self, sim_node: SimNode) -> None:
        """Snapshot at log start: a log that starts past 0 starts at its earliest snapshot; and every
        snapshot holds the committed batches, the same as everywhere."""
        node_id, log = sim_node.node_id, sim_node.log
        earliest = log.earliest_snapshot_id()
        if log.start_offset > 0 and (earliest is None or earliest.offset != log.start_offset):
            self.sim.fail(f"snapshot at log start: node {node_id} starts at {log.start_offset}, snapshot {earliest}")
        for snapshot_id in log.snapshot_ids():
            if (node_id, snapshot_id) in self.snapshots_checked:
                continue
            self.snapshots_checked.add((node_id, snapshot_id))
            data = log.read_snapshot(snapshot_id) or b""
            end = 0
            for pos, header in iter_batches(data):
                batch = data[pos : pos + header.size]
                if self.committed.setdefault(header.base_offset, batch) != batch:
                    self.sim.fail(
                        f"consistent committed data: snapshot {snapshot_id} of node {node_id} differs at {pos}"
                    )
                end = header.last_offset + 1
            if end != snapshot_id.offset:
                self.sim.fail(f"consistent committed data: snapshot {snapshot_id} of node {node_id} ends at {end}")
        if earliest is not None and earliest.offset == log.start_offset:
            self.verified_end[node_id] = max(self.verified_end.get(node_id, 0), log.start_offset)

    def _check_committed(self, sim_node: SimNode, hw: int) -> None:
        node_id, log = sim_node.node_id, sim_node.log
        verified = self.verified_end.get(node_id, 0)
        if log.end_offset < verified:
            self.sim.fail(
                f"consistent committed data: node {node_id} truncated to {log.end_offset} below committed {verified}"
            )
        committed_end = min(hw, log.end_offset)
        if committed_end <= verified:
            return
        batches = log.batches
        i = log.batch_index(verified)
        while i < len(batches) and batches[i].last_offset < committed_end:
            batch = batches[i]
            known = self.committed.setdefault(batch.base_offset, batch.data)
            if known != batch.data:
                self.sim.fail(
                    f"consistent committed data: node {node_id} holds other bytes at offset {batch.base_offset}"
                )
            verified = batch.last_offset + 1
            i += 1
        self.verified_end[node_id] = verified

    def check_global(self) -> None:
        hw = self.max_high_watermark
        if hw == 0:
            return
        sets = self.sim.voter_sets_for(hw)
        if not sets:
            return
        counts = []
        for voters in sets:
            reached = sum(
                1 for v in voters.ids if v in self.sim.nodes and self.sim.nodes[v].log.durable_end_offset >= hw
            )
            if reached >= voters.majority:
                return
            counts.append(f"{reached} of {voters}")
        self.sim.fail(f"majority reached the high watermark: only {', '.join(counts)} voters have {hw} on disk")

    def check_agreement(self) -> None:
        """At the end: live nodes agree on the committed prefix (each checked against the same map)."""
        for sim_node in self.sim.nodes.values():
            self.check_node(sim_node)
