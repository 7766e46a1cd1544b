"""kubevirt-py's admission webhooks on the session's process-mode cluster, for every test.

    kubectl / KubeClient ─▶ kube-apiserver ─(webhook url, caBundle)─▶ AdmissionServer

In the product the controller replicas serve the webhooks behind the virt-api Service
(the e2e story and the real-node tests deploy exactly that). The process-mode suites run
their controllers as host processes, started and stopped per test, so here the product's
`AdmissionServer` runs for the whole session on a thread of the test process instead,
and the shipped MutatingWebhookConfiguration / ValidatingWebhookConfigurations
(manifests/base/admission) are registered under names of their own, each webhook
pointed at it by url: the host's non-loopback address, which the serving certificate
(made by scripts/gen-certs) names. Failure policies stay the manifests' (Fail, Ignore for
evictions), and the cluster default eviction strategy is the manifests' (LiveMigrate).

The kubevirt.io CRDs are installed first, and `start()` returns only once kube-apiserver
calls the webhooks (a VMI asking for a GPU is refused by the validator).
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

from localkube.cluster import Cluster
from shared.kube import ClientConfig, KubeClient, Registry
from shared.model import EvictionStrategy
from shared.model.unsupported import NOT_SUPPORTED
from tests.integration.loopthread import LoopThread
from tests.unit.virt_api.subresources.certs import gen_certs
from virt_api.admission.config import AdmissionConfig
from virt_api.admission.server import AdmissionServer
from virt_api.subresources.tls import CertDir

REPO = Path(__file__).resolve().parents[3]
ADMISSION = REPO / "manifests" / "base" / "admission"
CRDS = sorted((REPO / "manifests" / "base").glob("crd-*.yaml"))
SUFFIX = "-session"  # beside, never instead of, a deployed stack's configurations
PROBE_NAMESPACE = "kube-system"
PROBE = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {"name": "admission-probe"},
    "spec": {"domain": {"devices": {"gpus": [{"name": "g", "deviceName": "x"}]}}},
}


class AdmissionUnavailable(RuntimeError):
    """The webhooks could not be put in front of the session cluster (the reason)."""


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
        if ran.code != 0:
            raise AdmissionUnavailable(f"kubectl {' '.join(args)}: {ran.stderr}")
        return ran.stdout


def configurations(*, url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """The shipped webhook configurations, renamed for the session and pointed at `url`."""
    out = []
    for path in sorted(ADMISSION.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or not str(doc.get("kind", "")).endswith("WebhookConfiguration"):
                continue
            config = copy.deepcopy(doc)
            config["metadata"]["name"] = doc["metadata"]["name"] + SUFFIX
            for hook in config["webhooks"]:
                route = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"{url}{route}", "caBundle": ca_bundle}
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
            ClientConfig(kubeconfig=self._cluster.kubeconfig, user_agent="session-admission"),
            registry=Registry(),
        )
        async with client, asyncio.TaskGroup() as tg:
            server = AdmissionServer(
                self._config,
                client,
                Registry(),
                eviction_strategy=EvictionStrategy.LIVE_MIGRATE,
            )
            tg.create_task(server.run(stop), name="admission")
            await server.started.wait()
            self.port = server.bound_port
            self.ready()


def dry_run(kubectl: Kubectl, obj: dict[str, Any], namespace: str) -> Ran:
    """`kubectl create --dry-run=server -o json` of one object: admission runs in full,
    nothing is stored."""
    return kubectl(
        "create", "--dry-run=server", "-o", "json", "-n", namespace, "-f", "-",
        stdin=json.dumps(obj),
    )  # fmt: skip


class SessionAdmission:
    """CRDs, the webhook server and its registrations, for as long as the session runs."""

    def __init__(self, cluster: Cluster, *, pki_dir: Path, host: str) -> None:
        self._cluster = cluster
        self._kubectl = Kubectl(cluster)
        self._pki_dir = pki_dir
        self._host = host
        self._server: WebhookServer | None = None
        self._configs: list[dict[str, Any]] = []

    def start(self) -> None:
        self._install_crds()
        pki, bundle = gen_certs(self._pki_dir, "--api-san", f"IP:{self._host}")
        self._server = WebhookServer(cluster=self._cluster, serving=pki.api, host=self._host)
        try:
            self._server.start(timeout=60.0)
        except RuntimeError as e:
            raise AdmissionUnavailable(str(e)) from e
        url = f"https://{self._host}:{self._server.port}"
        self._configs = configurations(url=url, ca_bundle=bundle)
        for config in self._configs:
            self._kubectl.ok("apply", "-f", "-", stdin=json.dumps(config))
        self._wait_until_called()

    def stop(self) -> None:
        for config in self._configs:
            kind = config["kind"].lower()
            self._kubectl("delete", kind, config["metadata"]["name"], "--ignore-not-found")
        if self._server is not None:
            self._server.stop(timeout=30.0)

    def _install_crds(self) -> None:
        files = [arg for crd in CRDS for arg in ("-f", str(crd))]
        self._kubectl.ok("apply", *files)
        self._kubectl.ok("wait", "--for=condition=Established", "--timeout=60s", *files)

    def _wait_until_called(self) -> None:
        """kube-apiserver picks webhook configurations up asynchronously: wait until the
        probe is refused by ours (kubectl prints the refusal's causes)."""
        deadline = time.monotonic() + 60
        last = ""
        while time.monotonic() < deadline:
            ran = dry_run(self._kubectl, PROBE, PROBE_NAMESPACE)
            last = ran.stderr
            if ran.code != 0 and NOT_SUPPORTED in ran.stderr:
                return
            time.sleep(0.5)
        raise AdmissionUnavailable(f"the webhooks were never called; last answer: {last}")
