"""A deterministic simulation of broker registration, heartbeats and fencing.

N brokers' ``BrokerLifecycle`` machines and one ``ClusterControlManager`` on a simulated clock,
with a network that delays and drops requests and replies (a lost request times out at the
broker), a metadata log whose records commit a little after they are appended (the controller
answers once they commit) and that brokers fetch at their own pace, brokers that crash and
restart (a new incarnation; the broker epoch it held is passed on only after a clean shutdown),
are unregistered by an administrator (and register again),
pause (heartbeats stop, the process keeps its state) and shut down under control, and controller
failovers (the soft state is lost; sessions start again at activation).

Invariants, checked after every event:

- **unfenced only when caught up**: every unfencing comes from a heartbeat whose broker had
  replayed the log up to its own RegisterBrokerRecord;
- **fenced in time**: a broker whose heartbeats stopped is fenced within one session timeout
  plus one check interval of its last heartbeat (or of the controller's activation);
- **epochs only grow**: a broker id's registered epoch never falls;
- **a fenced broker leads nothing** (with ELR, except Kafka's balanced recovery: the last
  known leader elected uncleanly, its partition RECOVERING);
- **shutdown leads nothing**: a broker told to shut down leads no partition.

A run depends on its seed alone (one ``random.Random``; time ties broken by insertion order).
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
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
from kafkalike.controller.image import EMPTY_IMAGE, METADATA_VERSION_FEATURE, MetadataImage, MetadataProvenance
from kafkalike.controller.partition_change import RECOVERING
from kafkalike.protocol.codec import schema
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record

T = MetadataRecordType
CLUSTER_ID = "sim-cluster-000000000A"
METADATA_VERSION = 25  # 4.0-IV3
REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
MAX_EVENTS = 500_000


class InvariantViolation(AssertionError):
    """An invariant broken; the message names the seed and the command that replays it."""


@dataclass(frozen=True)
class SimConfig:
    brokers: int = 3
    partitions_per_broker: int = 2
    elr: bool = False
    duration_ms: int = 120_000
    session_timeout_ms: int = 9000
    heartbeat_interval_ms: int = 2000
    request_timeout_ms: int = 2500
    network_delay_ms: tuple[int, int] = (1, 30)
    long_delay_rate: float = 0.01  # a message held up to a few seconds
    drop_rate: float = 0.03
    commit_delay_ms: tuple[int, int] = (1, 20)
    fetch_interval_ms: tuple[int, int] = (5, 300)
    fault_interval_ms: tuple[int, int] = (2000, 15000)


FAMILIES = {"rf1": SimConfig(), "rf1_elr": SimConfig(elr=True)}


def bootstrap_records(config: SimConfig) -> list[ApiMessageAndVersion]:
    out = [metadata_record(T.FEATURE_LEVEL_RECORD, name=METADATA_VERSION_FEATURE, feature_level=METADATA_VERSION)]
    if config.elr:
        out.append(metadata_record(T.FEATURE_LEVEL_RECORD, name=ELR_FEATURE, feature_level=1))
    return out


def topic_records(config: SimConfig) -> list[ApiMessageAndVersion]:
    """A topic of replication factor 1 with partitions on every broker, each led by its broker
    (created once every broker is unfenced, as CreateTopics would place it)."""
    topic_id = uuid.UUID(int=0x70)
    out = [metadata_record(T.TOPIC_RECORD, name="sim", topic_id=topic_id)]
    for p in range(config.brokers * config.partitions_per_broker):
        b = p % config.brokers
        out.append(
            metadata_record(T.PARTITION_RECORD, partition_id=p, topic_id=topic_id, replicas=[b], isr=[b], leader=b)
        )
    return out


def as_message(api: str, kind: str, version: int, body: dict[str, Any]) -> Any:
    """``body`` as the codec decodes it (the same field names and defaults as on the wire)."""
    s = schema(api, kind, version)
    return s.decode(s.encode(body))


class ControllerLog:
    """The controller's state: every appended record replayed at once (as Kafka's controller
    does), committed a little later; ``manager.replay`` sees each record with its offset."""

    def __init__(self, manager: ClusterControlManager, bootstrap: list[ApiMessageAndVersion]) -> None:
        self.manager = manager
        self.records: list[ApiMessageAndVersion] = []
        self.images: list[MetadataImage] = []  # image after each offset
        self.image = EMPTY_IMAGE
        self.committed = -1  # last committed offset
        self.append(bootstrap)
        self.committed = len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return len(self.records)

    def append(self, records: tuple[ApiMessageAndVersion, ...] | list[ApiMessageAndVersion]) -> int:
        """Append and replay; the last offset appended."""
        for r in records:
            offset = len(self.records)
            delta = MetadataDelta(self.image)
            delta.replay(r)
            self.image = delta.apply(MetadataProvenance(offset, 1, 0))
            self.manager.replay(r, offset)
            self.records.append(r)
            self.images.append(self.image)
        return len(self.records) - 1

    def image_at(self, offset: int) -> MetadataImage:
        return self.images[offset] if offset >= 0 else EMPTY_IMAGE


@dataclass
class SimBroker:
    broker_id: int
    life: BrokerLifecycle | None = None
    applied_offset: int = -1
    paused: bool = False
    stashed: list[Callable[[], None]] = field(default_factory=list)
    clean_epoch: int = -1  # the epoch held at a clean shutdown, passed on to the next start
    generation: int = 0  # bumped at every crash: events for an earlier life are ignored


class BrokerSimulation:
    def __init__(
        self,
        seed: int,
        config: SimConfig = SimConfig(),
        manager_factory: Callable[..., ClusterControlManager] = ClusterControlManager,
        family: str = "rf1",
    ) -> None:
        self.seed = seed
        self.family = family
        self.config = config
        self.rng = random.Random(seed)
        self.now_ms = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.manager = manager_factory(cluster_id=CLUSTER_ID, session_timeout_ms=config.session_timeout_ms)
        self.log = ControllerLog(self.manager, bootstrap_records(config))
        self.brokers = [SimBroker(b) for b in range(config.brokers)]
        self.activated_ms = 0
        self.last_contact_ms: dict[tuple[int, int], int] = {}
        self.max_epoch: dict[int, int] = {}
        self.shut_down_told: dict[int, int] = {}  # broker id -> the epoch told to shut down
        self.events = 0
        self._pending: dict[int, OutboundRequest] = {}  # the request each live broker awaits
        self._check_chain = 0
        self.stats = {
            "fenced_by_timeout": 0,
            "unfenced": 0,
            "registrations": 0,
            "failovers": 0,
            "shutdowns": 0,
            "max_fence_delay_ms": 0,
        }

    # -- scheduling

    def at(self, time_ms: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (time_ms, next(self._seq), action))

    def run(self) -> BrokerSimulation:
        self.manager.activate(self.log.image, 0)
        for b in self.brokers:
            self._start_later(b, self.rng.randint(0, 500), previous_epoch=-1)
        self.at(self.rng.randint(*self.config.fault_interval_ms), self._fault)
        self._schedule_fence_check()
        while self._queue and self.events < MAX_EVENTS:
            time_ms, _, action = heapq.heappop(self._queue)
            if time_ms > self.config.duration_ms:
                break
            self.now_ms = time_ms
            action()
            self.events += 1
            self._maybe_create_topic()
            self.check_invariants()
        self.stats["balanced_recoveries"] = sum(
            1 for r in self.log.records if r.type == T.PARTITION_CHANGE_RECORD and r.leader_recovery_state == RECOVERING
        )
        return self

    def fail(self, message: str) -> None:
        raise InvariantViolation(
            f"seed {self.seed} at {self.now_ms} ms: {message} "
            f"(replay: python scripts/simulate_brokers.py --family {self.family} --seed {self.seed})"
        )

    # -- the controller

    def _maybe_create_topic(self) -> None:
        image = self.log.image
        if image.topics_by_id or len(image.unfenced_brokers()) < self.config.brokers:
            return
        self.log.append(topic_records(self.config))
        self._schedule_commit()

    def _schedule_fence_check(self) -> None:
        deadline = self.manager.poll(self.now_ms)
        chain = self._check_chain
        if deadline is not None:
            self.at(max(deadline, self.now_ms), lambda: self._fence_check(chain))

    def _fence_check(self, chain: int) -> None:
        deadline = self.manager.poll(self.now_ms)
        if chain != self._check_chain or deadline is None or deadline > self.now_ms:
            return
        before = {i: b.fenced for i, b in self.log.image.brokers.items()}
        result = self.manager.fence_stale_broker(self.log.image, self.now_ms)
        self.log.append(result.records)
        for i, b in self.log.image.brokers.items():
            if b.fenced and not before.get(i, True):
                self.stats["fenced_by_timeout"] += 1
                contact = max(self.last_contact_ms.get((i, b.epoch), 0), self.activated_ms)
                self.stats["max_fence_delay_ms"] = max(self.stats["max_fence_delay_ms"], self.now_ms - contact)
        self._schedule_commit()
        self._schedule_fence_check()

    def _schedule_commit(self) -> int:
        end = len(self.log.records) - 1
        commit_ms = self.now_ms + self.rng.randint(*self.config.commit_delay_ms)

        def commit() -> None:
            self.log.committed = max(self.log.committed, end)

        self.at(commit_ms, commit)
        return commit_ms

    def _failover(self) -> None:
        self.stats["failovers"] += 1
        self.manager.deactivate()
        self.manager.activate(self.log.image, self.now_ms)
        self.activated_ms = self.now_ms
        self._check_chain += 1
        self._schedule_fence_check()

    def _handle(self, broker: SimBroker, generation: int, request: OutboundRequest, sent_offset: int) -> None:
        """A request reaches the controller; its reply leaves once its records commit."""
        image, next_offset = self.log.image, self.log.next_offset
        if request.api_key == BROKER_HEARTBEAT_API:
            msg = as_message("BrokerHeartbeat", "request", HEARTBEAT_VERSION, request.body)
            self.last_contact_ms[(msg.broker_id, msg.broker_epoch)] = self.now_ms
            result: ControllerResult[Any] = self.manager.heartbeat(
                image, msg, next_offset=next_offset, now_ms=self.now_ms
            )
            self._check_unfencing(msg, result, sent_offset)
            api, version = "BrokerHeartbeat", HEARTBEAT_VERSION
        else:
            msg = as_message("BrokerRegistration", "request", REGISTRATION_VERSION, request.body)
            result = self.manager.register_broker(
                image, msg, api_version=REGISTRATION_VERSION, next_offset=next_offset, now_ms=self.now_ms
            )
            api, version = "BrokerRegistration", REGISTRATION_VERSION
            if result.records:
                self.stats["registrations"] += 1
        self.log.append(result.records)
        reply = as_message(api, "response", version, result.reply.to_response())
        if getattr(result.reply, "should_shut_down", False):
            self.shut_down_told[msg.broker_id] = msg.broker_epoch
        commit_ms = self._schedule_commit()
        self._send(commit_ms, broker, generation, lambda: self._deliver_reply(broker, generation, request, reply))

    def _check_unfencing(self, msg: Any, result: ControllerResult[Any], sent_offset: int) -> None:
        for r in result.records:
            if r.type == T.BROKER_REGISTRATION_CHANGE_RECORD and r.fenced == -1:
                register_offset = max(
                    i
                    for i, x in enumerate(self.log.records)
                    if x.type == T.REGISTER_BROKER_RECORD and x.broker_id == msg.broker_id
                )
                if sent_offset < register_offset:
                    self.fail(
                        f"broker {msg.broker_id} unfenced at metadata offset {sent_offset}, "
                        f"before its registration at {register_offset}"
                    )
                self.stats["unfenced"] += 1

    # -- the network

    def _delay(self) -> int:
        if self.rng.random() < self.config.long_delay_rate:
            return self.rng.randint(500, 4000)
        return self.rng.randint(*self.config.network_delay_ms)

    def _send(self, at_ms: int, broker: SimBroker, generation: int, deliver: Callable[[], None]) -> None:
        if self.rng.random() < self.config.drop_rate:
            return
        self.at(at_ms + self._delay(), lambda: self._for_broker(broker, generation, deliver))

    def _for_broker(self, broker: SimBroker, generation: int, action: Callable[[], None]) -> None:
        if broker.generation != generation or broker.life is None:
            return
        if broker.paused:
            broker.stashed.append(action)
            return
        action()

    # -- brokers

    def _start_later(self, broker: SimBroker, delay_ms: int, previous_epoch: int) -> None:
        self.at(self.now_ms + delay_ms, lambda: self._start(broker, previous_epoch))

    def _start(self, broker: SimBroker, previous_epoch: int) -> None:
        broker.generation += 1
        broker.applied_offset = -1
        broker.paused = False
        broker.stashed.clear()
        life = BrokerLifecycle(
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
        broker.life = life
        life.start(self.now_ms)
        self._flush(broker)
        self._poll(broker, broker.generation)
        self._fetch(broker, broker.generation)

    def _poll(self, broker: SimBroker, generation: int) -> None:
        if broker.generation != generation or broker.life is None:
            return
        if broker.paused:
            broker.stashed.append(lambda: self._poll(broker, generation))
            return
        life = broker.life
        deadline = life.poll(self.now_ms, broker.applied_offset)
        self._flush(broker)
        if life.state == BrokerState.SHUTTING_DOWN:
            self._stopped(broker, clean=self.shut_down_told.get(broker.broker_id) == life.broker_epoch)
            return
        if deadline is not None:
            self.at(deadline, lambda: self._poll(broker, generation))

    def _flush(self, broker: SimBroker) -> None:
        assert broker.life is not None
        generation = broker.generation
        for request in broker.life.take_requests():
            sent_offset = broker.applied_offset
            if (
                self.rng.random() >= self.config.drop_rate
            ):  # requests reach the controller whatever the broker does since
                self.at(
                    self.now_ms + self._delay(),
                    lambda r=request, o=sent_offset: self._handle(broker, generation, r, o),  # type: ignore[misc]
                )
            self._arm_timeout(broker, generation, request)

    def _arm_timeout(self, broker: SimBroker, generation: int, request: OutboundRequest) -> None:
        life = broker.life

        def timeout() -> None:
            if broker.life is life and life is not None and life.in_flight and self._pending.get(id(life)) is request:
                self._pending.pop(id(life), None)
                self._on_reply(broker, request, None)

        self._pending[id(life)] = request
        self.at(self.now_ms + self.config.request_timeout_ms, lambda: self._for_broker(broker, generation, timeout))

    def _deliver_reply(self, broker: SimBroker, generation: int, request: OutboundRequest, reply: Any) -> None:
        if broker.life is None or self._pending.get(id(broker.life)) is not request:
            return  # it timed out already
        self._pending.pop(id(broker.life), None)
        self._on_reply(broker, request, reply)

    def _on_reply(self, broker: SimBroker, request: OutboundRequest, reply: Any) -> None:
        life = broker.life
        assert life is not None
        if request.api_key == BROKER_HEARTBEAT_API:
            life.on_heartbeat_response(reply, self.now_ms)
            if life.caught_up and not life.ready_to_unfence:
                life.set_ready_to_unfence(self.now_ms)
        else:
            life.on_registration_response(reply, self.now_ms)
        self._poll(broker, broker.generation)

    def _fetch(self, broker: SimBroker, generation: int) -> None:
        """The broker replays the committed log (and notices a lost registration)."""
        if broker.generation != generation or broker.life is None:
            return
        if not broker.paused:
            broker.applied_offset = max(broker.applied_offset, self.log.committed)
            life = broker.life
            seen = self.log.image_at(broker.applied_offset).brokers.get(broker.broker_id)
            lost = seen is None or seen.incarnation_id != life.incarnation_id
            if life.registered and life.broker_epoch <= broker.applied_offset and lost:
                life.resend_registration(self.now_ms)
                self._poll(broker, generation)
        self.at(self.now_ms + self.rng.randint(*self.config.fetch_interval_ms), lambda: self._fetch(broker, generation))

    def _stopped(self, broker: SimBroker, clean: bool) -> None:
        life = broker.life
        self.stats["shutdowns"] += clean
        broker.clean_epoch = life.broker_epoch if clean and life is not None else -1
        broker.life = None
        broker.generation += 1
        self.at(self.now_ms + self.rng.randint(100, 12000), lambda: self._start(broker, broker.clean_epoch))

    # -- faults

    def _fault(self) -> None:
        b = self.rng.choice(self.brokers)
        kind = self.rng.choice(["crash", "pause", "controlled_shutdown", "failover", "pause", "unregister"])
        if kind == "failover":
            self._failover()
        elif kind == "unregister":  # an administrator's UnregisterBroker; a live broker registers again
            self.log.append(self.manager.unregister_broker(self.log.image, b.broker_id).records)
            self._schedule_commit()
        elif b.life is None:
            pass
        elif kind == "crash":
            b.life = None
            b.generation += 1
            self.at(self.now_ms + self.rng.randint(100, 15000), lambda: self._start(b, -1))
        elif kind == "pause" and not b.paused:
            b.paused = True
            self.at(self.now_ms + self.rng.randint(500, 20000), lambda: self._resume(b, b.generation))
        elif kind == "controlled_shutdown":
            b.life.begin_controlled_shutdown(self.now_ms)
            self._poll(b, b.generation)
        self.at(self.now_ms + self.rng.randint(*self.config.fault_interval_ms), self._fault)

    def _resume(self, broker: SimBroker, generation: int) -> None:
        if broker.generation != generation:
            return
        broker.paused = False
        stashed, broker.stashed = broker.stashed, []
        for action in stashed:
            self.at(self.now_ms, action)
        self._poll(broker, generation)

    # -- invariants

    def check_invariants(self) -> None:
        image = self.log.image
        bound_ms = self.manager.session_timeout_ms + self.manager.fence_check_interval_ms + 1
        for broker_id, reg in image.brokers.items():
            if reg.epoch < self.max_epoch.get(broker_id, -1):
                self.fail(f"broker {broker_id}'s epoch fell from {self.max_epoch[broker_id]} to {reg.epoch}")
            self.max_epoch[broker_id] = reg.epoch
            if not reg.fenced:
                contact = max(self.last_contact_ms.get((broker_id, reg.epoch), 0), self.activated_ms)
                if self.now_ms > contact + bound_ms:
                    self.fail(f"broker {broker_id} unfenced {self.now_ms - contact} ms after its last heartbeat")
        for topic in image.topics_by_id.values():
            for pid, p in topic.partitions.items():
                if p.leader < 0:
                    continue
                leader = image.brokers.get(p.leader)
                balanced_recovery = self.config.elr and p.leader_recovery_state == RECOVERING
                if (leader is None or leader.fenced) and not balanced_recovery:
                    self.fail(
                        f"partition {pid} led by broker {p.leader}, which is {'fenced' if leader else 'unregistered'}"
                    )
                if leader is not None and self.shut_down_told.get(p.leader) == leader.epoch:
                    self.fail(f"partition {pid} led by broker {p.leader}, told to shut down at epoch {leader.epoch}")
