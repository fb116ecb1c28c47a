"""The broker's effective configuration, with Apache Kafka's names.

Values come from (lowest to highest): the declared defaults (``kafkalike.configs``, one
declaration per config), a ``server.properties`` file, ``--override key=value``, and the dynamic
configs AlterConfigs stores (cluster-wide defaults, then this broker's own). Topic-level configs
default to the broker config they follow (``retention.ms`` <- ``log.retention.ms``...), which is
what DescribeConfigs reports as the source.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from itertools import dropwhile
from pathlib import Path

from kafkalike.configs import (
    BROKER_CONFIGS,
    CONSUMER_GROUP_BOUNDS,
    DECLARED,
    INT_MAX,
    INTERNAL_TOPIC_CONFIGS,
    LONG_MAX,
    TOPIC_CONFIGS,
    config_type,
    is_topic_config,
    synonym_group,
    validate_value,
)
from kafkalike.group.assignors import assignors_from_config
from kafkalike.server.connection_configs import socket_server_problem
from kafkalike.server.listener_config import broker_listener_problem

# The declarations' views, for the modules that have always found them here.
__all__ = [
    "BROKER_CONFIGS",
    "INTERNAL_TOPIC_CONFIGS",
    "INT_MAX",
    "LONG_MAX",
    "TEST_PROFILE",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "config_type",
    "is_topic_config",
    "parse_listener",
    "parse_properties",
    "validate_value",
]

# DescribeConfigs config_source values.
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 4, 5


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

    def check(self) -> None:
        """Refuse static values a broker cannot start with, as Kafka does (a ConfigException, or a
        failed requirement between group.consumer.* settings): raises ValueError, in Kafka's words."""
        for name, value in self.explicit.items():
            problem = validate_value(name, value) if name in BROKER_CONFIGS else None
            if problem is not None:
                raise ValueError(problem)
        problem = socket_server_problem(self) or broker_listener_problem(self)
        if problem is not None:
            raise ValueError(problem)
        for name, relation, other in CONSUMER_GROUP_BOUNDS:
            holds, words = _RELATIONS[relation]
            if not holds(self.get_int(name), self.get_int(other)):
                raise ValueError(f"{name} must be {words} {other}")
        problem = self.requirement_problem()
        if problem is not None:
            raise ValueError(problem)
        assignors_from_config((self.get("group.consumer.assignors") or "").split(","))

    def dynamic_log_problem(self) -> str | None:
        """What Kafka's dynamic broker config check refuses of the local (tiered) retention settings
        against the overall ones, worded as it wraps them ("Invalid dynamic configuration")."""
        for unit, unlimited in (("ms", -1), ("bytes", -1)):
            total, local = self.get_int(f"log.retention.{unit}"), self.get_int(f"log.local.retention.{unit}")
            applies = total != unlimited if unit == "ms" else total > unlimited
            if not applies or local == -2:
                continue
            if local == -1:
                inner = f"Value must not be -1 as log.retention.{unit} value is set as {total}."
            elif local > total:
                inner = f"Value must not be more than log.retention.{unit} property value: {total}"
            else:
                continue
            return (
                f"Invalid value org.apache.kafka.common.config.ConfigException: Invalid value {local} for "
                f"configuration log.local.retention.{unit}: {inner} for configuration Invalid dynamic configuration"
            )
        # Kafka 4.4's DynamicLogConfig: a positive copy lag at most the effective local retention.
        for unit in ("ms", "bytes"):
            local = self.get_int(f"log.local.retention.{unit}")
            effective = self.get_int(f"log.retention.{unit}") if local == -2 else local
            lag = self.get_int(f"log.remote.copy.lag.{unit}")
            if lag > 0 and effective >= 0 and lag > effective:
                return (
                    f"Invalid value org.apache.kafka.common.config.ConfigException: Invalid value {lag} for "
                    f"configuration log.remote.copy.lag.{unit}: Value must not exceed log.local.retention.{unit} "
                    f"(effective value: {effective}) for configuration Invalid dynamic configuration"
                )
        return None

    def requirement_problem(self) -> str | None:
        """What KafkaConfig requires of the settings together, checked at start-up and for every
        dynamic change; None when all hold. In Kafka's words, Scala's ``require`` prefix included."""
        # A negative log.retention.ms means no limit (as -1), so only the roll times are required.
        if self.get_int("log.roll.ms") < 1:
            return "requirement failed: log.roll.ms must be greater than or equal to 1"
        if self.get_int("log.roll.jitter.ms") < 0:
            return "requirement failed: log.roll.jitter.ms must be greater than or equal to 0"
        # One cleaner thread here (Kafka's default log.cleaner.threads), so the whole buffer is its.
        if not self.get_int("log.cleaner.dedupe.buffer.size") > 1024 * 1024:
            return "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
        return None

    def unknown_names(self) -> list[str]:
        """The static configs set that are no broker config kafkalike knows, sorted (Kafka logs
        them as supplied but not used)."""
        return sorted(name for name in self.explicit if name not in BROKER_CONFIGS)

    def get(self, name: str) -> str | None:
        for layer in (self.dynamic_broker, self.dynamic_default, self.explicit):
            if name in layer:
                return layer[name]
        key = DECLARED.get(name)
        if key is None or not key.on_broker:
            return None
        if key.coarser:
            return self._derived_ms(key.coarser)
        return key.default

    def _derived_ms(self, coarser: tuple[str, ...]) -> str:
        """An unset ``*.ms`` config from its minutes or hours form, the first one set, else the
        coarsest one's default (static only: those are read-only)."""
        for unit_name in coarser:
            if unit_name in self.explicit:
                return str(int(self.explicit[unit_name]) * _unit_ms(unit_name))
        coarsest = DECLARED[coarser[-1]]
        return str(int(coarsest.default or "0") * _unit_ms(coarsest.name))

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
        """The layers that set ``name`` or a synonym of it, strongest first: (name, value, source).

        As Kafka lists them: layer by layer, each synonym in turn (``log.retention.ms``, then
        ``.minutes``, then ``.hours``), dropping whatever comes before the first entry for ``name``
        itself. So a value that only a coarser unit sets (the default ``log.retention.hours=168``)
        lists no synonyms for ``log.retention.ms``.
        """
        names = synonym_group(name)
        defaults = {
            n: d.default
            for n in names
            if (d := BROKER_CONFIGS.get(n)) is not None and d.default is not None and not d.listed_when_set
        }  # a config listed only where set has no default synonym (Kafka's dynamic-only ones)
        layers = (
            (self.dynamic_broker, DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.explicit, STATIC_BROKER_CONFIG),
            (defaults, DEFAULT_CONFIG),
        )
        found = [(n, layer[n], source) for layer, source in layers for n in names if n in layer]
        return list(dropwhile(lambda entry: entry[0] != name, found))

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs") or self.get("log.dir") or DECLARED["log.dir"].default or ""
        return [Path(d.strip()) for d in dirs.split(",") if d.strip()]

    def topic_default(self, name: str) -> str | None:
        """The value a topic gets for ``name`` when the topic does not set it."""
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            return None
        value = self.get(key.follows) if key.follows else None
        return key.default if value is None else value


def _unit_ms(name: str) -> int:
    unit_ms = DECLARED[name].unit_ms
    assert unit_ms is not None, name  # declaration_problems checks every coarser unit has one
    return unit_ms


_RELATIONS: dict[str, tuple[Callable[[int, int], bool], str]] = {
    ">=": (operator.ge, "greater than or equal to"),
    "<=": (operator.le, "less than or equal to"),
    "<": (operator.lt, "less than"),
}


# NAME://host:port, where host may be empty (every address) or a bracketed IPv6 address.
_ENDPOINT = re.compile(r"(?:[^:/]*://)?\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)")


def parse_listener(text: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` or ``host:port`` -> (host, port); ValueError in Kafka's words
    (SocketServerConfigs) when it is neither, or the port is not one."""
    match = _ENDPOINT.fullmatch(text.strip())
    if match is None or int(match.group(2)) > 65535:
        raise ValueError(f"Unable to parse {text} to a broker endpoint")
    return match.group(1) or "0.0.0.0", int(match.group(2))
