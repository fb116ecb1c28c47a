"""The replica layer: the partitions this broker holds, their roles, epochs and high watermarks.

Above the controller (it applies the controller's metadata deltas), below the coordinators and
the server (which go through it instead of driving logs). No trio, no sockets, no clock.
"""

from kafkalike.replica.manager import (
    AppliedChanges,
    NewReplica,
    ReplicaChangePlan,
    ReplicaManager,
    delete_directories,
    open_logs,
    rename_for_removal,
)
from kafkalike.replica.partition import (
    CONSUMER_REPLICA_ID,
    NO_EPOCH,
    Isolation,
    LeaderAndIsr,
    LeaderAppend,
    Partition,
    PartitionError,
    PartitionRead,
    Role,
    TopicPartition,
)

__all__ = [
    "CONSUMER_REPLICA_ID",
    "NO_EPOCH",
    "AppliedChanges",
    "Isolation",
    "LeaderAndIsr",
    "LeaderAppend",
    "NewReplica",
    "Partition",
    "PartitionError",
    "PartitionRead",
    "ReplicaChangePlan",
    "ReplicaManager",
    "Role",
    "TopicPartition",
    "delete_directories",
    "open_logs",
    "rename_for_removal",
]
