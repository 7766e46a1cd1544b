"""`image-upload pvc`: a bare claim annotated as CDI's upload target gets the upload
server pod a DataVolume upload gets (owned by the claim), CDI's pod annotations while it
runs, Succeeded (the pod deleted) once it finished, Failed with why; DataVolumes' claims
and claims without the annotation are left alone."""

from __future__ import annotations

from typing import Any, cast

import pytest

from controller.datavolume.controller import WorkerImage
from controller.datavolume.logic import WorkerPod
from controller.errors import SyncError
from controller.informers import build_informers
from controller.services.volumes.claims import Claim
from controller.uploadclaim.controller import UploadClaimController, upload_pod
from controller.uploadclaim.logic import plan_upload
from shared.kube import PODS, PVCS, KubeClient, QueueConfig, Registry, WorkQueue
from shared.upload import (
    POD_PHASE_ANNOTATION,
    POD_READY_ANNOTATION,
    RUNNING_MESSAGE_ANNOTATION,
    UPLOAD_CONTAINER,
    UPLOAD_TARGET_ANNOTATION,
)
from tests.unit.controller import builders
from tests.unit.shared.kube.fakes import FakeApi

PHASE, READY = POD_PHASE_ANNOTATION, POD_READY_ANNOTATION


def _claim(annotations: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    notes = {UPLOAD_TARGET_ANNOTATION: ""} if annotations is None else annotations
    return {
        "metadata": {"name": "up", "namespace": "ns", "uid": "claim-uid",
                     "annotations": notes, **meta},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "64Mi"}}},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("annotations", "pod", "want"),
    [
        pytest.param({}, None, (True, False, {PHASE: "Pending", READY: "false"}, False), id="new"),
        pytest.param({}, WorkerPod(name="p", phase="Running", ready=True),
                     (False, False, {PHASE: "Running", READY: "true"}, False), id="ready"),
        pytest.param({}, WorkerPod(name="p", phase="Running", finished=True),
                     (False, True, {PHASE: "Succeeded", READY: "false"}, True), id="finished"),
        pytest.param({}, WorkerPod(name="p", phase="Failed", failure="not a disk image: x"),
                     (False, True, {PHASE: "Failed", READY: "false",
                                    RUNNING_MESSAGE_ANNOTATION: "not a disk image: x"}, True),
                     id="failed"),
        pytest.param({PHASE: "Succeeded"}, None, (False, False, {}, True), id="done"),
        pytest.param({PHASE: "Failed"}, WorkerPod(name="p"), (False, True, {}, True), id="ended"),
    ],
)  # fmt: skip
def test_plan_follows_the_upload_pod(
    annotations: dict[str, str], pod: WorkerPod | None, want: tuple[Any, ...]
) -> None:
    """Each pod state → create / delete, the claim's annotations, and whether it ended."""
    plan = plan_upload(annotations, pod)
    assert (plan.create_pod, plan.delete_pod, dict(plan.annotations), plan.done) == want


def test_upload_pod_is_a_datavolume_uploads_owned_by_the_claim() -> None:
    """cdi-upload-<claim>: the upload server on the claim (its disk.img, the claim's
    size), owned by the claim; no DataVolume label (the DataVolume watch ignores it)."""
    pod = upload_pod(_claim(), worker=WorkerImage(image="launcher:v1"))
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "cdi-upload-up"
    assert meta["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "up", "uid": "claim-uid",
        "controller": True, "blockOwnerDeletion": True,
    }]  # fmt: skip
    assert meta["labels"] == {"app": "containerized-data-importer"}
    (container,) = spec["containers"]
    assert container["name"] == UPLOAD_CONTAINER
    assert "upload" in container["args"] and str(64 * 1024**2) in container["args"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "up"}} in spec["volumes"]


def test_a_claim_without_a_size_is_refused() -> None:
    """No storage request: SyncError naming the claim, not retried."""
    claim = _claim()
    claim["spec"]["resources"] = {}
    with pytest.raises(SyncError, match="claim up: no storage request") as caught:
        upload_pod(claim, worker=WorkerImage(image="launcher:v1"))
    assert caught.value.requeue is False


def test_only_bare_upload_targets_are_upload_claims() -> None:
    """The annotation on a claim no DataVolume controls: an upload claim; a DataVolume's
    upload claim or a claim without the annotation: not."""
    assert Claim.from_dict(_claim()).upload_target
    dv_owned = _claim(ownerReferences=[{"kind": "DataVolume", "name": "up", "controller": True}])
    assert not Claim.from_dict(dv_owned).upload_target
    assert not Claim.from_dict(_claim({})).upload_target


class DeletingApi(FakeApi):
    """FakeApi that deletes too."""

    async def delete(self, resource: Any, name: str, *, namespace: str | None = None,
                     options: Any = None) -> dict[str, Any]:  # fmt: skip
        return self.objects.pop(self._key(resource, name, namespace))


def _controller(api: FakeApi) -> tuple[UploadClaimController, WorkQueue]:
    client = cast(KubeClient, api)
    registry = Registry()
    queue = WorkQueue(QueueConfig(name="uploadclaim"), registry=registry)
    deps = builders.deps(client, build_informers(client), registry=registry)
    return UploadClaimController(deps, queue=queue, worker=WorkerImage(image="l")), queue


async def test_sync_makes_the_pod_then_marks_succeeded_and_deletes_it() -> None:
    """First sync: the pod made, the claim Pending; the pod running and ready: the claim
    says so; the pod finished: Succeeded, the pod deleted."""
    api = DeletingApi()
    api.seed(PVCS, _claim())
    ctl, _ = _controller(api)
    await ctl.sync("ns/up")
    pod = api.stored(PODS, "ns/cdi-upload-up")
    assert api.stored(PVCS, "ns/up")["metadata"]["annotations"][PHASE] == "Pending"
    pod["status"] = {"phase": "Running", "containerStatuses": [{"ready": True, "state": {}}]}
    await ctl.sync("ns/up")
    notes = api.stored(PVCS, "ns/up")["metadata"]["annotations"]
    assert (notes[PHASE], notes[READY]) == ("Running", "true")
    pod["status"] = {"phase": "Running", "containerStatuses": [
        {"ready": False, "state": {"terminated": {"exitCode": 0}}}]}  # fmt: skip
    await ctl.sync("ns/up")
    assert api.stored(PVCS, "ns/up")["metadata"]["annotations"][PHASE] == "Succeeded"
    assert ("pods", "ns/cdi-upload-up") not in api.objects


async def test_claims_that_are_not_upload_targets_are_left_alone() -> None:
    """A claim without the annotation, or gone: nothing made; the informer handler only
    queues upload targets."""
    api = FakeApi()
    api.seed(PVCS, _claim({}))
    ctl, queue = _controller(api)
    await ctl.sync("ns/up")
    await ctl.sync("ns/gone")
    assert not [k for k in api.objects if k[0] == "pods"]
    handlers = ctl.handlers()
    assert handlers.on_add is not None
    handlers.on_add(Claim.from_dict(_claim({})))
    assert len(queue) == 0
    handlers.on_add(Claim.from_dict(_claim()))
    assert await queue.get() == "ns/up"
