"""The kubevirt.io/v1 CRDs on the real API server: served, validating, printing like KubeVirt."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[3]


def _kubectl(
    cluster: Cluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cluster.config.bin_dir / "kubectl"), "--kubeconfig", str(cluster.kubeconfig), *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def crds(kube_cluster: Cluster) -> Cluster:
    # Only the CRDs: the rest of the base (the daemons) is deployed by the e2e tests.
    for crd in sorted((REPO / "manifests" / "base").glob("crd-*.yaml")):
        applied = _kubectl(kube_cluster, "apply", "-f", str(crd))
        assert applied.returncode == 0, applied.stderr
    for kind in ("virtualmachineinstances", "virtualmachines", "virtualmachineinstancemigrations"):
        waited = _kubectl(
            kube_cluster, "wait", "--for=condition=Established", f"crd/{kind}.kubevirt.io"
        )
        assert waited.returncode == 0, waited.stderr
    return kube_cluster


def _vmi(namespace: str) -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"]["namespace"] = namespace
    return vmi


def test_vmi_is_stored_exactly_and_printed(crds: Cluster, kube_namespace: str) -> None:
    """A VMI round-trips through the API server with everything it set kept and KubeVirt's
    defaults added by the mutating webhook; `get vmi` has KubeVirt's columns."""
    vmi = _vmi(kube_namespace)
    vmi["spec"]["domain"]["devices"]["autoattachSerialConsole"] = True
    created = _kubectl(crds, "create", "-o", "yaml", "-f", "-", stdin=yaml.safe_dump(vmi))
    assert created.returncode == 0, created.stderr
    stored = yaml.safe_load(created.stdout)
    assert _kept(vmi["spec"], stored["spec"]), stored["spec"]
    assert stored["spec"]["domain"]["machine"]["type"]  # defaulted at admission
    table = _kubectl(crds, "get", "vmi", "-n", kube_namespace)
    assert table.stdout.split()[:6] == ["NAME", "AGE", "PHASE", "IP", "NODENAME", "READY"]
    short = _kubectl(crds, "get", "vmis,vm,vmim", "-n", kube_namespace, "-o", "name")
    assert short.returncode == 0, short.stderr


def _kept(given: Any, stored: Any) -> bool:
    """Every value in `given` is in `stored` (which may hold more keys: the defaults)."""
    if isinstance(given, dict):
        return isinstance(stored, dict) and all(
            k in stored and _kept(v, stored[k]) for k, v in given.items()
        )
    if isinstance(given, list):
        return (
            isinstance(stored, list)
            and len(given) == len(stored)
            and all(_kept(g, s) for g, s in zip(given, stored, strict=True))
        )
    return bool(given == stored)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        pytest.param(
            ("spec", "domain", "cpu", "cores"), "two", "spec.domain.cpu.cores", id="wrong-type"
        ),
        pytest.param(("spec", "startStrategy"), "Sideways", "spec.startStrategy", id="bad-enum"),
        pytest.param(("spec", "volumes"), "not-a-list", "spec.volumes", id="not-a-list"),
    ],
)
def test_invalid_objects_are_rejected(
    crds: Cluster, kube_namespace: str, path: tuple[str, ...], value: Any, message: str
) -> None:
    """The structural schema makes the API server reject ill-typed VMIs, naming the field."""
    vmi = copy.deepcopy(_vmi(kube_namespace))
    target = vmi
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    created = _kubectl(crds, "create", "-f", "-", stdin=yaml.safe_dump(vmi))
    assert created.returncode != 0
    assert message in created.stderr, created.stderr


def test_vm_with_unknown_run_strategy_is_rejected(crds: Cluster, kube_namespace: str) -> None:
    """runStrategy is a closed set on the server too."""
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "vm1", "namespace": kube_namespace},
        "spec": {"runStrategy": "Sometimes", "template": {"spec": _vmi(kube_namespace)["spec"]}},
    }
    created = _kubectl(crds, "create", "-f", "-", stdin=yaml.safe_dump(vm))
    assert created.returncode != 0
    assert "spec.runStrategy" in created.stderr, created.stderr
