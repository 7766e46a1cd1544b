"""The status the handler computes (handler.status): owned fields only, stable timestamps."""

from __future__ import annotations

import dataclasses

import pytest

from handler.domains import DomainRecord
from handler.errors import SyncError, SyncReason
from handler.phase import Failure, FailureReason, Verdict
from handler.status import Observed, live_migratable, next_status, with_guest_interfaces
from shared.model import (
    ConditionStatus,
    GuestOSInfo,
    VirtualMachineInstance,
    VMICondition,
    VMIConditionType,
    VMIInterfaceStatus,
    VMIPhase,
)
from shared.wire.domain import AccessCredentialStatus, DomainState
from tests.unit.handler.fakes import domain_status, vmi_dict

ACS = VMIConditionType.ACCESS_CREDENTIALS_SYNCHRONIZED
T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def _running(
    raw: dict[str, object] | None = None, **domain: object
) -> tuple[VirtualMachineInstance, Observed]:
    raw = raw or vmi_dict()
    vmi = VirtualMachineInstance.from_dict(raw)
    record = DomainRecord(status=domain_status(raw, **domain), source="t")  # type: ignore[arg-type]
    return vmi, Observed(domain=record, verdict=Verdict(phase=VMIPhase.RUNNING))


def test_first_running_status_has_phase_conditions_and_interfaces() -> None:
    """Scheduled → Running: transition timestamp, Ready, LiveMigratable, interfaces."""
    vmi, obs = _running()
    status = next_status(vmi, obs, now=T0)
    assert status.phase is VMIPhase.RUNNING
    assert [
        (t.phase, t.phase_transition_timestamp) for t in status.phase_transition_timestamps
    ] == [("Running", T0)]
    assert {str(c.type): c.status for c in status.conditions} == {
        "Ready": ConditionStatus.TRUE,
        "LiveMigratable": ConditionStatus.TRUE,
    }
    assert status.condition(VMIConditionType.READY).last_transition_time == T0  # type: ignore[union-attr]
    assert [i.name for i in status.interfaces] == ["default"]
    assert status.active_pods == vmi.status.active_pods and status.node_name == "node01"


def test_recomputing_an_unchanged_status_is_identical() -> None:
    """Same observation later: equal status (timestamps kept), so no write happens."""
    vmi, obs = _running()
    first = next_status(vmi, obs, now=T0)
    again = next_status(dataclasses.replace(vmi, status=first), obs, now=T1)
    assert again == first


def test_controller_conditions_survive() -> None:
    """Conditions the handler does not own are carried over untouched."""
    vmi, obs = _running()
    foreign = VMICondition(type="Provisioning", status=ConditionStatus.FALSE, reason="Done")
    vmi = dataclasses.replace(vmi, status=vmi.status.with_condition(foreign))
    assert next_status(vmi, obs, now=T0).condition("Provisioning") == foreign


def test_a_condition_differing_only_in_wording_is_left_alone() -> None:
    """Ready=False(PodTerminating) written by the controller with its own message is kept:
    no write war over the wording while the pod terminates."""
    vmi, _ = _running()
    theirs = VMICondition(
        type=VMIConditionType.READY,
        status=ConditionStatus.FALSE,
        reason="PodTerminating",
        message="the launcher pod on node01 is terminating",
        last_transition_time=T0,
    )
    vmi = dataclasses.replace(vmi, status=vmi.status.with_condition(theirs))
    record = DomainRecord(status=domain_status(vmi_dict(), graceful_shutdown=True), source="t")
    obs = Observed(domain=record, verdict=Verdict(phase=VMIPhase.RUNNING), stopping=True)
    assert next_status(vmi, obs, now=T1).condition(VMIConditionType.READY) == theirs


def test_paused_domain_sets_paused_and_unready() -> None:
    """Paused(User): Paused=True(PausedByUser), Ready=False(Paused) with a new transition time."""
    vmi, obs = _running()
    vmi = dataclasses.replace(vmi, status=next_status(vmi, obs, now=T0))
    _, paused = _running(state=DomainState.PAUSED, reason="User")
    status = next_status(vmi, paused, now=T1)
    cond = status.condition(VMIConditionType.PAUSED)
    assert cond is not None and (cond.status, cond.reason) == (ConditionStatus.TRUE, "PausedByUser")
    ready = status.condition(VMIConditionType.READY)
    assert ready is not None and (ready.status, ready.last_transition_time) == (
        ConditionStatus.FALSE,
        T1,
    )


def test_pauses_libvirt_makes_by_itself_are_not_user_pauses() -> None:
    """Paused(StartingUp) or Paused(Migration) is neither Paused=True nor unready."""
    vmi, obs = _running(state=DomainState.PAUSED, reason="Migration")
    status = next_status(vmi, obs, now=T0)
    assert status.condition(VMIConditionType.PAUSED) is None
    assert status.condition_is_true(VMIConditionType.READY)


