"""Requests from this broker to another broker (Kafka's inter-broker NetworkClient, as its
TransactionMarkerChannelManager and AddPartitionsToTxnManager use it).

- One connection per broker id, made on first use to the broker's endpoint on
  ``inter.broker.listener.name`` as the published metadata image has it (a fenced or unknown
  broker has none); one request in flight per connection, so a broker's requests keep their
  order.
- Each request is bounded by ``request.timeout.ms``; a refused, broken or timed-out connection
  is closed (made again by the next request) and the request fails with
  :class:`BrokerUnreachable`, which callers answer as Kafka answers a disconnection (the
  markers are retried, a verification answers NOT_COORDINATOR... as its caller decides).
- ``NetworkFaults`` (the test kit's isolate/heal) is consulted before each request, as the
  quorum and controller channels do.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Any

import trio

from kafkalike.protocol.api import RequestHeader, decode_response, encode_request
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode, ProtocolError
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.server.frames import receive_frame
from kafkalike.server.quorum.channel import NetworkFaults
from kafkalike.server.routing import NodeEndpoint

log = logging.getLogger("kafkalike.inter_broker")

DEFAULT_REQUEST_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms
MAX_RESPONSE_BYTES = 100 * 1024 * 1024
_CORRELATION_ID = struct.Struct(">i")


class BrokerUnreachable(Exception):
    """The broker has no endpoint, could not be reached, or did not answer in time."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


class _Connection:
    def __init__(self) -> None:
        self.lock = trio.Lock()
        self.stream: trio.SocketStream | None = None
        self.address: tuple[str, int] | None = None
        self.splitter = FrameSplitter(MAX_RESPONSE_BYTES)

    async def close(self) -> None:
        stream, self.stream, self.address = self.stream, None, None
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()


class InterBrokerClient:
    """See the module docstring."""

    def __init__(
        self,
        node_id: int,
        endpoint: Callable[[int], NodeEndpoint | None],
        *,
        faults: NetworkFaults | None = None,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
    ) -> None:
        """``endpoint(broker_id)``: the broker's inter-broker endpoint if it is alive now."""
        self.node_id = node_id
        self.endpoint = endpoint
        self.faults = faults
        self.request_timeout_ms = request_timeout_ms
        self.client_id = f"broker-{node_id}-inter-broker"
        self._connections: dict[int, _Connection] = {}
        self._correlation_id = 0
        self.sent = 0

    async def request(
        self, broker_id: int, api_key: int, version: int, body: Any, *, timeout_ms: int | None = None
    ) -> Message:
        """The broker's response to one request; BrokerUnreachable when there is none."""
        if self.faults is not None and self.faults.blocks(self.node_id, broker_id):
            raise BrokerUnreachable(f"broker {broker_id} is cut off from broker {self.node_id}")
        found = self.endpoint(broker_id)
        if found is None:
            raise BrokerUnreachable(f"broker {broker_id} has no live endpoint")
        address = (found.host, found.port)
        connection = self._connections.setdefault(broker_id, _Connection())
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        async with connection.lock:
            with trio.move_on_after(timeout_s):
                try:
                    return await self._exchange(connection, address, api_key, version, body)
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ProtocolError) as exc:
                    await connection.close()
                    log.info("broker %d: request %d to broker %d failed: %s", self.node_id, api_key, broker_id, exc)
                    raise BrokerUnreachable(f"broker {broker_id}: {exc}") from None
            await connection.close()
        raise BrokerUnreachable(f"broker {broker_id} did not answer {api_key} v{version} within {timeout_s:g} s")

    async def _exchange(
        self, connection: _Connection, address: tuple[str, int], api_key: int, version: int, body: Any
    ) -> Message:
        if connection.stream is None or connection.address != address:
            await connection.close()
            connection.stream = await trio.open_tcp_stream(*address)
            connection.address = address
            connection.splitter = FrameSplitter(MAX_RESPONSE_BYTES)
        self._correlation_id += 1
        header = RequestHeader(api_key, version, self._correlation_id, self.client_id)
        await connection.stream.send_all(encode_request(header, body))
        frame = await receive_frame(connection.stream, connection.splitter)
        if frame is None:
            raise trio.BrokenResourceError("connection closed by the broker")
        (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 0)
        if correlation_id != header.correlation_id:
            raise ProtocolError(f"answered #{correlation_id} to #{header.correlation_id}")
        self.sent += 1
        return decode_response(api_key, version, frame)[1]

    async def aclose(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
