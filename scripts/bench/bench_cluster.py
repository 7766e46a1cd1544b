"""The cluster a bench runs on: its own (private to the bench's process, torn down at the
end), or with `--session PID` the one test session PID started, left running
(tests/integration/benches runs the benches against its session's clusters)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from localkube.cluster import Cluster
from localkube.config import NodeKind
from localkube.deploy import Kubectl, deploy
from localkube.testing import build_control_plane, private_cluster_config, session_cluster


@contextlib.contextmanager
def process_cluster(session: int | None) -> Iterator[Cluster]:
    """Test session `session`'s process-mode cluster (left running), else a private one."""
    if session is None:
        with session_cluster() as cluster:
            yield cluster
        return
    cluster = Cluster(private_cluster_config(build_control_plane(), session=session))
    if not cluster.kubeconfig.is_file():
        sys.exit(f"no process-mode cluster of test session {session}")
    yield cluster


@contextlib.contextmanager
def real_cluster(session: int | None, *, certs: Path) -> Iterator[tuple[Cluster, Kubectl]]:
    """A real-node cluster with kubevirt-py deployed from the manifests: the bench's own
    (torn down at the end), or test session `session`'s, deployed by it and left running
    (the bench then removes what it created: its namespace)."""
    if session is None:
        with session_cluster(NodeKind.KUBELET) as cluster:
            kubectl = Kubectl(cluster.config.bin_dir / "kubectl", cluster.kubeconfig)
            deploy(kubectl, certs=certs, real_nodes=True, timeout=300)
            yield cluster, kubectl
        return
    config = private_cluster_config(build_control_plane(), session=session, kind=NodeKind.KUBELET)
    cluster = Cluster(config)
    if not cluster.kubeconfig.is_file():
        sys.exit(f"no real-node cluster of test session {session}")
    yield cluster, Kubectl(cluster.config.bin_dir / "kubectl", cluster.kubeconfig)
