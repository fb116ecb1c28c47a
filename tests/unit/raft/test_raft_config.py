"""The quorum's configuration in Kafka's names and defaults."""

from __future__ import annotations

import uuid

import pytest

from kafkalike.raft.config import (
    NO_DIRECTORY_ID,
    QuorumConfig,
    QuorumConfigError,
    VoterKey,
    from_properties,
)


def test_defaults_are_kafkas() -> None:
    config = from_properties({"controller.quorum.voters": "1@localhost:9093"})
    assert (config.election_timeout_ms, config.fetch_timeout_ms, config.election_backoff_max_ms) == (1000, 2000, 1000)
    assert (config.request_timeout_ms, config.retry_backoff_ms) == (2000, 20)


def test_static_voters_and_bootstrap_servers() -> None:
    config = from_properties(
        {
            "controller.quorum.voters": "1@localhost:9093, 2@[::1]:9094,3@host-3:9095",
            "controller.quorum.bootstrap.servers": "localhost:9093,[::1]:9094",
            "controller.quorum.election.timeout.ms": "500",
        }
    )
    assert config.voters == (VoterKey(1), VoterKey(2), VoterKey(3))
    assert [(e.host, e.port) for e in config.endpoints] == [("localhost", 9093), ("::1", 9094), ("host-3", 9095)]
    assert config.bootstrap_servers == (("localhost", 9093), ("::1", 9094))
    assert (config.election_timeout_ms, config.majority) == (500, 2)


@pytest.mark.parametrize(
    "props",
    [
        {"controller.quorum.voters": "1@localhost"},
        {"controller.quorum.voters": "x@localhost:9093"},
        {"controller.quorum.voters": "1@localhost:70000"},
        {"controller.quorum.voters": "1@a:1,1@b:2"},
        {"controller.quorum.bootstrap.servers": "localhost"},
        {"controller.quorum.fetch.timeout.ms": "soon"},
        {"controller.quorum.election.timeout.ms": "0"},
    ],
)
def test_bad_values_are_refused(props: dict[str, str]) -> None:
    with pytest.raises(QuorumConfigError):
        from_properties(props)


def test_a_zero_directory_id_matches_any() -> None:
    directory = uuid.uuid4()
    assert VoterKey(1).matches(1, directory)
    assert VoterKey(1, directory).matches(1, NO_DIRECTORY_ID)
    assert not VoterKey(1, directory).matches(1, uuid.uuid4())
    assert not VoterKey(1).matches(2, NO_DIRECTORY_ID)
    assert QuorumConfig(voters=(VoterKey(1),)).voter(1) == VoterKey(1)
