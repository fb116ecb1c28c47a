"""What every compatibility test gets: garbage collected after it, and kafka-python's failed connects closed.

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


_sock_connect = KafkaNetSocket.sock_connect


async def _sock_connect_closing_on_failure(self: Any, net: Any, sock: socket.socket, *args: Any, **kw: Any) -> Any:
    # kafka-python 3.0 gives up on a connect that failed or timed out without closing its socket
    # (kafka/net/inet.py): a socket the kernel may connect later, left for the garbage collector.
    try:
        return await _sock_connect(self, net, sock, *args, **kw)
    except BaseException:
        sock.close()
        raise


KafkaNetSocket.sock_connect = _sock_connect_closing_on_failure  # type: ignore[method-assign]
