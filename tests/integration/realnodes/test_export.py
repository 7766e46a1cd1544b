"""VirtualMachineExport on real nodes: a csi-local claim holding known bytes is exported, its
exporter pod (virt-exportserver-py) serves it over HTTPS behind the token, virtctl-py downloads
it raw and gzip through a port-forward and KubeVirt's own virtctl downloads a stopped VM's
export of it (`--vm --port-forward`); every download's bytes equal the claim's. A wrong token
is answered 401; a VirtualMachineSnapshot of that VM exported serves a claim restored from
it, equal too; admission refuses a bad source kind and ttlDuration naming the fields; a
ttlDuration that has passed ends the export Terminated with its exporter pod deleted."""

from __future__ import annotations

import gzip
import hashlib
import json
import select
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from localkube.deploy import Kubectl
from tests.integration.realnodes.test_csi import _apply, _bound, _claim, _get, _run
from tests.integration.realnodes.test_story import _virtctl, _wait
from tests.integration.realnodes.test_upstream_virtctl import _upstream
from tests.integration.subresources.test_upstream_virtctl import upstream_virtctl

pytestmark = pytest.mark.cluster
__all__ = ["upstream_virtctl"]
MI = 1 << 20
SIZE = 3 * MI
WRITE = """
import hashlib, os, random, sys
data = random.Random(20261127).randbytes(int(sys.argv[1]))
with open("/data/disk.img", "wb") as f:
    f.write(data)
os.chmod("/data/disk.img", 0o644)
print(hashlib.sha256(data).hexdigest())
"""


def _virtctl_py(kubeconfig: Path, ns: str, *args: str) -> str:
    done = _virtctl(kubeconfig, ns, *args)
    assert done.returncode == 0, f"virtctl-py {' '.join(args)}: {done.returncode} {done.stderr}"
    return done.stdout


