"""One client connection: split frames, decode, dispatch, answer in request order.

Like Apache Kafka, a connection handles one request at a time: the next request is read
only after the previous response is sent, which keeps responses in request order while the
client pipelines. A frame that cannot be split or decoded closes this connection only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from kafkalike.protocol.api import (
    API_VERSIONS_KEY,
    RequestHeader,
    UnsupportedRequestError,
    decode_request,
    encode_response,
)
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode, ProtocolError
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.server.context import RequestContext
from kafkalike.server.error_responses import error_response
from kafkalike.server.faults import Fault

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker

log = logging.getLogger("kafkalike.connection")
RECEIVE_BYTES = 256 * 1024


async def serve_connection(broker: Broker, stream: trio.SocketStream) -> None:
    try:
        peer = stream.socket.getpeername()
        client_host = str(peer[0])
    except OSError:
        client_host = "?"
    splitter = FrameSplitter(broker.config.get_int("socket.request.max.bytes"))
    try:
        async with stream:
            while True:
                frame = splitter.next_frame()
                if frame is None:
                    data = await stream.receive_some(max(RECEIVE_BYTES, splitter.wanted()))
                    if not data:
                        return
                    splitter.feed(data)
                    continue
                response = await _handle_frame(broker, frame, client_host)
                if response is not None:
                    await stream.send_all(response)
    except ProtocolError as exc:
        log.warning("closing connection from %s: %s", client_host, exc)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as exc:
        log.debug("connection from %s ended: %s", client_host, exc)


async def _handle_frame(broker: Broker, frame: bytes, client_host: str) -> bytes | None:
    try:
        header, body = decode_request(frame)
    except UnsupportedRequestError as exc:
        return _unsupported(broker, exc.header)
    handler = broker.handlers.get(header.api_key)
    if handler is None or not handler.supports(header.api_version):
        # Decodable but not served: answer UNSUPPORTED_VERSION where the response can carry it.
        answer = error_response(header.api_key, header.api_version, body, ErrorCode.UNSUPPORTED_VERSION)
        if answer is None or header.api_key == API_VERSIONS_KEY:
            return _unsupported(broker, header)
        return encode_response(header.api_key, header.api_version, header.correlation_id, answer)
    fault = broker.faults.take(header.api_key, header.client_id) if broker.faults.faults else None
    ctx = RequestContext(broker, header, client_host)
    try:
        if fault is not None:
            injected = await _apply_fault(fault, header, body)
            if injected is not None:
                return encode_response(header.api_key, header.api_version, header.correlation_id, injected)
        result = await handler.fn(ctx, body)
    except ProtocolError:
        raise
    except Exception:
        # A bug (or a test's interceptor that raised) must cost one connection, never the broker.
        log.exception("handler for API %d v%d failed", header.api_key, header.api_version)
        raise ProtocolError("internal error while handling the request") from None
    if result is None:
        return None
    return encode_response(header.api_key, header.api_version, header.correlation_id, result)


class DroppedByFault(ProtocolError):
    """A test asked for this connection to be dropped."""


async def _apply_fault(fault: Fault, header: RequestHeader, body: Message) -> Mapping[str, Any] | None:
    """Delay, drop or answer with an error instead of handling; None lets the handler run."""
    if fault.delay_s:
        await trio.sleep(fault.delay_s)
    if fault.drop:
        raise DroppedByFault(f"fault injected: drop on API {header.api_key}")
    if fault.interceptor is not None:
        return fault.interceptor(header, body)
    if fault.error_code is not None:
        response = error_response(header.api_key, header.api_version, body, fault.error_code)
        if response is None:
            raise DroppedByFault(f"fault injected: API {header.api_key} has no error response; dropping")
        return response
    return None


def _unsupported(broker: Broker, header: RequestHeader) -> bytes:
    """UNSUPPORTED_VERSION for ApiVersions (v0 body, KIP-511); other APIs, whose response we
    cannot build at that version, close the connection."""
    if header.api_key == API_VERSIONS_KEY:
        body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": broker.api_versions()}
        return encode_response(API_VERSIONS_KEY, 0, header.correlation_id, body)
    raise ProtocolError(f"unsupported API key {header.api_key} version {header.api_version}")
