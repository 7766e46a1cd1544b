"""kubevirt-py's admission webhooks, served from this test process, registered with a
real kube-apiserver for objects carrying one label only.

    kubectl --dry-run=server ─▶ kube-apiserver ─(webhook url, caBundle)─▶ AdmissionServer

The shipped MutatingWebhookConfiguration / ValidatingWebhookConfiguration are registered
under names of their own, each webhook pointed at this process by url (the host's
non-loopback address, which the serving certificate names) and given an objectSelector
on `kubevirt-py.io/conformance: <run>`, so nothing else in the session's cluster is
admitted by them. The server runs on its own event loop in a thread, for a whole module.
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.admission.config import AdmissionConfig
from controller.admission.server import AdmissionServer
from controller.subresources.tls import CertDir
from localkube.cluster import Cluster
from shared.kube import ClientConfig, KubeClient, Registry
from shared.model.unsupported import NOT_SUPPORTED
from tests.integration.loopthread import LoopThread

REPO = Path(__file__).resolve().parents[3]
WEBHOOKS = REPO / "manifests" / "base" / "admission" / "webhooks.yaml"
LABEL = "kubevirt-py.io/conformance"


@dataclass(frozen=True, slots=True, kw_only=True)
class Ran:
    code: int
    stdout: str
    stderr: str


class Kubectl:
    """The session cluster's kubectl as the admin."""

    def __init__(self, cluster: Cluster) -> None:
        self._argv = [
            str(cluster.config.bin_dir / "kubectl"),
            "--kubeconfig",
            str(cluster.kubeconfig),
        ]

    def __call__(self, *args: str, stdin: str | None = None) -> Ran:
        done = subprocess.run(
            [*self._argv, *args], input=stdin, capture_output=True, text=True, timeout=120
        )
        return Ran(code=done.returncode, stdout=done.stdout, stderr=done.stderr)

    def ok(self, *args: str, stdin: str | None = None) -> str:
        ran = self(*args, stdin=stdin)
        assert ran.code == 0, f"kubectl {' '.join(args)}: {ran.stderr}"
        return ran.stdout


def configurations(*, run: str, url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """The shipped webhook configurations, renamed for this run, pointed at `url`, and
    limited to objects labelled for it."""
    out = []
    for doc in yaml.safe_load_all(WEBHOOKS.read_text()):
        config = copy.deepcopy(doc)
        config["metadata"]["name"] = f"{doc['metadata']['name']}-{run}"
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": ca_bundle}
            hook["objectSelector"] = {"matchLabels": {LABEL: run}}
        out.append(config)
    return out


class WebhookServer(LoopThread):
    """AdmissionServer on a thread; `start()` returns once it listens."""

    def __init__(self, *, cluster: Cluster, serving: Path, host: str) -> None:
        super().__init__(what="webhook server")
        self._cluster = cluster
        self._config = AdmissionConfig(serving=CertDir(serving), host=host, port=0)
        self.port: int | None = None

    async def serve(self, stop: asyncio.Event) -> None:
        client = await KubeClient.connect(
            ClientConfig(kubeconfig=self._cluster.kubeconfig), registry=Registry()
        )
        async with client, asyncio.TaskGroup() as tg:
            server = AdmissionServer(self._config, client, Registry())
            tg.create_task(server.run(stop), name="admission")
            await server.started.wait()
            self.port = server.bound_port
            self.ready()


def register(kubectl: Kubectl, configs: list[dict[str, Any]]) -> None:
    for config in configs:
        kubectl.ok("apply", "-f", "-", stdin=json.dumps(config))


def unregister(kubectl: Kubectl, configs: list[dict[str, Any]]) -> None:
    for config in configs:
        kind = config["kind"].lower()
        kubectl("delete", kind, config["metadata"]["name"], "--ignore-not-found")


def wait_until_called(kubectl: Kubectl, probe: dict[str, Any], namespace: str) -> None:
    """kube-apiserver picks webhook configurations up asynchronously: wait until a probe
    object is refused by ours (kubectl prints the refusal's causes, "* <path>: <why>")."""
    deadline = time.monotonic() + 60
    last = ""
    while time.monotonic() < deadline:
        ran = dry_run(kubectl, probe, namespace)
        last = ran.stderr
        if ran.code != 0 and NOT_SUPPORTED in ran.stderr:
            return
        time.sleep(0.5)
    raise AssertionError(f"the webhooks were never called; last answer: {last}")


def dry_run(kubectl: Kubectl, obj: dict[str, Any], namespace: str) -> Ran:
    """`kubectl create --dry-run=server -o json` of one object: admission runs in full,
    nothing is stored."""
    return kubectl(
        "create", "--dry-run=server", "-o", "json", "-n", namespace, "-f", "-",
        stdin=json.dumps(obj),
    )  # fmt: skip
