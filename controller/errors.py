"""The controller's errors: one base class; `SyncError` carries a condition's reason."""

from __future__ import annotations

from shared.model import ConditionReason


class ControllerError(Exception):
    """Base class of every error raised by the controller package."""


class ConfigError(ControllerError):
    """The command line or environment does not describe a usable controller."""


class SyncError(ControllerError):
    """One sync of one object failed; `reason` becomes the condition's reason.

    `requeue` says whether retrying with backoff can help (a conflict can; an object that
    names a VMI owned by someone else cannot until the world changes).
    """

    def __init__(
        self, reason: ConditionReason | str, message: str, *, requeue: bool = True
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = str(reason)
        self.message = message
        self.requeue = requeue
