"""(h) The guest's own start cost without Kubernetes: the same tiny guest booted by a bare
launcher on the host (no pod, no container, no kubelet), one at a time after the cluster is
gone; QEMU's CPU-seconds up to the guest's boot marker, beside what the launcher pods' QEMUs
spent in the run. If the two agree, containers add nothing to QEMU's own cost, and the
table's other rows are the whole price of running it as a pod."""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

import uvloop
from proc_sampler import BOOT_MARKER, read_stat

from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import Launcher, call, qemu_pids_under, tiny_vmi


def boot_floor(count: int, work: Path, *, timeout: float = 180.0) -> list[tuple[float, float]]:
    """(QEMU CPU-seconds at the boot marker, seconds from launcher start to the marker)."""
    out = []
    for i in range(count):
        root = work / f"floor-{i}"
        root.mkdir(parents=True, exist_ok=True)
        # Stopped right after its boot marker: a guest not yet hearing ACPI is destroyed
        # after 1 s instead of the default 10 s grace (the stop is not measured).
        launcher = Launcher(root=root, vmi=tiny_vmi(name=f"floor{i}"), grace=1)
        began = time.monotonic()
        launcher.start()
        try:
            uvloop.run(call(launcher, Method.SYNC, {"vmi": launcher.vmi}))
            (pid,) = qemu_pids_under(root)
            while BOOT_MARKER.decode() not in launcher.serial():
                if time.monotonic() - began > timeout:
                    raise TimeoutError(f"no boot marker from the floor guest in {timeout:g} s")
                time.sleep(0.1)
            stat = read_stat(str(pid))
            out.append((stat.own if stat else float("nan"), time.monotonic() - began))
        finally:
            launcher.terminate()
            shutil.rmtree(root, ignore_errors=True)
    return out


def report_floor(in_pods: list[float], floor: list[tuple[float, float]]) -> None:
    if not floor:
        return
    pods = statistics.median(in_pods) if in_pods else float("nan")
    bare = statistics.median(c for c, _ in floor)
    took = statistics.median(t for _, t in floor)
    print(
        f"(h) QEMU CPU to the guest's boot marker, median: {pods:.2f} CPU-s in launcher pods "
        f"(this run, {len(in_pods)} guests) vs {bare:.2f} CPU-s with a bare launcher on the "
        f"host, one guest at a time ({len(floor)} boots, {took:.1f} s each) -> "
        f"{pods / bare if bare else float('nan'):.2f}x"
    )
