"""The annotations CDI keeps on a DataVolume's claim about its worker pod, which KubeVirt's
`virtctl image-upload` reads:

    cdi.kubevirt.io/storage.pod.phase   the worker (importer / upload server) pod's phase;
                                        Succeeded or Failed once the DataVolume is (the pod
                                        is deleted then); image-upload waits for Succeeded
    cdi.kubevirt.io/storage.pod.ready   "true" while the worker pod is ready (the upload
                                        server takes uploads)
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.datavolume.logic import WorkerPod
from shared.model.datavolume import DataVolumePhase
from shared.upload import POD_PHASE_ANNOTATION, POD_READY_ANNOTATION

POD_PHASE = POD_PHASE_ANNOTATION
POD_READY = POD_READY_ANNOTATION
FINAL = {DataVolumePhase.SUCCEEDED: "Succeeded", DataVolumePhase.FAILED: "Failed"}


def pod_annotations(phase: str | None, pod: WorkerPod | None) -> dict[str, str]:
    """What the claim should say about the worker pod, given the DataVolume's new phase."""
    if phase in FINAL:
        return {POD_PHASE: FINAL[DataVolumePhase(phase)], POD_READY: "false"}
    if pod is None:
        return {}
    return {POD_PHASE: pod.phase, POD_READY: "true" if pod.ready else "false"}


def annotations_patch(current: Mapping[str, str], want: Mapping[str, str]) -> dict[str, str]:
    """The annotations to merge-patch onto the claim (empty: it says so already)."""
    return {k: v for k, v in want.items() if current.get(k) != v}
