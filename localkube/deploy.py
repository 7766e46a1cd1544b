"""Deploys kubevirt-py onto the local cluster the way an operator deploys it onto a real one:
certificates from scripts/gen-certs, then ``kubectl apply -k`` of an overlay.

- Real nodes (kubelet + containerd): ``manifests/overlays/local``, the production
  overlay with local image names, TCG and no Prometheus Operator objects. Nothing else differs.
- Process-mode nodes: ``manifests/overlays/local-process``. There, kube-apiserver refuses loopback
  addresses in EndpointSlices, and those pods have loopback IPs, so the virt-api Service
  (selector removed by the overlay) gets an EndpointSlice with this host's own address,
  where the controllers serve the subresource API and the admission webhooks.
Either way the webhooks are registered by the overlay (failurePolicy Fail) and get the
kubevirt-py CA as caBundle right after it is applied, as the APIService does.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from localkube import hostaddr
from localkube.errors import LocalKubeError
from localkube.realnode.multus import MIGRATION_NAD
from shared.mignet import handler_networks
from shared.multus import NETWORKS_ANNOTATION

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "kubevirt"
LOCAL_OVERLAY = REPO / "manifests" / "overlays" / "local-process"
REAL_NODES_OVERLAY = REPO / "manifests" / "overlays" / "local"


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Where this cluster's node agents keep pods and device-plugin sockets, where handlers
    put notify sockets, and the subresource API's port. The defaults are the local
    overlay's; test clusters running beside a demo cluster on the same host use their own."""

    nodes_dir: Path = Path("/var/lib/kvpy")
    notify_root: Path = Path("/var/run/kubevirt-py")
    api_port: int = 8444
    # The admission webhooks' port; None: the one after api_port (8445 by default).
    admission_port: int | None = None

    @property
    def is_default(self) -> bool:
        default = Placement()
        same_ports = self.webhook_port == default.webhook_port
        return same_ports and dataclasses.replace(self, admission_port=None) == default

    @property
    def webhook_port(self) -> int:
        return self.admission_port if self.admission_port is not None else self.api_port + 1


def _overlay(place: Placement, base: str) -> dict[str, object]:
    """A kustomization over the local overlay that moves host paths and the API port."""
    notify = f"{place.notify_root}/nodes"
    container = "/spec/template/spec/containers/0"
    handler: list[tuple[str, str, object]] = [
        ("replace", f"{container}/args/1", f"--pods-dir={place.nodes_dir}/$(NODE_NAME)/pods"),
        ("add", f"{container}/args/-", f"--notify-socket={notify}/$(NODE_NAME)/domain-notify.sock"),
        ("replace", "/spec/template/spec/volumes/0/hostPath/path", str(place.nodes_dir)),
        ("replace", f"{container}/volumeMounts/0/mountPath", str(place.nodes_dir)),
        ("replace", "/spec/template/spec/volumes/1/hostPath/path", str(place.notify_root)),
        ("replace", f"{container}/volumeMounts/1/mountPath", str(place.notify_root)),
        ("replace", "/spec/template/spec/volumes/3/hostPath/path", str(place.nodes_dir)),
    ]
    env = {
        "NOTIFY_HOST_DIR": notify,
        "SUBRESOURCES_PORT": str(place.api_port),
        "ADMISSION_PORT": str(place.webhook_port),
    }
    controller: list[tuple[str, str, object]] = [
        ("add", f"{container}/env/-", {"name": f"VIRT_CONTROLLER_{k}", "value": v})
        for k, v in env.items()
    ]
    service: list[tuple[str, str, object]] = [
        ("replace", "/spec/ports/0/targetPort", place.api_port),
        ("replace", "/spec/ports/1/targetPort", place.webhook_port),
    ]

    def patch(kind: str, name: str, ops: list[tuple[str, str, object]]) -> dict[str, object]:
        body = [{"op": op, "path": path, "value": value} for op, path, value in ops]
        return {"target": {"kind": kind, "name": name}, "patch": json.dumps(body)}

    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [base],
        "patches": [
            patch("DaemonSet", "virt-handler", handler),
            patch("Deployment", "virt-controller", controller),
            patch("Service", "virt-api", service),
        ],
    }


