"""virtctl-py's wall times beside kubectl's and KubeVirt's own virtctl's (issues 26, 39).

Every verb that is one or two API requests, `--help` and `version`, run `--rounds` times,
interleaved (a load change hits every row alike); the median and the best, each row's
ratio to `kubectl get vmi` and, where scripts/build-virtctl has built it, KubeVirt's
virtctl v1.8.2 running the same command line:

    scripts/bench-cli                      ./scripts/up's cluster and its demo VM, if it runs;
                                           else a private process-mode cluster with --stack
    scripts/bench-cli --kubeconfig PATH [--vm demo] [--namespace default] [--halted-vm NAME]
                      [--claim NAME] [--creds-vm NAME]  a deployed kubevirt-py
    scripts/bench-cli --stack [--session PID]
        KubeVirt's subresource API served from this process (scripts/bench/cli_stack.py)
        on a private process-mode cluster, or on test session PID's
    --rounds 7 (default)

On a deployed cluster: start runs only with --halted-vm, addvolume/removevolume only with
--claim (a claim that is not in use), the credentials rows only with --creds-vm (a VM with
a guest-agent ssh key for root and a password credential, their Secrets owned by it: the
key is added, then removed); stop, restart and migrate are --dry-run (the same
requests, nothing changes); pause/unpause and addvolume/removevolume alternate, so the VM
ends as it started. Nothing is asserted: the targets (a verb ≤ 0.15 s, --help and version
≤ 0.1 s) are printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench_cluster import process_cluster
from cli_stack import Objects, served

VIRTCTL = REPO / "scripts" / "bin" / "virtctl-py"
DEFAULT_KUBECONFIG = Path("/var/lib/kubevirt-py/cluster/admin.kubeconfig")
VERB_TARGET, QUICK_TARGET = 0.15, 0.1
# A well-formed public key (made once with ssh-keygen), not a placeholder a client may refuse.
BENCH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJzQkYcFQriYx/Rj2gBl2Lz9IAqb7SzQfno5YMqwMyq6 bench-cli"
)


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    argv: tuple[str, ...]  # after the binary (virtctl-py's and upstream's alike)
    target: float | None  # seconds; None: the floor (kubectl)


def rows(o: Objects) -> list[Row]:
    """The command lines, in running order (pause before unpause, add before remove)."""
    ns, vm = ("-n", o.namespace), o.running
    out = [
        Row("--help", ("--help",), QUICK_TARGET),
        Row("version", ("version",), QUICK_TARGET),
        Row("pause vmi", ("pause", "vmi", vm, *ns), VERB_TARGET),
        Row("unpause vmi", ("unpause", "vmi", vm, *ns), VERB_TARGET),
        Row("soft-reboot", ("soft-reboot", vm, *ns), VERB_TARGET),
        Row("guestosinfo", ("guestosinfo", vm, *ns), VERB_TARGET),
        Row("userlist", ("userlist", vm, *ns), VERB_TARGET),
        Row("fslist", ("fslist", vm, *ns), VERB_TARGET),
        Row("stop --dry-run", ("stop", vm, "--dry-run", *ns), VERB_TARGET),
        Row("restart --dry-run", ("restart", vm, "--dry-run", *ns), VERB_TARGET),
        Row("migrate --dry-run", ("migrate", vm, "--dry-run", *ns), VERB_TARGET),
    ]
    if o.halted:
        out.append(Row("start --dry-run", ("start", o.halted, "--dry-run", *ns), VERB_TARGET))
    if o.claim:
        volume = f"--volume-name={o.claim}"
        out.append(Row("addvolume", ("addvolume", vm, volume, *ns), VERB_TARGET))
        out.append(Row("removevolume", ("removevolume", vm, volume, *ns), VERB_TARGET))
    if o.creds:
        key = ("--user", "root", "--value", BENCH_KEY, o.creds, *ns)
        password = ("--user", "root", "--password", "bench-pass", o.creds, *ns)
        out.append(
            Row("credentials add-ssh-key", ("credentials", "add-ssh-key", *key), VERB_TARGET)
        )
        out.append(Row("credentials remove-ssh-key", ("credentials", "remove-ssh-key", *key),
                       VERB_TARGET))  # fmt: skip
        out.append(Row("credentials set-password", ("credentials", "set-password", *password),
                       VERB_TARGET))  # fmt: skip
    return out


def timed(argv: Sequence[str], env: dict[str, str], *, must: bool) -> float | None:
    """Wall time of one run; a failing virtctl-py (or kubectl) ends the bench with its
    output, a failing upstream virtctl row shows as n/a."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    if proc.returncode == 0:
        return elapsed
    if must:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[:400]}")
    return None


