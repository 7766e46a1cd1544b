"""The launcher's errors. Command failures are wire errors, so the server sends them as-is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.wire.errors import CommandFailed, ErrorCode


class LauncherError(Exception):
    """Base class of launcher errors that are not command replies (start-up, config)."""


class StartupError(LauncherError):
    """libvirt or QEMU cannot run here; the daemon exits non-zero with this one line."""


class CommandError(CommandFailed):
    """Base of command failures; subclasses fix the wire code."""

    code_value: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(self.code_value, message, details)


class DomainNotFound(CommandError):
    code_value = ErrorCode.DOMAIN_NOT_FOUND


class AgentNotConnected(CommandError):
    code_value = ErrorCode.AGENT_NOT_CONNECTED


class LibvirtFailure(CommandError):
    code_value = ErrorCode.LIBVIRT


class InvalidSpec(CommandError):
    """The VMI failed validation; details['fields'] lists every problem."""

    code_value = ErrorCode.INVALID_VMI


class HypervisorUnsupported(CommandError):
    """The VMI needs what this node's hypervisor cannot run; details name the fields."""

    code_value = ErrorCode.HYPERVISOR_UNSUPPORTED


class ImageNotFound(CommandError):
    code_value = ErrorCode.IMAGE_NOT_FOUND


class DiskFailure(CommandError):
    code_value = ErrorCode.DISK


class MigrationFailure(CommandError):
    """A migration could not start, or failed; the guest keeps running where it was."""

    code_value = ErrorCode.MIGRATION


class DaemonDied(LauncherError):
    """The private libvirtd exited under us."""
