"""The VM's persistent-state claim (shared/vmstate.py), made before its launcher pod.

KubeVirt's backend storage: `persistent-state-for-<vm>`, 10Mi, Filesystem, ReadWriteMany
(KubeVirt's access mode when the class is named in the KubeVirt CR), of the CR's
vmStateStorageClass. It takes the VMI's owner references (its VM), so the garbage
collector deletes it with the VM and it outlives every stop/start; a VMI without a VM owns
its claim itself, which then goes with the VMI (KubeVirt's choice too). An existing claim
is kept as it is: the state in it is the VM's.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from controller.errors import SyncError
from shared import vmstate
from shared.kube import PVCS, AlreadyExists, ApiError, KubeClient, NotFound, TransportError
from shared.model import VirtualMachineInstance

log = structlog.get_logger("controller.vmi.vmstate")
TIMEOUT = 10.0
ACCESS_MODE = "ReadWriteMany"
CLAIM_LABEL = "persistent-state-for"  # KubeVirt's label: the VM's name
FAILED_REASON = "FailedPersistentStateClaim"


def claim_body(vmi: VirtualMachineInstance, *, storage_class: str) -> dict[str, Any] | None:
    """The state claim to make for the VMI, or None when it keeps no state."""
    name = vmstate.vmi_claim(vmi)
    if name is None:
        return None
    owners = [r.to_dict() for r in vmi.metadata.owner_references]
    if vmi.metadata.controller_ref() is None:
        owners = [vmi.controller_reference().to_dict()]
    ref = vmi.metadata.controller_ref()
    vm_name = ref.name if ref is not None and ref.name else vmi.name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": vmi.namespace,
            "labels": {CLAIM_LABEL: vm_name},
            "ownerReferences": owners,
        },
        "spec": {
            "accessModes": [ACCESS_MODE],
            "volumeMode": "Filesystem",
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": vmstate.CLAIM_SIZE}},
        },
    }


async def ensure_claim(
    client: KubeClient, vmi: VirtualMachineInstance, *, storage_class: str | None
) -> None:
    """Make the VMI's state claim when it keeps state and the claim does not exist yet;
    SyncError (Synchronized=False, retried) when no class is configured or the API fails."""
    name = vmstate.vmi_claim(vmi)
    if name is None:
        return
    if not storage_class:
        raise SyncError(FAILED_REASON, f"{vmstate.CLASS_FIELD} is not set in the KubeVirt CR")
    body = claim_body(vmi, storage_class=storage_class)
    assert body is not None
    try:
        async with asyncio.timeout(TIMEOUT):
            try:
                await client.get(PVCS, name, namespace=vmi.namespace)
                return
            except NotFound:
                await client.create(PVCS, body, namespace=vmi.namespace)
    except AlreadyExists:
        return
    except TimeoutError as e:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        raise SyncError(FAILED_REASON, f"PVC {vmi.namespace}/{name}: timed out") from e
    except (ApiError, TransportError) as e:
        raise SyncError(FAILED_REASON, f"PVC {vmi.namespace}/{name}: {e}") from e
    log.info("vm_state_claim_created", claim=name, storage_class=storage_class)
