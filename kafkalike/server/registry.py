"""Which APIs the broker serves, at which versions: one handler per API key registers itself.

ApiVersions is derived from this table, never listed by hand. Each handler advertises the
range Apache Kafka 4.0 advertises for that key (KIP-896's floor, with its deliberate
exceptions: Produce, Metadata and JoinGroup from v0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalike.protocol.codec import Message
from kafkalike.protocol.spec import api_specs

if TYPE_CHECKING:
    from kafkalike.server.context import RequestContext


@dataclass(frozen=True, slots=True)
class AnswerLater:
    """A handler's answer that only waits from here on (an acks=all produce for its replicas):
    everything the request does is done, so the connection reads and handles the next request
    while ``answer()`` waits, and still sends the answers in request order."""

    answer: Callable[[], Awaitable[Mapping[str, Any]]]


HandlerFn = Callable[["RequestContext", Message], Awaitable[Mapping[str, Any] | AnswerLater | None]]


@dataclass(frozen=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    fn: HandlerFn

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


HANDLERS: dict[int, Handler] = {}


def handles(api_key: int, min_version: int, max_version: int) -> Callable[[HandlerFn], HandlerFn]:
    """Register ``fn`` as the handler of ``api_key`` for the versions it advertises."""
    spec = api_specs()[api_key]
    assert min_version in spec.versions and max_version in spec.versions, (api_key, min_version, max_version)

    def register(fn: HandlerFn) -> HandlerFn:
        HANDLERS[api_key] = Handler(api_key, min_version, max_version, fn)
        return fn

    return register


def load_handlers() -> dict[int, Handler]:
    """Import every handler module so that each registers itself."""
    import importlib
    import pkgutil

    from kafkalike.server import handlers

    for module in pkgutil.iter_modules(handlers.__path__):
        importlib.import_module(f"{handlers.__name__}.{module.name}")
    return HANDLERS
