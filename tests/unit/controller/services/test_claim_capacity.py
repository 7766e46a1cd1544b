"""volumeStatus follows an expanded claim (controller.services.volumes.claims.resized_claims):
the controller's half of ExpandDisks; and a volume moved to another claim (volume
migration) is described again."""

from __future__ import annotations

from typing import Any, cast

from controller.services.volumes.claims import Claim, claim_volume_status, resized_claims
from shared.kube import KubeClient
from shared.model import PersistentVolumeClaimInfo, VirtualMachineInstance, VolumeStatus


def _claim(capacity: str, *, phase: str = "Bound") -> Claim:
    return Claim.from_dict(
        {
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"resources": {"requests": {"storage": capacity}}},
            "status": {"phase": phase, "capacity": {"storage": capacity}},
        }
    )


def _status(capacity: str) -> tuple[VolumeStatus, ...]:
    info = PersistentVolumeClaimInfo(
        claim_name="c", capacity={"storage": capacity}, requests={"storage": capacity}
    )
    return (
        VolumeStatus(name="data", target="vdb", persistent_volume_claim_info=info),
        VolumeStatus(name="cd", target="vda"),
    )


def test_a_grown_claim_updates_capacity_and_requests() -> None:
    """The claim grew to 128Mi: the entry's info says so, the other entry is kept."""
    out = resized_claims(_status("64Mi"), lambda name: _claim("128Mi") if name == "c" else None)
    assert out is not None
    info = out[0].persistent_volume_claim_info
    assert info is not None
    assert dict(info.capacity) == {"storage": "128Mi"}
    assert dict(info.requests) == {"storage": "128Mi"}
    assert out[1] == _status("64Mi")[1]
    assert Claim.from_dict({"metadata": {"name": "c", "namespace": "ns"}}).namespace == "ns"


def test_unchanged_unknown_or_unbound_claims_change_nothing() -> None:
    """Same capacity, a claim not in the cache, or one not Bound: None (no write)."""
    assert resized_claims(_status("64Mi"), lambda _: _claim("64Mi")) is None
    assert resized_claims(_status("64Mi"), lambda _: None) is None
    assert resized_claims(_status("64Mi"), lambda _: _claim("128Mi", phase="Lost")) is None


async def test_a_volume_moved_to_another_claim_is_described_again() -> None:
    """A volume migration points volume `data` at claim `d2`: its entry, still describing
    the old claim, is replaced by the new claim's info once that claim is bound."""

    class Claims:
        async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
            return {"metadata": {"name": name, "namespace": "ns"},
                    "spec": {"volumeMode": "Block"},
                    "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                               "capacity": {"storage": "1Gi"}}}  # fmt: skip

    vmi = VirtualMachineInstance.from_dict({
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d2"}}]},
    })  # fmt: skip
    out = await claim_volume_status(cast(KubeClient, Claims()), vmi, _status("64Mi"))
    assert out is not None
    (entry,) = [e for e in out if e.name == "data"]
    info = entry.persistent_volume_claim_info
    assert info is not None and (info.claim_name, info.volume_mode) == ("d2", "Block")
    assert entry.target == "vdb"
    assert await claim_volume_status(cast(KubeClient, Claims()), vmi, out) is None
