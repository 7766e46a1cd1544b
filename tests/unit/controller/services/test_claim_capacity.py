"""volumeStatus follows an expanded claim (controller.services.volumes.claims.resized_claims):
the controller's half of ExpandDisks."""

from __future__ import annotations

from controller.services.volumes.claims import Claim, resized_claims
from shared.model import PersistentVolumeClaimInfo, VolumeStatus


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
