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
INT_MAX = 2**31 - 1

# DescribeConfigs config_source values.
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 4, 5


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
    ConfigDef("log.cleaner.enable", "boolean", "true"),
    ConfigDef("log.cleaner.backoff.ms", "long", "15000", read_only=False),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", "134217728", read_only=False),
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
    ConfigDef("group.max.size", "int", "2147483647"),
    ConfigDef("offsets.retention.minutes", "int", "10080"),
    ConfigDef("offsets.retention.check.interval.ms", "long", "600000"),
    ConfigDef("offsets.topic.segment.bytes", "int", "104857600"),
    ConfigDef("offset.metadata.max.bytes", "int", "4096"),
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
    "flush.ms": ("long", "log.flush.interval.ms", str(LONG_MAX)),
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


# For test suites, like a dev-container broker: topics appear on first use, groups form at
# once, small internal topics.
TEST_PROFILE = {
    "auto.create.topics.enable": "true",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "100",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "log.retention.check.interval.ms": "1000",
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
        # Set at run time through AlterConfigs, kept in the metadata log: per this broker, and
        # cluster-wide defaults. They win over the static file.
        self.dynamic_broker: dict[str, str] = {}
        self.dynamic_default: dict[str, str] = {}

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
        for layer in (self.dynamic_broker, self.dynamic_default, self.explicit):
            if name in layer:
                return layer[name]
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

    def source(self, name: str) -> int:
        """Where the effective value comes from, as DescribeConfigs' config_source numbers it."""
        if name in self.dynamic_broker:
            return DYNAMIC_BROKER_CONFIG
        if name in self.dynamic_default:
            return DYNAMIC_DEFAULT_BROKER_CONFIG
        return STATIC_BROKER_CONFIG if name in self.explicit else DEFAULT_CONFIG

    def synonyms(self, name: str) -> list[tuple[str, str | None, int]]:
        """Every layer that sets ``name``, strongest first: (name, value, source)."""
        out: list[tuple[str, str | None, int]] = []
        layers = (
            (self.dynamic_broker, DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.explicit, STATIC_BROKER_CONFIG),
        )
        for layer, source in layers:
            if name in layer:
                out.append((name, layer[name], source))
        d = BROKER_CONFIGS.get(name)
        default = d.default if d else None
        if name == "log.retention.ms" and default is None:
            default = str(int(BROKER_CONFIGS["log.retention.hours"].default or "168") * 3_600_000)
        if name == "log.roll.ms" and default is None:
            default = str(int(BROKER_CONFIGS["log.roll.hours"].default or "168") * 3_600_000)
        if default is not None:
            out.append((name, default, DEFAULT_CONFIG))
        return out

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
        value = self.get(broker_name) if broker_name else None
        return fixed if value is None else value


def parse_listener(text: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` or ``host:port`` -> (host, port)."""
    if "://" in text:
        text = text.split("://", 1)[1]
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


_CHOICES = {
    "cleanup.policy": {"delete", "compact"},
    "compression.type": {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
    "message.timestamp.type": {"CreateTime", "LogAppendTime"},
    "log.cleanup.policy": {"delete", "compact"},
    "log.message.timestamp.type": {"CreateTime", "LogAppendTime"},
}
# Smallest accepted values, as Kafka's ConfigDef validators state them.
_AT_LEAST = {
    "segment.bytes": 14,
    "log.segment.bytes": 14,
    "segment.ms": 1,
    "segment.index.bytes": 4,
    "retention.ms": -1,
    "retention.bytes": -1,
    "log.retention.bytes": -1,
    "max.message.bytes": 0,
    "message.max.bytes": 0,
    "min.insync.replicas": 1,
    "flush.messages": 1,
    "flush.ms": 0,
    "index.interval.bytes": 0,
    "delete.retention.ms": 0,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 1,
    "file.delete.delay.ms": 0,
    "segment.jitter.ms": 0,
    "num.partitions": 1,
    "log.retention.ms": -1,
}


def config_type(name: str) -> str | None:
    if name in TOPIC_CONFIGS:
        return TOPIC_CONFIGS[name][0]
    d = BROKER_CONFIGS.get(name)
    return d.type if d else None


def validate_value(name: str, value: str | None) -> str | None:
    """None when ``value`` is acceptable for config ``name``, else Kafka's kind of message."""
    type_ = config_type(name)
    if type_ is None:
        return f"Unknown config name: {name}"
    if value is None:
        return f"Null value not supported for config {name}"
    try:
        if type_ in ("int", "long", "short"):
            number = int(value.strip())
            limit = {"int": INT_MAX, "short": 2**15 - 1, "long": LONG_MAX}[type_]
            if not -limit - 1 <= number <= limit:
                raise ValueError
            if number < _AT_LEAST.get(name, -limit - 1):
                return f"Invalid value {value} for configuration {name}: Value must be at least {_AT_LEAST[name]}"
        elif type_ == "double":
            float(value)
        elif type_ == "boolean" and value.strip().lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        return f"Invalid value {value} for configuration {name}: Not a number of type {type_.upper()}"
    choices = _CHOICES.get(name)
    if choices is not None:
        items = [v.strip() for v in value.split(",")] if type_ == "list" else [value]
        bad = [v for v in items if v not in choices]
        if bad or not items:
            return (
                f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(sorted(choices))}"
            )
    return None
