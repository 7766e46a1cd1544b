"""Typed errors of the command protocol, on both sides of the socket.

Every error that crosses the wire is ``{code, message, details}``; the client turns the
code back into one of the classes below, so callers branch on types, never on strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Codes in ``error.code``; codes not listed here map to CommandFailed."""

    BAD_FRAME = "bad_frame"
    FRAME_TOO_LARGE = "frame_too_large"
    BAD_REQUEST = "bad_request"
    UNKNOWN_METHOD = "unknown_method"
    INVALID_ARGUMENT = "invalid_argument"
    VERSION_MISMATCH = "version_mismatch"
    INTERNAL = "internal"
    # Launcher command failures.
    INVALID_VMI = "invalid_vmi"
    DOMAIN_NOT_FOUND = "domain_not_found"
    AGENT_NOT_CONNECTED = "agent_not_connected"
    LIBVIRT = "libvirt_error"
    IMAGE_NOT_FOUND = "image_not_found"
    DISK = "disk_error"
    MIGRATION = "migration_error"


class WireError(Exception):
    """Base class of every protocol error."""


class ProtocolViolation(WireError):
    """The peer sent something that is not a valid frame or message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class FrameTooLarge(ProtocolViolation):
    """A frame header announced more bytes than the maximum frame size."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(ErrorCode.FRAME_TOO_LARGE, f"frame of {size} bytes exceeds limit {limit}")
        self.size = size
        self.limit = limit


class Disconnected(WireError):
    """The connection closed (or was never open) before a reply arrived."""


class CallTimeout(WireError):
    """No reply arrived within the call's timeout tier."""

    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(f"{method} timed out after {seconds:g}s")
        self.method = method
        self.seconds = seconds


class VersionMismatch(WireError):
    """Client and server share no protocol version."""

    def __init__(self, ours: tuple[str, ...], theirs: tuple[str, ...]) -> None:
        super().__init__(f"no common protocol version: client {list(ours)}, server {list(theirs)}")
        self.ours = ours
        self.theirs = theirs


class RemoteError(WireError):
    """The server answered with an error reply."""

    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details: Mapping[str, Any] = details or {}

    def to_wire(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": dict(self.details)}


class UnknownMethod(RemoteError):
    """The server has no handler for the method."""


class InvalidArgument(RemoteError):
    """The arguments did not decode; ``details['field']`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(ErrorCode.INVALID_ARGUMENT, f"{field}: {message}", {"field": field})
        self.field = field


class BadRequest(RemoteError):
    """The request frame was not ``{id, method, args}``."""


class CommandFailed(RemoteError):
    """The command ran and failed; ``code`` says why (e.g. domain_not_found)."""


_BY_CODE: dict[str, type[RemoteError]] = {
    ErrorCode.UNKNOWN_METHOD: UnknownMethod,
    ErrorCode.BAD_REQUEST: BadRequest,
    ErrorCode.BAD_FRAME: BadRequest,
    ErrorCode.FRAME_TOO_LARGE: BadRequest,
}


def error_from_wire(payload: Any) -> RemoteError:
    """Rebuild the typed error from an ``error`` map; malformed maps become BAD_FRAME."""
    if not isinstance(payload, Mapping):
        return BadRequest(ErrorCode.BAD_FRAME, f"error payload is not a map: {payload!r}")
    code = str(payload.get("code", ErrorCode.INTERNAL))
    message = str(payload.get("message", ""))
    details = payload.get("details")
    details = details if isinstance(details, Mapping) else {}
    if code == ErrorCode.INVALID_ARGUMENT:
        err = InvalidArgument(str(details.get("field", "?")), message)
        err.message = message
        return err
    cls = _BY_CODE.get(code, CommandFailed)
    return cls(code, message, details)
