"""Serving a CONTROLLER listener: split frames, decode, dispatch to :mod:`.handlers`, answer.

As a broker connection, one request at a time per connection (responses in request order). As
Kafka's SocketServer, a request for an API or version this listener does not enable closes its
connection (ApiVersions at a version it does not know gets its v0 error answer, KIP-511), and so
does a frame that cannot be split or decoded: that connection only.
"""

from __future__ import annotations

import logging

import trio

from kafkalike.protocol.api import RequestHeader, UnsupportedRequestError, decode_request, encode_response
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode, ProtocolError
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.server.frames import receive_frame
from kafkalike.server.quorum.handlers import (
    API_VERSIONS_KEY,
    HANDLERS,
    ControllerApis,
    ControllerContext,
    api_versions_table,
)

log = logging.getLogger("kafkalike.quorum.listener")
MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes' default


async def serve_controller_listeners(ctx: ControllerContext, listeners: list[trio.SocketListener]) -> None:
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(_accept_loop, ctx, listener, nursery)


async def _accept_loop(ctx: ControllerContext, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                log.warning("controller listener cannot accept: %s", exc)
                await trio.sleep(0.1)
                continue
            nursery.start_soon(serve_controller_connection, ctx, stream)


async def serve_controller_connection(ctx: ControllerContext, stream: trio.SocketStream) -> None:
    splitter = FrameSplitter(MAX_REQUEST_BYTES)
    try:
        async with stream:
            while (frame := await receive_frame(stream, splitter)) is not None:
                response = await _handle_frame(ctx, frame)
                if response is not None:
                    await stream.send_all(response)
    except ProtocolError as exc:
        log.warning("closing controller connection: %s", exc)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        log.debug("controller connection ended: %s", exc)


async def _handle_frame(ctx: ControllerContext, frame: bytearray) -> bytes | None:
    try:
        header, body = decode_request(frame)
    except UnsupportedRequestError as exc:
        if exc.header.api_key == API_VERSIONS_KEY:
            answer = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": api_versions_table(ctx.apis)}
            return encode_response(API_VERSIONS_KEY, 0, exc.header.correlation_id, answer)
        raise ProtocolError(f"unsupported API key {exc.header.api_key} version {exc.header.api_version}") from None
    handler = HANDLERS.get(header.api_key)
    if handler is None and ctx.apis is not None:
        return await _handle_controller_api(ctx, ctx.apis, header, body)
    if handler is None or not handler.supports(header.api_version):
        if header.api_key == API_VERSIONS_KEY:
            answer = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": api_versions_table(ctx.apis)}
            return encode_response(API_VERSIONS_KEY, 0, header.correlation_id, answer)
        # As Kafka's SocketServer: a request for an API (version) this listener does not enable
        # is an invalid request, and its connection is closed.
        raise ProtocolError(
            f"Received request api key {header.api_key} with version {header.api_version} which is not enabled"
        )
    try:
        result = await handler.fn(ctx, header, body)
    except Exception:
        log.exception("controller handler for API %d v%d failed", header.api_key, header.api_version)
        raise ProtocolError("internal error while handling the request") from None
    if result is None:
        return None
    return encode_response(header.api_key, header.api_version, header.correlation_id, result)


async def _handle_controller_api(
    ctx: ControllerContext, apis: ControllerApis, header: RequestHeader, body: Message
) -> bytes | None:
    """A request for the controller's own APIs (not the quorum's): the host answers it."""
    versions = apis.api_versions().get(header.api_key)
    if versions is None or not versions[0] <= header.api_version <= versions[1]:
        raise ProtocolError(
            f"Received request api key {header.api_key} with version {header.api_version} which is not enabled"
        )
    try:
        result = await apis.handle_request(header, body, ctx.listener_name)
    except Exception:
        log.exception("controller API %d v%d failed", header.api_key, header.api_version)
        raise ProtocolError("internal error while handling the request") from None
    if result is None:
        return None
    return encode_response(header.api_key, header.api_version, header.correlation_id, result)
