"""Eligible leader replicas (KIP-966, on in a new cluster at metadata.version 4.4-IV2): the
cluster has a cluster-level min.insync.replicas from its first transaction, DescribeConfigs
reports it as the cluster's dynamic default, and a broker-level value is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from kafkalike.protocol.errors import ErrorCode
from tests.server.test_cluster_broker import DEADLINE_S, cluster_broker, new_topic

DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG = 3, 5


def describe(resource_type: int, name: str) -> dict[str, Any]:
    resource = {"resource_type": resource_type, "resource_name": name, "configuration_keys": ["min.insync.replicas"]}
    return {"resources": [resource], "include_synonyms": True, "include_documentation": False}


def alter(name: str, value: str | None, operation: int = 0) -> dict[str, Any]:
    entry = {"name": "min.insync.replicas", "config_operation": operation, "value": value}
    return {"resources": [{"resource_type": 4, "resource_name": name, "configs": [entry]}], "validate_only": False}


async def test_min_insync_replicas_is_the_clusters_under_elr(tmp_path: Path) -> None:
    with trio.fail_after(DEADLINE_S):
        async with cluster_broker(tmp_path) as running:
            client = running.client
            assert running.node.host.image.features.get("eligible.leader.replicas.version") == 1
            created = await client.request(19, 7, {"topics": [new_topic("t", 1)], "timeout_ms": 5000})
            assert created.topics[0].error_code == 0
            for resource_type, name in ((4, ""), (2, "t")):
                (result,) = (await client.request(32, 4, describe(resource_type, name))).results
                (config,) = result.configs
                assert (config.value, config.config_source) == ("1", DYNAMIC_DEFAULT_BROKER_CONFIG), config
                # a topic lists the cluster's value, then the declared default; the cluster-default
                # resource only its own
                assert [(s.name, s.value, s.source) for s in config.synonyms] == [
                    ("min.insync.replicas", "1", DYNAMIC_DEFAULT_BROKER_CONFIG),
                    *([("min.insync.replicas", "1", DEFAULT_CONFIG)] if name else []),
                ]

            refused = await client.request(44, 1, alter("1", "2"))
            assert [(r.error_code, r.error_message) for r in refused.responses] == [
                (ErrorCode.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
            ]
            removed = await client.request(44, 1, alter("", None, operation=1))
            assert [(r.error_code, r.error_message) for r in removed.responses] == [
                (ErrorCode.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
            ]
            changed = await client.request(44, 1, alter("", "2"))
            assert [r.error_code for r in changed.responses] == [0]
            (result,) = (await client.request(32, 4, describe(2, "t"))).results
            assert (result.configs[0].value, result.configs[0].config_source) == ("2", DYNAMIC_DEFAULT_BROKER_CONFIG)
