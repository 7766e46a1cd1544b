"""devices.filesystems in the launcher pod, as KubeVirt runs them: one `virtiofs-<name>`
container per filesystem running the launcher image's Rust virtiofsd as the compute
container's unprivileged user, `--sandbox none` (no namespaces, no capabilities), serving
the volume's pod mount, and listening in the `virtiofs-containers` emptyDir the compute
container mounts too (shared/virtiofs.py). QEMU connects to it; virtiofsd ends with QEMU.

The volume's pod volume and mount are its source's (controller/services/volumes): the
sidecar mounts the same volume at the same path, read-only where the compute container's
is. A claim in Block mode has no directory to share: the VMI fails, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.errors import SyncError
from shared import podlayout
from shared.model import ConditionReason, VirtualMachineInstance
from shared.virtiofs import VIRTIOFSD, container_name, socket_path

# virtiofsd's share of the pod (its RSS stays in single MiBs with cache=auto).
RESOURCES = {"requests": {"cpu": "10m", "memory": "20Mi"}, "limits": {"memory": "80Mi"}}


def volumes(vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    """The sockets' emptyDir, when the VMI has filesystems."""
    if not vmi.spec.domain.devices.filesystems:
        return []
    return [{"name": podlayout.VIRTIOFS_VOLUME, "emptyDir": {}}]


def compute_mounts(vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    """The compute container's mount of the sockets' emptyDir (QEMU connects there)."""
    if not vmi.spec.domain.devices.filesystems:
        return []
    return [{"name": podlayout.VIRTIOFS_VOLUME, "mountPath": podlayout.VIRTIOFS_DIR}]


def containers(
    vmi: VirtualMachineInstance,
    *,
    mounts: Sequence[Mapping[str, Any]],
    image: str,
    pull_policy: str,
    security_context: Mapping[str, Any] | None,
) -> list[dict[str, Any]]:
    """A virtiofsd container per filesystem; `mounts`: the compute container's volume
    mounts, among which each filesystem's volume is found (by its pod volume's name)."""
    by_volume = {m["name"]: m for m in mounts}
    out = []
    for i, fs in enumerate(vmi.spec.domain.devices.filesystems):
        name = fs.name or ""
        source = by_volume.get(podlayout.pod_volume_name(name))
        if source is None:
            raise SyncError(
                ConditionReason.INVALID_SPEC,
                f"spec.domain.devices.filesystems[{i}]: volume {name!r} has no directory in "
                "the pod to share (a Block-mode claim?)",
                requeue=False,
            )
        out.append(
            _container(name, source, image=image, pull_policy=pull_policy, sc=security_context)
        )
    return out


def _container(
    name: str,
    source: Mapping[str, Any],
    *,
    image: str,
    pull_policy: str,
    sc: Mapping[str, Any] | None,
) -> dict[str, Any]:
    shared_dir = source["mountPath"]
    args = [
        f"--socket-path={socket_path(name)}",
        f"--shared-dir={shared_dir}",
        "--sandbox=none",  # unprivileged: no mount namespace, no chroot (KubeVirt's)
        "--cache=auto",
        "--rlimit-nofile=0",  # keep the container's limit: raising it needs a capability
    ]
    if source.get("readOnly"):
        args.append("--readonly")
    out: dict[str, Any] = {
        "name": container_name(name),
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": [VIRTIOFSD],
        "args": args,
        "resources": {k: dict(v) for k, v in RESOURCES.items()},
        "volumeMounts": [
            {"name": podlayout.VIRTIOFS_VOLUME, "mountPath": podlayout.VIRTIOFS_DIR},
            dict(source),
        ],
    }
    if sc is not None:
        out["securityContext"] = dict(sc)
    return out
