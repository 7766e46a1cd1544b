"""An upload claim's decisions, without I/O: CDI's `image-upload pvc` flow.

A claim with CDI's `cdi.kubevirt.io/storage.upload.target` annotation and no DataVolume
controlling it (a DataVolume's claim is the DataVolume controller's) gets the upload server
pod a DataVolume upload gets (`cdi-upload-<claim>`, owned by the claim), and CDI's
annotations about it, which both virtctls wait on:

    no pod (not done yet) ───▶ the pod is made         storage.pod.phase Pending
    pod Pending / Running ───▶                         its phase; storage.pod.ready
    pod finished (exit 0) ───▶ the pod is deleted      Succeeded
    pod failed, image pull ──▶ the pod is deleted      Failed, and why (running.message)
    Succeeded / Failed ──────▶ nothing more (a new upload needs a new claim, as in CDI)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.datavolume.claimnotes import POD_PHASE, POD_READY
from controller.datavolume.logic import WorkerPod
from shared.upload import RUNNING_MESSAGE_ANNOTATION

FINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True, kw_only=True)
class UploadPlan:
    """One sync's actions, the annotations the claim should carry, and whether it ended."""

    create_pod: bool = False
    delete_pod: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    done: bool = False


def plan_upload(annotations: Mapping[str, str], pod: WorkerPod | None) -> UploadPlan:
    """What to do for an upload claim with these annotations and this upload pod."""
    if annotations.get(POD_PHASE) in FINAL_PHASES:
        return UploadPlan(delete_pod=pod is not None, done=True)
    if pod is None:
        return UploadPlan(create_pod=True, annotations={POD_PHASE: "Pending", POD_READY: "false"})
    if pod.finished or pod.phase == "Succeeded":
        ended = {POD_PHASE: "Succeeded", POD_READY: "false"}
        return UploadPlan(delete_pod=True, annotations=ended, done=True)
    failure = (
        pod.failure
        or pod.image_pull
        or ("the upload pod failed" if pod.phase == "Failed" else None)
    )
    if failure is not None:
        failed = {POD_PHASE: "Failed", POD_READY: "false", RUNNING_MESSAGE_ANNOTATION: failure}
        return UploadPlan(delete_pod=True, annotations=failed, done=True)
    return UploadPlan(
        annotations={POD_PHASE: pod.phase, POD_READY: "true" if pod.ready else "false"}
    )
