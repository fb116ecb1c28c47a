"""DescribeQuorum (key 55) as a KRaft leader answers it: the leader, its epoch and high watermark,
and what it knows of each voter and observer (log end offset, last fetch, last caught up).

The server layer (``server/quorum/describe.py``) checks that the request names
``__cluster_metadata`` partition 0 and calls :func:`describe_quorum` on the local node; a node that
does not lead answers NOT_LEADER_OR_FOLLOWER (Kafka's DescribeQuorumResponse.singletonErrorResponse).
The ``nodes`` of v2 (the voters' listeners) are the server's to fill in: the quorum
knows voters by id, not by listener. Error messages Kafka leaves unset are "" (its default).
"""

from __future__ import annotations

from typing import Any

from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft.messages import METADATA_PARTITION, METADATA_TOPIC
from kafkalike.raft.node import RaftNode
from kafkalike.raft.state import Leader, ReplicaProgress

NOT_LEADER_MESSAGE = (
    "For requests intended only for the leader, this error indicates that the broker is not the current leader. "
    "For requests intended for any replica, this error indicates that the broker is not a replica of the topic "
    "partition."
)


def describe_quorum(node: RaftNode, now_ms: int) -> dict[str, Any]:
    state = node.state
    if not isinstance(state, Leader):
        partition = {
            "partition_index": METADATA_PARTITION,
            "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER,
            "error_message": NOT_LEADER_MESSAGE,
            "leader_id": 0,
            "leader_epoch": 0,
            "high_watermark": 0,
            "current_voters": [],
            "observers": [],
        }
        return _response(partition)
    # As Kafka's LeaderState, the leader's own entry carries the voter set's key for it (a static
    # voter's has no directory id), not the directory id of its log dir; a leader that is removing
    # itself is no voter any more, and is listed with the observers.
    voter_set = node.voters
    own_key = voter_set.key_of(node.node_id)
    leader_self = {
        "replica_id": node.node_id,
        "replica_directory_id": own_key.directory_id if own_key is not None else node.key.directory_id,
        "log_end_offset": node.log.end_offset,
        "last_fetch_timestamp": now_ms,  # as Kafka reports the leader itself
        "last_caught_up_timestamp": now_ms,
    }
    voters = []
    for voter in voter_set.keys:
        if voter.node_id == node.node_id:
            voters.append(leader_self)
        else:
            voters.append(_replica(voter.node_id, state.replicas[voter.node_id], voter.directory_id))
    observers = [_replica(i, p, p.directory_id) for i, p in sorted(state.active_observers(now_ms).items())]
    if own_key is None:
        observers.insert(0, leader_self)
    partition = {
        "partition_index": METADATA_PARTITION,
        "error_code": ErrorCode.NONE,
        "error_message": "",
        "leader_id": node.node_id,
        "leader_epoch": state.epoch,
        "high_watermark": state.high_watermark if state.high_watermark is not None else -1,
        "current_voters": voters,
        "observers": observers,
    }
    return _response(partition)


def _replica(node_id: int, progress: ReplicaProgress, directory_id: Any) -> dict[str, Any]:
    return {
        "replica_id": node_id,
        "replica_directory_id": directory_id,
        "log_end_offset": progress.end_offset,
        "last_fetch_timestamp": progress.last_fetch_ms,
        "last_caught_up_timestamp": progress.last_caught_up_ms,
    }


def _response(partition: dict[str, Any]) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.NONE,
        "error_message": "",
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
        "nodes": [],
    }