def test_agent_and_guest_info() -> None:
    """An agent brings AgentConnected=True and guestOSInfo."""
    vmi, obs = _running(agent_connected=True)
    info = GuestOSInfo(name="BusyBox", id="busybox")
    status = next_status(vmi, dataclasses.replace(obs, guest_info=info), now=T0)
    assert status.condition_is_true(VMIConditionType.AGENT_CONNECTED)
    assert status.guest_os_info == info


def test_access_credentials_condition_follows_the_launcher() -> None:
    """The launcher's last credential sync becomes AccessCredentialsSynchronized: True,
    then False with the failure's message (KubeVirt's: no reason), the message updated when
    the failure changes; none when the launcher has nothing to sync."""
    vmi, obs = _running()
    assert next_status(vmi, obs, now=T0).condition(ACS) is None
    vmi, obs = _running(access_credential=AccessCredentialStatus(succeeded=True))
    status = next_status(vmi, obs, now=T0)
    cond = status.condition(ACS)
    assert cond is not None and (cond.status, cond.reason, cond.message) == (
        ConditionStatus.TRUE,
        None,
        None,
    )
    failed = AccessCredentialStatus(succeeded=False, message="Guest agent is offline")
    _, obs = _running(access_credential=failed)
    status = next_status(dataclasses.replace(vmi, status=status), obs, now=T1)
    cond = status.condition(ACS)
    assert cond is not None and (cond.status, cond.message, cond.last_transition_time) == (
        ConditionStatus.FALSE,
        "Guest agent is offline",
        T1,
    )
    other = AccessCredentialStatus(succeeded=False, message="Error encountered setting password")
    _, obs = _running(access_credential=other)
    status = next_status(dataclasses.replace(vmi, status=status), obs, now=T1)
    cond = status.condition(ACS)
    assert cond is not None and cond.message == "Error encountered setting password"


def test_final_status_drops_live_conditions() -> None:
    """Failed: reason set, Ready=False with the failure's message, no Paused/AgentConnected."""
    vmi, obs = _running(agent_connected=True)
    vmi = dataclasses.replace(vmi, status=next_status(vmi, obs, now=T0))
    failure = Failure(reason=FailureReason.QEMU_DIED, message="QEMU stopped")
    off = DomainRecord(status=domain_status(vmi_dict(), DomainState.SHUTOFF, "Failed"), source="t")
    status = next_status(
        vmi, Observed(domain=off, verdict=Verdict(phase=VMIPhase.FAILED, failure=failure)), now=T1
    )
    assert (status.phase, status.reason) == (VMIPhase.FAILED, "QemuDied")
    ready = status.condition(VMIConditionType.READY)
    assert ready is not None and (ready.status, ready.message) == (
        ConditionStatus.FALSE,
        "QEMU stopped",
    )
    assert status.condition(VMIConditionType.AGENT_CONNECTED) is None


def test_sync_error_becomes_synchronized_false() -> None:
    """A SyncError's reason and message are the Synchronized condition's."""
    vmi = VirtualMachineInstance.from_dict(vmi_dict())
    error = SyncError(SyncReason.IMAGE_NOT_FOUND, "sync: no such image")
    status = next_status(
        vmi,
        Observed(domain=None, verdict=Verdict(phase=VMIPhase.SCHEDULED), sync_error=error),
        now=T0,
    )
    cond = status.condition(VMIConditionType.SYNCHRONIZED)
    assert cond is not None and (cond.status, cond.reason, cond.message) == (
        ConditionStatus.FALSE,
        "ImageNotFound",
        "sync: no such image",
    )


def test_live_migratable_explains_what_blocks_it() -> None:
    """Bridge on the pod network, or a hostDisk: LiveMigratable=False with KubeVirt's reason."""
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["interfaces"] = [{"name": "default", "bridge": {}}]
    bridge = live_migratable(VirtualMachineInstance.from_dict(raw))
    assert (bridge.status, bridge.reason) == (ConditionStatus.FALSE, "InterfaceNotLiveMigratable")
    raw = vmi_dict()
    raw["spec"]["volumes"].append({"name": "data", "hostDisk": {"path": "/d.img", "type": "Disk"}})
    disk = live_migratable(VirtualMachineInstance.from_dict(raw))
    assert (disk.status, disk.reason) == (ConditionStatus.FALSE, "DisksNotLiveMigratable")
    assert "data" in (disk.message or "")


