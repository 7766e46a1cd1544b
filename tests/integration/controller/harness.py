"""Helpers for controller tests on the local cluster: the controller as a real subprocess,
objects in a few keywords, and reads through the product's own client facade.

The controller under test runs as `python -m controller`, scoped to the test's namespace
(`--namespace`, its Lease there too), with the `kubevirt-py/sleeper` stand-in launcher:
launcher pods are processes that sleep until SIGTERM, so phases stop at Scheduled unless a
test plays the handler by writing VMI status itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from localkube.cluster import Cluster
from localkube.config import REPO
from localkube.health import admin_ssl, log_tail
from localkube.testing import wait_for
from shared.kube import PODS, VMIMS, VMIS, KubeClient, NotFound, PatchType, Resource
from shared.labels import (
    APP_LABEL,
    CREATED_BY_LABEL,
    HEARTBEAT_ANNOTATION,
    LAUNCHER_APP,
    SCHEDULABLE_LABEL,
)
from shared.model import VirtualMachineInstance

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SLEEPER_IMAGE = "registry.local/kubevirt-py/sleeper:dev"
# The sleeper takes no launcher arguments: a shell drops them and execs it.
SLEEPER_COMMAND = "sh -c 'exec python -m localkube.sleeper' launcher"


def free_port() -> int:
    """A TCP port nobody listens on right now, on any address: a wildcard bind, since the
    kernel hands a bind(127.0.0.1:0) a port another socket holds on another address (the
    session's admission server on the cluster's 198.19.254.x), which the controller's
    0.0.0.0 listener then cannot take."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def kubectl(cluster: Cluster, *args: str, stdin: str | None = None) -> str:
    """Run kubectl as admin; AssertionError with its output when it fails."""
    proc = subprocess.run(
        ["kubectl", f"--kubeconfig={cluster.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr or proc.stdout}")
    return proc.stdout


def install_crd_files(cluster: Cluster) -> None:
    """Every CRD of manifests/base applied (one kubectl for all) and established."""
    crds = sorted((REPO / "manifests" / "base").glob("crd-*.yaml"))
    kubectl(cluster, "apply", *[arg for crd in crds for arg in ("-f", str(crd))])
    kubectl(cluster, "wait", "--for=condition=established", "--timeout=60s", "crd", "--all")


def install_kubevirt(cluster: Cluster) -> dict[str, str | None]:
    """CRDs from manifests/base (only them: not the daemons), established; every node
    labelled schedulable (no handler runs in these tests to do it). Returns the labels'
    previous values."""
    install_crd_files(cluster)
    before = {node: schedulable_label(cluster, node) for node in cluster.config.nodes}
    for node in cluster.config.nodes:
        set_schedulable(cluster, node, "true")
    return before


def without_handlers(cluster: Cluster) -> None:
    """No handler runs in these tests: every node schedulable again and without the
    heartbeat a suite that ran handlers on this session cluster left (the controller's
    node loop would find it stale and label the node unschedulable; a node that never
    heartbeated is never counted down)."""
    nodes = json.loads(kubectl(cluster, "get", "nodes", "-o", "json"))["items"]
    for node in nodes:
        meta = node["metadata"]
        if HEARTBEAT_ANNOTATION in (meta.get("annotations") or {}):
            kubectl(cluster, "annotate", "node", meta["name"], f"{HEARTBEAT_ANNOTATION}-")
        if (meta.get("labels") or {}).get(SCHEDULABLE_LABEL) != "true":
            set_schedulable(cluster, meta["name"], "true")


def schedulable_label(cluster: Cluster, node: str) -> str | None:
    """The node's kubevirt.io/schedulable label (None when absent)."""
    raw = json.loads(kubectl(cluster, "get", "node", node, "-o", "json"))
    value = (raw["metadata"].get("labels") or {}).get("kubevirt.io/schedulable")
    return str(value) if value is not None else None


def set_schedulable(cluster: Cluster, node: str, value: str | None) -> None:
    """Set (or with None remove) the node's kubevirt.io/schedulable label."""
    if value is None:
        kubectl(cluster, "label", "node", node, "kubevirt.io/schedulable-")
    else:
        kubectl(cluster, "label", "node", node, "--overwrite", f"kubevirt.io/schedulable={value}")


async def health_get(port: int, path: str, *, timeout: float = 10.0) -> tuple[int, str]:
    """GET on a daemon's local health endpoint; (0, error) when nothing answers."""
    try:
        async with (
            asyncio.timeout(timeout),
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}{path}") as resp,
        ):
            return resp.status, await resp.text()
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        return 0, str(e)


async def scrape_metric(port: int, name: str, labels: Mapping[str, str]) -> float:
    """Sum of a metric's series matching `labels` from the daemon's /metrics."""
    status, text = await health_get(port, "/metrics")
    assert status == 200, text
    return sum_series(text, name, labels)


