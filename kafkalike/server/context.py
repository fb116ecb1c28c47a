"""What a handler gets besides the request body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalike.protocol.api import RequestHeader

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker


@dataclass
class RequestContext:
    broker: Broker
    header: RequestHeader
    client_host: str

    @property
    def version(self) -> int:
        return self.header.api_version
