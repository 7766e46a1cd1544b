"""A mass delete of running VMs on real nodes (issue 35): no QEMU outlives its VMI.

Twenty VMs (runStrategy Always, the tiny guest) run across both nodes; all are deleted at
once. KubeVirt's order is kept for each of them: its VMI is gone from the API only after its
QEMU has exited, so the moment the last VMI is gone no QEMU of theirs is left. What the
delete took is printed (`MASS-DELETE …`, see `pytest -s`).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from localkube.deploy import Kubectl
from tests.integration.realnodes.test_story import REPO, _qemu_pids, _wait

pytestmark = pytest.mark.cluster
COUNT = 20


def _vm(name: str) -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    spec = vmi["spec"]
    spec["terminationGracePeriodSeconds"] = 0
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {"runStrategy": "Always", "template": {"spec": spec}},
    }


def _vmis(k: Kubectl, ns: str) -> dict[str, str]:
    """name -> phase of every VMI in `ns`."""
    items = json.loads(k("get", "vmi", "-n", ns, "-o", "json"))["items"]
    return {v["metadata"]["name"]: v.get("status", {}).get("phase", "") for v in items}


def test_mass_delete_leaves_no_qemu_behind_any_vmi(
    real_stack: Kubectl, real_namespace: str
) -> None:
    """Twenty running VMs deleted at once: each poll that finds a VMI gone finds its QEMU
    gone too, and once the last VMI is gone no QEMU of theirs is running."""
    k, ns = real_stack, real_namespace
    names = [f"mass-{i:02d}" for i in range(COUNT)]
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
      "items": [_vm(n) for n in names]}))  # fmt: skip
    _wait(
        lambda: (p := _vmis(k, ns)) and sum(v == "Running" for v in p.values()) == COUNT,
        600, f"{COUNT} VMIs Running", lambda: _vmis(k, ns), interval=2.0,
    )  # fmt: skip
    domains = {n: f"{ns}_{n}" for n in names}
    assert all(_qemu_pids(d) for d in domains.values()), "a Running VMI without its QEMU"
    started = time.monotonic()
    k("delete", "vm", "--all", "-n", ns, "--wait=false")
    outlived: dict[str, list[int]] = {}
    deadline = started + 300
    present = set(names)
    while present and time.monotonic() < deadline:
        present = set(_vmis(k, ns))
        for name in set(names) - present:
            if name not in outlived and (left := _qemu_pids(domains[name])):
                outlived[name] = left
        time.sleep(0.1)
    gone_after = time.monotonic() - started
    assert not present, f"VMIs still present after 300 s: {sorted(present)}"
    after = {n: p for n, d in domains.items() if (p := _qemu_pids(d))}
    print(f"MASS-DELETE {COUNT} VMs: last VMI gone after {gone_after:.1f} s; QEMU left: {after}")
    assert not outlived, f"VMIs gone from the API while their QEMU ran: {outlived}"
    assert not after, f"QEMU processes alive once every VMI was gone: {after}"
