"""Every bench entry point (scripts/bench-*) runs once at its smallest sizes, so none rots
unseen: it must exit 0 and print its report's rows. The figures are not judged (benches
report, tests never time); each run's wall time is printed with `-s`.

The cluster benches share the session's clusters (`--session <pytest's pid>`): on the
process-mode one bench-cli serves its subresource stack and bench-handler --nodes process
starts its handlers and controller; on the real-node one (kubevirt-py deployed by the
realnodes fixtures) bench-handler's default mode, bench-import and bench-snapshot run, each
removing its namespace afterwards: those (REAL_BENCHES) run from
tests/integration/realnodes/test_bench_runs.py, so that the real-node cluster starts with
the real-node tests instead of idling through every process-mode module in between.
bench-controller starts its own process-mode cluster (it applies manifests/base and removes
the webhooks, which a shared cluster must not see). bench-launcher and bench-network need no
cluster; bench-migration neither, and it runs as bench-handler --nodes process's (f), whose
exit status and report rows are checked there (running it a second time would add 13 s).

What each costs (wall seconds on the 2-core host, 2026-11-29) is beside it in the lists;
docs/performance.md has the dated table.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PROCESS, REAL = "kube_cluster", "real_stack"  # the session fixtures a bench runs on

REAL_BENCHES = [
    pytest.param(
        "bench-handler", REAL,
        ["--nodes", "kubelet", "--vmis", "1", "--rate", "1", "--pause-sample", "1",
         "--migration-rounds", "1", "--floor", "1", "--no-raw-floor", "--disk-rounds", "0",
         "--settle-timeout", "1", "--timeout", "300"],
        ["(a) ", "(b) ", "(c) ", "(e) migration", "(g) ", "(h) ", "phase by phase",
         "imported ", "noticed ", "written ", "suspended "],
        id="handler-realnodes",  # 50 s
    ),
    pytest.param("bench-import", REAL, ["--mib", "16", "--rounds", "1"],
                 ["(a) import", "(b) VMI create"], id="import"),  # 38 s
    pytest.param("bench-snapshot", REAL, ["--rounds", "1"],
                 ["(a) guest frozen", "(b) create -> readyToUse"], id="snapshot"),  # 14 s
]  # fmt: skip

BENCHES = [
    pytest.param(
        "bench-cli", PROCESS, ["--stack", "--rounds", "1"],
        ["kubectl get vmi", "pause vmi", "guestosinfo", "addvolume", "start --dry-run",
         "credentials add-ssh-key", "credentials remove-ssh-key", "credentials set-password"],
        id="cli",  # 5 s
    ),
    pytest.param(
        "bench-handler", PROCESS,
        ["--nodes", "process", "--vmis", "1", "--rate", "1", "--pause-sample", "1",
         "--migration-rounds", "1", "--settle-timeout", "1", "--timeout", "300"],
        # (f) is scripts/bench-migration --rounds 1, run by bench-handler: its report's rows
        # are checked here, and a failed (f) fails bench-handler.
        ["(a) ", "(b) ", "(c) ", "(d) ", "(e) migration", "(f) ", "rounds: 1 (each: launcher",
         "downtime launcher"],
        id="handler-process",  # 35 s
    ),
    pytest.param(
        "bench-controller", None, ["--vmis", "5", "--no-replicaset", "--no-vmirs"],
        ["API requests per VMI"], id="controller",  # 27 s
    ),
    pytest.param(
        "bench-launcher", None, ["--pings", "100", "--rounds", "1"], ["(a) ", "(b) ", "(c) "],
        id="launcher",  # 15 s
    ),
    pytest.param(
        "bench-network", None, ["--mib", "1", "--rounds", "10", "--repeat", "1"],
        ["medians of 1 interleaved passes", "masquerade", "passt"], id="network",  # 33 s
    ),
]  # fmt: skip


@pytest.mark.parametrize(("bench", "cluster", "argv", "shown"), BENCHES)
def test_bench_runs_at_its_smallest(
    bench: str,
    cluster: str | None,
    argv: list[str],
    shown: list[str],
    request: pytest.FixtureRequest,
) -> None:
    """scripts/<bench> with its smallest flags exits 0 and prints every row of its report."""
    run_bench(bench, cluster, argv, shown=shown, request=request)


def run_bench(
    bench: str,
    cluster: str | None,
    argv: list[str],
    *,
    shown: list[str],
    request: pytest.FixtureRequest,
) -> None:
    """Run scripts/<bench> (on the session's cluster of kind `cluster`, if any); it must
    exit 0 and print every string of `shown`."""
    if cluster is not None:  # the session's cluster of that kind, up (and deployed: REAL)
        request.getfixturevalue(cluster)
        argv = [*argv, "--session", str(os.getpid())]
    # bench-handler's logs (and its bare launchers' sockets: a short path) in a dir removed
    # afterwards, not left in $TMPDIR.
    logs = Path(tempfile.mkdtemp(prefix="bench-handler-")) if bench == "bench-handler" else None
    if logs is not None:
        argv = [*argv, "--logs", str(logs)]
    began = time.monotonic()
    try:
        done = subprocess.run(
            [str(REPO / "scripts" / bench), *argv],
            capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
    finally:
        if logs is not None:
            shutil.rmtree(logs, ignore_errors=True)
    print(f"{bench} {' '.join(argv)}: {time.monotonic() - began:.0f} s")
    out = done.stdout
    assert done.returncode == 0, (
        f"{bench} exited {done.returncode}:\n{out[-3000:]}\n{done.stderr[-3000:]}"
    )
    missing = [s for s in shown if s not in out]
    assert not missing, f"{bench} printed no {missing}:\n{out[-3000:]}"
