"""The controller's errors: one base class; `SyncError` (shared.sync) carries a condition's
reason."""

from __future__ import annotations

from shared.sync import SyncError

__all__ = ["ConfigError", "ControllerError", "SyncError"]


class ControllerError(Exception):
    """Base class of every error raised by the controller package."""


class ConfigError(ControllerError):
    """The command line or environment does not describe a usable controller."""
