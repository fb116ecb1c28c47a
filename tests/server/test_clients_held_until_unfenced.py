"""A cluster node's broker binds its client listener at start-up but answers nothing until it is
unfenced, as Kafka's broker starts processing requests only then; a single node serves at once."""

from __future__ import annotations

from pathlib import Path

import trio

from kafkalike.server.broker import Broker
from kafkalike.server.controller_channel import ControllerChannel
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import make_config, serving
from tests.server.test_cluster_broker import NoLeader

API_VERSIONS = 18
HELD_S = 0.5  # long enough for an answer that should not come; an answer ends it at once
BOUND_S = 10


async def test_requests_wait_until_clients_are_enabled(tmp_path: Path) -> None:
    broker = Broker(make_config(tmp_path), ephemeral=True)
    # A cluster node's broker whose controller is not reached yet (not unfenced).
    broker.attach_controller(ControllerChannel(1, NoLeader(), {}), lambda: None)
    broker.open()
    broker.hold_clients = True
    try:
        with trio.fail_after(BOUND_S):
            async with trio.open_nursery() as nursery:
                host, port = await nursery.start(broker.serve, "127.0.0.1", 0)
                client = await AsyncWireClient.connect(host, port)  # the port is bound: the connection is made
                await client.send(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
                with trio.move_on_after(HELD_S) as held:
                    await client.receive_frame()
                assert held.cancelled_caught  # nothing answered while held
                broker.clients_enabled.set()
                _, answer = await client.receive(API_VERSIONS, 3)
                assert answer.error_code == 0
                await client.aclose()
                nursery.cancel_scope.cancel()
    finally:
        broker.close()


async def test_the_single_node_serves_at_once(tmp_path: Path) -> None:
    with trio.fail_after(BOUND_S):
        async with serving(tmp_path, ephemeral=True) as running:
            client = await running.client()
            body = {"client_software_name": "t", "client_software_version": "1"}
            assert (await client.request(API_VERSIONS, 3, body)).error_code == 0
