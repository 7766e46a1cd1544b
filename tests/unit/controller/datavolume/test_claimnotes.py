"""The worker pod's phase and readiness on a DataVolume's claim, as CDI annotates it."""

from __future__ import annotations

from controller.datavolume.claimnotes import (
    POD_PHASE,
    POD_READY,
    annotations_patch,
    pod_annotations,
)
from controller.datavolume.logic import WorkerPod


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
