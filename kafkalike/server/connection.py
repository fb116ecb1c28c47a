"""One client connection: split frames, decode, dispatch, answer in request order.

Like Apache Kafka, a connection handles one request at a time, in the order they came, and
answers in that order. Kafka reads the next request only once the previous answer is sent; here a
request that has done everything and only waits (an acks=all produce waiting for its replicas,
``AnswerLater``) does not hold the connection: the next requests are read and handled meanwhile,
their answers queued behind it (``_Answers``), so a client that pipelines its produce requests
has each replication round cover all of them instead of one. A frame that cannot be split or
decoded closes this connection only.

Bytes move as few times as they can: small requests arrive through one receive buffer that
every connection of the trio run shares (it is filled and emptied between two awaits), a large
one (a produce request) straight into a buffer of its own that grows as the request arrives and
that the request decodes from in place; so an idle connection holds no buffer at all. Records a
fetch answers with stay in the segment files and go out with
``os.sendfile`` (responses under ``SENDFILE_MIN_BYTES``, and logs kept in memory, are copied
out instead: for a few kilobytes two system calls cost more than a copy).

Limits, as Kafka applies them: a frame above ``socket.request.max.bytes`` closes the connection;
each request holds its size in the broker's ``queued.max.request.bytes`` pool from its size
prefix on (``limits``, ``_Reservation``); a connection that waits for its next
request longer than ``connections.max.idle.ms`` is closed (``IdleConnections``).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from kafkalike.log.storage import FileSlices, SegmentFile
from kafkalike.protocol.api import (
    API_VERSIONS_KEY,
    RequestHeader,
    UnsupportedRequestError,
    decode_request,
    encode_response,
    encode_response_parts,
)
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode, ProtocolError
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.protocol.wire import ExternalBytes
from kafkalike.server.clock import Clock
from kafkalike.server.context import RequestContext
from kafkalike.server.error_responses import error_response
from kafkalike.server.faults import Fault
from kafkalike.server.limits import RequestMemoryPool
from kafkalike.server.registry import AnswerLater

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker

log = logging.getLogger("kafkalike.connection")
RECEIVE_BYTES = 256 * 1024  # the receive buffer every connection of a trio run shares
SENDFILE_MIN_BYTES = 64 * 1024
YIELD_INTERVAL_S = 0.001  # a connection that never has to wait lets other tasks run at least this often
Response = bytes | Sequence[bytes | ExternalBytes]
PRODUCE_KEY = 0
MAX_WAITING_ANSWERS = 64  # a connection's requests handled but not yet answered (see _Answers)
_shared_receive_buffer: trio.lowlevel.RunVar[bytearray] = trio.lowlevel.RunVar("kafkalike_receive_buffer")


def _receive_buffer() -> bytearray:
    """This trio run's shared receive buffer (one per run: runs in other threads have their own)."""
    try:
        return _shared_receive_buffer.get()
    except LookupError:
        buffer = bytearray(RECEIVE_BYTES)
        _shared_receive_buffer.set(buffer)
        return buffer


class IdleConnection(Exception):
    """No request came for connections.max.idle.ms."""


class IdleConnections:
    """``connections.max.idle.ms``: a connection that has waited for bytes that long, with no
    request in progress, is closed (a negative value: never).

    One task looks at every connection every ``idle/10`` (at most a second), as Kafka's network
    threads look at the least recently active connection on every poll, and cancels the wait of
    one that has received nothing since it last looked, at least that long ago. A connection's
    own path only counts its receives: a deadline per wait (a cancel scope) would cost more than
    the rest of a small request's receive."""

    def __init__(self, idle_ms: int, clock: Clock) -> None:
        self.clock = clock
        self.idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        self.sockets: set[_Socket] = set()

    async def run(self) -> None:
        if self.idle_s is None:
            return
        while True:
            await trio.sleep(min(1.0, self.idle_s / 10))
            self.close_idle(self.clock.monotonic_s())

    def close_idle(self, now: float) -> None:
        assert self.idle_s is not None
        for sock in self.sockets:
            if sock.receiving and sock.receives == sock.seen_receives:
                if now - sock.idle_since >= self.idle_s:
                    sock.idle_scope.cancel()
            else:
                sock.seen_receives, sock.idle_since = sock.receives, now


