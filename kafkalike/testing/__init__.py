"""A test kit for code that talks to Kafka, and for kafkalike itself.

- ``InProcessBroker``: one broker in this process (in memory by default), with fault hooks
  (``Faults``) to make clients retry and groups rebalance.
- ``Cluster``: nodes by id in this process: ``Cluster(brokers=3)`` three cluster nodes (broker
  and controller each) in threads, with per-node stop/kill/start and isolate/heal;
  ``Cluster(brokers=1)`` the in-process broker.
- ``BrokerProcess``: ``kafkalike serve`` as a separate process, to kill, restart or reconfigure.
- ``KafkalikeCluster``: nodes as ``kafkalike serve --config`` processes, one quorum, each stopped,
  killed, paused and started by id (``apache_kafka.ApacheKafkaCluster``: Kafka's, the same API).
- The pytest plugin (``kafkalike.testing.pytest_plugin``, loaded by pytest on its own once
  kafkalike is installed): ``kafka_broker``, ``kafka_bootstrap``, ``kafka_topic`` and more.
- ``wire_client``: raw protocol clients for tests of the broker itself.
- ``TrioClock``: a broker clock whose wall time follows trio's clock, so that a broker run on
  trio's ``MockClock`` (``InProcessBroker(clock=TrioClock())``) times out, expires and retains
  as the test sleeps, without real waiting.
"""

from kafkalike.testing.broker import Faults, InProcessBroker
from kafkalike.testing.clock import TrioClock
from kafkalike.testing.cluster import Cluster, ClusterNode, NodeThread
from kafkalike.testing.process import BrokerProcess
from kafkalike.testing.process_cluster import KafkalikeCluster

__all__ = [
    "BrokerProcess",
    "Cluster",
    "ClusterNode",
    "Faults",
    "InProcessBroker",
    "KafkalikeCluster",
    "NodeThread",
    "TrioClock",
]
