"""Errors of the device-plugin API, on both sides of its sockets (one base class).

A refused registration names the RegisterRequest field at fault; over gRPC it travels as
INVALID_ARGUMENT with details ``"<field>: <reason>"`` and the client turns it back into
`RegistrationRefused`, so callers branch on types and fields, never on strings.
"""

from __future__ import annotations


class DevicePluginError(Exception):
    """Base class of every device-plugin API error."""


class DecodeError(DevicePluginError):
    """Bytes that are not a valid protobuf message of the expected type."""


class RegistrationRefused(DevicePluginError):
    """The kubelet refused a RegisterRequest; `field` is the offending field's name."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class AllocationRefused(DevicePluginError):
    """The plugin cannot allocate what was asked (unknown device IDs, none healthy)."""


class CallFailed(DevicePluginError):
    """A call did not complete: the peer is not listening, went away, or timed out."""

    def __init__(self, method: str, code: str, details: str) -> None:
        super().__init__(f"{method}: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details
