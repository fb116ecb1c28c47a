"""Listeners and connection limits (Kafka's SocketServerConfigs). What they require of each other
(``queued.max.request.bytes`` against ``socket.request.max.bytes``...) is checked by the server's
connection code, which also parses ``max.connections.per.ip.overrides``."""

from __future__ import annotations

from kafkalike.configs.declaration import INT_MAX, ConfigKey, ConfigType, NonEmptyList, at_least

NETWORK = (
    ConfigKey(
        "listeners",
        ConfigType.LIST,
        "PLAINTEXT://127.0.0.1:9092",
        "The addresses the broker binds and accepts connections on, as NAME://host:port.",
        NonEmptyList(),
    ),
    ConfigKey(
        "advertised.listeners",
        ConfigType.LIST,
        None,
        "The addresses given to clients in Metadata answers, when they differ from the bound listeners. "
        "Unset means clients are told the listener address.",
        NonEmptyList(),
    ),
    ConfigKey(
        "listener.security.protocol.map",
        ConfigType.STRING,
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "Which security protocol each listener name speaks, as NAME:PROTOCOL pairs; a CONTROLLER listener "
        "needs an entry here.",
        # Static here: Kafka's DynamicListenerConfig adds listeners with their protocols at run
        # time; kafkalike binds its listeners once (as for ``listeners``).
    ),
    ConfigKey(
        "inter.broker.listener.name",
        ConfigType.STRING,
        None,
        "The listener brokers use to reach each other. Unset means the one speaking security.inter.broker.protocol.",
    ),
    ConfigKey(
        "socket.request.max.bytes",
        ConfigType.INT,
        "104857600",
        "The largest request, in bytes, the broker reads from a connection; a larger one closes the connection.",
        at_least(1),
    ),
    ConfigKey(
        "queued.max.request.bytes",
        ConfigType.LONG,
        "-1",
        "How many bytes of requests may be in flight (being received or handled) across all connections "
        "before the broker stops reading from them until memory frees; -1 means no limit. At least "
        "socket.request.max.bytes when set.",
    ),
    ConfigKey(
        "max.connections",
        ConfigType.INT,
        str(INT_MAX),
        "The most connections the broker has at once; further ones wait, not accepted, until one closes.",
        at_least(0),
        dynamic=True,
    ),
    ConfigKey(
        "max.connections.per.ip",
        ConfigType.INT,
        str(INT_MAX),
        "The most connections from one IP address; a further one from that address is closed at once. "
        "May be 0 only if max.connections.per.ip.overrides is set.",
        at_least(0),
        dynamic=True,
    ),
    ConfigKey(
        "max.connections.per.ip.overrides",
        ConfigType.STRING,
        "",
        "Per-address exceptions to max.connections.per.ip, as comma-separated host:count pairs, for example "
        '"hostName:100,127.0.0.1:200".',
        dynamic=True,
    ),
    ConfigKey(
        "connections.max.idle.ms",
        ConfigType.LONG,
        "600000",
        "How long, in milliseconds, a connection may go without a request before the broker closes it; "
        "a negative value never closes idle connections.",
    ),
)
