"""A real node's own namespaces on this host: network, mount and a cgroup root.

- **Network**: a named netns (``ip netns``) joined to the cluster's host bridge by a veth
  pair; routes to the other nodes' pod ranges; IPv4 and IPv6 forwarding on inside it only
  (dual-stack: netplan6.py). No default route of either family, so nothing a node or pod
  sends can leave the machine. The kubelet's and
  kube-proxy's iptables rules land in this namespace, never in the host's.
- **Mount**: a pinned mount namespace where the paths a kubelet node has for itself are
  bind mounts of the node's directory (``/var/lib/kubelet`` shared, so volume mounts reach
  containerd and the containers; ``/var/run/kubevirt-py``, ``/var/lib/cni``, ``/run/netns``,
  the log dirs, ``/var/cache/kubevirt-py``), and the global ``/proc/sys`` entries the
  kubelet rewrites are files of the node's own. Hostpath volumes of the product's
  manifests (``/var/lib/kubelet/pods``, …) therefore mean this node's paths, as on a
  machine of its own.
- **cgroups**: a root of its own in every v1 hierarchy (the kubelet's ``cgroupRoot``), so
  two kubelets never share ``kubepods`` and teardown finds every container process.
Every step is idempotent; ``destroy`` leaves no interface, namespace, mount or cgroup.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import structlog

from localkube.errors import CommandFailed
from localkube.nodeagent.cgroups import Cgroup
from localkube.procs import run_cmd
from localkube.realnode.configs import NodeLayout
from localkube.realnode.netplan6 import NodeV6

log = structlog.get_logger()

CGROUP_ROOT = Path("/sys/fs/cgroup")
NETNS_DIR = Path("/run/netns")
# (node dir subpath, path inside the node's mount namespace)
NODE_BINDS: tuple[tuple[str, str], ...] = (
    ("kubelet", "/var/lib/kubelet"),
    ("kubevirt-py", "/run/kubevirt-py"),
    ("var-lib-cni", "/var/lib/cni"),
    ("netns", "/run/netns"),
    ("run-containerd", "/run/containerd"),
    ("log/pods", "/var/log/pods"),
    ("log/containers", "/var/log/containers"),
    # hostDisk paths live on the node (KubeVirt's examples use /var/data/disk.img): each
    # node has its own, removed with the node's directory.
    ("var-data", "/var/data"),
    # virt-handler's QEMU capability cache for the node's launchers (hostPath).
    ("var-cache-kubevirt-py", "/var/cache/kubevirt-py"),
)
# Global (not per-namespace) sysctls the kubelet writes at start.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)

_MOUNT_SCRIPT = """
set -e
while [ "$#" -gt 0 ]; do
  mkdir -p "$2" 2>/dev/null || true
  mount --bind "$1" "$2"
  shift 2
done
mount --make-rshared /var/lib/kubelet
"""


async def ensure_bridge(*, bridge: str, gateway: str, gateway6: str | None = None) -> None:
    """The cluster's host bridge with the gateway address (kube-apiserver listens there),
    and the IPv6 one (``gateway6``, a /64) on a dual-stack cluster's node network."""
    if not Path(f"/sys/class/net/{bridge}").exists():
        await run_cmd(["ip", "link", "add", bridge, "type", "bridge"])
    addrs = await run_cmd(["ip", "-4", "-o", "addr", "show", "dev", bridge])
    if f" {gateway}/" not in addrs:
        await run_cmd(["ip", "addr", "add", f"{gateway}/24", "dev", bridge])
    if gateway6 is not None:
        await run_cmd(["ip", "addr", "replace", f"{gateway6}/64", "dev", bridge, "nodad"])
    await run_cmd(["ip", "link", "set", bridge, "up"])


async def remove_bridge(bridge: str) -> None:
    if Path(f"/sys/class/net/{bridge}").exists():
        await run_cmd(["ip", "link", "del", bridge])


def bridges_in_use(prefix: str = "kvbr") -> set[int]:
    """Block numbers of cluster bridges already on this host."""
    found = set()
    for dev in Path("/sys/class/net").iterdir():
        suffix = dev.name.removeprefix(prefix)
        if dev.name.startswith(prefix) and suffix.isdigit():
            found.add(int(suffix))
    return found