def _refusal(k: Kubectl, ns: str, obj: dict[str, Any]) -> str:
    """kubectl apply of `obj`, which must fail; what it printed."""
    argv = [str(k.binary), "--kubeconfig", str(k.kubeconfig), "apply", "-n", ns, "-f", "-"]
    done = subprocess.run(argv, input=json.dumps(obj), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode != 0, f"admitted: {done.stdout}"
    return done.stderr


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _vmexport(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    return _get(k, ns, "vmexport", name)


def _ready(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = _wait(
        lambda: (e := _vmexport(k, ns, name)).get("status", {}).get("phase") == "Ready" and e,
        120, f"export {name} Ready", lambda: _vmexport(k, ns, name).get("status"),
    )  # fmt: skip
    return found


def _vm(claim: str) -> dict[str, Any]:
    """A stopped VM whose one disk is the claim (it never runs here)."""
    return {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "exp-vm"},
        "spec": {"runStrategy": "Halted", "template": {"spec": {
            "domain": {"devices": {"disks": [{"name": "data", "disk": {"bus": "virtio"}}]},
                       "resources": {"requests": {"memory": "64Mi"}}},
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        }}},
    }  # fmt: skip


def _get_with_token(k: Kubectl, ns: str, vme: dict[str, Any], token: str) -> int:
    """GET the raw link through `kubectl port-forward` with `token`; the HTTP status."""
    link = vme["status"]["links"]["internal"]
    url = link["volumes"][0]["formats"][0]["url"]
    pod = f"virt-export-{vme['metadata']['name']}"
    argv = [str(k.binary), "--kubeconfig", str(k.kubeconfig), "-n", ns, "port-forward",
            f"pod/{pod}", ":8443"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "kubectl port-forward printed nothing in 30s"
        line = proc.stdout.readline().decode()  # Forwarding from 127.0.0.1:PORT -> 8443
        port = int(line.split("127.0.0.1:")[1].split()[0])
        tls = ssl.create_default_context(cadata=link["cert"])
        tls.check_hostname = False  # 127.0.0.1; the chain is still checked against the CA
        local = url.replace(url.split("/")[2], f"127.0.0.1:{port}")
        request = urllib.request.Request(local, headers={"x-kubevirt-export-token": token})
        try:
            with urllib.request.urlopen(request, context=tls, timeout=30) as resp:
                resp.read()
                return int(resp.status)
        except urllib.error.HTTPError as e:
            return int(e.code)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _snapshot_export(k: Kubectl, ns: str, tmp_path: Path, want: str) -> None:
    """An offline VirtualMachineSnapshot of exp-vm exported (`--snapshot`): its claim is
    restored from the VolumeSnapshot as exp-snap-disk, downloaded byte-equal, and removed
    with the export."""
    snap = {"apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshot",
            "metadata": {"name": "snap"},
            "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine",
                                "name": "exp-vm"}}}  # fmt: skip
    _apply(k, ns, snap)
    _wait(lambda: _get(k, ns, "vmsnapshot", "snap").get("status", {}).get("readyToUse"), 120,
          "snapshot snap readyToUse", lambda: _get(k, ns, "vmsnapshot", "snap").get("status"))  # fmt: skip
    out = tmp_path / "snap.img"
    _virtctl_py(k.kubeconfig, ns, "vmexport", "download", "exp-snap", "--snapshot=snap",
                f"--output={out}", "--format=raw")  # fmt: skip
    assert _sha(out.read_bytes()) == want
    _wait(lambda: not _get(k, ns, "pvc", "exp-snap-disk"), 60, "the restored claim deleted")


def test_export_downloads_equal_the_claim_and_ttl_terminates(
    real_stack: Kubectl, real_namespace: str, upstream_virtctl: Path, tmp_path: Path
) -> None:
    """Known bytes on a csi-local claim come back byte-equal through virtctl-py (raw and
    gzip), KubeVirt's virtctl (--vm --port-forward) and an export of a snapshot of the VM
    (virtctl-py --snapshot); a wrong token gets 401; bad specs
    are refused naming the fields; a passed ttlDuration makes the export Terminated and
    deletes its exporter pod."""
    k, ns = real_stack, real_namespace
    kubeconfig = k.kubeconfig
    _apply(k, ns, {**_claim("disk", "16Mi"), "spec": {**_claim("disk", "16Mi")["spec"],
                                                      "storageClassName": "csi-local"}})  # fmt: skip
    _bound(k, ns, "disk")
    want = _run(k, ns, "writer", claim="disk", code=WRITE, args=(str(SIZE),)).strip()
    k("delete", "pod", "writer", "-n", ns, "--wait=true")

    # export.kubevirt.io/v1 (GA in KubeVirt v1.9) is served beside v1beta1, and admitted alike.
    bad = {"apiVersion": "export.kubevirt.io/v1", "kind": "VirtualMachineExport",
           "metadata": {"name": "bad"},
           "spec": {"source": {"kind": "ConfigMap", "name": "x"}, "ttlDuration": "soon"}}  # fmt: skip
    refused = _refusal(k, ns, bad)
    assert "spec.source.kind" in refused and "spec.ttlDuration" in refused, refused

    _virtctl_py(kubeconfig, ns, "vmexport", "create", "exp", "--pvc=disk", "--ttl=10m")
    vme = _ready(k, ns, "exp")
    volume = vme["status"]["links"]["internal"]["volumes"][0]
    assert volume["name"] == "disk"
    assert {f["format"] for f in volume["formats"]} == {"raw", "gzip"}
    assert vme["status"]["tokenSecretRef"] == "export-token-exp"
    as_v1 = k("get", "virtualmachineexports.v1.export.kubevirt.io", "exp", "-n", ns,
              "-o", "jsonpath={.apiVersion} {.status.phase}")  # fmt: skip
    assert as_v1.strip() == "export.kubevirt.io/v1 Ready", as_v1

    raw, gz = tmp_path / "disk.img", tmp_path / "disk.img.gz"
    _virtctl_py(kubeconfig, ns, "vmexport", "download", "exp", f"--output={raw}", "--format=raw")
    _virtctl_py(kubeconfig, ns, "vmexport", "download", "exp", f"--output={gz}")
    assert _sha(raw.read_bytes()) == want
    assert _sha(gzip.decompress(gz.read_bytes())) == want

    assert _get_with_token(k, ns, vme, "not-the-token") == 401

    _apply(k, ns, _vm("disk"))
    upstream = tmp_path / "upstream.img.gz"
    _upstream(upstream_virtctl, kubeconfig, ns, "vmexport", "download", "exp-vm",
              "--vm=exp-vm", f"--output={upstream}", "--port-forward")  # fmt: skip
    assert _sha(gzip.decompress(upstream.read_bytes())) == want
    assert not _vmexport(k, ns, "exp-vm"), "KubeVirt's virtctl deletes the export it made"

    _snapshot_export(k, ns, tmp_path, want)

    k("patch", "vmexport", "exp", "-n", ns, "--type=merge", "-p",
      json.dumps({"spec": {"ttlDuration": "1s"}}))  # fmt: skip
    ended = _wait(
        lambda: (e := _vmexport(k, ns, "exp")).get("status", {}).get("phase") == "Terminated" and e,
        60, "export exp Terminated",
    )  # fmt: skip
    ready = next(c for c in ended["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "TTLExpired", ready
    _wait(lambda: not _get(k, ns, "pod", "virt-export-exp"), 60, "exporter pod deleted")
