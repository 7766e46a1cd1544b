"""Export decisions: Pending with KubeVirt's reason while the source cannot be served,
Ready with the internal links once the exporter pod is, Terminated once the TTL passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controller.export.bodies import Claim, exporter_pod, service, token_secret
from controller.export.logic import (
    IN_USE,
    POD_PENDING,
    TTL_EXPIRED,
    Blocked,
    World,
    expiry,
    plan_export,
)
from shared.model.export import ExportFormat, ExportPhase, VirtualMachineExport

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def vme(**spec: Any) -> VirtualMachineExport:
    return VirtualMachineExport.from_dict(
        {
            "metadata": {
                "name": "exp",
                "namespace": "ns",
                "uid": "u1",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"source": {"kind": "PersistentVolumeClaim", "name": "disk"}, **spec},
        }
    )


def world(**fields: Any) -> World:
    base: dict[str, Any] = {
        "claims": ("disk",),
        "token_secret": "export-token-exp",
        "service_name": "virt-export-exp",
        "host": "virt-export-exp.ns.svc",
        "ca_cert": "CA",
    }
    return World(**{**base, **fields})


def test_ready_pod_makes_the_export_ready_with_links() -> None:
    """A ready exporter: Ready, the CA and raw + gzip URLs per claim, the token Secret and
    Service named, and a requeue when the TTL (2h by default) ends."""
    plan = plan_export(vme(), world(pod_ready=True), now=CREATED + timedelta(minutes=1))
    status = plan.status
    assert status.phase is ExportPhase.READY and plan.want_pod
    assert status.token_secret_ref == "export-token-exp"
    assert status.service_name == "virt-export-exp"
    assert status.ttl_expiration_time == "2026-01-01T02:00:00Z"
    link = status.links.internal if status.links else None
    assert link is not None and link.cert == "CA"
    volume = link.volume("disk")
    assert volume is not None
    assert volume.url(ExportFormat.RAW) == "https://virt-export-exp.ns.svc/volumes/disk/disk.img"
    assert volume.url(ExportFormat.GZIP) == (
        "https://virt-export-exp.ns.svc/volumes/disk/disk.img.gz"
    )
    assert plan.requeue_after == 7140.0


def test_starting_pod_is_pending() -> None:
    """No pod yet, or not ready: Pending (PodPending), the pod wanted, polled each second."""
    for ready in (None, False):
        plan = plan_export(vme(), world(pod_ready=ready), now=CREATED)
        assert plan.status.phase is ExportPhase.PENDING and plan.want_pod
        assert plan.status.links is None
        cond = plan.status.condition("Ready")
        assert cond is not None and cond.reason == POD_PENDING and cond.status == "False"
        assert plan.requeue_after == 1.0


def test_claim_in_use_is_pending_with_the_reason_and_no_pod() -> None:
    """A claim a running VMI uses: Pending (InUse) naming the VMI; no exporter pod."""
    blocked = Blocked(reason=IN_USE, message="PersistentVolumeClaim disk is in use by VMI v")
    plan = plan_export(vme(), world(blocked=blocked, pod_ready=True), now=CREATED)
    assert plan.status.phase is ExportPhase.PENDING and not plan.want_pod
    cond = plan.status.condition("Ready")
    assert cond is not None and cond.reason == IN_USE and "in use by VMI v" in (cond.message or "")


def test_passed_ttl_terminates_and_drops_the_pod() -> None:
    """creationTimestamp + ttlDuration passed: Terminated (TTLExpired), no pod, no requeue."""
    export = vme(ttlDuration="10m")
    assert expiry(export) == CREATED + timedelta(minutes=10)
    plan = plan_export(export, world(pod_ready=True), now=CREATED + timedelta(minutes=10))
    assert plan.status.phase is ExportPhase.TERMINATED and not plan.want_pod
    cond = plan.status.condition("Ready")
    assert cond is not None and cond.reason == TTL_EXPIRED
    assert plan.requeue_after is None


def test_transition_time_kept_while_the_status_holds() -> None:
    """The Ready condition's lastTransitionTime moves only when its status changes."""
    first = plan_export(vme(), world(pod_ready=False), now=CREATED)
    again = plan_export(
        VirtualMachineExport(metadata=vme().metadata, spec=vme().spec, status=first.status),
        world(pod_ready=None),
        now=CREATED + timedelta(seconds=5),
    )
    cond = again.status.condition("Ready")
    assert cond is not None and cond.last_transition_time == "2026-01-01T00:00:00Z"


def test_bodies_are_owned_and_wired_as_kubevirts() -> None:
    """Pod, Service and token Secret are controlled by the export; the Service maps 443 to
    the exporter's 8443 by KubeVirt's label; claims mount read-only (Block as devices)."""
    export = vme()
    pod = exporter_pod(
        export,
        (Claim(name="disk"), Claim(name="raw", block=True)),
        token_secret_name="tok",
        image="img",
        pull_policy="Never",
    )
    svc = service(export)
    secret = token_secret(export, "export-token-exp")
    for body in (pod, svc, secret):
        (ref,) = body["metadata"]["ownerReferences"]
        assert ref["uid"] == "u1" and ref["controller"] is True
    assert svc["spec"]["ports"] == [
        {"name": "export", "protocol": "TCP", "port": 443, "targetPort": 8443}
    ]
    selector = svc["spec"]["selector"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    assert {"name": "volume-0", "mountPath": "/export-volumes/disk", "readOnly": True} in (
        container["volumeMounts"]
    )
    assert container["volumeDevices"] == [{"name": "volume-1", "devicePath": "/export-volumes/raw"}]
    claims = [
        v["persistentVolumeClaim"] for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v
    ]
    assert all(c["readOnly"] for c in claims)
    assert len(secret["data"]["token"]) > 20


def test_a_memory_dump_claim_is_linked_as_a_tar_gz_only() -> None:
    """A claim holding a memory dump (no disk): its one format is KubeVirt's archive
    (tar.gz of its files), so KubeVirt's virtctl memory-dump download picks it."""
    plan = plan_export(vme(), world(pod_ready=True, archives=frozenset({"disk"})), now=CREATED)
    link = plan.status.links.internal if plan.status.links else None
    volume = link.volume("disk") if link else None
    assert volume is not None
    assert [(f.format, f.url) for f in volume.formats] == [
        ("tar.gz", "https://virt-export-exp.ns.svc/volumes/disk/disk.tar.gz")
    ]
