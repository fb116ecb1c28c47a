"""ApiVersions: for every API kafkalike serves, the version range Apache Kafka advertises.

One test per API kafkalike registers a handler for (read from its registry at collection time),
so a difference names the API. Where kafkalike serves fewer versions than the release compared
with, because its handler does not do what the newer version asks (yet), ``ADVERTISED_BELOW``
says so, and why; each entry must still hold where it applies.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import pytest

from compat_tests.differential.conftest import AK_VERSION, Pair
from kafkalike.protocol.api import decode_response
from kafkalike.protocol.spec import api_specs
from kafkalike.server.registry import load_handlers

pytestmark = pytest.mark.differential

BODY = {"client_software_name": "kafkalike-differential", "client_software_version": "1"}
SERVED = sorted(load_handlers())
NAMES = {key: spec.name for key, spec in api_specs().items()}


@dataclass(frozen=True)
class Below:
    """kafkalike advertises up to ``max_version`` where the releases from ``since`` on advertise more."""

    max_version: int
    why: str
    since: tuple[int, ...] = (4, 1)

    def applies(self) -> bool:
        return self.since <= AK_VERSION


TOPIC_IDS = "names topics by id (KIP-516); the handler and the group/transaction state work by name"
# Every API kafkalike serves at fewer versions than the reference release (4.4), and why
# (``since``: the release that first advertises more, as kafka-python's broker tables record them).
ADVERTISED_BELOW = {
    0: Below(12, f"Produce v13 {TOPIC_IDS}"),
    1: Below(17, "Fetch v18 carries a follower's high watermark (KIP-1166), for replication (issue 15)"),
    8: Below(9, f"OffsetCommit v10 {TOPIC_IDS}", since=(4, 2)),
    9: Below(9, f"OffsetFetch v10 {TOPIC_IDS}", since=(4, 2)),
    27: Below(1, "WriteTxnMarkers v2 tells each marker's transaction version (KIP-1228)", since=(4, 2)),
    28: Below(5, f"TxnOffsetCommit v6 {TOPIC_IDS} (KIP-1319)", since=(4, 4)),
    35: Below(4, "DescribeLogDirs v5 reports cordoned directories, which kafkalike does not have", since=(4, 3)),
    42: Below(2, "DeleteGroups v3 adds per-group error messages (GROUP_DELETION_FAILED)", since=(4, 4)),
    66: Below(1, "ListTransactions v2 filters by an RE2/J regular expression (KIP-1152)"),
    69: Below(0, "ConsumerGroupDescribe v1: FINDINGS.md D7", since=(4, 0)),
}
# Versions kafkalike serves that older releases do not: api key -> (the release that added it, its
# max version); compared with a release before that, kafkalike advertises more.
SERVED_SINCE = {2: ((4, 2), 11), 18: ((4, 4), 5)}


def expected_range(api_key: int, ak: tuple[int, int] | None) -> tuple[int, int] | None:
    """What kafkalike should advertise for ``api_key``, given what Apache Kafka advertises."""
    below = ADVERTISED_BELOW.get(api_key)
    if ak is not None and below is not None and below.applies():
        assert ak[1] > below.max_version, (
            f"{NAMES.get(api_key)}: Apache Kafka advertises {ak}: drop it from ADVERTISED_BELOW"
        )
        return ak[0], below.max_version
    newer = SERVED_SINCE.get(api_key)
    if ak is not None and newer is not None and newer[0] > AK_VERSION:
        assert ak[1] < newer[1], f"{NAMES.get(api_key)}: Apache Kafka {AK_VERSION} already advertises {ak}"
        return ak[0], newer[1]
    return ak


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
    ak, kl = tables["ak"].get(api_key), tables["kl"].get(api_key)
    why = ADVERTISED_BELOW[api_key].why if api_key in ADVERTISED_BELOW else ""
    assert kl == expected_range(api_key, ak), (
        f"{NAMES.get(api_key)}: Apache Kafka advertises {ak}, kafkalike {kl} {why}"
    )


def test_only_served_apis_are_advertised(tables: dict[str, dict[int, tuple[int, int]]]) -> None:
    assert sorted(tables["kl"]) == SERVED


# v5 (KIP-1242) is served since Kafka 4.4.
API_VERSIONS_VERSIONS = [0, 1, 2, 4, *([5] if AK_VERSION >= (4, 4) else [])]


@pytest.mark.parametrize("version", API_VERSIONS_VERSIONS)
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
    (ak_own,) = [(k.min_version, k.max_version) for k in ak.api_keys if k.api_key == 18]
    (kl_own,) = [(k.min_version, k.max_version) for k in kl.api_keys if k.api_key == 18]
    assert kl_own == expected_range(18, ak_own)


@pytest.mark.skipif(AK_VERSION < (4, 4), reason="ApiVersions v5 is served since Kafka 4.4")
def test_a_client_naming_another_cluster_or_node_is_told_to_rebootstrap(pair: Pair) -> None:
    cluster = pair.ak.request(60, 0, {"include_cluster_authorized_operations": False})
    answers = {}
    for side, own_cluster in ((pair.ak, cluster.cluster_id), (pair.kl, None)):
        if own_cluster is None:
            own_cluster = side.request(60, 0, {"include_cluster_authorized_operations": False}).cluster_id
        cases = {
            "neither": (None, -1),
            "this one": (own_cluster, 1),
            "another cluster": ("another-cluster", 1),
            "another node": (own_cluster, 7),
            "a cluster without a node": (own_cluster, -1),
            "a node without a cluster": (None, 1),
        }
        answers[side.name] = {
            case: (lambda r: (r.error_code, len(r.api_keys) > 0))(
                side.request(18, 5, {**BODY, "cluster_id": cluster_id, "node_id": node_id})
            )
            for case, (cluster_id, node_id) in cases.items()
        }
    ak, kl = answers.values()
    assert ak == kl
    assert kl["another node"] == (129, False) and kl["a node without a cluster"] == (42, False)