def test_a_shared_host_disk_is_live_migratable() -> None:
    """hostDisk.shared: true (a path every node sees) no longer blocks migration."""
    raw = vmi_dict()
    source = {"path": "/d.img", "type": "Disk", "shared": True}
    raw["spec"]["volumes"].append({"name": "data", "hostDisk": source})
    cond = live_migratable(VirtualMachineInstance.from_dict(raw))
    assert cond.status == ConditionStatus.TRUE


def test_an_ephemeral_volume_blocks_migration() -> None:
    """An ephemeral volume's overlay is local to the pod: DisksNotLiveMigratable naming it."""
    raw = vmi_dict()
    source = {"persistentVolumeClaim": {"claimName": "golden"}}
    raw["spec"]["volumes"].append({"name": "base", "ephemeral": source})
    cond = live_migratable(VirtualMachineInstance.from_dict(raw))
    assert (cond.status, cond.reason) == (ConditionStatus.FALSE, "DisksNotLiveMigratable")
    assert "ephemeral volume (volume base)" in (cond.message or "")


def test_dedicated_cpus_are_not_live_migratable() -> None:
    """Pinned vCPUs: LiveMigratable=False, DedicatedCPUsNotLiveMigratable (a target would
    need its own exclusive CPUs pinned)."""
    raw = vmi_dict()
    raw["spec"]["domain"]["cpu"] = {"dedicatedCpuPlacement": True}
    cond = live_migratable(VirtualMachineInstance.from_dict(raw))
    assert (cond.status, cond.reason) == (ConditionStatus.FALSE, "DedicatedCPUsNotLiveMigratable")


def test_virtiofs_filesystems_are_not_live_migratable() -> None:
    """A virtiofs share: LiveMigratable=False, VirtIOFSNotLiveMigratable (KubeVirt's: its
    virtiofsd and what it serves are not carried to a target)."""
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["filesystems"] = [{"name": "cfg", "virtiofs": {}}]
    cond = live_migratable(VirtualMachineInstance.from_dict(raw))
    assert (cond.status, cond.reason) == (ConditionStatus.FALSE, "VirtIOFSNotLiveMigratable")


