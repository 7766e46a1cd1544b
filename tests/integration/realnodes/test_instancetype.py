"""Instancetypes and preferences on real nodes: the demo VM, its CPU and memory taken out of
its template and named by a VirtualMachineInstancetype and a VirtualMachineClusterPreference
instead, boots with the instancetype's CPU and memory (in the VMI and in the QEMU that runs
it) and the preference's machine type and disk bus."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_platform import _qemu_cmdline
from tests.integration.realnodes.test_story import REPO, _serial, _wait

pytestmark = pytest.mark.cluster
API = "instancetype.kubevirt.io/v1beta1"


def _vm(ns: str, preference: str) -> dict[str, Any]:
    vm: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"].update(name="typed", namespace=ns)
    vm["spec"]["instancetype"] = {"name": "two-cpus", "kind": "VirtualMachineInstancetype"}
    vm["spec"]["preference"] = {"name": preference}
    template = vm["spec"]["template"]
    template["metadata"]["labels"] = {"kubevirt.io/vm": "typed"}
    domain = template["spec"]["domain"]
    for key in ("cpu", "memory", "resources"):  # the instancetype's to set
        domain.pop(key, None)
    del domain["devices"]["disks"][0]["disk"]["bus"]  # the preference's to choose
    return vm


def test_vm_with_an_instancetype_boots_with_its_cpu_and_memory(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """The VMI of a VM naming an instancetype (2 vCPUs, 160Mi) and a cluster preference
    (q35, sata disks) has them in its spec, QEMU runs with -smp 2 and 160 MiB, and the
    guest boots; the VM names the ControllerRevisions that captured both objects."""
    k, ns = real_stack, real_namespace
    preference = f"pref-{uuid.uuid4().hex[:6]}"
    k("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": API, "kind": "VirtualMachineInstancetype",
        "metadata": {"name": "two-cpus", "namespace": ns},
        "spec": {"cpu": {"guest": 2}, "memory": {"guest": "160Mi"}},
    }))  # fmt: skip
    k("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": API, "kind": "VirtualMachineClusterPreference",
        "metadata": {"name": preference},
        "spec": {"devices": {"preferredDiskBus": "sata"},
                 "machine": {"preferredMachineType": "q35"}},
    }))  # fmt: skip
    try:
        k("apply", "-f", "-", stdin=json.dumps(_vm(ns, preference)))

        def vmi() -> dict[str, Any]:
            out = k("get", "vmi", "typed", "-n", ns, "-o", "json", check=False)
            return json.loads(out) if out else {}

        running = _wait(
            lambda: (v := vmi()).get("status", {}).get("phase") == "Running" and v,
            300,
            "the typed VMI Running",
            lambda: vmi().get("status"),
        )
        domain = running["spec"]["domain"]
        assert domain["cpu"]["sockets"] == 2, domain["cpu"]
        assert domain["memory"]["guest"] == "160Mi", domain["memory"]
        assert domain["machine"]["type"] == "q35"
        assert domain["devices"]["disks"][0]["disk"]["bus"] == "sata"
        _wait(
            lambda: "KUBEVIRT-PY-GUEST-BOOTED" in (t := _serial(real_cluster, running)) and t,
            180,
            "the guest's boot on its console",
            lambda: _serial(real_cluster, running)[-800:],
        )
        cmdline = _qemu_cmdline(f"guest={ns}_typed")
        assert "-smp 2," in cmdline or "-smp 2 " in cmdline, cmdline
        assert "-m size=163840k" in cmdline or "-m 160" in cmdline, cmdline
        vm = json.loads(k("get", "vm", "typed", "-n", ns, "-o", "json"))
        revisions = (
            vm["spec"]["instancetype"].get("revisionName"),
            vm["spec"]["preference"].get("revisionName"),
        )
        assert all(revisions), vm["spec"]
        for name in revisions:
            k("get", "controllerrevision", name, "-n", ns)
    finally:
        k("delete", "vm", "typed", "-n", ns, "--wait=true", "--timeout=120s", check=False)
        k("delete", "virtualmachineclusterpreference", preference, check=False)
