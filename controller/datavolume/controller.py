"""The DataVolume controller: CDI's import, clone and blank flows over a claim and a worker pod.

    reconcile(key): DataVolume from the cache → its claim and worker pod (GET) →
                    plan_datavolume() → claim / pod create or delete → one status write

The worker pod is read with a GET; a watch on the worker pods (workers.py) syncs the
DataVolume as soon as its pod changes, and while a DataVolume is not Succeeded or Failed
its key also comes back every `poll` seconds (the claim has no watch here).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

import structlog

from controller.datavolume.claimnotes import annotations_patch, pod_annotations
from controller.datavolume.csiclone import clone_source
from controller.datavolume.logic import ClaimView, DVPlan, WorkerPod, plan_datavolume
from controller.datavolume.pods import claim_body, pod_is_ours, worker_name, worker_pod
from controller.datavolume.workers import WorkerView
from controller.deps import Deps
from controller.errors import SyncError
from controller.reconcile import Reconciler, refresher
from shared.kube import (
    DATAVOLUMES,
    PODS,
    PVCS,
    AlreadyExists,
    ApiError,
    DeleteOptions,
    EventType,
    Handlers,
    NotFound,
    Resource,
    StatusWriter,
    TransportError,
    WorkQueue,
)
from shared.model import format_time
from shared.model.datavolume import DataVolume, DataVolumePhase
from shared.model.datavolume_spec import SourceKind, SpecError
from shared.model.datavolume_spec import target as dv_target

log = structlog.get_logger("controller.datavolume")

IO_TIMEOUT = 10.0
POLL_SECONDS = 1.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkerImage:
    """The image the worker pods run (the launcher's: qemu-img and busybox)."""

    image: str
    pull_policy: str = "IfNotPresent"


class DataVolumeController(Reconciler):
    """Reconciles DataVolumes: claim, worker pod, phase."""

    kind = "datavolume"
    synchronized_on = "datavolumes"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        writer: StatusWriter[DataVolume],
        worker: WorkerImage,
        poll: float = POLL_SECONDS,
    ) -> None:
        super().__init__(deps, queue)
        self._writer = writer
        self._worker = worker
        self._poll = poll

    def handlers(self) -> Handlers[DataVolume]:
        """Callbacks for the DataVolume informer."""
        return Handlers(
            on_add=lambda dv: self.enqueue(dv.key),
            on_update=lambda old, new: self.enqueue(new.key),
        )

    def worker_handlers(self) -> Handlers[WorkerView]:
        """Callbacks for the worker pods' informer: the pod's DataVolume is synced."""
        return Handlers.each(self._enqueue_worker)

    def _enqueue_worker(self, pod: WorkerView) -> None:
        if pod.datavolume_key is not None:
            self.enqueue(pod.datavolume_key)

    async def sync(self, key: str) -> None:
        dv = self._informers.datavolumes.store.get(key)
        if dv is None or dv.metadata.is_deleting:
            return
        claim = await self._claim(dv)
        pod_raw = await self._get(PODS, worker_name(dv), dv.namespace)
        if pod_raw is not None and not pod_is_ours(pod_raw, dv):
            pod_raw = None
        pod = WorkerPod.from_dict(pod_raw) if pod_raw is not None else None
        plan = plan_datavolume(dv, claim=claim, pod=pod, now=format_time(self._clock()))
        await self._apply(dv, plan)
        await self._write(dv, plan)
        if claim is not None and claim.owned:
            await self._annotate(claim, pod_annotations(plan.status.phase, pod), dv.namespace)
        if not plan.status.phase or not DataVolumePhase(plan.status.phase).is_final():
            self.queue.add_after(key, self._poll)

    async def _claim(self, dv: DataVolume) -> ClaimView | None:
        raw = await self._get(PVCS, dv.name, dv.namespace)
        if raw is None:
            return None
        refs = (raw.get("metadata") or {}).get("ownerReferences") or ()
        spec = raw.get("spec") or {}
        source = spec.get("dataSource") or {}
        return ClaimView(
            name=dv.name,
            phase=str((raw.get("status") or {}).get("phase") or "Pending"),
            volume_mode=str(spec.get("volumeMode") or "Filesystem"),
            owned=any(r.get("uid") == dv.uid and r.get("controller") for r in refs),
            csi_clone=source.get("kind") == "PersistentVolumeClaim",
            annotations=(raw.get("metadata") or {}).get("annotations") or {},
        )

    async def _annotate(self, claim: ClaimView, want: Mapping[str, str], namespace: str) -> None:
        """The worker pod's phase and readiness on the claim, as CDI keeps them."""
        patch = annotations_patch(claim.annotations, want)
        if not patch:
            return
        body = {"metadata": {"annotations": patch}}
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.patch(PVCS, claim.name, body, namespace=namespace)
        except NotFound:
            return
        except (ApiError, TransportError) as e:
            raise SyncError("FailedUpdate", f"claim {claim.name} annotations: {e}") from e

    async def _get(self, resource: Resource, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                return await self._client.get(resource, name, namespace=namespace)
        except NotFound:
            return None

    async def _apply(self, dv: DataVolume, plan: DVPlan) -> None:
        if plan.delete_pod:
            await self._delete_pod(dv)
        if not (plan.create_claim or plan.create_pod):
            return
        try:
            want = dv_target(dv)
        except SpecError:
            return  # the plan already says Failed
        if plan.create_claim:
            body = claim_body(dv, want)
            if want.kind is SourceKind.CLONE:
                source = await clone_source(self._client, dv, want)
                if source is not None:
                    body["spec"]["dataSource"] = source
            await self._create(PVCS, body, dv, what="claim")
        if plan.create_pod:
            body = worker_pod(
                dv, want, image=self._worker.image, pull_policy=self._worker.pull_policy
            )
            await self._create(PODS, body, dv, what="importer pod")

    async def _create(
        self, resource: Resource, body: Mapping[str, Any], dv: DataVolume, *, what: str
    ) -> None:
        name = body["metadata"]["name"]
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.create(resource, body, namespace=dv.namespace)
        except AlreadyExists:
            return
        except (ApiError, TransportError) as e:
            self._recorder.event(dv, EventType.WARNING, "FailedCreate", f"{what} {name}: {e}")
            raise SyncError("FailedCreate", f"{what} {name}: {e}") from e
        log.info("datavolume_created", what=what, name=name)

    async def _delete_pod(self, dv: DataVolume) -> None:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.delete(
                    PODS, worker_name(dv), namespace=dv.namespace, options=DeleteOptions()
                )
        except NotFound:
            return
        log.info("datavolume_worker_deleted", pod=worker_name(dv))

    async def _write(self, dv: DataVolume, plan: DVPlan) -> None:
        new = dataclasses.replace(dv, status=plan.status)
        if new.status == dv.status:
            return
        old_phase = dv.phase
        try:
            refresh = refresher(self._client, DATAVOLUMES, DataVolume, dv.key)
            await self._writer.write_status(dv, new, refresh=refresh)
        except NotFound:
            return
        if new.phase != old_phase:
            log.info("datavolume_phase", phase=str(new.phase))
            failure = new.failure()
            kind = EventType.WARNING if failure else EventType.NORMAL
            self._recorder.event(dv, kind, str(new.phase), failure or f"phase {new.phase}")
