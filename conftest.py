"""The session's broker (the test kit's ``kafka_broker``), for tests/ and compat_tests/ alike.

Most compatibility tests share that in-process broker and write to a topic of their own
(``kafka_topic``, or ``kafka_topic_name`` where the client under test creates it), so they cannot
see each other's data. Tests that stop, restart or kill a broker start ``kafkalike serve``
processes of their own with ``kafka_broker_process``. After every test the plugin checks that the
brokers it used still run and logged no error or traceback.

One session has one such broker, so its configuration lives here, where every test sees it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from compat_tests.group_support import GROUP_BROKER_OVERRIDES


@pytest.fixture(scope="session")
def kafka_broker_config() -> Mapping[str, str]:
    """The group tests' settings: groups form at once, and accept short session timeouts."""
    return dict(override.split("=", 1) for override in GROUP_BROKER_OVERRIDES)
