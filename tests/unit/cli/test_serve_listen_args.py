"""``kafkalike serve --listen HOST:PORT`` and ``--advertised HOST:PORT`` set the address of the
first client listener and keep every other listener (a second client one, the controller's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalike.cli.main import build_parser, config_from_args


def _config(tmp_path: Path, properties: str, *args: str) -> dict[str, str | None]:
    path = tmp_path / "server.properties"
    path.write_text(properties)
    parsed = build_parser().parse_args(["serve", "--config", str(path), *args])
    config = config_from_args(parsed)
    return {name: config.get(name) for name in ("listeners", "advertised.listeners")}


def test_without_listeners_configured_listen_and_advertised_name_plaintext(tmp_path: Path) -> None:
    found = _config(tmp_path, "", "--listen", "127.0.0.1:0", "--advertised", "broker.example:9092")
    assert found == {"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "PLAINTEXT://broker.example:9092"}


@pytest.mark.parametrize(
    ("advertised", "expected"),
    [
        (None, "CLIENT://h:9000,INTERNAL://127.0.0.1:9101"),  # from listeners, the controller's left out
        ("CLIENT://old:1,INTERNAL://i:2", "CLIENT://h:9000,INTERNAL://i:2"),
    ],
)
def test_the_first_client_listener_moves_and_the_others_stay(
    tmp_path: Path, advertised: str | None, expected: str
) -> None:
    properties = (
        "listeners=CONTROLLER://127.0.0.1:9093,CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9101\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
    )
    if advertised is not None:
        properties += f"advertised.listeners={advertised}\n"
    found = _config(tmp_path, properties, "--listen", "127.0.0.1:0", "--advertised", "h:9000")
    assert found["listeners"] == "CONTROLLER://127.0.0.1:9093,CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:9101"
    assert found["advertised.listeners"] == expected
