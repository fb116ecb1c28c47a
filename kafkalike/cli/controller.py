"""What ``kafkalike serve --config F`` reads of a node of a cluster (a controller-only node among
them), with Kafka's names: ``node.id``; ``process.roles``; ``controller.quorum.voters`` (a node
with the controller role must be one of them, a broker-only node must not); ``listeners`` with the
listener ``controller.listener.names`` names first, whose ``listener.security.protocol.map`` entry
must be PLAINTEXT (the only protocol served); ``metadata.log.dir`` or the first of ``log.dirs``,
holding ``meta.properties`` (cluster id, node id, directory id) and ``__cluster_metadata-0``; the
``controller.quorum.*`` timeouts. Anything wrong is one line (:class:`ControllerConfigError`
before start, StartupError while starting). The node itself is :class:`kafkalike.server.node.Node`.
"""

from __future__ import annotations

from kafkalike.raft import config as quorum_config
from kafkalike.server.node import (
    NodeConfigError,
    controller_listener,
    controller_listener_names,
    quorum_settings,
    read_identity,
    roles_of,
    security_protocols,
)

ControllerConfigError = NodeConfigError
# The quorum settings a node of a cluster reads (declared in kafkalike.configs.quorum, where a
# single node does not act on them).
READ_BY_CONTROLLER = frozenset(
    {
        quorum_config.ELECTION_TIMEOUT_MS,
        quorum_config.FETCH_TIMEOUT_MS,
        quorum_config.ELECTION_BACKOFF_MAX_MS,
        quorum_config.REQUEST_TIMEOUT_MS,
        quorum_config.RETRY_BACKOFF_MS,
        "metadata.log.dir",
        "listener.security.protocol.map",
    }
)

__all__ = [
    "READ_BY_CONTROLLER",
    "ControllerConfigError",
    "controller_listener",
    "controller_listener_names",
    "quorum_settings",
    "read_identity",
    "roles_of",
    "security_protocols",
]
