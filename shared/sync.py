"""The error a reconcile's sync raises: its reason becomes a condition's reason.

Shared because the controller's loops and the helpers they share with virt-api (instancetype
expansion, revisions) raise it alike.
"""

from __future__ import annotations

from shared.model import ConditionReason


class SyncError(Exception):
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