async def serve_connection(
    broker: Broker,
    stream: trio.SocketStream,
    client_host: str | None = None,
    idle: IdleConnections | None = None,
    *,
    listener: str | None = None,
) -> None:
    """``listener``: the name of the listener the connection arrived on (the broker's first
    client listener when not given)."""
    listener_name = listener or broker.handler_services.listener
    if client_host is None:
        try:
            client_host = str(stream.socket.getpeername()[0])
        except OSError:
            client_host = "?"
    splitter = FrameSplitter(broker.config.get_int("socket.request.max.bytes"))
    conn = _Socket(stream.socket.fileno())
    memory = _Reservation(broker.request_memory) if broker.request_memory is not None else None
    if idle is not None:
        idle.sockets.add(conn)
    requests = _Requests(broker, conn, splitter, client_host, listener_name, memory)
    try:
        with conn.idle_scope:
            async with stream:
                # Answers wait only once a request answers later: until then (most connections,
                # for ever) no nursery, no queue, no task.
                pending = await requests.serve(None)
                if pending is not None:
                    async with trio.open_nursery() as nursery:
                        answers = _Answers(conn, nursery)
                        try:
                            await answers.later(pending)
                            await requests.serve(answers)
                        except Exception as exc:  # raised below, outside the nursery (which would wrap it)
                            answers.fail(exc)
                        # The client is gone (or the connection failed): waiting answers have no one to go to.
                        nursery.cancel_scope.cancel()
                    if answers.failure is not None:
                        raise answers.failure
        if conn.idle_scope.cancelled_caught:
            raise IdleConnection
    except ProtocolError as exc:
        log.warning("closing connection from %s: %s", client_host, exc)
    except IdleConnection:
        log.debug("closing connection from %s: idle for longer than connections.max.idle.ms", client_host)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        log.debug("connection from %s ended: %s", client_host, exc)
    finally:
        if memory is not None:
            memory.release()
        if idle is not None:
            idle.sockets.discard(conn)


@dataclass(slots=True)
class _Requests:
    """A connection's requests, read and handled one at a time."""

    broker: Broker
    conn: _Socket
    splitter: FrameSplitter
    client_host: str
    listener: str
    memory: _Reservation | None

    async def serve(self, answers: _Answers | None) -> _Later | None:
        """Until the client closes the connection (None). Without ``answers``, each answer is
        sent as it comes, and the first request that answers later is returned instead."""
        broker, conn, splitter, memory = self.broker, self.conn, self.splitter, self.memory
        receive_buffer = _receive_buffer()
        while True:
            frame = splitter.take_frame()
            if frame is None:
                if memory is not None and not memory.reserved_bytes:
                    await memory.reserve(splitter.announced_bytes())
                if not await _receive_more(conn, splitter, receive_buffer):
                    return None
                continue
            if memory is not None and not memory.reserved_bytes:
                await memory.reserve(len(frame))
            response = await _handle_frame(broker, frame, self.client_host, self.listener, memory)
            del frame  # the request's records may be views of it
            if memory is not None:
                memory.release()
            if isinstance(response, _Later):
                if answers is None:
                    return response
                await answers.later(response)
            elif response is not None:
                if answers is None:
                    await _send(conn, response)
                else:
                    await answers.send(response)
            await conn.yield_if_not_waited(broker.clock.monotonic_s())


async def _receive_more(conn: _Socket, splitter: FrameSplitter, receive_buffer: bytearray) -> int:
    """The connection's next bytes into ``splitter``: straight into a large frame's own buffer,
    or through the shared receive buffer. 0 at the end of the stream."""
    direct = splitter.receive_view()
    if direct is not None:
        with direct:
            n = await conn.receive_into(direct)
        splitter.received(n)
        return n
    n = await conn.receive_into(receive_buffer)
    with memoryview(receive_buffer) as view:
        splitter.feed(view[:n])
    return n


class _Reservation:
    """A connection's share of the request memory pool: its current request's size, from the
    request's size prefix until the request is decoded, or for Produce (whose records are
    views of the request's buffer) until it has been handled, as Kafka releases it. A request
    waiting in its handler (a JoinGroup for the rest of its group, a long-poll Fetch) holds none."""

    __slots__ = ("pool", "reserved_bytes")

    def __init__(self, pool: RequestMemoryPool) -> None:
        self.pool = pool
        self.reserved_bytes = 0

    async def reserve(self, size_bytes: int | None) -> None:
        self.reserved_bytes = await self.pool.reserve(size_bytes)

    def release(self) -> None:
        self.pool.release(self.reserved_bytes)
        self.reserved_bytes = 0


