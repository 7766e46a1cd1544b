"""Deploys kubevirt-py onto the local cluster the way an operator deploys it onto a real one:
certificates from scripts/gen-certs, then ``kubectl apply -k manifests/overlays/local``.

One local twist: kube-apiserver refuses loopback addresses in EndpointSlices, and local pods
have loopback IPs, so the virt-api Service (selector removed by the overlay) gets an
EndpointSlice with this host's own address, where the controllers serve the subresource API.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from localkube.errors import LocalKubeError

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "kubevirt"
SUBRESOURCE_PORT = 8444


@dataclass(frozen=True, slots=True)
class Kubectl:
    binary: Path
    kubeconfig: Path

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        argv = [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args]
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=180, check=False
        )
        if check and done.returncode != 0:
            raise LocalKubeError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout


def host_ip() -> str:
    """The first global IPv4 address of this host (what kube-apiserver can dial)."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in out.stdout.splitlines():
        return line.split()[3].split("/")[0]
    raise LocalKubeError("no global IPv4 address on this host for the virt-api endpoint")


def endpoint_slice(ip: str) -> dict[str, object]:
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
        "ports": [{"name": "https", "port": SUBRESOURCE_PORT, "protocol": "TCP"}],
    }


def deploy(kubectl: Kubectl, *, certs: Path, timeout: float = 180) -> None:
    kubectl("apply", "-f", str(REPO / "manifests" / "base" / "namespace.yaml"))
    gen = [sys.executable, str(REPO / "scripts" / "lib" / "kvcerts.py"), "--out", str(certs),
           "--apply", "--kubectl", str(kubectl.binary), "--kubeconfig", str(kubectl.kubeconfig),
           "--api-san", f"IP:{host_ip()}"]  # fmt: skip
    done = subprocess.run(gen, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise LocalKubeError(f"scripts/gen-certs failed: {done.stderr.strip()}")
    kubectl("apply", "-k", str(REPO / "manifests" / "overlays" / "local"))
    kubectl("apply", "-f", "-", stdin=json.dumps(endpoint_slice(host_ip())))
    # The APIService was (re)applied without a caBundle: patch it in again.
    bundle = base64.b64encode((certs / "ca" / "ca.crt").read_bytes()).decode()
    kubectl(
        "patch",
        "apiservice",
        "v1.subresources.kubevirt.io",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"caBundle": bundle}}),
    )
    wait_ready(kubectl, timeout=timeout)


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
                    raise LocalKubeError(f"not ready after {timeout:g}s: {exc}") from exc
                time.sleep(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubectl", type=Path, required=True)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--certs", type=Path, required=True)
    args = parser.parse_args()
    try:
        deploy(Kubectl(args.kubectl, args.kubeconfig), certs=args.certs)
    except LocalKubeError as exc:
        sys.exit(f"deploy failed: {exc}")
    print("kubevirt-py deployed: virt-controller x2, virt-handler per node, subresources API up")


if __name__ == "__main__":
    main()
