"""What one config declaration says, and how a value is checked against it.

A ``ConfigKey`` holds every fact of one config: name, type, default, validator, scope, whether a
broker may change it at run time, whether it is sensitive, its synonyms and its documentation.
The validators word their refusals as Kafka's ConfigDef validators do, because clients and the
differential tests compare those messages word for word.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1


class ConfigType(StrEnum):
    """Kafka's ConfigDef types, by the lower-case names kafkalike has always used for them."""

    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    SHORT = "short"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"
    CLASS = "class"
    PASSWORD = "password"


_INTEGER_LIMITS = {ConfigType.INT: INT_MAX, ConfigType.SHORT: SHORT_MAX, ConfigType.LONG: LONG_MAX}


class Scope(StrEnum):
    """Where a config may be set: on the broker, on a topic, or both under one name
    (``compression.type``, ``min.insync.replicas``...; the broker's value is the topics' default)."""

    BROKER = "broker"
    TOPIC = "topic"
    BOTH = "both"


Parsed = bool | int | float | str | list[str]


class Validator(Protocol):
    def problem(self, name: str, value: str, parsed: Parsed) -> str | None:
        """Kafka's message refusing ``value`` (already parsed to the config's type), or None."""
        ...


def _invalid(name: str, value: object) -> str:
    return f"Invalid value {value} for configuration {name}"


def _number(bound: float) -> str:
    # Kafka prints a double's bound as Java does a double; these bounds (0, 1) print as integers here.
    return f"{bound:g}" if isinstance(bound, float) else str(bound)


@dataclass(frozen=True)
class Between:
    """A number in [minimum, maximum]; either end may be open (None). Kafka's Range."""

    minimum: int | float | None = None
    maximum: int | float | None = None

    def problem(self, name: str, value: str, parsed: Parsed) -> str | None:
        assert isinstance(parsed, int | float)
        if self.minimum is not None and parsed < self.minimum:
            return f"{_invalid(name, value)}: Value must be at least {_number(self.minimum)}"
        if self.maximum is not None and parsed > self.maximum:
            return f"{_invalid(name, value)}: Value must be no more than {_number(self.maximum)}"
        return None


def at_least(minimum: int | float) -> Between:
    return Between(minimum, None)


@dataclass(frozen=True)
class BetweenOr:
    """A number in [minimum, maximum] or one extra value (Kafka's compression level ranges)."""

    minimum: int
    maximum: int
    extra: int

    def problem(self, name: str, value: str, parsed: Parsed) -> str | None:
        assert isinstance(parsed, int)
        if self.minimum <= parsed <= self.maximum or parsed == self.extra:
            return None
        return (
            f"{_invalid(name, value)}: Value must be between {self.minimum} and {self.maximum} or equal to {self.extra}"
        )


@dataclass(frozen=True)
class OneOf:
    """The value, or each item of a list, is one of ``choices`` (in the order Kafka's message
    lists them); ``any_case``: compared in upper case, as Kafka's CaseInsensitiveValidString."""

    choices: tuple[str, ...]
    any_case: bool = False
    # Kafka 4.1+ ValidList refuses an item given twice (a broker config's; a topic's cleanup.policy=compact,compact
    # is still accepted by 4.4's CreateTopics and AlterConfigs).
    distinct: bool = False

    def problem(self, name: str, value: str, parsed: Parsed) -> str | None:
        if self.distinct and isinstance(parsed, list) and len(set(parsed)) != len(parsed):
            return f"Configuration '{name}' values must not be duplicated."
        if self.any_case:
            if value.upper() in self.choices:
                return None
            return f"{_invalid(name, value)}: String must be one of (case insensitive): " + ", ".join(self.choices)
        items = parsed if isinstance(parsed, list) else [value]
        # A list names its first bad item; an empty list has none (ValidList).
        bad = next((item for item in items if item not in self.choices), None)
        if bad is None:
            return None
        return f"{_invalid(name, bad)}: String must be one of: {', '.join(self.choices)}"


