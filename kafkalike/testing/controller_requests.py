"""Request bodies a broker sends its controller, for tests of the controller's APIs."""

from __future__ import annotations

import uuid
from typing import Any

from kafkalike.controller.features import LEVELS_BY_NAME, METADATA_VERSION_FEATURE

# What this release's broker supports: every metadata.version, and the other features' levels.
BROKER_FEATURES = [
    {
        "name": METADATA_VERSION_FEATURE,
        "min_supported_version": min(LEVELS_BY_NAME.values()),
        "max_supported_version": max(LEVELS_BY_NAME.values()),
    },
    {"name": "group.version", "min_supported_version": 0, "max_supported_version": 1},
    {"name": "transaction.version", "min_supported_version": 0, "max_supported_version": 2},
    {"name": "eligible.leader.replicas.version", "min_supported_version": 0, "max_supported_version": 1},
]


def registration(
    broker_id: int,
    cluster_id: str,
    *,
    port: int = 9092,
    incarnation: uuid.UUID | None = None,
    log_dir: uuid.UUID | None = None,
    rack: str | None = None,
    previous_broker_epoch: int = -1,
) -> dict[str, Any]:
    """A BrokerRegistration (v4) body, as a broker with one log directory sends it."""
    return {
        "broker_id": broker_id,
        "cluster_id": cluster_id,
        "incarnation_id": incarnation or uuid.UUID(int=0x1000 + broker_id),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": port, "security_protocol": 0}],
        "features": BROKER_FEATURES,
        "rack": rack,
        "is_migrating_zk_broker": False,
        "log_dirs": [log_dir or uuid.UUID(int=(broker_id << 64) + 0x5000)],
        "previous_broker_epoch": previous_broker_epoch,
    }


def heartbeat(
    broker_id: int, broker_epoch: int, offset: int, *, want_fence: bool = False, want_shut_down: bool = False
) -> dict[str, Any]:
    """A BrokerHeartbeat (v1) body."""
    return {
        "broker_id": broker_id,
        "broker_epoch": broker_epoch,
        "current_metadata_offset": offset,
        "want_fence": want_fence,
        "want_shut_down": want_shut_down,
        "offline_log_dirs": [],
    }
