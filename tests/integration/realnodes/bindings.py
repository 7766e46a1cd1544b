"""KubeVirt's network binding plugins on real nodes (used by test_network.py and
test_multus.py): the KubeVirt CR registers `passt` as KubeVirt's user guide does (a sidecar
image kubevirt-py does not need, `migration: {}`, a memory overhead) or a managedTap plugin;
a VMI binding an unregistered plugin is refused naming the field."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from typing import Any

from localkube.deploy import Kubectl
from shared.model.quantity import parse_bytes
from tests.integration.realnodes.test_story import _wait

OVERHEAD = "64Mi"
PASST_PLUGIN = {
    "sidecarImage": "quay.io/kubevirt/network-passt-binding:v1.8.2",
    "migration": {},
    "computeResourceOverhead": {"requests": {"memory": OVERHEAD}},
}


def _kv(k: Kubectl) -> dict[str, Any]:
    return json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))  # type: ignore[no-any-return]


@contextlib.contextmanager
def registered(k: Kubectl, plugins: dict[str, Any]) -> Iterator[None]:
    """`plugins` registered in the KubeVirt CR (the configuration as it was afterwards)."""
    before = _kv(k)["spec"].get("configuration") or {}
    body = {"spec": {"configuration": {"network": {"binding": plugins}}}}
    k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", json.dumps(body))
    try:
        yield
    finally:
        op = {"op": "replace", "path": "/spec/configuration", "value": before}
        k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=json", "-p", json.dumps([op]))


def passt_plugin(k: Kubectl) -> contextlib.AbstractContextManager[None]:
    """`passt` registered as KubeVirt's user guide registers it (no NAD: its CNI only sets
    the sysctls kubevirt-py's launcher pods already carry)."""
    return registered(k, {"passt": PASST_PLUGIN})


def apply_when_admitted(k: Kubectl, ns: str, manifest: dict[str, Any]) -> None:
    """Apply `manifest` once virt-api has read the registration (each replica reads the CR
    through its own informer)."""

    def admitted() -> bool:
        argv = [str(k.binary), "--kubeconfig", str(k.kubeconfig), "apply", "-n", ns, "-f", "-"]
        done = subprocess.run(
            argv, input=json.dumps(manifest), capture_output=True, text=True, timeout=60
        )
        return done.returncode == 0

    _wait(admitted, 60, "the VMI admitted with the passt plugin registered")


def assert_unregistered_refused(k: Kubectl, ns: str, manifest: dict[str, Any]) -> None:
    """A VMI binding a plugin the CR does not register is refused, naming the field."""
    bad = json.loads(json.dumps(manifest))
    bad["metadata"]["name"] = "unregistered-plugin"
    bad["spec"]["domain"]["devices"]["interfaces"][0]["binding"] = {"name": "nosuch"}
    argv = [str(k.binary), "--kubeconfig", str(k.kubeconfig), "apply", "--dry-run=server",
            "-n", ns, "-f", "-"]  # fmt: skip
    done = subprocess.run(argv, input=json.dumps(bad), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done.stdout
    assert "spec.domain.devices.interfaces[0].binding.name" in done.stderr, done.stderr
    assert "not registered in the KubeVirt CR" in done.stderr, done.stderr


def compute_memory_request(k: Kubectl, ns: str, pod_uid: str) -> int:
    """The compute container's memory request of launcher pod `pod_uid`, in bytes."""
    items = json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"]
    (pod,) = [p for p in items if p["metadata"]["uid"] == pod_uid]
    compute = next(c for c in pod["spec"]["containers"] if c["name"] == "compute")
    return parse_bytes(compute["resources"]["requests"]["memory"])
