"""The broker: partitions and their logs, the metadata controller, listeners, background jobs.

All state lives in this object and changes only in synchronous code between awaits (trio is
single-threaded), so handlers take no locks. Tasks exist only to wait: for connections,
for new data (long-poll fetch), and for timers (retention, flush).
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import trio

from kafkalike.controller.api_error import ControllerError
from kafkalike.controller.limits import (
    MAX_RECORDS_PER_USER_OP,
    PARTITIONS_OVER_LIMIT,
)
from kafkalike.log import LogConfig, LogManager
from kafkalike.log.cleaner import LogCleaner
from kafkalike.log.dir_lock import LOCK_FILE_NAME, DirLock, LogDirError, lock_log_dirs
from kafkalike.log.manager import run_flushes, write_checkpoints
from kafkalike.log.storage import DeferredSyncs
from kafkalike.log.storage_errors import reporter
from kafkalike.replica import ReplicaManager
from kafkalike.server.appends import PartitionWriter
from kafkalike.server.clock import Clock, SystemClock
from kafkalike.server.cluster_metadata import ClusterController, TopicView
from kafkalike.server.config import (
    INTERNAL_TOPIC_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    parse_properties,
)
from kafkalike.server.context import HandlerServices
from kafkalike.server.controller_channel import ControllerChannel
from kafkalike.server.faults import FaultInjector
from kafkalike.server.fetch_sessions import FetchSessions
from kafkalike.server.group_service import GroupService
from kafkalike.server.inter_broker import InterBrokerClient
from kafkalike.server.limits import ConnectionQuotas, RequestMemoryPool
from kafkalike.server.listener_config import BrokerListeners, ListenerEndpoint
from kafkalike.server.metadata_publisher import MetadataPublisher
from kafkalike.server.registry import Handler, load_handlers
from kafkalike.server.replication import (
    AlterPartitionSender,
    FetcherConfig,
    FollowerReads,
    ImageBrokers,
    ReplicaFetchers,
    ReplicationThrottles,
    expire_isr_members,
)
from kafkalike.server.routing import ClusterRouting, ImageRouting
from kafkalike.server.txn_service import TxnService
from kafkalike.server.waiters import PartitionWaiters

log = logging.getLogger("kafkalike.broker")
R = TypeVar("R")
METADATA_TOPIC = "__cluster_metadata"
META_PROPERTIES = "meta.properties"
BACKGROUND_RESTART_DELAY_S = 1.0
BACKGROUND_RESTART_LOG_INTERVAL_MS = 60_000


class StartupError(Exception):
    """Why the broker cannot start, in one line (Kafka's words where Kafka has them)."""


# Metadata requests whose auto-creations may wait for the creator task; beyond it the names are
# answered as unknown and not created (the client asks again).
AUTO_CREATE_QUEUE = 64
INTERNAL_CREATE_QUEUE = 4  # __consumer_offsets and __transaction_state, each at most once on its way


def _new_cluster_id() -> str:
    """A random id as Kafka's ``Uuid.randomUuid`` makes one: never starting with "-", which a
    command line (``kafka-storage format -t ID``) would read as an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass
class NewTopic:
    """A topic a request asks for, after the request's own checks (replication, assignments)."""

    name: str
    partitions: int
    configs: dict[str, str]
    replication_factor: int = -1  # -1: default.replication.factor


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        ephemeral: bool = False,
        logs: LogManager | None = None,
        clock: Clock | None = None,
    ) -> None:
        """The broker of a node: its metadata is the quorum's committed log, followed through
        ``publisher``, and its metadata operations go to the active controller once
        ``attach_controller`` has given it the channel there.
        ``ephemeral`` keeps every log in memory (no disk, no fsync); ``logs`` reuses the
        storage of a previous broker object, so an ephemeral broker can be restarted; ``clock``
        is the only clock the broker and everything it runs read (``SystemClock`` by default).
        Raises ValueError for a configuration Kafka would refuse to start with, StartupError for
        a data directory it cannot use (missing and not creatable, or locked by another process)."""
        config.check()
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.node_id = config.node_id
        self.data_dir = config.log_dirs[0]
        self.ephemeral = ephemeral or (logs is not None and logs.memory)
        self.handlers: dict[int, Handler] = load_handlers()
        # Locked before the log manager touches anything in the directories (it clears the
        # clean-shutdown marker), so a second broker on them changes nothing before it is refused.
        self._dir_locks: list[DirLock] = [] if self.ephemeral else _lock_dirs(config.log_dirs)
        self.logs = logs or LogManager(config.log_dirs, storage="memory" if ephemeral else "file")
        self.logs.checkpoint_interval_ms = config.get_int("log.flush.offset.checkpoint.interval.ms")
        self.logs.high_watermark_checkpoint_interval_ms = config.get_int(
            "replica.high.watermark.checkpoint.interval.ms"
        )
        # Requests waiting for partitions to move (long-poll fetch), woken by the replicas.
        self.waiters = PartitionWaiters()
        self.replicas = ReplicaManager(
            self.logs,
            self.node_id,
            on_progress=self.waiters.notify,
            brokers=ImageBrokers(lambda: self.publisher.image, self._broker_epoch),
            replica_lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
        )
        self.writer = PartitionWriter(self.waiters, self.clock)
        self.cluster_id = ""
        self.advertised: tuple[str, int] = ("127.0.0.1", 9092)
        # Every client listener as bound, and what the broker advertises on each (set by ``serve``).
        self.bound_listeners: dict[str, tuple[str, int]] = {}
        self.advertised_endpoints: list[ListenerEndpoint] = []
        self.advertised_listeners: dict[str, tuple[str, int]] = {}
        self.faults = FaultInjector()
        # Kafka's broker binds its listeners at start-up but processes no request until the
        # controller has unfenced it: a cluster node sets ``hold_clients`` before ``serve`` and
        # ``clients_enabled`` once unfenced (connections wait in the listen backlog meanwhile).
        self.hold_clients = False
        self.clients_enabled = trio.Event()
        # Shared by every connection: connection counts, and memory for requests in flight.
        self.connection_quotas = ConnectionQuotas(config)
        self.request_memory = RequestMemoryPool.from_config(config.get_int("queued.max.request.bytes"))
        self.publisher = MetadataPublisher(
            self.node_id,
            self.replicas,
            clock=self.clock,
            log_config=self.log_config_for,
            on_configs=self._take_dynamic_configs,
        )
        # Where partitions are led (server/routing.py): the published image says.
        publisher = self.publisher
        self.routing: ClusterRouting = ImageRouting(lambda: publisher.image)
        self.cluster: ClusterController | None = None  # set by ``attach_controller``
        # The node's quorum state for DescribeQuorum (set by the node).
        self.describe_quorum: Callable[[], Awaitable[dict[str, Any]]] | None = None
        self.lifecycle: Any = None  # a node's BrokerLifecycleTask (registration, heartbeats)
        self._checkpoint_lock = trio.Lock()
        self.groups = GroupService(self)
        self.txn = TxnService(self)
        # Partition replication: followers fetch from their leaders, leaders send ISR changes.
        self.fetcher_config = FetcherConfig.from_broker_config(config)
        self._fetch_client: InterBrokerClient | None = None
        self.isr_changes = AlterPartitionSender(
            self.node_id, self.replicas, self._controller_channel, self._broker_epoch, self.clock
        )
        self.fetch_sessions = FetchSessions(config.get_int("max.incremental.fetch.session.cache.slots"))
        self.throttles = ReplicationThrottles(self.node_id, config, lambda: publisher.image)
        self.follower_reads = FollowerReads(self.node_id)
        self.fetchers = ReplicaFetchers(
            self.node_id,
            self.replicas,
            self.writer,
            self._replica_fetch_client,
            self._broker_epoch,
            self.fetcher_config,
            self.clock,
            self.throttles,
        )
        # On a node of a cluster, coordinator shards follow the leadership the metadata gives.
        self.publisher.on_replica_changes += [
            self.fetchers.on_replica_changes,
            self.groups.runtime.on_replica_changes,
            self.txn.runtime.on_replica_changes,
        ]
        # What handlers may touch (server/context.py): not this object.
        self.handler_services = HandlerServices(self)
        self._auto_create_pending: set[str] = set()
        self._auto_create_done = trio.Event()  # replaced after each auto-creation request is handled
        self._auto_create_send, self._auto_create_receive = trio.open_memory_channel[list[str]](AUTO_CREATE_QUEUE)
        # Internal topics asked for by FindCoordinator, made in the background (one at a time).
        self._internal_pending: set[str] = set()
        self._internal_done = trio.Event()  # replaced after each internal topic is made or refused
        self._internal_send, self._internal_receive = trio.open_memory_channel[
            tuple[str, Callable[[], Awaitable[None]]]
        ](INTERNAL_CREATE_QUEUE)

    # -- start-up ---------------------------------------------------------------------------

    def prepare_identity(self) -> str:
        """The cluster id, the data directory formatted first when it is empty (a single node
        formats itself); the same on every later call. Disk work: call it from a worker thread."""
        if not self.cluster_id:
            if self.ephemeral:
                self.cluster_id = self.config.get("cluster.id") or _new_cluster_id()
            else:
                self.data_dir.mkdir(parents=True, exist_ok=True)
                self.cluster_id = self._load_identity()
        return self.cluster_id

    def open(self) -> None:
        """Load the data directory (its identity) and the coordinators: after ``attach_controller``.
        Partitions open as the publisher replays the quorum's committed log."""
        self.prepare_identity()
        self._open_groups()
        self._open_transactions()

    @property
    def controller(self) -> ClusterController:
        """The metadata operations (through the active controller) and the published image they
        read: what ``attach_controller`` made."""
        assert self.cluster is not None, "Broker.attach_controller() first"
        return self.cluster

    def attach_controller(self, channel: ControllerChannel, committed_offset: Callable[[], int | None]) -> None:
        """A node of a cluster: metadata operations go to the active controller through
        ``channel``; ``committed_offset`` is the last offset this node knows committed."""
        self.cluster = ClusterController(self.node_id, channel, self.publisher, self.clock, committed_offset)

    def _broker_epoch(self) -> int:
        return self.cluster.broker_epoch if self.cluster is not None else -1

    def _controller_channel(self) -> ControllerChannel | None:
        return self.cluster.channel if self.cluster is not None else None

    def _replica_fetch_client(self) -> InterBrokerClient | None:
        """The followers' own connections to leaders (Kafka's fetcher threads' own network
        clients), on the inter-broker listener; made on first use."""
        cluster = self.cluster
        if cluster is None:
            return None
        if self._fetch_client is None:
            listener = BrokerListeners.from_config(self.config).inter_broker_name
            routing = self.routing
            self._fetch_client = InterBrokerClient(
                self.node_id,
                lambda broker_id: routing.alive_endpoint(broker_id, listener),
                faults=cluster.channel.faults,
                request_timeout_ms=cluster.channel.request_timeout_ms,
            )
            self._fetch_client.client_id = f"broker-{self.node_id}-fetcher-0"
        return self._fetch_client

    def remove_stray_partitions(self) -> list[tuple[str, int]]:
        """A node of a cluster, once its first image is published: partition directories the
        image no longer gives this broker (their topic deleted, or the partition moved, while it
        was down) are deleted, as Kafka's broker deletes stray partitions after its first
        metadata load. The quorum's own ``__cluster_metadata-0`` is never one."""
        image = self.publisher.image
        assigned = {
            (topic.name, index)
            for topic in image.topics_by_id.values()
            for index, registration in topic.partitions.items()
            if self.node_id in registration.replicas
        }
        strays = self.logs.remove_orphans(self.replicas.hosted() | assigned | {(METADATA_TOPIC, 0)})
        if strays:
            log.info("deleted %d stray partition(s): %s", len(strays), ", ".join(f"{t}-{p}" for t, p in strays[:10]))
        return strays

    async def controlled_shutdown(self) -> None:
        """A cluster node's broker asks the controller to move its leaderships away (bounded)."""
        if self.lifecycle is not None:
            await self.lifecycle.controlled_shutdown()

    def _open_transactions(self) -> None:
        """The transaction coordinator, with its state replayed from __transaction_state and
        every transaction left half-way by the previous run completed."""
        self.txn.open()

    def _open_groups(self) -> None:
        """The group coordinator, with its state replayed from __consumer_offsets."""
        self.groups.open()

    def _load_identity(self) -> str:
        """meta.properties, as Kafka writes it (version, cluster.id, node.id), checked as Kafka's
        MetaPropertiesEnsemble checks it: a configured node.id or cluster.id that differs from the
        stored one stops the start. Written only when the directory has none; never rewritten."""
        path = self.data_dir / META_PROPERTIES
        configured_cluster_id = self.config.get("cluster.id")
        try:
            text = path.read_text(encoding="utf-8") if path.exists() else None
        except OSError as exc:
            raise StartupError(f"Unable to read {path}: {exc.strerror}") from exc
        if text is None:
            # Formatting on first start, where Kafka needs kafka-storage format; but only an empty
            # directory, so data whose meta.properties went missing is never taken for a new node's.
            if any(entry.name != LOCK_FILE_NAME for entry in self.data_dir.iterdir()):
                raise StartupError(
                    f"No `meta.properties` found in {self.data_dir}, which is not empty: kafkalike formats "
                    "only an empty data directory"
                )
            cluster_id = configured_cluster_id or _new_cluster_id()
            _write_meta_properties(path, cluster_id, self.node_id)
            return cluster_id
        stored_cluster_id, stored_node_id = _parse_meta_properties(text, path)
        if configured_cluster_id and stored_cluster_id and stored_cluster_id != configured_cluster_id:
            raise StartupError(
                f"Invalid cluster.id in: {path}. Expected {configured_cluster_id}, but read {stored_cluster_id}"
            )
        if stored_node_id is not None and stored_node_id != self.node_id:
            raise StartupError(
                f"Stored node id {stored_node_id} doesn't match previous node id {self.node_id} in {path}. "
                "If you moved your data, make sure your configured node id matches. If you intend to create "
                "a new node, you should remove all data in your data directories."
            )
        # A version-0 file may lack a cluster id; Kafka then takes the configured one (or a new one).
        return stored_cluster_id or configured_cluster_id or _new_cluster_id()

    async def create_internal_topic(
        self, name: str, partitions: int, configs: dict[str, str], replication_factor: int = -1
    ) -> bool:
        """An internal topic (``__consumer_offsets``, ``__transaction_state``) as a metadata
        operation of its own; True if this call created it. Raises ControllerError."""
        return await self.controller.create_internal_topic(name, partitions, configs, replication_factor)

    def registered_brokers(self) -> int:
        """How many brokers the metadata has registered."""
        return len(self.controller.image.cluster.brokers)

    async def reserve_producer_id(self) -> None:
        """Before ``controller.allocate_producer_id``: a producer id block with an id left (asked
        of the controller when needed). Raises ControllerError."""
        await self.controller.reserve_producer_id()

    async def set_configs(self, resource_type: int, resource_name: str, changes: Mapping[str, str | None]) -> None:
        """A config change as a metadata operation of the active controller."""
        await self.controller.set_configs(resource_type, resource_name, changes)

    # -- topics -----------------------------------------------------------------------------

    def log_config_problem(self, overrides: Mapping[str, str], config: BrokerConfig | None = None) -> str | None:
        """Why a topic with ``overrides`` over ``config``'s defaults (this broker's unless given)
        could not have a log, or None. Checked before configs are stored: each value passing its
        own check is not enough, the log's settings as a whole must stand."""
        config = config or self.config
        props = _with_internal(
            {name: overrides.get(name, config.topic_default(name)) for name in TOPIC_CONFIGS}, overrides
        )
        try:
            LogConfig.from_properties(props)
        except ValueError as exc:
            return str(exc)
        return None

    def broker_config_problem(self, resource_name: str, dynamic: Mapping[str, str]) -> str | None:
        """``log_config_problem`` for every topic, were ``dynamic`` the broker resource's dynamic
        configs (``""``: the cluster-wide defaults)."""
        from kafkalike.server.connection_configs import dynamic_listener_problem, socket_server_problem

        listener_problem = dynamic_listener_problem(dict(dynamic))
        if listener_problem is not None:
            return listener_problem
        trial = BrokerConfig(self.config.explicit)
        trial.dynamic_default = dict(self.config.dynamic_default if resource_name else dynamic)
        trial.dynamic_broker = dict(dynamic if resource_name else self.config.dynamic_broker)
        requirement = trial.requirement_problem() or trial.dynamic_log_problem()
        if requirement is not None:
            return requirement
        for overrides in [{}, *(t.configs for t in self.controller.image.topics.values())]:
            problem = self.log_config_problem(overrides, trial)
            if problem is not None:
                return problem
        return socket_server_problem(trial)

    def log_config_for(self, overrides: Mapping[str, str]) -> LogConfig:
        """The LogConfig of a topic with ``overrides``, over this broker's defaults."""
        return LogConfig.from_properties(
            _with_internal(
                {name: overrides.get(name, self.config.topic_default(name)) for name in TOPIC_CONFIGS}, overrides
            )
        )

    def _take_dynamic_configs(self, cluster_default: Mapping[str, str], this_broker: Mapping[str, str]) -> None:
        """The broker resource's dynamic configs, as the publisher found them committed."""
        self.config.dynamic_default = dict(cluster_default)
        self.config.dynamic_broker = dict(this_broker)

    @property
    def partitions(self) -> ReplicaManager:
        """The replica manager, by its old name (the coordinator adapters' call sites)."""
        return self.replicas

    def may_auto_create(self, name: str) -> bool:
        """Whether a client asking for an unknown topic gets it created (auto.create.topics.enable)."""
        return self.config.get_bool("auto.create.topics.enable") and not name.startswith("__")

    # -- topic changes -----------------------------------------------------------------------
    #
    # A request's topics become one metadata operation of the active controller, answered once
    # this broker's published image shows it (server/cluster_metadata.py).

    async def create_topics(
        self, wanted: list[NewTopic], validate_only: bool = False
    ) -> list[TopicView | ControllerError]:
        """Create the topics as one operation: per topic the new topic or why not."""
        return await self.controller.create_topics(wanted, validate_only)

    async def grow_topics(
        self, wanted: list[tuple[str, int]], validate_only: bool = False
    ) -> list[TopicView | ControllerError]:
        """CreatePartitions as one operation: per (topic, new count) the topic or why not."""
        return await self.controller.grow_topics(wanted, validate_only)

    async def delete_topics(self, names: list[str]) -> list[TopicView | ControllerError]:
        """Delete the topics as one operation."""
        return await self.controller.delete_topics(names)

    def request_auto_create(self, names: list[str]) -> None:
        """Have the named topics created in the background (Metadata answers them as unknown
        meanwhile, as Kafka does). Names already on their way are not asked for twice."""
        fresh = [n for n in dict.fromkeys(names) if n not in self._auto_create_pending]
        if not fresh:
            return
        if len(fresh) * self.config.get_int("num.partitions") > MAX_RECORDS_PER_USER_OP:
            # Refused by the controller anyway (controller/limits.py): not queued, so the queue
            # holds at most AUTO_CREATE_QUEUE requests of at most 10,000 names.
            log.warning("auto-creation of %d topic(s) refused: %s", len(fresh), PARTITIONS_OVER_LIMIT)
            return
        try:
            self._auto_create_send.send_nowait(fresh)
        except trio.WouldBlock:
            log.debug("auto-creation queue full; %d topic(s) not created now", len(fresh))
            return
        self._auto_create_pending.update(fresh)

    async def _auto_creator(self) -> None:
        """One CreateTopics per Metadata request that named unknown topics, with its limits."""
        async for names in self._auto_create_receive:
            try:
                partitions = self.config.get_int("num.partitions")
                await self.create_topics([NewTopic(n, partitions, {}) for n in names])
            except (ControllerError, OSError) as exc:
                log.warning("auto-creation of %d topic(s) refused: %s", len(names), exc)
            except Exception as exc:  # this task outlives any one request's failure
                log.error("auto-creation of %d topic(s) failed: %r", len(names), exc)
            finally:
                self._auto_create_pending.difference_update(names)
                self._auto_create_done.set()
                self._auto_create_done = trio.Event()

    def request_internal_topic(self, name: str, create: Callable[[], Awaitable[None]]) -> None:
        """Have ``create`` make the internal topic ``name`` in the background, as Kafka's broker
        asks its controller for ``__consumer_offsets`` / ``__transaction_state`` when
        FindCoordinator first needs one (and answers COORDINATOR_NOT_AVAILABLE meanwhile). Asked
        once while on its way; asked again by the next FindCoordinator if it failed."""
        if name in self._internal_pending:
            return
        try:
            self._internal_send.send_nowait((name, create))
        except trio.WouldBlock:
            return
        self._internal_pending.add(name)

    async def _internal_topic_creator(self) -> None:
        async for name, create in self._internal_receive:
            try:
                await create()
            except (ControllerError, OSError) as exc:
                log.warning("cannot create %s: %s", name, getattr(exc, "message", None) or exc)
            except Exception as exc:  # this task outlives any one request's failure
                log.error("creating %s failed: %r", name, exc)
            finally:
                self._internal_pending.discard(name)
                self._internal_done.set()
                self._internal_done = trio.Event()

    async def wait_internal_topics(self) -> None:
        """Until every internal topic asked for so far has been made or refused."""
        while self._internal_pending:
            await self._internal_done.wait()

    async def wait_auto_creations(self) -> None:
        """Until every auto-creation asked for so far has been made or refused."""
        while self._auto_create_pending:
            await self._auto_create_done.wait()

    # -- requests ---------------------------------------------------------------------------

    def api_versions(self) -> list[dict[str, Any]]:
        return [
            {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
            for h in sorted(self.handlers.values(), key=lambda h: h.api_key)
        ]

    # -- serving ----------------------------------------------------------------------------

    async def serve(self, host: str, port: int, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Bind every client listener (the first at ``host``:``port``, the others where
        ``listeners`` puts them; ListenerBindError, an OSError, for one that cannot be) and serve
        them; ``started`` with the first one's (host, port)."""
        from kafkalike.server.listener import advertise, bind_client_listeners, client_endpoints, serve_listeners

        configured = BrokerListeners.from_config(self.config)
        listeners = await bind_client_listeners(client_endpoints(configured, host, port))
        try:
            explicit = self.config.get("advertised.listeners") is not None
            self.advertised_endpoints = await advertise(configured, explicit, listeners)
        except BaseException:
            for listener in listeners:
                for sock in listener.sockets:
                    sock.socket.close()
            raise
        self.bound_listeners = {b.name: b.address for b in listeners}
        self.advertised_listeners = {e.name: (e.host, e.port) for e in self.advertised_endpoints}
        first = listeners[0]
        self.advertised = self.advertised_listeners.get(first.name) or next(
            iter(self.advertised_listeners.values()), first.address
        )
        self.clients_enabled = trio.Event()
        if not self.hold_clients:
            self.clients_enabled.set()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._keep_running, "background log jobs", self._background_jobs)
            if self.config.get_bool("log.cleaner.enable"):
                nursery.start_soon(self._keep_running, "log cleaner", self._log_cleaner)
            nursery.start_soon(self._keep_running, "group coordinator syncs", self.groups.syncs.run)
            nursery.start_soon(self._keep_running, "transaction coordinator syncs", self.txn.syncs.run)
            nursery.start_soon(self._keep_running, "group coordinator timers", self.groups.run)
            nursery.start_soon(self._keep_running, "transaction coordinator timers", self.txn.run)
            nursery.start_soon(self._keep_running, "topic auto-creation", self._auto_creator)
            nursery.start_soon(self._keep_running, "replica fetchers", self.fetchers.run)
            nursery.start_soon(self._keep_running, "ISR changes", self.isr_changes.run)
            nursery.start_soon(self._keep_running, "ISR expiration", self._expire_isr_members)
            if self.cluster is not None:
                nursery.start_soon(self._keep_running, "producer id blocks", self.cluster.run_producer_ids)
            nursery.start_soon(self._keep_running, "internal topic creation", self._internal_topic_creator)
            nursery.start_soon(serve_listeners, self, listeners)
            task_status.started((host, first.port))

    async def _expire_isr_members(self) -> None:
        await expire_isr_members(
            self.replicas, self.isr_changes, self.clock, self.config.get_int("replica.lag.time.max.ms")
        )

    async def _keep_running(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        """Run a background job for as long as the broker serves: an exception it lets through
        (a bug; disk errors are handled where they happen) is logged, and the job restarted
        after a pause, rather than taking every connection down with the nursery."""
        last_logged_ms: int | None = None
        while True:
            try:
                await job()
                return
            except Exception:
                if (
                    last_logged_ms is None
                    or self.clock.wall_ms() - last_logged_ms >= BACKGROUND_RESTART_LOG_INTERVAL_MS
                ):
                    log.exception("%s failed; restarting it in %.0f s", name, BACKGROUND_RESTART_DELAY_S)
                    last_logged_ms = self.clock.wall_ms()
            await trio.sleep(BACKGROUND_RESTART_DELAY_S)

    async def _log_cleaner(self) -> None:
        """Compaction in bounded steps on this task, between appends (the logs take no locks)."""
        cleaner = LogCleaner(dedupe_buffer_bytes=self.config.get_int("log.cleaner.dedupe.buffer.size"))
        try:
            while True:
                more = self.logs.run_cleaner(cleaner, self.clock.wall_ms(), checkpoint=False)
                syncs = cleaner.take_syncs()  # a cleaned segment to fsync before its swap
                if syncs is not None:
                    try:
                        await trio.to_thread.run_sync(syncs.run)
                    except OSError as exc:
                        reporter.report("cleaning in", str(self.data_dir), exc, self.clock.wall_ms())
                        cleaner.abort()
                await self.checkpoint_offsets()
                await trio.sleep(0 if more else self.config.get_int("log.cleaner.backoff.ms") / 1000)
        finally:
            if cleaner.cleaning is not None:
                cleaner.abort(cleaner.cleaning)

    async def _background_jobs(self) -> None:
        """Flushes, checkpoints and retention: decided on the event loop, their fsyncs and
        unlinks on a worker thread (``LogManager`` prepares and completes each step)."""
        interval_s = self.config.get_int("log.retention.check.interval.ms") / 1000
        flush_ms = self.config.get("log.flush.interval.ms")
        tick_s = min(interval_s, int(flush_ms) / 1000 if flush_ms else interval_s, 1.0)
        next_retention = self.clock.monotonic_s() + interval_s
        while True:
            await trio.sleep(tick_s)
            prepared = self.logs.prepare_due_flushes(self.clock.wall_ms())
            errors = await _off_loop(functools.partial(run_flushes, prepared), any(p.syncs for p in prepared))
            self.logs.complete_flushes(prepared, errors, self.clock.wall_ms())
            retention_due = self.clock.monotonic_s() >= next_retention
            if retention_due:
                next_retention = self.clock.monotonic_s() + interval_s
                unlinks = DeferredSyncs()
                deleted = self.logs.run_retention(self.clock.wall_ms(), unlinks)
                deleted += await self.writer.roll_for_retention(self.replicas.values(), unlinks)
                try:
                    await _off_loop(unlinks.run, bool(unlinks))
                except OSError as exc:  # the files stay as *.deleted; start-up removes them
                    reporter.report("segment deletion in", str(self.data_dir), exc, self.clock.wall_ms())
                if deleted:
                    log.info("retention deleted %d segment(s)", deleted)
            if self.logs.checkpoint_due(self.clock.wall_ms()) or retention_due:
                await self.checkpoint_offsets()

    async def checkpoint_offsets(self) -> None:
        """The log dirs' checkpoint files whose offsets moved, written on a worker thread."""
        async with self._checkpoint_lock:  # one writer per file at a time
            pending = self.logs.prepare_checkpoints()
            if pending:
                errors = await trio.to_thread.run_sync(write_checkpoints, pending)
                self.logs.complete_checkpoints(pending, errors, self.clock.wall_ms())

    def close(self) -> None:
        self.logs.close_all()
        for lock in self._dir_locks:
            lock.release()

    async def aclose(self) -> None:
        """``close`` on a worker thread: its flushes, snapshots and checkpoints block no other
        task of the loop. Only once the broker has stopped serving (nothing else touches its
        logs meanwhile); an in-memory broker closes here, having nothing to wait for."""
        with trio.CancelScope(shield=True):
            if self.cluster is not None:
                await self.cluster.channel.aclose()
            if self._fetch_client is not None:
                await self._fetch_client.aclose()
            await self.txn.aclose()
            await _off_loop(self.close, not self.logs.memory)


def client_listeners(config: BrokerConfig, name: str = "listeners") -> list[str]:
    """The entries of ``listeners`` (or ``advertised.listeners``) that clients are served on: all
    but the controller's (``controller.listener.names``), which a KRaft server.properties lists too."""
    controller = {n.strip().upper() for n in (config.get("controller.listener.names") or "").split(",")}
    entries = [e.strip() for e in (config.get(name) or "").split(",") if e.strip()]
    return [e for e in entries if "://" not in e or e.split("://", 1)[0].upper() not in controller]


def _lock_dirs(paths: list[Path]) -> list[DirLock]:
    try:
        return lock_log_dirs(paths)
    except LogDirError as exc:
        raise StartupError(str(exc)) from exc


def _parse_meta_properties(text: str, path: Path) -> tuple[str | None, int | None]:
    """(cluster.id, node.id) of a meta.properties file, refused in Kafka's words where Kafka
    refuses it: a version other than 0 or 1, a v1 file without its ids, an id not a number."""
    values = parse_properties(text)
    version_text = values.get("version", "0")
    try:
        version = int(version_text.strip())
    except ValueError:
        raise StartupError(f"Invalid meta.properties version string '{version_text}'") from None
    if version not in (0, 1):
        raise StartupError(f"Unknown meta.properties version number {version}")
    id_name = "node.id" if version == 1 else "broker.id"
    node_text = values.get(id_name)
    if node_text is None and version == 1:
        raise StartupError(f"node.id was not specified in {path}")
    cluster_id = values.get("cluster.id")
    if cluster_id is None and version == 1:
        raise StartupError(f"cluster.id was not specified in the v1 file: {path}")
    try:
        node_id = None if node_text is None else int(node_text)
    except ValueError:
        raise StartupError(f"Unable to read {id_name} as a base-10 number.") from None
    return cluster_id, node_id


def _write_meta_properties(path: Path, cluster_id: str, node_id: int) -> None:
    """Written whole to a temporary file and renamed over, so a crash never leaves half a file."""
    partial = path.with_name(path.name + ".tmp")
    try:
        with partial.open("w", encoding="utf-8") as out:
            out.write(f"#kafkalike meta.properties\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
            out.flush()
            os.fsync(out.fileno())
        partial.replace(path)
    except OSError as exc:
        raise StartupError(f"Unable to write {path}: {exc.strerror}") from exc


async def _off_loop(job: Callable[[], R], needed: bool) -> R:
    """``job()`` on a worker thread when ``needed`` (there are disk calls to make), else here:
    an in-memory broker never waits for a thread."""
    if needed:
        return await trio.to_thread.run_sync(job)
    return job()


def data_dir_of(config: BrokerConfig) -> Path:
    return config.log_dirs[0]


def _with_internal(props: dict[str, str | None], overrides: Mapping[str, str]) -> dict[str, str | None]:
    """``props`` plus the internal topic configs ``overrides`` sets."""
    props.update((name, overrides[name]) for name in INTERNAL_TOPIC_CONFIGS if name in overrides)
    return props
