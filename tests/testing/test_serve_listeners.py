"""``kafkalike serve`` with two client listeners: ``--listen`` moves the first, the second is
bound too, the ready line names both, and each answers Metadata with its own address."""

from __future__ import annotations

import re
from pathlib import Path

from kafkalike.testing.process import BrokerProcess
from kafkalike.testing.wire_client import WireClient

LISTENERS = re.compile(r"listeners PLAINTEXT://127\.0\.0\.1:(\d+),INTERNAL://127\.0\.0\.1:(\d+)\)")


def test_serve_binds_every_listener_and_names_them_on_the_ready_line(tmp_path: Path) -> None:
    overrides = [
        "listeners=PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    ]
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        ready = next(line for line in broker.output if "kafkalike ready on" in line)
        found = LISTENERS.search(ready)
        assert found is not None, ready
        ports = {"PLAINTEXT": int(found.group(1)), "INTERNAL": int(found.group(2))}
        assert ports["PLAINTEXT"] == broker.port != 9092 and ports["INTERNAL"] not in (0, broker.port)
        for port in ports.values():
            with WireClient("127.0.0.1", port) as client:
                metadata = client.request(3, 12, {"topics": [], "allow_auto_topic_creation": False})
            assert [(b.host, b.port) for b in metadata.brokers] == [("127.0.0.1", port)]
        assert broker.stop() == 0
        assert broker.logged_errors() == []
