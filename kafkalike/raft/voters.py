"""The quorum's voters as KIP-853 keeps them: a voter set in the log, which changes one voter at a time.

A :class:`VoterSet` is the voters (id and directory id), where each listens (by listener name) and the
``kraft.version`` range each supports; a ``VotersRecord`` control record (type 6) in the log holds one,
and a ``KRaftVersionRecord`` (type 5) the finalized ``kraft.version``. As Kafka's
KRaftControlRecordStateMachine, a replica takes the *latest* voter set in its log as the one in force,
committed or not (Raft's single-server membership change: the old and the new set differ by one voter,
so any majority of one meets any majority of the other); a truncation takes the entries it removes
back out, a snapshot carries the set as of its end. Static voters (``controller.quorum.voters``) are
the set before any record (offset -1), at ``kraft.version`` 0.
"""

from __future__ import annotations

import bisect
import struct
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kafkalike.protocol.codec import schema
from kafkalike.protocol.records import ControlRecordType, Record, build_batch, decode_records, iter_batches
from kafkalike.raft.config import NO_DIRECTORY_ID, VoterEndpoint, VoterKey

VOTERS_RECORD_VERSION = 0
KRAFT_VERSION_RECORD_VERSION = 0
# The kraft.version range this node supports: 1 is KIP-853's dynamic voters.
SUPPORTED_KRAFT_VERSIONS = (0, 1)
RECONFIG_KRAFT_VERSION = 1
_CONTROL_KEY = struct.Struct(">hh")


@dataclass(frozen=True, slots=True)
class VoterNode:
    """One voter: its key, its listeners as (name, host, port), and the kraft.version range it supports."""

    key: VoterKey
    listeners: tuple[tuple[str, str, int], ...] = ()
    kraft_versions: tuple[int, int] = (0, 0)

    @property
    def node_id(self) -> int:
        return self.key.node_id

    def address(self, listener_name: str) -> tuple[str, int] | None:
        for name, host, port in self.listeners:
            if name.upper() == listener_name.upper():
                return host, port
        return None


@dataclass(frozen=True, slots=True)
class VoterSet:
    """The voters, ordered by id (at most one voter per id, as Kafka's VoterSet)."""

    nodes: tuple[VoterNode, ...] = ()

    @staticmethod
    def of(nodes: Iterable[VoterNode]) -> VoterSet:
        return VoterSet(tuple(sorted(nodes, key=lambda n: n.node_id)))

    @staticmethod
    def static(endpoints: Iterable[VoterEndpoint], keys: Iterable[VoterKey], listener_name: str) -> VoterSet:
        """``controller.quorum.voters``: keys without directory ids, with their addresses when known."""
        addresses = {e.key.node_id: (e.host, e.port) for e in endpoints}
        nodes = []
        for key in keys:
            address = addresses.get(key.node_id)
            listeners = ((listener_name, *address),) if address is not None else ()
            nodes.append(VoterNode(key, listeners))
        return VoterSet.of(nodes)

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(n.node_id for n in self.nodes)

    @property
    def keys(self) -> tuple[VoterKey, ...]:
        return tuple(n.key for n in self.nodes)

    @property
    def majority(self) -> int:
        return len(self.nodes) // 2 + 1

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, node_id: int) -> VoterNode | None:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        return None

    def key_of(self, node_id: int) -> VoterKey | None:
        n = self.node(node_id)
        return n.key if n is not None else None

    def is_voter(self, node_id: int, directory_id: uuid.UUID = NO_DIRECTORY_ID) -> bool:
        """Kafka's VoterSet.isVoter: the id is a voter's and the directory ids do not disagree."""
        key = self.key_of(node_id)
        return key is not None and key.matches(node_id, directory_id)

    def add(self, node: VoterNode) -> VoterSet | None:
        """The set with ``node`` added; None when its id is already a voter's."""
        if node.node_id in self.ids:
            return None
        return VoterSet.of((*self.nodes, node))

    def remove(self, key: VoterKey) -> VoterSet | None:
        """The set without the voter ``key`` names exactly (directory id included); None when
        there is no such voter, or it is the last one."""
        current = self.key_of(key.node_id)
        if current is None or current != key or len(self.nodes) == 1:
            return None
        return VoterSet(tuple(n for n in self.nodes if n.node_id != key.node_id))

    def update(self, node: VoterNode) -> VoterSet | None:
        """The set with the voter ``node`` names replaced by it; None when it is not a voter."""
        current = self.key_of(node.node_id)
        if current is None or current != node.key:
            return None
        return VoterSet(tuple(node if n.node_id == node.node_id else n for n in self.nodes))

    def differs_by_at_most_one(self, other: VoterSet) -> bool:
        return len(set(self.keys) ^ set(other.keys)) <= 1

    def to_message(self) -> dict[str, Any]:
        return {
            "version": VOTERS_RECORD_VERSION,
            "voters": [
                {
                    "voter_id": n.node_id,
                    "voter_directory_id": n.key.directory_id,
                    "endpoints": [{"name": name, "host": host, "port": port} for name, host, port in n.listeners],
                    "k_raft_version_feature": {
                        "min_supported_version": n.kraft_versions[0],
                        "max_supported_version": n.kraft_versions[1],
                    },
                }
                for n in self.nodes
            ],
        }

    @staticmethod
    def from_message(message: Any) -> VoterSet:
        nodes = []
        for v in message["voters"]:
            feature = v["k_raft_version_feature"]
            listeners = tuple((e["name"], e["host"], int(e["port"])) for e in v["endpoints"])
            key = VoterKey(int(v["voter_id"]), v["voter_directory_id"])
            versions = (int(feature["min_supported_version"]), int(feature["max_supported_version"]))
            nodes.append(VoterNode(key, listeners, versions))
        return VoterSet.of(nodes)

    def __str__(self) -> str:
        return "{" + ", ".join(f"{n.node_id}" for n in self.nodes) + "}"


