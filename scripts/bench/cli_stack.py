"""bench-cli's own kubevirt-py API on a process-mode cluster: KubeVirt's subresource API
(virt_api's SubresourceServer) and the handler's actions endpoint served from the bench's
process (tests/integration/subresources/stack.py: the APIService, Service and roles as
shipped, reached through kube-apiserver's aggregator), a launcher stand-in that records
commands and answers the guest agent's queries. The CLI's requests take the path they take
on a deployed cluster (kubectl's credentials → kube-apiserver → aggregator → virt-api →
SubjectAccessReview → mTLS → the handler's endpoint); only the guest is not there.

Objects for the verbs: VMI `vm1` Running (the stack's) and its VM (runStrategy Always),
VM `vm-halted` (Halted, for start), claim `bench-claim` (for addvolume / removevolume), VM
`vm-creds` (Halted) with a guest-agent ssh key and password credential whose Secrets it owns
(for credentials add-ssh-key / remove-ssh-key / set-password).
"""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from localkube.cluster import Cluster
from tests.integration.subresources.stack import RUNNING_VMI, Stack, StackConfig
from tests.unit.virt_api.subresources.certs import gen_certs

REPO = Path(__file__).resolve().parents[2]
HALTED_VM = "vm-halted"
CLAIM = "bench-claim"
CREDS_VM = "vm-creds"
KEYS_SECRET, PASSWORD_SECRET = "vm-creds-keys", "vm-creds-password"


@dataclass(frozen=True, slots=True, kw_only=True)
class Objects:
    """Where the verbs point: the namespace, a running VM(I), a halted VM, a claim, a VM
    with guest-agent access credentials."""

    namespace: str
    running: str
    halted: str | None
    claim: str | None
    creds: str | None = None


def _vm(name: str, namespace: str, strategy: str) -> dict[str, Any]:
    vmi = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runStrategy": strategy, "template": {"spec": copy.deepcopy(vmi["spec"])}},
    }


def _creds_vm(namespace: str) -> dict[str, Any]:
    """A halted VM whose ssh key (for root) and password reach the guest via its agent."""
    vm = _vm(CREDS_VM, namespace, "Halted")
    agent: dict[str, Any] = {"qemuGuestAgent": {}}
    vm["spec"]["template"]["spec"]["accessCredentials"] = [
        {"sshPublicKey": {"source": {"secret": {"secretName": KEYS_SECRET}},
                          "propagationMethod": {"qemuGuestAgent": {"users": ["root"]}}}},
        {"userPassword": {"source": {"secret": {"secretName": PASSWORD_SECRET}},
                          "propagationMethod": agent}},
    ]  # fmt: skip
    return vm


def _owned_secret(namespace: str, name: str, owner_uid: str) -> dict[str, Any]:
    """An empty Secret the creds VM owns (the credentials verbs edit only such Secrets)."""
    owner = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": CREDS_VM,
             "uid": owner_uid}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]}}  # fmt: skip


def _claim(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": CLAIM, "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}},
    }


def _kubectl(cluster: Cluster, *args: str, stdin: str | None = None) -> int:
    return _run_kubectl(cluster, *args, stdin=stdin).returncode


def _run_kubectl(
    cluster: Cluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    kubectl = cluster.config.bin_dir / "kubectl"
    return subprocess.run(
        [str(kubectl), "--kubeconfig", str(cluster.kubeconfig), *args],
        input=stdin, text=True, capture_output=True, timeout=60, check=False,
    )  # fmt: skip


def _apply(cluster: Cluster, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        if _kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(doc)) != 0:
            raise RuntimeError(f"cannot apply {doc['kind']} {doc['metadata']['name']}")


def _until_served(cluster: Cluster, namespace: str, kinds: tuple[str, ...]) -> None:
    """Each kind lists (a CRD's storage is up a moment after it is Established)."""
    deadline = time.monotonic() + 60
    while any(_kubectl(cluster, "get", kind, "-n", namespace) != 0 for kind in kinds):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{kinds} not served after 60 s")
        time.sleep(0.5)


@contextlib.contextmanager
def served(cluster: Cluster) -> Iterator[Objects]:
    """The stack up and Available, its objects created; everything removed afterwards."""
    suffix = uuid.uuid4().hex[:6]
    namespace = f"kvpy-bench-cli-{suffix}"
    work = Path(tempfile.mkdtemp(prefix="kvbc-"))  # short: holds Unix sockets
    ip = cluster.host_address
    pki, _ = gen_certs(work / "pki", "--namespace", namespace, "--api-san", f"IP:{ip}")
    stack = Stack(
        StackConfig(
            cluster=cluster, pki=pki, namespace=namespace, node=f"kvpy-bench-cli-{suffix}",
            host_ip=ip, workdir=work,
        )
    )  # fmt: skip
    try:
        stack.start(timeout=180.0)
        _until_served(cluster, namespace, ("virtualmachines", "virtualmachineinstancemigrations"))
        _apply(
            cluster,
            [
                _vm(RUNNING_VMI, namespace, "Always"),
                _vm(HALTED_VM, namespace, "Halted"),
                _claim(namespace),
                _creds_vm(namespace),
            ],
        )
        got = _run_kubectl(cluster, "get", "vm", CREDS_VM, "-n", namespace, "-o", "json")
        uid = json.loads(got.stdout)["metadata"]["uid"]
        _apply(cluster, [_owned_secret(namespace, n, uid) for n in (KEYS_SECRET, PASSWORD_SECRET)])
        yield Objects(
            namespace=namespace, running=RUNNING_VMI, halted=HALTED_VM, claim=CLAIM, creds=CREDS_VM
        )
    finally:
        stack.stop(timeout=60.0)
        shutil.rmtree(work, ignore_errors=True)
