"""``kafkalike serve --config F`` for a node with ``process.roles=controller``: a member of the
metadata quorum, serving its CONTROLLER listener, on a data directory ``kafkalike storage format``
(or Kafka's kafka-storage) formatted.

What it reads, with Kafka's names: ``node.id``; ``controller.quorum.voters`` (it must be one of
them); ``listeners`` with the listener ``controller.listener.names`` names first, whose
``listener.security.protocol.map`` entry must be PLAINTEXT (the only protocol served);
``metadata.log.dir`` or the first of ``log.dirs``, holding ``meta.properties`` (cluster id, node
id, directory id) and ``__cluster_metadata-0``; the ``controller.quorum.*`` timeouts. Anything
wrong is one line (:class:`ControllerConfigError` before start, StartupError while starting).
"""

from __future__ import annotations

import logging
import signal
import uuid
from pathlib import Path

import trio

from kafkalike.log.dir_lock import LogDirError, lock_log_dirs
from kafkalike.raft import config as quorum_config
from kafkalike.raft.config import QuorumConfigError
from kafkalike.raft.quorum_state_file import QuorumStateFileError, parse_kafka_uuid
from kafkalike.server.broker import StartupError
from kafkalike.server.config import BrokerConfig, parse_listener, parse_properties
from kafkalike.server.quorum.driver import QuorumDriver
from kafkalike.server.quorum.server import QuorumServer, QuorumSettings

log = logging.getLogger("kafkalike")
META_PROPERTIES = "meta.properties"
# The quorum settings a controller node reads (declared ahead in kafkalike.configs.quorum, where
# the broker does not act on them yet).
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


class ControllerConfigError(ValueError):
    """A controller node's configuration that cannot work, in one line."""


def roles_of(config: BrokerConfig) -> list[str]:
    return sorted({r.strip() for r in (config.get("process.roles") or "").split(",") if r.strip()})


def controller_listener_names(config: BrokerConfig) -> list[str]:
    return [n.strip().upper() for n in (config.get("controller.listener.names") or "").split(",") if n.strip()]


def security_protocols(config: BrokerConfig) -> dict[str, str]:
    """``listener.security.protocol.map`` (NAME:PROTOCOL,...); empty when unset."""
    mapping = {}
    for entry in (config.get("listener.security.protocol.map") or "").split(","):
        name, sep, protocol = entry.strip().partition(":")
        if sep:
            mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def controller_listener(config: BrokerConfig) -> tuple[str, str, int]:
    """(name, host, port) of the listener the controller serves: the first of
    ``controller.listener.names`` that ``listeners`` has."""
    names = controller_listener_names(config)
    if not names:
        raise ControllerConfigError("controller.listener.names must contain at least one value when running KRaft")
    entries = {}
    for entry in (e.strip() for e in (config.get("listeners") or "").split(",") if e.strip()):
        name, sep, _ = entry.partition("://")
        if sep:
            entries[name.strip().upper()] = entry
    for name in names:
        if name in entries:
            host, port = parse_listener(entries[name])
            protocols = security_protocols(config)
            protocol = protocols.get(name, name if not protocols else "")
            if protocol != "PLAINTEXT":
                shown = protocol or "no entry in listener.security.protocol.map"
                raise ControllerConfigError(
                    f"listener {name} uses security protocol {shown}: only PLAINTEXT is available on a controller"
                )
            return name, host, port
    raise ControllerConfigError(
        f"The listeners config must contain a listener named {names[0]} (from controller.listener.names) "
        "when running the KRaft controller role"
    )


