"""The node's QEMU capability cache on real nodes: virt-handler's `qemu-capabilities` init
container (the launcher image, unprivileged) probes QEMU once per node, and a launcher
started there reuses that cache as it is (libvirt judged it valid and did not probe QEMU
again), reading it through a read-only mount."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from localkube.deploy import Kubectl
from shared import podlayout
from tests.integration.realnodes.test_story import REPO, _wait

pytestmark = pytest.mark.cluster


def _events(text: str, name: str) -> list[dict[str, Any]]:
    found = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == name:
            found.append(entry)
    return found


def test_launchers_start_from_the_nodes_capability_cache(
    real_stack: Kubectl, real_namespace: str
) -> None:
    """Every handler pod's init container seeded the cache; the launcher of a new VMI
    logged `qemu_capabilities reused=true`, with the cache mounted read-only."""
    k, ns = real_stack, real_namespace
    handlers = json.loads(k("get", "pods", "-n", "kubevirt", "-l", "kubevirt.io=virt-handler",
                            "-o", "json"))["items"]  # fmt: skip
    assert handlers
    for pod in handlers:
        logs = k("logs", "-n", "kubevirt", pod["metadata"]["name"], "-c", "qemu-capabilities")
        (seeded,) = _events(logs, "qemu_capabilities_seeded")
        assert seeded["files"] >= 1, logs
    vmi = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"] = {"name": "seeded", "namespace": ns}
    k("apply", "-f", "-", stdin=json.dumps(vmi))
    _wait(lambda: json.loads(k("get", "vmi", "seeded", "-n", ns, "-o", "json"))
          .get("status", {}).get("phase") == "Running", 300, "VMI Running")  # fmt: skip
    (launcher,) = json.loads(k("get", "pods", "-n", ns, "-l", "kubevirt.io=virt-launcher",
                               "-o", "json"))["items"]  # fmt: skip
    mounts = {m["name"]: m for m in launcher["spec"]["containers"][0]["volumeMounts"]}
    seed = mounts[podlayout.QEMU_CAPABILITIES_VOLUME]
    assert seed["readOnly"] is True
    assert seed["mountPath"] == podlayout.QEMU_CAPABILITIES_SEED_DIR
    logs = k("logs", "-n", ns, launcher["metadata"]["name"], "-c", "compute")
    (used,) = _events(logs, "qemu_capabilities")
    assert used["reused"] is True, logs[-3000:]
