"""Our protocol_specs/ against the message definitions inside Apache Kafka's own jars.

The jars of the release in $KAFKALIKE_AK_LIB (``scripts/compat.py`` resolves them) carry every
version that release speaks, newer than the shared snapshot tests/conformance reads: Vote v2
(KIP-996's pre-vote) is checked only here. Every version a jar lists must be in our spec, and
must agree field by field, under the jar's field names. Without a kafka-clients jar in
$KAFKALIKE_AK_LIB the test fails; without $KAFKALIKE_AK_LIB it is deselected with the other
differential tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_LIB
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
# Specs behind the jars, owned elsewhere and not yet brought up to them (each entry must still
# differ: the test says when one can go).
KNOWN_BEHIND = {
    "ConsumerGroupDescribe": [
        "ConsumerGroupDescribeRequest v1: in the Kafka jars but not in our spec",
        "ConsumerGroupDescribeResponse v1: in the Kafka jars but not in our spec",
    ],
    "ShareGroupHeartbeat": ["ShareGroupHeartbeatRequest v0 (Kafka jars): subscribed_topic_names: entity"],
}
# The Raft quorum's messages, which must all be in the clients jar at the versions the node speaks.
RAFT_APIS = ["Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot", "DescribeQuorum"]


@pytest.fixture(scope="module")
def jar_definitions() -> Definitions:
    return definitions_in_jars(Path(AK_LIB))


def jar_oracle(definitions: Definitions) -> Oracle:
    # The jars re-mark flags that do not change the wire (ignorable, map keys): the shared snapshot
    # checks those.
    return Oracle("Kafka jars", definitions, compares_flags=False)


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
    for known in KNOWN_BEHIND.get(name, []):
        assert any(p.startswith(known) for p in problems), f"{known!r} no longer differs: drop it from KNOWN_BEHIND"
        problems = [p for p in problems if not p.startswith(known)]
    assert not problems, "\n".join(problems)


def test_the_jars_define_the_quorum_apis_at_the_versions_the_node_speaks(jar_definitions: Definitions) -> None:
    from kafkalike.raft.messages import API_NAMES, API_VERSIONS

    for api in RAFT_APIS:
        for part in ("Request", "Response"):
            assert api + part in jar_definitions, f"{api}{part} not in the Kafka jars"
    for key, version in API_VERSIONS.items():
        doc = jar_definitions[API_NAMES[key] + "Request"]
        assert version in VersionRange.parse(doc["validVersions"]), f"{API_NAMES[key]} v{version} not in the jars"


def test_a_spec_behind_the_jars_is_caught(jar_definitions: Definitions) -> None:
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
