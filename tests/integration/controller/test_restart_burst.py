"""200 VMIs at once, the controller SIGKILLed mid-burst and started again: every VMI reaches
Scheduled with exactly one launcher pod (expectations are lost with the process; the pod
names derived from VMI UIDs and the synced caches keep the new process from doubling)."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path

import pytest

from localkube.cluster import Cluster
from localkube.testing import wait_for
from shared.kube import VMIS, KubeClient
from shared.model import VirtualMachineInstance
from tests.integration.controller.harness import (
    ControllerProcess,
    create_vmi,
    launcher_pods,
    vmi_body,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

BURST = 200


async def test_kill_and_restart_mid_burst_leaves_no_duplicates(
    kube: KubeClient, ns: str, kubevirt_cluster: Cluster, tmp_path: Path
) -> None:
    """Kill after ≥ 30 pods exist, restart, and all 200 VMIs end Scheduled with one pod each."""
    first = ControllerProcess(kubevirt_cluster, ns, tmp_path / "first.log", identity="first")
    await first.start()
    bodies = [vmi_body(f"b{i:03d}", memory="16Mi") for i in range(BURST)]
    created = await asyncio.gather(*(create_vmi(kube, ns, b) for b in bodies))
    await wait_for(
        lambda: launcher_pods(kube, ns), lambda pods: len(pods) >= 30, what="30 launcher pods"
    )
    assert await first.stop(signal.SIGKILL) == -signal.SIGKILL
    pods_at_kill = len(await launcher_pods(kube, ns))
    second = ControllerProcess(kubevirt_cluster, ns, tmp_path / "second.log", identity="second")
    await second.start()
    try:
        vmis = await wait_for(
            lambda: kube.list_all(VMIS, namespace=ns),
            lambda r: (
                sum(i.get("status", {}).get("phase") == "Scheduled" for i in r.items) == BURST
            ),
            what=f"{BURST} VMIs Scheduled",
            timeout=600,
            interval=2,
            show=lambda r: Counter(i.get("status", {}).get("phase") for i in r.items),
        )
    finally:
        await second.stop()
    pods = await launcher_pods(kube, ns)
    owners = Counter(p["metadata"]["labels"]["kubevirt.io/created-by"] for p in pods)
    assert len(pods) == BURST, f"{len(pods)} pods ({pods_at_kill} when killed)"
    assert set(owners) == {v.uid for v in created}
    assert max(owners.values()) == 1
    for item in vmis.items:
        vmi = VirtualMachineInstance.from_dict(item)
        assert len(vmi.status.active_pods) == 1
