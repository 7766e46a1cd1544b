"""The user's story on process-mode nodes (deployed from manifests/overlays/local-process):
the demo VM driven with virtctl-py through pause/unpause, a live migration (the guest keeps
ticking on the other node), stop and start, scraped for metrics, and refused for a user
without RBAC rights. The same story runs on real kubelet nodes in
tests/integration/realnodes/ (test_story.py, test_migration.py)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl, Placement, deploy
from tests.integration.scrape import metrics_text

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def stack(kube_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    """kubevirt-py deployed as an operator would (certs, the local overlay), placed so it
    cannot meet a demo cluster on the same host."""
    kubectl = Kubectl(kube_cluster.config.bin_dir / "kubectl", kube_cluster.kubeconfig)
    place = Placement(
        nodes_dir=kube_cluster.config.nodes_dir,
        notify_root=Path(f"/run/kvpy-e{os.getpid()}"),
        api_port=_free_port(),
        admission_port=_free_port(),
    )
    # Earlier tests' namespaces finish terminating first: a cluster-wide controller would
    # otherwise meet their leftover VMIs and be refused (403, NamespaceLifecycle) whatever
    # its RBAC, which the RBAC check below counts.
    _wait(
        lambda: not _terminating(kubectl),
        180,
        "earlier namespaces gone",
        lambda: _terminating(kubectl),
    )
    deploy(kubectl, certs=tmp_path_factory.mktemp("certs"), place=place, timeout=240)
    yield kubectl
    kubectl("delete", "vm", "--all", "-A", "--wait=false", check=False)
    _wait(
        lambda: not json.loads(kubectl("get", "vmi", "-A", "-o", "json"))["items"], 90, "VMIs gone"
    )
    kubectl(
        "delete",
        "-k",
        str(REPO / "manifests" / "overlays" / "local-process"),
        "--wait=false",
        check=False,
    )


def _terminating(kubectl: Kubectl) -> list[str]:
    namespaces = json.loads(kubectl("get", "namespaces", "-o", "json"))["items"]
    return [n["metadata"]["name"] for n in namespaces if n["status"].get("phase") == "Terminating"]


def _wait(
    probe: Callable[[], Any], timeout: float, what: str, show: Callable[[], Any] | None = None
) -> Any:
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        seen = probe()
        if seen:
            return seen
        time.sleep(1)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what}; last: {show() if show else seen!r}"
    )


def _virtctl(kubeconfig: Path, ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "virtctl_py", "--kubeconfig", str(kubeconfig), "-n", ns, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=REPO)


def _vmi(kubectl: Kubectl, ns: str) -> dict[str, Any]:
    out = kubectl("get", "vmi", "demo", "-n", ns, "-o", "json", check=False)
    return json.loads(out) if out else {}


def _pod_ip_shown(kubectl: Kubectl, ns: str, vmi: dict[str, Any]) -> bool:
    """`kubectl get vmi` shows the VMI's active launcher pod's IP (KubeVirt's IP column)."""
    (uid,) = [u for u, n in vmi["status"]["activePods"].items() if n == vmi["status"]["nodeName"]]
    pods = json.loads(kubectl("get", "pods", "-n", ns, "-o", "json"))["items"]
    ip = next(p["status"].get("podIP") for p in pods if p["metadata"]["uid"] == uid)
    shown = kubectl("get", "vmi", vmi["metadata"]["name"], "-n", ns, "--no-headers")
    return bool(ip) and vmi["status"]["interfaces"][0].get("ipAddress") == ip and ip in shown


def _serial(cluster: Cluster, vmi: dict[str, Any]) -> str:
    node = vmi["status"]["nodeName"]
    uids = [u for u, n in vmi["status"].get("activePods", {}).items() if n == node]
    if len(uids) != 1:
        return ""
    uid = uids[0]
    log = Path(
        cluster.config.nodes_dir, node, "pods", uid, "volumes", "kubernetes.io~empty-dir",
        "private", "libvirt", "log", "kvpy", "serial.log",
    )  # fmt: skip
    return log.read_text(errors="replace") if log.exists() else ""


def _serial_after_move(cluster: Cluster, fresh: Callable[[], dict[str, Any]]) -> bool:
    """The target launcher's console (a fresh serial log) keeps printing ticks."""

    def ticking() -> bool:
        return _serial(cluster, fresh()).count("KUBEVIRT-PY-TICK") >= 2

    return bool(_wait(ticking, 60, "ticks on the target", lambda: _serial(cluster, fresh())[-300:]))


def _condition(vmi: dict[str, Any], kind: str) -> str:
    return next(
        (c["status"] for c in vmi.get("status", {}).get("conditions", []) if c["type"] == kind), ""
    )


def test_demo_vm_story(stack: Kubectl, kube_cluster: Cluster, kube_namespace: str) -> None:
    """The demo VM comes up from the manifests and shows its console; virtctl-py pauses,
    unpauses, migrates (the guest keeps ticking on the other node), stops and starts it; the
    handler's /metrics has its kubevirt_vmi_* series; every call the daemons made is allowed
    by the deployed RBAC."""
    ns, kubeconfig = kube_namespace, kube_cluster.kubeconfig
    vm = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"]["namespace"] = ns
    stack("apply", "-f", "-", stdin=json.dumps(vm))
    vmi = _wait(lambda: (v := _vmi(stack, ns)).get("status", {}).get("phase") == "Running" and v,
                240, "demo VMI Running", lambda: _vmi(stack, ns).get("status"))  # fmt: skip
    serial = _wait(lambda: "KUBEVIRT-PY-USERDATA-END" in (t := _serial(kube_cluster, vmi)) and t,
                   120, "console output", lambda: _serial(kube_cluster, vmi)[-500:])  # fmt: skip
    assert "KUBEVIRT-PY-GUEST-BOOTED" in serial and "hello: from-kubevirt-py" in serial
    assert _pod_ip_shown(stack, ns, _vmi(stack, ns))

    paused = _virtctl(kubeconfig, ns, "pause", "vm", "demo")
    assert paused.returncode == 0, paused.stderr
    _wait(lambda: _condition(_vmi(stack, ns), "Paused") == "True", 60, "Paused condition")
    unpaused = _virtctl(kubeconfig, ns, "unpause", "vm", "demo")
    assert unpaused.returncode == 0, unpaused.stderr
    _wait(lambda: _condition(_vmi(stack, ns), "Paused") != "True", 60, "Paused cleared")

    _assert_metrics(stack, vmi)

    source = vmi["status"]["nodeName"]
    migrated = _virtctl(kubeconfig, ns, "migrate", "demo", "--wait", "--timeout", "240")
    assert migrated.returncode == 0, migrated.stderr
    moved = _vmi(stack, ns)
    assert moved["status"]["nodeName"] != source
    assert _serial_after_move(kube_cluster, lambda: _vmi(stack, ns))
    _wait(lambda: _pod_ip_shown(stack, ns, _vmi(stack, ns)), 60, "the target pod's IP shown")

    stopped = _virtctl(kubeconfig, ns, "stop", "demo", "--wait", "--timeout", "180")
    assert stopped.returncode == 0, stopped.stderr
    started = _virtctl(kubeconfig, ns, "start", "demo", "--wait", "--timeout", "240")
    assert started.returncode == 0, started.stderr
    assert _vmi(stack, ns)["metadata"]["uid"] != vmi["metadata"]["uid"]
    _assert_rbac_covers_calls(stack, ns)


def _calls(text: str) -> set[tuple[str, str, str]]:
    """(verb, resource[/subresource].group, url) of every API call a daemon made, from its
    kubevirt_rest_client_request_latency_seconds series."""
    found = set()
    for line in text.splitlines():
        if not line.startswith("kubevirt_rest_client_request_latency_seconds_count{"):
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line))
        verb, url = labels["verb"], labels["url"]
        parts = [p for p in url.split("/") if p]
        group = "" if parts[0] == "api" else parts[1]
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        if rest[:1] == ["namespaces"] and len(rest) > 2:
            rest = rest[2:]
        resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
        found.add((verb, f"{resource}.{group}" if group else resource, url))
    return found


