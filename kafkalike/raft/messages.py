"""The quorum's messages: Kafka's Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54), Fetch (1) and
FetchSnapshot (59) bodies, as the project's codec encodes them (``protocol_specs/*.kspec`` field names), in an envelope
that says who sends, who receives, and which request a response answers.

A body is a plain mapping with the spec's field names at the version in ``API_VERSIONS``, so that the
server layer can put it on the wire unchanged (``encode_request``/``encode_response_parts``) and hand
a decoded ``Container`` back to the node: the node reads bodies only by key.

Vote is spoken at v2 (KIP-996), whose partition carries the ``pre_vote`` flag and names the sender
the *replica* (``replica_id``, ``replica_epoch``): a pre-vote's sender is not a candidate yet.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft.config import NO_DIRECTORY_ID, VoterKey

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID

FETCH = 1
VOTE = 52
BEGIN_QUORUM_EPOCH = 53
END_QUORUM_EPOCH = 54
FETCH_SNAPSHOT = 59
# KIP-853: a leader asks a voter-to-be which kraft.version it supports (ApiVersions), and serves
# the voter changes an admin asks for.
API_VERSIONS_KEY = 18
ADD_RAFT_VOTER = 80
REMOVE_RAFT_VOTER = 81
UPDATE_RAFT_VOTER = 82
API_VERSIONS = {
    FETCH: 18,
    VOTE: 2,
    BEGIN_QUORUM_EPOCH: 1,
    END_QUORUM_EPOCH: 1,
    FETCH_SNAPSHOT: 1,
    API_VERSIONS_KEY: 3,
    ADD_RAFT_VOTER: 1,
    REMOVE_RAFT_VOTER: 0,
    UPDATE_RAFT_VOTER: 0,
}
API_NAMES = {
    FETCH: "Fetch",
    VOTE: "Vote",
    BEGIN_QUORUM_EPOCH: "BeginQuorumEpoch",
    END_QUORUM_EPOCH: "EndQuorumEpoch",
    FETCH_SNAPSHOT: "FetchSnapshot",
    API_VERSIONS_KEY: "ApiVersions",
    ADD_RAFT_VOTER: "AddRaftVoter",
    REMOVE_RAFT_VOTER: "RemoveRaftVoter",
    UPDATE_RAFT_VOTER: "UpdateRaftVoter",
}
VOTER_CHANGES = (ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER)
KRAFT_VERSION_FEATURE = "kraft.version"

Body = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RaftMessage:
    """One request or response between two nodes of the quorum."""

    source: int
    destination: int
    api_key: int
    correlation_id: int
    body: Body
    is_response: bool = False

    @property
    def api_version(self) -> int:
        return API_VERSIONS[self.api_key]

    def __str__(self) -> str:
        kind = "response" if self.is_response else "request"
        return f"{API_NAMES[self.api_key]} {kind} {self.source}->{self.destination} #{self.correlation_id}"


def partition_of(body: Body) -> Any | None:
    """The single partition a quorum message names, or None when it names other than exactly one
    (Kafka's hasValidTopicPartition: one topic, one partition, the metadata partition)."""
    topics = body["responses"] if "responses" in body else body.get("topics") or []
    if len(topics) != 1:
        return None
    (topic,) = topics
    name = topic.get("topic_name", topic.get("name"))
    if name != METADATA_TOPIC and topic.get("topic_id") != METADATA_TOPIC_ID:
        return None
    partitions = topic["partitions"]
    if len(partitions) != 1:
        return None
    (partition,) = partitions
    for key in ("partition_index", "partition", "index"):  # Vote and others, Fetch, FetchSnapshot
        if key in partition:
            return partition if partition[key] == METADATA_PARTITION else None
    return None


def top_level_error(error: ErrorCode) -> dict[str, Any]:
    """A response that fails as a whole (INCONSISTENT_CLUSTER_ID, INVALID_REQUEST)."""
    return {"error_code": error, "topics": []}


def fetch_top_level_error(error: ErrorCode) -> dict[str, Any]:
    return {"error_code": error, "session_id": 0, "responses": []}


def _topic(partition: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": METADATA_PARTITION, **partition}]}]


def vote_request(
    cluster_id: str | None,
    replica: VoterKey,
    replica_epoch: int,
    voter: VoterKey,
    last_offset_epoch: int,
    last_offset: int,
    pre_vote: bool,
) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "voter_id": voter.node_id,
        "topics": _topic(
            {
                "replica_epoch": replica_epoch,
                "replica_id": replica.node_id,
                "replica_directory_id": replica.directory_id,
                "voter_directory_id": voter.directory_id,
                "last_offset_epoch": last_offset_epoch,
                "last_offset": last_offset,
                "pre_vote": pre_vote,
            }
        ),
    }


def _node_endpoints(leader_id: int, endpoint: tuple[str, int] | None) -> list[dict[str, Any]]:
    """A response's NodeEndpoints: the leader's, when known (KIP-853: how a replica that is not in
    this node's voter set, or knows no voters, finds the leader)."""
    if leader_id < 0 or endpoint is None:
        return []
    return [{"node_id": leader_id, "host": endpoint[0], "port": endpoint[1]}]


def _leader_endpoints(listener: str, endpoint: tuple[str, int] | None) -> list[dict[str, Any]]:
    return [] if endpoint is None else [{"name": listener, "host": endpoint[0], "port": endpoint[1]}]


def leader_endpoint(body: Body, listener: str) -> tuple[str, int] | None:
    """The sender's endpoint on ``listener`` that a BeginQuorumEpoch or EndQuorumEpoch names."""
    for endpoint in body.get("leader_endpoints") or []:
        if str(endpoint["name"]).upper() == listener.upper() and endpoint["host"] and 0 < int(endpoint["port"]) < 65536:
            return str(endpoint["host"]), int(endpoint["port"])
    return None


def vote_response(
    error: ErrorCode, epoch: int, leader_id: int, granted: bool, leader_endpoint: tuple[str, int] | None = None
) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.NONE,
        "topics": _topic({"error_code": error, "leader_id": leader_id, "leader_epoch": epoch, "vote_granted": granted}),
        "node_endpoints": _node_endpoints(leader_id, leader_endpoint),
    }


