"""Every declared config at its boundaries, kafkalike against Apache Kafka: the same error code and
the same error message, word for word.

The configs come from kafkalike's declarations (``kafkalike.configs``), so a config added there is
covered here without more code. The values come from both sides' bounds: kafkalike's validators
(``Between``, ``OneOf``...) and Kafka's own ConfigDef validators, read from the jars by
ConfigDefOracle.java: min-1, min, max, max+1, a number past the type's range, a word where a number
belongs, each enum value and a bad one. Every declared default is Kafka's, where kafkalike does
not differ on purpose (``OWN_DEFAULTS``).

- topic configs: CreateTopics (validate_only) and IncrementalAlterConfigs on a topic;
- dynamic broker configs: IncrementalAlterConfigs on the broker resource (validate_only);
- static broker configs, whose bounds Kafka checks only at start-up, and the configs declared
  before kafkalike implements them: kafkalike's check against what Kafka's ConfigDef says of the
  same value (no second JVM broker started per value).

The topic config segment.bytes takes 1048576 and up, as in Kafka 4.1+ (KIP-1030). Against a 4.0
broker, which still takes 14 and up, the comparison expects kafkalike below 1048576 to refuse with
4.1's message (``refused_since_4_1`` in conftest.py) and 4.0 to accept from 14 up and refuse
below, and says so when either stops doing it; against 4.1+ both answer alike.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.conftest import (
    AK_BEFORE_4_1,
    AK_LIB,
    CONFIGS_SINCE_4_1,
    SEGMENT_BYTES_MIN_BEFORE_4_1,
    Pair,
    create_topics_body,
    refused_since_4_1,
    topic_spec,
)
from kafkalike.configs import BROKER_CONFIGS, DECLARED, INTERNAL_SEGMENT_BYTES, TOPIC_CONFIGS, ConfigKey
from kafkalike.configs.declaration import Between, BetweenOr, OneOf
from kafkalike.testing.apache_kafka import java_executable

pytestmark = pytest.mark.differential

TOPIC, BROKER = 2, 4
SET = 0
ORACLE = Path(__file__).with_name("ConfigDefOracle.java")
TYPE_LIMITS = {"short": 2**15, "int": 2**31, "long": 2**63}
# Where kafkalike differs on purpose, (config, value) -> why; the test checks that it still does.
DELIBERATE = {
    ("min.cleanable.dirty.ratio", "NaN"): "Kafka's Range lets NaN through (every comparison is false); no log "
    "can be cleaned by a NaN ratio, so kafkalike refuses it as not a number",
    ("log.cleaner.min.cleanable.ratio", "NaN"): "as min.cleanable.dirty.ratio",
}
# Broker configs Kafka changes at run time and kafkalike does not (it says so: read_only).
STATIC_HERE = {
    "listeners": "Kafka adds and removes listeners at run time; kafkalike binds them once, at start-up",
    "listener.security.protocol.map": "as listeners: the protocols of listeners bound once, at start-up",
}
# kafkalike's own configs, which Apache Kafka does not have.
KAFKALIKE_ONLY = {"cluster.id": "Kafka takes the cluster id from kafka-storage format; kafkalike may take it here"}
# Declared defaults that differ from Kafka's on purpose, and why.
OWN_DEFAULTS = {
    "node.id": "a single node runs without a configured id, as node 1 (Kafka requires one)",
    "process.roles": "a node is broker and controller unless told otherwise (Kafka requires the roles)",
    "listeners": "loopback only unless told otherwise (Kafka listens on every address)",
    "log.dir": "a directory beside the working directory rather than under /tmp",
}
if not AK_BEFORE_4_1:  # 4.0's default was null, as kafkalike's
    OWN_DEFAULTS["controller.listener.names"] = (
        "a single node runs without a controller listener unless told otherwise (Kafka 4.1+ requires the names)"
    )
# Kafka 4.1+'s configs, which 4.0 jars do not declare.
SINCE_4_1 = {INTERNAL_SEGMENT_BYTES, *CONFIGS_SINCE_4_1} if AK_BEFORE_4_1 else set()
# Static configs that are lists since 4.1 (4.0: strings).
LISTS_SINCE_4_1 = {"advertised.listeners", "controller.listener.names", "listeners", "log.dir", "log.dirs"}
# Static configs whose bounds kafkalike takes from Kafka 4.4 where 4.0 had none or a lower floor:
# against 4.0, kafkalike refusing a value of these that 4.0 takes (or refuses in other words) is
# expected (FINDINGS.md N7, N14).
TIGHTENED_AFTER_4_0 = {
    "controller.quorum.append.linger.ms",
    "controller.quorum.election.backoff.max.ms",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms",
    "controller.quorum.retry.backoff.ms",
    "metadata.log.segment.bytes",
    "num.replica.fetchers",
    *LISTS_SINCE_4_1,
    "group.consumer.assignors",  # 4.1+: not empty, no duplicates
    "process.roles",
}
# Values worth trying beyond the bounds, for validators that parse a format.
FORMAT_VALUES = {
    "controller.quorum.voters": ["1@localhost:9093,2@[::1]:9094", "1@localhost", "x@h:1", "@h:1", "1@a:1@b:2", "1@"],
    "controller.quorum.bootstrap.servers": ["localhost:9093,[::1]:9094", "localhost", "h:1,nowhere"],
}


def oracle(lines: Iterable[str]) -> list[str]:
    """ConfigDefOracle.java's answer to each line, in order."""
    asked = list(lines)
    result = subprocess.run(
        [java_executable(), "-cp", str(Path(AK_LIB) / "*"), str(ORACLE)],
        input="".join(f"{line}\n" for line in asked),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answers = result.stdout.splitlines()
    assert len(answers) == len(asked), result.stderr
    return answers


def _kafka_bounds(validator: str) -> list[tuple[str | None, str | None]]:
    """(min, max) pairs a ConfigDef validator states: "[1,...]", "[0,...,1]", "[1,...,9] or -1"."""
    return [(low or None, high or None) for low, high in re.findall(r"\[(-?[\d.]*),\.\.\.,?(-?[\d.]*)\]", validator)]


def _kafka_choices(validator: str) -> list[str]:
    match = re.fullmatch(r"\[([A-Za-z]+(?:, [A-Za-z]+)*)\]", validator)
    return match.group(1).split(", ") if match else []


def _declared_minimum(key: ConfigKey) -> int | None:
    bounds = key.validator
    if isinstance(bounds, Between) and isinstance(bounds.minimum, int):
        return bounds.minimum
    return bounds.minimum if isinstance(bounds, BetweenOr) else None


def _declared_choices(key: ConfigKey) -> tuple[str, ...]:
    choices = key.validator
    return choices.choices if isinstance(choices, OneOf) and not choices.any_case else ()


def boundary_values(name: str, type_: str, kafka_validator: str) -> list[str]:
    """The values worth trying for one config, from both sides' declared bounds."""
    key = DECLARED[name]
    values: list[str] = list(FORMAT_VALUES.get(name, ()))
    if type_ in TYPE_LIMITS:
        limit = TYPE_LIMITS[type_]
        minimum = _declared_minimum(key)
        lows = {-limit, -limit if minimum is None else minimum}
        highs = {limit - 1}
        for low, high in _kafka_bounds(kafka_validator):
            lows |= {int(low)} if low else set()
            highs |= {int(high)} if high else set()
        for extra in re.findall(r"or (-?\d+)", kafka_validator):  # "[1,...,9] or -1"
            lows.add(int(extra))
        for number in sorted(
            {n for low in lows for n in (low - 1, low)} | {n for high in highs for n in (high, high + 1)}
        ):
            values.append(str(number))
        values += ["12abc", "1.5"]
    elif type_ == "double":
        bounds = key.validator if isinstance(key.validator, Between) else Between(0.0, 1.0)
        low, high = float(bounds.minimum or 0.0), float(1.0 if bounds.maximum is None else bounds.maximum)
        values += [str(v) for v in (low - 0.25, low, high, high + 0.25)] + ["0.5x", "NaN"]
    elif type_ == "boolean":
        values += ["true", "false", "TRUE", "yes", ""]
    else:
        choices = sorted(set(_declared_choices(key)) | set(_kafka_choices(kafka_validator)))
        values += [*choices, "bogus", ""]
        if type_ == "list" and choices:
            values += [",".join(choices), f"{choices[0]},bogus", f" {choices[0]} ", f"{choices[0]},{choices[0]}"]
    return list(dict.fromkeys(values))


def _kafka_type(answer: str) -> tuple[str, str]:
    if answer == "?":
        return "?", "-"
    type_, validator = answer.split("\t", 1)
    return type_.lower(), validator


@pytest.fixture(scope="module")
def kafka_declarations() -> dict[tuple[str, str], tuple[str, str]]:
    """(kind, name) -> (Kafka's type, Kafka's validator) for every config kafkalike declares."""
    asked = [("topic", name) for name in TOPIC_CONFIGS] + [
        ("broker", name) for name, key in DECLARED.items() if key.on_broker
    ]
    answers = oracle(f"{kind}\t{name}" for kind, name in asked)
    return {key: _kafka_type(answer) for key, answer in zip(asked, answers, strict=True)}


def _cases(kind: str, kafka: dict[tuple[str, str], tuple[str, str]], name: str, found: list[str]) -> list[str]:
    """The values to try; a config whose declaration differs from Kafka's is a difference too."""
    ak_type, validator = kafka[(kind, name)]
    ours = DECLARED[name].type
    if name in SINCE_4_1:
        return []  # nothing to compare with in 4.0
    if ak_type == "?":
        found.append(f"{name}: Apache Kafka declares no such {kind} config")
        return []
    if ours != ak_type and not (AK_BEFORE_4_1 and name in LISTS_SINCE_4_1 and ak_type == "string"):
        found.append(f"{name}: kafkalike declares type {ours}, Apache Kafka {ak_type}")
    return boundary_values(name, ak_type, validator)


@pytest.fixture(scope="module")
def topic(pair: Pair, name: Callable[[str], str]) -> str:
    topic = name("bounds")
    pair.create_topic(topic)
    return topic


@pytest.fixture(scope="module")
def name() -> Callable[[str], str]:
    """Topic names for this module, the same on both brokers."""
    suffix = uuid.uuid4().hex[:6]
    return lambda tag: f"d-config-{tag}-{suffix}"


def _outcome(entry: Any) -> tuple[int, str | None]:
    return entry.error_code, entry.error_message


def _compare(
    name: str, value: str, ak: Any, kl: Any, found: list[str], how: str, ak_before_4_1: bool = AK_BEFORE_4_1
) -> None:
    same = _outcome(ak) == _outcome(kl)
    since_4_1 = refused_since_4_1(name, value) if ak_before_4_1 else None
    if since_4_1 is not None:
        accepted_by_4_0 = int(value) >= SEGMENT_BYTES_MIN_BEFORE_4_1
        if (ak.error_code == 0) != accepted_by_4_0 or _outcome(kl) != since_4_1:
            found.append(
                f"{how} {name}={value!r}: expected Apache Kafka 4.0 to {'accept' if accepted_by_4_0 else 'refuse'} "
                f"it and kafkalike to refuse it as 4.1+ does, {since_4_1}; "
                f"got Apache Kafka {_outcome(ak)}, kafkalike {_outcome(kl)}"
            )
    elif ak_before_4_1 and ak.error_code == 0 and str(kl.error_message).endswith("values must not be duplicated."):
        pass  # a list config's duplicates: refused by 4.1+ (ValidList), as kafkalike does, accepted by 4.0
    elif (name, value) in DELIBERATE:
        if same or kl.error_code == 0:
            found.append(f"{how} {name}={value!r}: expected kafkalike to refuse it ({DELIBERATE[(name, value)]})")
    elif not same:
        found.append(f"{how} {name}={value!r}: Apache Kafka {_outcome(ak)}, kafkalike {_outcome(kl)}")


def legacy_alter_body(resource_type: int, resource_name: str, config: str, value: str) -> dict[str, Any]:
    """AlterConfigs (key 33), which sets the resource's whole config set."""
    return {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": resource_name,
                "configs": [{"name": config, "value": value}],
            }
        ],
        "validate_only": True,
    }