def upstream_virtctl() -> Path | None:
    """KubeVirt's virtctl if scripts/build-virtctl has built it (it is not built here)."""
    pin = subprocess.run(
        [str(REPO / "scripts" / "build-virtctl"), "--print-pin"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    cache = Path(os.environ.get("KUBEVIRT_PY_CACHE", Path.home() / ".cache" / "kubevirt-py"))
    binary = cache / "virtctl" / pin / "virtctl"
    return binary if pin and binary.is_file() else None


def measure(kubeconfig: Path, objects: Objects, rounds: int) -> None:
    kubectl = os.environ.get("KUBECTL", "kubectl")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    upstream = upstream_virtctl()
    table = rows(objects)
    floor_argv = (kubectl, "get", "vmi", objects.running, "-n", objects.namespace)
    floor: list[float] = []
    ours: dict[str, list[float]] = {r.name: [] for r in table}
    theirs: dict[str, list[float | None]] = {r.name: [] for r in table}
    for _ in range(rounds):  # interleaved, so load changes hit every row alike
        floor.append(timed(floor_argv, env, must=True) or 0.0)
        for row in table:  # each client runs the whole sequence (add, then remove …)
            ours[row.name].append(timed((str(VIRTCTL), *row.argv), env, must=True) or 0.0)
        for row in table if upstream is not None else ():
            theirs[row.name].append(timed((str(upstream), *row.argv), env, must=False))
    report(table, floor=floor, ours=ours, theirs=theirs, upstream=upstream)
    phases(env, objects, rounds)


def phases(env: dict[str, str], objects: Objects, rounds: int) -> None:
    """`pause vmi` split into its phases (cli_phases.py), medians over `rounds` runs; the
    interpreter's start is `python -c pass`, the wrapper's the rest of the measured time."""
    env = {**env, "PYTHONPATH": str(REPO)}
    script = str(Path(__file__).with_name("cli_phases.py"))
    start = [timed((sys.executable, "-c", "pass"), env, must=True) or 0.0 for _ in range(rounds)]
    runs = []
    for _ in range(rounds):
        argv = (sys.executable, script, objects.namespace, objects.running)
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            sys.exit(f"cli_phases.py failed: {done.stderr.strip()[-400:]}")
        runs.append(json.loads(done.stdout))
    parts = {"interpreter": statistics.median(start) * 1000}
    parts |= {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    shown = ", ".join(f"{k} {v:.1f}" for k, v in parts.items())
    print(f"pause vmi by phase (ms, medians of {rounds}): {shown}; sum {sum(parts.values()):.0f}")


def report(
    table: Sequence[Row],
    *,
    floor: list[float],
    ours: dict[str, list[float]],
    theirs: dict[str, list[float | None]],
    upstream: Path | None,
) -> None:
    base = statistics.median(floor)
    print(f"{'command':<26} {'median':>8} {'best':>8} {'x kubectl':>10} "
          f"{'virtctl':>8} {'x virtctl':>10} {'target':>9}")  # fmt: skip
    print(f"{'kubectl get vmi':<26} {base:>7.3f}s {min(floor):>7.3f}s {1:>9.2f}x")
    for row in table:
        med = statistics.median(ours[row.name])
        done = [t for t in theirs[row.name] if t is not None]
        if done and len(done) == len(theirs[row.name]):
            up = statistics.median(done)
            vs = f"{up:>7.3f}s {med / up:>9.2f}x"
        else:
            vs = f"{'n/a':>8} {'':>10}"
        mark = "met" if row.target and med <= row.target else "MISSED"
        print(
            f"{row.name:<26} {med:>7.3f}s {min(ours[row.name]):>7.3f}s {med / base:>9.2f}x "
            f"{vs} {'≤ ' + format(row.target, 'g') + ' s':>7} {mark}"
        )
    if upstream is None:
        print("(KubeVirt's virtctl is not built: scripts/build-virtctl builds it)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubeconfig", type=Path, help="a deployed kubevirt-py")
    parser.add_argument("--vm", default="demo", help="with --kubeconfig: a running VM")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--halted-vm", help="with --kubeconfig: a stopped VM (start row)")
    parser.add_argument("--claim", help="with --kubeconfig: an unused claim (volume rows)")
    parser.add_argument("--creds-vm", help="with --kubeconfig: a VM for the credentials rows")
    parser.add_argument("--stack", action="store_true", help="serve the API from here")
    parser.add_argument("--session", type=int, help="with --stack: that test session's cluster")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if args.kubeconfig is None and not args.stack and DEFAULT_KUBECONFIG.is_file():
        args.kubeconfig = DEFAULT_KUBECONFIG
    print(f"virtctl-py against kubectl and KubeVirt's virtctl ({os.cpu_count()} cores, "
          f"median of {args.rounds})")  # fmt: skip
    if args.kubeconfig is not None and not args.stack:
        objects = Objects(namespace=args.namespace, running=args.vm,
                          halted=args.halted_vm, claim=args.claim, creds=args.creds_vm)  # fmt: skip
        measure(args.kubeconfig, objects, args.rounds)
        return
    began = time.monotonic()
    with process_cluster(args.session) as cluster, served(cluster) as objects:
        print(f"    (cluster and stack ready in {time.monotonic() - began:.0f} s)")
        measure(cluster.kubeconfig, objects, args.rounds)


if __name__ == "__main__":
    main()
