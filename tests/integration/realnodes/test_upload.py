"""Upload DataVolumes on real nodes: `virtctl-py image-upload` creates the DataVolume, waits
for its cdi-upload-<dv> pod (UploadReady), sends the file through the API server's
pods/portforward, and the upload server's qemu-img writes it into the claim. KubeVirt's own
`virtctl image-upload` does the same through CDI's API as virt-api serves it: an
UploadTokenRequest (upload.cdi.kubevirt.io), then the upload proxy with that token."""

from __future__ import annotations

import base64
import json
import re
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_datavolumes import _counter, _final, _ready_message, _vmi
from tests.integration.realnodes.test_metrics import _pod_ip
from tests.integration.realnodes.test_storage import _apply, _disk_lines, _get, _running
from tests.integration.realnodes.test_story import _reasons, _virtctl
from tests.integration.realnodes.test_upstream_virtctl import _upstream
from tests.integration.subresources.test_upstream_virtctl import upstream_virtctl

pytestmark = pytest.mark.cluster
__all__ = ["upstream_virtctl"]
COUNT = 41  # the guest's disk counter, as the uploaded image carries it
POD_PHASE = "cdi.kubevirt.io/storage.pod.phase"


def _qcow2(tmp_path: Path) -> Path:
    """A 4 MiB qcow2 whose first bytes are the guest's counter line (KVPY-COUNT 41)."""
    qemu_img = shutil.which("qemu-img")
    assert qemu_img is not None, "qemu-img is needed on the host to make the test image"
    raw = tmp_path / "disk.raw"
    with raw.open("wb") as f:
        f.write(f"KVPY-COUNT {COUNT}\n".encode())
        f.truncate(4 * 1024**2)
    out = tmp_path / "disk.qcow2"
    subprocess.run([qemu_img, "convert", "-f", "raw", "-O", "qcow2", raw, out], check=True)
    return out


def _disks(name: str, *dvs: str) -> dict[str, Any]:
    """The guest with the DataVolumes as vda, vdb, … in order."""
    vmi = _vmi(name, dvs[0])
    spec = vmi["spec"]
    for i, dv in enumerate(dvs[1:], start=1):
        spec["domain"]["devices"]["disks"].append({"name": f"d{i}", "disk": {"bus": "virtio"}})
        spec["volumes"].append({"name": f"d{i}", "dataVolume": {"name": dv}})
    boot = spec["domain"]["firmware"]["kernelBoot"]
    names = ",".join(f"vd{chr(ord('a') + i)}" for i in range(len(dvs)))
    boot["kernelArgs"] = boot["kernelArgs"].replace("kvpy.disk=vda", f"kvpy.disk={names}")
    return vmi


def _with_claims(vmi: dict[str, Any], *claims: str) -> dict[str, Any]:
    """The VMI with the claims as its next virtio disks, each counted by the guest."""
    spec = vmi["spec"]
    first = len(spec["volumes"])
    for i, claim in enumerate(claims, start=first):
        spec["domain"]["devices"]["disks"].append({"name": f"c{i}", "disk": {"bus": "virtio"}})
        spec["volumes"].append({"name": f"c{i}", "persistentVolumeClaim": {"claimName": claim}})
    boot = spec["domain"]["firmware"]["kernelBoot"]
    more = ",".join(f"vd{chr(ord('a') + i)}" for i in range(first, first + len(claims)))
    boot["kernelArgs"] = re.sub(r"kvpy\.disk=(\S+)", rf"kvpy.disk=\1,{more}", boot["kernelArgs"])
    return vmi


def _cdi_config(proxy: str) -> dict[str, Any]:
    """CDI's CDIConfig `config` naming the upload proxy (cluster-scoped)."""
    return {"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDIConfig",
            "metadata": {"name": "config"}, "spec": {"uploadProxyURLOverride": proxy}}  # fmt: skip