def alter_body(resource_type: int, resource_name: str, config: str, value: str) -> dict[str, Any]:
    return {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": resource_name,
                "configs": [{"name": config, "config_operation": SET, "value": value}],
            }
        ],
        "validate_only": True,
    }


@pytest.mark.parametrize("config", sorted(TOPIC_CONFIGS))
def test_a_topic_config_at_its_bounds(
    pair: Pair, topic: str, name: Callable[[str], str], kafka_declarations: Any, config: str
) -> None:
    found: list[str] = []
    for value in _cases("topic", kafka_declarations, config, found):
        body = create_topics_body([topic_spec(name("new"), 1, {config: value})], validate_only=True)
        ak, kl = pair.both(19, 7, body)
        _compare(config, value, ak.topics[0], kl.topics[0], found, "CreateTopics")
        ak, kl = pair.both(44, 1, alter_body(TOPIC, topic, config, value))
        _compare(config, value, ak.responses[0], kl.responses[0], found, "IncrementalAlterConfigs topic")
        ak, kl = pair.both(33, 2, legacy_alter_body(TOPIC, topic, config, value))
        _compare(config, value, ak.responses[0], kl.responses[0], found, "AlterConfigs topic")
    assert not found, "kafkalike differs from Apache Kafka:\n" + "\n".join(found)


