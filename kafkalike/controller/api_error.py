"""An operation's outcome for one resource: an error code and Kafka's message (Kafka's ApiError).

The controller's operations answer per topic or per config resource; ``ApiError.NONE`` is
success. ``ControllerApiError`` is the same, raised by the checks an operation runs in order, so
that the first one failing decides the answer, as Kafka's exceptions do. ``ControllerError`` is
what a broker's metadata operation raises when the controller refused it or could not be reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafkalike.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ApiError:
    code: ErrorCode
    message: str | None = None

    NONE: ClassVar[ApiError]

    @property
    def ok(self) -> bool:
        return self.code == ErrorCode.NONE


ApiError.NONE = ApiError(ErrorCode.NONE)


class ControllerApiError(Exception):
    """A check refusing an operation for one resource; ``error`` is the answer."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.error = ApiError(code, message)


class ControllerError(Exception):
    """A broker's metadata operation refused (by the controller, or for want of one)."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