def _post_with_token(url: str, token: str) -> tuple[int, str]:
    """POST a few bytes to the upload proxy (its certificate unchecked, as --insecure)."""
    request = urllib.request.Request(url, data=b"disk", method="POST",
                                     headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, context=insecure, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_uploaded_qcow2_boots_and_a_text_file_fails_with_the_reason(
    real_stack: Kubectl,
    real_cluster: Cluster,
    real_namespace: str,
    upstream_virtctl: Path,
    tmp_path: Path,
) -> None:
    """A qcow2 uploaded with image-upload ends in a Succeeded DataVolume (UploadScheduled
    and UploadReady recorded on the way). The same qcow2 uploaded with KubeVirt's own
    virtctl image-upload (--uploadproxy-url: virt-api's upload proxy, --insecure) succeeds
    too: the claim then says storage.pod.phase Succeeded, as CDI's does; and again without
    the flag, virtctl reading the URL from CDIConfig `config`'s uploadProxyURLOverride. One
    `image-upload pvc` by virtctl-py and by KubeVirt's virtctl (a bare claim with CDI's
    upload annotations, no DataVolume) ends with the claim's storage.pod.phase Succeeded.
    One VMI boots with the three DataVolumes and the two claims as disks: the guest finds
    the counter the image carried on each.
    A forged token is
    refused by the proxy (401, saying why). A text file uploaded with virtctl-py is
    refused: image-upload fails saying it is not a disk image and the DataVolume ends
    Failed with that reason."""
    k, ns, kubeconfig = real_stack, real_namespace, real_cluster.kubeconfig
    image = _qcow2(tmp_path)
    proxy = f"https://{_pod_ip(k, 'virt-controller')}:8444"
    upstream = _upstream(upstream_virtctl, kubeconfig, ns, "image-upload", "dv", "upstream",
                         "--size=64Mi", f"--image-path={image}", "--insecure",
                         f"--uploadproxy-url={proxy}")  # fmt: skip
    assert "completed successfully" in upstream, upstream
    assert _final(k, ns, "upstream")["status"]["phase"] == "Succeeded"
    assert _get(k, ns, "pvc", "upstream")["metadata"]["annotations"][POD_PHASE] == "Succeeded"
    claim = json.dumps({"exp": 4_000_000_000, "ns": ns, "pvc": "upstream"}).encode()
    forged = ".".join(base64.urlsafe_b64encode(b).decode() for b in (claim, b"\0" * 32))
    status, text = _post_with_token(f"{proxy}/v1beta1/upload", forged)
    assert status == 401 and "signature is invalid" in text, (status, text)
    k("apply", "-f", "-", stdin=json.dumps(_cdi_config(proxy)))
    try:  # no --uploadproxy-url: virtctl reads CDIConfig config's spec.uploadProxyURLOverride
        by_config = _upstream(upstream_virtctl, kubeconfig, ns, "image-upload", "dv", "by-config",
                              "--size=64Mi", f"--image-path={image}", "--insecure")  # fmt: skip
    finally:
        k("delete", "cdiconfig", "config", "--ignore-not-found")
    assert f"Uploading data to {proxy}" in by_config, by_config
    done = _virtctl(kubeconfig, ns, "image-upload", "dv", "uploaded", "--size=64Mi",
                    f"--image-path={image}", "--insecure")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "UploadReady" in done.stderr
    dv = _final(k, ns, "uploaded")
    assert dv["status"]["phase"] == "Succeeded", _ready_message(dv)
    reasons = _reasons(k, ns, dv["metadata"]["uid"])
    assert {"UploadScheduled", "UploadReady", "Succeeded"} <= reasons, reasons
    for kind in ("pvc-upload", "pvc-upstream"):  # image-upload pvc: a bare claim, no DataVolume
        args = ("image-upload", "pvc", kind, "--size=64Mi", f"--image-path={image}", "--insecure")
        if kind == "pvc-upload":
            done = _virtctl(kubeconfig, ns, *args)
            assert done.returncode == 0, done.stderr
        else:
            out = _upstream(upstream_virtctl, kubeconfig, ns, *args, f"--uploadproxy-url={proxy}")
            assert "completed successfully" in out, out
        notes = _get(k, ns, "pvc", kind)["metadata"]["annotations"]
        assert notes[POD_PHASE] == "Succeeded", notes
        assert not _get(k, ns, "dv", kind)
    vmi_body = _disks("on-upload", "uploaded", "upstream", "by-config")
    _apply(k, ns, _with_claims(vmi_body, "pvc-upload", "pvc-upstream"))

    notes = tmp_path / "notes.txt"
    notes.write_text("hello, no disk here\n")
    refused = _virtctl(kubeconfig, ns, "image-upload", "dv", "notes", "--size=64Mi",
                       f"--image-path={notes}")  # fmt: skip
    assert refused.returncode != 0
    assert "not a disk image" in refused.stderr, refused.stderr
    failed = _final(k, ns, "notes")
    assert failed["status"]["phase"] == "Failed"
    assert "not a disk image" in _ready_message(failed), _ready_message(failed)

    vmi = _running(k, ns, "on-upload")
    lines = _disk_lines(real_cluster, vmi, 5)
    assert [line.split()[1] for line in lines] == ["vda", "vdb", "vdc", "vdd", "vde"]
    assert [_counter(re.sub(r"vd[b-e]", "vda", line)) for line in lines] == [(COUNT, COUNT + 1)] * 5