# Kafka's dynamic-only broker configs (the replication throttle rates) are not in the static
# definitions the oracle reads; tests/server/test_replication_throttle_configs.py holds what a
# Kafka 4.4 node answers for them.
DYNAMIC_ONLY = frozenset(n for n, d in DECLARED.items() if d.listed_when_set)
DYNAMIC_BROKER_CONFIGS = sorted(n for n, d in BROKER_CONFIGS.items() if d.dynamic and n not in DYNAMIC_ONLY)
# Checked by their declaration alone: the read-only ones, and those kafkalike does not implement yet
# (which a broker refuses as unknown whatever their value).
STATIC_BROKER_CONFIGS = sorted(
    n for n, d in DECLARED.items() if d.on_broker and (not d.dynamic or not d.implemented) and n not in KAFKALIKE_ONLY
)


@pytest.mark.parametrize("config", DYNAMIC_BROKER_CONFIGS)
def test_a_dynamic_broker_config_at_its_bounds(pair: Pair, kafka_declarations: Any, config: str) -> None:
    found: list[str] = []
    for value in _cases("broker", kafka_declarations, config, found):
        ak, kl = pair.both(44, 1, alter_body(BROKER, "1", config, value))
        _compare(config, value, ak.responses[0], kl.responses[0], found, "IncrementalAlterConfigs broker")
        ak, kl = pair.both(33, 2, legacy_alter_body(BROKER, "1", config, value))
        _compare(config, value, ak.responses[0], kl.responses[0], found, "AlterConfigs broker")
    assert not found, "kafkalike differs from Apache Kafka:\n" + "\n".join(found)