class _Socket:
    """Non-blocking system calls straight on the connection's descriptor, waiting (through trio)
    only when the kernel says so.

    Trio's socket methods add a trip through the scheduler before and after each call; here a
    request that is already in the receive buffer, and a response the send buffer takes whole,
    cost one system call each. ``yield_if_not_waited`` then lets other tasks run when this
    connection has not waited for ``YIELD_INTERVAL_S``, so a client that keeps the socket busy
    cannot starve the rest (a trip through the scheduler after every request cost a producer
    sending a thousand requests a second more than its responses).
    """

    __slots__ = ("fd", "idle_scope", "idle_since", "receives", "receiving", "seen_receives", "waited", "yielded_at")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.waited = False
        self.yielded_at = 0.0
        # For IdleConnections: receives that waited, whether one is waiting now, and what the
        # idle check last saw; cancelling idle_scope ends the connection.
        self.receives = 0
        self.receiving = False
        self.seen_receives = -1
        self.idle_since = 0.0
        self.idle_scope = trio.CancelScope()

    async def receive_into(self, buffer: bytearray | memoryview) -> int:
        """Bytes received into ``buffer`` (0 at end of stream). They are there when this
        returns, with no await after the system call, so a buffer shared between connections
        is safe to use. Raises IdleConnection if the connection was closed as idle meanwhile."""
        try:
            return os.readv(self.fd, [buffer])
        except BlockingIOError:
            pass
        self.waited = self.receiving = True
        try:
            while True:
                await trio.lowlevel.wait_readable(self.fd)
                try:
                    n = os.readv(self.fd, [buffer])
                    break
                except BlockingIOError:
                    continue
        finally:
            self.receiving = False
            self.receives += 1
        if self.idle_scope.cancel_called:  # its bytes came as it was found idle: not handled
            raise IdleConnection
        return n

    async def send_all(self, data: bytes) -> None:
        with memoryview(data) as view:
            sent = 0
            while sent < len(view):
                try:
                    sent += os.write(self.fd, view[sent:])
                except BlockingIOError:
                    self.waited = True
                    await trio.lowlevel.wait_writable(self.fd)

    async def sendfile(self, file: SegmentFile, position: int, length: int) -> None:
        while length > 0:
            # Looked up again after every wait: a segment deleted meanwhile has closed its descriptor.
            fd = file.descriptor
            if fd is None:
                raise ProtocolError("a segment being sent was closed; closing the connection")
            try:
                n = os.sendfile(self.fd, fd, position, length)
            except BlockingIOError:
                self.waited = True
                await trio.lowlevel.wait_writable(self.fd)
                continue
            if n == 0:
                raise ProtocolError("a segment being sent ended early; closing the connection")
            position += n
            length -= n

    async def yield_if_not_waited(self, now: float) -> None:
        if self.waited:
            self.waited = False
            self.yielded_at = now
        elif now - self.yielded_at >= YIELD_INTERVAL_S:
            self.yielded_at = now
            await trio.lowlevel.checkpoint()


@dataclass(frozen=True, slots=True)
class _Later:
    """A request answered by ``AnswerLater``: what its answer is encoded with."""

    header: RequestHeader
    answer: AnswerLater


class _Answer:
    __slots__ = ("done", "response")

    def __init__(self, response: Response | None = None) -> None:
        self.response = response
        self.done = trio.Event()
        if response is not None:
            self.done.set()


