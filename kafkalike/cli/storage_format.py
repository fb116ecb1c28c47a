"""``kafkalike storage format`` and ``random-uuid``, with the meaning of Kafka's ``kafka-storage``.

Formatting a node writes, in each of its log directories (``log.dirs``, and ``metadata.log.dir``)
that has no ``meta.properties`` yet: ``meta.properties`` (version 1, the node id, the cluster id
and a new directory id) and ``bootstrap.checkpoint``, the snapshot of the bootstrap metadata
records (a FeatureLevel record for ``metadata.version`` and for every other feature whose
release default is above 0). With a dynamic quorum (``--standalone`` or
``--initial-controllers``), the metadata directory also gets the first snapshot of
``__cluster_metadata-0``: kraft.version 1 and the initial voter set.

Refusals are Kafka's, in its words, on one line on stderr with exit status 1 (kafka-storage prints
some of them as a Java stack trace; the first line of that trace is the message here).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkalike.controller.features import (
    BOOTSTRAP_CHECKPOINT,
    FORMAT_LATEST_PRODUCTION,
    FORMAT_VERSIONS,
    KRAFT_VERSION_FEATURE,
    bootstrap_records,
    feature_levels,
)
from kafkalike.log.snapshot_files import SnapshotId
from kafkalike.protocol.metadata_records import (
    ControlMessageType,
    build_snapshot,
    control_message,
)
from kafkalike.server.config import parse_listener, parse_properties

META_PROPERTIES = "meta.properties"
METADATA_PARTITION_DIR = "__cluster_metadata-0"
# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the voters snapshot's batches are at most this.
MAX_BATCH_BYTES = 8 * 1024 * 1024


class FormatError(Exception):
    """Why the node cannot be formatted, in one line (Kafka's words)."""


def random_uuid() -> str:
    """A random id as Kafka's ``Uuid.randomUuid`` prints it: URL-safe base64 without padding,
    never starting with "-" (a command line would read it as an option)."""
    while True:
        text = uuid_text(uuid.uuid4())
        if not text.startswith("-"):
            return text


def uuid_text(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_uuid(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: 22 characters of URL-safe base64; ValueError otherwise."""
    if len(text) != 22:
        raise ValueError(f"Input string with prefix `{text[:22]}` is too long to be decoded as a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raise ValueError("Last unit does not have enough valid bits") from None
    if len(raw) != 16 or not re.fullmatch(r"[A-Za-z0-9_-]+", text):
        raise ValueError("Illegal base64 character")
    return uuid.UUID(bytes=raw)


def release_version(text: str) -> str:
    """The metadata version ``--release-version`` names (``4.0`` is its latest, ``4.0-IV3``)."""
    if text in dict(FORMAT_VERSIONS):
        return text
    same_release = [name for name, _ in FORMAT_VERSIONS[:-1] if name.split("-")[0] == text]
    if same_release:
        return same_release[-1]
    first, last = FORMAT_VERSIONS[0][0], FORMAT_VERSIONS[-1][0]
    raise FormatError(
        f"Version {text} is not a valid version. The minimum version is {first} and the maximum version is {last}"
    )


@dataclass(frozen=True)
class Voter:
    node_id: int
    host: str
    port: int
    directory_id: uuid.UUID


def parse_initial_controllers(text: str) -> list[Voter]:
    """``--initial-controllers``: ``id@host:port:directory-id`` entries, comma-separated
    (Kafka's DynamicVoters.parse), sorted by node id."""
    voters: dict[int, Voter] = {}
    for entry in text.split(","):
        voter = _parse_voter(entry.strip())
        if voter.node_id in voters:
            raise FormatError(f"Node id {voter.node_id} was specified more than once.")
        voters[voter.node_id] = voter
    if not voters:
        raise FormatError("No voters given.")
    return [voters[k] for k in sorted(voters)]


def _parse_voter(entry: str) -> Voter:
    node_text, at, rest = entry.partition("@")
    if not at:
        raise FormatError("No @ found in dynamic voter string.")
    if not node_text:
        raise FormatError("Invalid @ at beginning of dynamic voter string.")
    try:
        node_id = int(node_text)
    except ValueError:
        raise FormatError("Failed to parse node id in dynamic voter string.") from None
    if node_id < 0:
        raise FormatError(f"Invalid negative node id {node_id} in dynamic voter string.")
    if rest.startswith("["):
        host, bracket, rest = rest[1:].partition("]")
        if not bracket:
            raise FormatError("Hostname began with left bracket, but no right bracket was found.")
    else:
        host, colon, after = rest.partition(":")
        if not colon:
            raise FormatError("No colon following hostname could be found.")
        rest = ":" + after
    if not rest.startswith(":"):
        raise FormatError("Port section must start with a colon.")
    port_text, colon, directory_text = rest[1:].partition(":")
    if not colon:
        raise FormatError("No colon following port could be found.")
    try:
        port = int(port_text)
    except ValueError:
        raise FormatError("Failed to parse port in dynamic voter string.") from None
    if not 0 <= port <= 65535:
        raise FormatError(f"Invalid port {port} in dynamic voter string.")
    try:
        directory_id = parse_uuid(directory_text)
    except ValueError:
        raise FormatError("Failed to parse directory ID in dynamic voter string.") from None
    return Voter(node_id, host, port, directory_id)


@dataclass
class FormatRequest:
    """What ``kafkalike storage format`` was asked for, from its arguments."""

    cluster_id: str
    properties: dict[str, str]
    standalone: bool = False
    initial_controllers: str | None = None
    no_initial_controllers: bool = False
    ignore_formatted: bool = False
    release_version: str | None = None


@dataclass
class FormatPlan:
    """The checked request: what to write where."""

    cluster_id: str
    node_id: int
    directories: list[Path]
    metadata_dir: Path
    release_version: str
    levels: dict[str, int]
    controller_listener: str
    voters: list[Voter] | None = None
    ignore_formatted: bool = False
    lines: list[str] = field(default_factory=list)


def _missing(name: str) -> FormatError:
    return FormatError(f'Missing required configuration "{name}" which has no default value.')


def _listener_names(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _listener(properties: Mapping[str, str], name: str) -> tuple[str, int] | None:
    """(host, port) of listener ``name``, from advertised.listeners first, then listeners."""
    for config in ("advertised.listeners", "listeners"):
        for entry in _listener_names(properties.get(config)):
            if entry.split("://", 1)[0].upper() == name.upper() and "://" in entry:
                host, port = parse_listener(entry)
                return (host if entry.split("://", 1)[1].split(":")[0] else "localhost"), port
    return None


def plan_format(request: FormatRequest) -> FormatPlan:
    """The checks kafka-storage format makes before writing anything, in its order."""
    props = request.properties
    for name in ("process.roles", "node.id"):
        if name not in props:
            raise _missing(name)
    try:
        node_id = int(props["node.id"])
    except ValueError:
        # KafkaConfig reads node.id through its older synonym, and names that one.
        raise FormatError(
            f"Invalid value {props['node.id']} for configuration broker.id: Not a number of type INT"
        ) from None
    roles = _listener_names(props["process.roles"])
    voter_ids = [e.split("@", 1)[0].strip() for e in _listener_names(props.get("controller.quorum.voters"))]
    if not voter_ids and not _listener_names(props.get("controller.quorum.bootstrap.servers")):
        raise FormatError(
            "If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap "
            "controllers or controller.quorum.voters must contain a parseable set of controllers."
        )
    if roles == ["broker"] and str(node_id) in voter_ids:
        raise FormatError(
            "requirement failed: If process.roles contains just the 'broker' role, the node id "
            f"{node_id} must not be included in the set of voters controller.quorum.voters="
            f"Set({', '.join(voter_ids)})"
        )
    controller_names = _listener_names(props.get("controller.listener.names"))
    listener_names = {e.split("://", 1)[0].upper() for e in _listener_names(props.get("listeners")) if "://" in e}
    if roles == ["broker"] and listener_names & {n.upper() for n in controller_names}:
        raise FormatError(
            "requirement failed: controller.listener.names must not contain a value appearing in the "
            "'listeners' configuration when running KRaft with just the broker role"
        )
    if not controller_names:
        raise FormatError(
            "requirement failed: controller.listener.names must contain at least one value appearing in the "
            "'listeners' configuration when running the KRaft controller role"
        )
    log_dirs = _listener_names(props.get("log.dirs") or props.get("log.dir") or "/tmp/kafka-logs")
    metadata_dir = props.get("metadata.log.dir") or log_dirs[0]
    directories = sorted({Path(d) for d in [*log_dirs, metadata_dir]}, key=str)

    voters: list[Voter] | None = None
    if request.initial_controllers is not None:
        voters = parse_initial_controllers(request.initial_controllers)
    if request.standalone:
        if "controller" not in roles:
            raise FormatError("You can only use --standalone on a controller.")
        listener = _listener(props, controller_names[0])
        if listener is None:
            raise FormatError("No controller listeners found.")
        voters = [Voter(node_id, listener[0], listener[1], uuid.uuid4())]
    if not request.no_initial_controllers and "controller" in roles and not voter_ids and voters is None:
        raise FormatError(
            "Because controller.quorum.voters is not set on this controller, you must specify one of the "
            "following: --standalone, --initial-controllers, or --no-initial-controllers."
        )
    version_text = request.release_version or props.get("inter.broker.protocol.version")
    version = release_version(version_text) if version_text else FORMAT_LATEST_PRODUCTION
    if version == FORMAT_VERSIONS[-1][0] and props.get("unstable.feature.versions.enable") != "true":
        raise FormatError(f"metadata.version {version} is not yet stable.")
    return FormatPlan(
        cluster_id=request.cluster_id,
        node_id=node_id,
        directories=directories,
        metadata_dir=Path(metadata_dir),
        release_version=version,
        levels=feature_levels(version, dynamic_quorum=voters is not None),
        controller_listener=controller_names[0],
        voters=voters,
        ignore_formatted=request.ignore_formatted,
    )


def meta_properties_text(cluster_id: str, node_id: int, directory_id: uuid.UUID, now: datetime.datetime) -> str:
    """meta.properties as Kafka writes it: Java's Properties.store, its date comment, its key order."""
    stamp = now.astimezone(datetime.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
    return (
        f"#\n#{stamp}\nnode.id={node_id}\ndirectory.id={uuid_text(directory_id)}\nversion=1\ncluster.id={cluster_id}\n"
    )


def voters_message(voters: list[Voter], listener: str) -> object:
    return control_message(
        ControlMessageType.KRAFT_VOTERS,
        voters=[
            {
                "voter_id": v.node_id,
                "voter_directory_id": v.directory_id,
                "endpoints": [{"name": listener, "host": v.host, "port": v.port}],
                "k_raft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
            }
            for v in voters
        ],
    ).message


def _stored_ids(path: Path) -> tuple[str | None, str | None]:
    values = parse_properties(path.read_text(encoding="utf-8"))
    return values.get("cluster.id"), values.get("node.id")


def run_format(plan: FormatPlan, now_ms: int) -> list[str]:
    """Write what ``plan`` says; the lines kafka-storage prints. Blocking disk work."""
    formatted: list[Path] = []
    for directory in plan.directories:
        path = directory / META_PROPERTIES
        if not path.exists():
            continue
        cluster_id, node_id = _stored_ids(path)
        if cluster_id is not None and cluster_id != plan.cluster_id:
            raise FormatError(f"Invalid cluster.id in: {path}. Expected {plan.cluster_id}, but read {cluster_id}")
        if node_id is not None and node_id != str(plan.node_id):
            raise FormatError(
                f"Stored node id {node_id} doesn't match previous node id {plan.node_id} in {path}. If you moved "
                "your data, make sure your configured node id matches. If you intend to create a new node, you "
                "should remove all data in your data directories."
            )
        formatted.append(directory)
    if formatted and not plan.ignore_formatted:
        raise FormatError(
            f"Log directory {java_hash_map_order(formatted, copied=True)[0]} is already formatted. "
            "Use --ignore-formatted to ignore this directory and format the others."
        )
    empty = java_hash_map_order([d for d in plan.directories if d not in formatted])
    if not empty:
        return ["All of the log directories are already formatted."]
    records = bootstrap_records(plan.levels)
    bootstrap = build_snapshot(records, epoch=0, last_contained_log_timestamp=0, now_ms=now_ms)
    own_voter = next((v for v in plan.voters or [] if v.node_id == plan.node_id), None)
    now = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC)
    lines = []
    for directory in empty:
        is_metadata = directory == plan.metadata_dir
        if not is_metadata:
            kind = "data directory"
        elif plan.voters is None:
            kind = "metadata directory"
        else:
            kind = "dynamic metadata voter directory" if own_voter else "dynamic metadata directory"
        lines.append(f"Formatting {kind} {directory} with metadata.version {plan.release_version}.")
        directory.mkdir(parents=True, exist_ok=True)
        _write_durably(directory / BOOTSTRAP_CHECKPOINT, bootstrap)
        if is_metadata and plan.voters is not None:
            snapshot = build_snapshot(
                [],
                epoch=0,
                last_contained_log_timestamp=now_ms,
                now_ms=now_ms,
                kraft_version=plan.levels[KRAFT_VERSION_FEATURE],
                voters=voters_message(plan.voters, plan.controller_listener),
                max_batch_bytes=MAX_BATCH_BYTES,
            )
            partition = directory / METADATA_PARTITION_DIR
            partition.mkdir(exist_ok=True)
            _write_durably(partition / SnapshotId(0, 0).file_name, snapshot)
        directory_id = own_voter.directory_id if is_metadata and own_voter else _new_directory_id()
        _write_durably(
            directory / META_PROPERTIES,
            meta_properties_text(plan.cluster_id, plan.node_id, directory_id, now).encode(),
        )
    return lines


def java_hash_map_order(paths: list[Path], *, copied: bool = False) -> list[Path]:
    """``paths`` in the order a Java HashMap keyed by their strings iterates them, which is the
    order kafka-storage formats (and prints) directories in: by bucket, String.hashCode spread
    as HashMap spreads it, over a table grown as HashMap grows it; ties in sorted order.

    ``copied``: a map made by ``new HashMap<>(sorted map)`` (the already-formatted directories
    kafka-storage names the first of), whose table is only as large as its entries need."""
    if copied:
        # HashMap.putMapEntries (Java 17): tableSizeFor((int) (size / 0.75f + 1.0f)).
        wanted = int(len(paths) / 0.75 + 1.0)
        capacity = 1
        while capacity < wanted:
            capacity *= 2
    else:
        capacity = 16
        while len(paths) > capacity * 3 // 4:
            capacity *= 2

    def bucket(path: Path) -> int:
        units = str(path).encode("utf-16-be")
        h = 0
        for i in range(0, len(units), 2):
            h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(sorted(paths, key=str), key=bucket)


# Kafka's DirectoryId reserves the first 100 ids (UNASSIGNED, LOST, MIGRATING and room for more).
_RESERVED_DIRECTORY_IDS = 100


def _new_directory_id() -> uuid.UUID:
    while True:
        candidate = uuid.uuid4()
        if candidate.int >= _RESERVED_DIRECTORY_IDS and not uuid_text(candidate).startswith("-"):
            return candidate


def _write_durably(path: Path, data: bytes) -> None:
    """Whole to a temporary file, fsynced, renamed into place: a crash leaves all or nothing."""
    partial = path.with_name(path.name + ".tmp")
    with partial.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    partial.replace(path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
