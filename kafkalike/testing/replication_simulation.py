"""A deterministic simulation of the controller, brokers, partition replication, an acks=all
producer and a consumer.

One ``QuorumController`` with its ``ClusterControlManager`` (records committed a little after
they are written; each broker replays the committed log at its own pace as ``MetadataDelta`` ->
``local_changes`` -> ``ReplicaManager.apply_changes``), brokers whose ``BrokerLifecycle`` registers
and heartbeats (fenced after the session timeout; a crashed broker registers again as a new
incarnation, one that shut down cleanly passes its previous epoch: KIP-966), each holding a real
``ReplicaManager`` over in-memory logs. Followers fetch from their leaders, leaders send their ISR
changes as AlterPartition, the producer appends unique values to the leader with acks=all and the
consumer reads from the leader up to the high watermark: every one of these a message over a
simulated network that delays, drops, duplicates and reorders, that can cut a broker off (from
everyone, or from the other brokers while clients still reach it) or two brokers from each other.
Disks lose what was not flushed: each broker flushes now and then (or after every append), and a
crash cuts each log back to what was flushed, its high-watermark checkpoint with it.

The follower's side mirrors ``server/replication.py`` (one fetch in flight per partition, an answer
for a log that moved since is dropped, a diverging epoch truncates with
``Partition.truncation_offset``, OFFSET_OUT_OF_RANGE looks at the leader's log start and end);
the leader's side mirrors ``server/handlers/fetch.py`` (a fetch that diverged does not move the
follower's state).

Invariants, checked after every event:

- **no acknowledged write lost** and **committed data never diverges**: every replica's log
  below its high watermark, and the current leader's log below everything ever committed, is the
  one committed history (an offset whose value differs, or is gone, is reported as an
  acknowledged write lost when it is the current leader's and the producer was told it was
  written; an acknowledgement is counted when ``Partition.replicated_to`` says NONE);
- **the high watermark never moves backwards within a leader's term** (one incarnation of a
  broker leading one leader epoch) **and never exceeds what the ISR holds** (the log end of each
  maximal ISR member still following this leader, in the incarnation whose fetches raised it);
- **one leader per partition epoch**;
- **the leader is always in the ISR** (the controller's and the leader's own);
- **no consumer read above the high watermark**.

A run depends on its seed alone (one ``random.Random``; time ties broken by insertion order); a
violation names the command that replays it with its event trace.
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkalike.controller.broker_lifecycle import (
    BROKER_HEARTBEAT_API,
    BrokerLifecycle,
    BrokerState,
    Feature,
    Listener,
    OutboundRequest,
)
from kafkalike.controller.broker_partition_changes import ELR_FEATURE
from kafkalike.controller.cluster_control import ClusterControlManager
from kafkalike.controller.delta import ControllerResult, MetadataDelta
from kafkalike.controller.image import EMPTY_IMAGE, METADATA_VERSION_FEATURE, MetadataImage
from kafkalike.controller.quorum_controller import QuorumController
from kafkalike.log.config import LogConfig
from kafkalike.log.errors import LogError, OffsetOutOfRange
from kafkalike.log.manager import LogManager
from kafkalike.log.storage import IMMEDIATE
from kafkalike.protocol.codec import schema
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataBatch, MetadataRecordType, metadata_record
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.replica import (
    Isolation,
    NewReplica,
    Partition,
    PartitionError,
    ReplicaManager,
    TopicPartition,
)
from kafkalike.replica.follower_state import IsrChange
from kafkalike.replica.partition import alter_partition_answer

T = MetadataRecordType
CLUSTER_ID = "sim-cluster-000000000B"
CONTROLLER_ID = 3000
METADATA_VERSION = 25  # 4.0-IV3
REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
ALTER_PARTITION_VERSION = 3
TOPIC = "sim"
MAX_EVENTS = 200_000
READ_MAX_BYTES = 1 << 20


class InvariantViolation(AssertionError):
    """An invariant broken; the message names the seed and the command that replays it."""

    def __init__(self, message: str, trace: list[str] | None = None) -> None:
        super().__init__(message)
        self.trace = trace


@dataclass(frozen=True)
class ReplicationConfig:
    brokers: int = 3
    partitions: int = 1
    replication_factor: int = 3
    min_insync_replicas: int = 2
    elr: bool = True
    unclean_leader_election: bool = False
    flush_every_append: bool = False  # flush.messages=1: a crash loses nothing written
    duration_ms: int = 5_000
    session_timeout_ms: int = 2_000
    heartbeat_interval_ms: int = 500
    replica_lag_time_max_ms: int = 1_000
    request_timeout_ms: int = 400
    fetch_wait_max_ms: int = 250  # the leader holds an empty fetch this long (long poll)
    fetch_backoff_ms: int = 50
    network_delay_ms: tuple[int, int] = (1, 15)
    long_delay_rate: float = 0.01  # a message held up to a second
    drop_rate: float = 0.02
    duplicate_rate: float = 0.02
    commit_delay_ms: tuple[int, int] = (1, 10)
    metadata_delay_ms: tuple[int, int] = (1, 40)  # from a commit to a broker's replay of it
    flush_interval_ms: tuple[int, int] = (50, 600)
    produce_interval_ms: tuple[int, int] = (40, 250)
    consume_interval_ms: tuple[int, int] = (100, 500)
    fault_interval_ms: tuple[int, int] = (400, 2_000)
    down_ms: tuple[int, int] = (100, 2_500)
    produce_timeout_ms: int = 2_000
    # AlterPartitionReassignments now and then (None: never): a random target of
    # replication_factor brokers, or a cancel.
    reassign_interval_ms: tuple[int, int] | None = None
    cancel_rate: float = 0.2


FAMILIES: dict[str, ReplicationConfig] = {
    # min.insync.replicas 2 under ELR, crashes losing what was not flushed.
    "replication": ReplicationConfig(),
    # No ELR (4.0's default), every append flushed: the ISR alone keeps the data; two
    # partitions, each broker leading one and following the other.
    "replication_flushed": ReplicationConfig(elr=False, flush_every_append=True, partitions=2),
    # min.insync.replicas 1, every append flushed: a lone leader may acknowledge.
    "replication_min_isr1": ReplicationConfig(min_insync_replicas=1, elr=False, flush_every_append=True),
    # Four brokers, RF=3, partitions moved between them (and moves cancelled) under the same faults.
    "replication_reassign": ReplicationConfig(brokers=4, partitions=2, reassign_interval_ms=(200, 1_200)),
    # Unclean elections: loss IS allowed here, and the checker must report it (the negative control).
    "replication_unclean": ReplicationConfig(min_insync_replicas=1, elr=False, unclean_leader_election=True),
}
LOSSY_FAMILIES = frozenset({"replication_unclean"})


def replay_command(family: str, seed: int) -> str:
    return f"python scripts/simulate.py --family {family} --seed {seed} -v"


def as_message(api: str, kind: str, version: int, body: dict[str, Any]) -> Any:
    """``body`` as the codec decodes it (the same field names and defaults as on the wire)."""
    s = schema(api, kind, version)
    return s.decode(s.encode(body))


def bootstrap_records(config: ReplicationConfig) -> list[ApiMessageAndVersion]:
    out = [metadata_record(T.FEATURE_LEVEL_RECORD, name=METADATA_VERSION_FEATURE, feature_level=METADATA_VERSION)]
    if config.elr:
        out.append(metadata_record(T.FEATURE_LEVEL_RECORD, name=ELR_FEATURE, feature_level=1))
    return out


def log_values(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in ``data``'s batches."""
    out = []
    for pos, header in iter_batches(data):
        for record in decode_records(data, pos, header):
            out.append((record.offset(header), record.value or b""))
    return out


