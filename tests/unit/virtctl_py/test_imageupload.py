"""`image-upload dv|pvc`: KubeVirt's flags parse; the DataVolume made from them is an
upload source with spec.storage as the flags ask (CDI's defaults otherwise), the claim a
bare one with CDI's upload annotations."""

from __future__ import annotations

import argparse

import pytest

from shared.model.datavolume import DataVolume
from shared.model.datavolume_spec import target
from virtctl_py import cli
from virtctl_py.imageupload import claim_body, datavolume_body


def args(*argv: str) -> argparse.Namespace:
    return cli.build().parse_args(["image-upload", *argv])


def test_kubevirt_flags_make_an_upload_datavolume() -> None:
    """--size, --storage-class, --access-mode and --volume-mode land in spec.storage; the
    DataVolume is one the controller accepts as an upload."""
    a = args("dv", "disk", "--size=64Mi", "--image-path=x.qcow2", "--storage-class=fast",
             "--access-mode=ReadWriteMany", "--volume-mode=block", "--insecure",
             "--uploadproxy-url=https://198.18.0.1:31001")  # fmt: skip
    body = datavolume_body(a, "ns")
    assert body["metadata"] == {"name": "disk", "namespace": "ns"}
    assert body["spec"]["source"] == {"upload": {}}
    assert body["spec"]["storage"] == {
        "resources": {"requests": {"storage": "64Mi"}},
        "storageClassName": "fast",
        "accessModes": ["ReadWriteMany"],
        "volumeMode": "Block",
    }
    want = target(DataVolume.from_dict({**body, "metadata": {**body["metadata"], "uid": "u"}}))
    assert (want.kind, want.volume_mode, want.size_bytes) == ("upload", "Block", 64 * 1024**2)


def test_only_datavolumes_claims_and_an_image_path() -> None:
    """`dv` and `pvc` are the kinds; --image-path is required."""
    with pytest.raises(SystemExit):
        args("pod", "disk", "--image-path=x")
    with pytest.raises(SystemExit):
        args("pvc", "disk", "--size=1Gi")


def test_pvc_makes_a_bare_claim_with_cdis_upload_annotations() -> None:
    """`image-upload pvc`: a claim (no DataVolume) with CDI's upload-target and
    content-type annotations, the flags in its spec (ReadWriteOnce unless told)."""
    body = claim_body(args("pvc", "up", "--size=64Mi", "--image-path=x.img",
                           "--storage-class=csi-local", "--volume-mode=filesystem"), "ns")  # fmt: skip
    assert body["kind"] == "PersistentVolumeClaim"
    assert body["metadata"] == {
        "name": "up", "namespace": "ns",
        "annotations": {"cdi.kubevirt.io/storage.upload.target": "",
                        "cdi.kubevirt.io/storage.contentType": "kubevirt"},
    }  # fmt: skip
    assert body["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "64Mi"}},
        "storageClassName": "csi-local",
        "volumeMode": "Filesystem",
    }
