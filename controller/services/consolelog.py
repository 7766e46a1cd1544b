"""KubeVirt's `guest-console-log` container in the launcher pod: the launcher image's
python following the guest's serial console log (launcher/consolelog.py) to its stdout,
so `kubectl logs <pod> -c guest-console-log` shows the guest's boot while the console
stays free for `virtctl console`.

Wanted when the VMI has a serial console and says `logSerialConsole: true`, or leaves it
unset and the KubeVirt CR does not disable the log (virtualMachineOptions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared import podlayout
from shared.model import VirtualMachineInstance

GUEST_CONSOLE_LOG_CONTAINER = "guest-console-log"
# KubeVirt's figures for the container; a python follower fits them.
RESOURCES = {"requests": {"cpu": "5m", "memory": "35Mi"}, "limits": {"memory": "60Mi"}}


def wanted(vmi: VirtualMachineInstance, *, cluster_disabled: bool) -> bool:
    """Whether the VMI's pod gets the container."""
    devices = vmi.spec.domain.devices
    if devices.autoattach_serial_console is False:
        return False
    if devices.log_serial_console is not None:
        return devices.log_serial_console
    return not cluster_disabled


def container(
    *, image: str, pull_policy: str, security_context: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The container: reads the private volume (read-only) and watches the launcher's
    command socket in the sockets volume to end with it."""
    sockets = [podlayout.LAUNCHER_SOCKET, podlayout.LAUNCHER_INIT_SOCKET]
    args = ["--log", f"{podlayout.PRIVATE_DIR}/{podlayout.SERIAL_LOG}"]
    for name in sockets:
        args += ["--socket", f"{podlayout.SOCKETS_DIR}/{name}"]
    out: dict[str, Any] = {
        "name": GUEST_CONSOLE_LOG_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["python3", "-m", "launcher.consolelog"],
        "args": args,
        "resources": {k: dict(v) for k, v in RESOURCES.items()},
        "volumeMounts": [
            {"name": podlayout.PRIVATE_VOLUME, "mountPath": podlayout.PRIVATE_DIR,
             "readOnly": True},
            {"name": podlayout.SOCKETS_VOLUME, "mountPath": podlayout.SOCKETS_DIR},
        ],
    }  # fmt: skip
    if security_context is not None:
        out["securityContext"] = dict(security_context)
    return out
