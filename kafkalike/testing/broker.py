"""An in-process broker for test suites: start in milliseconds, no disk, fault hooks.

    with InProcessBroker(seed_topics={"orders": 3}) as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        ...
        kafka.faults.inject_error(api_key=0, error_code=6, times=2)  # NOT_LEADER_OR_FOLLOWER twice

Used outside trio (plain code, asyncio, pytest without trio) it runs its trio loop in a
thread; inside trio, ``async with InProcessBroker()`` runs it in the caller's loop.
``kafkalike.testing.Cluster`` wraps it as node 1 of a cluster.

What the broker logs at ERROR or with a traceback is kept in ``logged_errors``: whatever a
client sends, that is a broker bug, and the pytest plugin fails the test that caused it.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, suppress
from pathlib import Path
from typing import Any, TypeVar

import trio

from kafkalike.log import LogManager
from kafkalike.protocol.codec import Message
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.raft.log import MemoryRaftLog
from kafkalike.server.broker import Broker
from kafkalike.server.clock import Clock, SystemClock
from kafkalike.server.config import TEST_PROFILE, BrokerConfig
from kafkalike.server.faults import Fault, Interceptor
from kafkalike.server.node import Node
from kafkalike.testing.wire_client import WireClient

T = TypeVar("T")
# Every logger of the broker is below this one.
BROKER_LOGGER = "kafkalike"


class ErrorLog(logging.Handler):
    """Keeps what one broker's loop logs at ERROR or above, or with a traceback, formatted."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.records: list[str] = []
        # Several brokers may run in one process: only records from this broker's loop count
        # (and from any thread while it closes the broker: its logs close on worker threads).
        self.thread_id: int | None = None
        self.extra_threads: set[int] = set()
        self.all_threads = False

    def emit(self, record: logging.LogRecord) -> None:
        ours = self.all_threads or record.thread == self.thread_id or record.thread in self.extra_threads
        if ours and (record.levelno >= logging.ERROR or record.exc_info):
            self.records.append(self.format(record))


def loop_thread(
    main: Callable[[], Awaitable[None]],
    ready: threading.Event,
    failure: list[BaseException],
    errors: ErrorLog,
    name: str,
    what: str,
) -> threading.Thread:
    """A started daemon thread running ``trio.run(main)``; ``main`` sets ``ready`` once it serves.
    An exception before that goes to ``failure`` (and sets ``ready``, so the starter sees it);
    a crash after that is kept in ``errors``, as something ``what`` logged."""

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as exc:  # surfaced to the starting thread, or kept once started
            if ready.is_set():
                crash = "".join(traceback.format_exception(exc))
                errors.records.append(f"{what}'s loop crashed:\n{crash}")
            else:
                failure.append(exc)
                ready.set()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


class Faults:
    """Fault hooks of a running in-process broker; safe to call from the test's thread.

    Every hook takes ``client_id``: given, only requests whose header carries that client id
    are affected (one member of a group, say); ``times=None`` means every matching request.
    Each returns the fault, for ``remove``.
    """

    def __init__(self, owner: InProcessBroker) -> None:
        self._owner = owner

    def _add(self, fault: Fault) -> Fault:
        self._owner._call(lambda b: b.faults.add(fault))
        return fault

    def inject_error(self, api_key: int, error_code: int, times: int | None = 1, client_id: str | None = None) -> Fault:
        """Answer the next ``times`` requests of ``api_key`` with ``error_code`` instead of handling them."""
        return self._add(Fault(api_key, error_code=error_code, times=times, client_id=client_id))

    def delay(self, api_key: int, seconds: float, times: int | None = None, client_id: str | None = None) -> Fault:
        """Hold requests of ``api_key`` for ``seconds`` before handling them (the connection
        reads nothing else meanwhile, as a broker handles one request per connection at a time)."""
        return self._add(Fault(api_key, delay_s=seconds, times=times, client_id=client_id))

    def drop_connection(self, api_key: int, times: int | None = 1, client_id: str | None = None) -> Fault:
        """Close the client's connection when it sends ``api_key``."""
        return self._add(Fault(api_key, drop=True, times=times, client_id=client_id))

    def intercept(
        self, api_key: int, interceptor: Interceptor, times: int | None = None, client_id: str | None = None
    ) -> Fault:
        """Call ``interceptor(header, request)`` on the broker's loop; a mapping it returns is sent
        as the response, None lets the broker handle the request. It must not block."""
        return self._add(Fault(api_key, interceptor=interceptor, times=times, client_id=client_id))

    def pause_partition(self, topic: str, partition: int) -> None:
        """The partition loses its leader: produce and fetch get NOT_LEADER_OR_FOLLOWER."""
        self._owner._call(lambda b: b.faults.paused_partitions.add((topic, partition)))

    def resume_partition(self, topic: str, partition: int) -> None:
        self._owner._call(lambda b: b.faults.paused_partitions.discard((topic, partition)))

    def remove(self, fault: Fault) -> None:
        """Stop applying ``fault`` (a request it already holds is still held to the end)."""
        self._owner._call(lambda b: b.faults.remove(fault))

    def clear(self) -> None:
        """Remove every fault and resume every paused partition."""
        self._owner._call(lambda b: b.faults.clear())


