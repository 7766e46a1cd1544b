"""Serving the admission webhooks over HTTPS for as long as the controller runs.

    POST /mutate     defaults (JSONPatch) for VMIs and VMs; a VM's inferFromVolume resolved
    POST /validate   refusals naming every field, for VMIs, VMs and VMIMs (a VM's
                     instancetype and preference looked up and applied)
    POST /evict      pods/eviction of launcher pods, by eviction strategy (eviction.py)
    GET  /healthz

Every replica serves (the Service spreads requests); leadership only gates the reconcile
loops. kube-apiserver calls without a client certificate, as it does any webhook.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web

from shared.clusterconfig import ClusterConfig
from shared.kube import VMIS, Counter, Registry
from shared.kube import NotFound as KubeNotFound
from shared.kube.ports import Gets, GetsPatches
from shared.model import (
    EvictionStrategy,
    FieldError,
    ParseError,
    VirtualMachine,
    VirtualMachineInstanceMigration,
)
from shared.model.validation import ValidationLimits
from virt_api.admission.backups import backup_spec_changed
from virt_api.admission.bindings import binding_errors
from virt_api.admission.config import AdmissionConfig
from virt_api.admission.defaults import Defaults, default_vm_spec, mutate, spec_patch
from virt_api.admission.eviction import EvictionAdmitter
from virt_api.admission.gates import gate_errors
from virt_api.admission.infer import infer
from virt_api.admission.instancetypes import instancetype_errors, with_preferred_storage_class
from virt_api.admission.review import AdmissionRequest, BadReview, allow, deny, parse_review
from virt_api.admission.shape import shape_errors
from virt_api.admission.snapshots import (
    SNAPSHOT_KINDS,
    ObjectLookup,
    lookup_errors,
    object_lookup,
    spec_changed,
)
from virt_api.admission.validate import VMILookup, migration_target_errors, validate
from virt_api.admission.vmstate import state_errors
from virt_api.subresources.tls import CertDir

log = structlog.get_logger("virt_api.admission")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def kube_lookup(client: Gets, *, timeout: float) -> VMILookup:
    """VMILookup over a KubeClient: None on NotFound, other errors propagate (fail closed)."""

    async def lookup(namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            async with asyncio.timeout(timeout):
                return await client.get(VMIS, name, namespace=namespace)
        except KubeNotFound:
            return None

    return lookup


@dataclass(frozen=True, slots=True, kw_only=True)
class AppDeps:
    defaults: Defaults
    limits: ValidationLimits
    lookup: VMILookup
    requests: Counter  # kubevirt_admission_requests_total{webhook,kind,allowed}
    evictions: EvictionAdmitter | None = None  # None: /evict is not served
    # The cluster's live configuration (feature gates); flag defaults when not given.
    cluster: Callable[[], ClusterConfig] = ClusterConfig
    # Any object by resource (snapshot.kubevirt.io admission); None: those lookups skipped.
    objects: ObjectLookup | None = None


def build_app(deps: AppDeps, *, max_body_bytes: int = 8 * 1024 * 1024) -> web.Application:
    """The application; serving (TLS, port) is the caller's business."""
    app = web.Application(client_max_size=max_body_bytes)
    app.router.add_get("/healthz", _healthz)
    app.router.add_post("/mutate", _endpoint(deps, "mutate", _mutate))
    app.router.add_post("/validate", _endpoint(deps, "validate", _validate))
    if deps.evictions is not None:
        app.router.add_post("/evict", _endpoint(deps, "evict", _evict))
    return app


async def _healthz(_: web.Request) -> web.StreamResponse:
    return web.Response(text="ok")


Decide = Callable[[AppDeps, AdmissionRequest], Awaitable[dict[str, Any]]]


def _endpoint(deps: AppDeps, webhook: str, decide: Decide) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            review = parse_review(json.loads(await request.read()))
        except (BadReview, ValueError) as e:
            return web.json_response({"message": str(e)}, status=400)
        answer = await decide(deps, review)
        allowed = bool(answer["response"]["allowed"])
        deps.requests.labels(webhook, review.kind, str(allowed).lower()).inc()
        if not allowed:
            log.info(
                "admission_denied",
                kind=review.kind,
                name=f"{review.namespace}/{review.name}",
                message=answer["response"]["status"]["message"],
            )
        return web.json_response(answer)

    return handle


async def _mutate(deps: AppDeps, review: AdmissionRequest) -> dict[str, Any]:
    if review.operation not in ("CREATE", "UPDATE"):
        return allow(review.uid)
    if malformed := shape_errors(review.kind, review.obj):
        return deny(review.uid, kind=review.kind, name=review.name, errors=malformed)
    spec = review.obj.get("spec")
    if review.kind == VirtualMachine.KIND and deps.objects and isinstance(spec, Mapping):
        # inferFromVolume first: the defaults leave what an instancetype sets alone.
        spec, errors = await infer(spec, namespace=review.namespace, lookup=deps.objects)
        if errors:
            return deny(review.uid, kind=review.kind, name=review.name, errors=errors)
        spec = await with_preferred_storage_class(
            spec, namespace=review.namespace, lookup=deps.objects
        )
        return allow(review.uid, spec_patch(review.obj, default_vm_spec(spec, deps.defaults)))
    return allow(review.uid, mutate(review.kind, review.obj, deps.defaults))


