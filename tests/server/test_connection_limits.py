"""Connection limits and memory per connection, as Kafka applies them: small buffers for idle
connections and for frames whose bytes have not arrived, max.connections, max.connections.per.ip
(+ overrides), connections.max.idle.ms and queued.max.request.bytes, end to end over loopback."""

from __future__ import annotations

import logging
import os
import resource
import select
import selectors
import struct
import tracemalloc
from pathlib import Path

import pytest
import trio
import trio.testing

from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.clock import SystemClock
from kafkalike.server.config import BrokerConfig, validate_value
from kafkalike.server.connection import IdleConnections, _Socket
from kafkalike.server.faults import Fault
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, serving
from tests.server.test_config_docs import BROKER, DYNAMIC_BROKER, _describe, _set
from tests.server.test_zero_copy_paths import batches, create, produce_body

API_VERSIONS = 18
PRODUCE = 0
METADATA = 3
SELECT_FD_LIMIT = 1024  # FD_SETSIZE: select() takes no descriptor numbered this or above


async def answers(client: AsyncWireClient) -> bool:
    response = await client.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    return bool(response.error_code == 0 and response.api_keys)


async def closed_by_broker(stream: trio.abc.Stream, deadline_s: float = 10) -> bool:
    """Whether the broker closed the connection; waits (bounded) for it to do so."""
    with trio.fail_after(deadline_s):
        try:
            return await stream.receive_some(1024) == b""
        except trio.BrokenResourceError:  # closed with our request unread: a reset
            return True


async def connect_from(source: str, port: int) -> AsyncWireClient:
    """A connection from the loopback address ``source`` (all of 127/8 is loopback)."""
    sock = trio.socket.socket()
    await sock.bind((source, 0))
    await sock.connect(("127.0.0.1", port))
    return AsyncWireClient(trio.SocketStream(sock))


def has_data(stream: trio.abc.Stream) -> bool:
    """Whether bytes (or the end) wait to be read, without reading them. A selector, not
    select(), which cannot watch a descriptor numbered 1024 or above (a long run's sockets are)."""
    assert isinstance(stream, trio.SocketStream)
    with selectors.DefaultSelector() as selector:
        selector.register(stream.socket.fileno(), selectors.EVENT_READ)
        return bool(selector.select(timeout=0))


async def test_has_data_sees_a_socket_numbered_above_what_select_can_watch() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = SELECT_FD_LIMIT + 64
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the descriptor limit ({hard}) is below {needed}: no socket can be numbered above 1024")
    padding = []
    try:
        if soft != resource.RLIM_INFINITY and soft < needed:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        while not padding or padding[-1] < SELECT_FD_LIMIT:  # bounded by the descriptor limit
            padding.append(os.open(os.devnull, os.O_RDONLY))
        ours, theirs = trio.socket.socketpair()
    finally:
        for fd in padding:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    async with trio.SocketStream(ours) as stream, trio.SocketStream(theirs) as peer:
        assert stream.socket.fileno() > SELECT_FD_LIMIT
        with pytest.raises(ValueError):  # the negative control: select() refuses it
            select.select([stream.socket.fileno()], [], [], 0)
        assert not has_data(stream)
        await peer.send_all(b"x")
        assert has_data(stream)


# -- memory ---------------------------------------------------------------------------------


async def test_idle_connections_hold_small_buffers(running: RunningBroker) -> None:
    count = 40
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        clients = [await running.client() for _ in range(count)]
        for client in clients:
            assert await answers(client)
        await trio.testing.wait_all_tasks_blocked()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Both ends of every connection are counted (the clients run here too).
    assert (after - before) / count < 32 * 1024


async def test_a_frame_announcing_100_mib_costs_what_arrived(running: RunningBroker) -> None:
    stream = await trio.open_tcp_stream(running.host, running.port)
    async with stream:
        tracemalloc.start()
        try:
            await stream.send_all(struct.pack(">i", 100 * 1024 * 1024) + b"0123456789")
            await trio.testing.wait_all_tasks_blocked()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 2 * 1024 * 1024
    assert await answers(await running.client())


async def test_a_frame_above_socket_request_max_bytes_closes_the_connection(tmp_path: Path) -> None:
    async with serving(tmp_path, socket_request_max_bytes="1000") as running:
        async with await trio.open_tcp_stream(running.host, running.port) as stream:
            await stream.send_all(struct.pack(">i", 1001) + b"x" * 100)
            assert await closed_by_broker(stream)
        assert await answers(await running.client())


