"""Broker configuration with Apache Kafka's names, types and defaults.

Values come from (lowest to highest): the defaults below, a ``server.properties`` file, and
``--override key=value``. Topic-level configs default to the matching broker config
(``retention.ms`` <- ``log.retention.ms``...), which is what DescribeConfigs reports as the source.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # boolean, int, long, double, string, list, password, class, short
    default: str | None
    read_only: bool = True


_BROKER_DEFS = [
    ConfigDef("node.id", "int", "1"),
    ConfigDef("process.roles", "list", "broker,controller"),
    ConfigDef("listeners", "list", "PLAINTEXT://127.0.0.1:9092"),
    ConfigDef("advertised.listeners", "list", None),
    ConfigDef("log.dirs", "list", None),
    ConfigDef("log.dir", "string", "./kafkalike-data"),
    ConfigDef("num.partitions", "int", "1", read_only=False),
    ConfigDef("default.replication.factor", "int", "1", read_only=False),
    ConfigDef("auto.create.topics.enable", "boolean", "true"),
    ConfigDef("delete.topic.enable", "boolean", "true"),
    ConfigDef("log.retention.ms", "long", None, read_only=False),
    ConfigDef("log.retention.minutes", "int", None),
    ConfigDef("log.retention.hours", "int", "168"),
    ConfigDef("log.retention.bytes", "long", "-1", read_only=False),
    ConfigDef("log.retention.check.interval.ms", "long", "300000"),
    ConfigDef("log.segment.bytes", "int", "1073741824", read_only=False),
    ConfigDef("log.roll.ms", "long", None, read_only=False),
    ConfigDef("log.roll.hours", "int", "168"),
    ConfigDef("log.index.interval.bytes", "int", "4096", read_only=False),
    ConfigDef("log.index.size.max.bytes", "int", "10485760", read_only=False),
    ConfigDef("log.flush.interval.messages", "long", str(LONG_MAX), read_only=False),
    ConfigDef("log.flush.interval.ms", "long", None, read_only=False),
    ConfigDef("log.segment.delete.delay.ms", "long", "60000", read_only=False),
    ConfigDef("log.cleanup.policy", "list", "delete", read_only=False),
    ConfigDef("log.message.timestamp.type", "string", "CreateTime", read_only=False),
    ConfigDef("message.max.bytes", "int", "1048588", read_only=False),
    ConfigDef("min.insync.replicas", "int", "1", read_only=False),
    ConfigDef("unclean.leader.election.enable", "boolean", "false", read_only=False),
    ConfigDef("compression.type", "string", "producer", read_only=False),
    ConfigDef("socket.request.max.bytes", "int", "104857600"),
    ConfigDef("offsets.topic.num.partitions", "int", "50"),
    ConfigDef("offsets.topic.replication.factor", "short", "1"),
    ConfigDef("transaction.state.log.num.partitions", "int", "50"),
    ConfigDef("group.initial.rebalance.delay.ms", "int", "3000"),
    ConfigDef("group.min.session.timeout.ms", "int", "6000"),
    ConfigDef("group.max.session.timeout.ms", "int", "1800000"),
    ConfigDef("transaction.max.timeout.ms", "int", "900000"),
    ConfigDef("producer.id.expiration.ms", "int", "86400000", read_only=False),
    ConfigDef("max.incremental.fetch.session.cache.slots", "int", "1000"),
    ConfigDef("cluster.id", "string", None),
]
BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _BROKER_DEFS}

# Topic config -> (type, broker config it defaults to, or a fixed default).
TOPIC_CONFIGS: dict[str, tuple[str, str | None, str | None]] = {
    "cleanup.policy": ("list", "log.cleanup.policy", None),
    "compression.type": ("string", "compression.type", None),
    "delete.retention.ms": ("long", None, "86400000"),
    "file.delete.delay.ms": ("long", "log.segment.delete.delay.ms", None),
    "flush.messages": ("long", "log.flush.interval.messages", None),
    "flush.ms": ("long", None, str(LONG_MAX)),
    "index.interval.bytes": ("int", "log.index.interval.bytes", None),
    "max.compaction.lag.ms": ("long", None, str(LONG_MAX)),
    "max.message.bytes": ("int", "message.max.bytes", None),
    "message.timestamp.type": ("string", "log.message.timestamp.type", None),
    "message.timestamp.before.max.ms": ("long", None, str(LONG_MAX)),
    "message.timestamp.after.max.ms": ("long", None, "3600000"),
    "min.cleanable.dirty.ratio": ("double", None, "0.5"),
    "min.compaction.lag.ms": ("long", None, "0"),
    "min.insync.replicas": ("int", "min.insync.replicas", None),
    "preallocate": ("boolean", None, "false"),
    "retention.bytes": ("long", "log.retention.bytes", None),
    "retention.ms": ("long", "log.retention.ms", None),
    "segment.bytes": ("int", "log.segment.bytes", None),
    "segment.index.bytes": ("int", "log.index.size.max.bytes", None),
    "segment.jitter.ms": ("long", None, "0"),
    "segment.ms": ("long", "log.roll.ms", None),
    "unclean.leader.election.enable": ("boolean", "unclean.leader.election.enable", None),
}


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset Kafka's files use: key=value or key: value, # and ! comments."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                out[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            out[line] = ""
    return out


class BrokerConfig:
    """The broker's effective configuration: Kafka names, string values, typed accessors."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self.explicit: dict[str, str] = dict(values or {})

    @classmethod
    def load(cls, path: Path | None, overrides: Iterable[str] = ()) -> BrokerConfig:
        values = parse_properties(path.read_text(encoding="utf-8")) if path else {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"override {item!r} is not key=value")
            values[key.strip()] = value.strip()
        return cls(values)

    def get(self, name: str) -> str | None:
        if name in self.explicit:
            return self.explicit[name]
        if name == "log.retention.ms":
            return self._derived_ms("log.retention", "ms")
        if name == "log.roll.ms":
            return self._derived_ms("log.roll", "ms")
        d = BROKER_CONFIGS.get(name)
        return d.default if d else None

    def _derived_ms(self, prefix: str, _unit: str) -> str:
        if f"{prefix}.minutes" in self.explicit:
            return str(int(self.explicit[f"{prefix}.minutes"]) * 60_000)
        hours = self.explicit.get(f"{prefix}.hours", BROKER_CONFIGS[f"{prefix}.hours"].default or "168")
        return str(int(hours) * 3_600_000)

    def get_int(self, name: str) -> int:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return int(value)

    def get_bool(self, name: str) -> bool:
        return (self.get(name) or "false").lower() == "true"

    def source(self, name: str) -> str:
        """``STATIC_BROKER_CONFIG`` when set in the file or overrides, ``DEFAULT_CONFIG`` otherwise."""
        return "STATIC_BROKER_CONFIG" if name in self.explicit else "DEFAULT_CONFIG"

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs") or self.get("log.dir") or "./kafkalike-data"
        return [Path(d.strip()) for d in dirs.split(",") if d.strip()]

    def topic_default(self, name: str) -> str | None:
        """The value a topic gets for ``name`` when the topic does not set it."""
        entry = TOPIC_CONFIGS.get(name)
        if entry is None:
            return None
        _, broker_name, fixed = entry
        return self.get(broker_name) if broker_name else fixed


def parse_listener(text: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` or ``host:port`` -> (host, port)."""
    if "://" in text:
        text = text.split("://", 1)[1]
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)
