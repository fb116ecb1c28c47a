"""A broker's listeners as Kafka's KafkaConfig reads them, with its start-up refusals word for word.

- ``listener.security.protocol.map`` (NAME:PROTOCOL,...): which protocol each listener name
  speaks. Left unset on a KRaft node, every ``controller.listener.names`` entry is added as
  PLAINTEXT (unless something speaks SSL or SASL), as Kafka does.
- ``listeners``: NAME://host:port entries, distinct names and ports, each name in the map.
- ``advertised.listeners`` (else ``listeners``): what the broker registers and clients are told,
  **without** the controller's listeners (Kafka's effectiveAdvertisedBrokerListeners): a
  controller listener is never advertised to clients.
- ``inter.broker.listener.name`` (else the listener named after ``security.inter.broker.protocol``,
  PLAINTEXT): the listener other brokers reach this one on; it must be advertised.

``broker_listener_problem(config)`` is the refusal a broker role gets at start-up (None when the
settings hold); ``BrokerListeners.from_config`` the parsed result.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkalike.server.config import BrokerConfig

# Kafka's SecurityProtocol ids, as BrokerRegistration and the metadata records carry them.
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_SSL_OR_SASL = frozenset({"SSL", "SASL_SSL", "SASL_PLAINTEXT"})
# SocketServerConfigs.LISTENER_PATTERN: NAME://host:port, the host maybe empty or a bracketed IPv6 address.
_LISTENER = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
NONROUTABLE = "0.0.0.0"


class ListenerConfigError(ValueError):
    """A listener setting Kafka refuses to start with; the message is Kafka's."""


@dataclass(frozen=True, slots=True)
class ListenerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: str

    @property
    def security_protocol_id(self) -> int:
        return SECURITY_PROTOCOLS[self.security_protocol]


@dataclass(frozen=True, slots=True)
class BrokerListeners:
    listeners: tuple[ListenerEndpoint, ...]
    advertised: tuple[ListenerEndpoint, ...]  # the broker's own, the controller's left out
    controller_names: tuple[str, ...]
    inter_broker_name: str

    @classmethod
    def from_config(cls, config: BrokerConfig) -> BrokerListeners:
        """ListenerConfigError in Kafka's words when the entries cannot be parsed."""
        protocols = security_protocol_map(config)
        listeners = parse_endpoints(config.get("listeners") or "", protocols)
        advertised_text = config.get("advertised.listeners")
        advertised = listeners if advertised_text is None else parse_endpoints(advertised_text, protocols, False)
        controller = controller_listener_names(config)
        return cls(
            tuple(listeners),
            tuple(e for e in advertised if e.name not in controller),
            tuple(controller),
            _inter_broker_name(config, protocols),
        )

    def advertised_named(self, name: str) -> ListenerEndpoint | None:
        return next((e for e in self.advertised if e.name == name), None)


def controller_listener_names(config: BrokerConfig) -> list[str]:
    """``controller.listener.names`` as Kafka splits it (names are case-sensitive there)."""
    value = config.get("controller.listener.names") or ""
    return value.split(",") if value else []


def security_protocol_map(config: BrokerConfig) -> dict[str, str]:
    """Kafka's effectiveListenerSecurityProtocolMap."""
    text = config.get("listener.security.protocol.map") or ""
    mapping: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        name, sep, protocol = entry.rpartition(":")  # Kafka's Csv.parseCsvMap splits at the last colon
        if not sep:  # there, substring(0, -1) throws
            raise ListenerConfigError(
                "Error parsing configuration property 'listener.security.protocol.map': "
                f"begin 0, end -1, length {len(entry)}"
            )
        protocol = protocol.strip()
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise ListenerConfigError(
                f"Invalid security protocol `{protocol}` defined in listener.security.protocol.map"
            )
        mapping[name.strip().upper()] = protocol.upper()
    if "listener.security.protocol.map" not in config.explicit:
        controller = controller_listener_names(config)
        listener_names = [_listener_name(e) for e in _entries(config.get("listeners") or "")]
        if not any(n in _SSL_OR_SASL for n in [*controller, *listener_names]):
            mapping.update((n, "PLAINTEXT") for n in controller if n != "PLAINTEXT")
    return mapping


def parse_endpoints(
    text: str, protocols: dict[str, str], require_distinct_ports: bool = True
) -> list[ListenerEndpoint]:
    """Kafka's AbstractKafkaConfig.listenerListToEndPoints (4.1+): every refusal in one form,
    "Error creating broker listeners from '[a, b]': ...", the list as Java prints it."""
    entries = _entries(text)
    shown = "[" + ", ".join(entries) + "]"
    try:
        return _endpoints(entries, shown, protocols, require_distinct_ports)
    except ListenerConfigError as e:
        raise ListenerConfigError(f"Error creating broker listeners from '{shown}': {e}") from None