# -- connection counts ----------------------------------------------------------------------


async def test_max_connections_per_ip_closes_the_next_connection(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kafkalike.listener")
    async with serving(tmp_path, max_connections_per_ip="2") as running:
        first, second = await running.client(), await running.client()
        assert await answers(first) and await answers(second)
        async with await trio.open_tcp_stream(running.host, running.port) as third:
            assert await closed_by_broker(third)
        assert await answers(first) and await answers(second)
        assert "Rejected connection from 127.0.0.1, address already has the configured maximum of 2 connections." in (
            caplog.messages
        )
        # Another address has its own count.
        other = await connect_from("127.0.0.2", running.port)
        running.clients.append(other)
        assert await answers(other)
        # A connection closing frees its address's slot.
        await first.aclose()
        running.clients.remove(first)
        with trio.fail_after(10):
            while running.broker.connection_quotas.by_address.get("127.0.0.1") != 1:
                await trio.testing.wait_all_tasks_blocked()
        assert await answers(await running.client())


async def test_per_ip_overrides(tmp_path: Path) -> None:
    configs = {"max_connections_per_ip": "1", "max_connections_per_ip_overrides": "127.0.0.2:3, localhost:0"}
    async with serving(tmp_path, **configs) as running:
        # localhost resolves to 127.0.0.1: no connection from there at all.
        async with await trio.open_tcp_stream(running.host, running.port) as refused:
            assert await closed_by_broker(refused)
        clients = [await connect_from("127.0.0.2", running.port) for _ in range(3)]
        running.clients.extend(clients)
        for client in clients:
            assert await answers(client)
        fourth = await connect_from("127.0.0.2", running.port)
        running.clients.append(fourth)
        assert await closed_by_broker(fourth.stream)
        assert await answers(clients[0])


async def test_max_connections_waits_for_a_slot(tmp_path: Path) -> None:
    async with serving(tmp_path, max_connections="2") as running:
        first, second = await running.client(), await running.client()
        assert await answers(first) and await answers(second)
        # Kafka's acceptor waits for a free slot: the third connection is not accepted (it waits
        # in the listen backlog), so its request gets no answer while the first two are open.
        third = await running.client()
        await third.send(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert await answers(first) and await answers(second)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert not has_data(third.stream)
        assert running.broker.connection_quotas.total == 2
        await first.aclose()
        running.clients.remove(first)
        with trio.fail_after(10):
            _, response = await third.receive(API_VERSIONS, 3)
        assert response.error_code == 0
        assert await answers(second)


async def test_raising_max_connections_at_run_time_lets_waiting_connections_in(tmp_path: Path) -> None:
    async with serving(tmp_path, max_connections="1") as running:
        first = await running.client()
        assert await answers(first)
        second = await running.client()
        await second.send(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert (await _set(first, BROKER, "1", {"max.connections": "2"})).error_code == 0
        with trio.fail_after(10):
            _, response = await second.receive(API_VERSIONS, 3)
        assert response.error_code == 0 and running.broker.connection_quotas.total == 2


# -- idle connections -----------------------------------------------------------------------


async def test_idle_connection_is_closed_after_connections_max_idle_ms(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with serving(tmp_path, ephemeral=True) as running:  # Kafka's default: 10 minutes
        idle, busy = await running.client(), await running.client()
        assert await answers(idle) and await answers(busy)
        started = trio.current_time()
        closed_after: list[float] = []

        async def wait_for_close() -> None:
            assert await closed_by_broker(idle.stream, deadline_s=3600)
            closed_after.append(trio.current_time() - started)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_for_close)
            # A request every 4 minutes keeps a connection open; the other one is closed at 10.
            for _ in range(5):
                await trio.sleep(4 * 60)
                assert await answers(busy)
        # Looked for every second: closed within two of the limit, never before it.
        assert len(closed_after) == 1 and 10 * 60 <= closed_after[0] <= 10 * 60 + 2
        assert running.broker.connection_quotas.total == 1


async def test_negative_connections_max_idle_ms_keeps_idle_connections(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with serving(tmp_path, ephemeral=True, connections_max_idle_ms="-1") as running:
        idle = await running.client()
        assert await answers(idle)
        await trio.sleep(3600)
        assert await answers(idle)


async def test_idle_check_closes_only_connections_waiting_with_nothing_received_since() -> None:
    idle = IdleConnections(10_000, SystemClock())
    waiting, busy, handling = _Socket(-1), _Socket(-1), _Socket(-1)
    idle.sockets.update({waiting, busy, handling})
    for sock in (waiting, busy):
        sock.receiving = True
    idle.close_idle(100.0)  # first look: the time each was last seen active
    busy.receives += 1  # it got bytes and waits again
    idle.close_idle(109.9)
    assert not any(s.idle_scope.cancel_called for s in idle.sockets)
    idle.close_idle(110.0)
    assert waiting.idle_scope.cancel_called
    assert not busy.idle_scope.cancel_called and not handling.idle_scope.cancel_called  # handling a request
    idle.close_idle(119.8)  # ten seconds after the look that saw its bytes: not yet
    assert not busy.idle_scope.cancel_called
    idle.close_idle(120.0)
    assert busy.idle_scope.cancel_called and not handling.idle_scope.cancel_called


# -- queued.max.request.bytes ---------------------------------------------------------------


async def produce_all(running: RunningBroker, records: bytes, count: int) -> list[int]:
    clients = [await running.client() for _ in range(count)]
    codes: list[int] = []

    async def one(client: AsyncWireClient) -> None:
        answer = await client.request(PRODUCE, 9, produce_body("big", 0, records))
        codes.append(answer.responses[0].partition_responses[0].error_code)

    async with trio.open_nursery() as nursery:
        for client in clients:
            nursery.start_soon(one, client)
    return codes


async def test_queued_max_request_bytes_makes_large_requests_wait(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    limits = {"socket_request_max_bytes": "300000", "queued_max_request_bytes": "300000"}
    async with serving(tmp_path, ephemeral=True, **limits) as running:
        await create(await running.client(), "big", 1)
        records = batches(40, 5000, 1)  # ~200 KB requests: two fit at once (the pool is not strict)
        running.broker.faults.add(Fault(PRODUCE, delay_s=1.0))  # each one is handled for a while
        started = trio.current_time()
        codes = await produce_all(running, records, 4)
        assert trio.current_time() - started >= 2.0  # two at a time
        pool = running.broker.request_memory
        assert pool is not None
        assert codes == [0, 0, 0, 0]
        assert pool.waits >= 1
        assert pool.peak_reserved_bytes <= 300_000 + len(records) + 1000
        assert pool.available_bytes == 300_000


async def test_without_queued_max_request_bytes_requests_do_not_wait(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with serving(tmp_path, ephemeral=True, socket_request_max_bytes="300000") as running:
        await create(await running.client(), "big", 1)
        running.broker.faults.add(Fault(PRODUCE, delay_s=1.0))
        started = trio.current_time()
        assert await produce_all(running, batches(40, 5000, 1), 4) == [0, 0, 0, 0]
        assert running.broker.request_memory is None
        assert trio.current_time() - started < 2.0  # all four handled at once


async def test_a_request_waiting_in_its_handler_holds_memory_only_if_it_is_a_produce(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    limits = {"socket_request_max_bytes": "300000", "queued_max_request_bytes": "300000"}
    async with serving(tmp_path, ephemeral=True, **limits) as running:
        pool = running.broker.request_memory
        assert pool is not None
        await create(await running.client(), "big", 1)
        running.broker.faults.add(Fault(PRODUCE, delay_s=1.0))
        running.broker.faults.add(Fault(METADATA, delay_s=1.0))
        names = [{"name": f"unknown-topic-{i}"} for i in range(7_000)]  # a ~250 KB request
        metadata_body = {"topics": names, "allow_auto_topic_creation": False}
        records = batches(40, 5000, 1)
        async with trio.open_nursery() as nursery:
            client = await running.client()
            nursery.start_soon(client.request, METADATA, 12, metadata_body)
            await trio.testing.wait_all_tasks_blocked()  # it is in its handler (the delay)
            assert pool.available_bytes == 300_000  # released once decoded, as Kafka does
            producer = await running.client()
            nursery.start_soon(producer.request, PRODUCE, 9, produce_body("big", 0, records))
            await trio.testing.wait_all_tasks_blocked()
            assert 300_000 - len(records) - 1000 < pool.available_bytes < 300_000 - len(records)
        assert pool.available_bytes == 300_000


# -- the configs ----------------------------------------------------------------------------

KAFKA_DEFAULTS = {
    "socket.request.max.bytes": "104857600",
    "queued.max.request.bytes": "-1",
    "max.connections": "2147483647",
    "max.connections.per.ip": "2147483647",
    "max.connections.per.ip.overrides": "",
    "connections.max.idle.ms": "600000",
}


async def test_describe_configs_lists_the_limits_with_kafkas_defaults(running: RunningBroker) -> None:
    configs = await _describe(await running.client(), BROKER, "1", documentation=True)
    assert {name: configs[name].value for name in KAFKA_DEFAULTS} == KAFKA_DEFAULTS
    assert [name for name in KAFKA_DEFAULTS if configs[name].read_only] == [
        "socket.request.max.bytes",
        "queued.max.request.bytes",
        "connections.max.idle.ms",
    ]


async def test_per_ip_limit_changed_at_run_time_applies_to_the_next_connection(running: RunningBroker) -> None:
    first = await running.client()
    assert (await _set(first, BROKER, "1", {"max.connections.per.ip": "1"})).error_code == 0
    assert (await _describe(first, BROKER, "1"))["max.connections.per.ip"].config_source == DYNAMIC_BROKER
    async with await trio.open_tcp_stream(running.host, running.port) as second:
        assert await closed_by_broker(second)
    assert (await _set(first, BROKER, "1", {"max.connections.per.ip": None})).error_code == 0
    assert await answers(await running.client())


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            {"max.connections.per.ip.overrides": "no-count"},
            "Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, length 8",
        ),
        (
            {"max.connections.per.ip": "0"},
            "requirement failed: max.connections.per.ip can be set to zero only if "
            "max.connections.per.ip.overrides property is set.",
        ),
    ],
)
async def test_limits_kafka_would_refuse_are_refused_at_run_time(
    running: RunningBroker, configs: dict[str, str], message: str
) -> None:
    client = await running.client()
    result = await _set(client, BROKER, "1", configs)
    # Refused in Kafka's words; the code (Kafka: INVALID_REQUEST for a broker resource) is the
    # AlterConfigs handler's, the same for every broker config.
    assert result.error_code in (ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST)
    assert result.error_message == message
    assert await answers(await running.client())


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"queued.max.request.bytes": "1000"},
            "requirement failed: queued.max.request.bytes must be larger or equal to socket.request.max.bytes",
        ),
        (
            {"max.connections.per.ip": "0"},
            "requirement failed: max.connections.per.ip can be set to zero only if "
            "max.connections.per.ip.overrides property is set.",
        ),
        (
            {"max.connections.per.ip.overrides": "good:1,b@d:2,wor$e:3"},
            "max.connections.per.ip.overrides contains invalid addresses : b@d,wor$e",
        ),
        (
            {"max.connections.per.ip.overrides": "127.0.0.1"},
            "Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, length 9",
        ),
        (
            {"max.connections.per.ip.overrides": "127.0.0.1:many"},
            "Error parsing configuration property 'max.connections.per.ip.overrides': For input string: \"many\"",
        ),
        (
            {"connections.max.idle.ms": "100"},
            "requirement failed: connection.failed.authentication.delay.ms=100 should always be less than "
            "connections.max.idle.ms=100 to prevent failed authentication responses from timing out",
        ),
    ],
)
def test_settings_kafka_refuses_to_start_with(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        BrokerConfig(values).check()
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    "values",
    [
        {"queued.max.request.bytes": "104857600"},
        {"queued.max.request.bytes": "1000", "socket.request.max.bytes": "1000"},
        {"queued.max.request.bytes": "0"},
        {"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "::1:5, 10.0.0.1:2,host-a:0"},
        {"connections.max.idle.ms": "101"},
        {"connections.max.idle.ms": "-1"},
    ],
)
def test_settings_kafka_starts_with(values: dict[str, str]) -> None:
    BrokerConfig(values).check()


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("socket.request.max.bytes", "0", "Value must be at least 1"),
        ("max.connections", "-1", "Value must be at least 0"),
        ("max.connections.per.ip", "-1", "Value must be at least 0"),
        ("queued.max.request.bytes", "x", "Not a number of type LONG"),
        ("connections.max.idle.ms", "1.5", "Not a number of type LONG"),
    ],
)
def test_values_out_of_range(name: str, value: str, problem: str) -> None:
    assert validate_value(name, value) == f"Invalid value {value} for configuration {name}: {problem}"
    assert validate_value(name, "1") is None
