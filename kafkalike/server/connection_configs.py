"""What Kafka's KafkaConfig requires of its socket server settings (``max.connections.per.ip``
and its overrides, ``queued.max.request.bytes``, ``connections.max.idle.ms``), checked at
start-up (``BrokerConfig.check``) and for every dynamic change (``Broker.broker_config_problem``);
and the overrides' format, ``host:count,...``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkalike.server.config import BrokerConfig

# Kafka's connection.failed.authentication.delay.ms default (not configurable here: no
# authentication), which connections.max.idle.ms must exceed.
FAILED_AUTHENTICATION_DELAY_MS = 100
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")


def parse_per_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated, split at each
    pair's last colon (IPv6 addresses have colons). Raises ValueError for a malformed pair."""
    overrides: dict[str, int] = {}
    for pair in re.split(r"\s*,\s*", text) if text else []:
        host, sep, count = pair.rpartition(":")
        if not sep:  # Java's substring(0, lastIndexOf(":")) fails with these words
            raise ValueError(f"begin 0, end -1, length {len(pair)}")
        try:
            overrides[host.strip()] = int(count.strip())
        except ValueError:
            raise ValueError(f'For input string: "{count.strip()}"') from None
    return overrides


def per_ip_overrides_problem(text: str) -> str | None:
    """Why ``text`` is no value for max.connections.per.ip.overrides, in Kafka's words; or None."""
    try:
        overrides = parse_per_ip_overrides(text)
    except ValueError as exc:
        return f"Error parsing configuration property 'max.connections.per.ip.overrides': {exc}"
    invalid = [host for host in overrides if not _VALID_HOST.fullmatch(host)]
    if invalid:
        return f"max.connections.per.ip.overrides contains invalid addresses : {','.join(invalid)}"
    return None


def socket_server_problem(config: BrokerConfig) -> str | None:
    """The first of Kafka's requirements between these settings that ``config`` breaks, in its
    words (Scala's ``require`` prefix included); None when all hold."""
    queued, request_max = config.get_int("queued.max.request.bytes"), config.get_int("socket.request.max.bytes")
    if 0 < queued < request_max:
        return "requirement failed: queued.max.request.bytes must be larger or equal to socket.request.max.bytes"
    overrides_text = config.get("max.connections.per.ip.overrides") or ""
    problem = per_ip_overrides_problem(overrides_text)
    if problem is not None:
        return problem
    if config.get_int("max.connections.per.ip") == 0 and not parse_per_ip_overrides(overrides_text):
        return (
            "requirement failed: max.connections.per.ip can be set to zero only if "
            "max.connections.per.ip.overrides property is set."
        )
    idle_ms = config.get_int("connections.max.idle.ms")
    if 0 <= idle_ms <= FAILED_AUTHENTICATION_DELAY_MS:
        return (
            f"requirement failed: connection.failed.authentication.delay.ms={FAILED_AUTHENTICATION_DELAY_MS} "
            f"should always be less than connections.max.idle.ms={idle_ms} to prevent failed authentication "
            "responses from timing out"
        )
    return None


def dynamic_listener_problem(dynamic: dict[str, str] | None) -> str | None:
    """What Kafka's listener reconfiguration refuses of a dynamic ``max.connections`` (the static
    value may be 0, a dynamic one must be positive), in its words; or None."""
    value = (dynamic or {}).get("max.connections")
    try:
        if value is None or int(value) > 0:
            return None
    except ValueError:
        return None  # the type check answers a value that is no number
    return (
        "Invalid value org.apache.kafka.common.config.ConfigException: "
        f"Invalid max.connections {int(value)} for configuration Invalid dynamic configuration"
    )
