"""Node restriction (manifests/base/handler/node-restriction.yaml): a virt-handler's token,
bound to its pod on node01 as the kubelet's projected token is, may patch the VMI running
on node01 and node01's Node, and is refused (by the ValidatingAdmissionPolicy, naming its
node) for the VMI on node02 and for node02's Node."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.deploy import Kubectl
from tests.integration.realnodes.test_story import REPO, _wait

pytestmark = pytest.mark.cluster
NODES = ("node01", "node02")
MARK = '{"metadata":{"annotations":{"kubevirt.io/restriction-test":"touched"}}}'


def _tiny(name: str, node: str) -> dict[str, Any]:
    vmi: dict[str, Any] = copy.deepcopy(
        yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    )
    vmi["metadata"] = {"name": name}
    vmi["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return vmi


def _node_of(k: Kubectl, ns: str, name: str) -> str | None:
    vmi = json.loads(k("get", "vmi", name, "-n", ns, "-o", "json"))
    node: str | None = vmi.get("status", {}).get("nodeName")
    return node


def _on(k: Kubectl, ns: str, node: str) -> bool:
    return _node_of(k, ns, f"on-{node}") == node


def _handler_pod(k: Kubectl, node: str) -> dict[str, Any]:
    pods = json.loads(
        k("get", "pods", "-n", "kubevirt", "-l", "kubevirt.io=virt-handler", "-o", "json")
    )["items"]
    mine = [p for p in pods if p["spec"].get("nodeName") == node]
    assert mine, f"no virt-handler pod on {node}: {[p['metadata']['name'] for p in pods]}"
    return mine[0]  # type: ignore[no-any-return]


def _token_kubeconfig(k: Kubectl, pod: dict[str, Any], path: Path) -> Path:
    """A kubeconfig with the handler account's token bound to `pod` (TokenRequest)."""
    meta = pod["metadata"]
    token = k(
        "create", "token", "virt-handler", "-n", "kubevirt", "--duration=10m",
        "--bound-object-kind=Pod", f"--bound-object-name={meta['name']}",
        f"--bound-object-uid={meta['uid']}",
    ).strip()  # fmt: skip
    admin = yaml.safe_load(k.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "handler", "user": {"token": token}}],
                "contexts": [
                    {"name": "h", "context": {"cluster": cluster["name"], "user": "handler"}}
                ],
                "current-context": "h",
            }
        )
    )
    return path


def _patch(k: Kubectl, kubeconfig: Path, *target: str) -> subprocess.CompletedProcess[str]:
    args = [str(k.binary), "--kubeconfig", str(kubeconfig), "patch", *target]
    return subprocess.run(
        [*args, "--type=merge", "-p", MARK], capture_output=True, text=True, timeout=60
    )


def test_a_handler_token_changes_only_its_own_nodes_objects(
    real_stack: Kubectl, real_namespace: str, tmp_path: Path
) -> None:
    """With node01's handler token: the VMI on node01 and Node node01 are patched; the
    VMI on node02 and Node node02 are refused with the policy's message naming node01.
    The same token's identity is the handler's account (RBAC allows both patches)."""
    k, ns = real_stack, real_namespace
    for node in NODES:
        k("create", "-n", ns, "-f", "-", stdin=json.dumps(_tiny(f"on-{node}", node)))
    for node in NODES:
        _wait(functools.partial(_on, k, ns, node), 300, f"VMI on-{node} handed to {node}")
    kubeconfig = _token_kubeconfig(k, _handler_pod(k, "node01"), tmp_path / "h.kubeconfig")
    who = subprocess.run(
        [str(k.binary), "--kubeconfig", str(kubeconfig), "auth", "whoami", "-o", "json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert who.returncode == 0, who.stderr
    info = json.loads(who.stdout)["status"]["userInfo"]
    assert info["username"] == "system:serviceaccount:kubevirt:virt-handler"
    assert info["extra"]["authentication.kubernetes.io/node-name"] == ["node01"]

    own = _patch(k, kubeconfig, "vmi", "on-node01", "-n", ns)
    assert own.returncode == 0, own.stderr
    other = _patch(k, kubeconfig, "vmi", "on-node02", "-n", ns)
    assert other.returncode != 0
    assert "kubevirt-py-handler-node-restriction" in other.stderr, other.stderr
    assert "virt-handler of node node01 may not change VMI" in other.stderr, other.stderr

    assert _patch(k, kubeconfig, "node", "node01").returncode == 0
    refused = _patch(k, kubeconfig, "node", "node02")
    assert "may not change Node node02" in refused.stderr, refused.stderr
    hostile = subprocess.run(
        [str(k.binary), "--kubeconfig", str(kubeconfig), "label", "node", "node01", "evil=1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "only kubevirt.io labels and annotations" in hostile.stderr, hostile.stderr
