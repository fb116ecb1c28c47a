"""Limits shared by all connections: how many there are, and memory for requests in flight.

``RequestMemoryPool`` is Kafka's ``queued.max.request.bytes``. A connection reserves a
request's size as soon as the request's size prefix has arrived and gives it back once the
request is decoded (a Produce request, whose records are views of its buffer, once it has been
handled), as Kafka releases a request's buffer. While nothing is left, connections that need memory stop reading
from their sockets (the bytes wait in the kernel, and the clients' sends block) until another
request is done: large concurrent requests wait, they do not fail. As Kafka's pool
(``SimpleMemoryPool``, not strict), a reservation is granted whenever any memory is left, even
if it is larger than what is left, so a request as large as ``socket.request.max.bytes``
always gets in once the others are done. Kafka's default, -1 (or any value up to 0), means no
limit: no pool at all.

``ConnectionQuotas`` counts connections in all and per client address, for ``max.connections``
and ``max.connections.per.ip`` (+ ``.overrides``), which the listener applies.
"""

from __future__ import annotations

import ipaddress
import logging
import socket

import trio

from kafkalike.server.config import BrokerConfig
from kafkalike.server.connection_configs import parse_per_ip_overrides

log = logging.getLogger("kafkalike.listener")
LIMIT_RECHECK_S = 1.0


class RequestMemoryPool:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.available_bytes = capacity_bytes
        self.waits = 0  # reservations that had to wait for memory, since the start
        self.peak_reserved_bytes = 0
        self._freed = trio.Event()

    @classmethod
    def from_config(cls, queued_max_request_bytes: int) -> RequestMemoryPool | None:
        return cls(queued_max_request_bytes) if queued_max_request_bytes > 0 else None

    async def reserve(self, size_bytes: int | None) -> int:
        """Wait until memory is left; then take ``size_bytes`` of it (None: take nothing, only
        wait, as a connection does before it knows its next request's size). Returns what was
        taken, to be given back to ``release``."""
        if self.available_bytes <= 0:
            self.waits += 1
            while self.available_bytes <= 0:
                await self._freed.wait()
        if size_bytes is None:
            return 0
        self.available_bytes -= size_bytes
        self.peak_reserved_bytes = max(self.peak_reserved_bytes, self.capacity_bytes - self.available_bytes)
        return size_bytes

    def release(self, size_bytes: int) -> None:
        if not size_bytes:
            return
        self.available_bytes += size_bytes
        if self.available_bytes > 0:
            self._freed.set()
            self._freed = trio.Event()


class ConnectionQuotas:
    """How many connections the broker has, in all and per client address."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.total = 0
        self.by_address: dict[str, int] = {}
        self._overrides_text: str | None = None
        self._overrides: dict[str, int] = {}
        self._closed = trio.Event()

    async def wait_for_slot(self) -> None:
        """Until the broker has fewer than ``max.connections`` (looked at again every
        ``LIMIT_RECHECK_S`` as well, so that raising the limit at run time lets connections in)."""
        while self.total >= self.config.get_int("max.connections"):
            await self.wait_for_close(LIMIT_RECHECK_S)

    async def wait_for_close(self, timeout_s: float) -> None:
        """Until a connection closes, or ``timeout_s`` passed."""
        with trio.move_on_after(timeout_s):
            await self._closed.wait()

    async def admit(self, address: str) -> int | None:
        """Count a new connection from ``address``; or, when that address already has its
        maximum, count nothing and return the maximum."""
        limit = (await self._per_ip_overrides()).get(address, self.config.get_int("max.connections.per.ip"))
        count = self.by_address.get(address, 0)
        if count >= limit:
            return limit
        self.by_address[address] = count + 1
        self.total += 1
        return None

    def release(self, address: str) -> None:
        count = self.by_address.pop(address) - 1
        if count:
            self.by_address[address] = count
        self.total -= 1
        self._closed.set()
        self._closed = trio.Event()

    async def _per_ip_overrides(self) -> dict[str, int]:
        """The overrides by address; host names resolved (off the event loop) when the value changes."""
        text = self.config.get("max.connections.per.ip.overrides") or ""
        if text != self._overrides_text:
            resolved = {}
            try:
                overrides = parse_per_ip_overrides(text)
            except ValueError as exc:  # refused when set; this is only in case
                log.warning("max.connections.per.ip.overrides ignored: %s", exc)
                overrides = {}
            for host, count in overrides.items():
                try:
                    address = str(ipaddress.ip_address(host))
                except ValueError:
                    try:
                        address = await trio.to_thread.run_sync(socket.gethostbyname, host)
                    except OSError as exc:
                        log.warning("max.connections.per.ip.overrides: cannot resolve %s: %s", host, exc)
                        continue
                resolved[address] = count
            self._overrides_text, self._overrides = text, resolved
        return self._overrides
