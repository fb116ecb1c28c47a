"""The KRaft controller quorum as a pure state machine: states, transitions, the log it drives.

No sockets, no clock, no global randomness: a driver feeds :class:`RaftNode` messages and ticks with
the time and carries out what it asks (send, flush the log, persist the quorum state). The
deterministic simulation in :mod:`kafkalike.testing.raft_simulation` is one such driver.
"""

from kafkalike.raft.config import QuorumConfig, VoterKey
from kafkalike.raft.log import MemoryRaftLog, RaftLog
from kafkalike.raft.messages import RaftMessage
from kafkalike.raft.node import FlushLog, NotLeaderError, Output, PersistQuorumState, RaftNode, SendMessage
from kafkalike.raft.state import QuorumStateRecord, Role

__all__ = [
    "FlushLog",
    "MemoryRaftLog",
    "NotLeaderError",
    "Output",
    "PersistQuorumState",
    "QuorumConfig",
    "QuorumStateRecord",
    "RaftLog",
    "RaftMessage",
    "RaftNode",
    "Role",
    "SendMessage",
    "VoterKey",
]
