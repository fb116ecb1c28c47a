"""What a broker advertises per listener, from what it bound (Kafka's ListenerInfo
withWildcardHostnamesResolved / withEphemeralPortsCorrected), and which listeners it binds."""

from __future__ import annotations

import socket

from kafkalike.server.config import BrokerConfig
from kafkalike.server.listener import BoundListener, advertise, client_endpoints
from kafkalike.server.listener_config import BrokerListeners

MAP = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"


def _listeners(**props: str) -> BrokerListeners:
    return BrokerListeners.from_config(
        BrokerConfig({"listener.security.protocol.map": MAP, "controller.listener.names": "CONTROLLER", **props})
    )


def test_the_client_listeners_are_bound_the_first_where_asked_the_controllers_never() -> None:
    parsed = _listeners(listeners="CONTROLLER://127.0.0.1:9093,PLAINTEXT://:9092,INTERNAL://127.0.0.1:0")
    endpoints = client_endpoints(parsed, "127.0.0.1", 0)
    assert [(e.name, e.host, e.port) for e in endpoints] == [
        ("PLAINTEXT", "127.0.0.1", 0),
        ("INTERNAL", "127.0.0.1", 0),
    ]
    # A blank host read as 0.0.0.0 stays blank: advertised by the machine's name, not 0.0.0.0.
    assert client_endpoints(parsed, "0.0.0.0", 9092)[0].host == ""


async def test_port_0_is_the_bound_port_and_a_blank_host_the_machines_name() -> None:
    parsed = _listeners(listeners="PLAINTEXT://:0,INTERNAL://127.0.0.1:0")
    bound = [BoundListener("PLAINTEXT", "", 4001, ()), BoundListener("INTERNAL", "127.0.0.1", 4002, ())]
    found = await advertise(parsed, False, bound)
    assert [(e.name, e.host, e.port) for e in found] == [
        ("PLAINTEXT", socket.getfqdn(), 4001),
        ("INTERNAL", "127.0.0.1", 4002),
    ]


async def test_advertised_listeners_name_what_is_registered_in_their_order() -> None:
    parsed = _listeners(
        listeners="PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        **{"advertised.listeners": "INTERNAL://internal.example:0,PLAINTEXT://public.example:9092"},
    )
    bound = [BoundListener("PLAINTEXT", "127.0.0.1", 4001, ()), BoundListener("INTERNAL", "127.0.0.1", 4002, ())]
    found = await advertise(parsed, True, bound)
    assert [(e.name, e.host, e.port) for e in found] == [
        ("INTERNAL", "internal.example", 4002),
        ("PLAINTEXT", "public.example", 9092),
    ]
