"""A broker process out of file descriptors at accept (EMFILE) keeps serving the connections it
has, says so once, and accepts again as soon as a descriptor is free. The limit is lowered on
the running broker with prlimit(2), the way ``ulimit -n`` would have set it at start."""

from __future__ import annotations

import itertools
import os
import resource
import socket
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import pytest

from kafkalike.protocol.api import RequestHeader, encode_request
from kafkalike.testing.process import BrokerProcess
from kafkalike.testing.wire_client import WireClient

API_VERSIONS_BODY = {"client_software_name": "t", "client_software_version": "1"}
OUT_OF_DESCRIPTORS = "cannot accept connections: Too many open files"
ACCEPTING_AGAIN = "accepting connections again"

pytestmark = pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="prlimit(2) is Linux-only")


def answers(client: WireClient) -> bool:
    return bool(client.request(18, 3, API_VERSIONS_BODY).error_code == 0)


def wait_for(condition: Callable[[], bool], deadline_s: float = 30.0) -> None:
    """Until ``condition()`` holds, checked as the broker's output arrives (bounded)."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_accept_survives_running_out_of_descriptors(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", ["auto.create.topics.enable=false"]) as broker, ExitStack() as sockets:
        assert broker.proc is not None
        pid = broker.proc.pid
        first = sockets.enter_context(WireClient(broker.host, broker.port, timeout_s=10))
        assert answers(first)
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        # Room for exactly one more connection.
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_descriptors(pid) + 1, hard))
        second = sockets.enter_context(WireClient(broker.host, broker.port, timeout_s=10))
        assert answers(second)
        # These two complete in the kernel's backlog; the broker cannot accept them.
        waiting = [
            sockets.enter_context(socket.create_connection((broker.host, broker.port), timeout=10)) for _ in range(2)
        ]
        for sock in waiting:
            sock.sendall(api_versions_frame())
        wait_for(lambda: any(OUT_OF_DESCRIPTORS in line for line in broker.output))
        # The connections it has are served as before, and it says so once per episode (a
        # descriptor the broker frees itself, e.g. after a checkpoint, may end one early).
        for _ in range(20):
            assert answers(first) and answers(second)
        assert says_once_per_episode(broker.output)
        assert broker.running
        # A connection closing frees a descriptor: the first waiting connection gets in.
        second.close()
        assert answered(waiting[0])
        wait_for(lambda: any(ACCEPTING_AGAIN in line for line in broker.output))
        # With the limit raised again the other one is served too.
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (hard, hard))
        assert answered(waiting[1])
        assert answers(first)
    # Out of descriptors, a background checkpoint may fail too: a storage error, logged and
    # retried (tests/server/test_disk_errors.py); anything else logged as an error is a failure.
    assert [line for line in broker.logged_errors() if not is_descriptor_storage_error(line)] == []


def is_descriptor_storage_error(line: str) -> bool:
    return "kafkalike.log.storage: storage error:" in line and "EMFILE" in line


def says_once_per_episode(output: list[str]) -> bool:
    """Each out-of-descriptors warning is followed by "accepting connections again" before the next."""
    events = [OUT_OF_DESCRIPTORS in line for line in output if OUT_OF_DESCRIPTORS in line or ACCEPTING_AGAIN in line]
    return bool(events) and events[0] and all(not (a and b) for a, b in itertools.pairwise(events))


def answered(sock: socket.socket) -> bool:
    """Whether the request sent on ``sock`` gets an answer within the socket's timeout."""
    try:
        return len(sock.recv(4)) == 4
    except TimeoutError:
        return False


def api_versions_frame() -> bytes:
    return encode_request(RequestHeader(18, 3, 1, "t"), API_VERSIONS_BODY)


def test_only_descriptor_storage_errors_are_let_through() -> None:
    ok = "ERROR kafkalike.log.storage: storage error: checkpoint write in /d failed: EMFILE (Too many open files)"
    assert is_descriptor_storage_error(ok)
    assert not is_descriptor_storage_error("ERROR kafkalike.log.storage: storage error: append failed: EIO")
    assert not is_descriptor_storage_error("ERROR kafkalike.connection: handler for API 18 v3 failed (EMFILE)")


def test_the_once_per_episode_check_catches_a_repeated_warning() -> None:
    warning, again = f"WARNING {OUT_OF_DESCRIPTORS}", f"INFO {ACCEPTING_AGAIN}"
    assert says_once_per_episode([warning, "other", again, warning])
    assert not says_once_per_episode([warning, "other", warning])
    assert not says_once_per_episode([])
