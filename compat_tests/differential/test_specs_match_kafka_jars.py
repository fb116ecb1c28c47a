"""Our protocol_specs/ against the message definitions inside Apache Kafka's own jars.

The jars of the release in $KAFKALIKE_AK_LIB (``scripts/compat.py`` resolves them) carry every
version that release speaks, newer than the shared snapshot tests/conformance reads: Vote v2
(KIP-996's pre-vote) is checked only here. Every version a jar lists must be in our spec, and
must agree field by field, under the jar's field names. Without a kafka-clients jar in
$KAFKALIKE_AK_LIB the test fails; without $KAFKALIKE_AK_LIB it is deselected with the other
differential tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.conftest import AK_LIB, AK_VERSION
from kafkalike.protocol.spec import ApiSpec, VersionRange, load_specs
from kafkalike.testing.spec_oracle import (
    Definitions,
    Oracle,
    compare_version,
    definitions_in_jars,
    sections,
    versions_of,
)

pytestmark = pytest.mark.differential

SPECS = load_specs()


@dataclass(frozen=True)
class Known:
    """A difference from the jars, expected in the releases from ``since`` to before ``before``."""

    difference: str
    why: str
    since: tuple[int, ...] = (4, 0)
    before: tuple[int, ...] = (99,)

    def applies(self) -> bool:
        return self.since <= AK_VERSION < self.before


SHARE_GROUPS = "share groups (KIP-932) are not served; their first non-preview versions stay to be written with them"
# Specs known_difference the jars, owned elsewhere or not yet brought up to them (each entry must still
# differ where it applies: the test says when one can go).
KNOWN_BEHIND = {
    "ConsumerGroupDescribe": [
        Known("ConsumerGroupDescribeRequest v1: in the Kafka jars but not in our spec", "FINDINGS.md D7"),
        Known("ConsumerGroupDescribeResponse v1: in the Kafka jars but not in our spec", "FINDINGS.md D7"),
    ],
    "ShareGroupHeartbeat": [
        Known(
            "ShareGroupHeartbeatRequest v0 (Kafka jars): subscribed_topic_names: entity",
            "4.0 marks the names no entity; 4.1+ does, as ours",
            before=(4, 1),
        ),
        *(
            Known(f"ShareGroupHeartbeat{part} v1: in the Kafka jars but not in our spec", SHARE_GROUPS, since=(4, 1))
            for part in ("Request", "Response")
        ),
    ],
    "ShareGroupDescribe": [
        Known(f"ShareGroupDescribe{part} v1: in the Kafka jars but not in our spec", SHARE_GROUPS, since=(4, 1))
        for part in ("Request", "Response")
    ],
    "ShareFetch": [
        Known(f"ShareFetch{part} v{v}: in the Kafka jars but not in our spec", SHARE_GROUPS, since=(4, 1))
        for part in ("Request", "Response")
        for v in (1, 2)
    ],
    "ShareAcknowledge": [
        Known(f"ShareAcknowledge{part} v{v}: in the Kafka jars but not in our spec", SHARE_GROUPS, since=(4, 1))
        for part in ("Request", "Response")
        for v in (1, 2)
    ],
    # Versions that change how requests name topics, which the handlers (and Produce's fast
    # decoder, kafkalike/protocol/produce_wire.py) do not do yet: Produce v13 names topics by id.
    "Produce": [
        Known(f"Produce{part} v13: in the Kafka jars but not in our spec", "topic ids (KIP-516), 4.1", since=(4, 1))
        for part in ("Request", "Response")
    ],
    # Tagged fields of the group and transaction records that releases before these lack (ours
    # read and write them as the newest does).
    "ConsumerGroupMetadataValue": [
        Known("ConsumerGroupMetadataValue v0 (Kafka jars): extra field metadata_hash", "KIP-1101, 4.1", before=(4, 1))
    ],
    "OffsetCommitValue": [Known("OffsetCommitValue v4 (Kafka jars): extra field topic_id", "4.1", before=(4, 1))],
    "TransactionLogValue": [
        Known(
            "TransactionLogValue v1 (Kafka jars): transaction_timeout_ms: name official='transaction_timeout_ms' "
            "ours='next_producer_epoch'",
            "next_producer_epoch, 4.1",
            before=(4, 1),
        )
    ],
    "ConsumerGroupTargetAssignmentMetadataValue": [
        Known(
            "ConsumerGroupTargetAssignmentMetadataValue v0 (Kafka jars): extra field assignment_timestamp",
            "KIP-1263, 4.3",
            before=(4, 3),
        )
    ],
    "ConsumerGroupCurrentMemberAssignmentValue": [
        Known(
            "ConsumerGroupCurrentMemberAssignmentValue v0 (Kafka jars): assigned_partitions.extra field "
            "assignment_epochs",
            "in 4.4.0's jars, not in 4.1.1's",
            before=(4, 4),
        )
    ],
}
# Fields Kafka renamed after 4.0, which ours keep (the wire is the same): jar name -> ours.
RENAMED_IN_THE_JARS = {
    # KIP-1319 (the member epoch under the consumer protocol); the transaction code reads ours.
    "TxnOffsetCommitRequest": {"generation_id_or_member_epoch": "generation_id"},
}
# The Raft quorum's messages, which must all be in the clients jar at the versions the node speaks.
RAFT_APIS = ["Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot", "DescribeQuorum"]


@pytest.fixture(scope="module")
def jar_definitions() -> Definitions:
    return {name: as_record_type_version(doc) for name, doc in definitions_in_jars(Path(AK_LIB)).items()}


def as_record_type_version(doc: dict[str, Any]) -> dict[str, Any]:
    """A group or transaction record key as 4.0 defined it. Since 4.1 the jars define each such key
    at version 0 and give its record type as ``apiKey`` ("coordinator-key"); on the wire the key's
    version has always been that record type, which is how ours (and 4.0's) define it."""
    if doc.get("type") != "coordinator-key":
        return doc
    record_type = str(doc["apiKey"])
    assert doc["validVersions"] == "0" and all(f["versions"] == "0" for f in doc["fields"]), doc
    return {
        **doc,
        "validVersions": record_type,
        "fields": [{**f, "versions": record_type} for f in doc["fields"]],
    }


def jar_oracle(definitions: Definitions) -> Oracle:
    # The jars re-mark flags that do not change the wire (ignorable, map keys): the shared snapshot
    # checks those.
    return Oracle("Kafka jars", definitions, compares_flags=False, renamed=RENAMED_IN_THE_JARS)


def jar_problems(spec: ApiSpec, oracle: Oracle) -> list[str]:
    """What differs between ``spec`` and the jars' definition of it (nothing for what they lack)."""
    problems = []
    for section, official_name in sections(spec):
        doc = oracle.definitions.get(official_name)
        if doc is None:
            continue
        for v in versions_of(VersionRange.parse(doc["validVersions"])):
            if v not in spec.versions:
                problems.append(f"{official_name} v{v}: in the Kafka jars but not in our spec")
                continue
            difference = compare_version(spec, section, doc, oracle, v)
            if difference is not None:
                problems.append(difference)
    return problems


@pytest.mark.parametrize("name", sorted(SPECS))
def test_spec_matches_the_kafka_jars(name: str, jar_definitions: Definitions) -> None:
    problems = jar_problems(SPECS[name], jar_oracle(jar_definitions))
    for known_difference in KNOWN_BEHIND.get(name, []):
        if not known_difference.applies():
            continue
        known = known_difference.difference
        assert any(p.startswith(known) for p in problems), f"{known!r} no longer differs: drop it from KNOWN_BEHIND"
        problems = [p for p in problems if not p.startswith(known)]
    assert not problems, "\n".join(problems)


def test_the_jars_define_the_quorum_apis_at_the_versions_the_node_speaks(jar_definitions: Definitions) -> None:
    from kafkalike.raft.messages import API_NAMES, API_VERSIONS

    for api in RAFT_APIS:
        for part in ("Request", "Response"):
            assert api + part in jar_definitions, f"{api}{part} not in the Kafka jars"
    for key, version in API_VERSIONS.items():
        jars = VersionRange.parse(jar_definitions[API_NAMES[key] + "Request"]["validVersions"])
        if AK_VERSION < (4, 4) and jars.high is not None and jars.high < version:
            # A release before the reference (4.4) may not have the node's newest version: the
            # node asks a peer's ApiVersions first and speaks the highest both have
            # (server/quorum/channel.py; test_mixed_quorum.py runs a quorum with such peers).
            version = jars.high
        assert version in jars, f"{API_NAMES[key]} v{version} not in the jars"


def test_a_spec_known_difference_the_jars_is_caught(jar_definitions: Definitions) -> None:
    """Negative control: Vote as it was before v2 (no pre-vote flag, the old field names)."""
    spec = SPECS["Vote"]
    old = jar_oracle(jar_definitions)
    vote = jar_definitions["VoteRequest"]
    renamed = {
        **jar_definitions,
        "VoteRequest": {**vote, "fields": _renamed(vote["fields"], {"ReplicaEpoch": "CandidateEpoch"})},
    }
    problems = jar_problems(spec, jar_oracle(renamed))
    assert any("replica_epoch" in p or "candidate_epoch" in p for p in problems), problems
    truncated = {**jar_definitions, "VoteRequest": {**vote, "validVersions": "0-3"}}
    problems = jar_problems(spec, jar_oracle(truncated))
    assert "VoteRequest v3: in the Kafka jars but not in our spec" in problems
    assert not jar_problems(spec, old)


def _renamed(fields: list[dict], names: dict[str, str]) -> list[dict]:  # type: ignore[type-arg]
    return [
        {**f, "name": names.get(f["name"], f["name"]), "fields": _renamed(f.get("fields", []), names)} for f in fields
    ]
