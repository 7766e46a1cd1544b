"""The imperative actions on a VMI: their URL name, HTTP method and RBAC verb, written once.

Discovery, routing, the SubjectAccessReview verb and the RBAC manifests' drift test all
read this table, so adding an action is one line here (plus the handler's side).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

GROUP = "subresources.kubevirt.io"
VERSION = "v1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = "virtualmachineinstances"


class Action(StrEnum):
    """A subresource of virtualmachineinstances (the last path segment)."""

    PAUSE = "pause"
    UNPAUSE = "unpause"
    SOFT_REBOOT = "softreboot"
    GUEST_OS_INFO = "guestosinfo"
    USER_LIST = "userlist"
    FILESYSTEM_LIST = "filesystemlist"
    CONSOLE = "console"


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionSpec:
    """How an action is called: PUT → verb update (a state change), GET → verb get."""

    action: Action
    method: str
    stream: bool = False  # a websocket, relayed rather than answered

    @property
    def verb(self) -> str:
        """The RBAC verb kube-apiserver derives from the method (and that we re-check)."""
        return "update" if self.method == "PUT" else "get"


ACTIONS: Mapping[Action, ActionSpec] = {
    Action.PAUSE: ActionSpec(action=Action.PAUSE, method="PUT"),
    Action.UNPAUSE: ActionSpec(action=Action.UNPAUSE, method="PUT"),
    Action.SOFT_REBOOT: ActionSpec(action=Action.SOFT_REBOOT, method="PUT"),
    Action.GUEST_OS_INFO: ActionSpec(action=Action.GUEST_OS_INFO, method="GET"),
    Action.USER_LIST: ActionSpec(action=Action.USER_LIST, method="GET"),
    Action.FILESYSTEM_LIST: ActionSpec(action=Action.FILESYSTEM_LIST, method="GET"),
    Action.CONSOLE: ActionSpec(action=Action.CONSOLE, method="GET", stream=True),
}
