"""What a real node's kubelet offers for KubeVirt's node resources: the static CPU manager
and 2 MiB hugepages (docs/node-resources.md).

- **CPU manager** (``static``): the kubelet keeps one CPU out of exclusive use
  (``kubeReserved.cpu`` of 100m, rounded up to one whole CPU: CPU 0 on this 2-core host)
  and gives a Guaranteed container with an integer CPU request CPUs of its own (CPU 1 here).
  Every node of the cluster runs it; pods that are not Guaranteed with integer CPUs run on
  the shared pool as before. The kubelet refuses to start when its checkpoint was written
  under another policy, so a changed policy removes the checkpoint first.
- **Hugepages**: the kubelet advertises the host's 2 MiB pages (``hugepages-2Mi``), which
  are host-wide: the cluster adds its pages to ``nr_hugepages`` before the kubelets start and
  takes the same number back when it goes down (``Cluster.down``: ``down``, a test session's
  end, a SIGTERM). Several clusters on one host each add and remove their own share, under
  one host-wide lock, and what was added is kept in the cluster's state dir, so a crashed
  session's share is returned when its cluster is reaped.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger()

HUGEPAGES_2M = Path("/sys/kernel/mm/hugepages/hugepages-2048kB")
HOST_LOCK = Path("/run/lock/kubevirt-py-hugepages.lock")
RECORD = "hugepages.json"
CPU_MANAGER_STATE = "cpu_manager_state"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResources:
    """The node resources a cluster's kubelets run with (ClusterConfig carries it)."""

    cpu_manager_static: bool = False
    hugepages_2mi: int = 0  # pages the cluster adds to the host's pool (2 MiB each)

    def kubelet_settings(self) -> dict[str, Any]:
        """The KubeletConfiguration keys these settings add."""
        if not self.cpu_manager_static:
            return {}
        return {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "100m"}}

    @property
    def cpu_manager_policy(self) -> str:
        return "static" if self.cpu_manager_static else "none"


def reset_stale_checkpoint(kubelet_dir: Path, *, policy: str) -> None:
    """Remove the CPU manager's checkpoint when it was written under another policy (the
    kubelet would refuse to start: "configured policy … differs from state checkpoint")."""
    state = kubelet_dir / CPU_MANAGER_STATE
    try:
        recorded = json.loads(state.read_text()).get("policyName")
    except (FileNotFoundError, ValueError):
        return
    if recorded != policy:
        state.unlink(missing_ok=True)
        log.info("cpu_manager_checkpoint_reset", was=recorded, now=policy)


@contextlib.contextmanager
def _host_lock(lock: Path) -> Iterator[None]:
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _pool(pool: Path) -> int:
    return int((pool / "nr_hugepages").read_text())


def reserve_hugepages(
    state_dir: Path, pages: int, *, pool: Path = HUGEPAGES_2M, lock: Path = HOST_LOCK
) -> int:
    """Add ``pages`` to the host's 2 MiB pool once per cluster (idempotent); the number the
    kernel actually added (memory may be too fragmented for all of them)."""
    record = state_dir / RECORD
    if pages <= 0:
        return 0
    if record.exists():
        return int(json.loads(record.read_text())["pages"])
    with _host_lock(lock):
        before = _pool(pool)
        (pool / "nr_hugepages").write_text(f"{before + pages}\n")
        added = max(0, _pool(pool) - before)
        state_dir.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"pages": added}))
    log.info("hugepages_reserved", pages=added, asked=pages)
    return added


def release_hugepages(state_dir: Path, *, pool: Path = HUGEPAGES_2M, lock: Path = HOST_LOCK) -> int:
    """Take back what ``reserve_hugepages`` added for this cluster; the number released."""
    record = state_dir / RECORD
    if not record.exists():
        return 0
    pages = int(json.loads(record.read_text())["pages"])
    with _host_lock(lock):
        now = _pool(pool)
        (pool / "nr_hugepages").write_text(f"{max(0, now - pages)}\n")
        record.unlink()  # with the pool, under the lock: host_pages sees both or neither
    log.info("hugepages_released", pages=pages)
    return pages


def host_pages(state_root: Path, *, pool: Path = HUGEPAGES_2M, lock: Path = HOST_LOCK) -> int:
    """The host's own 2 MiB pages: the pool less the share every cluster whose state dir is
    under ``state_root`` recorded, read under the lock. Constant while clusters come and go
    (a test compares it around its own cluster's life while other sessions run theirs)."""
    with _host_lock(lock):
        shares = sum(
            int(json.loads(r.read_text())["pages"]) for r in state_root.glob(f"*/{RECORD}")
        )
        return _pool(pool) - shares
