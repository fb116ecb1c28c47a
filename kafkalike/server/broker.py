"""The broker: partitions and their logs, the metadata controller, listeners, background jobs.

All state lives in this object and changes only in synchronous code between awaits (trio is
single-threaded), so handlers take no locks. Tasks exist only to wait: for connections,
for new data (long-poll fetch), and for timers (retention, flush).
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from kafkalike.controller.metadata import ControllerError, QuorumController, TopicImage
from kafkalike.log import LogConfig, LogManager, PartitionLog
from kafkalike.log.cleaner import LogCleaner
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.server.config import TOPIC_CONFIGS, BrokerConfig, parse_listener, validate_value
from kafkalike.server.faults import FaultInjector
from kafkalike.server.group_service import GroupService
from kafkalike.server.limits import ConnectionQuotas, RequestMemoryPool
from kafkalike.server.registry import Handler, load_handlers
from kafkalike.server.txn_service import TxnService

log = logging.getLogger("kafkalike.broker")
METADATA_TOPIC = "__cluster_metadata"


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class PartitionState:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: PartitionLog
    leader_epoch: int = 0
    # Replaced after every append, so waiters wake once per append without missing one.
    new_data: trio.Event = field(default_factory=trio.Event)

    def notify(self) -> None:
        self.new_data.set()
        self.new_data = trio.Event()


class Broker:
    def __init__(self, config: BrokerConfig, *, ephemeral: bool = False, logs: LogManager | None = None) -> None:
        """``ephemeral`` keeps every log in memory (no disk, no fsync); ``logs`` reuses the
        storage of a previous broker object, so an ephemeral broker can be restarted.
        Raises ValueError for a configuration Kafka would refuse to start with."""
        config.check()
        self.config = config
        self.node_id = config.node_id
        self.data_dir = config.log_dirs[0]
        self.ephemeral = ephemeral or (logs is not None and logs.memory)
        self.handlers: dict[int, Handler] = load_handlers()
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.logs = logs or LogManager(config.log_dirs, storage="memory" if ephemeral else "file")
        self.cluster_id = ""
        self.advertised: tuple[str, int] = ("127.0.0.1", 9092)
        self.faults = FaultInjector()
        # Shared by every connection: connection counts, and memory for requests in flight.
        self.connection_quotas = ConnectionQuotas(config)
        self.request_memory = RequestMemoryPool.from_config(config.get_int("queued.max.request.bytes"))
        self._metadata_log: PartitionLog | None = None
        # The metadata quorum's leader epoch (DescribeQuorum); set when the metadata log is opened.
        self.metadata_epoch = 0
        self.controller = QuorumController(self._append_metadata)
        self.groups = GroupService(self)
        self.txn = TxnService(self)

    # -- start-up ---------------------------------------------------------------------------

    def open(self) -> None:
        """Load the data directory: identity, metadata log replay, partition logs."""
        if self.ephemeral:
            self.cluster_id = self.config.get("cluster.id") or _new_cluster_id()
        else:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.cluster_id = self._load_identity()
        self._metadata_log = self.logs.get_or_create(METADATA_TOPIC, 0, LogConfig(flush_interval_messages=1), now_ms())
        # The only voter wins each start's election: one epoch past the newest its log holds,
        # so a fresh node leads epoch 1, as a KRaft controller's first election does.
        self.metadata_epoch = (self._metadata_log.epoch_cache.latest_epoch or 0) + 1
        self.controller.replay(self._read_metadata_values())
        self.apply_configs()
        for topic in self.controller.image.topics.values():
            self._open_partitions(topic)
        self.logs.remove_orphans(set(self.partitions) | {(METADATA_TOPIC, 0)})
        self._open_groups()
        self._open_transactions()

    def _open_transactions(self) -> None:
        """The transaction coordinator, with its state replayed from __transaction_state and
        every transaction left half-way by the previous run completed."""
        self.txn.open()

    def _open_groups(self) -> None:
        """The group coordinator, with its state replayed from __consumer_offsets."""
        self.groups.open()

    def _load_identity(self) -> str:
        """meta.properties, as Kafka writes it: cluster.id, node.id, version."""
        path = self.data_dir / "meta.properties"
        values: dict[str, str] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and not line.startswith("#"):
                    values[key.strip()] = value.strip()
        cluster_id = self.config.get("cluster.id") or values.get("cluster.id")
        if not cluster_id:
            cluster_id = _new_cluster_id()
        if values.get("cluster.id") != cluster_id:
            path.write_text(f"#kafkalike meta.properties\nversion=1\ncluster.id={cluster_id}\nnode.id={self.node_id}\n")
        return cluster_id

    def _read_metadata_values(self) -> list[bytes]:
        assert self._metadata_log is not None
        values = []
        blob = self._metadata_log.read_bytes(self._metadata_log.log_start_offset, 1 << 62)
        for pos, header in iter_batches(blob):
            values += [r.value for r in decode_records(blob, pos, header) if r.value is not None]
        return values

    def _append_metadata(self, values: list[bytes]) -> None:
        assert self._metadata_log is not None
        batch = bytearray(build_batch([Record(value=v) for v in values], base_timestamp=now_ms()))
        self._metadata_log.append(batch, leader_epoch=self.metadata_epoch, now_ms=now_ms())
        self._metadata_log.flush()

    @property
    def metadata_end_offset(self) -> int:
        """The metadata log's end offset; every record below it is flushed, so it is also the
        quorum's high watermark."""
        assert self._metadata_log is not None
        return self._metadata_log.log_end_offset

    # -- topics -----------------------------------------------------------------------------

    def topic_properties(self, topic: TopicImage) -> dict[str, str | None]:
        """Every topic config's effective value: the topic's own, else the broker's."""
        return {name: topic.configs.get(name, self.config.topic_default(name)) for name in TOPIC_CONFIGS}

    def log_config(self, topic: TopicImage) -> LogConfig:
        return LogConfig.from_properties(self.topic_properties(topic))

    def log_config_problem(self, overrides: Mapping[str, str], config: BrokerConfig | None = None) -> str | None:
        """Why a topic with ``overrides`` over ``config``'s defaults (this broker's unless given)
        could not have a log, or None. Checked before configs are stored: each value passing its
        own check is not enough, the log's settings as a whole must stand."""
        config = config or self.config
        props = {name: overrides.get(name, config.topic_default(name)) for name in TOPIC_CONFIGS}
        try:
            LogConfig.from_properties(props)
        except ValueError as exc:
            return str(exc)
        return None

    def broker_config_problem(self, resource_name: str, dynamic: Mapping[str, str]) -> str | None:
        """``log_config_problem`` for every topic, were ``dynamic`` the broker resource's dynamic
        configs (``""``: the cluster-wide defaults)."""
        from kafkalike.server.connection_configs import socket_server_problem

        trial = BrokerConfig(self.config.explicit)
        trial.dynamic_default = dict(self.config.dynamic_default if resource_name else dynamic)
        trial.dynamic_broker = dict(dynamic if resource_name else self.config.dynamic_broker)
        for overrides in [{}, *(t.configs for t in self.controller.image.topics.values())]:
            problem = self.log_config_problem(overrides, trial)
            if problem is not None:
                return problem
        return socket_server_problem(trial)

    def apply_configs(self) -> None:
        """Make changed topic and broker configs take effect at once, without a restart."""
        image = self.controller.image
        self.config.dynamic_default = dict(image.broker_configs.get("", {}))
        self.config.dynamic_broker = dict(image.broker_configs.get(str(self.node_id), {}))
        for (name, _), state in self.partitions.items():
            topic = image.topics.get(name)
            if topic is not None:
                state.log.config = self.log_config(topic)

    def _open_partitions(self, topic: TopicImage) -> None:
        config = self.log_config(topic)
        for index in range(topic.partitions):
            if (topic.name, index) not in self.partitions:
                plog = self.logs.get_or_create(topic.name, index, config, now_ms(), topic_id=topic.topic_id)
                plog.high_watermark = plog.log_end_offset
                self.partitions[(topic.name, index)] = PartitionState(topic.name, index, topic.topic_id, plog)

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str], validate_only: bool = False
    ) -> TopicImage:
        for key, value in configs.items():
            if key not in TOPIC_CONFIGS:
                raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
            problem = validate_value(key, value)
            if problem is not None:
                raise ControllerError(ErrorCode.INVALID_CONFIG, problem)
        problem = self.log_config_problem(configs)
        if problem is not None:
            raise ControllerError(ErrorCode.INVALID_CONFIG, problem)
        topic = self.controller.create_topic(name, partitions, configs, validate_only)
        if not validate_only:
            self._open_partitions(topic)
        return topic

    def delete_topic(self, name: str) -> TopicImage:
        topic = self.controller.delete_topic(name)
        for index in range(topic.partitions):
            state = self.partitions.pop((name, index), None)
            if state is not None:
                state.notify()
                self.logs.delete_partition(name, index)
        self.groups.on_topic_deleted(name)
        return topic

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> TopicImage:
        topic = self.controller.create_partitions(name, count, validate_only)
        if not validate_only:
            self._open_partitions(topic)
        return topic

    def seed_topics(self, topics: list[tuple[str, int]]) -> None:
        """Create the named topics unless they exist (start-up seeding)."""
        for name, partitions in topics:
            if name not in self.controller.image.topics:
                self.create_topic(name, partitions, {})

    def auto_create(self, name: str) -> TopicImage | None:
        """Create a topic a client asked for, when auto.create.topics.enable allows it."""
        if not self.config.get_bool("auto.create.topics.enable") or name.startswith("__"):
            return None
        try:
            return self.create_topic(name, self.config.get_int("num.partitions"), {})
        except ControllerError:
            return self.controller.image.topics.get(name)

    # -- requests ---------------------------------------------------------------------------

    def api_versions(self) -> list[dict[str, Any]]:
        return [
            {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
            for h in sorted(self.handlers.values(), key=lambda h: h.api_key)
        ]

    # -- serving ----------------------------------------------------------------------------

    async def serve(self, host: str, port: int, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from kafkalike.server.listener import serve_listeners

        listeners = await trio.open_tcp_listeners(port, host=host)
        bound_port = listeners[0].socket.getsockname()[1]
        advertised = self.config.get("advertised.listeners")
        self.advertised = parse_listener(advertised.split(",")[0]) if advertised else (host, bound_port)
        if self.advertised[1] == 0:
            self.advertised = (self.advertised[0], bound_port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._background_jobs)
            if self.config.get_bool("log.cleaner.enable"):
                nursery.start_soon(self._log_cleaner)
            nursery.start_soon(self.groups.run)
            nursery.start_soon(self.txn.run)
            nursery.start_soon(serve_listeners, self, listeners)
            task_status.started((host, bound_port))

    async def _log_cleaner(self) -> None:
        """Compaction in bounded steps on this task, between appends (the logs take no locks)."""
        cleaner = LogCleaner(dedupe_buffer_bytes=self.config.get_int("log.cleaner.dedupe.buffer.size"))
        try:
            while True:
                more = self.logs.run_cleaner(cleaner, now_ms())
                await trio.sleep(0 if more else self.config.get_int("log.cleaner.backoff.ms") / 1000)
        finally:
            if cleaner.cleaning is not None:
                cleaner.abort(cleaner.cleaning)

    async def _background_jobs(self) -> None:
        interval_s = self.config.get_int("log.retention.check.interval.ms") / 1000
        flush_ms = self.config.get("log.flush.interval.ms")
        tick_s = min(interval_s, int(flush_ms) / 1000 if flush_ms else interval_s, 1.0)
        next_retention = trio.current_time() + interval_s
        while True:
            await trio.sleep(tick_s)
            self.logs.flush_due(now_ms())
            if trio.current_time() >= next_retention:
                next_retention = trio.current_time() + interval_s
                deleted = self.logs.run_retention(now_ms())
                if deleted:
                    log.info("retention deleted %d segment(s)", deleted)

    def close(self) -> None:
        self.logs.close_all()


def data_dir_of(config: BrokerConfig) -> Path:
    return config.log_dirs[0]
