"""One client connection: split frames, decode, dispatch, answer in request order.

Like Apache Kafka, a connection handles one request at a time: the next request is read
only after the previous response is sent, which keeps responses in request order while the
client pipelines. A frame that cannot be split or decoded closes this connection only.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from kafkalike.protocol.api import (
    API_VERSIONS_KEY,
    RequestHeader,
    UnsupportedRequestError,
    decode_request,
    encode_response,
)
from kafkalike.protocol.errors import ErrorCode, ProtocolError
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.server.context import RequestContext

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
        return _unsupported(broker, header)
    broker.intercept(header)
    ctx = RequestContext(broker, header, client_host)
    try:
        result = await handler.fn(ctx, body)
    except ProtocolError:
        raise
    except Exception:
        # A bug must cost one connection, never the broker.
        log.exception("handler for API %d v%d failed", header.api_key, header.api_version)
        raise ProtocolError("internal error while handling the request") from None
    if result is None:
        return None
    return encode_response(header.api_key, header.api_version, header.correlation_id, result)


def _unsupported(broker: Broker, header: RequestHeader) -> bytes:
    """UNSUPPORTED_VERSION for ApiVersions (v0 body, KIP-511); other APIs close the connection."""
    if header.api_key == API_VERSIONS_KEY:
        body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": broker.api_versions()}
        return encode_response(API_VERSIONS_KEY, 0, header.correlation_id, body)
    raise ProtocolError(f"unsupported API key {header.api_key} version {header.api_version}")
