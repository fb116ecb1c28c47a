"""Minimal Kafka protocol clients that expose raw responses: one blocking, one for trio.

They send any API at any version with this project's codec and return the decoded response,
which is what protocol-level tests (and comparisons against another broker) need.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Mapping
from typing import Any

import trio

from kafkalike.protocol.api import RequestHeader, decode_response, encode_request
from kafkalike.protocol.codec import Message
from kafkalike.protocol.framing import FrameSplitter


class WireClient:
    """A blocking client over one TCP connection."""

    def __init__(self, host: str, port: int, client_id: str = "kafkalike-test", timeout_s: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.client_id = client_id
        self._ids = itertools.count(1)
        self._splitter = FrameSplitter()

    def send(self, api_key: int, version: int, body: Mapping[str, Any]) -> int:
        correlation_id = next(self._ids)
        self.sock.sendall(encode_request(RequestHeader(api_key, version, correlation_id, self.client_id), body))
        return correlation_id

    def send_raw(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def receive_frame(self) -> bytes | None:
        while True:
            frame = self._splitter.next_frame()
            if frame is not None:
                return frame
            data = self.sock.recv(1 << 20)
            if not data:
                return None
            self._splitter.feed(data)

    def request(self, api_key: int, version: int, body: Mapping[str, Any]) -> Message:
        correlation_id = self.send(api_key, version, body)
        frame = self.receive_frame()
        if frame is None:
            raise ConnectionError("connection closed by the broker")
        got, response = decode_response(api_key, version, frame)
        assert got == correlation_id, (got, correlation_id)
        return response

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncWireClient:
    """The same over a trio stream."""

    def __init__(self, stream: trio.abc.Stream, client_id: str = "kafkalike-test") -> None:
        self.stream = stream
        self.client_id = client_id
        self._ids = itertools.count(1)
        self._splitter = FrameSplitter()

    @classmethod
    async def connect(cls, host: str, port: int) -> AsyncWireClient:
        return cls(await trio.open_tcp_stream(host, port))

    async def send(self, api_key: int, version: int, body: Mapping[str, Any]) -> int:
        correlation_id = next(self._ids)
        await self.stream.send_all(
            encode_request(RequestHeader(api_key, version, correlation_id, self.client_id), body)
        )
        return correlation_id

    async def receive_frame(self) -> bytes | None:
        while True:
            frame = self._splitter.next_frame()
            if frame is not None:
                return frame
            data = await self.stream.receive_some(1 << 20)
            if not data:
                return None
            self._splitter.feed(data)

    async def receive(self, api_key: int, version: int) -> tuple[int, Message]:
        frame = await self.receive_frame()
        if frame is None:
            raise ConnectionError("connection closed by the broker")
        return decode_response(api_key, version, frame)

    async def request(self, api_key: int, version: int, body: Mapping[str, Any]) -> Message:
        correlation_id = await self.send(api_key, version, body)
        got, response = await self.receive(api_key, version)
        assert got == correlation_id, (got, correlation_id)
        return response

    async def aclose(self) -> None:
        await self.stream.aclose()
