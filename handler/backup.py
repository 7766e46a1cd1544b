"""The backup action on this node (KubeVirt's VirtualMachineBackup, the handler's part):
the target claim reaches the launcher as a directory, the launcher backs up into it.

    Start:  the target pod (a pod of the VMI's namespace the backup controller runs on this
            node with the claim mounted) → its claim's directory under the kubelet's pods
            dir → bind-mounted into the launcher pod's hotplug-disks volume as
            `backup-<name>/` (owned by the launchers' user: QEMU writes there)
            → launcher backup_begin into `<name>/` on the claim (a claim holds a chain)
    Status: launcher backup_status; once the job is final, the directory is unmounted

`BackupTarget` wraps the launchers' `ActionTarget` and answers every other action through
it unchanged. The target pod is read through the API in the VMI's own namespace, so a
backup can only reach claims the VMI's namespace could mount anyway.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import structlog

from handler.actions import ActionTarget, NotOnThisNode
from handler.dirmounts import DirMountPort
from handler.hotplug.mounts import MountFailed
from handler.hotplug.pvc import claim_dirs
from shared import podlayout
from shared.kube import NotFound as KubeNotFound
from shared.launcherpod import LAUNCHER_GID, LAUNCHER_UID
from shared.wire.backup import (
    BackupBeginArgs,
    BackupCmd,
    BackupReply,
    BackupRequest,
    backup_dir,
)
from shared.wire.errors import InvalidArgument, RemoteError
from shared.wire.launcher_api import Method

log = structlog.get_logger("handler.backup")

GetPod = Callable[[str, str], Awaitable[Mapping[str, Any]]]


class Launchers(ActionTarget, Protocol):
    """The launchers' target (handler.launcher_target.LauncherTarget) and where the VMI's
    launcher pod's emptyDirs are on this node."""

    async def emptydirs(self, namespace: str, name: str) -> Path: ...


class BackupTarget:
    """An `ActionTarget` serving the backup action itself; the rest goes to `inner`."""

    def __init__(
        self,
        inner: Launchers,
        *,
        get_pod: GetPod,
        node: str,
        pods_dir: Path,
        mounts: DirMountPort,
    ) -> None:
        self._inner = inner
        self._get_pod = get_pod
        self._node = node
        self._pods_dir = pods_dir
        self._mounts = mounts

    async def console_socket(self, namespace: str, name: str) -> Path:
        return await self._inner.console_socket(namespace, name)

    async def vnc_socket(self, namespace: str, name: str) -> Path:
        return await self._inner.vnc_socket(namespace, name)

    async def forward_port(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        return await self._inner.forward_port(namespace, name, port)

    async def command(
        self, namespace: str, name: str, method: Method, args: Mapping[str, Any] | None = None
    ) -> Any:
        if method is not Method.BACKUP_BEGIN:
            return await self._inner.command(namespace, name, method, args)
        request = BackupRequest.from_wire(args or {})
        on_node = await self._inner.emptydirs(namespace, name) / podlayout.HOTPLUG_DISKS_VOLUME
        mount = on_node / backup_dir(request.backup_name)
        if request.cmd is BackupCmd.STATUS:
            return await self._status(namespace, name, mount)
        claim = await self._claim_dir(namespace, request)
        try:
            self._mounts.bind_dir(claim, mount)
        except (MountFailed, OSError) as e:
            raise InvalidArgument("targetPod", f"cannot mount the target claim: {e}") from e
        in_pod = PurePosixPath(podlayout.HOTPLUG_DISKS_DIR) / backup_dir(request.backup_name)
        begin = BackupBeginArgs(
            target_dir=str(in_pod / request.backup_name),
            checkpoint=str(request.checkpoint),
            incremental=request.incremental,
            skip_quiesce=request.skip_quiesce,
        )
        try:
            return await self._inner.command(namespace, name, Method.BACKUP_BEGIN, begin.to_wire())
        except BaseException:
            self._mounts.unmount_dir(mount)
            raise

    async def _status(self, namespace: str, name: str, mount: Path) -> Any:
        try:
            raw = await self._inner.command(namespace, name, Method.BACKUP_STATUS, {})
        except RemoteError:  # the launcher knows no backup (it restarted): nothing to wait for
            self._mounts.unmount_dir(mount)
            raise
        if BackupReply.from_wire(raw).state.final:
            self._mounts.unmount_dir(mount)
            log.info("backup_target_released", target=str(mount))
        return raw

    async def _claim_dir(self, namespace: str, request: BackupRequest) -> Path:
        """The target pod's claim directory on this node, handed to the launchers' user."""
        pod_name = request.target_pod or ""
        try:
            pod = await self._get_pod(namespace, pod_name)
        except KubeNotFound as e:
            raise NotOnThisNode(f"target pod {namespace}/{pod_name} does not exist") from e
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        if spec.get("nodeName") != self._node or status.get("phase") != "Running" or not uid:
            raise InvalidArgument("targetPod", f"{pod_name} is not running on {self._node}")
        claim = claim_dir(self._pods_dir / uid / podlayout.POD_VOLUMES)
        if os.geteuid() == 0:
            os.chown(claim, LAUNCHER_UID, LAUNCHER_GID)
        return claim


def claim_dir(volumes: Path) -> Path:
    """The one claim directory among a pod's volumes on this node (`mount/` for CSI)."""
    found = claim_dirs(volumes)
    if len(found) != 1:
        message = f"{len(found)} claim directories under {volumes}, expected one"
        raise InvalidArgument("targetPod", message)
    return found[0]
