"""The imperative actions, one row each: resource, URL name, HTTP method, RBAC verb,
streaming, the launcher command behind it and the handler's path. Written once, read by
virt-api (routes, discovery, SubjectAccessReviews), the handler (its actions endpoint), the
CLI and the RBAC manifests' drift test.

VMI actions (pause, console, freeze, reset …) are forwarded to the handler of the VMI's
node; VM actions (start, stop, restart, migrate) are object writes made here (`vmactions`,
`vmhttp`), as are addvolume/removevolume on either (`volumes`, `volhttp`); the extras (SEV,
memory dumps, expand-spec) are answered here (`extras`).
Discovery, routing, the SubjectAccessReview verb and the RBAC manifests' drift test all
read these tables, so adding an action is one line here (plus its implementation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from shared.wire.launcher_api import Method

GROUP = "subresources.kubevirt.io"
VERSION = "v1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = "virtualmachineinstances"
VM_RESOURCE = "virtualmachines"
# The handler's actions endpoint (mutual TLS; virt-api forwards VMI actions there).
HANDLER_ACTION_PATH = "/v1/namespaces/{namespace}/virtualmachineinstances/{name}/{action}"
# The websocket subprotocol of streamed actions (console, vnc, portforward), KubeVirt's.
STREAM_PROTOCOLS = ("plain.kubevirt.io",)
HANDLER_PORT_FORWARD_PATH = HANDLER_ACTION_PATH.replace("{action}", "portforward/{port}/{protocol}")


class Action(StrEnum):
    """A subresource of virtualmachineinstances (the last path segment)."""

    PAUSE = "pause"
    UNPAUSE = "unpause"
    SOFT_REBOOT = "softreboot"
    GUEST_OS_INFO = "guestosinfo"
    USER_LIST = "userlist"
    FILESYSTEM_LIST = "filesystemlist"
    CONSOLE = "console"
    VNC = "vnc"
    PORT_FORWARD = "portforward"  # …/portforward/<port>[/<protocol>]: a TCP tunnel
    FREEZE = "freeze"
    UNFREEZE = "unfreeze"
    RESET = "reset"
    BACKUP = "backup"  # the backup controller's: shared/wire/backup.py


class VMAction(StrEnum):
    """A subresource of virtualmachines (the last path segment)."""

    START = "start"
    STOP = "stop"
    RESTART = "restart"
    MIGRATE = "migrate"


class VolumeAction(StrEnum):
    """Hotplug subresources, on virtualmachineinstances and on virtualmachines alike."""

    ADD = "addvolume"
    REMOVE = "removevolume"


class ExtraAction(StrEnum):
    """Subresources served by virt_api.subresources.extras: SEV and memory dumps answer
    "not supported"; expand-spec returns the VM with its instancetype and preference
    applied."""

    SEV_FETCH_CERT_CHAIN = "sev/fetchcertchain"
    SEV_QUERY_LAUNCH_MEASUREMENT = "sev/querylaunchmeasurement"
    SEV_SETUP_SESSION = "sev/setupsession"
    SEV_INJECT_LAUNCH_SECRET = "sev/injectlaunchsecret"
    EXPAND_SPEC = "expand-spec"
    MEMORY_DUMP = "memorydump"
    REMOVE_MEMORY_DUMP = "removememorydump"


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionSpec:
    """How an action is called: PUT → verb update (a state change), GET → verb get."""

    action: Action | VMAction | VolumeAction | ExtraAction
    method: str
    stream: bool = False  # a websocket, relayed rather than answered
    resource: str = RESOURCE
    # The launcher command a forwarded VMI action runs (None: relayed or answered elsewhere).
    launcher: Method | None = None

    @property
    def verb(self) -> str:
        """The RBAC verb kube-apiserver derives from the method (and that we re-check)."""
        return "update" if self.method == "PUT" else "get"


ACTIONS: Mapping[Action, ActionSpec] = {
    Action.PAUSE: ActionSpec(action=Action.PAUSE, method="PUT", launcher=Method.PAUSE),
    Action.UNPAUSE: ActionSpec(action=Action.UNPAUSE, method="PUT", launcher=Method.UNPAUSE),
    Action.SOFT_REBOOT: ActionSpec(
        action=Action.SOFT_REBOOT, method="PUT", launcher=Method.SOFT_REBOOT
    ),
    Action.GUEST_OS_INFO: ActionSpec(
        action=Action.GUEST_OS_INFO, method="GET", launcher=Method.GET_GUEST_INFO
    ),
    Action.USER_LIST: ActionSpec(action=Action.USER_LIST, method="GET", launcher=Method.GET_USERS),
    Action.FILESYSTEM_LIST: ActionSpec(
        action=Action.FILESYSTEM_LIST, method="GET", launcher=Method.GET_FILESYSTEMS
    ),
    Action.CONSOLE: ActionSpec(action=Action.CONSOLE, method="GET", stream=True),
    Action.VNC: ActionSpec(action=Action.VNC, method="GET", stream=True),
    Action.PORT_FORWARD: ActionSpec(action=Action.PORT_FORWARD, method="GET", stream=True),
    Action.FREEZE: ActionSpec(action=Action.FREEZE, method="PUT", launcher=Method.FREEZE),
    Action.UNFREEZE: ActionSpec(action=Action.UNFREEZE, method="PUT", launcher=Method.UNFREEZE),
    Action.RESET: ActionSpec(action=Action.RESET, method="PUT", launcher=Method.RESET),
    # The handler serves it (handler/backup.py): Start → backup_begin, Status → backup_status.
    Action.BACKUP: ActionSpec(action=Action.BACKUP, method="PUT", launcher=Method.BACKUP_BEGIN),
}

VM_ACTIONS: Mapping[VMAction, ActionSpec] = {
    a: ActionSpec(action=a, method="PUT", resource=VM_RESOURCE) for a in VMAction
}
# A VM's portforward reaches the VMI of the same name (reviewed on virtualmachines).
VM_PORT_FORWARD = ActionSpec(
    action=Action.PORT_FORWARD, method="GET", stream=True, resource=VM_RESOURCE
)
# (resource, action) → spec: addvolume/removevolume are object writes made here too.
VOLUME_ACTIONS: Mapping[tuple[str, VolumeAction], ActionSpec] = {
    (r, a): ActionSpec(action=a, method="PUT", resource=r)
    for r in (RESOURCE, VM_RESOURCE)
    for a in VolumeAction
}
EXTRA_ACTIONS: Mapping[ExtraAction, ActionSpec] = {
    ExtraAction(spec.action): spec
    for spec in (
        ActionSpec(action=ExtraAction.SEV_FETCH_CERT_CHAIN, method="GET"),
        ActionSpec(action=ExtraAction.SEV_QUERY_LAUNCH_MEASUREMENT, method="GET"),
        ActionSpec(action=ExtraAction.SEV_SETUP_SESSION, method="PUT"),
        ActionSpec(action=ExtraAction.SEV_INJECT_LAUNCH_SECRET, method="PUT"),
        ActionSpec(action=ExtraAction.EXPAND_SPEC, method="GET", resource=VM_RESOURCE),
        ActionSpec(action=ExtraAction.MEMORY_DUMP, method="PUT", resource=VM_RESOURCE),
        ActionSpec(action=ExtraAction.REMOVE_MEMORY_DUMP, method="PUT", resource=VM_RESOURCE),
    )
}
# Namespaced resources of the group that are not subresources of an object: name → verb.
# expand-vm-spec: PUT a VirtualMachine, get it back expanded (virtctl expand --file).
TOP_LEVEL: Mapping[str, str] = {"expand-vm-spec": "update"}
ALL_ACTIONS: tuple[ActionSpec, ...] = (
    *ACTIONS.values(),
    *(s for (r, _), s in VOLUME_ACTIONS.items() if r == RESOURCE),
    *VM_ACTIONS.values(),
    *(s for (r, _), s in VOLUME_ACTIONS.items() if r == VM_RESOURCE),
    VM_PORT_FORWARD,
    *EXTRA_ACTIONS.values(),
)
