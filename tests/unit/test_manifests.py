"""Every kustomization builds, and the deployment keeps the contracts the daemons rely on."""

from __future__ import annotations

import copy
import functools
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared import podlayout
from tests.unit.shared.test_crd_drift import find_kubectl

REPO = Path(__file__).resolve().parents[2]
KUSTOMIZATIONS = [
    "manifests/base",
    "manifests/base/monitoring",
    "manifests/overlays/local-process",
    "manifests/overlays/local",
    "manifests/overlays/production",
]


def _build(path: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize` builds from `path` (a copy each test may change)."""
    return copy.deepcopy(_built(path))


@functools.cache
def _built(path: str) -> list[dict[str, Any]]:
    """Built and parsed once per session: 15 tests read 5 kustomizations (about 0.7 MB of
    YAML each, mostly CRDs), parsed with libyaml's loader when PyYAML has it."""
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.fail("no kubectl: ./scripts/test builds the version-matched one first")
    done = subprocess.run(
        [kubectl, "kustomize", str(REPO / path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [d for d in yaml.load_all(done.stdout, Loader=loader) if d]


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_kustomization_builds(path: str) -> None:
    """`kubectl kustomize` builds every base and overlay."""
    assert _build(path)


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_every_volume_mount_names_a_volume_of_its_pod(path: str) -> None:
    """Each container's (and init container's) volumeMounts name a volume its pod template
    has, in every base and overlay: an overlay that drops a volume drops its mounts too
    (the API server refuses the workload otherwise)."""
    for doc in _build(path):
        pod = (doc.get("spec") or {}).get("template", {}).get("spec")
        if not pod:
            continue
        volumes = {v["name"] for v in pod.get("volumes", [])}
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            missing = {m["name"] for m in c.get("volumeMounts", [])} - volumes
            assert not missing, f"{doc['kind']}/{doc['metadata']['name']} {c['name']}: {missing}"


def _workload(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.mark.parametrize(
    "path",
    [
        "manifests/overlays/local-process",
        "manifests/overlays/local",
        "manifests/overlays/production",
    ],
)
def test_daemons_have_what_they_need(path: str) -> None:
    """Two controller replicas with their own ServiceAccount; a privileged handler per node
    (the node's device nodes) with the kubelet pods dir, the notify dir and the kubelet
    device-plugins dir (on process-mode nodes: the node agent's own, through subPathExpr),
    on kubelet nodes the QEMU capability cache its unprivileged init container writes with
    the launcher image (the controller's) and the kubelet's seccomp dir (KubeVirt's launcher
    profile, handler/seccomp.py), and nothing else from the host: no host network
    or pid namespace."""
    docs = _build(path)
    controller = _workload(docs, "Deployment", "virt-controller")
    assert controller["spec"]["replicas"] == 2
    assert controller["spec"]["template"]["spec"]["serviceAccountName"] == "virt-controller"
    handler = _workload(docs, "DaemonSet", "virt-handler")["spec"]["template"]["spec"]
    assert handler["serviceAccountName"] == "virt-handler"
    host_paths = sorted(v["hostPath"]["path"] for v in handler["volumes"] if "hostPath" in v)
    local = path.endswith("local-process")
    pods_dir = "/var/lib/kvpy" if local else "/var/lib/kubelet/pods"
    plugins_dir = "/var/lib/kvpy" if local else "/var/lib/kubelet/device-plugins"
    # kubelet nodes: the QEMU capability seed, and the CSI publish paths that hotplugged
    # Block claims' volumeDevices entries link to
    seed = [] if local else [podlayout.QEMU_CAPABILITIES_SEED_DIR, "/var/lib/kubelet/plugins",
                             "/var/lib/kubelet/seccomp"]  # fmt: skip
    assert host_paths == sorted([pods_dir, "/var/run/kubevirt-py", plugins_dir, *seed])
    if not local:
        (init,) = handler["initContainers"]
        env = {e["name"]: e.get("value") for e in controller["spec"]["template"]["spec"][
            "containers"][0]["env"]}  # fmt: skip
        assert init["image"] == env["VIRT_CONTROLLER_LAUNCHER_IMAGE"]
        assert env["VIRT_CONTROLLER_NODE_CAPABILITIES_SEED"] == "true"
        assert not init.get("securityContext")  # as unprivileged as a launcher
    else:
        assert "initContainers" not in handler
    mounts = {m["name"]: m for m in handler["containers"][0]["volumeMounts"]}
    plugins = mounts["device-plugins"]
    assert plugins["mountPath"] == "/var/lib/kubelet/device-plugins"
    assert not plugins.get("readOnly")
    if local:
        assert plugins["subPathExpr"] == "$(NODE_NAME)/device-plugins"
    assert handler["containers"][0]["securityContext"]["privileged"] is True
    assert not handler.get("hostNetwork")
    assert handler["hostPID"] is True  # pod network setup enters launchers' namespaces


def _strip_local_differences(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects with image names, the two env values a local cluster sets, and the
    Prometheus Operator objects taken out (env in name order: a merge patch moves the entries it sets)."""
    kept = []
    for doc in copy.deepcopy(docs):
        if doc["kind"] in ("ServiceMonitor", "PrometheusRule"):
            continue
        pod = doc.get("spec", {}).get("template", {}).get("spec", {})
        for c in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            c.pop("image", None)
            for env in c.get("env", []):
                if env["name"] in (
                    "VIRT_CONTROLLER_USE_EMULATION",
                    "VIRT_CONTROLLER_LAUNCHER_IMAGE",
                ):
                    env.pop("value")
            c["env"] = sorted(c.get("env", []), key=lambda e: str(e["name"]))
        kept.append(doc)
    return kept


def test_real_node_overlay_is_production_but_images_and_tcg() -> None:
    """The overlay the local real nodes run is the production overlay's objects, differing
    only in image names, TCG instead of KVM, and no ServiceMonitor or PrometheusRule (no
    Prometheus Operator here)."""
    local = _build("manifests/overlays/local")
    production = _build("manifests/overlays/production")
    assert _strip_local_differences(local) == _strip_local_differences(production)
    assert not [d for d in local if d["apiVersion"].startswith("monitoring.coreos.com/")]
    images = {
        c["image"]
        for d in local
        for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    }
    assert images == {
        "registry.local/kubevirt-py/virt-controller:dev",
        "registry.local/kubevirt-py/virt-handler:dev",
    }


def test_no_secret_material_is_committed() -> None:
    """Certificates are generated by scripts/gen-certs, never committed."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert not [f for f in tracked.splitlines() if f.endswith((".key", ".crt", ".pem"))]
