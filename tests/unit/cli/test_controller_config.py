"""A controller-only node's server.properties: what it serves on, and each refusal in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalike.cli.controller import ControllerConfigError, quorum_settings, read_identity
from kafkalike.server.broker import StartupError
from kafkalike.server.config import BrokerConfig

CONTROLLER = {
    "process.roles": "controller",
    "node.id": "2",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095",
    "listeners": "CONTROLLER://127.0.0.1:9094",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
    "log.dirs": "/tmp/x",
    "controller.quorum.election.timeout.ms": "1500",
}


def test_a_controller_serves_its_controller_listener_with_the_voters_and_timeouts() -> None:
    settings = quorum_settings(BrokerConfig(CONTROLLER))
    assert (settings.node_id, settings.listen, settings.listener_name) == (2, ("127.0.0.1", 9094), "CONTROLLER")
    assert sorted(settings.config.voter_ids) == [1, 2, 3]
    assert settings.config.election_timeout_ms == 1500
    assert next((e.host, e.port) for e in settings.config.endpoints) == ("127.0.0.1", 9093)
    assert settings.metadata_log_dir == Path("/tmp/x")
    meta = quorum_settings(BrokerConfig({**CONTROLLER, "metadata.log.dir": "/tmp/meta"}))
    assert meta.metadata_log_dir == Path("/tmp/meta")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"listener.security.protocol.map": "CONTROLLER:SSL"}, "uses security protocol SSL"),
        ({"listener.security.protocol.map": "OTHER:PLAINTEXT"}, "no entry in listener.security.protocol.map"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092"}, "must contain a listener named CONTROLLER"),
        ({"controller.listener.names": ""}, "controller.listener.names must contain at least one value"),
        ({"node.id": "4"}, "the node id 4 must be included in the set of voters"),
        ({"controller.quorum.voters": "1@nohost"}, "expected id@host:port"),
    ],
)
def test_a_controller_config_that_cannot_work_is_refused_in_one_line(change: dict[str, str], words: str) -> None:
    with pytest.raises(ControllerConfigError) as refused:
        quorum_settings(BrokerConfig({**CONTROLLER, **change}))
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_without_a_protocol_map_a_listener_named_plaintext_is_plaintext() -> None:
    config = {**CONTROLLER, "listeners": "PLAINTEXT://127.0.0.1:9094", "controller.listener.names": "PLAINTEXT"}
    del config["listener.security.protocol.map"]
    assert quorum_settings(BrokerConfig(config)).listener_name == "PLAINTEXT"


def test_the_identity_comes_from_a_formatted_directory_and_an_unformatted_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match=r"No readable meta.properties files found .*kafkalike storage format"):
        read_identity(tmp_path, 2)
    (tmp_path / "meta.properties").write_text(
        "version=1\ncluster.id=q1Sh-9_ISia_zwGINzRvyQ\nnode.id=2\ndirectory.id=wS3SW86wQQ6QlyPyHpLz0g\n"
    )
    cluster_id, directory_id = read_identity(tmp_path, 2)
    assert cluster_id == "q1Sh-9_ISia_zwGINzRvyQ" and directory_id.int != 0
    with pytest.raises(StartupError, match="Stored node id 2 doesn't match previous node id 3"):
        read_identity(tmp_path, 3)


BROKER_ONLY = {
    **CONTROLLER,
    "process.roles": "broker",
    "node.id": "4",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
}


def test_a_broker_only_node_is_an_observer_without_a_controller_listener() -> None:
    settings = quorum_settings(BrokerConfig(BROKER_ONLY))
    assert settings.node_id == 4 and settings.listen is None
    assert 4 not in settings.config.voter_ids


def test_a_broker_only_node_may_find_the_quorum_through_bootstrap_servers_alone() -> None:
    bootstrap = {"controller.quorum.voters": "", "controller.quorum.bootstrap.servers": "ctl:9093,[::1]:9094"}
    settings = quorum_settings(BrokerConfig({**BROKER_ONLY, **bootstrap}))
    assert settings.listen is None and not settings.config.voters
    assert settings.config.bootstrap_servers == (("ctl", 9093), ("::1", 9094))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"node.id": "2"}, "just the 'broker' role, the node id 2 must not be included in the set of voters"),
        ({"process.roles": "broker,controller"}, "the 'controller' role, the node id 4 must be included"),
        ({"process.roles": "broker,zookeeper"}, "Unknown process role 'zookeeper'"),
        ({"controller.listener.names": ""}, "controller.listener.names must contain at least one value"),
        (
            {"controller.quorum.voters": "", "controller.quorum.bootstrap.servers": ""},
            "controller.quorum.bootstrap.servers must contain the set of bootstrap controllers",
        ),
    ],
)
def test_a_broker_or_combined_config_that_cannot_work_is_refused_in_one_line(
    change: dict[str, str], words: str
) -> None:
    with pytest.raises(ControllerConfigError) as refused:
        quorum_settings(BrokerConfig({**BROKER_ONLY, **change}))
    assert words in str(refused.value) and "\n" not in str(refused.value)