def _on_claim(access_modes: list[str] | None) -> VirtualMachineInstance:
    raw = vmi_dict()
    raw["spec"]["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "pvc1"}})
    if access_modes is not None:
        info = {"claimName": "pvc1", "accessModes": access_modes}
        raw["status"]["volumeStatus"] = [
            {"name": "data", "target": "", "persistentVolumeClaimInfo": info}
        ]
    return VirtualMachineInstance.from_dict(raw)


def test_a_read_write_many_claim_is_shared_and_migratable() -> None:
    """A claim whose bound volume is ReadWriteMany is shared storage: LiveMigratable=True."""
    cond = live_migratable(_on_claim(["ReadWriteMany"]))
    assert cond.status == ConditionStatus.TRUE


@pytest.mark.parametrize(
    ("modes", "text"),
    [
        pytest.param(
            ["ReadWriteOnce"],
            "cannot migrate VMI: PVC pvc1 is not shared (ReadWriteOnce), live migration "
            "requires that all PVCs must be shared (using ReadWriteMany access mode)",
            id="rwo",
        ),
        pytest.param(
            None,
            "cannot migrate VMI: Unable to determine if PVC pvc1 is shared, live migration "
            "requires that all PVCs must be shared (using ReadWriteMany access mode)",
            id="unknown",
        ),
    ],
)
def test_a_claim_not_known_shared_blocks_migration(modes: list[str] | None, text: str) -> None:
    """A ReadWriteOnce claim, or one the controller has not described yet: LiveMigratable
    False, DisksNotLiveMigratable, KubeVirt's message naming the claim."""
    cond = live_migratable(_on_claim(modes))
    assert (cond.status, cond.reason, cond.message) == (
        ConditionStatus.FALSE,
        "DisksNotLiveMigratable",
        text,
    )


def test_guest_agent_interfaces_fill_names_and_addresses_masquerade_keeps_the_pod_ip() -> None:
    """The agent's guest-side name reaches every matched interface (infoSource "domain,
    guest-agent"); a masquerade interface keeps the pod IP it is reached at, a bridge one
    takes the guest's addresses; the guest's other interfaces are listed as "guest-agent".
    A passt interface keeps both pod IPs (the guest's SLAAC and link-local addresses the
    agent lists are not where it is reached)."""
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["interfaces"] = [
        {"name": "default", "masquerade": {}},
        {"name": "br", "bridge": {}},
    ]
    raw["spec"]["networks"] = [{"name": "default", "pod": {}}, {"name": "br", "pod": {}}]
    vmi = VirtualMachineInstance.from_dict(raw)
    current = vmi.interface_statuses(pod_ip="198.18.1.5")
    guest = (
        VMIInterfaceStatus(name="default", interface_name="eth0", ip_address="10.0.2.15",
                           ip_addresses=("10.0.2.15",), info_source="guest-agent"),
        VMIInterfaceStatus(name="br", interface_name="eth1", ip_address="192.0.2.7",
                           ip_addresses=("192.0.2.7",), info_source="guest-agent"),
        VMIInterfaceStatus(interface_name="docker0", ip_address="172.17.0.1",
                           ip_addresses=("172.17.0.1",), info_source="guest-agent"),
    )  # fmt: skip
    nat, br, extra = with_guest_interfaces(vmi, current, guest)
    assert (nat.interface_name, nat.ip_address, nat.info_source) == (
        "eth0", "198.18.1.5", "domain, guest-agent")  # fmt: skip
    assert (br.interface_name, br.ip_addresses) == ("eth1", ("192.0.2.7",))
    assert (extra.interface_name, extra.info_source) == ("docker0", "guest-agent")
    again = with_guest_interfaces(vmi, (nat, br, extra), guest)
    assert again == (nat, br, extra)  # stable: an idle resync writes nothing
    raw["spec"]["domain"]["devices"]["interfaces"] = [
        {"name": "default", "binding": {"name": "passt"}}
    ]
    raw["spec"]["networks"] = [{"name": "default", "pod": {}}]
    passt = VirtualMachineInstance.from_dict(raw)
    pod_ips = ("198.18.1.5", "fd0d:4a03:aeea:1::5")
    agent = VMIInterfaceStatus(
        name="default", interface_name="eth0", ip_address="198.18.1.5",
        ip_addresses=("198.18.1.5", "fd0d:4a03:aeea:1::5", "fd0d:4a03:aeea:1:0:ff:fe00:1"),
        info_source="guest-agent",
    )  # fmt: skip
    (kept,) = with_guest_interfaces(
        passt, passt.interface_statuses(pod_ip=pod_ips[0], pod_ips=pod_ips), (agent,)
    )
    assert (kept.interface_name, kept.ip_addresses, kept.info_source) == (
        "eth0", pod_ips, "domain, guest-agent")  # fmt: skip


def test_fs_freeze_status_follows_the_launcher() -> None:
    """status.fsFreezeStatus is "frozen" while the launcher reports frozen filesystems, and
    gone again once they are thawed."""
    vmi, obs = _running(fs_frozen=True)
    frozen = next_status(vmi, obs, now=T0)
    assert frozen.fs_freeze_status == "frozen"
    vmi = dataclasses.replace(vmi, status=frozen)
    _, thawed_obs = _running(fs_frozen=False)
    assert next_status(vmi, thawed_obs, now=T1).fs_freeze_status is None


def test_a_probed_vmi_leaves_ready_to_the_controller_while_running() -> None:
    """With a readinessProbe the running guest's Ready is the pod's (the controller copies
    it): the handler writes no Ready=True, but still Ready=False when paused."""
    raw = vmi_dict()
    raw["spec"]["readinessProbe"] = {"tcpSocket": {"port": 80}}
    vmi, obs = _running(raw)
    status = next_status(vmi, obs, now=T0)
    assert status.condition(VMIConditionType.READY) is None
    _, paused = _running(raw, state=DomainState.PAUSED, reason="User")
    ready = next_status(vmi, paused, now=T1).condition(VMIConditionType.READY)
    assert ready is not None and ready.status == ConditionStatus.FALSE


def test_a_probed_vmi_unpaused_hands_ready_back_to_the_controller() -> None:
    """After Ready=False(Paused), an unpaused probed guest's Ready is removed (not set
    True): the controller copies the pod's readiness again."""
    raw = vmi_dict()
    raw["spec"]["readinessProbe"] = {"tcpSocket": {"port": 80}}
    vmi, _ = _running(raw)
    _, paused = _running(raw, state=DomainState.PAUSED, reason="User")
    vmi = dataclasses.replace(vmi, status=next_status(vmi, paused, now=T0))
    _, running = _running(raw)
    assert next_status(vmi, running, now=T1).condition(VMIConditionType.READY) is None


def test_a_claim_being_volume_migrated_does_not_block_migration() -> None:
    """A ReadWriteOnce claim named in migratedVolumes while VolumesChange=True is copied
    by the migration, so it does not block it; once the change is over it does again."""
    raw = _on_claim(["ReadWriteOnce"]).to_dict()
    dest = {"claimName": "pvc1"}  # the spec names the destination already
    raw["status"]["migratedVolumes"] = [{"volumeName": "data", "destinationPVCInfo": dest}]
    done = VirtualMachineInstance.from_dict(raw)
    assert live_migratable(done).status == ConditionStatus.FALSE
    raw["status"]["conditions"] = [{"type": "VolumesChange", "status": "True"}]
    assert live_migratable(VirtualMachineInstance.from_dict(raw)).status == ConditionStatus.TRUE