def voters_batch(voters: VoterSet, *, base_offset: int, epoch: int, timestamp_ms: int) -> bytes:
    """A control batch holding one VotersRecord, as the leader appends it."""
    value = schema("VotersRecord", "message", VOTERS_RECORD_VERSION).encode(voters.to_message())
    record = Record(key=_CONTROL_KEY.pack(0, ControlRecordType.KRAFT_VOTERS), value=value)
    return build_batch(
        [record], base_offset=base_offset, partition_leader_epoch=epoch, control=True, base_timestamp=timestamp_ms
    )


def bootstrap_batch(
    voters: VoterSet, kraft_version: int = 1, *, base_offset: int = 0, epoch: int = 0, timestamp_ms: int = 0
) -> bytes:
    """kraft.version, then the voters, in one control batch: the first batch of a quorum whose
    voters are in the log (offsets 0 and 1, epoch 0), or what a leader writes when the voters
    were only in a bootstrap snapshot."""
    kraft = schema("KRaftVersionRecord", "message", KRAFT_VERSION_RECORD_VERSION).encode(
        {"version": KRAFT_VERSION_RECORD_VERSION, "k_raft_version": kraft_version}
    )
    value = schema("VotersRecord", "message", VOTERS_RECORD_VERSION).encode(voters.to_message())
    records = [
        Record(key=_CONTROL_KEY.pack(0, ControlRecordType.KRAFT_VERSION), value=kraft),
        Record(key=_CONTROL_KEY.pack(0, ControlRecordType.KRAFT_VOTERS), value=value, offset_delta=1),
    ]
    return build_batch(
        records, base_offset=base_offset, partition_leader_epoch=epoch, control=True, base_timestamp=timestamp_ms
    )


@dataclass(frozen=True, slots=True)
class ControlChange:
    """A voter set or a kraft.version found in the log at ``offset``."""

    offset: int
    voters: VoterSet | None = None
    kraft_version: int | None = None


