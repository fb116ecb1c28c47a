"""``kafkalike serve --config`` reading a Kafka KRaft server.properties: which listener clients
are served on, and which configs describe more than the single node kafkalike runs."""

from __future__ import annotations

from kafkalike.cli.main import listen_address
from kafkalike.server.broker import client_listeners
from kafkalike.server.config import BrokerConfig
from kafkalike.server.node import is_single_node

KRAFT = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@127.0.0.1:9093",
}


def test_clients_are_served_on_the_first_listener_that_is_not_the_controllers() -> None:
    config = BrokerConfig(
        {
            **KRAFT,
            "listeners": "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
            "advertised.listeners": "CONTROLLER://ctl:9093,PLAINTEXT://clients.example:19092",
        }
    )
    assert listen_address(config) == ("127.0.0.1", 9092)
    assert client_listeners(config, "advertised.listeners") == ["PLAINTEXT://clients.example:19092"]
    # Without controller.listener.names every listener is a client one, as before.
    plain = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.1:9094"})
    assert client_listeners(plain) == ["PLAINTEXT://127.0.0.1:9092", "OTHER://127.0.0.1:9094"]


def test_a_combined_node_that_is_its_own_only_voter_is_the_single_node() -> None:
    assert is_single_node(BrokerConfig(KRAFT))
    assert is_single_node(BrokerConfig({}))  # kafkalike's defaults: node 1, both roles
    bootstrap = {**KRAFT, "controller.quorum.voters": "", "controller.quorum.bootstrap.servers": "127.0.0.1:9093"}
    assert is_single_node(BrokerConfig(bootstrap))


def test_other_voters_or_a_single_role_make_a_node_of_a_cluster() -> None:
    assert not is_single_node(BrokerConfig({**KRAFT, "controller.quorum.voters": "1@a:1,2@b:2"}))
    assert not is_single_node(BrokerConfig({**KRAFT, "process.roles": "controller"}))
    assert not is_single_node(BrokerConfig({**KRAFT, "process.roles": "broker"}))
    # Its own only voter, but serving a CONTROLLER listener that observers may follow.
    served = {**KRAFT, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}
    assert not is_single_node(BrokerConfig(served))