async def _validate(deps: AppDeps, review: AdmissionRequest) -> dict[str, Any]:
    if review.operation not in ("CREATE", "UPDATE"):
        return allow(review.uid)
    errors = validate(review.kind, review.obj, old=review.old, limits=deps.limits)
    if review.operation == "CREATE" or review.obj.get("spec") != (review.old or {}).get("spec"):
        errors += gate_errors(review.kind, review.obj, deps.cluster())
        errors += state_errors(review.kind, review.obj, deps.cluster())
        errors += binding_errors(review.kind, review.obj, deps.cluster())
    is_new_migration = review.operation == "CREATE"
    if is_new_migration and review.kind == VirtualMachineInstanceMigration.KIND:
        errors += await migration_target_errors(
            review.obj, namespace=review.namespace, lookup=deps.lookup
        )
    old = review.old if review.operation == "UPDATE" else None
    errors += spec_changed(review.kind, review.obj, old)
    errors += backup_spec_changed(review.kind, review.obj, old)
    if review.kind == VirtualMachine.KIND and deps.objects and not errors:
        errors += await _vm_instancetype_errors(deps, review)
    if review.operation == "CREATE" and review.kind in SNAPSHOT_KINDS and deps.objects:
        errors += await lookup_errors(
            review.kind, review.obj, namespace=review.namespace, lookup=deps.objects
        )
    if not errors:
        return allow(review.uid)
    return deny(review.uid, kind=review.kind, name=review.name, errors=errors)


async def _vm_instancetype_errors(deps: AppDeps, review: AdmissionRequest) -> list[FieldError]:
    """A VM's instancetype and preference, when its spec changed (virt_api/admission/
    instancetypes.py); its own errors come first, so this runs on a VM valid otherwise."""
    if review.old is not None and review.obj.get("spec") == review.old.get("spec"):
        return []
    assert deps.objects is not None  # checked by the caller
    try:
        vm = VirtualMachine.from_dict(review.obj)
    except ParseError:
        return []
    return await instancetype_errors(
        vm, lookup=deps.objects, defaults=deps.defaults, limits=deps.limits
    )


async def _evict(deps: AppDeps, review: AdmissionRequest) -> dict[str, Any]:
    assert deps.evictions is not None  # the route exists only with it
    return await deps.evictions.admit(review)


def serving_context(serving: CertDir) -> ssl.SSLContext:
    """Our certificate; no client certificates (kube-apiserver calls webhooks without one)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(serving.cert), str(serving.key))
    return ctx


class AdmissionServer:
    """The webhook server; `bound_port` is known once `started` is set."""

    def __init__(
        self,
        config: AdmissionConfig,
        client: GetsPatches,
        registry: Registry,
        *,
        eviction_strategy: EvictionStrategy = EvictionStrategy.NONE,
        cluster: Callable[[], ClusterConfig] | None = None,
    ) -> None:
        self._config = config
        self._deps = AppDeps(
            defaults=config.defaults,
            limits=ValidationLimits(emulation=config.emulation),
            lookup=kube_lookup(client, timeout=config.lookup_timeout),
            objects=object_lookup(client, timeout=config.lookup_timeout),
            evictions=EvictionAdmitter(
                client=client,
                default=eviction_strategy,
                timeout=config.lookup_timeout,
                live_default=_live_eviction(cluster),
            ),
            cluster=cluster or ClusterConfig,
            requests=registry.counter(
                "kubevirt_admission_requests_total",
                "Admission reviews of VMs, VMIs, VMIMs and pod evictions, by webhook, kind "
                "and answer.",
                ("webhook", "kind", "allowed"),
            ),
        )
        self.bound_port: int | None = None
        self.started = asyncio.Event()

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve until `stop` is set (or until cancelled)."""
        cfg = self._config
        app = build_app(self._deps, max_body_bytes=cfg.max_body_bytes)
        runner = web.AppRunner(app, shutdown_timeout=cfg.shutdown_timeout)
        await runner.setup()
        try:
            # reuse_port: replicas sharing one host (process-mode nodes) share the port.
            tls = serving_context(cfg.serving)
            site = web.TCPSite(runner, cfg.host, cfg.port, ssl_context=tls, reuse_port=True)
            await site.start()
            self.bound_port = _bound_port(runner)
            log.info("admission_started", host=cfg.host, port=self.bound_port)
            self.started.set()
            await (stop.wait() if stop is not None else asyncio.Event().wait())
        finally:
            await runner.cleanup()
            log.info("admission_stopped")


def _live_eviction(
    cluster: Callable[[], ClusterConfig] | None,
) -> Callable[[], EvictionStrategy] | None:
    """The KubeVirt CR's evictionStrategy, read at each review (None: the flag's)."""
    if cluster is None:
        return None
    return lambda: cluster().eviction_strategy


def _bound_port(runner: web.AppRunner) -> int | None:
    for addr in runner.addresses:
        if isinstance(addr, tuple) and len(addr) >= 2:
            return int(addr[1])
    return None