class SimEligibility:
    """Which brokers may join an ISR, from the broker's own metadata image (KIP-841)."""

    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker

    def isr_eligible_epoch(self, broker_id: int) -> int | None:
        registration = self.broker.image.brokers.get(broker_id)
        if registration is None or registration.fenced or registration.in_controlled_shutdown:
            return None
        return registration.epoch

    def local_broker_epoch(self) -> int:
        life = self.broker.life
        return -1 if life is None else life.broker_epoch

    def is_alive(self, broker_id: int) -> bool:
        registration = self.broker.image.brokers.get(broker_id)
        return registration is not None and not registration.fenced


@dataclass
class Followed:
    """A partition this broker follows, as its fetcher sees it (``server/replication.py``)."""

    leader_id: int
    leader_epoch: int
    in_flight: int = 0  # the id of the fetch out now (0: none)
    fetch_offset: int = -1


@dataclass
class PendingAck:
    """An acks=all append waiting for the high watermark (Kafka's DelayedProduce)."""

    partition: Partition
    required_offset: int
    offset: int
    value: bytes
    deadline_ms: int


@dataclass
class SimBroker:
    broker_id: int
    life: BrokerLifecycle | None = None
    lifecycle_request: OutboundRequest | None = None  # the registration or heartbeat awaiting its answer
    generation: int = 0  # bumped at every crash and start: messages of an earlier life are dropped
    up: bool = False
    isolated: bool = False
    clients_reach: bool = True  # while isolated: whether clients still reach it
    image: MetadataImage = EMPTY_IMAGE
    applied_offset: int = -1
    partitions_applied: bool = False  # the image's partitions applied once (after its registration)
    replicas: ReplicaManager | None = None
    followed: dict[TopicPartition, Followed] = field(default_factory=dict)
    parked: dict[TopicPartition, list[Callable[[], None]]] = field(default_factory=dict)
    pending_acks: list[PendingAck] = field(default_factory=list)
    flushed: dict[TopicPartition, int] = field(default_factory=dict)
    hw_checkpoint: dict[TopicPartition, int] = field(default_factory=dict)
    disk: dict[TopicPartition, tuple[uuid.UUID, bytes, int]] = field(default_factory=dict)  # what a crash left
    clean_epoch: int = -1  # the epoch held at a clean shutdown, passed on to the next start
    alter_in_flight: dict[TopicPartition, IsrChange] = field(default_factory=dict)


