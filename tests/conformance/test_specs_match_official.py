"""Our protocol_specs/ against Apache Kafka's official message definitions.

The official JSON is read from ``../shared/kafka-message-specs`` (the versions it lists) and, for
versions newer than that snapshot, from the definitions kafka-python ships. It is a test oracle
only. For every API and version our specs declare, the fields present at that version must agree
in order, name, type, nullability, tags, defaults, entity type and flexible encoding.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from kafkalike.protocol.spec import ApiSpec, VersionRange, default_value, load_specs

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KAFKALIKE_OFFICIAL_SPECS", ROOT.parent / "shared" / "kafka-message-specs"))

# API keys a KRaft broker or controller serves, which our specs must all cover.
REQUIRED_KEYS = sorted(
    {0, 1, 2, 3, *range(8, 38), *range(42, 52), 55, 57, 60, 61, 65, 66, 68, 69, 71, 72, 75}
    | {52, 53, 54, 55, 56, 59, 62, 63, 64, 67, 70, 80, 81, 82}
    | {76, 77, 78, 79}
)
REQUIRED_DATA = ["RequestHeader", "ResponseHeader", "ConsumerProtocolSubscription", "ConsumerProtocolAssignment"]


def _load_json(path: Path) -> dict[str, Any]:
    text = re.sub(r"^\s*//.*$", "", path.read_text(encoding="utf-8"), flags=re.M)
    return json.loads(text)  # type: ignore[no-any-return]


def _newer_dir() -> Path | None:
    try:
        import kafka.protocol.schemas.resources as res
    except ImportError:
        return None
    return Path(res.__file__).parent


def _oracles() -> list[dict[str, dict[str, Any]]]:
    assert SHARED.is_dir(), f"official definitions not found at {SHARED}"
    dirs = [SHARED]
    newer = _newer_dir()
    if newer is not None:
        dirs.append(newer)
    # The coordinators' own records (``data`` specs such as OffsetCommitKey) live under internal/.
    return [{p.stem: _load_json(p) for p in (*d.glob("*.json"), *d.glob("internal/*/*.json"))} for d in dirs]


ORACLES = _oracles()
SPECS = load_specs()


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _official_view(fields: list[dict[str, Any]], structs: dict[str, Any], v: int) -> list[dict[str, Any]]:
    out = []
    for f in fields:
        # A field given only taggedVersions exists in those versions (Kafka's generator rule).
        if v not in VersionRange.parse(f.get("versions", f.get("taggedVersions", "none"))):
            continue
        element = f["type"].removeprefix("[]")
        children = f.get("fields") or structs.get(element, {}).get("fields", [])
        raw = f.get("default")
        flexible = f.get("flexibleVersions")
        out.append(
            {
                "name": snake(f["name"]),
                "type": f["type"],
                "nullable": v in VersionRange.parse(f.get("nullableVersions", "none")),
                "tag": int(f["tag"]) if v in VersionRange.parse(f.get("taggedVersions", "none")) else None,
                "default": default_value(
                    f["type"], None if raw is None else str(raw).lower() if isinstance(raw, bool) else str(raw)
                ),
                "entity": f.get("entityType"),
                "flexible": None if flexible is None else v in VersionRange.parse(flexible),
                "ignorable": bool(f.get("ignorable", False)),
                "key": bool(f.get("mapKey", False)),
                "fields": _official_view(children, structs, v),
            }
        )
    return out


def _our_view(fields: Any, structs: dict[str, Any], v: int) -> list[dict[str, Any]]:
    out = []
    for f in fields:
        if v not in f.versions:
            continue
        children = f.fields or (structs[f.element_type].fields if f.is_struct and f.element_type in structs else ())
        out.append(
            {
                "name": f.name,
                "type": f.type,
                "nullable": v in f.nullable,
                "tag": f.tag if v in f.tagged else None,
                "default": default_value(f.type, f.default),
                "entity": f.entity,
                "flexible": None if f.flexible is None else v in f.flexible,
                "ignorable": f.ignorable,
                "key": f.map_key,
                "fields": _our_view(children, structs, v),
            }
        )
    return out


def _versions(r: VersionRange) -> range:
    assert r.high is not None, "spec versions must be closed"
    return range(r.low, r.high + 1)


def _oracle_for(official_name: str, v: int) -> dict[str, Any] | None:
    for oracle in ORACLES:
        doc = oracle.get(official_name)
        if doc is not None and v in VersionRange.parse(doc["validVersions"]):
            return doc
    return None


def _sections(spec: ApiSpec) -> list[tuple[str, str]]:
    if spec.kind == "api":
        return [("request", spec.name + "Request"), ("response", spec.name + "Response")]
    return [("message", spec.name)]


def test_every_required_api_has_a_spec() -> None:
    keys = {s.key for s in SPECS.values() if s.key is not None}
    missing = [k for k in REQUIRED_KEYS if k not in keys]
    assert not missing, f"no spec for API keys {missing}"
    assert not [n for n in REQUIRED_DATA if n not in SPECS]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_spec_matches_official(name: str) -> None:
    spec = SPECS[name]
    problems = []
    for section, official_name in _sections(spec):
        ours = spec.messages.get(section)
        assert ours is not None, f"{name}: no {section} section"
        base = ORACLES[0].get(official_name)
        assert base is not None, f"{official_name}: not in the official definitions"
        if spec.key is not None:
            assert base.get("apiKey") == spec.key, f"{name}: api key {spec.key} != {base.get('apiKey')}"
        listed = VersionRange.parse(base["validVersions"])
        for v in _versions(listed):
            if v not in spec.versions:
                problems.append(f"{official_name} v{v}: listed officially but not in our spec")
        for v in _versions(spec.versions):
            doc = _oracle_for(official_name, v)
            if doc is None:
                problems.append(f"{official_name} v{v}: no official definition to check against")
                continue
            if (v in VersionRange.parse(doc.get("flexibleVersions", "none"))) != (v in spec.flexible):
                problems.append(f"{official_name} v{v}: flexible versions differ")
            official_structs = {s["name"]: s for s in doc.get("commonStructs", [])}
            theirs = _official_view(doc["fields"], official_structs, v)
            mine = _our_view(ours.fields, ours.structs, v)
            if doc is not ORACLES[0].get(official_name):
                # Newer definitions re-mark flags that do not change the wire (ignorable, map keys).
                _drop_flags(theirs)
                _drop_flags(mine)
            if theirs != mine:
                problems.append(f"{official_name} v{v}: {_first_difference(theirs, mine)}")
    assert not problems, "\n".join(problems)


def _drop_flags(view: list[dict[str, Any]]) -> None:
    for entry in view:
        entry.pop("ignorable", None)
        entry.pop("key", None)
        _drop_flags(entry["fields"])


def _first_difference(theirs: list[dict[str, Any]], mine: list[dict[str, Any]], path: str = "") -> str:
    for i in range(max(len(theirs), len(mine))):
        if i >= len(theirs):
            return f"{path}extra field {mine[i]['name']}"
        if i >= len(mine):
            return f"{path}missing field {theirs[i]['name']}"
        t, m = theirs[i], mine[i]
        for key in ("name", "type", "nullable", "tag", "default", "entity", "flexible", "ignorable", "key"):
            if t.get(key) != m.get(key):
                return f"{path}{t['name']}: {key} official={t[key]!r} ours={m[key]!r}"
        if t["fields"] != m["fields"]:
            return _first_difference(t["fields"], m["fields"], f"{path}{t['name']}.")
    return "differ"


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
        doc["name"]: doc["apiKey"] for doc in ORACLES[0].values() if doc.get("type") == "metadata" and "apiKey" in doc
    }
    ours = {t.spec_name: int(t) for t in MetadataRecordType}
    # Every type Kafka defines is known by its key (so none is misread), and ours are Kafka's.
    assert {n: k for n, k in official.items() if n in ours} == {n: k for n, k in ours.items() if n in official}
    assert not [n for n in official if n not in ours], "official metadata record types we do not know"
    assert all(t.has_spec for t in MetadataRecordType if t.spec_name in REQUIRED_METADATA_RECORDS)
    assert sorted(t.spec_name for t in ControlMessageType) == sorted(REQUIRED_CONTROL_MESSAGES)