def test_static_broker_configs_at_their_bounds(kafka_declarations: Any) -> None:
    """What kafkalike says of each value at start-up against what Kafka's ConfigDef says of it."""
    found: list[str] = []
    cases = [(n, value) for n in STATIC_BROKER_CONFIGS for value in _cases("broker", kafka_declarations, n, found)]
    answers = oracle(f"broker\t{name}\t{value}" for name, value in cases)
    for (name, value), ak in zip(cases, answers, strict=True):
        kl = DECLARED[name].validate(value) or "ok"
        if kl != ak and not (AK_BEFORE_4_1 and name in TIGHTENED_AFTER_4_0 and kl != "ok"):
            found.append(f"{name}={value!r}: Apache Kafka {ak!r}, kafkalike {kl!r}")
    assert not found, "kafkalike differs from Apache Kafka:\n" + "\n".join(found)


def test_the_oracle_sees_a_bad_value() -> None:
    """Negative control: the oracle refuses what Kafka refuses, and would show a difference."""
    assert oracle(["topic\tsegment.index.bytes\t3", "topic\tsegment.index.bytes\t4"]) == [
        "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4",
        "ok",
    ]


def test_a_difference_is_reported() -> None:
    """Negative control for the comparison: another code or another word is a difference, and a
    deliberate difference that stops differing is reported too."""
    from types import SimpleNamespace as Entry

    refused = Entry(error_code=40, error_message="Invalid value 3 for configuration x: Value must be at least 4")
    reworded = Entry(error_code=40, error_message="Invalid value 3 for configuration x: must be >= 4")
    found: list[str] = []
    _compare("x", "3", refused, Entry(error_code=42, error_message=refused.error_message), found, "T")
    _compare("x", "3", refused, reworded, found, "T")
    _compare("x", "3", refused, refused, found, "T")
    _compare("min.cleanable.dirty.ratio", "NaN", Entry(error_code=0, error_message=None), refused, found, "T")
    assert len(found) == 2
    _compare("min.cleanable.dirty.ratio", "NaN", refused, refused, found, "T")
    assert len(found) == 3
    # The 4.1+ segment.bytes floor against 4.0: 4.0 accepting and kafkalike refusing in 4.1's words is no
    # difference; kafkalike accepting, or refusing in other words, is.
    accepted = Entry(error_code=0, error_message=None)
    floor = Entry(
        error_code=40,
        error_message="Invalid value 14 for configuration segment.bytes: Value must be at least 1048576",
    )
    _compare("segment.bytes", "14", accepted, floor, found, "T", ak_before_4_1=True)
    assert len(found) == 3
    _compare("segment.bytes", "14", accepted, accepted, found, "T", ak_before_4_1=True)
    _compare("segment.bytes", "14", accepted, reworded, found, "T", ak_before_4_1=True)
    _compare("segment.bytes", "1048575", floor, floor, found, "T", ak_before_4_1=True)
    assert len(found) == 6
    below_both = Entry(
        error_code=40, error_message="Invalid value 13 for configuration segment.bytes: Value must be at least 1048576"
    )
    _compare("segment.bytes", "13", refused, below_both, found, "T", ak_before_4_1=True)
    assert len(found) == 6
    _compare("segment.bytes", "13", accepted, below_both, found, "T", ak_before_4_1=True)
    assert len(found) == 7
    # Against 4.1+ the floor is no expected difference: the same refusal is equal, 4.1+ refusing
    # and kafkalike accepting (or the other way round) is a difference.
    _compare("segment.bytes", "14", floor, floor, found, "T", ak_before_4_1=False)
    assert len(found) == 7
    _compare("segment.bytes", "14", accepted, floor, found, "T", ak_before_4_1=False)
    _compare("segment.bytes", "14", floor, accepted, found, "T", ak_before_4_1=False)
    assert len(found) == 9


