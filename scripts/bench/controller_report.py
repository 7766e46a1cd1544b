"""What bench-controller prints: the run's figures against the targets and floors."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from controller_floor import pct, report_floor, report_paced
from controller_vmirs import VmirsRun

TARGET_RSS_KB = 50.0
TARGET_CPU_MS = 5.0
Tally = dict[tuple[str, ...], float]


@dataclass(frozen=True, slots=True)
class ProcSample:
    rss_kb: int
    cpu_s: float


@dataclass
class Run:
    n: int
    latencies: list[float]
    api: Tally
    mine: Tally
    before: ProcSample
    after: ProcSample
    nodes: int
    wall: float
    rate: float | None = None
    replicaset_wall: float | None = None  # Kubernetes' floor: N pods of a ReplicaSet bound
    vmirs: VmirsRun | None = None  # the VMIRS 0 → N row


def verdict(ok: bool) -> str:
    return "ok" if ok else "OVER TARGET"


def report(run: Run) -> None:
    n = run.n
    lat = run.latencies
    how = f"at {run.rate:g}/s" if run.rate else "at once"
    print(
        f"\ncontroller benchmark: {n} VMIs created {how}, {run.nodes} fake node(s); "
        f"all Scheduled after {run.wall:.1f} s"
    )
    print(
        f"  create → Scheduled   P50 {statistics.median(lat):.2f} s   P95 {pct(lat, 0.95):.2f} s"
        f"   max {max(lat):.2f} s"
    )
    if run.rate:
        report_paced(lat, run.rate)
    if run.replicaset_wall is not None:
        report_floor(run.wall, run.replicaset_wall, n)
    print("  API requests per VMI (kube-apiserver apiserver_request_total, all writers):")
    for (resource, sub, verb), value in sorted(run.api.items()):
        if verb in ("POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE") and value:
            where = f"{resource}/{sub}" if sub else resource
            print(f"    {where:<34} {verb:<7} {value / n:6.2f}")
    vmi_writes = sum(
        v
        for (r, verb), v in run.mine.items()
        if r == "virtualmachineinstances" and verb in ("update", "patch")
    )
    pod_creates = run.mine.get(("pods", "create"), 0.0)
    print(
        f"  controller's own writes per VMI: VMI status/metadata {vmi_writes / n:.2f}"
        f" (update {run.mine.get(('virtualmachineinstances', 'update'), 0.0) / n:.2f},"
        f" patch {run.mine.get(('virtualmachineinstances', 'patch'), 0.0) / n:.2f}),"
        f" pod creates {pod_creates / n:.2f}   (KubeVirt ≈ 6.3 VMI writes + pod patches)"
    )
    rss_kb = (run.after.rss_kb - run.before.rss_kb) / n
    cpu_ms = (run.after.cpu_s - run.before.cpu_s) * 1000 / n
    print(
        f"  controller RSS  {run.before.rss_kb / 1024:.1f} MiB → {run.after.rss_kb / 1024:.1f} MiB:"
        f" {rss_kb:.1f} KB per VMI held (target ≤ {TARGET_RSS_KB:.0f} KB, {verdict(rss_kb <= TARGET_RSS_KB)};"
        f" KubeVirt ≈ 160 KB)"
    )
    print(
        f"  controller CPU  {run.after.cpu_s - run.before.cpu_s:.2f} s: {cpu_ms:.2f} ms per VMI"
        f" (target ≤ {TARGET_CPU_MS:.0f} ms, {verdict(cpu_ms <= TARGET_CPU_MS)}; KubeVirt ≈ 30 ms)"
    )
