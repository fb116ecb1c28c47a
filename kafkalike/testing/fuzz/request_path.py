"""The request path fuzz target: frames sent to a running in-process broker over loopback."""

from __future__ import annotations

import socket
import struct
import time

from kafkalike.protocol.api import RequestHeader, encode_request
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.testing.broker import InProcessBroker
from kafkalike.testing.fuzz.targets import Finding, reference_frames

SENTINEL_CORRELATION_ID = 0x5E471E1
API_VERSIONS_V0 = encode_request(RequestHeader(18, 0, SENTINEL_CORRELATION_ID, "fuzz-sentinel"), {})
FETCH_KEY, JOIN_GROUP_KEY, SYNC_GROUP_KEY = 1, 11, 14
# Requests that may hold their answer by design: Fetch up to max_wait_ms, group joins and syncs
# until the rest of the group arrives (up to a rebalance or session timeout).
WAITING_APIS = frozenset({FETCH_KEY, JOIN_GROUP_KEY, SYNC_GROUP_KEY})
FUZZ_TOPIC = "t"  # one of the names the seed requests use


class RequestPath:
    """One in-process broker for the whole run, and one connection to it, reopened when closed.

    Each input is sent as one frame (the size prefix added here), followed by an ApiVersions
    request: the broker answers in order, so its answer arriving means the fuzzed frame was
    handled (answered, or not when it should not be, as Produce with acks=0)."""

    def __init__(self, bound_s: float = 5.0, waiting_s: float = 0.2) -> None:
        self.bound_s = bound_s
        self.waiting_s = waiting_s
        self.broker: InProcessBroker | None = None
        self.sock: socket.socket | None = None
        self.inputs = 0

    def start(self) -> InProcessBroker:
        """The broker, started anew if an earlier input stopped it (that input was the finding)."""
        if self.broker is not None and not self.broker.running:
            self.stop()
        if self.broker is None:
            self.broker = InProcessBroker(seed_topics={FUZZ_TOPIC: 2}).start()
        return self.broker

    def stop(self) -> None:
        self._disconnect()
        if self.broker is not None:
            self.broker.stop()
            self.broker = None

    def _disconnect(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def check(self, data: bytes) -> None:
        broker = self.start()
        errors_before = len(broker.logged_errors)
        self.inputs += 1
        if self.sock is None:
            self.sock = socket.create_connection((broker.host, broker.port), timeout=self.bound_s)
        waits = _api_key(data) in WAITING_APIS
        # A request that may wait is given up on sooner: its wait is no finding, only lost time.
        deadline = time.monotonic() + (self.waiting_s if waits else self.bound_s)
        try:
            self.sock.sendall(struct.pack(">i", len(data)) + data + API_VERSIONS_V0)
            answers = self._read_answers(deadline)
        except TimeoutError:
            self._disconnect()
            if not waits:
                raise Finding(f"no answer and no close within {self.bound_s} s") from None
            answers = None
        except OSError:  # reset by the broker: a close
            self._disconnect()
            answers = None
        if answers is None:
            self._disconnect()
        elif len(answers) == 2 and answers[0][:4] != data[4:8]:
            raise Finding(f"answer carries correlation id {answers[0][:4].hex()}, the request {data[4:8].hex()}")
        if data[4:8] == struct.pack(">i", SENTINEL_CORRELATION_ID):
            self._disconnect()  # its answer may have been taken for the sentinel's
        _check_broker(broker, errors_before)

    def _read_answers(self, deadline: float) -> list[bytes] | None:
        """The answers up to the sentinel's, or None when the broker closed the connection first."""
        assert self.sock is not None
        splitter = FrameSplitter()
        answers: list[bytes] = []
        while True:
            while (frame := splitter.next_frame()) is not None:
                answers.append(frame)
                if frame[:4] == struct.pack(">i", SENTINEL_CORRELATION_ID) and len(frame) > 6:
                    if len(answers) > 2:
                        raise Finding(f"{len(answers)} answers to 2 requests")
                    return answers
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
            data = self.sock.recv(1 << 16)
            if not data:
                return None
            splitter.feed(data)

    def check_stream(self, data: bytes) -> None:
        """Byte 0 sets the size of the pieces the rest is sent in, on a connection of its own,
        which then ends: the broker answers at most the whole frames in it, then closes."""
        broker = self.start()
        errors_before = len(broker.logged_errors)
        stream, step = data[1:], 1 + (data[0] if data else 0)
        frames, _ = reference_frames(stream, broker.config.get_int("socket.request.max.bytes"))
        waits = any(_api_key(f) in WAITING_APIS for f in frames)
        deadline = time.monotonic() + (self.waiting_s if waits else self.bound_s)
        answers = 0
        with socket.create_connection((broker.host, broker.port), timeout=self.bound_s) as sock:
            try:
                for start in range(0, len(stream), step):
                    sock.sendall(stream[start : start + step])
                sock.shutdown(socket.SHUT_WR)
                answers = _count_until_closed(sock, deadline)
            except TimeoutError:
                if not waits:
                    raise Finding(f"the connection was not closed within {self.bound_s} s of its end") from None
            except OSError:
                pass  # reset by the broker: a close
        if answers > len(frames):
            raise Finding(f"{answers} answers to {len(frames)} frames")
        _check_broker(broker, errors_before)


def _check_broker(broker: InProcessBroker, errors_before: int) -> None:
    new_errors = broker.logged_errors[errors_before:]
    if new_errors:
        raise Finding("the broker logged:\n" + "\n".join(new_errors))
    if not broker.running:
        raise Finding("the broker stopped")


def _count_until_closed(sock: socket.socket, deadline: float) -> int:
    splitter = FrameSplitter()
    answers = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(remaining)
        data = sock.recv(1 << 16)
        if not data:
            return answers
        splitter.feed(data)
        while splitter.next_frame() is not None:
            answers += 1


def _api_key(frame: bytes) -> int | None:
    return struct.unpack_from(">h", frame)[0] if len(frame) >= 2 else None


_REQUEST_PATH = RequestPath()


def check_request_path(data: bytes) -> None:
    _REQUEST_PATH.check(data)


def check_request_stream(data: bytes) -> None:
    _REQUEST_PATH.check_stream(data)


def stop_request_path() -> None:
    """Stop the broker ``check_request_path`` or ``check_request_stream`` started, if one did."""
    _REQUEST_PATH.stop()