@dataclass
class ControllerProcess:
    """One `python -m controller` subprocess with its log file and health port."""

    cluster: Cluster
    namespace: str
    log_path: Path
    extra: Sequence[str] = ()
    identity: str = "ctl-a"
    port: int = field(default_factory=free_port)
    proc: asyncio.subprocess.Process | None = None

    def argv(self) -> list[str]:
        return [
            sys.executable, "-m", "controller",
            "--kubeconfig", str(self.cluster.kubeconfig),
            "--namespace", self.namespace,
            "--leader-namespace", self.namespace,
            "--identity", self.identity,
            "--port", str(self.port),
            "--log-format", "json",
            "--launcher-image", SLEEPER_IMAGE,
            "--launcher-command", SLEEPER_COMMAND,
            "--notify-host-dir", str(self.log_path.parent / "notify"),
            "--lease-seconds", "6",
            # Process-mode nodes have no image volumes: the copy init containers.
            "--container-disk-delivery", "Copy",
            *self.extra,
        ]  # fmt: skip

    async def start(self) -> None:
        """Spawn and wait until /readyz answers (informers synced)."""
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with self.log_path.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv(), stdout=out, stderr=subprocess.STDOUT, env=env
            )
        await self.wait_ready()

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Poll /readyz; fail at once, with the log, if the process exits."""
        async with asyncio.timeout(timeout):
            while (await self.get("/readyz"))[0] != 200:
                if self.proc is not None and self.proc.returncode is not None:
                    raise AssertionError(
                        f"controller exited {self.proc.returncode}:\n{self.log_tail()}"
                    )
                await asyncio.sleep(0.2)

    async def get(self, path: str) -> tuple[int, str]:
        return await health_get(self.port, path)

    async def metric(self, name: str, **labels: str) -> float:
        return await scrape_metric(self.port, name, labels)

    async def is_leader(self) -> bool:
        """kubevirt_virt_controller_leading_status == 1."""
        with contextlib.suppress(AssertionError):
            return await self.metric("kubevirt_virt_controller_leading_status") == 1.0
        return False

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> int | None:
        """Signal and wait (SIGKILL after 20 s); the exit code."""
        if self.proc is None or self.proc.returncode is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            async with asyncio.timeout(20):
                return await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            return await self.proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)


def sum_series(text: str, name: str, labels: Mapping[str, str]) -> float:
    """Sum the samples of `name` whose labels include `labels` (Prometheus text format)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, rest = head.partition("{")
        if metric != name:
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += float(value)
    return total


async def apiserver_metrics(cluster: Cluster) -> str:
    """kube-apiserver's own /metrics (as admin)."""
    url = f"{cluster.ports.server}/metrics"
    async with (
        asyncio.timeout(30),
        aiohttp.ClientSession() as session,
        session.get(url, ssl=admin_ssl(cluster.pki)) as resp,
    ):
        assert resp.status == 200
        return await resp.text()


# ---- objects ----------------------------------------------------------------------------


def vmi_body(
    name: str,
    *,
    memory: str = "32Mi",
    cpu: str = "10m",
    node_selector: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    extra_spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A small valid VMI (never booted: the launcher is the sleeper). The CPU request is
    tiny so 200 launcher pods fit the local nodes (2 CPUs each)."""
    spec: dict[str, Any] = {
        "domain": {
            "memory": {"guest": memory},
            "resources": {"requests": {"cpu": cpu}},
            "devices": {},
        },
        "terminationGracePeriodSeconds": 0,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    spec.update(extra_spec or {})
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }


async def create_vmi(kube: KubeClient, ns: str, body: Mapping[str, Any]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(await kube.create(VMIS, body, namespace=ns))


async def get_vmi(kube: KubeClient, ns: str, name: str) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(await kube.get(VMIS, name, namespace=ns))


async def launcher_pods(
    kube: KubeClient, ns: str, vmi_uid: str | None = None
) -> list[dict[str, Any]]:
    """Launcher pods in `ns` (of one VMI when `vmi_uid` is given)."""
    selector = f"{APP_LABEL}={LAUNCHER_APP}"
    if vmi_uid:
        selector += f",{CREATED_BY_LABEL}={vmi_uid}"
    return (await kube.list_all(PODS, namespace=ns, label_selector=selector)).items


async def wait_phase(
    kube: KubeClient, ns: str, name: str, phase: str, *, timeout: float = 90
) -> VirtualMachineInstance:
    """Wait until the VMI reaches `phase`; the last seen status on timeout."""
    return await wait_for(
        lambda: get_vmi(kube, ns, name),
        lambda v: v.status.phase == phase,
        what=f"VMI {ns}/{name} in phase {phase}",
        timeout=timeout,
        show=lambda v: v.to_dict().get("status"),
    )


async def wait_gone(
    kube: KubeClient, resource: Resource, ns: str, name: str, *, timeout: float = 90
) -> None:
    """Wait until GET answers 404."""

    async def gone() -> bool:
        try:
            await kube.get(resource, name, namespace=ns)
        except NotFound:
            return True
        return False

    await wait_for(gone, bool, what=f"{resource.plural} {ns}/{name} deleted", timeout=timeout)


async def patch_status(
    kube: KubeClient, resource: Resource, ns: str, name: str, status: Mapping[str, Any]
) -> dict[str, Any]:
    """Merge-patch the status subresource (a test playing the handler or the kubelet)."""
    return await kube.patch(
        resource, name, {"status": dict(status)}, namespace=ns, subresource="status"
    )


async def patch_json(
    kube: KubeClient,
    resource: Resource,
    name: str,
    ops: list[dict[str, Any]],
    *,
    ns: str | None = None,
) -> dict[str, Any]:
    """A JSON patch (for removals a merge patch cannot express)."""
    return await kube.patch(resource, name, ops, namespace=ns, patch_type=PatchType.JSON)


async def release_finalizers(kube: KubeClient, ns: str) -> None:
    """Drop the controller's finalizers from every VMI and VMIM left in `ns`."""
    for resource in (VMIS, VMIMS):
        for obj in (await kube.list_all(resource, namespace=ns)).items:
            if obj["metadata"].get("finalizers"):
                patch = {"metadata": {"finalizers": None}}
                with contextlib.suppress(NotFound):
                    await kube.patch(resource, obj["metadata"]["name"], patch, namespace=ns)


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)[:4000]
