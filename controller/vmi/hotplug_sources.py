"""What a hotplugged volume waits for before its attachment pod, per declared source.

A hotpluggable `persistentVolumeClaim` is attached as soon as its claim exists; a
hotpluggable `dataVolume` only once its DataVolume has Succeeded (KubeVirt's rule: its
claim exists from the start, but holds the disk only after the import, and the importer
pod may still hold it). One row per source, keyed by the model's typed source as the
volume declares it (`Volume.data_volume`, not the claim it resolves to):

    waiting = await not_ready(client, vmi)   # {volume name: why it waits}
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from shared.kube import DATAVOLUMES, KubeClient, NotFound
from shared.model import VirtualMachineInstance, Volume
from shared.model.datavolume import DataVolume, DataVolumePhase
from shared.model.volumes import DataVolumeVolumeSource, PersistentVolumeClaimSource

CALL_TIMEOUT = 10.0

# (client, namespace, the declared source) → None when ready, else why it waits.
Readiness = Callable[[KubeClient, str, Any], Awaitable[str | None]]


async def _claim_ready(_client: KubeClient, _ns: str, _source: Any) -> str | None:
    return None  # the claim's own state is plan_volume_status's business


async def _datavolume_ready(
    client: KubeClient, ns: str, source: DataVolumeVolumeSource
) -> str | None:
    where = f"DataVolume {ns}/{source.name}"
    try:
        async with asyncio.timeout(CALL_TIMEOUT):
            dv = DataVolume.from_dict(
                await client.get(DATAVOLUMES, source.name or "", namespace=ns)
            )
    except NotFound:
        return f"{where} does not exist"
    failure = dv.failure()
    if failure is not None:
        return f"{where} failed: {failure}"
    if dv.phase != DataVolumePhase.SUCCEEDED:
        return f"{where} is not ready ({dv.phase or 'Pending'})"
    return None


READINESS: Mapping[type[Any], Readiness] = {
    PersistentVolumeClaimSource: _claim_ready,
    DataVolumeVolumeSource: _datavolume_ready,
}


def declared(volume: Volume) -> PersistentVolumeClaimSource | DataVolumeVolumeSource | None:
    """The hotpluggable source as the volume declares it."""
    return volume.data_volume or volume.persistent_volume_claim


async def not_ready(
    client: KubeClient, vmi: VirtualMachineInstance, volumes: Mapping[str, Volume]
) -> dict[str, str]:
    """The hotplugged `volumes` whose source is not ready to attach, with why."""
    waiting: dict[str, str] = {}
    for name, volume in volumes.items():
        source = declared(volume)
        if source is None:
            continue
        why = await READINESS[type(source)](client, vmi.namespace or "", source)
        if why is not None:
            waiting[name] = why
    return waiting