def begin_quorum_epoch_request(
    cluster_id: str | None,
    leader_id: int,
    epoch: int,
    voter: VoterKey,
    listener: str = "CONTROLLER",
    endpoint: tuple[str, int] | None = None,
) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "voter_id": voter.node_id,
        "topics": _topic({"voter_directory_id": voter.directory_id, "leader_id": leader_id, "leader_epoch": epoch}),
        "leader_endpoints": _leader_endpoints(listener, endpoint),
    }


def epoch_response(
    error: ErrorCode, epoch: int, leader_id: int, leader_endpoint: tuple[str, int] | None = None
) -> dict[str, Any]:
    """BeginQuorumEpoch's and EndQuorumEpoch's response (the same fields)."""
    return {
        "error_code": ErrorCode.NONE,
        "topics": _topic({"error_code": error, "leader_id": leader_id, "leader_epoch": epoch}),
        "node_endpoints": _node_endpoints(leader_id, leader_endpoint),
    }


def end_quorum_epoch_request(
    cluster_id: str | None,
    leader_id: int,
    epoch: int,
    successors: list[VoterKey],
    listener: str = "CONTROLLER",
    endpoint: tuple[str, int] | None = None,
) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "topics": _topic(
            {
                "leader_id": leader_id,
                "leader_epoch": epoch,
                "preferred_successors": [s.node_id for s in successors],
                "preferred_candidates": [
                    {"candidate_id": s.node_id, "candidate_directory_id": s.directory_id} for s in successors
                ],
            }
        ),
        "leader_endpoints": _leader_endpoints(listener, endpoint),
    }


