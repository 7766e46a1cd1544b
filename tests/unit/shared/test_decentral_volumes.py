"""A decentralized migration copies the guest's claim volumes (shared/volumemigration.py):
on the sending VMI once its migrationState names another VMI as target, on the receiving
VMI while it waits for the guest; never hotplugged claims nor other sources, and nothing
once the migration ended or for an ordinary migration."""

from __future__ import annotations

from typing import Any

from shared.model import VirtualMachineInstance
from shared.volumemigration import decentral_volumes, destination_claims, migrated_volumes

VOLUMES = [
    {"name": "root", "containerDisk": {"image": "x"}},
    {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
    {"name": "dv", "dataVolume": {"name": "d"}},
    {"name": "hot", "persistentVolumeClaim": {"claimName": "h", "hotpluggable": True}},
]


def _vmi(
    *, state: dict[str, Any] | None = None, phase: str = "Running", receiver: bool = False
) -> VirtualMachineInstance:
    meta: dict[str, Any] = {"name": "vm1", "namespace": "ns-a"}
    if receiver:
        meta["annotations"] = {"kubevirt.io/decentralized-receiver": "true"}
    status: dict[str, Any] = {"phase": phase}
    if state is not None:
        status["migrationState"] = state
    return VirtualMachineInstance.from_dict(
        {"metadata": meta, "spec": {"volumes": VOLUMES}, "status": status}
    )


def _to(namespace: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"migrationUid": "u", "targetState": {"domainName": name,
            "domainNamespace": namespace}, **extra}  # fmt: skip


def test_a_sending_vmi_handed_off_to_another_vmi_copies_its_claims() -> None:
    """The source's migrationState names VMI ns-b/vm1: data and dv are copied (also what
    the handler's migrate names), not the containerDisk nor the hotplugged claim."""
    sending = _vmi(state=_to("ns-b", "vm1"))
    assert decentral_volumes(sending) == {"data", "dv"}
    assert migrated_volumes(sending) == {"data", "dv"}


def test_an_ordinary_or_ended_migration_copies_no_claim() -> None:
    """The target names the VMI itself (an ordinary migration), no migration, or the
    decentralized one completed or failed: nothing is copied."""
    assert not migrated_volumes(_vmi(state=_to("ns-a", "vm1")))
    assert not migrated_volumes(_vmi())
    assert not migrated_volumes(_vmi(state=_to("ns-b", "vm1", completed=True)))
    assert not migrated_volumes(_vmi(state=_to("ns-b", "vm1", failed=True)))


def test_a_waiting_receiving_vmi_makes_its_claims_to_be_copied_into() -> None:
    """A receiving VMI WaitingForSync (or not yet phased): its claims are the copy's
    destination; once Running (a later migration of it) they are its own again."""
    assert migrated_volumes(_vmi(receiver=True, phase="WaitingForSync")) == {"data", "dv"}
    assert migrated_volumes(_vmi(receiver=True, phase="")) == {"data", "dv"}
    assert not migrated_volumes(_vmi(receiver=True, phase="Running"))


def test_the_target_pod_sizes_the_receiving_vmis_claims() -> None:
    """The claims whose disk a migration target makes (their sizes go to its pod): a
    waiting receiving VMI's claims c and d (data's and dv's), not the hotplugged one;
    none for an ordinary running VMI."""
    assert destination_claims(_vmi(receiver=True, phase="WaitingForSync")) == {"c", "d"}
    assert not destination_claims(_vmi())
