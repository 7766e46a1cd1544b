"""Every bench entry point (scripts/bench-*) runs once at its smallest sizes, so none rots
unseen: it must exit 0 and print its report's rows. The figures are not judged (benches
report, tests never time); each run's wall time is printed with `-s`.

The process-mode benches share the session's cluster (`--session <pytest's pid>`): bench-cli
serves its subresource stack on it, bench-handler starts its handlers and controller on it.
bench-controller starts its own (it applies manifests/base and removes the webhooks, which
a shared cluster must not see). bench-launcher, bench-migration and bench-network need no
cluster. The real-node benches (bench-handler's default mode, bench-import, bench-snapshot)
each start a real-node cluster of their own and are not run here.

What each costs on the 2-core host (docs/performance.md has the dated table): see
BENCHES' comments.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from localkube.cluster import Cluster

REPO = Path(__file__).resolve().parents[3]
SESSION = "{session}"  # replaced by this pytest process's pid: its process-mode cluster

BENCHES = [
    pytest.param(
        "bench-cli", ["--stack", "--session", SESSION, "--rounds", "1"],
        ["kubectl get vmi", "pause vmi", "guestosinfo", "addvolume", "start --dry-run"],
        id="cli",
    ),
    pytest.param(
        "bench-handler",
        ["--nodes", "process", "--session", SESSION, "--vmis", "1", "--rate", "1",
         "--pause-sample", "1", "--migration-rounds", "1", "--timeout", "300"],
        ["(a) ", "(b) ", "(c) ", "(d) ", "(e) migration", "(f) ", "rounds: 1"],
        id="handler-process",
    ),
    pytest.param(
        "bench-controller", ["--vmis", "5", "--no-replicaset", "--no-vmirs"],
        ["API requests per VMI"], id="controller",
    ),
    pytest.param(
        "bench-launcher", ["--pings", "100", "--rounds", "1"], ["(a) ", "(b) ", "(c) "],
        id="launcher",
    ),
    pytest.param("bench-migration", ["--rounds", "1"], ["rounds: 1", "downtime"], id="migration"),
    pytest.param(
        "bench-network", ["--mib", "1", "--rounds", "10", "--repeat", "1"],
        ["medians of 1 interleaved passes", "masquerade", "passt"], id="network",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("bench", "argv", "shown"), BENCHES)
def test_bench_runs_at_its_smallest(
    bench: str, argv: list[str], shown: list[str], request: pytest.FixtureRequest
) -> None:
    """scripts/<bench> with its smallest flags exits 0 and prints every row of its report."""
    if SESSION in argv:
        cluster: Cluster = request.getfixturevalue("kube_cluster")
        assert cluster.kubeconfig.is_file()
        argv = [str(os.getpid()) if a == SESSION else a for a in argv]
    began = time.monotonic()
    done = subprocess.run(
        [str(REPO / "scripts" / bench), *argv],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    print(f"{bench} {' '.join(argv)}: {time.monotonic() - began:.0f} s")
    out = done.stdout
    assert done.returncode == 0, (
        f"{bench} exited {done.returncode}:\n{out[-3000:]}\n{done.stderr[-3000:]}"
    )
    missing = [s for s in shown if s not in out]
    assert not missing, f"{bench} printed no {missing}:\n{out[-3000:]}"
