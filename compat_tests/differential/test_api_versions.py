"""ApiVersions: for every API kafkalike serves, the version range Apache Kafka 4.0 advertises.

One test per API kafkalike registers a handler for (read from its registry at collection time),
so a difference names the API.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from compat_tests.differential.conftest import Pair, assert_same
from kafkalike.protocol.api import decode_response
from kafkalike.protocol.spec import api_specs
from kafkalike.server.registry import load_handlers

pytestmark = pytest.mark.differential

BODY = {"client_software_name": "kafkalike-differential", "client_software_version": "1"}
SERVED = sorted(load_handlers())
NAMES = {key: spec.name for key, spec in api_specs().items()}


@pytest.fixture(scope="module")
def tables(pair: Pair) -> dict[str, dict[int, tuple[int, int]]]:
    ak, kl = pair.both(18, 3, BODY)
    assert (ak.error_code, kl.error_code) == (0, 0)
    return {
        "ak": {k.api_key: (k.min_version, k.max_version) for k in ak.api_keys},
        "kl": {k.api_key: (k.min_version, k.max_version) for k in kl.api_keys},
    }


@pytest.mark.parametrize("api_key", SERVED, ids=[f"{key}-{NAMES.get(key, '?')}" for key in SERVED])
def test_the_range_of_a_served_api(tables: dict[str, dict[int, tuple[int, int]]], api_key: int) -> None:
    assert tables["kl"].get(api_key) == tables["ak"].get(api_key), (
        f"{NAMES.get(api_key)}: Apache Kafka advertises {tables['ak'].get(api_key)}, kafkalike {tables['kl'].get(api_key)}"
    )


def test_only_served_apis_are_advertised(tables: dict[str, dict[int, tuple[int, int]]]) -> None:
    assert sorted(tables["kl"]) == SERVED


@pytest.mark.parametrize("version", [0, 1, 2, 4])
def test_every_version_of_api_versions_gives_the_same_table(pair: Pair, version: int) -> None:
    ak3, kl3 = pair.both(18, 3, BODY)
    ak, kl = pair.both(18, version, BODY)

    def table(response: Any) -> list[tuple[int, int, int]]:
        return sorted((k.api_key, k.min_version, k.max_version) for k in response.api_keys)

    assert (ak.error_code, kl.error_code) == (0, 0)
    assert table(ak) == table(ak3) and table(kl) == table(kl3)


def test_an_unknown_version_gets_a_v0_answer_with_unsupported_version(pair: Pair) -> None:
    # ApiVersions v99: request header v2 with an empty tagged-field section, then a body nobody knows.
    frame = struct.pack(">hhih", 18, 99, 7, 1) + b"x" + b"\x00" + b"\x02a\x021\x00"
    answers = []
    for side in (pair.ak, pair.kl):
        with side.connect() as client:
            client.send_raw(struct.pack(">i", len(frame)) + frame)
            raw = client.receive_frame()
            assert raw is not None, side.name
            correlation_id, body = decode_response(18, 0, raw)
            assert correlation_id == 7, side.name
            answers.append(body)
    ak, kl = answers
    assert (ak.error_code, kl.error_code) == (35, 35)
    # The answer lists the supported range of ApiVersions itself; the rest is each broker's own.
    assert_same([k for k in ak.api_keys if k.api_key == 18], [k for k in kl.api_keys if k.api_key == 18])