class InProcessBroker:
    def __init__(
        self,
        *,
        ephemeral: bool = True,
        data_dir: str | Path | None = None,
        overrides: Mapping[str, str] | None = None,
        test_profile: bool = True,
        seed_topics: Mapping[str, int] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Clock | None = None,
    ) -> None:
        """``clock``: the broker's clock; ``TrioClock()`` with ``async with`` on a trio
        ``MockClock`` makes the broker's time follow the test's (the real clock by default)."""
        if not ephemeral and data_dir is None:
            raise ValueError("a durable broker needs a data_dir")
        values = dict(TEST_PROFILE) if test_profile else {}
        values["log.dirs"] = str(data_dir or "kafkalike-memory")
        values.update(overrides or {})
        self.config = BrokerConfig(values)
        self.ephemeral = ephemeral
        self.seed = dict(seed_topics or {})
        self.host, self.port = host, port
        self.clock = clock
        self.faults = Faults(self)
        self.broker: Broker | None = None
        self._logs: LogManager | None = None
        self._memory_log: MemoryRaftLog | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread: threading.Thread | None = None
        self._stop: trio.Event | None = None
        self._stack: AsyncExitStack | None = None
        self._errors = ErrorLog()
        self._serving = False

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        """The log directory (for an ephemeral broker only a name: its logs are in memory)."""
        return Path(self.config.log_dirs[0])

    @property
    def running(self) -> bool:
        """Started, and its loop has neither stopped nor crashed."""
        return self._serving

    @property
    def logged_errors(self) -> list[str]:
        """What this broker logged at ERROR or with a traceback, oldest first, across restarts."""
        return list(self._errors.records)

    # -- running --------------------------------------------------------------------------

    def _new_node(self) -> Node:
        """The single node ``kafkalike serve`` runs (its own one-voter quorum), keeping an
        ephemeral broker's logs and metadata log across restarts, as a disk would."""
        if self.ephemeral and self._memory_log is None:
            self._memory_log = MemoryRaftLog()
        # On the port of the previous start, once there was one.
        self.config.explicit["listeners"] = f"PLAINTEXT://{self.host}:{self.port}"
        return Node(
            self.config,
            clock=self.clock,
            ephemeral=self.ephemeral,
            memory_log=self._memory_log,
            logs=self._logs,
            seed_topics=list(self.seed.items()),
        )

    async def _serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self._errors.thread_id = threading.get_ident()
        logger = logging.getLogger(BROKER_LOGGER)
        logger.addHandler(self._errors)
        try:
            node = self._new_node()
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(node.run)
                    assert node.broker is not None and node.client_address is not None
                    self.broker = node.broker
                    self._logs = node.broker.logs if self.ephemeral else None
                    # Later restarts keep the same cluster id, as a real restart does.
                    self.config.explicit.setdefault("cluster.id", node.cluster_id)
                    self.host, self.port = node.client_address
                    self._serving = True
                    task_status.started()
                    await self._stop.wait()
                    # What the broker logs while it closes its logs on worker threads counts too.
                    self._errors.all_threads = True
                    await node.stop()
            finally:
                self._serving = False
                self._errors.all_threads = False
        finally:
            logger.removeHandler(self._errors)

    def start(self) -> InProcessBroker:
        """Run the broker in a background thread (for code that is not on trio)."""
        ready = threading.Event()
        failure: list[BaseException] = []

        async def main() -> None:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._serve)
                ready.set()

        self._thread = loop_thread(main, ready, failure, self._errors, "kafkalike-broker", "the broker")
        ready.wait()
        if failure:
            raise RuntimeError("in-process broker failed to start") from failure[0]
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._token is not None and self._stop is not None:
            stop = self._stop
            with suppress(trio.RunFinishedError):  # its loop crashed: nothing left to stop
                trio.from_thread.run_sync(stop.set, trio_token=self._token)
        self._thread.join()
        self._thread = None

    def restart(self) -> None:
        """Stop and start again on the same port, keeping the data (also when ephemeral)."""
        self.stop()
        self.start()

    def __enter__(self) -> InProcessBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> InProcessBroker:
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            return await _in_thread(self.start)
        self._stack = AsyncExitStack()
        nursery = await self._stack.enter_async_context(trio.open_nursery())
        await nursery.start(self._serve)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._stack is None:
            await _in_thread(self.stop)
            return
        assert self._stop is not None
        self._stop.set()
        await self._stack.aclose()
        self._stack = None

    def _call(self, fn: Callable[[Broker], object]) -> None:
        """Run ``fn(broker)`` on the broker's own loop (faults change broker state)."""
        assert self.broker is not None, "broker not started"
        broker = self.broker
        if self._thread is not None and threading.current_thread() is not self._thread and self._token is not None:
            trio.from_thread.run_sync(lambda: fn(broker), trio_token=self._token)
        else:
            fn(broker)

    # -- helpers ----------------------------------------------------------------------------

    def client(self) -> WireClient:
        return WireClient(self.host, self.port)

    def create_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None, replication_factor: int = 1
    ) -> None:
        create_topic(self.host, self.port, name, partitions, configs, replication_factor)

    def delete_topic(self, name: str) -> None:
        self.delete_topics([name])

    def delete_topics(self, names: list[str]) -> None:
        """Delete these topics; one that does not exist is no error."""
        delete_topics(self.host, self.port, names)

    def topics(self) -> dict[str, int]:
        """Every topic (internal ones included) and its partition count."""
        return topics(self.host, self.port)

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int = 0,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> int:
        """Append one record; returns its offset. A broker on its own clock (a mock one) gets
        timestamp 0, never one ahead of its time."""
        stamp = None if self.clock is None else 0
        return produce(self.host, self.port, topic, value, key, partition, headers, stamp)

    def consume(
        self, topic: str, partition: int = 0, offset: int = 0, max_bytes: int = 1 << 20
    ) -> list[tuple[int, Record]]:
        """The records from ``offset`` up to the high watermark (one fetch), with their offsets."""
        return consume(self.host, self.port, topic, partition, offset, max_bytes)


