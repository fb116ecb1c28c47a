"""`kafkalike serve` as a user runs it: ephemeral, port 0 with a port file, seeded topics, clean exit."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from kafkalike.testing.wire_client import WireClient


def test_ephemeral_serve_reports_its_port_and_seeds_topics(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkalike",
            "serve",
            "--ephemeral",
            "--listen",
            "127.0.0.1:0",
            "--port-file",
            str(port_file),
            "--test-profile",
            "--seed-topics",
            "orders:3,audit",
            "--data-dir",
            str(tmp_path / "unused"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = ""
        for line in proc.stdout:
            if "kafkalike ready on" in line:
                ready = line
                break
        assert ready, "broker exited before it was ready"
        port = int(port_file.read_text())
        assert f"127.0.0.1:{port}" in ready
        with WireClient("127.0.0.1", port) as client:
            meta = client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
            assert {(t.name, len(t.partitions)) for t in meta.topics} == {("orders", 3), ("audit", 1)}
            configs = client.request(
                32,
                4,
                {
                    "resources": [
                        {
                            "resource_type": 4,
                            "resource_name": "1",
                            "configuration_keys": ["group.initial.rebalance.delay.ms"],
                        }
                    ]
                },
            )
            assert configs.results[0].configs[0].value == "0"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not (tmp_path / "unused").exists()  # ephemeral: nothing written
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_bad_arguments_exit_with_an_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafkalike", "serve", "--override", "novalue", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "not key=value" in result.stdout + result.stderr