def control_changes(data: bytes | memoryview) -> Iterator[ControlChange]:
    """The VotersRecord and KRaftVersionRecord control records in ``data`` (whole batches), in order.
    Only control batches are decoded: a data batch costs its header."""
    for pos, header in iter_batches(data):
        if not header.is_control:
            continue
        batch = bytes(data[pos : pos + header.size])
        for record in decode_records(batch, 0, header):
            if record.key is None or len(record.key) < _CONTROL_KEY.size or record.value is None:
                continue
            _, record_type = _CONTROL_KEY.unpack_from(record.key)
            offset = record.offset(header)
            if record_type == ControlRecordType.KRAFT_VOTERS:
                message = schema("VotersRecord", "message", VOTERS_RECORD_VERSION).decode(record.value)
                yield ControlChange(offset, voters=VoterSet.from_message(message))
            elif record_type == ControlRecordType.KRAFT_VERSION:
                message = schema("KRaftVersionRecord", "message", KRAFT_VERSION_RECORD_VERSION).decode(record.value)
                yield ControlChange(offset, kraft_version=int(message["k_raft_version"]))


@dataclass
class VoterHistory:
    """The voter sets and kraft.versions of the log by offset (Kafka's VoterSetHistory and
    KRaftControlRecordStateMachine): ``base`` holds before any entry."""

    base: VoterSet
    base_kraft_version: int = 0
    _voters: list[tuple[int, VoterSet]] = field(default_factory=list)
    _kraft: list[tuple[int, int]] = field(default_factory=list)

    def latest(self) -> VoterSet:
        return self._voters[-1][1] if self._voters else self.base

    def latest_offset(self) -> int:
        """The offset of the latest VotersRecord; -1 for the base set."""
        return self._voters[-1][0] if self._voters else -1

    def kraft_version(self) -> int:
        return self._kraft[-1][1] if self._kraft else self.base_kraft_version

    def at(self, offset: int) -> VoterSet:
        """The set in force at ``offset`` (the latest entry at or before it)."""
        i = bisect.bisect_right([o for o, _ in self._voters], offset)
        return self._voters[i - 1][1] if i else self.base

    def kraft_version_at(self, offset: int) -> int:
        i = bisect.bisect_right([o for o, _ in self._kraft], offset)
        return self._kraft[i - 1][1] if i else self.base_kraft_version

    def entries(self) -> list[tuple[int, VoterSet]]:
        return list(self._voters)

    def apply(self, changes: Iterable[ControlChange]) -> bool:
        """Entries from appended batches (at offsets past every entry); True when the voters changed."""
        changed = False
        for change in changes:
            if change.voters is not None:
                if self._voters and change.offset <= self._voters[-1][0]:
                    continue  # already known (a log scanned again)
                changed = changed or change.voters != self.latest()
                self._voters.append((change.offset, change.voters))
            if change.kraft_version is not None:
                if self._kraft and change.offset <= self._kraft[-1][0]:
                    continue
                self._kraft.append((change.offset, change.kraft_version))
        return changed

    def truncate_to(self, end_offset: int) -> bool:
        """Drop what a truncation to ``end_offset`` removed; True when the voters changed."""
        before = self.latest()
        self._voters = [(o, v) for o, v in self._voters if o < end_offset]
        self._kraft = [(o, k) for o, k in self._kraft if o < end_offset]
        return self.latest() != before

    def reset_to_snapshot(self, end_offset: int, voters: VoterSet | None, kraft_version: int | None) -> bool:
        """A snapshot replaced the log up to ``end_offset``: its voters (when it has any) are in force
        just before it, and nothing the log held is kept."""
        before = self.latest()
        kept = self.at(end_offset - 1) if voters is None else voters
        kept_kraft = self.kraft_version_at(end_offset - 1) if kraft_version is None else kraft_version
        self._voters = [] if kept == self.base else [(end_offset - 1, kept)]
        self._kraft = [] if kept_kraft == self.base_kraft_version else [(end_offset - 1, kept_kraft)]
        return self.latest() != before

    def prune_before(self, start_offset: int) -> None:
        """Forget entries a newer one before ``start_offset`` replaced (the log before it is gone)."""
        while len(self._voters) > 1 and self._voters[1][0] < start_offset:
            self._voters.pop(0)
        while len(self._kraft) > 1 and self._kraft[1][0] < start_offset:
            self._kraft.pop(0)
