"""Not collected by the suite: the pytest session that test_clean_stops.py starts and
stops with a signal (named on the command line, so pytest collects it anyway)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from localkube.cluster import Cluster


def test_waits_with_the_session_cluster_up(kube_cluster: Cluster) -> None:
    """Says the session's cluster is up (its state dir, in the file KVPY_STOP_PROBE
    names), then waits to be stopped by a signal."""
    Path(os.environ["KVPY_STOP_PROBE"]).write_text(str(kube_cluster.config.state_dir))
    time.sleep(900)
