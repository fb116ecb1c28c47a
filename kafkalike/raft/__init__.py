"""The KRaft controller quorum as a pure state machine: states, transitions, the log it drives.

No sockets, no clock, no global randomness: a driver feeds :class:`RaftNode` messages and ticks with
the time and carries out what it asks. The deterministic simulation in
:mod:`kafkalike.testing.raft_simulation` is one such driver; :mod:`kafkalike.server.quorum.driver`
runs a node on trio over the network. What any driver must do:

- After every call (``receive``, ``tick``, ``append``, ``resign``, ``durable``,
  ``quorum_state_durable``, ``snapshot``), drain ``outputs()`` in order and then wake the node at
  ``poll(now_ms)``.
- :class:`SendMessage`: put the message on the wire to its destination (the bodies are the codec's
  field names at ``messages.API_VERSIONS``) and deliver answers
  back with ``receive``. Messages across a restart of either end are dropped, as a closed connection
  drops them.
- :class:`FlushLog`: flush the log (a worker thread for a file), then call ``durable``. For
  :class:`~kafkalike.raft.file_log.FileRaftLog`: ``prepare_flush`` on the loop, ``syncs.run()`` on
  a worker thread, ``complete_flush`` on the loop.
- :class:`PersistQuorumState`: write the quorum-state file durably (write aside, fsync, rename),
  then call ``quorum_state_durable(version)``; nothing the node sends leaves before that.
  :class:`~kafkalike.raft.quorum_state_file.QuorumStateFile` writes Kafka's file (``write`` on a
  worker thread).
- At start, build the node from the quorum-state file and the log as they are on disk
  (``QuorumStateFile.read``, ``FileRaftLog.open``, both in ``__cluster_metadata-0``).
- DescribeQuorum: answer with :func:`kafkalike.raft.describe.describe_quorum`.
"""

from kafkalike.raft.config import QuorumConfig, VoterKey
from kafkalike.raft.log import MemoryRaftLog, OffsetAndEpoch, RaftLog
from kafkalike.raft.messages import RaftMessage
from kafkalike.raft.node import FlushLog, NotLeaderError, Output, PersistQuorumState, RaftNode, SendMessage
from kafkalike.raft.state import QuorumStateRecord, Role

__all__ = [
    "FlushLog",
    "MemoryRaftLog",
    "NotLeaderError",
    "OffsetAndEpoch",
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
