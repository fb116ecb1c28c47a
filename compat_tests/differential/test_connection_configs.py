"""The connection limits as DescribeConfigs reports them for the broker (value, source, read-only,
type, synonyms), and AlterConfigs of them: accepted, or refused with the same error code."""

from __future__ import annotations

from typing import Any

import pytest

from compat_tests.differential.conftest import Pair, assert_same

pytestmark = pytest.mark.differential

BROKER = 4
LIMITS = [
    "socket.request.max.bytes",
    "queued.max.request.bytes",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "connections.max.idle.ms",
]


def describe_body(keys: list[str]) -> dict[str, Any]:
    return {
        "resources": [{"resource_type": BROKER, "resource_name": "1", "configuration_keys": keys}],
        "include_synonyms": True,
        "include_documentation": False,
    }


@pytest.mark.parametrize("version", [1, 4])
def test_the_limits_are_described_as_kafka_describes_them(pair: Pair, version: int) -> None:
    ak, kl = pair.both(32, version, describe_body(LIMITS))
    by_name = [sorted(r.results[0].configs, key=lambda c: c.name) for r in (ak, kl)]
    assert [c.name for c in by_name[1]] == sorted(LIMITS)
    assert_same(by_name[0], by_name[1])


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max.connections", "1000"),
        ("max.connections.per.ip", "500"),
        ("max.connections.per.ip.overrides", "127.0.0.2:7"),
        ("connections.max.idle.ms", "60000"),  # read-only: refused
        ("queued.max.request.bytes", "104857600"),  # read-only: refused
    ],
)
@pytest.mark.parametrize("api", ["AlterConfigs", "IncrementalAlterConfigs"])
def test_altering_a_limit(pair: Pair, name: str, value: str, api: str) -> None:
    if api == "AlterConfigs":
        configs: list[dict[str, Any]] = [{"name": name, "value": value}]
        api_key = 33
    else:
        configs, api_key = [{"name": name, "config_operation": 0, "value": value}], 44
    body = {
        "resources": [{"resource_type": BROKER, "resource_name": "1", "configs": configs}],
        "validate_only": True,
    }
    ak, kl = pair.both(api_key, 1, body)
    assert_same(ak, kl)