class _Answers:
    """The connection's answers in request order. With none waiting an answer goes out at once
    (the usual case: no task, no queue); after an ``AnswerLater`` every answer queues behind it
    and one task sends them as each is ready. At most ``MAX_WAITING_ANSWERS`` wait, so a client
    pipelining without bound is held back (the next request is read once there is room).

    A failure while waiting or sending (a handler's bug, a closed socket) cancels the connection
    and is kept in ``failure`` for the connection to raise, as if it had happened inline."""

    __slots__ = ("conn", "failure", "nursery", "queue", "room", "sender")

    def __init__(self, conn: _Socket, nursery: trio.Nursery) -> None:
        self.conn = conn
        self.nursery = nursery
        self.queue: deque[_Answer] = deque()
        self.room = trio.Event()
        self.sender: trio.Event | None = None  # set when the sender task has an answer to look at
        self.failure: BaseException | None = None

    async def send(self, response: Response) -> None:
        if not self.queue:
            await _send(self.conn, response)
            return
        self._queue(_Answer(response))

    async def later(self, pending: _Later) -> None:
        answer = _Answer()
        self._queue(answer)
        self.nursery.start_soon(self._answer, pending, answer)
        while len(self.queue) >= MAX_WAITING_ANSWERS:
            self.room = trio.Event()
            await self.room.wait()

    def _queue(self, answer: _Answer) -> None:
        self.queue.append(answer)
        if len(self.queue) == 1:
            self.nursery.start_soon(self._send_queued)

    async def _answer(self, pending: _Later, answer: _Answer) -> None:
        header = pending.header
        try:
            result = await pending.answer.answer()
        except ProtocolError as exc:
            self.fail(exc)
            return
        except Exception:
            log.exception("handler for API %d v%d failed", header.api_key, header.api_version)
            self.fail(ProtocolError("internal error while handling the request"))
            return
        answer.response = encode_response_parts(header.api_key, header.api_version, header.correlation_id, result)
        answer.done.set()

    async def _send_queued(self) -> None:
        """Until the queue is empty: the oldest answer, once ready, out; then the next. The
        oldest stays queued while it is sent, so nothing else is sent past it meanwhile."""
        try:
            while self.queue:
                first = self.queue[0]
                await first.done.wait()
                assert first.response is not None
                await _send(self.conn, first.response)
                self.queue.popleft()
                self.room.set()
        except Exception as exc:  # a closed socket, mostly: the connection raises it
            self.fail(exc)

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        self.nursery.cancel_scope.cancel()


async def _send(conn: _Socket, response: Response) -> None:
    if isinstance(response, bytes):
        await conn.send_all(response)
        return
    files = [p for p in response if isinstance(p, FileSlices) and all(f.descriptor is not None for f, _, _ in p.ranges)]
    if sum(len(p) for p in files) < SENDFILE_MIN_BYTES:
        if len(response) == 1 and isinstance(response[0], bytes):
            await conn.send_all(response[0])
        else:
            await conn.send_all(b"".join(p if isinstance(p, bytes) else p.to_bytes() for p in response))
        return
    # The small parts between file ranges go out as they are. (MSG_MORE on them, to share packets
    # with the file data, held whole responses back for the 200 ms cork timeout.)
    for part in response:
        if isinstance(part, FileSlices) and any(part is f for f in files):
            for file, position, length in part.ranges:
                await conn.sendfile(file, position, length)
        else:
            await conn.send_all(part if isinstance(part, bytes) else part.to_bytes())


async def _handle_frame(
    broker: Broker, frame: bytearray, client_host: str, listener: str, memory: _Reservation | None = None
) -> Response | _Later | None:
    try:
        header, body = decode_request(frame)
    except UnsupportedRequestError as exc:
        return _unsupported(broker, exc.header)
    if memory is not None and header.api_key != PRODUCE_KEY:
        memory.release()
    handler = broker.handlers.get(header.api_key)
    if handler is None or not handler.supports(header.api_version):
        # Decodable but not served: answer UNSUPPORTED_VERSION where the response can carry it.
        answer = error_response(header.api_key, header.api_version, body, ErrorCode.UNSUPPORTED_VERSION)
        if answer is None or header.api_key == API_VERSIONS_KEY:
            return _unsupported(broker, header)
        return encode_response(header.api_key, header.api_version, header.correlation_id, answer)
    fault = broker.faults.take(header.api_key, header.client_id) if broker.faults.faults else None
    ctx = RequestContext(broker.handler_services, header, client_host, listener)
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
    if isinstance(result, AnswerLater):
        return _Later(header, result)
    parts = encode_response_parts(header.api_key, header.api_version, header.correlation_id, result)
    if len(parts) == 1 and isinstance(parts[0], bytes):
        return parts[0]  # most responses: sent without looking for file ranges
    return parts


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