def _assert_rbac_covers_calls(kubectl: Kubectl, ns: str) -> None:
    """Every call each daemon actually made is allowed to its ServiceAccount by the deployed
    RBAC (kubectl auth can-i, i.e. a SubjectAccessReview), and none was refused."""
    for component, account in (
        ("virt-controller", "virt-controller"),
        ("virt-handler", "virt-handler"),
    ):
        pods = json.loads(
            kubectl("get", "pods", "-n", "kubevirt", "-l", f"kubevirt.io={component}", "-o", "json")
        )
        calls: set[tuple[str, str, str]] = set()
        for pod in pods["items"]:
            text = metrics_text(pod["status"]["podIP"])
            # An Event written into a namespace that is being deleted (an earlier test's)
            # is refused with 403 by the API server's NamespaceLifecycle whatever the RBAC;
            # the can-i check below still covers the right to create events.
            refused = [
                line
                for line in text.splitlines()
                if 'code="403"' in line and 'resource="events"' not in line
            ]
            assert not refused, f"{pod['metadata']['name']} was refused: {refused}"
            calls |= _calls(text)
        assert calls, f"no API calls recorded by {component}"
        user = f"system:serviceaccount:kubevirt:{account}"
        for verb, resource, url in sorted(calls):
            home = {"leases.coordination.k8s.io": "kubevirt", "configmaps": "kube-system",
                    "daemonsets.apps": "kubevirt"}  # fmt: skip
            where = ["-n", home.get(resource, ns)] if "{namespace}" in url else []
            # The front proxy's ConfigMap and the handler's DaemonSet (the migration network)
            # are reachable by name only (resourceNames rules).
            named = {"configmaps": "configmaps/extension-apiserver-authentication",
                     "daemonsets.apps": "daemonsets.apps/virt-handler"}  # fmt: skip
            what = named.get(resource, resource)
            # A subresource (kubevirts/status.kubevirt.io) is asked as one: `can-i` reads
            # "a/b" as resource a, object b.
            base, slash, rest = what.partition("/")
            if slash and "." in rest and resource not in named:
                sub, _, group = rest.partition(".")
                what, where = f"{base}.{group}", [*where, f"--subresource={sub}"]
            if what.endswith(".subresources.kubevirt.io"):  # served by virt-api only
                allowed = _review(kubectl, user, verb, what, where)
            else:
                allowed = kubectl("auth", "can-i", verb, what, "--as", user, *where, check=False)
            allowed = allowed.strip()
            assert allowed == "yes", f"{component} calls {verb} {url} but its RBAC says {allowed!r}"