def quorum_settings(config: BrokerConfig) -> QuorumSettings:
    """Everything but the directory's identity, checked (ControllerConfigError)."""
    props = {k: v for k, v in config.explicit.items()}
    try:
        qconfig = quorum_config.from_properties(props)
    except QuorumConfigError as exc:
        raise ControllerConfigError(str(exc)) from exc
    node_id = config.node_id
    if node_id not in qconfig.voter_ids:
        voters = props.get(quorum_config.QUORUM_VOTERS, "")
        raise ControllerConfigError(
            f"If process.roles contains just the 'controller' role, the node id {node_id} must be included in "
            f"the set of voters {quorum_config.QUORUM_VOTERS}={voters}"
        )
    name, host, port = controller_listener(config)
    metadata_dir = Path(config.get("metadata.log.dir") or config.log_dirs[0])
    return QuorumSettings(node_id, "", qconfig, (host, port), listener_name=name, metadata_log_dir=metadata_dir)


def read_identity(directory: Path, node_id: int) -> tuple[str, uuid.UUID]:
    """(cluster id, directory id) from a formatted directory's meta.properties (StartupError)."""
    path = directory / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StartupError(
            f"No readable meta.properties files found in {directory}: format it first with "
            "`kafkalike storage format -t CLUSTER_ID -c server.properties`"
        ) from None
    except OSError as exc:
        raise StartupError(f"Unable to read {path}: {exc.strerror}") from exc
    values = parse_properties(text)
    cluster_id = values.get("cluster.id")
    if not cluster_id:
        raise StartupError(f"cluster.id was not specified in {path}")
    stored_node = values.get("node.id")
    if stored_node is None or stored_node.strip() != str(node_id):
        raise StartupError(f"Stored node id {stored_node} doesn't match previous node id {node_id} in {path}")
    directory_text = values.get("directory.id")
    try:
        directory_id = parse_kafka_uuid(directory_text) if directory_text else uuid.UUID(int=0)
    except ValueError:
        raise StartupError(f"Invalid directory.id {directory_text!r} in {path}") from None
    return cluster_id, directory_id


async def run_controller(config: BrokerConfig, *, port_file: Path | None = None) -> None:
    """Serve the quorum until SIGTERM or SIGINT (a leader resigns first). StartupError for what stops the start."""
    settings = quorum_settings(config)
    assert settings.metadata_log_dir is not None
    directory = settings.metadata_log_dir
    settings.cluster_id, settings.directory_id = await trio.to_thread.run_sync(
        read_identity, directory, settings.node_id
    )
    try:
        locks = await trio.to_thread.run_sync(lock_log_dirs, [directory])
    except LogDirError as exc:
        raise StartupError(str(exc)) from exc
    server = QuorumServer(settings)
    try:
        try:
            driver = await server.open()
        except (OSError, QuorumStateFileError) as exc:
            raise StartupError(f"Failed to load the metadata log in {directory}: {exc}") from exc
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                try:
                    host, port = await nursery.start(server.run)
                except OSError as exc:
                    raise StartupError(
                        f"Socket server failed to bind to {settings.listen[0]}:{settings.listen[1]}: "
                        f"{exc.strerror or exc}."
                    ) from exc
                if port_file is not None:
                    port_file.write_text(f"{port}\n")
                log.info(
                    "kafkalike ready on %s:%d (controller %d of voters %s, cluster %s, data %s)",
                    host,
                    port,
                    settings.node_id,
                    ",".join(str(v) for v in sorted(settings.config.voter_ids)),
                    settings.cluster_id,
                    directory,
                )
                async for signum in signals:
                    log.info("received %s, shutting down", signal.Signals(signum).name)
                    await _resign(driver)
                    nursery.cancel_scope.cancel()
                    break
    finally:
        await server.aclose()
        for lock in locks:
            lock.release()
        log.info("kafkalike controller stopped")


RESIGN_WAIT_S = 1.0


async def _resign(driver: QuorumDriver) -> None:
    """A leader steps down first (EndQuorumEpoch to the voters), so the next election starts at
    once rather than after the followers' fetch timeout; bounded by RESIGN_WAIT_S."""
    if driver.is_leader and not await driver.resign_gracefully(RESIGN_WAIT_S):
        log.info("not every voter acknowledged the resignation within %.0f s; stopping anyway", RESIGN_WAIT_S)
