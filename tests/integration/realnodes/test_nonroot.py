"""Non-root launchers on real nodes (docs/nonroot.md): `ps` on the node shows the launcher's
libvirtd and QEMU under the qemu user (107), never root, and the guest still gets what a
root launcher gave it: its pod network (the handler's tap, DHCP on port 67 from the
unprivileged launcher) and its disks. The container's root filesystem is read-only, and
with the KubeVirt CR asking for it the launcher runs under KubeVirt's own seccomp profile
(docs/hardening.md); a passt VMI's under passt's (`assert_passt_confined`, called by the
passt story in test_network.py)."""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from handler.seccomp import passt_profile, profile
from handler.seccomp_passt import additions
from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from shared.launcherpod import LAUNCHER_GID, LAUNCHER_UID
from shared.seccompconfig import KUBEVIRT_PROFILE, PASST_PROFILE
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


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def _root_mount_options(pid: int) -> list[str]:
    """The mount options of `/` in `pid`'s mount namespace (its container's rootfs)."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return fields[5].split(",")
    raise AssertionError(f"no / in /proc/{pid}/mountinfo")


def _kubevirt_generation(k: Kubectl) -> tuple[int, int | None]:
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    return kv["metadata"]["generation"], kv.get("status", {}).get("observedGeneration")


@contextlib.contextmanager
def kubevirt_seccomp_profile(k: Kubectl, cluster: Cluster) -> Iterator[list[Path]]:
    """The KubeVirt CR names KubeVirt's profile for launchers (customProfile, as KubeVirt's
    docs write it); yields the profile's file on each node once every virt-handler wrote
    it and the controller applied the CR. The CR's configuration as it was afterwards."""
    before = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    custom = {"customProfile": {"localhostProfile": KUBEVIRT_PROFILE}}
    body = {"spec": {"configuration": {"seccompConfiguration": {
        "virtualMachineInstanceProfile": custom}}}}  # fmt: skip
    k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", json.dumps(body))
    try:
        fleet = cluster.fleet()
        files = [fleet.node(n).layout.kubelet_dir / "seccomp" / KUBEVIRT_PROFILE
                 for n in cluster.config.nodes]  # fmt: skip
        _wait(lambda: all(f.exists() for f in files), 60, "the profile on every node")
        _wait(lambda: (g := _kubevirt_generation(k))[0] == g[1], 60, "the CR applied")
        yield files
    finally:
        configuration = before["spec"].get("configuration") or {}
        op = {"op": "replace", "path": "/spec/configuration", "value": configuration}
        k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=json", "-p", json.dumps([op]))


def _oci_seccomp(cluster: Cluster, node: str, container_id: str) -> dict[str, Any]:
    """The seccomp section of the OCI spec containerd gave runc for a container."""
    root = cluster.fleet().node(node).layout.containerd_dir
    (spec,) = root.glob(f"*/io.containerd.runtime.v2.task/k8s.io/{container_id}/config.json")
    seccomp: dict[str, Any] = json.loads(spec.read_text())["linux"]["seccomp"]
    return seccomp


def _rules(seccomp: dict[str, Any]) -> set[tuple[Any, ...]]:
    """A LinuxSeccomp's rules, comparable (absent fields as their defaults)."""
    return {
        (name, r["action"], r.get("errnoRet"), tuple(
            (a["index"], a["value"], a.get("valueTwo", 0), a["op"]) for a in r.get("args") or []
        ))
        for r in seccomp["syscalls"] for name in r["names"]
    }  # fmt: skip


def assert_passt_confined(k: Kubectl, cluster: Cluster, ns: str, vmi: dict[str, Any]) -> None:
    """A running passt VMI's launcher pod and compute container name `kubevirt/passt.json`;
    the OCI spec containerd handed runc holds KubeVirt's profile plus exactly passt's
    sandbox calls (handler/seccomp_passt.py); passt runs under it and under its own filter
    on top (`Seccomp: 2`, two filters)."""
    (pod,) = pods(k, ns, f"kubevirt.io/created-by={vmi['metadata']['uid']}")
    spec: Any = pod["spec"]
    localhost = {"type": "Localhost", "localhostProfile": PASST_PROFILE}
    compute = spec["containers"][0]["securityContext"]
    assert compute["seccompProfile"] == spec["securityContext"]["seccompProfile"] == localhost
    pod_status: Any = pod["status"]
    (status,) = [c for c in pod_status["containerStatuses"] if c["name"] == "compute"]
    seccomp = _oci_seccomp(cluster, spec["nodeName"], status["containerID"].split("//")[-1])
    assert seccomp["defaultAction"] == "SCMP_ACT_ERRNO"
    assert _rules(seccomp) == _rules(passt_profile())
    added = _rules(seccomp) - _rules(profile())
    assert added == _rules({"syscalls": additions()}), sorted(added)
    under = _descendants(_ps(), _launcher_pid(vmi["metadata"]["uid"]))
    passts = [pid for pid, (_, comm) in under.items() if comm.startswith("passt")]
    assert passts, under
    for pid in passts:
        assert _status(pid)["Seccomp"] == "2" and _status(pid)["NoNewPrivs"] == "1"
        assert int(_status(pid)["Seccomp_filters"]) >= 2, _status(pid)  # runc's + passt's


def test_launchers_run_libvirtd_and_qemu_as_the_qemu_user(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A tiny VMI boots on a real node; `ps` there shows its launcher, the launcher's
    libvirtd and its QEMU with uid 107 (every uid and gid of them 107, none 0); the
    container's /dev/net/tun is handed to 107 by virt-handler (QEMU opens the pod's tap); the
    guest got its masquerade address by DHCP from the unprivileged launcher and read its
    containerDisk and cloud-init disks. The pod says so too: runAsNonRoot, fsGroup 107.

    Hardened further: the container's root filesystem is mounted read-only (its
    mountinfo), and with the KubeVirt CR naming KubeVirt's profile, virt-handler wrote it
    into each node's kubelet seccomp dir (0600) and the launcher runs under it: the pod
    names it (Localhost), runc got it from containerd (userfaultfd allowed, which the
    runtime's default refuses), and the launcher and QEMU are seccomp-filtered (mode 2)."""
    k, ns = real_stack, real_namespace
    with kubevirt_seccomp_profile(k, real_cluster) as files:
        assert all(f.stat().st_mode & 0o777 == 0o600 for f in files)
        k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_tiny("nonroot")))
        _boots_as_the_qemu_user(k, real_cluster, ns)


def _boots_as_the_qemu_user(k: Kubectl, real_cluster: Cluster, ns: str) -> None:

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
    assert compute["readOnlyRootFilesystem"] is True
    assert "ro" in _root_mount_options(launcher), _root_mount_options(launcher)
    localhost = {"type": "Localhost", "localhostProfile": KUBEVIRT_PROFILE}
    assert compute["seccompProfile"] == spec["securityContext"]["seccompProfile"] == localhost
    pod_status: Any = pod["status"]
    statuses: list[Any] = pod_status["containerStatuses"]
    (status,) = [c for c in statuses if c["name"] == "compute"]
    seccomp = _oci_seccomp(real_cluster, spec["nodeName"], status["containerID"].split("//")[-1])
    allowed = {
        n for r in seccomp["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" for n in r["names"]
    }
    assert "userfaultfd" in allowed and "unshare" not in allowed, sorted(allowed)
    for pid in (launcher, qemu):
        assert _status(pid)["Seccomp"] == "2", _status(pid)  # filtered
        assert _status(pid)["NoNewPrivs"] == "1"
    k("delete", "vmi", "nonroot", "-n", ns, "--wait=false")
