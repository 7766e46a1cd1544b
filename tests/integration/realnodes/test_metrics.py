"""KubeVirt's metrics on real nodes: a running VM's handler and the controllers serve every
kubevirt_vmi_* / kubevirt_vm_* series a dashboard or alert of KubeVirt's reads, with
KubeVirt's types and labels, the `drive` and `interface` labels being the VMI's own disk
and interface names; the guest agent's view of the interface reaches status.interfaces;
a live migration between the nodes shows in KubeVirt's migration series."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_story import _condition, _virtctl, _vmi, _wait
from tests.integration.scrape import metrics_text

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[3]
Samples = dict[str, list[tuple[dict[str, str], float]]]

VMI_SERIES = (
    "kubevirt_vmi_cpu_usage_seconds_total",
    "kubevirt_vmi_memory_resident_bytes",
    "kubevirt_vmi_memory_available_bytes",
    "kubevirt_vmi_memory_domain_bytes",
)
NET_SERIES = tuple(
    f"kubevirt_vmi_network_{d}_{what}_total"
    for d in ("receive", "transmit")
    for what in ("bytes", "packets", "errors", "packets_dropped")
)
DRIVE_SERIES = tuple(
    f"kubevirt_vmi_storage_{what}"
    for what in (
        "read_traffic_bytes_total", "write_traffic_bytes_total", "iops_read_total",
        "iops_write_total", "read_times_seconds_total", "write_times_seconds_total",
        "flush_requests_total", "flush_times_seconds_total",
    )
)  # fmt: skip
COUNTERS = {*NET_SERIES, *DRIVE_SERIES, "kubevirt_vmi_cpu_usage_seconds_total",
            "kubevirt_vmi_vcpu_seconds_total"}  # fmt: skip


def _scrape(address: str) -> tuple[Samples, dict[str, str]]:
    """Every sample by metric name, and each family's type (HTTPS, as KubeVirt serves it)."""
    text = metrics_text(address, scheme="https")
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
            types[s.name] = family.type
    return samples, types


def _pod_ip(k: Kubectl, app: str, node: str | None = None) -> str:
    pods = json.loads(k("get", "pods", "-n", "kubevirt", "-l", f"kubevirt.io={app}", "-o", "json"))
    (pod,) = [
        p for p in pods["items"]
        if (node is None or p["spec"].get("nodeName") == node)
        and p["status"].get("phase") == "Running"
    ][:1]  # fmt: skip
    return str(pod["status"]["podIP"])


def _has(samples: Samples, name: str, want: dict[str, str]) -> bool:
    return any(want.items() <= labels.items() for labels, _ in samples.get(name, []))


def _until_scraped(address: str, ready: Callable[[Samples], bool], what: str) -> Samples:
    last: list[Samples] = [{}]

    def probe() -> Samples | None:
        last[0] = _scrape(address)[0]
        return last[0] if ready(last[0]) else None

    return _wait(probe, 120, what, lambda: sorted(n for n in last[0] if "vmi" in n))  # type: ignore[no-any-return]


