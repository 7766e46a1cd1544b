"""Upload DataVolumes on real nodes: `virtctl-py image-upload` creates the DataVolume, waits
for its cdi-upload-<dv> pod (UploadReady), sends the file through the API server's
pods/portforward, and the upload server's qemu-img writes it into the claim."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_datavolumes import _counter, _final, _ready_message, _vmi
from tests.integration.realnodes.test_storage import _apply, _disk_lines, _running
from tests.integration.realnodes.test_story import _reasons, _virtctl

pytestmark = pytest.mark.cluster
COUNT = 41  # the guest's disk counter, as the uploaded image carries it


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


def test_uploaded_qcow2_boots_and_a_text_file_fails_with_the_reason(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    """A qcow2 uploaded with image-upload ends in a Succeeded DataVolume (UploadScheduled
    and UploadReady recorded on the way) whose disk a VMI boots
    with: the guest finds the counter the image carried. A text file uploaded the same way
    is refused: image-upload fails saying it is not a disk image and the DataVolume ends
    Failed with that reason."""
    k, ns, kubeconfig = real_stack, real_namespace, real_cluster.kubeconfig
    image = _qcow2(tmp_path)
    done = _virtctl(kubeconfig, ns, "image-upload", "dv", "uploaded", "--size=64Mi",
                    f"--image-path={image}", "--insecure")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "UploadReady" in done.stderr
    dv = _final(k, ns, "uploaded")
    assert dv["status"]["phase"] == "Succeeded", _ready_message(dv)
    reasons = _reasons(k, ns, dv["metadata"]["uid"])
    assert {"UploadScheduled", "UploadReady", "Succeeded"} <= reasons, reasons
    _apply(k, ns, _vmi("on-upload", "uploaded"))

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
    (line,) = _disk_lines(real_cluster, vmi, 1)
    assert _counter(line) == (COUNT, COUNT + 1)