def test_which_broker_configs_are_dynamic(pair: Pair) -> None:
    """The split this file relies on (dynamic: altered at run time; static: checked at start-up)
    is Kafka's: DescribeConfigs' read_only flag for every broker config kafkalike declares, against
    the declaration and (for the configs kafkalike implements) against kafkalike's answer."""
    # Internal configs (Kafka's defineInternal) are listed by neither.
    names = sorted(
        n
        for n, d in DECLARED.items()
        if d.on_broker and not d.internal and n not in KAFKALIKE_ONLY and n not in SINCE_4_1 and n not in DYNAMIC_ONLY
    )
    body = {
        "resources": [{"resource_type": BROKER, "resource_name": "1", "configuration_keys": names}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    ak, kl = pair.both(32, 4, body)
    ak_flags = {c.name: c.read_only for c in ak.results[0].configs}
    kl_flags = {c.name: c.read_only for c in kl.results[0].configs}
    expected = {n: True if n in STATIC_HERE else ak_flags.get(n) for n in names}
    found = [
        f"{n}: Apache Kafka read_only={ak_flags.get(n)}, declared dynamic={DECLARED[n].dynamic}"
        for n in names
        if (not DECLARED[n].dynamic) != expected[n]
    ]
    found += [
        f"{n}: Apache Kafka read_only={ak_flags.get(n)}, kafkalike {kl_flags.get(n)}"
        for n in names
        if DECLARED[n].implemented and kl_flags.get(n) != expected[n]
    ]
    assert set(kl_flags) == {n for n in names if DECLARED[n].implemented}, "kafkalike lists what it implements"
    assert not found, "\n".join(found)


def _kafka_default(key: ConfigKey) -> str:
    """The default as the oracle prints Kafka's: ``<null>`` for none."""
    return "<null>" if key.default is None else key.default


def default_differences(declared: Mapping[str, ConfigKey]) -> list[str]:
    """Each declaration's default against Kafka's ConfigDef (the topic one for topic configs, the
    broker one for broker configs, both for a config of both); the differences kept on purpose
    (``OWN_DEFAULTS``) must still be differences."""
    asked = [
        (kind, name)
        for name, key in sorted(declared.items())
        if name not in KAFKALIKE_ONLY and name not in SINCE_4_1
        for kind in ("topic", "broker")
        if (key.on_topic if kind == "topic" else key.on_broker)
    ]
    answers = oracle(f"default\t{kind}\t{name}" for kind, name in asked)
    found = []
    for (kind, name), kafka in zip(asked, answers, strict=True):
        ours = _kafka_default(declared[name])
        if name in OWN_DEFAULTS:
            if ours == kafka:
                found.append(f"{name}: expected kafkalike's default to differ ({OWN_DEFAULTS[name]}); both {ours!r}")
        elif ours != kafka:
            found.append(f"{kind} {name}: Apache Kafka's default {kafka!r}, declared {ours!r}")
    return found


def test_every_declared_default_is_kafkas() -> None:
    found = default_differences({n: d for n, d in DECLARED.items() if n not in DYNAMIC_ONLY})
    assert not found, "\n".join(found)


def test_a_default_unlike_kafkas_is_reported() -> None:
    """Negative controls: the oracle's defaults in each form, a declared default Kafka does not
    have, and a deliberate difference that stopped differing."""
    asked = [("topic", "retention.ms"), ("broker", "log.retention.ms"), ("broker", "node.id")]
    asked += [("broker", "process.roles"), ("broker", "no.such.config")]
    answers = oracle(f"default\t{kind}\t{name}" for kind, name in asked)
    assert answers == ["604800000", "<null>", "<required>", "<required>", "?"]
    planted = {
        "retention.ms": replace(DECLARED["retention.ms"], default="1"),
        "log.dir": replace(DECLARED["log.dir"], default="/tmp/kafka-logs"),
        "message.max.bytes": DECLARED["message.max.bytes"],
    }
    assert default_differences(planted) == [
        "log.dir: expected kafkalike's default to differ (a directory beside the working directory rather "
        "than under /tmp); both '/tmp/kafka-logs'",
        "topic retention.ms: Apache Kafka's default '604800000', declared '1'",
    ]