class NodeNamespaces:
    """Creates, enters and destroys one node's namespaces."""

    def __init__(self, *, layout: NodeLayout, netns: str, host_veth: str, bridge: str) -> None:
        self.layout = layout
        self.netns = netns
        self._veth = host_veth
        self._bridge = bridge

    @property
    def mount_pin(self) -> Path:
        return self.layout.dir / "ns" / "mnt"

    def enter(self) -> tuple[str, ...]:
        """The argv prefix that runs a program inside the node's namespaces."""
        return ("nsenter", f"--net={NETNS_DIR / self.netns}", f"--mount={self.mount_pin}", "--")

    async def create(self) -> None:
        await self._network()
        await self._mounts()
        self._cgroups()

    async def kill_processes(self) -> None:
        """SIGKILL every container process of the node (all of them sit in its cgroups)."""
        await kill_cgroup_tree(self.layout.cgroup_root)

    async def destroy(self) -> None:
        """Kill what runs in the node's cgroups, drop its mounts, namespaces and veth."""
        await kill_cgroup_tree(self.layout.cgroup_root)
        if _is_mountpoint(self.mount_pin):
            await run_cmd(["umount", "-l", str(self.mount_pin)])
        pin_dir = self.mount_pin.parent
        if _is_mountpoint(pin_dir):
            await run_cmd(["umount", "-l", str(pin_dir)])
        if (NETNS_DIR / self.netns).exists():
            await run_cmd(["ip", "netns", "del", self.netns])
        # The veth goes with the namespace, a moment later; delete it if it stays.
        for _ in range(50):
            if not Path(f"/sys/class/net/{self._veth}").exists():
                break
            await asyncio.sleep(0.05)
        else:
            with contextlib.suppress(CommandFailed):
                await run_cmd(["ip", "link", "del", self._veth])
        remove_cgroup_tree(self.layout.cgroup_root)

    async def _network(self) -> None:
        node = self.layout
        if not (NETNS_DIR / self.netns).exists():
            await run_cmd(["ip", "netns", "add", self.netns])
        if not Path(f"/sys/class/net/{self._veth}").exists():
            await run_cmd(
                ["ip", "link", "add", self._veth, "type", "veth",
                 "peer", "name", "eth0", "netns", self.netns]
            )  # fmt: skip
        await run_cmd(["ip", "link", "set", self._veth, "master", self._bridge, "up"])
        inside = ["ip", "netns", "exec", self.netns]
        addrs = await run_cmd([*inside, "ip", "-4", "-o", "addr", "show", "dev", "eth0"])
        if f" {node.node_ip}/" not in addrs:
            await run_cmd([*inside, "ip", "addr", "add", f"{node.node_ip}/24", "dev", "eth0"])
        await run_cmd([*inside, "ip", "link", "set", "eth0", "up"])
        await run_cmd([*inside, "ip", "link", "set", "lo", "up"])
        await run_cmd([*inside, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        for cidr, via in node.routes:
            await run_cmd([*inside, "ip", "route", "replace", cidr, "via", via])
        await run_cmd(["ip", "route", "replace", node.pod_cidr, "via", node.node_ip])
        if node.v6 is not None:
            await self._network6(node.v6)

    async def _network6(self, v6: NodeV6) -> None:
        """The node's IPv6 address (no duplicate detection: the plan owns the prefix), IPv6
        forwarding in the node's namespace only, routes to the other nodes' pod ranges, and
        the host's route to this node's (as for IPv4)."""
        inside = ["ip", "netns", "exec", self.netns]
        await run_cmd(
            [*inside, "ip", "addr", "replace", f"{v6.node_ip}/64", "dev", "eth0", "nodad"]
        )
        await run_cmd([*inside, "sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"])
        for cidr, via in v6.routes:
            await run_cmd([*inside, "ip", "-6", "route", "replace", cidr, "via", via])
        await run_cmd(["ip", "-6", "route", "replace", v6.pod_cidr, "via", v6.node_ip])

    async def _mounts(self) -> None:
        if _is_mountpoint(self.mount_pin):
            return
        pin_dir = self.mount_pin.parent
        pin_dir.mkdir(parents=True, exist_ok=True)
        if not _is_mountpoint(pin_dir):  # a pin must sit on a private mount
            await run_cmd(["mount", "--bind", str(pin_dir), str(pin_dir)])
            await run_cmd(["mount", "--make-private", str(pin_dir)])
        self.mount_pin.touch()
        binds: list[str] = []
        for sub, target in NODE_BINDS:
            source = self.layout.dir / sub
            source.mkdir(parents=True, exist_ok=True)
            Path(target).mkdir(parents=True, exist_ok=True)  # an empty mount point on the host
            binds += [str(source), target]
        self.layout.sysctl_dir.mkdir(parents=True, exist_ok=True)
        for entry in KUBELET_SYSCTLS:
            mine = self.layout.sysctl_dir / entry.replace("/", ".")
            if not mine.exists():
                mine.write_text(Path("/proc/sys", entry).read_text())
            binds += [str(mine), f"/proc/sys/{entry}"]
        await run_cmd(
            ["unshare", f"--mount={self.mount_pin}", "--propagation", "private", "--",
             "sh", "-c", _MOUNT_SCRIPT, "node-mounts", *binds]
        )  # fmt: skip

    def _cgroups(self) -> None:
        for hierarchy in cgroup_hierarchies():
            path = hierarchy / self.layout.cgroup_root.lstrip("/")
            path.mkdir(exist_ok=True)
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if (path / knob).exists() and not (path / knob).read_text().strip():
                    (path / knob).write_text((hierarchy / knob).read_text())


def cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (v1 controllers, the named systemd one, unified)."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT]
    return sorted(p for p in CGROUP_ROOT.iterdir() if p.is_dir() and not p.is_symlink())


def _trees(root: str) -> list[Cgroup]:
    """The cgroup ``root`` in every hierarchy (the node agents' Cgroup does the walking)."""
    return [Cgroup(h / root.lstrip("/")) for h in cgroup_hierarchies()]


async def kill_cgroup_tree(root: str, *, timeout: float = 10.0) -> None:
    """SIGKILL every process under the cgroup root until none is left (or ``timeout``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pids := [pid for tree in _trees(root) for pid in tree.kill()]:
        if loop.time() > deadline:
            log.warning("cgroup_processes_left", root=root, pids=sorted(set(pids)))
            return
        await asyncio.sleep(0.1)


def remove_cgroup_tree(root: str) -> None:
    """rmdir the root's cgroups bottom-up in every hierarchy (they must be empty)."""
    for tree in _trees(root):
        tree.remove()


def _is_mountpoint(path: Path) -> bool:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            if line.split()[4] == str(path):
                return True
    return False
