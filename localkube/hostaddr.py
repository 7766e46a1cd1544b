"""A process-mode cluster's host address: where kube-apiserver dials virt-api and webhooks.

On process-mode nodes virt-api and the admission webhooks run as host processes, and the
apiserver reaches them through an EndpointSlice. An EndpointSlice may not name a loopback
address, and the host's own interface address is not ours to use (node, pod and service
addresses come from 198.18.0.0/15). So each process-mode cluster claims one address of
`BLOCK` as a /32 on the host's `lo`: local only, routed nowhere. `up` claims it (kept in
the cluster's state dir, so a restarted `up` keeps it), `down` releases it; two clusters
never share one (`ip addr add` refuses an address already on `lo`, and the next is tried).
"""

from __future__ import annotations

import hashlib
import ipaddress
import subprocess
from pathlib import Path

from localkube.errors import LocalKubeError

BLOCK = ipaddress.IPv4Network("198.19.254.0/24")  # beside the Service range (198.19.255/24)
ADDRESS_FILE = "host-address"
DEVICE = "lo"


def host_address(state_root: Path) -> str:
    """The address claimed by the cluster whose state dir is `state_root`."""
    try:
        return (state_root / ADDRESS_FILE).read_text().strip()
    except FileNotFoundError as exc:
        raise LocalKubeError(
            f"no host address claimed in {state_root}: the process-mode cluster is not up"
        ) from exc


def claim(state_root: Path, *, cluster_id: str) -> str:
    """This cluster's address on `lo` (added unless it is there and ours already)."""
    saved = state_root / ADDRESS_FILE
    if saved.exists() and present(ip := saved.read_text().strip()):
        return ip
    hosts = list(BLOCK.hosts())
    start = int(hashlib.sha256(cluster_id.encode()).hexdigest(), 16) % len(hosts)
    for offset in range(len(hosts)):
        ip = str(hosts[(start + offset) % len(hosts)])
        done = _ip("addr", "add", f"{ip}/32", "dev", DEVICE)
        if done.returncode == 0:
            saved.parent.mkdir(parents=True, exist_ok=True)
            saved.write_text(f"{ip}\n")
            return ip
        if not present(ip):  # not another cluster's: iproute2 words that one differently
            raise LocalKubeError(f"cannot add {ip}/32 to {DEVICE}: {done.stderr.strip()}")
    raise LocalKubeError(f"every address of {BLOCK} is taken on {DEVICE}")


def release(state_root: Path) -> None:
    """Remove the claimed address from `lo` (nothing if none was claimed)."""
    saved = state_root / ADDRESS_FILE
    if not saved.exists():
        return
    ip = saved.read_text().strip()
    if present(ip):
        done = _ip("addr", "del", f"{ip}/32", "dev", DEVICE)
        if done.returncode != 0 and present(ip):
            raise LocalKubeError(f"cannot remove {ip}/32 from {DEVICE}: {done.stderr.strip()}")
    saved.unlink(missing_ok=True)


def present(ip: str) -> bool:
    """`ip`/32 is on `lo` now."""
    out = _ip("-4", "-o", "addr", "show", "dev", DEVICE).stdout
    return any(line.split()[3] == f"{ip}/32" for line in out.splitlines() if len(line.split()) > 3)


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=False)
