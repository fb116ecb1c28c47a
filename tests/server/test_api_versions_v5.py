"""ApiVersions v5 (KIP-1242): a client may name the cluster and node it means to reach; naming
another one is REBOOTSTRAP_REQUIRED, naming only one of the two INVALID_REQUEST, as Kafka 4.4
answers (compat_tests/differential/test_api_versions.py compares the same cases with it)."""

from __future__ import annotations

from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker

BODY = {"client_software_name": "t", "client_software_version": "1"}


async def _ask(client: AsyncWireClient, cluster_id: str | None, node_id: int) -> tuple[int, int]:
    response = await client.request(18, 5, {**BODY, "cluster_id": cluster_id, "node_id": node_id})
    return response.error_code, len(response.api_keys)


async def test_the_named_cluster_and_node_must_be_this_one(running: RunningBroker) -> None:
    client = await running.client()
    served = len(running.broker.api_versions())
    own_cluster, own_node = running.broker.cluster_id, running.broker.node_id
    assert await _ask(client, None, -1) == (0, served)
    assert await _ask(client, own_cluster, own_node) == (0, served)
    assert await _ask(client, "another-cluster", own_node) == (ErrorCode.REBOOTSTRAP_REQUIRED, 0)
    assert await _ask(client, own_cluster, own_node + 1) == (ErrorCode.REBOOTSTRAP_REQUIRED, 0)
    assert await _ask(client, own_cluster, -1) == (ErrorCode.INVALID_REQUEST, 0)
    assert await _ask(client, None, own_node) == (ErrorCode.INVALID_REQUEST, 0)
    # Before v5 nothing is checked.
    assert (await client.request(18, 4, BODY)).error_code == 0
