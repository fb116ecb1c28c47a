"""What every compatibility test gets: garbage collected after it, and kafka-python's leaked sockets closed.

A socket a client library left open is reported by Python only when it is collected; without the
collection after each test, the report (an error under ``filterwarnings = error``) falls into whichever
later test happens to trigger a collection, a test that did nothing wrong.
"""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.net.inet import KafkaNetSocket


@pytest.fixture(autouse=True)
def _collect_what_the_test_left() -> Iterator[None]:
    yield
    gc.collect()


class ClientSocket(socket.socket):
    """A kafka-python socket, closed without a warning when collected open.

    kafka-python 3.0 leaves sockets to the garbage collector: a connect it gives up on
    (kafka/net/inet.py), and a transport closed with data still to send whose event loop closes
    before it is flushed (kafka/net/transport.py) — a consumer closed during a metadata refresh.
    Those are the client's leaks, not the broker's: the broker's own sockets keep the warning."""

    def __del__(self) -> None:
        self.close()


def _client_socket(
    self: Any, family: int = socket.AF_UNSPEC, sock_type: int = socket.SOCK_STREAM, proto: int = socket.IPPROTO_TCP
) -> socket.socket:
    return ClientSocket(family, sock_type, proto)


KafkaNetSocket.socket = _client_socket  # type: ignore[method-assign]
