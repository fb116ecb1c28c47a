"""A broker's listeners parsed and checked as Kafka's KafkaConfig does (the same words; the
differential test compat_tests/differential/test_listener_configs.py holds them to Kafka's)."""

from __future__ import annotations

import pytest

from kafkalike.server.config import BrokerConfig
from kafkalike.server.listener_config import BrokerListeners, ListenerEndpoint, broker_listener_problem

COMBINED = {"process.roles": "broker,controller", "controller.listener.names": "CONTROLLER"}
LISTENERS = "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093"
MAP = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"


def test_the_controller_listener_is_never_advertised() -> None:
    config = BrokerConfig(
        {
            **COMBINED,
            "listeners": LISTENERS,
            "listener.security.protocol.map": MAP,
            "advertised.listeners": "PLAINTEXT://broker.example:19092,INTERNAL://10.0.0.5:9094,CONTROLLER://c:9093",
            "inter.broker.listener.name": "internal",
        }
    )
    parsed = BrokerListeners.from_config(config)
    assert [e.name for e in parsed.listeners] == ["PLAINTEXT", "INTERNAL", "CONTROLLER"]
    assert parsed.advertised == (
        ListenerEndpoint("PLAINTEXT", "broker.example", 19092, "PLAINTEXT"),
        ListenerEndpoint("INTERNAL", "10.0.0.5", 9094, "PLAINTEXT"),
    )
    assert parsed.inter_broker_name == "INTERNAL"
    assert parsed.advertised_named("INTERNAL") == parsed.advertised[1]
    assert broker_listener_problem(config) is None


def test_unset_advertised_listeners_are_the_listeners_and_the_map_gets_the_controller() -> None:
    config = BrokerConfig({**COMBINED, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"})
    parsed = BrokerListeners.from_config(config)
    assert [(e.name, e.port, e.security_protocol_id) for e in parsed.advertised] == [("PLAINTEXT", 9092, 0)]
    assert parsed.inter_broker_name == "PLAINTEXT"  # from security.inter.broker.protocol


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners cannot use the nonroutable meta-address"),
        ({"listeners": "CLIENT://127.0.0.1:9092"}, "No security protocol defined for listener CLIENT"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092", "inter.broker.listener.name": "NOPE"},
            "Listener with name NOPE defined in inter.broker.listener.name not found",
        ),
        (
            {"listeners": "INTERNAL://127.0.0.1:9094", "listener.security.protocol.map": MAP},
            "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
            "The valid options based on currently configured listeners are INTERNAL",
        ),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "Invalid security protocol `TLS`"),
        ({"listeners": "CONTROLLER://127.0.0.1:9093"}, "There must be at least one broker advertised listener."),
        ({"advertised.listeners": "nonsense"}, "Unable to parse nonsense to a broker endpoint"),
        (
            {"listeners": "PLAINTEXT://a:9092,INTERNAL://b:9092", "listener.security.protocol.map": MAP},
            "Each listener must have a different port",
        ),
    ],
)
def test_refused_at_start_up_in_kafkas_words(settings: dict[str, str], problem: str) -> None:
    config = BrokerConfig({**COMBINED, "listeners": "PLAINTEXT://127.0.0.1:9092", **settings})
    with pytest.raises(ValueError, match="^.*" + problem.replace("(", r"\(").replace(".", r"\.")):
        config.check()


def test_a_controller_only_node_is_not_held_to_the_broker_rules() -> None:
    config = BrokerConfig({"process.roles": "controller", "listeners": "CONTROLLER://0.0.0.0:9093"})
    assert broker_listener_problem(config) is None


def test_port_zero_may_repeat() -> None:
    config = BrokerConfig({**COMBINED, "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"})
    assert broker_listener_problem(config) is None