def _review(kubectl: Kubectl, user: str, verb: str, what: str, where: list[str]) -> str:
    """A SubjectAccessReview asked directly: `kubectl auth can-i` cannot map a resource of
    an aggregated group that lists only subresources (it would ask for group "")."""
    resource, _, group = what.partition(".")
    sub = next((w.split("=", 1)[1] for w in where if w.startswith("--subresource=")), "")
    namespace = where[where.index("-n") + 1] if "-n" in where else ""
    attributes = {
        "verb": verb,
        "group": group,
        "resource": resource,
        "subresource": sub,
        "namespace": namespace,
    }
    account = user.rsplit(":", 2)[1]  # system:serviceaccount:<namespace>:<name>
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{account}", "system:authenticated"]
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
    }
    out = kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(review))
    return "yes" if json.loads(out).get("status", {}).get("allowed") else "no"


def _assert_metrics(kubectl: Kubectl, vmi: dict[str, Any]) -> None:
    node = vmi["status"]["nodeName"]
    pods = json.loads(
        kubectl("get", "pods", "-n", "kubevirt", "-l", "kubevirt.io=virt-handler", "-o", "json")
    )
    (pod,) = [p for p in pods["items"] if p["spec"].get("nodeName") == node]
    address = pod["status"]["podIP"]

    def scrape() -> str:
        text = metrics_text(address)
        return (
            text
            if "kubevirt_vmi_cpu_usage_seconds_total{" in text and 'name="demo"' in text
            else ""
        )

    text = _wait(scrape, 60, f"kubevirt_vmi_* series at {address}:8443/metrics")
    assert "kubevirt_vmi_memory_resident_bytes" in text


def test_user_without_rights_is_refused(
    stack: Kubectl, kube_cluster: Cluster, kube_namespace: str, tmp_path: Path
) -> None:
    """A ServiceAccount with no RoleBinding is refused by virtctl-py with a clear message
    and the 'forbidden' exit code."""
    ns = kube_namespace
    stack("create", "serviceaccount", "nobody", "-n", ns)
    token = stack("create", "token", "nobody", "-n", ns).strip()
    admin = yaml.safe_load(kube_cluster.kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "nobody", "user": {"token": token}}],
        "contexts": [
            {
                "name": "nobody",
                "context": {
                    "cluster": admin["clusters"][0]["name"],
                    "user": "nobody",
                    "namespace": ns,
                },
            }
        ],
        "current-context": "nobody",
    }
    path = tmp_path / "nobody.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    refused = _virtctl(path, ns, "pause", "vmi", "demo")
    assert refused.returncode == 4, refused.stderr
    assert "not allowed to pause vmi" in refused.stderr and "kubevirt.io:edit" in refused.stderr