def _endpoints(
    entries: list[str], shown: str, protocols: dict[str, str], require_distinct_ports: bool
) -> list[ListenerEndpoint]:
    endpoints = []
    for entry in entries:
        match = _LISTENER.fullmatch(entry)
        if match is None:
            raise ListenerConfigError(f"Unable to parse {entry} to a broker endpoint")
        name = match.group(1).upper()
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerConfigError(f"No security protocol defined for listener {name}")
        endpoints.append(ListenerEndpoint(name, match.group(2), int(match.group(3)), protocol))
    if len({e.name for e in endpoints}) != len(endpoints):
        raise ListenerConfigError(f"Each listener must have a different name, listeners: {shown}")
    if require_distinct_ports:
        _check_ports(endpoints, shown)
    return endpoints


def _check_ports(endpoints: list[ListenerEndpoint], shown: str) -> None:
    """Kafka's rule: a port (other than 0) once, or twice when one listener is on an IPv4 address
    and the other on an IPv6 one."""
    by_port: dict[int, list[ListenerEndpoint]] = {}
    for e in endpoints:
        if e.port != 0:
            by_port.setdefault(e.port, []).append(e)
    for port, same in by_port.items():
        if len(same) < 2:
            continue
        with_ip = [e for e in same if _ip_version(e.host) is not None]
        if len(same) - len(with_ip) > 1:
            raise ListenerConfigError(f"Each listener must have a different port, listeners: {shown}")
        if len(with_ip) == 2:
            mixed = {_ip_version(e.host) for e in with_ip} == {4, 6}
            if not mixed or len(with_ip) < len(same):
                raise ListenerConfigError(
                    "If you have two listeners on the same port then one needs to be IPv4 and the other "
                    f"IPv6, listeners: {shown}, port: {port}"
                )
        elif with_ip:  # one, or more than two
            raise ListenerConfigError(
                "Each listener must have a different port unless exactly one listener has an IPv4 address and "
                f"the other IPv6 address, listeners: {shown}, port: {port}"
            )


def _ip_version(host: str) -> int | None:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def broker_listener_problem(config: BrokerConfig) -> str | None:
    """What KafkaConfig refuses of a broker's listeners (the broker role's checks); None when they hold."""
    roles = {r.strip() for r in (config.get("process.roles") or "").split(",") if r.strip()}
    if roles and "broker" not in roles:
        return None
    try:
        parsed = BrokerListeners.from_config(config)
    except ListenerConfigError as exc:
        return str(exc)
    advertised = _ordered_names(parsed.advertised)
    if not advertised:
        return "requirement failed: There must be at least one broker advertised listener." + (
            " Perhaps all listeners appear in controller.listener.names?" if "broker" in roles else ""
        )
    if parsed.inter_broker_name not in advertised:
        return (
            "requirement failed: inter.broker.listener.name must be a listener name defined in advertised.listeners. "
            f"The valid options based on currently configured listeners are {','.join(advertised)}"
        )
    names = _ordered_names(parsed.listeners)
    if not set(advertised) <= set(names):
        return (
            "requirement failed: advertised.listeners listener names must be equal to or a subset of the ones "
            f"defined in listeners. Found {','.join(advertised)}. The valid options based on the current "
            f"configuration are {','.join(names)}"
        )
    if any(e.host == NONROUTABLE for e in parsed.advertised):
        return (
            "requirement failed: advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
            "Use a routable IP address."
        )
    return None


def _inter_broker_name(config: BrokerConfig, protocols: dict[str, str]) -> str:
    name = config.get("inter.broker.listener.name")
    if name is None:
        return (config.get("security.inter.broker.protocol") or "PLAINTEXT").upper()
    if "security.inter.broker.protocol" in config.explicit:
        raise ListenerConfigError(
            "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."
        )
    if name.strip().upper() not in protocols:
        raise ListenerConfigError(
            f"Listener with name {name.strip().upper()} defined in inter.broker.listener.name not found in "
            "listener.security.protocol.map."
        )
    return name.strip().upper()


def _entries(text: str) -> list[str]:
    return [e.strip() for e in text.split(",") if e.strip()]


def _listener_name(entry: str) -> str:
    return entry.partition(":")[0].upper()


def _ordered_names(endpoints: tuple[ListenerEndpoint, ...]) -> list[str]:
    return list(dict.fromkeys(e.name for e in endpoints))
