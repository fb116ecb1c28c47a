"""Field-by-field comparison of two decoded responses.

Responses become plain Python values first (dicts, lists, bytes...). Lists of structs that Kafka
does not order (topics, partitions, configs...) are sorted by their identifying fields before they
are compared. A difference is reported with its path, e.g. ``topics[0].partitions[2].leader_epoch``.

``ignore`` takes glob patterns over the generic path, where list indexes read ``[]``:
``topics[].topic_id``, ``brokers[].port``. Some fields are always ignored (IGNORED): values that
differ between any two clusters (ids, hosts and ports, throttle times). Free-text fields (TEXT) are
compared only for being null or not: the two brokers word their messages differently.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

IGNORED = (
    "throttle_time_ms",
    "cluster_id",
    "*topic_id",
    "brokers[].host",
    "brokers[].port",
    "node_endpoints[].host",
    "node_endpoints[].port",
)
TEXT = ("error_message",)
# Fields that identify the elements of an unordered list of structs, in sort priority.
KEYS = ("name", "topic", "resource_name", "partition_index", "partition", "index", "api_key", "node_id", "broker_id")


def plain(value: Any) -> Any:
    """A decoded message as plain values: dicts (without construct's private keys), lists, bytes."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _sort_key(item: Any) -> tuple[str, ...]:
    if isinstance(item, dict):
        return tuple(str(item.get(k)) for k in KEYS if k in item)
    return (repr(item),)


def _generic(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def _matches(pattern: str, generic: str) -> bool:
    """A glob where only ``*`` is special (``[]`` in paths is literal)."""
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), generic) is not None


def differences(ak: Any, kl: Any, ignore: Iterable[str] = ()) -> list[str]:
    """Where ``kl`` (kafkalike's answer) differs from ``ak`` (Apache Kafka's), one line each."""
    patterns = (*IGNORED, *ignore)
    out: list[str] = []
    _walk(plain(ak), plain(kl), "", patterns, out)
    return out


def _walk(ak: Any, kl: Any, path: str, patterns: tuple[str, ...], out: list[str]) -> None:
    generic = _generic(path)
    if path and any(_matches(p, generic) for p in patterns):
        return
    leaf = generic.rsplit(".", 1)[-1]
    if leaf in TEXT:
        if (ak is None) != (kl is None):
            out.append(f"{path}: Apache Kafka {ak!r}, kafkalike {kl!r}")
        return
    if isinstance(ak, dict) and isinstance(kl, dict):
        for key in sorted(set(ak) | set(kl)):
            child = f"{path}.{key}" if path else key
            if key not in kl:
                out.append(f"{child}: missing in kafkalike's answer")
            elif key not in ak:
                out.append(f"{child}: not in Apache Kafka's answer")
            else:
                _walk(ak[key], kl[key], child, patterns, out)
        return
    if isinstance(ak, list) and isinstance(kl, list):
        if ak and isinstance(ak[0], dict) and any(k in ak[0] for k in KEYS):
            ak, kl = sorted(ak, key=_sort_key), sorted(kl, key=_sort_key)
        if len(ak) != len(kl):
            out.append(
                f"{path}: {len(ak)} elements from Apache Kafka, {len(kl)} from kafkalike: {_brief(ak)} vs {_brief(kl)}"
            )
            return
        for i, (a, k) in enumerate(zip(ak, kl, strict=True)):
            _walk(a, k, f"{path}[{i}]", patterns, out)
        return
    if ak != kl:
        out.append(f"{path}: Apache Kafka {_brief(ak)}, kafkalike {_brief(kl)}")


def _brief(value: Any, limit: int = 200) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        names = [_sort_key(v) for v in value]
        text = repr(names)
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
