"""The upload-claim controller: CDI's upload server for a bare claim (`image-upload pvc`).

    reconcile(key): the claim (GET) → an upload target no DataVolume controls? → its
                    upload pod (GET) → plan_upload() → pod create / delete → annotations

The pod is the one a DataVolume upload gets (controller/datavolume/pods.py: the upload
server in front of the importer script, writing the claim's disk.img or device), owned by
the claim instead, so it goes with it. Until the upload ended the key comes back every
`poll` seconds (no watch on the pod here); virt-api's upload proxy finds the pod by the
claim's name, as for a DataVolume's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from controller.datavolume.controller import WorkerImage
from controller.datavolume.logic import WorkerPod
from controller.datavolume.pods import worker_pod
from controller.deps import Deps
from controller.errors import SyncError
from controller.reconcile import Reconciler
from controller.services.volumes.claims import Claim
from controller.uploadclaim.logic import UploadPlan, plan_upload
from shared.kube import (
    PODS,
    PVCS,
    AlreadyExists,
    ApiError,
    DeleteOptions,
    Handlers,
    NotFound,
    Resource,
    TransportError,
    WorkQueue,
)
from shared.model.datavolume import DataVolume
from shared.model.datavolume_spec import FILESYSTEM, SourceKind, Target
from shared.model.errors import QuantityError
from shared.model.quantity import parse_bytes
from shared.upload import upload_pod_name

log = structlog.get_logger("controller.uploadclaim")

IO_TIMEOUT = 10.0
POLL_SECONDS = 1.0


def upload_pod(claim: Mapping[str, Any], *, worker: WorkerImage) -> dict[str, Any]:
    """The upload server pod of a bare claim: a DataVolume upload's pod for a DataVolume
    of the claim's name, owned by the claim (SyncError when the claim asks no size)."""
    meta, spec = claim.get("metadata") or {}, claim.get("spec") or {}
    request = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    try:
        if not isinstance(request, str | int):
            raise QuantityError("no storage request")
        size = parse_bytes(request)
    except QuantityError:
        raise SyncError(
            "InvalidClaim", f"claim {meta.get('name')}: no storage request", requeue=False
        ) from None
    stand_in = DataVolume.from_dict({
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid")},
        "spec": {"source": {"upload": {}}},
    })  # fmt: skip
    want = Target(
        kind=SourceKind.UPLOAD,
        claim_spec=spec,
        size_bytes=size,
        volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
    )
    body = worker_pod(stand_in, want, image=worker.image, pull_policy=worker.pull_policy)
    owner = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": meta.get("name"),
             "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    body["metadata"]["ownerReferences"] = [owner]
    body["metadata"]["labels"] = {"app": "containerized-data-importer"}
    return body


class UploadClaimController(Reconciler):
    """Reconciles claims annotated as upload targets: upload pod, CDI's annotations."""

    kind = "uploadclaim"

    def __init__(
        self, deps: Deps, *, queue: WorkQueue, worker: WorkerImage, poll: float = POLL_SECONDS
    ) -> None:
        super().__init__(deps, queue)
        self._worker = worker
        self._poll = poll

    def handlers(self) -> Handlers[Claim]:
        """Callbacks for the claims' informer: upload targets only."""
        return Handlers(
            on_add=self._claim_changed, on_update=lambda old, new: self._claim_changed(new)
        )

    def _claim_changed(self, claim: Claim) -> None:
        if claim.upload_target:
            self.enqueue(f"{claim.namespace}/{claim.name}")

    async def sync(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        claim = await self._get(PVCS, name, namespace)
        if claim is None or not Claim.from_dict(claim).upload_target:
            return
        meta = claim.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return
        raw = await self._get(PODS, upload_pod_name(name), namespace)
        ours = raw is not None and any(
            r.get("uid") == meta.get("uid") for r in (raw.get("metadata") or {}).get(
                "ownerReferences") or ()
        )  # fmt: skip
        pod = WorkerPod.from_dict(raw) if raw is not None and ours else None
        plan = plan_upload(meta.get("annotations") or {}, pod)
        await self._apply(claim, plan)
        if not plan.done:
            self.queue.add_after(key, self._poll)

    async def _apply(self, claim: Mapping[str, Any], plan: UploadPlan) -> None:
        meta = claim.get("metadata") or {}
        name, namespace = str(meta.get("name")), str(meta.get("namespace"))
        if plan.create_pod:
            await self._create(upload_pod(claim, worker=self._worker), namespace)
        if plan.delete_pod:
            await self._delete(upload_pod_name(name), namespace)
        current = meta.get("annotations") or {}
        patch = {k: v for k, v in plan.annotations.items() if current.get(k) != v}
        if patch:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.patch(
                    PVCS, name, {"metadata": {"annotations": patch}}, namespace=namespace
                )
            log.info(
                "upload_claim_annotated",
                claim=name,
                **{k.rsplit(".", 1)[-1]: v for k, v in patch.items()},
            )

    async def _get(self, resource: Resource, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                return await self._client.get(resource, name, namespace=namespace)
        except NotFound:
            return None

    async def _create(self, body: dict[str, Any], namespace: str) -> None:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.create(PODS, body, namespace=namespace)
        except AlreadyExists:
            return
        except (ApiError, TransportError) as e:
            raise SyncError("FailedCreate", f"upload pod {body['metadata']['name']}: {e}") from e
        log.info("upload_pod_created", pod=body["metadata"]["name"])

    async def _delete(self, pod: str, namespace: str) -> None:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.delete(PODS, pod, namespace=namespace, options=DeleteOptions())
        except NotFound:
            return
        log.info("upload_pod_deleted", pod=pod)
