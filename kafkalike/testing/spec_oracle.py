"""Apache Kafka's own message definitions (its JSON) as the oracle ``protocol_specs/`` is checked against.

Definitions come from a directory (``../shared/kafka-message-specs``, kafka-python's resources) or
from the jars of an Apache Kafka release (``common/message/*.json`` and ``common/metadata/*.json``
inside ``kafka-clients`` and the other ``kafka-*`` jars), which carry versions newer than the shared
snapshot. For every version both sides define, the fields present at that version must agree in
order, name, type, nullability, tags, defaults, entity type and flexible encoding (and, where the
oracle is trusted for it, the ignorable and map-key flags).
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalike.protocol.spec import ApiSpec, VersionRange, default_value

Definitions = dict[str, dict[str, Any]]


def parse_definition(text: str) -> dict[str, Any]:
    """One of Kafka's message JSON files (with its ``//`` comment lines)."""
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))  # type: ignore[no-any-return]


def definitions_in_dir(path: Path) -> Definitions:
    """The definitions of a directory, and of its ``internal/*/`` (the coordinators' own records)."""
    files = (*path.glob("*.json"), *path.glob("internal/*/*.json"))
    return {p.stem: parse_definition(p.read_text(encoding="utf-8")) for p in files}


def clients_jar(lib: Path) -> Path:
    """The ``kafka-clients`` jar of a release's lib directory; FileNotFoundError when there is none."""
    jars = sorted(lib.glob("kafka-clients-*.jar"))
    jars = [j for j in jars if not j.name.endswith(("-test.jar", "-sources.jar", "-javadoc.jar"))]
    if not jars:
        raise FileNotFoundError(f"no kafka-clients-*.jar in {lib}")
    return jars[-1]


def definitions_in_jars(lib: Path) -> Definitions:
    """Every message and metadata record definition the release's ``kafka-*`` jars carry; the
    clients jar must be there."""
    clients_jar(lib)
    found: Definitions = {}
    for jar in sorted(lib.glob("kafka*.jar")):
        with zipfile.ZipFile(jar) as archive:
            for name in archive.namelist():
                if name.startswith(("common/message/", "common/metadata/")) and name.endswith(".json"):
                    found[Path(name).stem] = parse_definition(archive.read(name).decode("utf-8"))
    return found


@dataclass(frozen=True)
class Oracle:
    """One source of definitions. ``compares_flags``: whether its ignorable and map-key flags are
    compared (newer sources re-mark flags that do not change the wire). ``renamed``: per definition,
    fields renamed since this source (old name -> ours), a rename not changing the wire either."""

    name: str
    definitions: Definitions
    compares_flags: bool = True
    renamed: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def lists(self, official_name: str, version: int) -> dict[str, Any] | None:
        doc = self.definitions.get(official_name)
        if doc is not None and version in VersionRange.parse(doc["validVersions"]):
            return doc
        return None


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def official_view(
    fields: list[dict[str, Any]], structs: dict[str, Any], v: int, renamed: Mapping[str, str] = {}
) -> list[dict[str, Any]]:
    out = []
    for f in fields:
        # A field given only taggedVersions exists in those versions (Kafka's generator rule).
        if v not in VersionRange.parse(f.get("versions", f.get("taggedVersions", "none"))):
            continue
        element = f["type"].removeprefix("[]")
        children = f.get("fields") or structs.get(element, {}).get("fields", [])
        raw = f.get("default")
        flexible = f.get("flexibleVersions")
        name = snake(f["name"])
        out.append(
            {
                "name": renamed.get(name, name),
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
                "fields": official_view(children, structs, v, renamed),
            }
        )
    return out


def our_view(fields: Any, structs: dict[str, Any], v: int) -> list[dict[str, Any]]:
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
                "fields": our_view(children, structs, v),
            }
        )
    return out


def versions_of(r: VersionRange) -> range:
    assert r.high is not None, "spec versions must be closed"
    return range(r.low, r.high + 1)


def sections(spec: ApiSpec) -> list[tuple[str, str]]:
    """(our section, the official definition's name) for each part of a spec."""
    if spec.kind == "api":
        return [("request", spec.name + "Request"), ("response", spec.name + "Response")]
    return [("message", spec.name)]


def compare_version(spec: ApiSpec, section: str, doc: dict[str, Any], oracle: Oracle, v: int) -> str | None:
    """The first difference between our ``section`` of ``spec`` and ``doc`` at version ``v``, or None."""
    official_name = doc["name"]
    if (v in VersionRange.parse(doc.get("flexibleVersions", "none"))) != (v in spec.flexible):
        return f"{official_name} v{v}: flexible versions differ"
    ours = spec.messages[section]
    official_structs = {s["name"]: s for s in doc.get("commonStructs", [])}
    theirs = official_view(doc["fields"], official_structs, v, oracle.renamed.get(official_name, {}))
    mine = our_view(ours.fields, ours.structs, v)
    if not oracle.compares_flags:
        _drop_flags(theirs)
        _drop_flags(mine)
    if theirs != mine:
        return f"{official_name} v{v} ({oracle.name}): {_first_difference(theirs, mine)}"
    return None


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
