"""The handler's backup action (handler.backup): Start mounts the target pod's claim
directory into the launcher pod's hotplug-disks volume and asks the launcher to back up
into it; Status asks the launcher and releases the mount once the job is final (or the
launcher knows no backup); a target pod elsewhere or not running is refused; every other
action goes to the launchers unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from handler.backup import BackupTarget, claim_dir
from shared.kube import NotFound
from shared.wire.backup import BackupCmd, BackupRequest
from shared.wire.errors import InvalidArgument, RemoteError
from shared.wire.launcher_api import Method

NODE = "node01"


class FakeLaunchers:
    def __init__(self, root: Path, *, state: str = "Running") -> None:
        self.root = root
        self.calls: list[tuple[Method, dict[str, Any]]] = []
        self.state = state
        self.fail: Exception | None = None

    async def command(
        self, namespace: str, name: str, method: Method, args: Mapping[str, Any] | None = None
    ) -> Any:
        self.calls.append((method, dict(args or {})))
        if self.fail is not None:
            raise self.fail
        return {"state": self.state, "volumes": [], "message": "", "fullReason": ""}

    async def emptydirs(self, namespace: str, name: str) -> Path:
        return self.root / "launcher" / "volumes" / "kubernetes.io~empty-dir"

    async def console_socket(self, namespace: str, name: str) -> Path:
        return self.root / "console"

    async def vnc_socket(self, namespace: str, name: str) -> Path:
        return self.root / "vnc"

    async def forward_port(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        return "10.0.0.1", port


class FakeMounts:
    def __init__(self) -> None:
        self.mounted: dict[Path, Path] = {}

    def bind_dir(self, source: Path, target: Path) -> None:
        self.mounted[target] = source

    def unmount_dir(self, target: Path) -> None:
        self.mounted.pop(target, None)


def setup(
    tmp_path: Path, *, node: str = NODE, phase: str = "Running"
) -> tuple[BackupTarget, FakeLaunchers, FakeMounts]:
    claim = tmp_path / "pods" / "pod-uid" / "volumes" / "kubernetes.io~csi" / "pv-1" / "mount"
    claim.mkdir(parents=True)
    (tmp_path / "pods" / "pod-uid" / "volumes" / "kubernetes.io~projected" / "token").mkdir(
        parents=True
    )
    pods = {
        "target": {
            "metadata": {"uid": "pod-uid"},
            "spec": {"nodeName": node},
            "status": {"phase": phase},
        }
    }

    async def get_pod(namespace: str, name: str) -> Mapping[str, Any]:
        if name not in pods:
            raise NotFound(404, "NotFound", name)
        return pods[name]

    launchers, mounts = FakeLaunchers(tmp_path), FakeMounts()
    target = BackupTarget(
        launchers, get_pod=get_pod, node=NODE, pods_dir=tmp_path / "pods", mounts=mounts
    )
    return target, launchers, mounts


START = BackupRequest(backup_name="b1", checkpoint="t-2", incremental="t-1", target_pod="target")


async def test_start_mounts_the_claim_and_begins_in_the_launcher(tmp_path: Path) -> None:
    """The claim's CSI `mount/` directory lands as hotplug-disks/backup-b1 in the launcher
    pod; the launcher gets that directory as seen inside its pod."""
    target, launchers, mounts = setup(tmp_path)
    await target.command("ns", "vm", Method.BACKUP_BEGIN, START.to_wire())
    ((where, source),) = mounts.mounted.items()
    assert where.name == "backup-b1" and where.parent.name == "hotplug-disks"
    assert source == tmp_path / "pods/pod-uid/volumes/kubernetes.io~csi/pv-1/mount"
    ((method, args),) = launchers.calls
    assert method is Method.BACKUP_BEGIN
    assert args == {
        "targetDir": "/var/run/kubevirt/hotplug-disks/backup-b1/b1",
        "checkpoint": "t-2",
        "incremental": "t-1",
        "skipQuiesce": False,
    }


async def test_a_failed_begin_releases_the_mount(tmp_path: Path) -> None:
    """The launcher refusing leaves nothing mounted."""
    target, launchers, mounts = setup(tmp_path)
    launchers.fail = RemoteError("libvirt", "no space")
    with pytest.raises(RemoteError):
        await target.command("ns", "vm", Method.BACKUP_BEGIN, START.to_wire())
    assert mounts.mounted == {}


@pytest.mark.parametrize(
    ("state", "kept"), [("Running", True), ("Completed", False), ("Failed", False)]
)
async def test_status_releases_the_mount_once_final(tmp_path: Path, state: str, kept: bool) -> None:
    """Running keeps the claim mounted; Completed or Failed unmounts it."""
    target, launchers, mounts = setup(tmp_path)
    await target.command("ns", "vm", Method.BACKUP_BEGIN, START.to_wire())
    launchers.state = state
    status = BackupRequest(cmd=BackupCmd.STATUS, backup_name="b1").to_wire()
    reply = await target.command("ns", "vm", Method.BACKUP_BEGIN, status)
    assert reply["state"] == state and launchers.calls[-1][0] is Method.BACKUP_STATUS
    assert bool(mounts.mounted) is kept


@pytest.mark.parametrize(
    ("node", "phase", "pod"),
    [
        pytest.param("node02", "Running", "target", id="elsewhere"),
        pytest.param(NODE, "Pending", "target", id="pending"),
    ],
)
async def test_target_pod_not_running_here_is_refused(
    tmp_path: Path, node: str, phase: str, pod: str
) -> None:
    """A target pod on another node, or not running yet: refused naming targetPod, nothing mounted."""
    target, launchers, mounts = setup(tmp_path, node=node, phase=phase)
    with pytest.raises(InvalidArgument, match="targetPod"):
        await target.command("ns", "vm", Method.BACKUP_BEGIN, START.to_wire())
    assert mounts.mounted == {} and launchers.calls == []


async def test_other_actions_pass_through(tmp_path: Path) -> None:
    """Pause and the relays reach the launchers unchanged."""
    target, launchers, _ = setup(tmp_path)
    await target.command("ns", "vm", Method.PAUSE)
    assert launchers.calls == [(Method.PAUSE, {})]
    assert await target.console_socket("ns", "vm") == tmp_path / "console"
    assert await target.forward_port("ns", "vm", 22) == ("10.0.0.1", 22)


def test_claim_dir_wants_exactly_one_claim(tmp_path: Path) -> None:
    """No claim directory (or two) among the pod's volumes is refused."""
    with pytest.raises(InvalidArgument):
        claim_dir(tmp_path)
