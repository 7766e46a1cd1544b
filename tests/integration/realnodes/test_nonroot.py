"""Non-root launchers on real nodes (docs/nonroot.md): `ps` on the node shows the launcher's
libvirtd and QEMU under the qemu user (107), never root, and the guest still gets what a
root launcher gave it: its pod network (the handler's tap, DHCP on port 67 from the
unprivileged launcher) and its disks."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from shared.launcherpod import LAUNCHER_GID, LAUNCHER_UID
from tests.integration.realnodes.conftest import pods
from tests.integration.realnodes.test_story import REPO, _launcher_pid, _serial, _wait

pytestmark = pytest.mark.cluster


def _tiny(name: str) -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi = copy.deepcopy(vmi)
    vmi["metadata"] = {"name": name}
    return vmi


def _ps() -> dict[int, tuple[int, int, str]]:
    """`ps` on the node (the nodes share this machine's PID namespace): pid → (uid, ppid, comm)."""
    out = subprocess.run(
        ["ps", "-e", "-o", "pid=,ppid=,uid=,comm="], capture_output=True, text=True, check=True
    ).stdout
    table = {}
    for line in out.splitlines():
        pid, ppid, uid, comm = line.split(None, 3)
        table[int(pid)] = (int(uid), int(ppid), comm)
    return table


def _descendants(table: dict[int, tuple[int, int, str]], root: int) -> dict[int, tuple[int, str]]:
    """pid → (uid, comm) of every process under `root` (the launcher's container)."""
    found: dict[int, tuple[int, str]] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (uid, ppid, comm) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = (uid, comm)
                frontier.append(pid)
    return found


def _ids(pid: int) -> tuple[list[int], list[int]]:
    """Real, effective, saved and filesystem uids and gids of `pid`."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    uids = next(line for line in status if line.startswith("Uid:")).split()[1:]
    gids = next(line for line in status if line.startswith("Gid:")).split()[1:]
    return [int(u) for u in uids], [int(g) for g in gids]


def test_launchers_run_libvirtd_and_qemu_as_the_qemu_user(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A tiny VMI boots on a real node; `ps` there shows its launcher, the launcher's
    libvirtd and its QEMU with uid 107 (every uid and gid of them 107, none 0); the
    container's /dev/net/tun is handed to 107 by virt-handler (QEMU opens the pod's tap); the
    guest got its masquerade address by DHCP from the unprivileged launcher and read its
    containerDisk and cloud-init disks. The pod says so too: runAsNonRoot, fsGroup 107."""
    k, ns = real_stack, real_namespace
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_tiny("nonroot")))

    def running() -> dict[str, Any] | None:
        out = k("get", "vmi", "nonroot", "-n", ns, "-o", "json", check=False)
        vmi: dict[str, Any] = json.loads(out) if out else {}
        return vmi if vmi.get("status", {}).get("phase") == "Running" else None

    vmi = _wait(running, 240, "VMI nonroot Running")
    serial = _wait(
        lambda: "KUBEVIRT-PY-DHCP" in (t := _serial(real_cluster, vmi)) and t,
        180, "the guest's DHCP lease", lambda: _serial(real_cluster, vmi)[-800:],
    )  # fmt: skip
    assert "KUBEVIRT-PY-DHCP eth0 10.0.2.2/24 router=10.0.2.1" in serial, serial[-1500:]
    assert "hello: from-kubevirt-py" in serial, serial[-1500:]

    launcher = _launcher_pid(vmi["metadata"]["uid"])
    table = _ps()
    under = _descendants(table, launcher)
    by_name = {comm: pid for pid, (_, comm) in under.items()}
    assert "libvirtd" in by_name and "qemu-system-x86" in by_name, under
    for pid in (launcher, by_name["libvirtd"], by_name["qemu-system-x86"]):
        uids, gids = _ids(pid)
        assert uids == [LAUNCHER_UID] * 4, (table[pid], uids)
        assert gids == [LAUNCHER_GID] * 4, (table[pid], gids)
    assert all(uid == LAUNCHER_UID for uid, _ in under.values()), under

    qemu = by_name["qemu-system-x86"]
    tun = Path(f"/proc/{qemu}/root/dev/net/tun").stat()
    assert tun.st_uid == LAUNCHER_UID

    (pod,) = pods(k, ns, f"kubevirt.io/created-by={vmi['metadata']['uid']}")
    spec: Any = pod["spec"]
    assert spec["securityContext"]["fsGroup"] == LAUNCHER_GID
    compute = spec["containers"][0]["securityContext"]
    assert compute["runAsNonRoot"] and compute["runAsUser"] == LAUNCHER_UID
    k("delete", "vmi", "nonroot", "-n", ns, "--wait=false")
