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
"""

from __future__ import annotations

import contextlib
import errno
import logging
from typing import TYPE_CHECKING

import trio

from kafkalike.server.connection import IdleConnections, serve_connection

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker

log = logging.getLogger("kafkalike.listener")
ACCEPT_RETRY_S = 0.1
# The errors an accept returns while the process or the system is out of a resource.
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


async def serve_listeners(broker: Broker, listeners: list[trio.SocketListener]) -> None:
    async with contextlib.AsyncExitStack() as bound:
        for listener in listeners:  # closed however this ends, even before the first accept
            await bound.enter_async_context(listener)
        # Bound already; accepted only once the broker may serve clients (Broker.hold_clients).
        await broker.clients_enabled.wait()
        idle = IdleConnections(broker.config.get_int("connections.max.idle.ms"), broker.clock)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(idle.run)
            for listener in listeners:
                nursery.start_soon(_accept_loop, broker, listener, idle, nursery)


async def _accept_loop(
    broker: Broker, listener: trio.SocketListener, idle: IdleConnections, nursery: trio.Nursery
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
            nursery.start_soon(_serve_counted, broker, stream, address, idle)


async def _serve_counted(broker: Broker, stream: trio.SocketStream, address: str, idle: IdleConnections) -> None:
    try:
        await serve_connection(broker, stream, address, idle)
    finally:
        broker.connection_quotas.release(address)


def _peer_address(stream: trio.SocketStream) -> str:
    try:
        return str(stream.socket.getpeername()[0])
    except OSError:
        return "?"
