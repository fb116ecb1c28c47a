"""Accepting connections, with Kafka's connection limits.

- ``max.connections``: while the broker has that many connections it accepts no new one; they
  wait in the listen backlog until a connection closes, as Kafka's acceptor waits for a slot.
- ``max.connections.per.ip`` and ``max.connections.per.ip.overrides`` (``host:count,...``): a
  connection beyond its address's limit is closed as soon as it is accepted, with Kafka's log
  line. All three are read at every accept, so AlterConfigs changes them at once.
- An accept that fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) is
  logged once; the listener tries again when a connection closes (which frees a descriptor) or
  after ``ACCEPT_RETRY_S``, and existing connections are served meanwhile.

The counts are the broker's ``ConnectionQuotas`` (``limits``).

Every client listener of ``listeners`` is bound (``bind_client_listeners``; the controller's are
the quorum's), and each connection is served as arriving on its listener's name: Metadata,
FindCoordinator, DescribeCluster and KIP-951's hints answer with that listener's endpoints.
``advertise`` turns the bound listeners into what the broker registers, as Kafka's BrokerServer
does (``ListenerInfo.withWildcardHostnamesResolved().withEphemeralPortsCorrected``):
``advertised.listeners`` (else ``listeners``) without the controller's, a blank host replaced by
this machine's name, a port 0 by the port its listener was bound on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from kafkalike.server.connection import IdleConnections, serve_connection
from kafkalike.server.listener_config import BrokerListeners, ListenerEndpoint

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker

log = logging.getLogger("kafkalike.listener")
ACCEPT_RETRY_S = 0.1
# The errors an accept returns while the process or the system is out of a resource.
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


# A bound listener with no host (NAME://:port) binds every IPv4 address, as the single node always has.
WILDCARD_BIND_HOST = "0.0.0.0"


class ListenerBindError(OSError):
    """A listener's address could not be bound (taken, not this machine's...)."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.host = host
        self.port = port


@dataclass(frozen=True, slots=True)
class BoundListener:
    """One client listener, bound: its name, its host as configured (blank: every address), the
    port it got."""

    name: str
    host: str
    port: int
    sockets: tuple[trio.SocketListener, ...]

    @property
    def address(self) -> tuple[str, int]:
        """Where it listens, as the ready line shows it."""
        return self.host or WILDCARD_BIND_HOST, self.port


def client_endpoints(config_listeners: BrokerListeners, host: str, port: int) -> list[ListenerEndpoint]:
    """The listeners clients are served on (every one of ``listeners`` but the controller's), in
    their order; the first at (``host``, ``port``), which the caller chose (``--listen``, a test's
    port 0). Without one, a PLAINTEXT listener there."""
    found = [e for e in config_listeners.listeners if e.name not in config_listeners.controller_names]
    if not found:
        return [ListenerEndpoint("PLAINTEXT", host, port, "PLAINTEXT")]
    if host == WILDCARD_BIND_HOST and not found[0].host:
        host = ""  # NAME://:port, which parse_listener reads as 0.0.0.0: still blank, so advertised by name
    return [dataclasses.replace(found[0], host=host, port=port), *found[1:]]


async def bind_client_listeners(endpoints: Sequence[ListenerEndpoint]) -> list[BoundListener]:
    """Every endpoint bound, in order; ListenerBindError for the first that cannot be (those
    bound before it are closed again)."""
    bound: list[BoundListener] = []
    try:
        for endpoint in endpoints:
            host = endpoint.host or WILDCARD_BIND_HOST
            try:
                sockets = await trio.open_tcp_listeners(endpoint.port, host=host)
            except OSError as exc:
                raise ListenerBindError(host, endpoint.port, exc) from exc
            port = sockets[0].socket.getsockname()[1]
            bound.append(BoundListener(endpoint.name, endpoint.host, port, tuple(sockets)))
    except BaseException:
        for listener in bound:
            for sock in listener.sockets:
                sock.socket.close()
        raise
    return bound


async def advertise(
    config_listeners: BrokerListeners, explicit: bool, bound: Sequence[BoundListener]
) -> list[ListenerEndpoint]:
    """What the broker registers and tells clients, per listener, in ``advertised.listeners``
    order (``explicit``: that config is set; else the bound listeners themselves)."""
    ports = {b.name: b.port for b in bound}
    if explicit:
        advertised = list(config_listeners.advertised)
    else:
        protocols = {e.name: e.security_protocol for e in config_listeners.listeners}
        advertised = [ListenerEndpoint(b.name, b.host, b.port, protocols.get(b.name, "PLAINTEXT")) for b in bound]
    out = []
    for endpoint in advertised:
        if endpoint.port == 0 and endpoint.name in ports:
            endpoint = dataclasses.replace(endpoint, port=ports[endpoint.name])
        if not endpoint.host.strip():
            # Kafka's InetAddress.getLocalHost().getCanonicalHostName(): a name lookup, off the loop.
            endpoint = dataclasses.replace(endpoint, host=await trio.to_thread.run_sync(socket.getfqdn))
        out.append(endpoint)
    return out


async def serve_listeners(broker: Broker, listeners: Sequence[BoundListener]) -> None:
    async with contextlib.AsyncExitStack() as bound:
        for listener in listeners:  # closed however this ends, even before the first accept
            for sock in listener.sockets:
                await bound.enter_async_context(sock)
        # Bound already; accepted only once the broker may serve clients (Broker.hold_clients).
        await broker.clients_enabled.wait()
        idle = IdleConnections(broker.config.get_int("connections.max.idle.ms"), broker.clock)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(idle.run)
            for listener in listeners:
                for sock in listener.sockets:
                    nursery.start_soon(_accept_loop, broker, listener.name, sock, idle, nursery)


async def _accept_loop(
    broker: Broker, name: str, listener: trio.SocketListener, idle: IdleConnections, nursery: trio.Nursery
) -> None:
    quotas = broker.connection_quotas
    out_of_resources = False
    async with listener:
        while True:
            await quotas.wait_for_slot()
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in OUT_OF_RESOURCES:
                    raise
                if not out_of_resources:
                    log.warning(
                        "cannot accept connections: %s; retrying as connections close (existing ones are served)",
                        exc.strerror,
                    )
                    out_of_resources = True
                await quotas.wait_for_close(ACCEPT_RETRY_S)
                continue
            if out_of_resources:
                log.info("accepting connections again")
                out_of_resources = False
            address = _peer_address(stream)
            try:
                limit = await quotas.admit(address)
            except BaseException:  # cancelled while resolving the overrides: not left open
                stream.socket.close()
                raise
            if limit is not None:
                log.info(
                    "Rejected connection from %s, address already has the configured maximum of %d connections.",
                    address,
                    limit,
                )
                stream.socket.close()
                continue
            nursery.start_soon(_serve_counted, broker, stream, address, idle, name)


async def _serve_counted(
    broker: Broker, stream: trio.SocketStream, address: str, idle: IdleConnections, name: str
) -> None:
    try:
        await serve_connection(broker, stream, address, idle, listener=name)
    finally:
        broker.connection_quotas.release(address)


def _peer_address(stream: trio.SocketStream) -> str:
    try:
        return str(stream.socket.getpeername()[0])
    except OSError:
        return "?"
