"""A broker's listener settings (``listeners``, ``advertised.listeners``, ``listener.security.protocol.map``,
``inter.broker.listener.name``) accepted or refused at start-up as Apache Kafka's KafkaConfig does,
word for word: KafkaConfigOracle.java builds a KafkaConfig from the same properties.

kafkalike words them as 4.1+ does (every refusal "Error creating broker listeners from '[a, b]': ...",
the list as Java prints it); 4.0 put "requirement failed: " before some and the raw setting in
both places, so against 4.0 both sides are compared without that wrapping."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_BEFORE_4_1, AK_LIB
from kafkalike.server.config import BrokerConfig
from kafkalike.testing.apache_kafka import java_executable

pytestmark = pytest.mark.differential

ORACLE = Path(__file__).with_name("KafkaConfigOracle.java")
CONTROLLER = "CONTROLLER://127.0.0.1:9093"
# A combined node (the shape kafkalike serves) and a broker-only one.
COMBINED = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
}
BROKER_ONLY = {**COMBINED, "node.id": "2", "process.roles": "broker"}
MAP = "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
CASES: list[tuple[dict[str, str], dict[str, str]]] = [
    (COMBINED, {"listeners": f"PLAINTEXT://127.0.0.1:9092,{CONTROLLER}"}),
    (COMBINED, {"listeners": f"PLAINTEXT://0.0.0.0:9092,{CONTROLLER}"}),
    (COMBINED, {"listeners": f"PLAINTEXT://:9092,{CONTROLLER}", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}),
    (COMBINED, {"listeners": f"PLAINTEXT://0.0.0.0:9092,{CONTROLLER}", "advertised.listeners": "PLAINTEXT://h:9092"}),
    (COMBINED, {"listeners": f"CLIENT://127.0.0.1:9092,{CONTROLLER}"}),
    (COMBINED, {"listeners": f"CLIENT://127.0.0.1:9092,{CONTROLLER}", "listener.security.protocol.map": MAP}),
    (
        COMBINED,
        {
            "listeners": f"CLIENT://127.0.0.1:9092,{CONTROLLER}",
            "listener.security.protocol.map": MAP,
            "inter.broker.listener.name": "client",
        },
    ),
    (COMBINED, {"listeners": f"PLAINTEXT://127.0.0.1:9092,{CONTROLLER}", "inter.broker.listener.name": "NOPE"}),
    (
        COMBINED,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:9092,{CONTROLLER}",
            "inter.broker.listener.name": "PLAINTEXT",
            "security.inter.broker.protocol": "PLAINTEXT",
        },
    ),
    (COMBINED, {"listeners": f"PLAINTEXT://127.0.0.1:9092,{CONTROLLER}", "security.inter.broker.protocol": "SSL"}),
    (
        COMBINED,
        {"listeners": f"PLAINTEXT://127.0.0.1:9092,{CONTROLLER}", "listener.security.protocol.map": "PLAINTEXT:BOGUS"},
    ),
    (
        COMBINED,
        {"listeners": f"PLAINTEXT://127.0.0.1:9092,{CONTROLLER}", "listener.security.protocol.map": "PLAINTEXT"},
    ),
    (COMBINED, {"listeners": f"PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9094,{CONTROLLER}"}),
    (
        COMBINED,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9092,{CONTROLLER}",
            "listener.security.protocol.map": MAP,
        },
    ),
    (
        COMBINED,
        {
            "listeners": f"PLAINTEXT://localhost:9092,INTERNAL://otherhost:9092,{CONTROLLER}",
            "listener.security.protocol.map": MAP,
        },
    ),
    (
        COMBINED,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:9092,INTERNAL://[::1]:9092,{CONTROLLER}",
            "listener.security.protocol.map": MAP,
        },
    ),
    (
        COMBINED,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:9092,INTERNAL://localhost:9092,{CONTROLLER}",
            "listener.security.protocol.map": MAP,
        },
    ),
    (
        COMBINED,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:9092,{CONTROLLER}",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9095",
            "listener.security.protocol.map": MAP,
        },
    ),
    (
        COMBINED,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:9092,{CONTROLLER}",
            "advertised.listeners": f"PLAINTEXT://broker.example:19092,{CONTROLLER}",
        },
    ),
    (COMBINED, {"listeners": f"PLAINTEXT://127.0.0.1:9092,{CONTROLLER}", "advertised.listeners": "garbage"}),
    (COMBINED, {"listeners": CONTROLLER}),
    (BROKER_ONLY, {"listeners": "PLAINTEXT://127.0.0.1:9092"}),
    (BROKER_ONLY, {"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}),
    (BROKER_ONLY, {"listeners": "CLIENT://127.0.0.1:9092", "listener.security.protocol.map": MAP}),
]


def _kafka_answers(configs: list[dict[str, str]]) -> list[str]:
    lines = ["\t".join(f"{k}={v}" for k, v in config.items()) for config in configs]
    result = subprocess.run(
        [java_executable(), "-cp", str(Path(AK_LIB) / "*"), str(ORACLE)],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answers = [line for line in result.stdout.splitlines() if not line.startswith(("SLF4J", "log4j"))]
    assert len(answers) == len(lines), result.stderr
    return answers


def _kafkalike_answer(config: dict[str, str]) -> str:
    try:
        BrokerConfig(config).check()
    except ValueError as exc:
        return str(exc)
    return "ok"


def unwrapped(message: str) -> str:
    """A refusal without the wrapping 4.0 and 4.1+ word differently."""
    message = re.sub(r"^Error creating broker listeners from '[^']*': ", "", message)
    message = message.removeprefix("requirement failed: ")
    return re.sub(
        r"listeners: \[(.*)\](?=, port: |$)", lambda m: "listeners: " + m.group(1).replace(", ", ","), message
    )


def test_listener_settings_are_accepted_and_refused_as_kafka_does(tmp_path: Path) -> None:
    configs = [{**base, "log.dirs": str(tmp_path / "data"), **case} for base, case in CASES]
    kafka = _kafka_answers(configs)
    kafkalike = [_kafkalike_answer(c) for c in configs]
    if AK_BEFORE_4_1:
        kafka, kafkalike = [unwrapped(k) for k in kafka], [unwrapped(k) for k in kafkalike]
    differences = [(c, k, kl) for c, k, kl in zip(CASES, kafka, kafkalike, strict=True) if k != kl]
    assert not differences, "\n".join(f"{case[1]}\n  kafka:     {k}\n  kafkalike: {kl}" for case, k, kl in differences)
    # The cases try both outcomes and several refusals.
    assert kafka.count("ok") >= 3 and len(set(kafka)) >= 15
