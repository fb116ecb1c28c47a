"""Our protocol_specs/ against Apache Kafka's official message definitions.

The official JSON is read from ``../shared/kafka-message-specs`` (the versions it lists) and, for
versions newer than that snapshot, from the definitions kafka-python ships. It is a test oracle
only. For every API and version our specs declare, the fields present at that version must agree
in order, name, type, nullability, tags, defaults, entity type and flexible encoding.

Versions newer than both (Vote v2, KIP-996) are checked against the definitions inside Apache
Kafka's own jars, where the jars are: ``compat_tests/differential/test_specs_match_kafka_jars.py``,
run by ``scripts/compat.py`` with ``$KAFKALIKE_AK_LIB``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kafkalike.protocol.spec import VersionRange, load_specs
from kafkalike.testing.spec_oracle import Oracle, compare_version, definitions_in_dir, sections, versions_of

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KAFKALIKE_OFFICIAL_SPECS", ROOT.parent / "shared" / "kafka-message-specs"))

# API keys a KRaft broker or controller serves, which our specs must all cover.
REQUIRED_KEYS = sorted(
    {0, 1, 2, 3, *range(8, 38), *range(42, 52), 55, 57, 60, 61, 65, 66, 68, 69, 71, 72, 75}
    | {52, 53, 54, 55, 56, 59, 62, 63, 64, 67, 70, 80, 81, 82}
    | {76, 77, 78, 79}
)
REQUIRED_DATA = ["RequestHeader", "ResponseHeader", "ConsumerProtocolSubscription", "ConsumerProtocolAssignment"]

# Versions no definition here lists, checked only against the Kafka jars (see the docstring):
# Vote v2 (KIP-996) and what Kafka 4.1-4.4 added.
CHECKED_AGAINST_THE_JARS = {
    "VoteRequest": {2},
    "VoteResponse": {2},
    "AddRaftVoterRequest": {1},
    "AddRaftVoterResponse": {1},
    "ApiVersionsRequest": {5},
    "ApiVersionsResponse": {5},
    "BrokerHeartbeatRequest": {2},
    "BrokerHeartbeatResponse": {2},
    "BrokerRegistrationChangeRecord": {3},
    "RegisterBrokerRecord": {4},
    "DeleteGroupsRequest": {3},
    "DeleteGroupsResponse": {3},
    "TxnOffsetCommitRequest": {6},
    "TxnOffsetCommitResponse": {6},
}
# Tagged fields Kafka added after the shared snapshot to versions it lists, checked against the
# jars: (the difference the shared definition shows; each must still show).
ADDED_SINCE_SHARED = {
    "ConsumerGroupMetadataValue": ["ConsumerGroupMetadataValue v0 (shared): extra field metadata_hash"],
    "ConsumerGroupTargetAssignmentMetadataValue": [
        "ConsumerGroupTargetAssignmentMetadataValue v0 (shared): extra field assignment_timestamp"
    ],
    "ConsumerGroupCurrentMemberAssignmentValue": [
        "ConsumerGroupCurrentMemberAssignmentValue v0 (shared): assigned_partitions.extra field assignment_epochs"
    ],
    "OffsetCommitValue": ["OffsetCommitValue v4 (shared): extra field topic_id"],
    "TransactionLogValue": [
        "TransactionLogValue v1 (shared): transaction_timeout_ms: name official='transaction_timeout_ms' "
        "ours='next_producer_epoch'"
    ],
}
# Fields Kafka renamed after the shared snapshot (KIP-996: a pre-vote's sender is no candidate yet);
# a rename does not change the wire, so older versions are compared under the new names.
RENAMED_SINCE_SHARED = {
    "VoteRequest": {
        "candidate_epoch": "replica_epoch",
        "candidate_id": "replica_id",
        "candidate_directory_id": "replica_directory_id",
    }
}


def _newer_dir() -> Path | None:
    try:
        import kafka.protocol.schemas.resources as res
    except ImportError:
        return None
    return Path(res.__file__).parent


def _oracles() -> list[Oracle]:
    assert SHARED.is_dir(), f"official definitions not found at {SHARED}"
    oracles = [Oracle("shared", definitions_in_dir(SHARED), renamed=RENAMED_SINCE_SHARED)]
    newer = _newer_dir()
    if newer is not None:
        # Newer definitions re-mark flags that do not change the wire (ignorable, map keys).
        oracles.append(Oracle("kafka-python", definitions_in_dir(newer), compares_flags=False))
    return oracles


ORACLES = _oracles()
SPECS = load_specs()


def _oracle_for(official_name: str, v: int) -> tuple[Oracle, dict[str, Any]] | None:
    for oracle in ORACLES:
        doc = oracle.lists(official_name, v)
        if doc is not None:
            return oracle, doc
    return None


def test_every_required_api_has_a_spec() -> None:
    keys = {s.key for s in SPECS.values() if s.key is not None}
    missing = [k for k in REQUIRED_KEYS if k not in keys]
    assert not missing, f"no spec for API keys {missing}"
    assert not [n for n in REQUIRED_DATA if n not in SPECS]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_spec_matches_official(name: str) -> None:
    spec = SPECS[name]
    problems = []
    for section, official_name in sections(spec):
        assert section in spec.messages, f"{name}: no {section} section"
        base = ORACLES[0].definitions.get(official_name)
        assert base is not None, f"{official_name}: not in the official definitions"
        if spec.key is not None:
            assert base.get("apiKey") == spec.key, f"{name}: api key {spec.key} != {base.get('apiKey')}"
        for v in versions_of(VersionRange.parse(base["validVersions"])):
            if v not in spec.versions:
                problems.append(f"{official_name} v{v}: listed officially but not in our spec")
        for v in versions_of(spec.versions):
            found = _oracle_for(official_name, v)
            jar_only = v in CHECKED_AGAINST_THE_JARS.get(official_name, set())
            if found is None:
                if not jar_only:
                    problems.append(f"{official_name} v{v}: no official definition to check against")
                continue
            if jar_only:
                problems.append(f"{official_name} v{v}: now defined here, drop it from CHECKED_AGAINST_THE_JARS")
            difference = compare_version(spec, section, found[1], found[0], v)
            if difference is not None:
                problems.append(difference)
    for added in ADDED_SINCE_SHARED.get(name, []):
        assert added in problems, f"{added!r} no longer differs: drop it from ADDED_SINCE_SHARED"
        problems.remove(added)
    assert not problems, "\n".join(problems)


def test_the_renames_name_fields_of_the_shared_definitions() -> None:
    """A stale rename (a field Kafka no longer has under the old name) would hide a real difference."""
    for official_name, renames in RENAMED_SINCE_SHARED.items():
        doc = ORACLES[0].definitions[official_name]
        text = repr(doc)
        for old in renames:
            camel = "".join(part.capitalize() for part in old.split("_"))
            assert f"'{camel}'" in text, f"{official_name} has no field {camel}"


# The __cluster_metadata log's records (issue 14): metadata records by api key, and the KRaft
# control records' messages.
REQUIRED_METADATA_RECORDS = [
    "FeatureLevelRecord",
    "RegisterBrokerRecord",
    "UnregisterBrokerRecord",
    "BrokerRegistrationChangeRecord",
    "FenceBrokerRecord",
    "UnfenceBrokerRecord",
    "TopicRecord",
    "PartitionRecord",
    "PartitionChangeRecord",
    "RemoveTopicRecord",
    "ConfigRecord",
    "ProducerIdsRecord",
    "NoOpRecord",
    "BeginTransactionRecord",
    "EndTransactionRecord",
    "AbortTransactionRecord",
]
REQUIRED_CONTROL_MESSAGES = [
    "LeaderChangeMessage",
    "SnapshotHeaderRecord",
    "SnapshotFooterRecord",
    "KRaftVersionRecord",
    "VotersRecord",
]


def test_every_required_metadata_record_has_a_spec() -> None:
    missing = [n for n in REQUIRED_METADATA_RECORDS + REQUIRED_CONTROL_MESSAGES if n not in SPECS]
    assert not missing, f"no spec for {missing}"


def test_metadata_record_types_match_official_api_keys() -> None:
    from kafkalike.protocol.metadata_records import ControlMessageType, MetadataRecordType

    official = {
        doc["name"]: doc["apiKey"]
        for doc in ORACLES[0].definitions.values()
        if doc.get("type") == "metadata" and "apiKey" in doc
    }
    ours = {t.spec_name: int(t) for t in MetadataRecordType}
    # Every type Kafka defines is known by its key (so none is misread), and ours are Kafka's.
    assert {n: k for n, k in official.items() if n in ours} == {n: k for n, k in ours.items() if n in official}
    assert not [n for n in official if n not in ours], "official metadata record types we do not know"
    assert all(t.has_spec for t in MetadataRecordType if t.spec_name in REQUIRED_METADATA_RECORDS)
    assert sorted(t.spec_name for t in ControlMessageType) == sorted(REQUIRED_CONTROL_MESSAGES)