def _apply_overlay(kubectl: Kubectl, place: Placement) -> None:
    if place.is_default:
        kubectl("apply", "-k", str(LOCAL_OVERLAY))
        return
    with tempfile.TemporaryDirectory(prefix="kvpy-overlay-") as tmp:
        overlay = _overlay(place, os.path.relpath(LOCAL_OVERLAY, tmp))
        Path(tmp, "kustomization.yaml").write_text(json.dumps(overlay))
        kubectl("apply", "-k", tmp)


@dataclass(frozen=True, slots=True)
class Kubectl:
    binary: Path
    kubeconfig: Path

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 180
    ) -> str:
        argv = [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args]
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise LocalKubeError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout


def endpoint_slice(ip: str, port: int, *, admission_port: int) -> dict[str, object]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "virt-api-local",
            "namespace": NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": "virt-api",
                "app.kubernetes.io/part-of": "kubevirt-py",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
        "ports": [
            {"name": "https", "port": port, "protocol": "TCP"},
            {"name": "admission", "port": admission_port, "protocol": "TCP"},
        ],
    }


def deploy(
    kubectl: Kubectl,
    *,
    certs: Path,
    place: Placement | None = None,
    real_nodes: bool = False,
    timeout: float = 180,
) -> None:
    """Certificates, the overlay (on process-mode nodes: adapted to ``place``, plus the
    virt-api endpoint); then wait until the daemons run and the subresource API is
    Available."""
    place = place or Placement()
    kubectl("apply", "-f", str(REPO / "manifests" / "base" / "namespace.yaml"))
    gen = [sys.executable, str(REPO / "scripts" / "lib" / "kvcerts.py"), "--out", str(certs),
           "--apply", "--kubectl", str(kubectl.binary),
           "--kubeconfig", str(kubectl.kubeconfig)]  # fmt: skip
    # Process mode: virt-api runs on the host, at the cluster's own address (hostaddr.py).
    host = "" if real_nodes else hostaddr.host_address(kubectl.kubeconfig.parent)
    if host:
        gen += ["--api-san", f"IP:{host}"]
    done = subprocess.run(gen, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise LocalKubeError(f"scripts/gen-certs failed: {done.stderr.strip()}")
    network = _migration_network(kubectl) if real_nodes else None
    if real_nodes:
        _apply_real_nodes(kubectl, network)
    else:
        _apply_overlay(kubectl, place)
        slice_ = endpoint_slice(host, place.api_port, admission_port=place.webhook_port)
        kubectl("apply", "-f", "-", stdin=json.dumps(slice_))
    # The APIService was (re)applied without a caBundle: patch it in again.
    bundle = base64.b64encode((certs / "ca" / "ca.crt").read_bytes()).decode()
    for apiservice in APISERVICES:
        patch = json.dumps({"spec": {"caBundle": bundle}})
        kubectl("patch", "apiservice", apiservice, "--type=merge", "-p", patch)
    patch_webhooks(kubectl, bundle)
    wait_ready(kubectl, timeout=timeout)
    apply_kubevirt_cr(kubectl, migration_network=network)


# The aggregated APIs virt-api serves (manifests/base/subresources/apiservice*.yaml).
APISERVICES = ("v1.subresources.kubevirt.io", "v1beta1.upload.cdi.kubevirt.io")
KUBEVIRT_CR = REPO / "manifests" / "kubevirt-cr.yaml"


def apply_kubevirt_cr(kubectl: Kubectl, *, migration_network: str | None = None) -> None:
    """The cluster's KubeVirt CR, once its CRD is established and admission serves; with
    the test bed's migration network when it has one."""
    kubectl("wait", "crd/kubevirts.kubevirt.io", "--for=condition=Established", "--timeout=60s")
    kubectl("apply", "-f", str(KUBEVIRT_CR))
    if migration_network is not None:
        patch = {"spec": {"configuration": {"migrations": {"network": migration_network}}}}
        kubectl("patch", "kv", "kubevirt", "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch))


def _migration_network(kubectl: Kubectl) -> str | None:
    """The test bed's migration network (localkube/realnode/multus.py), when it has one."""
    found = kubectl(
        "get", "-n", NAMESPACE, f"network-attachment-definitions.k8s.cni.cncf.io/{MIGRATION_NAD}",
        "-o", "name", check=False,
    )  # fmt: skip
    return MIGRATION_NAD if found.strip() else None


def _apply_real_nodes(kubectl: Kubectl, network: str | None) -> None:
    """The real-node overlay; with a migration network, the handler DaemonSet's pods
    carry it from the start (as virt-operator renders it for a CR that names one, so the
    controller finds nothing to roll)."""
    if network is None:
        kubectl("apply", "-k", str(REAL_NODES_OVERLAY))
        return
    annotations = {NETWORKS_ANNOTATION: handler_networks(network, namespace=NAMESPACE)}
    op = {"op": "add", "path": "/spec/template/metadata/annotations", "value": annotations}
    with tempfile.TemporaryDirectory(prefix="kvpy-overlay-") as tmp:
        overlay = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [os.path.relpath(REAL_NODES_OVERLAY, tmp)],
            "patches": [
                {"target": {"kind": "DaemonSet", "name": "virt-handler"}, "patch": json.dumps([op])}
            ],
        }
        Path(tmp, "kustomization.yaml").write_text(json.dumps(overlay))
        kubectl("apply", "-k", tmp)


WEBHOOK_CONFIGURATIONS = (
    ("mutatingwebhookconfiguration", "virt-api-mutator"),
    ("validatingwebhookconfiguration", "virt-api-validator"),
    ("validatingwebhookconfiguration", "virt-launcher-eviction-interceptor"),
)


def patch_webhooks(kubectl: Kubectl, bundle: str) -> None:
    """The admission webhooks were (re)applied without a caBundle: set it on each."""
    for resource, name in WEBHOOK_CONFIGURATIONS:
        config = json.loads(kubectl("get", resource, name, "-o", "json"))
        ops = [
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
            for i in range(len(config.get("webhooks") or []))
        ]
        kubectl("patch", resource, name, "--type=json", "-p", json.dumps(ops))


def wait_ready(kubectl: Kubectl, *, timeout: float) -> None:
    """Until the controllers and handlers run and the subresource API is Available."""
    deadline = time.monotonic() + timeout
    checks = [
        ("rollout", "status", "-n", NAMESPACE, "deployment/virt-controller", "--timeout=5s"),
        ("rollout", "status", "-n", NAMESPACE, "daemonset/virt-handler", "--timeout=5s"),
        (
            "wait",
            "--for=condition=Available",
            "apiservice/v1.subresources.kubevirt.io",
            "--timeout=5s",
        ),
    ]
    for check in checks:
        while True:
            try:
                kubectl(*check)
                break
            except LocalKubeError as exc:
                if time.monotonic() > deadline:
                    why = _apiservice_reason(kubectl)
                    raise LocalKubeError(f"not ready after {timeout:g}s: {exc}; {why}") from exc
                time.sleep(2)


def _apiservice_reason(kubectl: Kubectl) -> str:
    """The aggregator's own words on why virt-api's APIService is not Available."""
    out = kubectl(
        "get", "apiservice", APISERVICES[0], "-o",
        "jsonpath={.status.conditions[?(@.type=='Available')].message}", check=False,
    )  # fmt: skip
    return f"APIService {APISERVICES[0]}: {out.strip() or 'no Available condition'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubectl", type=Path, required=True)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--certs", type=Path, required=True)
    args = parser.parse_args()
    kind_file = args.kubeconfig.parent / "node-kind"  # written by the cluster's `up`
    real = kind_file.exists() and kind_file.read_text().strip() == "kubelet"
    try:
        deploy(Kubectl(args.kubectl, args.kubeconfig), certs=args.certs, real_nodes=real)
    except LocalKubeError as exc:
        sys.exit(f"deploy failed: {exc}")
    print("kubevirt-py deployed: virt-controller x2, virt-handler per node, subresources API up")


if __name__ == "__main__":
    main()
