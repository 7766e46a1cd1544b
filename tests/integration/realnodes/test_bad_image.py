"""Bad input on real nodes: a containerDisk image the node does not have (and may not pull)
holds the VM in ErrImagePull, with the VMI naming the field and the image, and nothing else
is touched."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.deploy import Kubectl

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[3]
MISSING = "registry.local/kubevirt-py/no-such-image:v1"


def _get(k: Kubectl, kind: str, ns: str) -> dict[str, Any]:
    out = k("get", kind, "demo", "-n", ns, "-o", "json", check=False)
    return json.loads(out) if out else {}


def apply_missing_image_demo(k: Kubectl, ns: str) -> int:
    """The demo VM in `ns` with a containerDisk image no node has (never pulled); returns
    the index of that volume."""
    vm = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"]["namespace"] = ns
    volumes = vm["spec"]["template"]["spec"]["volumes"]
    (i,) = [n for n, v in enumerate(volumes) if "containerDisk" in v]
    volumes[i]["containerDisk"] = {"image": MISSING, "imagePullPolicy": "Never"}
    k("apply", "-f", "-", stdin=json.dumps(vm))
    return i


def test_missing_containerdisk_image_is_named(real_stack: Kubectl, real_namespace: str) -> None:
    """The VM shows ErrImagePull; its VMI's Synchronized condition names
    spec.volumes[0].containerDisk.image and the image; the VMI stays Scheduling."""
    k, ns = real_stack, real_namespace
    i = apply_missing_image_demo(k, ns)
    deadline, shown = time.monotonic() + 120, ""
    while time.monotonic() < deadline:
        shown = _get(k, "vm", ns).get("status", {}).get("printableStatus", "")
        if shown == "ErrImagePull":
            break
        time.sleep(1)
    assert shown == "ErrImagePull", _get(k, "vmi", ns).get("status")
    vmi = _get(k, "vmi", ns)
    (sync,) = [c for c in vmi["status"]["conditions"] if c["type"] == "Synchronized"]
    assert sync["status"] == "False" and sync["reason"] == "ErrImageNeverPull"
    assert sync["message"].startswith(f"spec.volumes[{i}].containerDisk.image: image {MISSING!r}")
    assert vmi["status"]["phase"] == "Scheduling"
    k("delete", "vm", "demo", "-n", ns, "--wait=false")
