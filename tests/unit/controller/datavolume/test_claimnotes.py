"""The worker pod's phase and readiness on a DataVolume's claim, as CDI annotates it."""

from __future__ import annotations

from controller.datavolume.claimnotes import (
    POD_PHASE,
    POD_READY,
    annotations_patch,
    pod_annotations,
)
from controller.datavolume.logic import WorkerPod
from controller.datavolume.pods import claim_body
from shared.model.datavolume_spec import target
from tests.unit.controller.datavolume.test_logic import REGISTRY, dv


def test_a_ready_upload_server_is_announced_then_the_final_phase() -> None:
    """Running and ready: phase Running, ready "true" (image-upload may send); once the
    DataVolume Succeeded (the pod deleted) the claim says Succeeded, which image-upload
    waits for; Failed likewise."""
    pod = WorkerPod(name="cdi-upload-d", phase="Running", ready=True)
    assert pod_annotations("UploadReady", pod) == {POD_PHASE: "Running", POD_READY: "true"}
    assert pod_annotations("UploadScheduled", WorkerPod(name="p")) == {
        POD_PHASE: "Pending",
        POD_READY: "false",
    }
    assert pod_annotations("Succeeded", None) == {POD_PHASE: "Succeeded", POD_READY: "false"}
    assert pod_annotations("Failed", pod)[POD_PHASE] == "Failed"
    assert pod_annotations("Pending", None) == {}


def test_only_changed_annotations_are_patched() -> None:
    """The patch carries only what the claim does not say yet (nothing: no write)."""
    want = {POD_PHASE: "Running", POD_READY: "true"}
    assert annotations_patch({POD_PHASE: "Running", "other": "x"}, want) == {POD_READY: "true"}
    assert annotations_patch(want, want) == {}


def test_an_upload_claim_is_marked_as_cdi_marks_it() -> None:
    """An upload DataVolume's claim carries cdi.kubevirt.io/storage.upload.target (KubeVirt's
    virtctl checks it before uploading into an existing one); an import's does not."""
    upload, registry = dv({"upload": {}}), dv(REGISTRY)
    body = claim_body(upload, target(upload))
    assert body["metadata"]["annotations"] == {"cdi.kubevirt.io/storage.upload.target": ""}
    assert "annotations" not in claim_body(registry, target(registry))["metadata"]