# -- one request each, to the broker at host:port (a node of a Cluster, too) ---------------------------


def create_topic(
    host: str,
    port: int,
    name: str,
    partitions: int = 1,
    configs: Mapping[str, str] | None = None,
    replication_factor: int = 1,
) -> None:
    with WireClient(host, port) as client:
        response = client.request(
            19,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                    }
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            },
        )
    topic = response.topics[0]
    if topic.error_code:
        raise RuntimeError(f"create_topic {name}: error {topic.error_code}: {topic.error_message}")


def delete_topics(host: str, port: int, names: list[str]) -> None:
    """Delete these topics; one that does not exist is no error."""
    if not names:
        return
    with WireClient(host, port) as client:
        client.request(20, 6, {"topics": [{"name": name} for name in names], "timeout_ms": 30000})


def topics(host: str, port: int) -> dict[str, int]:
    """Every topic (internal ones included) and its partition count."""
    with WireClient(host, port) as client:
        response = client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    return {topic.name: len(topic.partitions) for topic in response.topics}


def produce(
    host: str,
    port: int,
    topic: str,
    value: bytes | None,
    key: bytes | None = None,
    partition: int = 0,
    headers: list[tuple[str, bytes | None]] | None = None,
    timestamp_ms: int | None = None,
) -> int:
    """Append one record; returns its offset. Stamped ``timestamp_ms`` (by default now, on this
    process's wall clock, as a client stamps it: a timestamp of 0 is weeks past any retention)."""
    stamp = SystemClock().wall_ms() if timestamp_ms is None else timestamp_ms
    batch = build_batch([Record(key=key, value=value, headers=list(headers or []))], base_timestamp=stamp)
    with WireClient(host, port) as client:
        response = client.request(
            0,
            9,
            {
                "acks": -1,
                "timeout_ms": 30000,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
            },
        )
    part = response.responses[0].partition_responses[0]
    if part.error_code:
        raise RuntimeError(f"produce to {topic}-{partition}: error {part.error_code}")
    return int(part.base_offset)


def consume(
    host: str, port: int, topic: str, partition: int = 0, offset: int = 0, max_bytes: int = 1 << 20
) -> list[tuple[int, Record]]:
    """The records from ``offset`` up to the high watermark (one fetch), with their offsets."""
    with WireClient(host, port) as client:
        response = client.request(
            1,
            12,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": max_bytes,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                        ],
                    }
                ],
            },
        )
    part: Message = response.responses[0].partitions[0]
    if part.error_code:
        raise RuntimeError(f"fetch from {topic}-{partition}: error {part.error_code}")
    out = []
    blob = part.records or b""
    for pos, header in iter_batches(blob, partial_ok=True):
        for record in decode_records(blob, pos, header):
            record_offset = header.base_offset + record.offset_delta
            if record_offset >= offset:
                out.append((record_offset, record))
    return out


async def _in_thread(fn: Callable[[], T]) -> T:
    """Run blocking start/stop from an asyncio (or other non-trio) event loop."""
    import asyncio

    return await asyncio.get_running_loop().run_in_executor(None, fn)