class ReplicationSimulation:
    def __init__(
        self,
        seed: int,
        config: ReplicationConfig = ReplicationConfig(),
        *,
        family: str = "replication",
        trace: bool = False,
    ) -> None:
        self.seed = seed
        self.family = family
        self.config = config
        self.rng = random.Random(seed)
        self.now_ms = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self.trace: list[str] | None = [] if trace else None
        self.events = 0
        # the controller
        self.controller = QuorumController(node_id=CONTROLLER_ID, rng=random.Random(seed))
        self.cluster = ClusterControlManager(
            cluster_id=CLUSTER_ID,
            session_timeout_ms=config.session_timeout_ms,
            default_min_insync_replicas=config.min_insync_replicas,
            default_unclean_leader_election=config.unclean_leader_election,
        )
        self.records: list[ApiMessageAndVersion] = []  # the metadata log
        self.committed_offset = -1
        self._unreplayed: deque[tuple[int, int]] = deque()  # written batches not yet committed
        self._commit_waiters: list[tuple[int, int, Callable[[], None]]] = []
        self.topic_id: uuid.UUID | None = None
        self.topic_requested = False
        # the brokers
        self.brokers = [SimBroker(b) for b in range(config.brokers)]
        # the clients
        self.next_value = 0
        self.consumer_position: dict[int, int] = {}
        self.cut_links: set[frozenset[int]] = set()  # pairs of brokers that cannot reach each other
        # what the checker knows
        self.committed: dict[int, list[bytes]] = {}  # partition -> the committed history by offset
        self.acked: dict[int, dict[int, bytes]] = {}  # partition -> offset -> value the producer was told
        self.consumed: dict[int, dict[int, bytes]] = {}
        self.verified: dict[tuple[int, int, int], int] = {}  # (broker, generation, partition) -> prefix checked
        self.term_hw: dict[tuple[int, int, int, int], int] = {}  # (broker, generation, partition, epoch) -> hw
        self.epoch_leaders: dict[tuple[int, int], int] = {}  # (partition, leader epoch) -> broker
        # Set by whatever moves what the rules read (a partition's progress callback, appends,
        # ISR changes, commits, crashes and starts, consumer reads).
        self._changed = True
        self.hw_basis: dict[tuple[int, int, int, int], dict[int, int | None]] = {}  # term -> member -> generation
        self.fetched_in: dict[tuple[int, int, int, int, int], int] = {}  # leader term + follower -> its generation
        self.stats = {
            "acked": 0,
            "produce_errors": 0,
            "consumed": 0,
            "crashes": 0,
            "clean_shutdowns": 0,
            "isolations": 0,
            "cut_links": 0,
            "truncations": 0,
            "leader_changes": 0,
            "isr_changes": 0,
            "lost_unflushed": 0,
            "reassignments": 0,
            "cancels": 0,
            "moves_done": 0,
        }

    # -- scheduling ---------------------------------------------------------------------------

    def at(self, time_ms: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (time_ms, next(self._seq), action))

    def note(self, message: str) -> None:
        if self.trace is not None:
            self.trace.append(f"{self.now_ms:>7} ms  {message}")

    def run(self) -> ReplicationSimulation:
        self._write(self.controller.activate(bootstrap_records(self.config)))
        self.cluster.activate(self.controller.latest_image, 0)
        for b in self.brokers:
            self.at(self.rng.randint(0, 200), lambda b=b: self._start(b, previous_epoch=-1))  # type: ignore[misc]
        self.at(self.rng.randint(*self.config.fault_interval_ms) + 600, self._fault)
        self.at(500, self._produce)
        self.at(500, self._consume)
        if self.config.reassign_interval_ms is not None:
            self.at(self.rng.randint(*self.config.reassign_interval_ms) + 600, self._reassign)
        self._schedule_controller_poll()
        while self._queue and self.events < MAX_EVENTS:
            time_ms, _, action = heapq.heappop(self._queue)
            if time_ms > self.config.duration_ms:
                break
            self.now_ms = time_ms
            action()
            self.events += 1
            self._complete_acks()
            self.check_invariants()
        return self

    def fail(self, message: str) -> None:
        raise InvariantViolation(
            f"seed {self.seed} at {self.now_ms} ms: {message} (replay: {replay_command(self.family, self.seed)})",
            self.trace,
        )

    # -- the controller ------------------------------------------------------------------------

    def _write(self, result: ControllerResult[Any]) -> int:
        """Append a result's records to the metadata log (replayed into the cluster manager at
        once, as the active controller does); the commit comes a little later. Its last offset."""
        first = len(self.records)
        for i, record in enumerate(result.records):
            self.cluster.replay(record, first + i)
            self.records.append(record)
            if (
                record.type == T.PARTITION_CHANGE_RECORD
                and getattr(record, "replicas", None) is not None
                and not getattr(record, "adding_replicas", None)
                and not getattr(record, "removing_replicas", None)
            ):
                self.stats["moves_done"] += 1  # replicas set without adding/removing: a move ends
        last = len(self.records) - 1
        if result.records:
            self.controller.appended(last)
            self._unreplayed.append((first, last))
            commit_ms = self.now_ms + self.rng.randint(*self.config.commit_delay_ms)
            self.at(commit_ms, lambda: self._commit(last))
        self.controller.schedule_periodic(self.cluster.partitions, self.now_ms)
        return last

    def _commit(self, last: int) -> None:
        """The log is committed up to ``last``: every batch to it replayed, in order."""
        while self._unreplayed and self._unreplayed[0][1] <= last:
            first, end = self._unreplayed.popleft()
            self.controller.replay(MetadataBatch(first, end, 1, self.now_ms, tuple(self.records[first : end + 1])))
            self.committed_offset = end
            self._changed = True
        while self._commit_waiters and self._commit_waiters[0][0] <= self.committed_offset:
            heapq.heappop(self._commit_waiters)[2]()
        for broker in self.brokers:  # each learns of it at its own pace
            generation = broker.generation
            delay = self.rng.randint(*self.config.metadata_delay_ms)
            self.at(self.now_ms + delay, lambda b=broker, g=generation: self._fetch_metadata(b, g))  # type: ignore[misc]
        self._maybe_create_topic()

    def _after_commit(self, offset: int, action: Callable[[], None]) -> None:
        """Run ``action`` once ``offset`` is committed (replies wait for their records)."""
        if offset <= self.committed_offset:
            action()
        else:
            heapq.heappush(self._commit_waiters, (offset, next(self._seq), action))

    def _maybe_create_topic(self) -> None:
        image = self.controller.latest_image
        if self.topic_requested or len(image.unfenced_brokers()) < self.config.brokers:
            return
        self.topic_requested = True
        configs = {"min.insync.replicas": str(self.config.min_insync_replicas)}
        if self.config.unclean_leader_election:
            configs["unclean.leader.election.enable"] = "true"
        request = as_message(
            "CreateTopics",
            "request",
            7,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": self.config.partitions,
                        "replication_factor": self.config.replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ],
                "timeout_ms": 5000,
                "validate_only": False,
            },
        )
        result = self.controller.create_topics(request, self.now_ms)
        self._write(result)
        topic = self.controller.latest_image.topic(TOPIC)
        assert topic is not None, result.reply
        self.topic_id = topic.topic_id
        self.note(f"controller: topic {TOPIC} created")

    def _reassign(self) -> None:
        """AlterPartitionReassignments of one partition (the controller's, as a client's would
        be forwarded): a random target, or a cancel of what moves."""
        interval = self.config.reassign_interval_ms
        assert interval is not None
        self.at(self.now_ms + self.rng.randint(*interval), self._reassign)
        if self.topic_id is None:
            return
        index = self.rng.randrange(self.config.partitions)
        cancel = self.rng.random() < self.config.cancel_rate
        target = None if cancel else self.rng.sample(range(self.config.brokers), self.config.replication_factor)
        request = as_message(
            "AlterPartitionReassignments",
            "request",
            1,
            {
                "timeout_ms": 5000,
                "allow_replication_factor_change": False,
                "topics": [{"name": TOPIC, "partitions": [{"partition_index": index, "replicas": target}]}],
            },
        )
        result = self.controller.alter_partition_reassignments(self.cluster.partitions, request, 1)
        (answer,) = result.reply.topics[0][1]
        self.note(
            f"controller: reassign {index} to {target if target is not None else 'cancel'}: "
            f"{answer.error.code.name} {_describe(result.records) if result.records else ''}"
        )
        if result.records:
            self.stats["cancels" if cancel else "reassignments"] += 1
        self._write(result)

    def _schedule_controller_poll(self) -> None:
        deadlines = [d for d in (self.cluster.poll(self.now_ms), self.controller.poll(self.now_ms)) if d is not None]
        next_ms = max(min(deadlines, default=self.now_ms + 100), self.now_ms + 1)
        self.at(next_ms, self._controller_poll)

    def _controller_poll(self) -> None:
        deadline = self.cluster.poll(self.now_ms)
        while deadline is not None and deadline <= self.now_ms:
            result = self.controller.run(lambda image: self.cluster.fence_stale_broker(image, self.now_ms))
            if result.records:
                self.note(f"controller: fenced a broker whose session expired: {_describe(result.records)}")
            self._write(result)
            if not result.reply:
                break
            deadline = self.cluster.poll(self.now_ms)
        due = self.controller.poll(self.now_ms)
        if due is not None and due <= self.now_ms:
            result = self.controller.elect_unclean_leaders(self.cluster.partitions, self.now_ms)
            if result.records:
                self.note(f"controller: unclean election: {_describe(result.records)}")
            self._write(result)
        self._schedule_controller_poll()

    def _handle_lifecycle(self, broker: SimBroker, generation: int, request: OutboundRequest) -> None:
        next_offset = len(self.records)
        result: ControllerResult[Any]
        if request.api_key == BROKER_HEARTBEAT_API:
            msg = as_message("BrokerHeartbeat", "request", HEARTBEAT_VERSION, request.body)
            result = self.controller.run(
                lambda image: self.cluster.heartbeat(image, msg, next_offset=next_offset, now_ms=self.now_ms)
            )
            api, version = "BrokerHeartbeat", HEARTBEAT_VERSION
        else:
            msg = as_message("BrokerRegistration", "request", REGISTRATION_VERSION, request.body)
            result = self.controller.run(
                lambda image: self.cluster.register_broker(
                    image, msg, api_version=REGISTRATION_VERSION, next_offset=next_offset, now_ms=self.now_ms
                )
            )
            api, version = "BrokerRegistration", REGISTRATION_VERSION
        if result.records:
            self.note(f"controller: {api} of broker {msg.broker_id}: {_describe(result.records)}")
        last = self._write(result)
        reply = as_message(api, "response", version, result.reply.to_response())
        self._after_commit(
            last,
            lambda: self._send_to_broker(broker, generation, lambda: self._lifecycle_reply(broker, request, reply)),
        )

    def _handle_alter_partition(self, broker: SimBroker, generation: int, body: dict[str, Any]) -> None:
        msg = as_message("AlterPartition", "request", ALTER_PARTITION_VERSION, body)
        result = self.controller.alter_partition(self.cluster.partitions, msg, ALTER_PARTITION_VERSION, self.now_ms)
        if result.records:
            self.note(f"controller: AlterPartition of broker {msg.broker_id}: {_describe(result.records)}")
            self.stats["isr_changes"] += 1
        last = self._write(result)
        reply = as_message("AlterPartition", "response", ALTER_PARTITION_VERSION, result.reply.to_response())
        self._after_commit(
            last,
            lambda: self._send_to_broker(broker, generation, lambda: self._alter_partition_reply(broker, reply)),
        )

    # -- the network -----------------------------------------------------------------------------

    def _delay(self) -> int:
        if self.rng.random() < self.config.long_delay_rate:
            return self.rng.randint(200, 1000)
        return self.rng.randint(*self.config.network_delay_ms)

    def _transmit(self, cut: bool, deliver: Callable[[], None]) -> None:
        """A message: dropped when ``cut`` (an isolated end) or by chance, else delayed (so
        reordered), sometimes twice."""
        if cut or self.rng.random() < self.config.drop_rate:
            return
        self.at(self.now_ms + self._delay(), deliver)
        if self.rng.random() < self.config.duplicate_rate:
            self.at(self.now_ms + self._delay(), deliver)

    def _between_brokers(self, src: SimBroker, dst: SimBroker, action: Callable[[], None]) -> None:
        """A message from ``src`` to ``dst``; lost if either end restarts meanwhile (its
        connection broke)."""
        src_gen, dst_gen = src.generation, dst.generation

        def deliver() -> None:
            if src.generation == src_gen and dst.generation == dst_gen and src.up and dst.up:
                action()

        cut = src.isolated or dst.isolated or frozenset((src.broker_id, dst.broker_id)) in self.cut_links
        self._transmit(cut, deliver)

    def _send_to_controller(self, broker: SimBroker, action: Callable[[SimBroker, int], None]) -> None:
        generation = broker.generation
        self._transmit(broker.isolated, lambda: action(broker, generation))

    def _send_to_broker(self, broker: SimBroker, generation: int, action: Callable[[], None]) -> None:
        def deliver() -> None:
            if broker.generation == generation and broker.up:
                action()

        self._transmit(broker.isolated, deliver)

    def _client_to(self, broker: SimBroker, action: Callable[[], None], on_reply_lost: Callable[[], None]) -> None:
        """A client's request to ``broker`` (``action`` sends the reply itself); ``on_reply_lost``
        runs when it is not delivered."""
        cut = broker.isolated and not broker.clients_reach
        generation = broker.generation
        if cut or self.rng.random() < self.config.drop_rate:
            on_reply_lost()
            return

        def deliver() -> None:
            if broker.generation == generation and broker.up:
                action()
            else:
                on_reply_lost()

        self.at(self.now_ms + self._delay(), deliver)

    # -- brokers: life ------------------------------------------------------------------------------

    def _start(self, broker: SimBroker, previous_epoch: int) -> None:
        broker.generation += 1
        broker.up = True
        self._changed = True
        broker.isolated = False
        broker.image = EMPTY_IMAGE
        broker.applied_offset = -1
        broker.partitions_applied = False
        broker.lifecycle_request = None
        broker.followed.clear()
        broker.parked.clear()
        broker.pending_acks.clear()
        broker.alter_in_flight.clear()
        logs = LogManager([f"/sim/broker-{broker.broker_id}"], storage="memory")
        broker.replicas = ReplicaManager(
            logs,
            broker.broker_id,
            on_progress=self._touched,
            brokers=SimEligibility(broker),
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
        )
        broker.life = BrokerLifecycle(
            node_id=broker.broker_id,
            cluster_id=CLUSTER_ID,
            incarnation_id=uuid.UUID(int=self.rng.getrandbits(128)),
            listeners=[Listener("PLAINTEXT", "127.0.0.1", 9092 + broker.broker_id)],
            features=[Feature(METADATA_VERSION_FEATURE, 7, METADATA_VERSION), Feature(ELR_FEATURE, 0, 1)],
            rng=random.Random(self.rng.getrandbits(64)),
            log_dirs=[uuid.UUID(int=(broker.broker_id + 1) << 64 | 0xD1)],
            previous_broker_epoch=previous_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            session_timeout_ms=self.config.session_timeout_ms,
        )
        self.note(f"broker {broker.broker_id}: starts (previous epoch {previous_epoch})")
        broker.life.start(self.now_ms)
        generation = broker.generation
        self._flush_lifecycle(broker)
        self._poll(broker, generation)
        self._fetch_metadata(broker, generation)
        self.at(self.now_ms + self.rng.randint(*self.config.flush_interval_ms), lambda: self._flush(broker, generation))
        lag = self.config.replica_lag_time_max_ms // 2
        self.at(self.now_ms + lag, lambda: self._expire_isr(broker, generation))

    def _live(self, broker: SimBroker, generation: int) -> bool:
        return broker.up and broker.generation == generation

    def _poll(self, broker: SimBroker, generation: int) -> None:
        if not self._live(broker, generation) or broker.life is None:
            return
        life = broker.life
        deadline = life.poll(self.now_ms, broker.applied_offset)
        self._flush_lifecycle(broker)
        if life.state == BrokerState.SHUTTING_DOWN:
            self._stop(broker, clean=True)
            return
        if deadline is not None:
            self.at(deadline, lambda: self._poll(broker, generation))

    def _flush_lifecycle(self, broker: SimBroker) -> None:
        assert broker.life is not None
        generation = broker.generation
        for request in broker.life.take_requests():
            self._send_to_controller(broker, lambda b, g, r=request: self._handle_lifecycle(b, g, r))  # type: ignore[misc]
            broker.lifecycle_request = request

            def timeout(life: BrokerLifecycle = broker.life, request: OutboundRequest = request) -> None:
                live = self._live(broker, generation) and broker.life is life
                if live and life.in_flight and broker.lifecycle_request is request:
                    self._lifecycle_reply(broker, request, None)

            self.at(self.now_ms + self.config.request_timeout_ms, timeout)

    def _lifecycle_reply(self, broker: SimBroker, request: OutboundRequest, reply: Any) -> None:
        life = broker.life
        if life is None or broker.lifecycle_request is not request:
            return  # timed out already, or a duplicate
        broker.lifecycle_request = None
        if request.api_key == BROKER_HEARTBEAT_API:
            life.on_heartbeat_response(reply, self.now_ms)
            if life.caught_up and not life.ready_to_unfence:
                life.set_ready_to_unfence(self.now_ms)
        else:
            life.on_registration_response(reply, self.now_ms)
        self._poll(broker, broker.generation)

    def _stop(self, broker: SimBroker, *, clean: bool) -> None:
        """The broker goes down: after a clean shutdown everything is flushed and its epoch
        passed on; after a crash each log keeps only what was flushed."""
        if not broker.up:
            return
        life, replicas = broker.life, broker.replicas
        assert replicas is not None
        broker.clean_epoch = life.broker_epoch if clean and life is not None else -1
        # What it has not recovered yet (it went down again before its metadata gave it the
        # partition) stays on its disk as it was.
        for tp, partition in replicas.items():
            end = partition.log_end_offset
            flushed = end if clean else min(broker.flushed.get(tp, 0), end)
            hw = partition.high_watermark if clean else min(broker.hw_checkpoint.get(tp, 0), flushed)
            data = partition.log.read(0, 1 << 30).read_all() if flushed > 0 else b""
            kept = b"".join(data[pos : pos + h.size] for pos, h in iter_batches(data) if h.last_offset < flushed)
            if not clean and end > flushed:
                self.stats["lost_unflushed"] += 1
            broker.disk[tp] = (partition.topic_id, kept, hw)
        self.stats["clean_shutdowns" if clean else "crashes"] += 1
        self.note(
            f"broker {broker.broker_id}: {'shuts down cleanly' if clean else 'crashes'}; disk keeps "
            + ", ".join(f"{tp[1]}: {len(log_values(d))} records, hw {hw}" for tp, (_, d, hw) in broker.disk.items())
        )
        broker.up = False
        self._changed = True
        broker.life = None
        broker.replicas = None
        broker.generation += 1
        broker.flushed.clear()
        broker.hw_checkpoint.clear()
        previous = broker.clean_epoch
        self.at(self.now_ms + self.rng.randint(*self.config.down_ms), lambda: self._start(broker, previous))

    def _recover(self, broker: SimBroker, new: NewReplica) -> None:
        """A partition this broker held before it went down gets back what its disk kept (log
        recovery, then the high-watermark checkpoint), before it takes its role."""
        kept = broker.disk.pop(new.tp, None)
        log = new.log
        if kept is None or kept[0] != new.topic_id or log is None:
            return
        _, data, hw = kept
        if data:
            result = log.append_as_follower(data, now_ms=self.now_ms, syncs=IMMEDIATE)
            if result.flush is not None:
                log.complete_append(result, None, self.now_ms)
        log.high_watermark = min(hw, log.log_end_offset)
        broker.flushed[new.tp] = log.log_end_offset
        broker.hw_checkpoint[new.tp] = log.high_watermark

    def _flush(self, broker: SimBroker, generation: int) -> None:
        if not self._live(broker, generation) or broker.replicas is None:
            return
        for tp, partition in broker.replicas.items():
            broker.flushed[tp] = partition.log_end_offset
            broker.hw_checkpoint[tp] = partition.high_watermark
        self.at(self.now_ms + self.rng.randint(*self.config.flush_interval_ms), lambda: self._flush(broker, generation))

    def _appended(self, broker: SimBroker, partition: Partition) -> None:
        if self.config.flush_every_append:
            broker.flushed[partition.tp] = partition.log_end_offset

    def _truncated(self, broker: SimBroker, partition: Partition) -> None:
        tp = partition.tp
        broker.flushed[tp] = min(broker.flushed.get(tp, 0), partition.log_end_offset)
        key = (broker.broker_id, broker.generation, partition.index)
        self.verified[key] = min(self.verified.get(key, 0), partition.log_end_offset)
        self.stats["truncations"] += 1

    # -- brokers: metadata ----------------------------------------------------------------------------

    def _fetch_metadata(self, broker: SimBroker, generation: int) -> None:
        """The broker replays the committed log (told a little after each commit, and when it
        is reachable again); its partitions take the roles it gives them
        once it has caught up with its own registration (Kafka's initial catch-up)."""
        if not self._live(broker, generation):
            return
        life = broker.life
        if not broker.isolated and self.committed_offset > broker.applied_offset and life is not None:
            start = broker.applied_offset + 1
            delta = MetadataDelta(broker.image)
            for record in self.records[start : self.committed_offset + 1]:
                delta.replay(record)
            broker.image = delta.apply()
            broker.applied_offset = self.committed_offset
            seen = broker.image.brokers.get(broker.broker_id)
            lost = seen is None or seen.incarnation_id != life.incarnation_id
            if life.registered and life.broker_epoch <= broker.applied_offset and lost:
                life.resend_registration(self.now_ms)
                self._poll(broker, generation)
            elif broker.replicas is not None and life.registered and not lost:
                self._apply_partitions(broker, delta if broker.partitions_applied else None)
                broker.partitions_applied = True

    def _apply_partitions(self, broker: SimBroker, delta: MetadataDelta | None) -> None:
        replicas = broker.replicas
        assert replicas is not None
        if delta is None:  # the first time: everything it has replayed
            delta = MetadataDelta(EMPTY_IMAGE)
            for record in self.records[: broker.applied_offset + 1]:
                delta.replay(record)
            # Stray partitions (moved away while it was down) are deleted, as the broker's
            # remove_stray_partitions does after its first image.
            topic = broker.image.topic(TOPIC)
            for tp in list(broker.disk):
                registration = None if topic is None else topic.partitions.get(tp[1])
                if registration is None or broker.broker_id not in registration.replicas:
                    self.note(f"broker {broker.broker_id}: deletes stray partition {tp[1]}")
                    del broker.disk[tp]
        changes = delta.local_changes(broker.broker_id)
        min_isr = self.config.min_insync_replicas
        plan = replicas.plan_changes(changes, lambda topic: LogConfig(min_insync_replicas=min_isr))
        plan.open_logs(self.now_ms)
        for new in plan.new:
            self._recover(broker, new)
        applied = replicas.complete_changes(plan, self.now_ms)
        self._changed = True
        for partition in applied.became_leader:
            self.note(
                f"broker {broker.broker_id}: leads {partition.index} in epoch {partition.leader_epoch}, "
                f"isr {list(partition.isr)}, log end {partition.log_end_offset}, hw {partition.high_watermark}"
            )
            self.stats["leader_changes"] += 1
            broker.followed.pop(partition.tp, None)
            self._wake_parked(broker, partition.tp)
        for partition in applied.became_follower:
            self._wake_parked(broker, partition.tp)
            broker.followed.pop(partition.tp, None)
            if partition.leader_id >= 0 and partition.leader_id != broker.broker_id:
                broker.followed[partition.tp] = Followed(partition.leader_id, partition.leader_epoch)
                self._fetch(broker, partition.tp)
        for tp in applied.removed:
            broker.followed.pop(tp, None)

    # -- brokers: the follower's fetch loop (server/replication.py) ---------------------------------

    def _fetch(self, broker: SimBroker, tp: TopicPartition) -> None:
        f = broker.followed.get(tp)
        replicas = broker.replicas
        if f is None or f.in_flight or replicas is None or broker.life is None:
            return
        partition = replicas.get(tp)
        if partition is None or not self._still_current(partition, f):
            return
        leader = self.brokers[f.leader_id]
        fetch_id = next(self._ids)
        f.in_flight = fetch_id
        f.fetch_offset = partition.log_end_offset
        latest = partition.log.epoch_cache.latest_epoch
        request = {
            "replica_id": broker.broker_id,
            "broker_epoch": broker.life.broker_epoch,
            "current_leader_epoch": f.leader_epoch,
            "fetch_offset": f.fetch_offset,
            "last_fetched_epoch": -1 if latest is None else latest,
            "log_start_offset": partition.log_start_offset,
        }
        generation = broker.generation
        self._between_brokers(broker, leader, lambda: self._leader_fetch(leader, broker, tp, fetch_id, request))

        def timeout() -> None:
            if self._live(broker, generation) and f.in_flight == fetch_id and broker.followed.get(tp) is f:
                f.in_flight = 0
                self._fetch_later(broker, tp, self.config.fetch_backoff_ms)

        self.at(self.now_ms + self.config.fetch_wait_max_ms + self.config.request_timeout_ms, timeout)

    def _still_current(self, partition: Partition, f: Followed) -> bool:
        return (
            not partition.is_leader and partition.leader_id == f.leader_id and partition.leader_epoch == f.leader_epoch
        )

    def _fetch_later(self, broker: SimBroker, tp: TopicPartition, delay_ms: int) -> None:
        generation = broker.generation
        self.at(self.now_ms + delay_ms, lambda: self._fetch(broker, tp) if self._live(broker, generation) else None)

    def _follower_answer(self, broker: SimBroker, tp: TopicPartition, fetch_id: int, answer: dict[str, Any]) -> None:
        f = broker.followed.get(tp)
        replicas = broker.replicas
        if f is None or f.in_flight != fetch_id or replicas is None:
            return  # a duplicate, or an answer that timed out
        f.in_flight = 0
        partition = replicas.get(tp)
        if partition is None or not self._still_current(partition, f) or partition.log_end_offset != f.fetch_offset:
            return  # its leader, epoch or log changed while the fetch was out
        error = answer["error"]
        if error is ErrorCode.NONE:
            diverging = answer.get("diverging")
            if diverging is not None:
                offset = partition.truncation_offset(*diverging)
                if partition.truncate_to(offset, self.now_ms):
                    self._truncated(broker, partition)
                    self.note(
                        f"broker {broker.broker_id}: truncates {tp[1]} to {offset} (diverging epoch {diverging[0]})"
                    )
                self._fetch(broker, tp)
                return
            data = answer["records"]
            if data:
                try:
                    result = partition.append_as_follower(data, now_ms=self.now_ms, syncs=IMMEDIATE)
                except LogError as exc:
                    self.note(f"broker {broker.broker_id}: replicating {tp[1]} failed: {exc}")
                    self._fetch_later(broker, tp, self.config.fetch_backoff_ms)
                    return
                partition.complete_follower_append(result, None, self.now_ms)
                self._appended(broker, partition)
            partition.update_follower_high_watermark(answer["high_watermark"])
            self._fetch(broker, tp)
            return
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            # Kafka's fetchOffsetAndTruncate, with the leader's offsets the answer carried.
            end, start = answer["log_end_offset"], answer["log_start_offset"]
            if end >= 0 and end < partition.log_end_offset:
                partition.truncate_to(end, self.now_ms)
                self._truncated(broker, partition)
                self.note(f"broker {broker.broker_id}: {tp[1]} ends past its leader's log end {end}: truncated")
            elif start > partition.log_end_offset:
                partition.truncate_fully_and_start_at(start, self.now_ms)
                self._truncated(broker, partition)
        self._fetch_later(broker, tp, self.config.fetch_backoff_ms)

    # -- brokers: the leader's side of a follower's fetch (server/handlers/fetch.py) -------------

    def _leader_fetch(
        self, leader: SimBroker, follower: SimBroker, tp: TopicPartition, fetch_id: int, request: dict[str, Any]
    ) -> None:
        answer = self._read_for_follower(leader, tp, request)
        if answer.get("park"):
            generation = leader.generation

            def answer_later() -> None:
                if self._live(leader, generation):
                    again = self._read_for_follower(leader, tp, request, parked=True)
                    self._between_brokers(
                        leader, follower, lambda: self._follower_answer(follower, tp, fetch_id, again)
                    )

            leader.parked.setdefault(tp, []).append(answer_later)
            self.at(
                self.now_ms + self.config.fetch_wait_max_ms, lambda: self._unpark(leader, generation, tp, answer_later)
            )
            return
        self._between_brokers(leader, follower, lambda: self._follower_answer(follower, tp, fetch_id, answer))

    def _unpark(self, broker: SimBroker, generation: int, tp: TopicPartition, waiter: Callable[[], None]) -> None:
        waiting = broker.parked.get(tp, [])
        if self._live(broker, generation) and waiter in waiting:
            waiting.remove(waiter)
            waiter()

    def _wake_parked(self, broker: SimBroker, tp: TopicPartition) -> None:
        waiting = broker.parked.pop(tp, [])
        for waiter in waiting:
            waiter()

    def _read_for_follower(
        self, leader: SimBroker, tp: TopicPartition, request: dict[str, Any], parked: bool = False
    ) -> dict[str, Any]:
        replicas = leader.replicas
        partition = None if replicas is None else replicas.get(tp)
        if partition is None:
            return {"error": ErrorCode.NOT_LEADER_OR_FOLLOWER}
        try:
            read = partition.read(
                request["fetch_offset"],
                READ_MAX_BYTES,
                isolation=Isolation.HIGH_WATERMARK,
                replica_id=request["replica_id"],
                current_leader_epoch=request["current_leader_epoch"],
                last_fetched_epoch=request["last_fetched_epoch"],
            )
            if read.diverging is None and not parked:  # the fetch handler records a follower's first read only
                change = partition.update_follower_fetch_state(
                    request["replica_id"],
                    broker_epoch=request["broker_epoch"],
                    fetch_offset=request["fetch_offset"],
                    log_start_offset=request["log_start_offset"],
                    leader_end_offset=read.log_end_offset,
                    now_ms=self.now_ms,
                )
                key = (
                    leader.broker_id,
                    leader.generation,
                    partition.index,
                    partition.leader_epoch,
                    request["replica_id"],
                )
                self.fetched_in[key] = self.brokers[request["replica_id"]].generation
                if change is not None:
                    self._submit_isr_change(leader, change)
        except PartitionError as exc:
            return {"error": exc.code}
        except OffsetOutOfRange:
            return {
                "error": ErrorCode.OFFSET_OUT_OF_RANGE,
                "log_end_offset": partition.log_end_offset,
                "log_start_offset": partition.log_start_offset,
            }
        data = b"".join(r.read() for r in read.ranges)
        if not data and read.diverging is None and not parked:
            return {"park": True}
        return {
            "error": ErrorCode.NONE,
            "records": data,
            "high_watermark": read.high_watermark,
            "diverging": None if read.diverging is None else (read.diverging.epoch, read.diverging.end_offset),
        }

    # -- brokers: ISR changes (AlterPartitionSender, the isr-expiration task) -------------------------

    def _submit_isr_change(self, broker: SimBroker, change: IsrChange) -> None:
        tp = (change.topic, change.index)
        broker.alter_in_flight[tp] = change
        self._changed = True
        self.note(f"broker {broker.broker_id}: proposes ISR {list(change.new_isr_ids)} for {change.index}")
        self._send_alter_partition(broker, change)

    def _send_alter_partition(self, broker: SimBroker, change: IsrChange) -> None:
        replicas, life = broker.replicas, broker.life
        tp = (change.topic, change.index)
        if replicas is None or life is None:
            return
        partition = replicas.get(tp)
        if partition is None or partition.pending_isr is not change:
            broker.alter_in_flight.pop(tp, None)
            return  # superseded by the metadata meanwhile
        body = {
            "broker_id": broker.broker_id,
            "broker_epoch": life.broker_epoch,
            "topics": [
                {
                    "topic_id": partition.topic_id,
                    "partitions": [
                        {
                            "partition_index": change.index,
                            "leader_epoch": change.leader_epoch,
                            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": e} for b, e in change.new_isr],
                            "leader_recovery_state": change.leader_recovery_state,
                            "partition_epoch": change.partition_epoch,
                        }
                    ],
                }
            ],
        }
        self._send_to_controller(broker, lambda b, g: self._handle_alter_partition(b, g, body))
        generation = broker.generation

        def retry() -> None:
            if self._live(broker, generation) and broker.alter_in_flight.get(tp) is change:
                self._send_alter_partition(broker, change)

        self.at(self.now_ms + self.config.request_timeout_ms, retry)

    def _alter_partition_reply(self, broker: SimBroker, reply: Any) -> None:
        replicas = broker.replicas
        if replicas is None or reply.error_code != ErrorCode.NONE:
            return  # sent again by the retry
        for topic in reply.topics:
            for entry in topic.partitions:
                partition = replicas.get_by_id(topic.topic_id, entry.partition_index)
                if partition is None:
                    continue
                change = broker.alter_in_flight.get(partition.tp)
                if change is None or partition.pending_isr is not change:
                    continue
                del broker.alter_in_flight[partition.tp]
                error, answer = alter_partition_answer(entry, partition.replicas)
                self.note(f"broker {broker.broker_id}: ISR change of {partition.index} answered {error.name}")
                partition.isr_change_answered(change, error, answer, self.now_ms)
                self._changed = True

    def _expire_isr(self, broker: SimBroker, generation: int) -> None:
        if not self._live(broker, generation) or broker.replicas is None:
            return
        for partition in list(broker.replicas.values()):
            if partition.is_leader and len(partition.isr) > 1:
                change = partition.maybe_shrink_isr(self.now_ms)
                if change is not None:
                    self._submit_isr_change(broker, change)
        lag = self.config.replica_lag_time_max_ms // 2
        self.at(self.now_ms + lag, lambda: self._expire_isr(broker, generation))

    # -- the producer (acks=all) and the consumer ---------------------------------------------------

    def _leader_view(self, index: int) -> tuple[SimBroker, int] | None:
        """Where the clients send a partition's requests: its leader and epoch in the committed
        metadata (as a client's metadata refresh has it)."""
        if self.topic_id is None:
            return None
        registration = self.controller.image.partition(self.topic_id, index)
        if registration is None or registration.leader < 0:
            return None
        return self.brokers[registration.leader], registration.leader_epoch

    def _produce(self) -> None:
        self.at(self.now_ms + self.rng.randint(*self.config.produce_interval_ms), self._produce)
        index = self.rng.randrange(self.config.partitions)
        view = self._leader_view(index)
        if view is None:
            return
        broker, epoch = view
        value = b"v%d" % self.next_value
        self.next_value += 1
        self._client_to(broker, lambda: self._append(broker, index, epoch, value), lambda: None)

    def _append(self, broker: SimBroker, index: int, epoch: int, value: bytes) -> None:
        replicas = broker.replicas
        partition = None if replicas is None else replicas.get((TOPIC, index))
        if partition is None:
            self.stats["produce_errors"] += 1
            return
        try:
            partition.check_request(epoch)
            partition.check_min_isr_for_acks_all()
            batch = bytearray(build_batch([Record(value=value)], base_timestamp=self.now_ms))
            result = partition.append_as_leader(batch, now_ms=self.now_ms, log_append_time=False, syncs=IMMEDIATE)
            appended = partition.complete_append(result, None, self.now_ms)
        except PartitionError:
            self.stats["produce_errors"] += 1
            return
        self._appended(broker, partition)
        self._changed = True
        self.note(f"broker {broker.broker_id}: appends {value.decode()} at {appended.base_offset} (epoch {epoch})")
        broker.pending_acks.append(
            PendingAck(
                partition,
                appended.last_offset + 1,
                appended.base_offset,
                value,
                self.now_ms + self.config.produce_timeout_ms,
            )
        )
        self._wake_parked(broker, partition.tp)

    def _complete_acks(self) -> None:
        for broker in self.brokers:
            if not broker.pending_acks:
                continue
            still = []
            for pending in broker.pending_acks:
                outcome = pending.partition.replicated_to(pending.required_offset)
                if outcome is None and self.now_ms < pending.deadline_ms:
                    still.append(pending)
                elif outcome is ErrorCode.NONE:
                    self.acked.setdefault(pending.partition.index, {})[pending.offset] = pending.value
                    self.stats["acked"] += 1
                    self.note(f"broker {broker.broker_id}: acknowledges {pending.value.decode()} at {pending.offset}")
                else:
                    self.stats["produce_errors"] += 1
            broker.pending_acks = still

    def _consume(self) -> None:
        self.at(self.now_ms + self.rng.randint(*self.config.consume_interval_ms), self._consume)
        index = self.rng.randrange(self.config.partitions)
        view = self._leader_view(index)
        if view is None:
            return
        broker, epoch = view
        self._client_to(broker, lambda: self._read_for_consumer(broker, index, epoch), lambda: None)

    def _read_for_consumer(self, broker: SimBroker, index: int, epoch: int) -> None:
        replicas = broker.replicas
        partition = None if replicas is None else replicas.get((TOPIC, index))
        if partition is None:
            return
        position = self.consumer_position.get(index, 0)
        try:
            read = partition.read(
                position, READ_MAX_BYTES, isolation=Isolation.HIGH_WATERMARK, current_leader_epoch=epoch
            )
        except PartitionError:
            return
        except OffsetOutOfRange:
            self.consumer_position[index] = partition.high_watermark  # auto.offset.reset=latest
            return
        high_watermark = partition.high_watermark
        records = log_values(b"".join(r.read() for r in read.ranges))
        consumed = self.consumed.setdefault(index, {})
        for offset, value in records:
            if offset >= high_watermark:
                self.fail(
                    f"the consumer read offset {offset} of partition {index} from broker {broker.broker_id}, "
                    f"above its high watermark {high_watermark}"
                )
            consumed[offset] = value
            self._changed = True
            self.stats["consumed"] += 1
        if records:
            self.consumer_position[index] = records[-1][0] + 1

    # -- faults ---------------------------------------------------------------------------------------

    def _fault(self) -> None:
        self.at(self.now_ms + self.rng.randint(*self.config.fault_interval_ms), self._fault)
        broker = self.rng.choice(self.brokers)
        kind = self.rng.choice(["crash", "crash", "shutdown", "isolate", "isolate", "crash_leader", "cut_link"])
        if kind == "crash_leader":
            view = self._leader_view(0)
            if view is not None:
                broker = view[0]
            kind = "crash"
        if not broker.up or broker.life is None:
            return
        if kind == "crash":
            self._stop(broker, clean=False)
        elif kind == "shutdown":
            self.note(f"broker {broker.broker_id}: begins a controlled shutdown")
            broker.life.begin_controlled_shutdown(self.now_ms)
            self._poll(broker, broker.generation)
        elif kind == "cut_link":  # two brokers no longer reach each other; both still reach the controller
            other = self.rng.choice([b for b in self.brokers if b is not broker])
            link = frozenset((broker.broker_id, other.broker_id))
            if link not in self.cut_links:
                self.cut_links.add(link)
                self.stats["cut_links"] += 1
                self.note(f"brokers {broker.broker_id} and {other.broker_id}: cut from each other")
                self.at(self.now_ms + self.rng.randint(*self.config.down_ms), lambda: self._mend(link))
        elif kind == "isolate" and not broker.isolated:
            broker.isolated = True
            broker.clients_reach = self.rng.random() < 0.5
            self.stats["isolations"] += 1
            self.note(
                f"broker {broker.broker_id}: cut off (clients {'still' if broker.clients_reach else 'not'} reach it)"
            )
            generation = broker.generation
            self.at(self.now_ms + self.rng.randint(*self.config.down_ms), lambda: self._heal(broker, generation))

    def _mend(self, link: frozenset[int]) -> None:
        self.cut_links.discard(link)
        self.note(f"brokers {sorted(link)}: reach each other again")

    def _heal(self, broker: SimBroker, generation: int) -> None:
        if self._live(broker, generation) and broker.isolated:
            broker.isolated = False
            self.note(f"broker {broker.broker_id}: reachable again")
            self._fetch_metadata(broker, generation)
            for tp in list(broker.followed):
                self._fetch(broker, tp)

    # -- invariants -----------------------------------------------------------------------------------

    def _touched(self, tp: TopicPartition | None = None) -> None:
        self._changed = True

    def check_invariants(self) -> None:
        image = self.controller.image
        topic = None if self.topic_id is None else image.topics_by_id.get(self.topic_id)
        if topic is None:
            return
        if not self._changed:
            return  # nothing the rules read changed since the last check: they hold as they did
        self._changed = False
        for index, registration in topic.partitions.items():
            if registration.leader >= 0 and registration.leader not in registration.isr:
                self.fail(
                    f"partition {index} is led by broker {registration.leader}, outside its ISR {registration.isr}"
                )
        committed_end = {index: len(history) for index, history in self.committed.items()}
        for broker in self.brokers:
            if not broker.up or broker.replicas is None:
                continue
            for partition in broker.replicas.values():
                self._check_replica(broker, partition, topic.partitions.get(partition.index), committed_end)

    def _check_replica(
        self, broker: SimBroker, partition: Partition, registration: Any, committed_end: dict[int, int]
    ) -> None:
        index, b = partition.index, broker.broker_id
        hw = partition.high_watermark
        legit_leader = (
            partition.is_leader
            and registration is not None
            and registration.leader == b
            and registration.leader_epoch == partition.leader_epoch
        )
        if partition.is_leader:
            claimed = self.epoch_leaders.setdefault((index, partition.leader_epoch), b)
            if claimed != b:
                self.fail(
                    f"brokers {claimed} and {b} both lead partition {index} in leader epoch {partition.leader_epoch}"
                )
            if b not in partition.isr:
                self.fail(f"broker {b} leads partition {index} outside its own ISR {list(partition.isr)}")
            term = (b, broker.generation, index, partition.leader_epoch)
            before = self.term_hw.get(term, -1)
            if hw < before:
                self.fail(
                    f"the high watermark of partition {index} on its leader {b} went back from {before} to {hw} "
                    f"in leader epoch {partition.leader_epoch}"
                )
            self.term_hw[term] = hw
            if hw > before:  # which incarnation of each ISR member it counted on
                self.hw_basis[term] = {m: self.fetched_in.get((*term, m)) for m in partition.maximal_isr}
            basis = self.hw_basis.get(term, {})
            for member in partition.maximal_isr:
                if member == b:
                    continue
                follower = self.brokers[member]
                counted = basis.get(member)
                # A member that crashed since (lost its unflushed tail) is not what the high
                # watermark was raised over; its new incarnation catches up again.
                if counted is None or not follower.up or follower.generation != counted or follower.replicas is None:
                    continue
                theirs = follower.replicas.get(partition.tp)
                if (
                    theirs is None
                    or theirs.is_leader
                    or theirs.leader_id != b
                    or theirs.leader_epoch != partition.leader_epoch
                ):
                    continue
                if hw > theirs.log_end_offset:
                    self.fail(
                        f"the high watermark {hw} of partition {index} on its leader {b} is past the log end "
                        f"{theirs.log_end_offset} of ISR member {member}"
                    )
        bound = hw
        if legit_leader:
            bound = max(hw, committed_end.get(index, 0))
            if partition.log_end_offset < bound:
                self._report_loss(
                    index,
                    partition.log_end_offset,
                    f"the leader {b} ends its log at {partition.log_end_offset}",
                    leader=True,
                )
        key = (b, broker.generation, index)
        checked = min(self.verified.get(key, 0), partition.log_end_offset)
        if bound > checked:
            history = self.committed.setdefault(index, [])
            data = partition.log.read(checked, 1 << 30, max_offset=bound).read_all()
            for offset, value in log_values(data):
                if offset >= bound:
                    break
                if offset < len(history):
                    if history[offset] != value:
                        self._report_loss(
                            index,
                            offset,
                            f"broker {b} holds {value.decode()} at {offset} below "
                            f"{'everything committed' if legit_leader else 'its high watermark'}, "
                            f"committed {history[offset].decode()}",
                            leader=legit_leader,
                        )
                elif offset == len(history):
                    history.append(value)
                else:
                    self.fail(f"partition {index}'s history has a gap before {offset} on broker {b}")
            checked = bound
        self.verified[key] = checked
        consumed = self.consumed.get(index)
        if consumed:
            history = self.committed.get(index, [])
            for offset in [o for o in consumed if o < len(history)]:
                if consumed.pop(offset) != history[offset]:
                    self._report_loss(index, offset, f"the consumer read something else at {offset}")

    def _report_loss(self, index: int, offset: int, what: str, *, leader: bool = False) -> None:
        """The history parts from the committed one at ``offset``: on the current leader (the
        copy every other replica follows) the acknowledged writes from there are lost; anywhere
        else it is committed data diverging."""
        acked = self.acked.get(index, {})
        lost = sorted(o for o in acked if o >= offset) if leader else []
        if lost:
            self.fail(f"acknowledged write lost: {acked[lost[0]].decode()} at {lost[0]} of partition {index}: {what}")
        self.fail(f"committed data diverges on partition {index} at {offset}: {what}")


def _describe(records: tuple[ApiMessageAndVersion, ...] | list[ApiMessageAndVersion]) -> str:
    parts = []
    for r in records:
        if r.type == T.PARTITION_CHANGE_RECORD:
            names = ("leader", "isr", "eligible_leader_replicas", "replicas", "adding_replicas", "removing_replicas")
            fields = {k: getattr(r, k, None) for k in names}
            parts.append("PartitionChange " + ", ".join(f"{k}={v}" for k, v in fields.items() if v is not None))
        else:
            parts.append(T(r.type).name)
    return "; ".join(parts)


def run_seed(family: str, seed: int, *, trace: bool = False) -> ReplicationSimulation:
    return ReplicationSimulation(seed, FAMILIES[family], family=family, trace=trace).run()
