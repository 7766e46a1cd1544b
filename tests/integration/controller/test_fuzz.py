"""The schema-driven API fuzzer (issue 35) against the session cluster with admission and a
controller running: random objects from the installed CRDs' schemas for every served kind.

Each object is either refused with a message naming a field, or accepted. Every object is
sent with dryRun=All (schema, defaulting and admission in full; nothing stored); then up to
`STORED` accepted objects of each kind the controller acts on are created for real, tamed
so nothing boots (VMs `runStrategy: Halted`, replica sets and pools 0 replicas), must show
a phase, a condition or a printable status within `STATUS_BOUND` seconds, get up to 20
other fuzzed specs of their kind as dry-run merge patches (admission's UPDATE path), and
are deleted.

The VM `fz-vm` (Halted) exists, so snapshots, exports and clones of it are accepted; no
snapshot `fz-snap` does, so restores are refused (naming spec.virtualMachineSnapshotName).
Clone targets are removed with the test's namespace.

Not stored (dry run only), with the reason:
- VirtualMachineInstance: stored, it would start a launcher pod (CPU the suite has not);
- DataVolume: stored, it would start importer pods;
- KubeVirt, cluster instancetypes/preferences: cluster-scoped, shared with other tests;
- VirtualMachineInstancetype, VirtualMachinePreference, MigrationPolicy, CDIConfig,
  VirtualMachineSnapshotContent: our daemons do not give them a status (specs other
  objects read, or, for contents, written by the snapshot controller itself).

The run fails on a 5xx (an API server or webhook crash), a refusal naming no field, a
work-item traceback in the controller's log, a controller exit, or a stored object left
without status. `FUZZ_SEED` replays a run (the seed is printed), `FUZZ_COUNT` runs longer.
"""

from __future__ import annotations

import os
import random
import time

import pytest

from localkube.cluster import Cluster
from localkube.health import admin_ssl
from shared.kube import VMS, KubeClient
from tests.fuzz.bases import SPECS
from tests.fuzz.objects import Case, cases, load_kinds
from tests.fuzz.regressions import regression_cases
from tests.fuzz.runner import Target, describe, dry_run_all, pick_stored, store_and_watch
from tests.integration.controller.harness import ControllerProcess
from tests.integration.realnodes.logscan import failures_in

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

COUNT = 2000
STATUS_BOUND = 45.0
STORED = {
    "VirtualMachine": 4,
    "VirtualMachineInstanceMigration": 3,
    "VirtualMachineInstanceReplicaSet": 2,
    "VirtualMachinePool": 2,
    "VirtualMachineSnapshot": 3,
    "VirtualMachineRestore": 3,
    "VirtualMachineExport": 3,
    "VirtualMachineClone": 3,
}
# Findings too big to fix here: (name, what matches it); printed, never silent.
KNOWN_ISSUES: tuple[tuple[str, str], ...] = ()


def seed_and_count() -> tuple[int, int]:
    seed = int(os.environ.get("FUZZ_SEED") or random.SystemRandom().randrange(1, 2**31))
    return seed, int(os.environ.get("FUZZ_COUNT") or COUNT)


def known(message: str) -> str | None:
    """The known issue a finding's message matches, if any."""
    return next((name for name, marker in KNOWN_ISSUES if marker in message), None)


async def test_fuzzed_objects_are_refused_by_field_or_get_a_status(
    kubevirt_cluster: Cluster, ns: str, kube: KubeClient, controller: ControllerProcess
) -> None:
    """Every fuzzed object of every served kind is refused with a message naming a field or
    accepted; accepted objects the controller acts on get a status within the bound; no
    5xx, no traceback in the controller's log, no controller exit."""
    seed, count = seed_and_count()
    print(f"\nFUZZ_SEED={seed} FUZZ_COUNT={count}")
    kinds = load_kinds()
    # The VM the bases' snapshots, exports and clones name (Halted: nothing boots).
    vm = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "fz-vm"}}
    await kube.create(VMS, {**vm, "spec": SPECS["VirtualMachine"]}, namespace=ns)
    batch: list[Case] = regression_cases(kinds)  # tests/fuzz/regressions.py
    batch += list(cases(seed, count, kinds))
    target = Target(
        server=kubevirt_cluster.ports.server, tls=admin_ssl(kubevirt_cluster.pki), namespace=ns
    )
    started = time.monotonic()
    tally = await dry_run_all(target, batch)
    print(f"{len(batch)} objects in {time.monotonic() - started:.1f} s: {tally.by_outcome}")
    for kind, outcomes in sorted(tally.by_kind.items()):
        print(f"  {kind}: {dict(outcomes)}; e.g. {tally.samples.get(kind, '-')!r}")
    stored = pick_stored(tally.accepted, kinds=STORED)
    by_kind: dict[str, list[Case]] = {}
    for one in batch:
        by_kind.setdefault(one.kind.kind, []).append(one)
    bad, without_status = await store_and_watch(target, stored, bound=STATUS_BOUND, updates=by_kind)
    print(f"{len(stored)} stored, {len(without_status)} without status after {STATUS_BOUND} s")

    findings = [describe(c, a) for c, a in [*tally.findings, *bad]]
    findings += [f"no status: {describe(c)}" for c in without_status]
    log = controller.log_path.read_text(errors="replace")
    findings += [f"controller: {f}" for f in failures_in(log, pod="controller")]
    if controller.proc is None or controller.proc.returncode is not None:
        findings.append(f"controller exited: {controller.log_tail(40)}")
    print(f"known issues: {[name for name, _ in KNOWN_ISSUES] or 'none'}")
    excused = [f for f in findings if known(f)]
    for finding in excused:
        print(f"known issue {known(finding)}: {finding}")
    strict = [f for f in findings if not known(f)]
    assert not strict, f"FUZZ_SEED={seed}: {len(strict)} findings:\n" + "\n".join(strict[:40])
