"""The launcher pod for dedicated CPUs and hugepages (controller/services/dedicated.py):
Guaranteed with whole CPUs (one more for the emulator thread), hugepages of the guest's
size with a hugetlbfs emptyDir, the memory request shrunk to the overhead."""

from __future__ import annotations

from typing import Any

from controller.config import TemplateConfig
from controller.services.overhead import MIB
from controller.services.template import TemplateService
from shared import podlayout
from shared.launcherpod import COMPUTE_CONTAINER
from tests.unit.controller.builders import make_vmi, vmi_dict

OVERHEAD = 153 * MIB  # 128 MiB, 1 vCPU, emulated (controller/services/overhead.py)


def _pod(cpu: dict[str, Any], memory: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = vmi_dict()
    raw["spec"]["domain"]["cpu"] = cpu
    raw["spec"]["domain"].setdefault("memory", {}).update(memory or {})
    return TemplateService(TemplateConfig()).launcher_pod(make_vmi(raw=raw))


def _compute(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == COMPUTE_CONTAINER)


def test_dedicated_cpus_make_a_guaranteed_pod_with_whole_cpus() -> None:
    """One whole CPU per vCPU, requests equal to limits for CPU and memory in every
    container (the console-log sidecar too): the kubelet's Guaranteed class."""
    pod = _pod({"cores": 2, "dedicatedCpuPlacement": True})
    res = _compute(pod)["resources"]
    assert res["requests"]["cpu"] == res["limits"]["cpu"] == "2"
    assert res["requests"]["memory"] == res["limits"]["memory"]
    for container in pod["spec"]["containers"]:
        r = container["resources"]
        assert r["requests"]["cpu"] == r["limits"]["cpu"], container["name"]
        assert r["requests"]["memory"] == r["limits"]["memory"], container["name"]


def test_isolated_emulator_thread_asks_one_more_cpu() -> None:
    """isolateEmulatorThread: vCPUs + 1 (KubeVirt's rule)."""
    pod = _pod({"dedicatedCpuPlacement": True, "isolateEmulatorThread": True})
    res = _compute(pod)["resources"]
    assert res["requests"]["cpu"] == res["limits"]["cpu"] == "2"


def test_shared_cpus_stay_as_before() -> None:
    """Without dedicatedCpuPlacement the CPU request stays fractional, no CPU limit."""
    res = _compute(_pod({}))["resources"]
    assert res["requests"]["cpu"].endswith("m") and "cpu" not in res["limits"]


def test_hugepages_request_the_guest_size_and_mount_hugetlbfs() -> None:
    """hugepages-2Mi of the guest's 128 MiB (request = limit), memory request the overhead
    only, and a HugePages-2Mi emptyDir mounted at /dev/hugepages."""
    pod = _pod({}, {"guest": "128Mi", "hugepages": {"pageSize": "2Mi"}})
    compute = _compute(pod)
    res = compute["resources"]
    assert res["requests"]["hugepages-2Mi"] == res["limits"]["hugepages-2Mi"] == str(128 * MIB)
    assert res["requests"]["memory"] == str(OVERHEAD)
    volume = {"name": podlayout.HUGEPAGES_VOLUME, "emptyDir": {"medium": "HugePages-2Mi"}}
    assert volume in pod["spec"]["volumes"]
    mount = {"name": podlayout.HUGEPAGES_VOLUME, "mountPath": podlayout.HUGEPAGES_DIR}
    assert mount in compute["volumeMounts"]
