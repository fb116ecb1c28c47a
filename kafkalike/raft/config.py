"""The quorum's configuration: Kafka's ``controller.quorum.*`` names and defaults, and the voters.

Voters are keyed by (node id, directory id) from the start, as KIP-853 keys them, so that dynamic
voters can follow; a static voter from ``controller.quorum.voters`` has no directory id (Kafka's
``ReplicaKey.NO_DIRECTORY_ID``, the zero UUID), and a zero id matches any directory.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

NO_DIRECTORY_ID = uuid.UUID(int=0)

# Kafka's QuorumConfig names and defaults.
QUORUM_VOTERS = "controller.quorum.voters"
QUORUM_BOOTSTRAP_SERVERS = "controller.quorum.bootstrap.servers"
ELECTION_TIMEOUT_MS = "controller.quorum.election.timeout.ms"
FETCH_TIMEOUT_MS = "controller.quorum.fetch.timeout.ms"
ELECTION_BACKOFF_MAX_MS = "controller.quorum.election.backoff.max.ms"
REQUEST_TIMEOUT_MS = "controller.quorum.request.timeout.ms"
RETRY_BACKOFF_MS = "controller.quorum.retry.backoff.ms"

DEFAULT_ELECTION_TIMEOUT_MS = 1_000
DEFAULT_FETCH_TIMEOUT_MS = 2_000
DEFAULT_ELECTION_BACKOFF_MAX_MS = 1_000
DEFAULT_REQUEST_TIMEOUT_MS = 2_000
DEFAULT_RETRY_BACKOFF_MS = 20
# Not configurable in Kafka either (KafkaRaftClient's fetchMaxWaitMs and MAX_FETCH_SIZE_BYTES).
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
# The backoff unit of the binary exponential election backoff (KafkaRaftClient.RETRY_BACKOFF_BASE_MS).
ELECTION_BACKOFF_BASE_MS = 50
# A leader that has not heard from a majority for this many fetch timeouts resigns (LeaderState).
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5

_VOTER = re.compile(r"^(\d+)@(\[[^\]]+\]|[^:@]+):(\d+)$")


class QuorumConfigError(ValueError):
    """A quorum configuration value that Kafka would refuse."""


@dataclass(frozen=True, slots=True, order=True)
class VoterKey:
    """A voter's identity: node id and directory id (zero when unknown, matching any)."""

    node_id: int
    directory_id: uuid.UUID = NO_DIRECTORY_ID

    def matches(self, node_id: int, directory_id: uuid.UUID) -> bool:
        if node_id != self.node_id:
            return False
        return NO_DIRECTORY_ID in (self.directory_id, directory_id) or directory_id == self.directory_id


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    key: VoterKey
    host: str
    port: int


@dataclass(frozen=True)
class QuorumConfig:
    """Timeouts of one node of the quorum, in Kafka's names (see :func:`from_properties`)."""

    voters: tuple[VoterKey, ...]
    election_timeout_ms: int = DEFAULT_ELECTION_TIMEOUT_MS
    fetch_timeout_ms: int = DEFAULT_FETCH_TIMEOUT_MS
    election_backoff_max_ms: int = DEFAULT_ELECTION_BACKOFF_MAX_MS
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS
    fetch_max_bytes: int = FETCH_MAX_BYTES  # per Fetch and per FetchSnapshot chunk
    # KIP-996: a would-be candidate first asks for pre-votes, which neither bump the epoch nor bind.
    pre_vote: bool = True
    endpoints: tuple[VoterEndpoint, ...] = field(default=())
    # controller.quorum.bootstrap.servers: where a node without static voters finds the quorum.
    bootstrap_servers: tuple[tuple[str, int], ...] = field(default=())
    # The listener the quorum speaks on (the first of controller.listener.names): the endpoint of
    # a voter in a VotersRecord that this node uses.
    listener_name: str = "CONTROLLER"

    def __post_init__(self) -> None:
        ids = [v.node_id for v in self.voters]
        if len(set(ids)) != len(ids):
            raise QuorumConfigError(f"duplicate voter ids in {ids}")
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise QuorumConfigError(f"{name} must be positive")

    @property
    def voter_ids(self) -> frozenset[int]:
        return frozenset(v.node_id for v in self.voters)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def voter(self, node_id: int) -> VoterKey | None:
        for v in self.voters:
            if v.node_id == node_id:
                return v
        return None


def parse_voters(value: str) -> tuple[VoterEndpoint, ...]:
    """``controller.quorum.voters``: ``id@host:port`` entries separated by commas."""
    endpoints = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        match = _VOTER.match(entry)
        if match is None:
            raise QuorumConfigError(f"Invalid {QUORUM_VOTERS} entry {entry!r}: expected id@host:port")
        node_id, host, port = int(match[1]), match[2].strip("[]"), int(match[3])
        if not 0 < port < 65536:
            raise QuorumConfigError(f"Invalid port {port} in {QUORUM_VOTERS} entry {entry!r}")
        endpoints.append(VoterEndpoint(VoterKey(node_id), host, port))
    return tuple(endpoints)


def parse_bootstrap_servers(value: str) -> tuple[tuple[str, int], ...]:
    """``controller.quorum.bootstrap.servers``: ``host:port`` entries separated by commas."""
    servers = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise QuorumConfigError(f"Invalid {QUORUM_BOOTSTRAP_SERVERS} entry {entry!r}: expected host:port")
        servers.append((host.strip("[]"), int(port)))
    return tuple(servers)


def from_properties(props: dict[str, str]) -> QuorumConfig:
    """A config from Kafka's property names; missing ones take Kafka's defaults."""

    def number(name: str, default: int) -> int:
        raw = props.get(name)
        if raw is None:
            return default
        try:
            return int(raw)
        except ValueError:
            raise QuorumConfigError(f"Invalid value {raw} for configuration {name}: Not a number of type INT") from None

    endpoints = parse_voters(props.get(QUORUM_VOTERS, ""))
    return QuorumConfig(
        voters=tuple(e.key for e in endpoints),
        election_timeout_ms=number(ELECTION_TIMEOUT_MS, DEFAULT_ELECTION_TIMEOUT_MS),
        fetch_timeout_ms=number(FETCH_TIMEOUT_MS, DEFAULT_FETCH_TIMEOUT_MS),
        election_backoff_max_ms=number(ELECTION_BACKOFF_MAX_MS, DEFAULT_ELECTION_BACKOFF_MAX_MS),
        request_timeout_ms=number(REQUEST_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS),
        retry_backoff_ms=number(RETRY_BACKOFF_MS, DEFAULT_RETRY_BACKOFF_MS),
        endpoints=endpoints,
        bootstrap_servers=parse_bootstrap_servers(props.get(QUORUM_BOOTSTRAP_SERVERS, "")),
    )
