"""``kafkalike cluster`` as a user runs it: one command starts the nodes, prints the bootstrap
servers once they are ready, and SIGTERM leaves no node behind; a node that cannot start is one
line on stderr, never a hang."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

READY = re.compile(r"^kafkalike cluster ready on (\S+) \((\d+) nodes?, cluster (\S+), data (.+)\)$")
START_TIMEOUT_S = 90


def cluster_command(data_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "kafkalike", "cluster", "--data-dir", str(data_dir), *args]


def processes_using(data_dir: Path) -> list[int]:
    """Pids of the live processes whose command line names ``data_dir`` (the nodes name their
    server.properties inside it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile
        if str(data_dir) in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def ready_line(proc: subprocess.Popen[str]) -> str:
    """The command's first stdout line, waited for at most START_TIMEOUT_S."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    return lines.get(timeout=START_TIMEOUT_S)


def test_one_command_serves_a_client_and_sigterm_stops_every_node(tmp_path: Path) -> None:
    data_dir = tmp_path / "cluster"
    with subprocess.Popen(
        cluster_command(data_dir, "--brokers", "1", "--base-port", "0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            serve_and_stop(proc, data_dir)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


def serve_and_stop(proc: subprocess.Popen[str], data_dir: Path) -> None:
    """Wait for the ready line, use the cluster, SIGTERM it: exit 0 and no node left."""
    match = READY.match(ready_line(proc).strip())
    assert match, "no ready line"
    bootstrap, count, _, shown_dir = match.groups()
    assert count == "1" and Path(shown_dir) == data_dir
    nodes = [pid for pid in processes_using(data_dir) if pid != proc.pid]
    assert len(nodes) == 1  # the one node, a child process

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    assert producer.send("through-the-command", b"hello").get(timeout=30).offset == 0  # auto-created
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=30000)
    consumer.assign([TopicPartition("through-the-command", 0)])
    consumer.seek_to_beginning()
    assert next(consumer).value == b"hello"
    consumer.close()

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    assert processes_using(data_dir) == []
    assert proc.stderr is not None and proc.stderr.read() == ""
    assert "kafkalike stopped; logs flushed" in (data_dir / "node-1" / "output.log").read_text()


def test_a_node_that_cannot_start_is_one_line_and_nothing_is_left(tmp_path: Path) -> None:
    data_dir = tmp_path / "cluster"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            cluster_command(data_dir, "--brokers", "1", "--base-port", str(port)),
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"kafkalike: node 1 did not start: Socket server failed to bind to 127.0.0.1:{port}: Address already in use."
    ]
    assert processes_using(data_dir) == []


def test_bad_arguments_exit_2_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        cluster_command(tmp_path, "--brokers", "0"), capture_output=True, text=True, timeout=START_TIMEOUT_S
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["kafkalike: bad --brokers 0: a cluster has 1 to 99 nodes"]
