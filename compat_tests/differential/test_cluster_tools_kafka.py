"""The checks of compat_tests/test_cluster_tools.py (Kafka's kafka-topics, kafka-leader-election
and kafka-metadata-quorum with a broker down and back) against a 3-node Apache Kafka cluster:
the facts those tools print about kafkalike are the ones they print about Kafka.

One cluster for the module (three JVMs); fencing, ISR expiry and the automatic leader rebalance
set as on the kafkalike cluster (kafkalike has no automatic rebalance: the preferred election is
the tool's to make on both).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_LIB
from compat_tests.differential.test_cluster_tools import (
    check_describe_through_a_broker_down_and_back,
    check_metadata_quorum_through_a_broker,
    create_topics,
)
from compat_tests.failover_support import SETTINGS
from kafkalike.testing.apache_kafka import ApacheKafkaCluster

pytestmark = pytest.mark.differential


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaCluster]:
    assert AK_LIB, "KAFKALIKE_AK_LIB names the Apache Kafka jars (scripts/compat.py sets it)"
    overrides = {**SETTINGS, "auto.leader.rebalance.enable": "false"}
    with ApacheKafkaCluster(
        3, data_dir=tmp_path_factory.mktemp("ak-tools"), lib_dir=Path(AK_LIB), overrides=overrides
    ) as running:
        create_topics(running)
        yield running


def test_describe_shows_leaders_replicas_and_isr_and_follows_a_broker_down_and_back(
    cluster: ApacheKafkaCluster,
) -> None:
    check_describe_through_a_broker_down_and_back(cluster)


def test_metadata_quorum_status_and_replication_through_a_broker(cluster: ApacheKafkaCluster) -> None:
    check_metadata_quorum_through_a_broker(cluster)