def fetch_request(
    cluster_id: str | None,
    replica: VoterKey,
    leader_epoch: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    max_wait_ms: int,
    max_bytes: int,
    high_watermark: int | None = None,
) -> dict[str, Any]:
    """``high_watermark``: the one the sender knows (v18, KIP-1166), None when it knows none."""
    return {
        "cluster_id": cluster_id,
        "replica_state": {"replica_id": replica.node_id, "replica_epoch": -1},
        "max_wait_ms": max_wait_ms,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [
                    {
                        "partition": METADATA_PARTITION,
                        "current_leader_epoch": leader_epoch,
                        "fetch_offset": fetch_offset,
                        "last_fetched_epoch": last_fetched_epoch,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                        "replica_directory_id": replica.directory_id,
                        "high_watermark": -1 if high_watermark is None else high_watermark,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


# What a Fetch before v18 stands for as the sender's high watermark (the field's default): it
# knows every one, so a leader never answers it early for a new high watermark.
UNKNOWN_HIGH_WATERMARK = 2**63 - 1


def fetch_high_watermark(partition: Any) -> int:
    """The high watermark a fetch's sender knows (KIP-1166)."""
    return int(partition.get("high_watermark", UNKNOWN_HIGH_WATERMARK))


def fetch_response(
    error: ErrorCode,
    epoch: int,
    leader_id: int,
    high_watermark: int,
    log_start_offset: int,
    records: bytes = b"",
    diverging: tuple[int, int] | None = None,
    snapshot: tuple[int, int] | None = None,
    leader_endpoint: tuple[str, int] | None = None,
) -> dict[str, Any]:
    """``diverging`` is the leader's (epoch, end offset) where the follower's log parts from it;
    ``snapshot`` the (end offset, epoch) of the snapshot a follower behind the log start must fetch;
    ``leader_endpoint`` the (host, port) of the leader's controller listener, when known (the
    response's NodeEndpoints, v16+; Kafka's raft sends it from v17 on, see
    :func:`without_node_endpoints`)."""
    div_epoch, div_end = diverging if diverging is not None else (-1, -1)
    snap_end, snap_epoch = snapshot if snapshot is not None else (-1, -1)
    partition = {
        "partition_index": METADATA_PARTITION,
        "error_code": error,
        "high_watermark": high_watermark,
        "last_stable_offset": high_watermark,
        "log_start_offset": log_start_offset,
        "diverging_epoch": {"epoch": div_epoch, "end_offset": div_end},
        "current_leader": {"leader_id": leader_id, "leader_epoch": epoch},
        "snapshot_id": {"end_offset": snap_end, "epoch": snap_epoch},
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
    }
    endpoints = []
    if leader_endpoint is not None and leader_id >= 0:
        host, port = leader_endpoint
        endpoints.append({"node_id": leader_id, "host": host, "port": port, "rack": None})
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": 0,
        "responses": [{"topic_id": METADATA_TOPIC_ID, "partitions": [partition]}],
        "node_endpoints": endpoints,
    }


# Kafka's raft puts the leader's endpoint into Fetch responses from this version on (RaftUtil).
FETCH_NODE_ENDPOINTS_VERSION = 17


def without_node_endpoints(body: Body) -> dict[str, Any]:
    """A Fetch response as Kafka's raft answers a request below v17: no NodeEndpoints."""
    return {**body, "node_endpoints": []}


def node_endpoints(body: Body) -> dict[int, tuple[str, int]]:
    """The (host, port) of each node a response's NodeEndpoints name."""
    found: dict[int, tuple[str, int]] = {}
    for endpoint in body.get("node_endpoints") or []:
        node_id, host, port = int(endpoint["node_id"]), endpoint["host"], int(endpoint["port"])
        if node_id >= 0 and host and 0 < port < 65536:
            found[node_id] = (str(host), port)
    return found


def fetch_snapshot_request(
    cluster_id: str | None,
    replica: VoterKey,
    leader_epoch: int,
    snapshot: tuple[int, int],
    position: int,
    max_bytes: int,
) -> dict[str, Any]:
    """``snapshot`` is its (end offset, epoch); ``position`` the byte to continue from."""
    return {
        "cluster_id": cluster_id,
        "replica_id": replica.node_id,
        "max_bytes": max_bytes,
        "topics": [
            {
                "name": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition": METADATA_PARTITION,
                        "current_leader_epoch": leader_epoch,
                        "snapshot_id": {"end_offset": snapshot[0], "epoch": snapshot[1]},
                        "position": position,
                        "replica_directory_id": replica.directory_id,
                    }
                ],
            }
        ],
    }


