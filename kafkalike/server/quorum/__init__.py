"""The metadata quorum on the network: the trio driver of a :class:`~kafkalike.raft.node.RaftNode`
(:mod:`.driver`), the peer channel with its fault hook (:mod:`.channel`), the CONTROLLER
listener and its handlers (:mod:`.listener`, :mod:`.handlers`), and one quorum member assembled
from them (:mod:`.server`)."""

from kafkalike.server.quorum.channel import NetworkFaults, PeerChannels
from kafkalike.server.quorum.driver import CommitListener, CommittedBatch, NotControllerError, QuorumDriver
from kafkalike.server.quorum.server import QuorumServer, QuorumSettings

__all__ = [
    "CommitListener",
    "CommittedBatch",
    "NetworkFaults",
    "NotControllerError",
    "PeerChannels",
    "QuorumDriver",
    "QuorumServer",
    "QuorumSettings",
]
