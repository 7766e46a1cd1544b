"""The process-mode cluster a bench runs on: its own (private to the bench's process, torn
down at the end), or with `--session PID` the one test session PID started, left running
(tests/integration/benches runs the benches against its session's cluster)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from localkube.cluster import Cluster
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
