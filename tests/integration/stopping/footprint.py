"""What a local cluster leaves on the host, for the clean-stop tests: its processes (by
their marker), mounts under its dirs, network namespaces, host bridge, a process-mode
cluster's address on `lo`, cgroups and state and node directories. Names are taken while it runs (its plan is purged with its state)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from localkube import hostaddr
from localkube.config import MARKER_ENV, ClusterConfig
from localkube.procs import marked_pids, mounts_under
from localkube.realnode.namespaces import NETNS_DIR, cgroup_hierarchies

NET_LINKS = Path("/sys/class/net")


@dataclass(slots=True)
class Footprint:
    """One cluster's names on the host; `seen` fills in the real-node ones while it runs."""

    config: ClusterConfig
    netns: set[str] = field(default_factory=set)
    links: set[str] = field(default_factory=set)
    cgroups: set[str] = field(default_factory=set)
    addresses: set[str] = field(default_factory=set)  # a process-mode cluster's on `lo`
    started: bool = False  # its kube-apiserver ran: the stop came after the cluster started

    def __post_init__(self) -> None:
        self.cgroups.add(f"kvpy/{self.config.cluster_id}")

    def seen(self) -> None:
        """Record what the running cluster has made so far."""
        if self.config.paths.pidfile("kube-apiserver").exists():
            self.started = True
        with contextlib.suppress(OSError):
            self.addresses.add((self.config.state_dir / hostaddr.ADDRESS_FILE).read_text().strip())
        try:
            block = json.loads((self.config.state_dir / "net.json").read_text())["block"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        self.links.add(f"kvbr{block}")
        for i, node in enumerate(self.config.nodes, start=1):
            self.netns.add(f"kv{block}-{node}")
            self.links.add(f"kv{block}n{i}")
            self.cgroups.add(f"kvpy{block}-{node}")

    def remaining(self) -> list[str]:
        """Everything of the cluster still on the host (empty: a clean stop)."""
        marker = (MARKER_ENV, self.config.cluster_id)
        left = [f"process {pid}" for pid in marked_pids(marker)]
        dirs = [self.config.state_dir, self.config.nodes_dir]
        left += [f"mount {m}" for m in mounts_under(dirs)]
        left += [f"netns {n}" for n in sorted(self.netns) if (NETNS_DIR / n).exists()]
        left += [f"link {n}" for n in sorted(self.links) if (NET_LINKS / n).exists()]
        left += [
            f"cgroup {h / c}"
            for h in cgroup_hierarchies()
            for c in self.cgroups
            if (h / c).exists()
        ]
        left += [f"address {a}/32 on lo" for a in sorted(self.addresses) if hostaddr.present(a)]
        left += [f"dir {d}" for d in dirs if d.exists()]
        return left
