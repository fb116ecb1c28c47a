"""Every config kafkalike knows, declared once, with Apache Kafka's names, types, defaults and
validators, in one module per area: ``broker``, ``network``, ``log`` (the broker's log settings),
``topic``, ``quorum``, ``replication``, ``group``, ``txn``. Adding a config is adding one
``ConfigKey`` to its area's tuple; everything else (DescribeConfigs with its synonyms and
documentation, AlterConfigs and IncrementalAlterConfigs, CreateTopics' configs, start-up parsing
and the unknown-config warning, ``LogConfig``'s defaults) reads the views below.

Why a package of its own, at the bottom of the layers: the topic configs are needed by
``kafkalike.log`` (``LogConfig``), the broker configs by the coordinators and the server, so the
declarations sit below every layer that reads them. They are plain data with no I/O, and import
nothing of kafkalike, so any layer may read them (the import-linter contract in pyproject.toml
holds them there).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kafkalike.configs.broker import BROKER
from kafkalike.configs.declaration import (
    INT_MAX,
    LONG_MAX,
    ConfigKey,
    ConfigType,
    Scope,
    declaration_problems,
    list_items,
)
from kafkalike.configs.group import CONSUMER_GROUP_BOUNDS, GROUP
from kafkalike.configs.log import LOG, MIN_SEGMENT_BYTES
from kafkalike.configs.network import NETWORK
from kafkalike.configs.quorum import QUORUM
from kafkalike.configs.replication import REPLICATION
from kafkalike.configs.topic import INTERNAL_SEGMENT_BYTES, SMALLEST_SEGMENT_BYTES, TOPIC
from kafkalike.configs.txn import TXN

__all__ = [
    "ALL_KEYS",
    "BROKER_CONFIGS",
    "CONSUMER_GROUP_BOUNDS",
    "DECLARED",
    "INTERNAL_SEGMENT_BYTES",
    "INTERNAL_TOPIC_CONFIGS",
    "INT_MAX",
    "LISTED_BROKER_CONFIGS",
    "LONG_MAX",
    "MIN_SEGMENT_BYTES",
    "SMALLEST_SEGMENT_BYTES",
    "TOPIC_CONFIGS",
    "ConfigKey",
    "ConfigType",
    "Scope",
    "config_type",
    "declared_int",
    "is_topic_config",
    "list_items",
    "synonym_group",
    "validate_value",
]

ALL_KEYS: tuple[ConfigKey, ...] = (*BROKER, *NETWORK, *LOG, *TOPIC, *QUORUM, *REPLICATION, *GROUP, *TXN)
_problems = declaration_problems(ALL_KEYS)
if _problems:  # a broken declaration is a bug to stop at import, not a config to half-honour
    raise AssertionError("bad config declarations:\n" + "\n".join(_problems))

# Every declaration, implemented or not.
DECLARED: Mapping[str, ConfigKey] = MappingProxyType({key.name: key for key in ALL_KEYS})
# The broker configs a broker lists, takes at start-up and (the dynamic ones) alters.
BROKER_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType(
    {key.name: key for key in ALL_KEYS if key.on_broker and key.implemented}
)
# The broker configs DescribeConfigs lists: all but the internal ones.
LISTED_BROKER_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType(
    {name: key for name, key in BROKER_CONFIGS.items() if not key.internal and not key.listed_when_set}
)
# The topic configs every topic lists, and the internal ones listed only where a topic sets them.
TOPIC_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType(
    {key.name: key for key in ALL_KEYS if key.on_topic and not key.internal}
)
INTERNAL_TOPIC_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType(
    {key.name: key for key in ALL_KEYS if key.on_topic and key.internal}
)


def _synonym_groups() -> dict[str, tuple[str, ...]]:
    groups: dict[str, tuple[str, ...]] = {}
    for key in ALL_KEYS:
        if key.coarser:
            group = (key.name, *key.coarser)
            groups.update((name, group) for name in group)
    return groups


_SYNONYM_GROUPS = _synonym_groups()


def synonym_group(name: str) -> tuple[str, ...]:
    """The broker configs that are one setting in different units, finest first
    (``log.retention.ms``, ``.minutes``, ``.hours``); ``(name,)`` for a config that has none."""
    return _SYNONYM_GROUPS.get(name, (name,))


def declared_int(name: str) -> int:
    """The declared default of integer config ``name``, for the settings objects that carry it
    (``LogConfig``, the coordinators' configs) to default to."""
    default = DECLARED[name].default_value()
    assert isinstance(default, int) and not isinstance(default, bool), name
    return default


def is_topic_config(name: str) -> bool:
    """Whether a topic may set ``name`` (a public or an internal topic config)."""
    return name in TOPIC_CONFIGS or name in INTERNAL_TOPIC_CONFIGS


def _known(name: str) -> ConfigKey | None:
    return TOPIC_CONFIGS.get(name) or INTERNAL_TOPIC_CONFIGS.get(name) or BROKER_CONFIGS.get(name)


def config_type(name: str) -> ConfigType | None:
    """The type of a config a topic or this broker takes; None for any other name."""
    key = _known(name)
    return key.type if key else None


def validate_value(name: str, value: str | None) -> str | None:
    """None when ``value`` is acceptable for config ``name``, else Kafka's message for it (as its
    ConfigDef validators word them)."""
    key = _known(name)
    if key is None:
        return f"Unknown config name: {name}"
    return key.validate(value)
