"""The VirtualMachineExport controller.

    reconcile(key): export from the cache → source claims (source.py) → token Secret
                    (spec.tokenSecretRef, or one made here) → Service → plan_export() →
                    certificate Secret + exporter pod, or the pod deleted → one status write

The exporter pod is read with a GET (no informer for it): while an export is not Ready its
key comes back every second; a Ready one comes back when its TTL ends.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import structlog

from controller.deps import Deps
from controller.export import bodies
from controller.export.certs import make_certs
from controller.export.logic import TOKEN_MISSING, Blocked, World, expiry, plan_export
from controller.export.snapshot_source import snapshot_claims
from controller.export.source import Source, read_source
from controller.objectio import ObjectIO
from controller.reconcile import Reconciler, refresher
from shared.kube import (
    PODS,
    SERVICES,
    EventType,
    Handlers,
    NotFound,
    Resource,
    StatusWriter,
    WorkQueue,
)
from shared.kube.resources import SECRETS, VMEXPORTS
from shared.model.export import (
    SNAPSHOT_KIND,
    ExportPhase,
    VirtualMachineExport,
    default_token_secret,
    export_errors,
    export_names,
)

log = structlog.get_logger("controller.export")

IO_TIMEOUT = 10.0
CERT_MARGIN = timedelta(days=1)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ExporterImage:
    """The image exporter pods run (the launcher's: it carries the whole wheel)."""

    image: str
    pull_policy: str = "IfNotPresent"


class ExportController(Reconciler):
    """Reconciles VirtualMachineExports."""

    kind = "vmexport"
    synchronized_on = "exports"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        writer: StatusWriter[VirtualMachineExport],
        exporter: ExporterImage,
    ) -> None:
        super().__init__(deps, queue)
        self._writer = writer
        self._exporter = exporter
        self._io = ObjectIO(deps.client, deps.recorder, timeout=IO_TIMEOUT)

    def handlers(self) -> Handlers[VirtualMachineExport]:
        """Callbacks for the export informer: every add and update queues the export."""

        def queue(*versions: VirtualMachineExport) -> None:
            self.enqueue(versions[-1].key)

        return Handlers(on_add=queue, on_update=queue)

    async def sync(self, key: str) -> None:
        vme = self._informers.exports.store.get(key)
        if vme is None or vme.metadata.is_deleting:
            return
        source = await self._source(vme)
        token_name, blocked = await self._token(vme)
        service_name = await self._service(vme)
        pod_raw = await self._owned(PODS, export_names(vme.name)[0], vme)
        certs_raw = await self._owned(SECRETS, bodies.cert_secret_name(vme), vme)
        world = World(
            claims=tuple(c.name for c in source.claims),
            archives=frozenset(c.name for c in source.claims if c.memory_dump),
            blocked=source.blocked or blocked,
            vm_name=source.vm_name,
            token_secret=token_name,
            service_name=service_name,
            host=f"{service_name}.{vme.namespace}.svc",
            ca_cert=_secret_text(certs_raw, "ca.crt"),
            pod_ready=_pod_ready(pod_raw) if pod_raw is not None else None,
        )
        plan = plan_export(vme, world, now=self._clock())
        if plan.want_pod and pod_raw is None:
            await self._start(vme, source, token_name, have_certs=certs_raw is not None)
        elif not plan.want_pod and pod_raw is not None:
            await self._delete_pod(vme, why=plan.status.condition("Ready"))
        await self._write(vme, dataclasses.replace(vme, status=plan.status))
        if plan.requeue_after is not None:
            self.queue.add_after(key, plan.requeue_after)

    async def _source(self, vme: VirtualMachineExport) -> Source:
        """The claims to serve: a snapshot's restored here, the others read."""
        source = vme.spec.source
        if source is None or source.kind != SNAPSHOT_KIND or export_errors(vme):
            return await read_source(self._client, self._informers, vme)
        claims, blocked = await snapshot_claims(self._io, self._informers, vme, source.name or "")
        return Source(claims=claims, blocked=blocked)

    async def _token(self, vme: VirtualMachineExport) -> tuple[str, Blocked | None]:
        """The token Secret's name; made here when spec.tokenSecretRef is unset."""
        ref = vme.spec.token_secret_ref
        name = ref or default_token_secret(vme.name)
        if await self._io.get(SECRETS, name, vme.namespace) is not None:
            return name, None
        if ref:
            message = f"the token Secret {ref} (spec.tokenSecretRef) does not exist yet"
            return name, Blocked(reason=TOKEN_MISSING, message=message)
        body = bodies.token_secret(vme, name)
        await self._io.create(SECRETS, body, owner=vme, what="token secret")
        return name, None

    async def _service(self, vme: VirtualMachineExport) -> str:
        body = bodies.service(vme)
        name = str(body["metadata"]["name"])
        if await self._io.get(SERVICES, name, vme.namespace) is None:
            await self._io.create(SERVICES, body, owner=vme, what="service")
        return name

    async def _start(
        self, vme: VirtualMachineExport, source: Source, token: str, *, have_certs: bool
    ) -> None:
        if not have_certs:
            ends = expiry(vme)
            left = (ends - self._clock()) if ends is not None else timedelta(0)
            certs = make_certs(
                service=export_names(vme.name)[1],
                namespace=vme.namespace,
                valid=max(left, timedelta(0)) + CERT_MARGIN,
            )
            body = bodies.cert_secret(vme, certs)
            await self._io.create(SECRETS, body, owner=vme, what="certificate secret")
        pod = bodies.exporter_pod(
            vme,
            source.claims,
            token_secret_name=token,
            image=self._exporter.image,
            pull_policy=self._exporter.pull_policy,
        )
        await self._io.create(PODS, pod, owner=vme, what="exporter pod")

    async def _owned(
        self, resource: Resource, name: str, vme: VirtualMachineExport
    ) -> dict[str, Any] | None:
        raw = await self._io.get(resource, name, vme.namespace)
        return raw if raw is not None and bodies.is_owned(raw, vme) else None

    async def _delete_pod(self, vme: VirtualMachineExport, *, why: Any) -> None:
        name = export_names(vme.name)[0]
        if not await self._io.delete(PODS, name, vme.namespace):
            return
        reason = getattr(why, "reason", None) or "Stopped"
        log.info("export_pod_deleted", pod=name, reason=reason)
        self._recorder.event(vme, EventType.NORMAL, reason, f"Deleted exporter pod {name}")

    async def _write(self, vme: VirtualMachineExport, new: VirtualMachineExport) -> None:
        if new.status == vme.status:
            return
        try:
            refresh = refresher(self._client, VMEXPORTS, VirtualMachineExport, vme.key)
            await self._writer.write_status(vme, new, refresh=refresh)
        except NotFound:
            return
        if new.phase != vme.phase:
            log.info("export_phase", phase=str(new.phase))
            kind = EventType.NORMAL if new.phase is not ExportPhase.PENDING else EventType.WARNING
            ready = new.status.condition("Ready")
            message = (ready.message if ready else None) or f"phase {new.phase}"
            self._recorder.event(vme, kind, str(new.phase), message)


def _pod_ready(raw: Mapping[str, Any]) -> bool:
    conditions = (raw.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _secret_text(raw: Mapping[str, Any] | None, key: str) -> str | None:
    data = (raw or {}).get("data") or {}
    value = data.get(key)
    return base64.b64decode(value).decode() if isinstance(value, str) else None