@dataclass(frozen=True)
class NonEmptyList:
    """A list config that must name something, each item once and none blank, and, with
    ``choices``, each one of them (Kafka 4.1+'s ValidList without empty values, in its order of
    checks: empty, duplicated, a blank item, an unknown item)."""

    choices: tuple[str, ...] = ()

    def problem(self, name: str, value: str, parsed: Parsed) -> str | None:
        items = parsed if isinstance(parsed, list) else list_items(value)
        if not items:
            include = f"[{', '.join(self.choices)}]" if self.choices else "any non-empty value"
            return f"Configuration '{name}' must not be empty. Valid values include: {include}"
        if len(set(items)) != len(items):
            return f"Configuration '{name}' values must not be duplicated."
        if any(not item for item in items):
            return f"Configuration '{name}' values must not be empty."
        bad = next((item for item in items if self.choices and item not in self.choices), None)
        if bad is None:
            return None
        return f"{_invalid(name, bad)}: String must be one of: {', '.join(self.choices)}"


_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


@dataclass(frozen=True)
class ThrottledReplicas:
    """``*`` or partition:broker pairs (Kafka's ThrottledReplicaListValidator)."""

    def problem(self, name: str, value: str, parsed: Parsed) -> str | None:
        assert isinstance(parsed, list)
        if parsed == ["*"] or all(_THROTTLED_REPLICA.fullmatch(item) for item in parsed):
            return None
        return (
            f"Invalid value [{', '.join(parsed)}] for configuration {name}: {name} must be the literal '*' or a "
            "list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )


@dataclass(frozen=True)
class RefusedWhenTrue:
    """A boolean whose ``true`` names a feature kafkalike does not have; ``message`` says so."""

    message: str

    def problem(self, name: str, value: str, parsed: Parsed) -> str | None:
        return self.message if parsed is True else None


# Utils.HOST_PORT_PATTERN: an optional scheme, a host (bracketed for IPv6), a port.
_HOST_PORT = re.compile(r"(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _java_split(text: str, separator: str) -> list[str]:
    """String.split: trailing empty strings dropped (but "" stays [""])."""
    parts = text.split(separator)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class QuorumVoters:
    """``{id}@{host}:{port}`` entries, as Kafka's ControllerQuorumVotersValidator parses them."""

    def problem(self, name: str, value: str, parsed: Parsed) -> str | None:
        assert isinstance(parsed, list)
        form = "Each entry should be in the form `{id}@{host}:{port}`."
        for entry in parsed:
            id_and_address = _java_split(entry, "@")
            if len(id_and_address) != 2:
                return f"Invalid configuration value for {name}. {form}"
            voter_id, address = id_and_address
            if not _JAVA_INT.fullmatch(voter_id) or not -INT_MAX - 1 <= int(voter_id) <= INT_MAX:
                return f"Failed to parse voter ID as an integer from {voter_id}"
            if _HOST_PORT.fullmatch(address) is None:
                return f"Failed to parse host name from entry {entry} for the configuration {name}. {form}"
        return None


@dataclass(frozen=True)
class QuorumBootstrapServers:
    """``{host}:{port}`` entries, as Kafka's ControllerQuorumBootstrapServersValidator parses them."""

    def problem(self, name: str, value: str, parsed: Parsed) -> str | None:
        assert isinstance(parsed, list)
        for entry in parsed:
            if _HOST_PORT.fullmatch(entry) is None:
                return (
                    f"Failed to parse host name from {entry} for the configuration {name}. Each entry should be "
                    'in the form "{host}:{port}"'
                )
        return None


def list_items(value: str) -> list[str]:
    """A list config's items as Kafka's ConfigDef parses them: comma-separated, trimmed, and
    empty for an empty (or all-blank) value."""
    return [item.strip() for item in value.split(",")] if value.strip() else []


def parse(type_: ConfigType, value: str) -> Parsed:
    """``value`` as a value of ``type_``; ValueError when it is none."""
    if type_ in _INTEGER_LIMITS:
        number = int(value.strip())
        limit = _INTEGER_LIMITS[type_]
        if not -limit - 1 <= number <= limit:
            raise ValueError(value)
        return number
    if type_ == ConfigType.DOUBLE:
        ratio = float(value)
        if not math.isfinite(ratio):
            # Kafka's Range lets NaN through; no setting means anything with it, so it is refused here.
            raise ValueError(value)
        return ratio
    if type_ == ConfigType.BOOLEAN:
        word = value.strip().lower()
        if word not in ("true", "false"):
            raise _NotABoolean(value)
        return word == "true"
    if type_ == ConfigType.LIST:
        return list_items(value)
    return value


class _NotABoolean(ValueError):
    pass


@dataclass(frozen=True)
class ConfigKey:
    """One config, declared once.

    ``broker_synonym`` (topic scope): the broker config an unset topic value follows
    (``retention.ms`` follows ``log.retention.ms``); a config of scope BOTH follows itself.
    ``coarser`` (a broker ``*.ms`` config): the same setting in coarser units, finest first, each
    declared with its ``unit_ms``; the first one set decides when this one is unset, and
    DescribeConfigs lists them all as synonyms. ``dynamic``: AlterConfigs may change it on a
    running broker (Kafka's DynamicBrokerConfig); otherwise it is read-only there.
    ``internal``: a topic config listed only by the topics that set it, or a broker config never
    listed by DescribeConfigs (Kafka's internal configs); either is still read.
    ``implemented``: False for a config declared with Kafka's facts before kafkalike acts on it;
    until then it is, as before, not listed, not alterable and "supplied but not used" at start-up.
    ``listed_when_set``: a broker config DescribeConfigs lists only where it is set, without
    documentation (Kafka's dynamic-only broker configs, the replication throttle rates).
    """

    name: str
    type: ConfigType
    default: str | None
    doc: str
    validator: Validator | None = None
    scope: Scope = Scope.BROKER
    dynamic: bool = False
    sensitive: bool = False
    broker_synonym: str | None = None
    coarser: tuple[str, ...] = ()
    unit_ms: int | None = None
    internal: bool = False
    implemented: bool = True
    listed_when_set: bool = False

    @property
    def on_broker(self) -> bool:
        return self.scope in (Scope.BROKER, Scope.BOTH)

    @property
    def on_topic(self) -> bool:
        return self.scope in (Scope.TOPIC, Scope.BOTH)

    @property
    def follows(self) -> str | None:
        """The broker config whose value a topic that does not set this one gets."""
        return self.name if self.scope == Scope.BOTH else self.broker_synonym

    def validate(self, value: str | None) -> str | None:
        """None when ``value`` is acceptable, else Kafka's message for it."""
        if value is None:
            return f"Null value not supported for config {self.name}"
        try:
            parsed = parse(self.type, value)
        except _NotABoolean:
            return f"{_invalid(self.name, value)}: Expected value to be either true or false"
        except ValueError:
            return f"{_invalid(self.name, value)}: Not a number of type {self.type.upper()}"
        return None if self.validator is None else self.validator.problem(self.name, value, parsed)

    def default_value(self) -> Parsed | None:
        """The default parsed to the config's type (None when there is no default)."""
        return None if self.default is None else parse(self.type, self.default)


def declaration_problems(keys: Sequence[ConfigKey]) -> list[str]:
    """What is wrong with a set of declarations taken together: duplicate names, a synonym or
    coarser unit that is not declared or not on the broker, a default its own validator refuses,
    a missing doc. Empty when they hold together."""
    problems: list[str] = []
    by_name: dict[str, ConfigKey] = {}
    for key in keys:
        if key.name in by_name:
            problems.append(f"{key.name}: declared twice")
        by_name[key.name] = key
    for key in keys:
        problems += [f"{key.name}: {p}" for p in _key_problems(key, by_name.get)]
    return problems


def _key_problems(key: ConfigKey, lookup: Callable[[str], ConfigKey | None]) -> list[str]:
    problems = []
    if not key.doc.strip():
        problems.append("no documentation")
    if key.default is not None and key.validate(key.default) is not None:
        problems.append(f"default refused by its own declaration: {key.validate(key.default)}")
    if key.sensitive != (key.type == ConfigType.PASSWORD):
        problems.append("sensitive exactly when a password")
    if key.broker_synonym is not None:
        synonym = lookup(key.broker_synonym)
        if key.scope != Scope.TOPIC or synonym is None or not synonym.on_broker:
            problems.append(f"broker synonym {key.broker_synonym} is no broker config of a topic config")
    if key.internal and key.scope == Scope.BOTH:
        problems.append("an internal config is a topic's or a broker's, not both")
    if key.dynamic and not key.on_broker:
        problems.append("only a broker config can be dynamic")
    for coarser_name in key.coarser:
        coarser = lookup(coarser_name)
        if coarser is None or coarser.unit_ms is None or not coarser.on_broker:
            problems.append(f"coarser unit {coarser_name} is not declared with its unit_ms")
    return problems