def fetch_snapshot_response(
    error: ErrorCode,
    epoch: int,
    leader_id: int,
    snapshot: tuple[int, int] = (-1, -1),
    size: int = -1,
    position: int = -1,
    chunk: bytes = b"",
) -> dict[str, Any]:
    partition = {
        "index": METADATA_PARTITION,
        "error_code": error,
        "snapshot_id": {"end_offset": snapshot[0], "epoch": snapshot[1]},
        "current_leader": {"leader_id": leader_id, "leader_epoch": epoch},
        "size": size,
        "position": position,
        "unaligned_records": chunk,
    }
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}],
        "node_endpoints": [],
    }


def fetch_replica_id(body: Body) -> int:
    """The fetching replica: the tagged ReplicaState from v15, the plain field before."""
    state = body.get("replica_state")
    if state is not None and state["replica_id"] >= 0:
        return int(state["replica_id"])
    return int(body.get("replica_id", -1))


def directory_id(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else NO_DIRECTORY_ID


def fetch_replica_directory_id(partition: Any) -> uuid.UUID:
    return directory_id(partition.get("replica_directory_id"))


# -- KIP-853: voter changes ---------------------------------------------------------------------


def api_versions_request() -> dict[str, Any]:
    return {"client_software_name": "kafkalike-raft", "client_software_version": "1"}


def api_versions_response(kraft_versions: tuple[int, int]) -> dict[str, Any]:
    """What the quorum itself answers to ApiVersions (the server's listener answers it in full)."""
    return {
        "error_code": ErrorCode.NONE,
        "api_keys": [],
        "throttle_time_ms": 0,
        "supported_features": [
            {"name": KRAFT_VERSION_FEATURE, "min_version": kraft_versions[0], "max_version": kraft_versions[1]}
        ],
    }


def supported_kraft_versions(body: Body) -> tuple[int, int] | None:
    """The kraft.version range an ApiVersions response advertises; None when it names none."""
    for feature in body.get("supported_features") or []:
        if feature["name"] == KRAFT_VERSION_FEATURE:
            return int(feature["min_version"]), int(feature["max_version"])
    return None


def add_voter_request(
    cluster_id: str | None,
    voter: VoterKey,
    listeners: list[tuple[str, str, int]],
    *,
    timeout_ms: int = 30_000,
    ack_when_committed: bool = True,
) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "timeout_ms": timeout_ms,
        "voter_id": voter.node_id,
        "voter_directory_id": voter.directory_id,
        "listeners": [{"name": name, "host": host, "port": port} for name, host, port in listeners],
        "ack_when_committed": ack_when_committed,
    }


def remove_voter_request(cluster_id: str | None, voter: VoterKey) -> dict[str, Any]:
    return {"cluster_id": cluster_id, "voter_id": voter.node_id, "voter_directory_id": voter.directory_id}


def voter_change_response(error: ErrorCode, message: str | None = None) -> dict[str, Any]:
    """AddRaftVoter's and RemoveRaftVoter's answer."""
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message}


def update_voter_response(
    error: ErrorCode, leader_id: int, epoch: int, endpoint: tuple[str, int] | None
) -> dict[str, Any]:
    host, port = endpoint if endpoint is not None else ("", -1)
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "current_leader": {"leader_id": leader_id, "leader_epoch": epoch, "host": host, "port": port},
    }