def test_a_running_vm_has_every_kubevirt_series_with_its_labels(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """The demo VM running with its guest agent connected: the handler of its node serves
    CPU, vCPU, memory, network (bytes, packets, errors, drops) and storage (traffic, IOPS,
    times, flushes) series labelled node/namespace/name, with drive = the VMI's disk names
    and interface = its interface name, each family typed as KubeVirt's; the controllers
    serve kubevirt_vmi_info and kubevirt_vm_info, all over HTTPS; status.interfaces names the guest's
    interface (infoSource "domain, guest-agent"), the masquerade address staying the
    pod's, as KubeVirt reports it; a freeze through the subresource API freezes the guest's
    filesystems (status.fsFreezeStatus frozen) until the unfreeze."""
    k, ns = real_stack, real_namespace
    vm = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"]["namespace"] = ns
    k("apply", "-f", "-", stdin=json.dumps(vm))
    vmi = _wait(
        lambda: (v := _vmi(k, ns)) and _condition(v, "AgentConnected") == "True" and v,
        300, "demo VMI Running with its agent connected", lambda: _vmi(k, ns).get("status"),
    )  # fmt: skip
    node = vmi["status"]["nodeName"]
    base = {"node": node, "namespace": ns, "name": "demo"}
    wanted_nic = {**base, "interface": "default"}

    handler = _pod_ip(k, "virt-handler", node)
    samples = _until_scraped(
        handler,
        lambda s: _has(s, "kubevirt_vmi_network_receive_bytes_total", wanted_nic),
        "the demo VMI's series, its interface's counters (from the guest agent) included",
    )
    _, types = _scrape(handler)
    for name in VMI_SERIES:
        assert _has(samples, name, base), name
    assert _has(samples, "kubevirt_vmi_vcpu_seconds_total", {**base, "id": "0"})
    for name in NET_SERIES:
        assert _has(samples, name, wanted_nic), name
    for name in DRIVE_SERIES:
        for drive in ("containerdisk", "cloudinit"):
            assert _has(samples, name, {**base, "drive": drive}), (name, drive)
    drives = {lb["drive"] for lb, _ in samples["kubevirt_vmi_storage_iops_read_total"]}
    assert drives == {"containerdisk", "cloudinit"}, drives  # no libvirt names (vda, sda)
    for name in COUNTERS:
        assert types[name] == "counter", name
    reads = dict((lb["drive"], v) for lb, v in samples["kubevirt_vmi_storage_iops_read_total"])
    assert reads["containerdisk"] > 0  # the guest booted from it

    controller = _pod_ip(k, "virt-controller")
    info = _until_scraped(
        controller,
        lambda s: _has(
            s, "kubevirt_vm_info", {"namespace": ns, "name": "demo", "status": "Running"}
        ),
        "kubevirt_vm_info of the running demo VM",
    )
    assert _has(info, "kubevirt_vmi_info", {**base, "phase": "running"})
    assert _has(info, "kubevirt_vm_info", {"namespace": ns, "status_group": "running"})

    status = _wait(
        lambda: (i := _interfaces(k, ns)) and i[0].get("infoSource") == "domain, guest-agent" and i,
        120, "status.interfaces from the guest agent", lambda: _interfaces(k, ns),
    )  # fmt: skip
    (iface,) = status
    assert iface["name"] == "default" and iface["interfaceName"] == "eth0", iface
    pod_ips = _launcher_ips(k, ns, vmi["metadata"]["uid"])  # IPv4, IPv6: dual-stack pods
    assert iface["ipAddress"] == pod_ips[0] and iface["ipAddresses"] == pod_ips, iface  # masquerade

    # KubeVirt's freeze (as virt-freezer and backup tools call it) through the guest's agent.
    path = f"/apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/demo"
    k("replace", "--raw", f"{path}/freeze", "-f", "-", stdin='{"unfreezeTimeout": "5m0s"}')
    _wait(lambda: _vmi(k, ns).get("status", {}).get("fsFreezeStatus") == "frozen",
          60, "status.fsFreezeStatus frozen", lambda: _vmi(k, ns).get("status"))  # fmt: skip
    k("replace", "--raw", f"{path}/unfreeze", "-f", "-", stdin="{}")
    _wait(lambda: "fsFreezeStatus" not in _vmi(k, ns).get("status", {}),
          60, "status.fsFreezeStatus gone once thawed", lambda: _vmi(k, ns).get("status"))  # fmt: skip


def _launcher_ips(k: Kubectl, ns: str, vmi_uid: str) -> list[str]:
    out = k("get", "pods", "-n", ns, "-l", f"kubevirt.io/created-by={vmi_uid}", "-o", "json")
    (pod,) = json.loads(out)["items"]
    return [str(p["ip"]) for p in pod["status"]["podIPs"]]


def _interfaces(k: Kubectl, ns: str) -> list[dict[str, Any]]:
    return list(_vmi(k, ns).get("status", {}).get("interfaces", []))


def test_a_migration_shows_in_kubevirts_migration_series(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """After `virtctl-py migrate demo --wait` between the real nodes, the controllers serve
    kubevirt_vmi_migration_succeeded for the VMIM, and the VMI's migration start and end
    times labelled with the VMIM's name and status "succeeded", the end not before the
    start."""
    k, ns = real_stack, real_namespace
    vm = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"]["namespace"] = ns
    k("apply", "-f", "-", stdin=json.dumps(vm))
    _wait(lambda: (v := _vmi(k, ns)).get("status", {}).get("phase") == "Running" and v,
          300, "demo VMI Running", lambda: _vmi(k, ns).get("status"))  # fmt: skip
    done = _virtctl(real_cluster.kubeconfig, ns, "migrate", "demo", "--wait", "--timeout", "240")
    assert done.returncode == 0, done.stderr
    (vmim,) = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
    name = vmim["metadata"]["name"]
    result = {"vmi": "demo", "vmim": name, "namespace": ns}
    base = {"namespace": ns, "name": "demo", "migration_name": name}

    samples = _until_scraped(
        _pod_ip(k, "virt-controller"),
        lambda s: (
            _has(s, "kubevirt_vmi_migration_succeeded", result)
            and _has(s, "kubevirt_vmi_migration_end_time_seconds", {**base, "status": "succeeded"})
        ),
        "the migration's series",
    )
    (start,) = [v for lb, v in samples["kubevirt_vmi_migration_start_time_seconds"]
                if base.items() <= lb.items()]  # fmt: skip
    (end,) = [v for lb, v in samples["kubevirt_vmi_migration_end_time_seconds"]
              if base.items() <= lb.items()]  # fmt: skip
    assert end >= start > 0
    assert not _has(samples, "kubevirt_vmi_migration_failed", result)
