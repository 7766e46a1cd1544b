"""virtctl-py's wall times beside kubectl's on the same host and cluster (issue 26).

Runs each command `--rounds` times against a running kubevirt-py cluster (default: the one
`./scripts/up` starts, with its demo VM) and prints the median and the best time, and each
virtctl-py row's ratio to `kubectl get vmi` measured in the same run:

    scripts/bench-cli [--kubeconfig PATH] [--vm demo] [--namespace default] [--rounds 7]

pause and unpause alternate so the VM ends as it started. Nothing is asserted: targets
(--help and version ≤ 0.3 s, a verb ≤ 0.5 s) are printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VIRTCTL = REPO / "scripts" / "bin" / "virtctl-py"
DEFAULT_KUBECONFIG = Path("/var/lib/kubevirt-py/cluster/admin.kubeconfig")


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    argv: tuple[str, ...]
    target: float | None  # seconds; None: the floor


def timed(argv: Sequence[str], env: dict[str, str]) -> float:
    """Wall time of one run; a failing command ends the bench with its output."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[:400]}")
    return elapsed


def rows(kubectl: str, vm: str, ns: str) -> list[Row]:
    v = str(VIRTCTL)
    return [
        Row("kubectl get vmi (floor)", (kubectl, "get", "vmi", vm, "-n", ns), None),
        Row("kubectl version", (kubectl, "version"), None),
        Row("virtctl-py --help", (v, "--help"), 0.3),
        Row("virtctl-py version", (v, "version"), 0.3),
        Row("virtctl-py pause vmi", (v, "pause", "vmi", vm, "-n", ns), 0.5),
        Row("virtctl-py unpause vmi", (v, "unpause", "vmi", vm, "-n", ns), 0.5),
        Row("virtctl-py guestosinfo", (v, "guestosinfo", vm, "-n", ns), 0.5),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, default=DEFAULT_KUBECONFIG)
    parser.add_argument("--vm", default="demo")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    kubectl = os.environ.get("KUBECTL", "kubectl")
    if not args.kubeconfig.is_file():
        sys.exit(f"{args.kubeconfig}: no cluster; start one with ./scripts/up")
    env = {**os.environ, "KUBECONFIG": str(args.kubeconfig)}
    table = rows(kubectl, args.vm, args.namespace)
    times: dict[str, list[float]] = {r.name: [] for r in table}
    for _ in range(args.rounds):  # interleaved, so load changes hit every row alike
        for row in table:
            times[row.name].append(timed(row.argv, env))
    floor = statistics.median(times[table[0].name])
    print(f"{'command':<28} {'median':>8} {'best':>8} {'x kubectl get':>14} {'target':>8}")
    for row in table:
        med, best = statistics.median(times[row.name]), min(times[row.name])
        target = f"≤ {row.target:.1f} s" if row.target else "floor"
        print(f"{row.name:<28} {med:>7.3f}s {best:>7.3f}s {med / floor:>13.2f}x {target:>8}")


if __name__ == "__main__":
    main()
