"""The config declarations (kafkalike.configs): each one complete and consistent with the others,
the views every consumer reads, the validators Kafka's words come from, and the configs declared
before kafkalike acts on them staying out of sight until it does."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from kafkalike.configs import (
    ALL_KEYS,
    BROKER_CONFIGS,
    DECLARED,
    INTERNAL_TOPIC_CONFIGS,
    TOPIC_CONFIGS,
    ConfigKey,
    ConfigType,
    Scope,
    config_type,
    synonym_group,
    validate_value,
)
from kafkalike.configs.declaration import declaration_problems
from kafkalike.log.config import LogConfig
from kafkalike.server.config import BrokerConfig


def test_the_declarations_hold_together() -> None:
    assert declaration_problems(ALL_KEYS) == []
    assert len(DECLARED) == len(ALL_KEYS)


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_every_config_has_a_type_a_default_it_accepts_and_a_doc_line(name: str) -> None:
    key = DECLARED[name]
    assert isinstance(key.type, ConfigType)
    assert key.default is None or key.validate(key.default) is None
    doc = key.doc
    assert doc.strip() and doc == doc.strip() and doc.endswith("."), repr(doc)
    assert len(re.split(r"(?<=[.;])\s+(?=[A-Z])", doc)) <= 2, "one or two sentences"
    assert "<" not in doc and "\n" not in doc, "plain text on one line, no markup"


def _key(name: str = "x.ms", **changes: object) -> ConfigKey:
    return replace(ConfigKey(name, ConfigType.LONG, "1", "A setting."), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ([_key(), _key()], "x.ms: declared twice"),
        ([_key(doc=" ")], "x.ms: no documentation"),
        ([_key(default="soon")], "x.ms: default refused by its own declaration"),
        ([_key(scope=Scope.TOPIC, broker_synonym="log.x.ms")], "x.ms: broker synonym log.x.ms"),
        ([_key(coarser=("x.hours",)), _key("x.hours", type=ConfigType.INT)], "x.ms: coarser unit x.hours"),
        ([_key(scope=Scope.TOPIC, dynamic=True)], "x.ms: only a broker config can be dynamic"),
        ([_key(scope=Scope.BOTH, internal=True)], "x.ms: an internal config is a topic's or a broker's"),
        ([_key(type=ConfigType.PASSWORD, default=None)], "x.ms: sensitive exactly when a password"),
    ],
)
def test_a_bad_declaration_is_caught(keys: list[ConfigKey], problem: str) -> None:
    """Negative control for the check above: each kind of mistake is named."""
    assert any(found.startswith(problem) for found in declaration_problems(keys)), declaration_problems(keys)


def test_the_views() -> None:
    # A config with one name on the broker and the topic is one declaration in both views.
    assert BROKER_CONFIGS["compression.type"] is TOPIC_CONFIGS["compression.type"]
    assert TOPIC_CONFIGS["compression.type"].follows == "compression.type"
    assert TOPIC_CONFIGS["retention.ms"].follows == "log.retention.ms"
    assert TOPIC_CONFIGS["remote.storage.enable"].follows is None
    assert "retention.ms" not in BROKER_CONFIGS and "log.retention.ms" not in TOPIC_CONFIGS
    assert set(INTERNAL_TOPIC_CONFIGS) == {"internal.segment.bytes"}
    assert synonym_group("log.retention.minutes") == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert synonym_group("log.roll.hours") == ("log.roll.ms", "log.roll.hours")
    assert synonym_group("message.max.bytes") == ("message.max.bytes",)
    assert not BROKER_CONFIGS["log.retention.hours"].dynamic and BROKER_CONFIGS["log.retention.ms"].dynamic


# Issue 14's names and Kafka's defaults for the quorum and the cluster to come.
QUORUM_DEFAULTS = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.backoff.max.ms": "1000",
    "metadata.log.max.record.bytes.between.snapshots": "20971520",
    "metadata.log.max.snapshot.interval.ms": "3600000",
}


def test_the_broker_lifecycle_configs_are_read_and_listed() -> None:
    for name, default in {
        "broker.heartbeat.interval.ms": "2000",
        "broker.session.timeout.ms": "9000",
        "initial.broker.registration.timeout.ms": "60000",
        "broker.rack": None,
        "replica.lag.time.max.ms": "30000",
        "replica.fetch.wait.max.ms": "500",
        "replica.high.watermark.checkpoint.interval.ms": "5000",
    }.items():
        key = BROKER_CONFIGS[name]
        assert (key.default, key.implemented, key.dynamic) == (default, True, False), name
    assert validate_value("broker.session.timeout.ms", "x") is not None
    assert BrokerConfig({"broker.heartbeat.interval.ms": "500"}).get_int("broker.heartbeat.interval.ms") == 500


def test_configs_declared_ahead_change_nothing_yet() -> None:
    for name, default in QUORUM_DEFAULTS.items():
        key = DECLARED[name]
        assert (key.default, key.implemented, key.dynamic) == (default, False, False), name
        # As before the declaration: not listed, not alterable, not a topic's, not used at start-up.
        assert name not in BROKER_CONFIGS and config_type(name) is None
        assert validate_value(name, "1") == f"Unknown config name: {name}"
    config = BrokerConfig({"controller.quorum.election.timeout.ms": "500", "node.id": "1"})
    assert config.unknown_names() == ["controller.quorum.election.timeout.ms"]
    config.check()  # a value it does not act on is not refused either
    # What the quorum reads once it exists: the value set, else Kafka's default.
    assert config.get_int("controller.quorum.election.timeout.ms") == 500
    assert config.get_int("controller.quorum.fetch.timeout.ms") == 2000


VOTERS = "controller.quorum.voters"
FORM = "Each entry should be in the form `{id}@{host}:{port}`."


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1@localhost:9093,2@[::1]:9094, 3@CONTROLLER://h-3.example:1", None),
        ("", None),
        ("1@localhost:9093,bogus", f"Invalid configuration value for {VOTERS}. {FORM}"),
        ("1@a:1@b:2", f"Invalid configuration value for {VOTERS}. {FORM}"),
        ("x@localhost:9093", "Failed to parse voter ID as an integer from x"),
        ("@localhost:9093", "Failed to parse voter ID as an integer from "),
        ("1@localhost", f"Failed to parse host name from entry 1@localhost for the configuration {VOTERS}. {FORM}"),
        (
            "1@local host:1",
            f"Failed to parse host name from entry 1@local host:1 for the configuration {VOTERS}. {FORM}",
        ),
    ],
)
def test_quorum_voters_as_kafka_parses_them(value: str, problem: str | None) -> None:
    assert DECLARED[VOTERS].validate(value) == problem


def test_quorum_bootstrap_servers_as_kafka_parses_them() -> None:
    key = DECLARED["controller.quorum.bootstrap.servers"]
    assert key.validate("localhost:9093, [::1]:9094") is None
    assert key.validate("localhost:9093,nowhere") == (
        "Failed to parse host name from nowhere for the configuration controller.quorum.bootstrap.servers. "
        'Each entry should be in the form "{host}:{port}"'
    )


def test_log_config_defaults_are_the_declared_topic_defaults() -> None:
    held = LogConfig().to_properties()
    assert {name: DECLARED[name].default for name in held} == held
    assert {name for name in held if name in TOPIC_CONFIGS} == set(held) - {"producer.id.expiration.ms"}


def test_a_value_is_checked_by_its_declaration() -> None:
    assert validate_value("segment.index.bytes", "3") == (
        "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"
    )
    assert validate_value("compression.gzip.level", "0") == (
        "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"
    )
    assert validate_value("min.cleanable.dirty.ratio", "1.5") == (
        "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
    )
    assert validate_value("cleanup.policy", "compact, shred") == (
        "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"
    )
    assert validate_value("group.consumer.migration.policy", "Upgrade") is None
    assert validate_value("preallocate", "yes") == (
        "Invalid value yes for configuration preallocate: Expected value to be either true or false"
    )
    assert validate_value("offsets.topic.replication.factor", "32768") == (
        "Invalid value 32768 for configuration offsets.topic.replication.factor: Not a number of type SHORT"
    )
    assert validate_value("retention.ms", None) == "Null value not supported for config retention.ms"


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("listeners", "PLAINTEXT://h:1", None),
        ("listeners", "", "Configuration 'listeners' must not be empty. Valid values include: any non-empty value"),
        ("listeners", " ", "Configuration 'listeners' must not be empty. Valid values include: any non-empty value"),
        ("log.dirs", "/a,/a", "Configuration 'log.dirs' values must not be duplicated."),
        ("log.dirs", "/a,", "Configuration 'log.dirs' values must not be empty."),
        ("log.dirs", ",", "Configuration 'log.dirs' values must not be duplicated."),
        (
            "process.roles",
            "",
            "Configuration 'process.roles' must not be empty. Valid values include: [broker, controller]",
        ),
        ("process.roles", "broker,bogus,broker", "Configuration 'process.roles' values must not be duplicated."),
        ("process.roles", ",broker", "Configuration 'process.roles' values must not be empty."),
        (
            "process.roles",
            "broker,bogus",
            "Invalid value bogus for configuration process.roles: String must be one of: broker, controller",
        ),
        ("controller.listener.names", "A, B", None),
    ],
)
def test_list_configs_name_something_each_once(name: str, value: str, problem: str | None) -> None:
    """Kafka 4.1+'s ValidList: the words of the 4.4 ConfigDef for each (checked by the
    differential config_bounds tests)."""
    assert DECLARED[name].type == ConfigType.LIST
    assert DECLARED[name].validate(value) == problem
