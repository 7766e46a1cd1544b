"""Typed errors of the command protocol, on both sides of the socket.

Every error that crosses the wire is ``{code, message, details}``; the client turns the
code back into one of the classes below, so callers branch on types, never on strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

MAX_ERROR_TEXT = 1024  # characters of an error message or detail string on the wire


class ErrorCode(StrEnum):
    """Codes in ``error.code``; codes not listed here map to CommandFailed."""

    BAD_FRAME = "bad_frame"
    FRAME_TOO_LARGE = "frame_too_large"
    LIMIT_EXCEEDED = "limit_exceeded"
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
    # The VMI asks for what this node's hypervisor cannot run (KVM-only settings under TCG).
    HYPERVISOR_UNSUPPORTED = "hypervisor_unsupported"


class WireError(Exception):
    """Base class of every protocol error."""


class ProtocolViolation(WireError):
    """The peer sent something that is not a valid frame or message."""

    def __init__(
        self, code: ErrorCode, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.details: Mapping[str, Any] = details or {}


class LimitExceeded(ProtocolViolation):
    """A frame went over one of the reader's limits; ``limit`` is its name (see Limits)."""

    def __init__(
        self,
        limit: str,
        value: int,
        maximum: int,
        *,
        code: ErrorCode = ErrorCode.LIMIT_EXCEEDED,
        message: str | None = None,
    ) -> None:
        details = {"limit": limit, "value": value, "max": maximum}
        super().__init__(code, message or f"{limit}: {value} exceeds {maximum}", details)
        self.limit = limit
        self.value = value
        self.maximum = maximum


class FrameTooLarge(LimitExceeded):
    """A frame header announced more bytes than the maximum frame size."""

    def __init__(self, size: int, limit: int) -> None:
        message = f"frame of {size} bytes exceeds limit {limit}"
        super().__init__("max_frame", size, limit, code=ErrorCode.FRAME_TOO_LARGE, message=message)
        self.size = size


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
        """The ``error`` map; long texts are clipped, so a reply never echoes a huge input."""
        details = {k: _clip(v) if isinstance(v, str) else v for k, v in self.details.items()}
        return {"code": self.code, "message": _clip(self.message), "details": details}


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_TEXT else text[: MAX_ERROR_TEXT - 3] + "..."


class UnknownMethod(RemoteError):
    """The server has no handler for the method."""


class InvalidArgument(RemoteError):
    """The arguments did not decode; ``details['field']`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(ErrorCode.INVALID_ARGUMENT, f"{field}: {message}", {"field": field})
        self.field = field


class BadRequest(RemoteError):
    """The request frame was not ``{id, method, args}``."""


class OverLimit(BadRequest):
    """The request went over a limit of the server; ``limit`` names it (e.g. max_depth)."""

    @property
    def limit(self) -> str:
        return str(self.details.get("limit", ""))


class CommandFailed(RemoteError):
    """The command ran and failed; ``code`` says why (e.g. domain_not_found)."""


_BY_CODE: dict[str, type[RemoteError]] = {
    ErrorCode.UNKNOWN_METHOD: UnknownMethod,
    ErrorCode.BAD_REQUEST: BadRequest,
    ErrorCode.BAD_FRAME: BadRequest,
    ErrorCode.FRAME_TOO_LARGE: OverLimit,
    ErrorCode.LIMIT_EXCEEDED: OverLimit,
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
