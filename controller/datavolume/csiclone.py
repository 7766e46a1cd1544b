"""Whether a pvc-source DataVolume is cloned by its CSI driver (the claim's standard
`dataSource`) instead of a copy pod.

CDI decides by its StorageProfile's cloneStrategy; kubevirt-py by what the API shows: the
source claim and the new one in the same StorageClass, whose provisioner is a registered
CSI driver (a CSIDriver object of its name), binding Immediate (a WaitForFirstConsumer
clone would wait for a consumer the VM only makes once the DataVolume is done), the same
volumeMode, and no smaller than the source. Anything else is copied by the worker pod.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from shared.kube import CSIDRIVERS, PVCS, STORAGECLASSES, KubeClient, NotFound
from shared.model.datavolume import DataVolume
from shared.model.datavolume_spec import FILESYSTEM, Target
from shared.model.errors import QuantityError
from shared.model.quantity import parse_bytes

log = structlog.get_logger("controller.datavolume")

IO_TIMEOUT = 10.0
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


async def clone_source(client: KubeClient, dv: DataVolume, want: Target) -> dict[str, Any] | None:
    """The claim's dataSource for a CSI clone, or None: the copy pod clones."""
    name = dv.spec.source.pvc.name if dv.spec.source and dv.spec.source.pvc else None
    if not name:
        return None
    try:
        async with asyncio.timeout(IO_TIMEOUT):
            source = await client.get(PVCS, name, namespace=dv.namespace)
            classes = (await client.list_all(STORAGECLASSES)).items
            why = await _refusal(client, source, want, classes)
    except NotFound:
        return None  # the copy pod reports the missing source
    if why:
        log.info("csi_clone_not_used", reason=why)
        return None
    return {"kind": "PersistentVolumeClaim", "name": name}


async def _refusal(
    client: KubeClient,
    source: Mapping[str, Any],
    want: Target,
    classes: list[dict[str, Any]],
) -> str:
    spec = source.get("spec") or {}
    src_class = spec.get("storageClassName")
    new_class = want.claim_spec.get("storageClassName") or _default(classes)
    if not src_class or src_class != new_class:
        return f"StorageClass {new_class!r} differs from the source's {src_class!r}"
    sc = next((c for c in classes if (c.get("metadata") or {}).get("name") == src_class), None)
    if sc is None or sc.get("volumeBindingMode") == "WaitForFirstConsumer":
        return f"StorageClass {src_class!r} is missing or binds on first consumer"
    if (spec.get("volumeMode") or FILESYSTEM) != want.volume_mode:
        return "volumeMode differs from the source's"
    if want.size_bytes < (_request(spec) or 0):
        return "smaller than the source"
    try:
        await client.get(CSIDRIVERS, str(sc.get("provisioner") or ""))
    except NotFound:
        return f"provisioner {sc.get('provisioner')!r} is no CSI driver"
    return ""


def _default(classes: list[dict[str, Any]]) -> str | None:
    for c in classes:
        if (c.get("metadata") or {}).get("annotations", {}).get(DEFAULT_CLASS) == "true":
            return str(c["metadata"]["name"])
    return None


def _request(spec: Mapping[str, Any]) -> int | None:
    raw = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    try:
        return parse_bytes(raw) if raw is not None else None
    except QuantityError:
        return None
