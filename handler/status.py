"""The VMI status the handler wants, computed from what it observed (pure).

Only what the handler owns is touched: phase (from Scheduled on), reason,
phaseTransitionTimestamps, interfaces (the guest agent's names and addresses),
guestOSInfo, fsFreezeStatus, and the conditions
Ready, Paused, AgentConnected, AccessCredentialsSynchronized (the launcher's last sync of
guest-agent credentials), LiveMigratable and Synchronized. Everything else —
nodeName, activePods, the controller's conditions — is carried over unchanged, and an
unchanged condition keeps its timestamps, so an idle resync computes an identical status
and the status writer skips the write. volumeStatus entries of hotplugged volumes are
advanced by handler/hotplug (MountedToPod, Ready; dropped once detached) and written with
the rest by the reconcile loop. `still_applies` guards the writer's conflict retry:
a VMI someone else made final, or a new VMI of the same name, is never written over.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from handler.domains import DomainRecord
from handler.errors import Superseded, SyncError
from handler.phase import Verdict, user_paused
from shared import vmstate
from shared.model import (
    ConditionReason,
    ConditionStatus,
    GuestOSInfo,
    PhaseTransition,
    VirtualMachineInstance,
    VMICondition,
    VMIConditionType,
    VMIInterfaceStatus,
    VMIPhase,
    VMIStatus,
    Volume,
)
from shared.netbinding import BindingPlugin, plugin_of
from shared.volumemigration import migrated_volumes

GUEST_PAUSED = "Paused"
_HANDLER_NOT_READY = frozenset({GUEST_PAUSED, str(ConditionReason.POD_TERMINATING)})
_PAUSE_REASONS = {
    "User": ConditionReason.PAUSED_BY_USER,
    "IOError": ConditionReason.PAUSED_IO_ERROR,
}
_RWX_RULE = "live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"
_OWNED_LIVE = (VMIConditionType.READY, VMIConditionType.PAUSED, VMIConditionType.AGENT_CONNECTED)


@dataclass(frozen=True, slots=True, kw_only=True)
class Observed:
    """What one reconcile learned about a VMI's guest."""

    domain: DomainRecord | None
    verdict: Verdict
    stopping: bool = False
    sync_error: SyncError | None = None
    guest_info: GuestOSInfo | None = None
    guest_interfaces: tuple[VMIInterfaceStatus, ...] | None = None  # None: agent not asked
    plugins: tuple[BindingPlugin, ...] = ()  # the KubeVirt CR's network binding plugins


def next_status(vmi: VirtualMachineInstance, obs: Observed, *, now: str) -> VMIStatus:
    """vmi.status as the handler wants it; equal to vmi.status when nothing changed."""
    status = vmi.status
    phase = obs.verdict.phase
    if phase != status.phase_or_unset:
        stamp = PhaseTransition(phase=str(phase), phase_transition_timestamp=now)
        status = dataclasses.replace(
            status,
            phase=phase,
            phase_transition_timestamps=(*status.phase_transition_timestamps, stamp),
        )
    if obs.verdict.failure is not None:
        status = dataclasses.replace(status, reason=str(obs.verdict.failure.reason))
    if phase is VMIPhase.RUNNING and not status.interfaces:
        status = dataclasses.replace(status, interfaces=spec_interfaces(vmi))
    if phase is VMIPhase.RUNNING and obs.guest_interfaces is not None:
        merged = with_guest_interfaces(vmi, status.interfaces, obs.guest_interfaces)
        if merged != status.interfaces:
            status = dataclasses.replace(status, interfaces=merged)
    frozen = "frozen" if phase is VMIPhase.RUNNING and _fs_frozen(obs.domain) else None
    if frozen != status.fs_freeze_status:
        status = dataclasses.replace(status, fs_freeze_status=frozen)
    if obs.guest_info is not None and obs.guest_info != status.guest_os_info:
        status = dataclasses.replace(status, guest_os_info=obs.guest_info)
    for type_, cond in wanted_conditions(vmi, obs).items():
        status = _put(status, type_, cond, now=now)
    return status


def wanted_conditions(vmi: VirtualMachineInstance, obs: Observed) -> dict[str, VMICondition | None]:
    """Condition type → the condition wanted (None: remove it); absent types stay as they are."""
    out: dict[str, VMICondition | None] = {
        VMIConditionType.SYNCHRONIZED: _synchronized(obs.sync_error),
    }
    phase = obs.verdict.phase
    if phase.is_final():
        message = obs.verdict.failure.message if obs.verdict.failure else "the guest has stopped"
        out[VMIConditionType.READY] = _false(
            VMIConditionType.READY, ConditionReason.GUEST_NOT_RUNNING, message
        )
        out[VMIConditionType.PAUSED] = None
        out[VMIConditionType.AGENT_CONNECTED] = None
        return out
    if phase is not VMIPhase.RUNNING:
        return out
    out[VMIConditionType.LIVE_MIGRATABLE] = live_migratable(vmi, plugins=obs.plugins)
    if obs.domain is not None and not obs.domain.is_off:
        live = _live(obs.domain, stopping=obs.stopping)
        ready = live.get(VMIConditionType.READY)
        if vmi.spec.readiness_probe is not None and ready is not None and ready.is_true:
            # The probe's: the controller copies the pod's. A False of ours (paused,
            # stopping) is dropped so the controller takes Ready over again.
            current = vmi.status.condition(VMIConditionType.READY)
            if (
                current is not None
                and not current.is_true
                and str(current.reason) in _HANDLER_NOT_READY
            ):
                live[VMIConditionType.READY] = None
            else:
                del live[VMIConditionType.READY]
        out.update(live)
    return out


def _live(domain: DomainRecord, *, stopping: bool) -> dict[str, VMICondition | None]:
    st = domain.status
    paused = user_paused(domain)
    out: dict[str, VMICondition | None] = dict.fromkeys(_OWNED_LIVE)
    if stopping:
        out[VMIConditionType.READY] = _false(
            VMIConditionType.READY, ConditionReason.POD_TERMINATING, "the VMI is shutting down"
        )
    elif paused:
        out[VMIConditionType.READY] = _false(
            VMIConditionType.READY, GUEST_PAUSED, "the guest is paused"
        )
    else:
        out[VMIConditionType.READY] = VMICondition(
            type=VMIConditionType.READY, status=ConditionStatus.TRUE
        )
    if paused:
        out[VMIConditionType.PAUSED] = VMICondition(
            type=VMIConditionType.PAUSED,
            status=ConditionStatus.TRUE,
            reason=_PAUSE_REASONS.get(st.reason, st.reason or None),
            message=f"the domain is paused ({st.reason})" if st.reason else None,
        )
    if st.agent_connected:
        out[VMIConditionType.AGENT_CONNECTED] = VMICondition(
            type=VMIConditionType.AGENT_CONNECTED, status=ConditionStatus.TRUE
        )
    if st.access_credential is not None:  # KubeVirt's: no reason, the failure's message
        ok = st.access_credential.succeeded
        out[VMIConditionType.ACCESS_CREDENTIALS_SYNCHRONIZED] = VMICondition(
            type=VMIConditionType.ACCESS_CREDENTIALS_SYNCHRONIZED,
            status=ConditionStatus.TRUE if ok else ConditionStatus.FALSE,
            message=st.access_credential.message or None,
        )
    return out


# KubeVirt's message (its annotation allowing a pod-bridge migration is not built here).
NOT_MIGRATABLE_INTERFACE = (
    "cannot migrate VMI which does not use masquerade, bridge with "
    "kubevirt.io/allow-pod-bridge-network-live-migration VM annotation or a migratable "
    "plugin to connect to the pod network"
)


def live_migratable(
    vmi: VirtualMachineInstance, *, plugins: Sequence[BindingPlugin] = ()
) -> VMICondition:
    """LiveMigratable: True, or False with KubeVirt's reason and what blocks it (a binding
    plugin on the pod network migrates when the KubeVirt CR gives it `migration`)."""
    for iface in vmi.spec.domain.devices.interfaces:
        net = vmi.spec.network(iface.name or "")
        on_pod = net is not None and net.primary
        plugin = plugin_of(plugins, iface)
        stays = plugin is not None and not plugin.native and not plugin.migratable
        # passt migrates (KubeVirt 1.8): the target launcher starts its own passt keeping
        # the guest's address (launcher/passt.py); a bridge on the pod network does not.
        if on_pod and (iface.bridge is not None or stays):
            return _false(
                VMIConditionType.LIVE_MIGRATABLE,
                ConditionReason.INTERFACE_NOT_MIGRATABLE,
                NOT_MIGRATABLE_INTERFACE,
            )
    if (state := vmstate.vmi_claim(vmi)) is not None and (
        why := _claim_not_shared(vmi, volume=state, claim=state)
    ):
        return _false(VMIConditionType.LIVE_MIGRATABLE, ConditionReason.DISKS_NOT_MIGRATABLE, why)
    if (blocked := _node_bound(vmi)) is not None:
        return blocked
    hotplugged = next((v for v in vmi.spec.volumes if v.is_hotplug), None)
    if hotplugged is not None:
        return _false(
            VMIConditionType.LIVE_MIGRATABLE,
            ConditionReason.HOTPLUG_NOT_MIGRATABLE,
            f"volume {hotplugged.name} is hotplugged",
        )
    copied = migrated_volumes(vmi)  # a volume migration copies them: not shared
    for vol in vmi.spec.volumes:
        why = None if vol.name in copied else _disk_not_migratable(vmi, vol)
        if why is not None:
            return _false(
                VMIConditionType.LIVE_MIGRATABLE, ConditionReason.DISKS_NOT_MIGRATABLE, why
            )
    return VMICondition(type=VMIConditionType.LIVE_MIGRATABLE, status=ConditionStatus.TRUE)


def _node_bound(vmi: VirtualMachineInstance) -> VMICondition | None:
    """LiveMigratable False for what stays bound to this node's pod: pinned vCPUs and
    virtiofsd processes (KubeVirt's reasons), else None."""
    if vmi.spec.domain.cpu.dedicated_cpu_placement:
        return _false(
            VMIConditionType.LIVE_MIGRATABLE,
            ConditionReason.DEDICATED_CPUS_NOT_MIGRATABLE,
            "vCPUs pinned to this node's exclusive CPUs are not re-pinned on a target",
        )
    if vmi.spec.domain.devices.filesystems:
        return _false(
            VMIConditionType.LIVE_MIGRATABLE,
            ConditionReason.VIRTIOFS_NOT_MIGRATABLE,
            "a virtiofs filesystem's virtiofsd is not carried to a target",
        )
    return None


def _disk_not_migratable(vmi: VirtualMachineInstance, vol: Volume) -> str | None:
    """Why this volume keeps the VMI where it is (KubeVirt's rule and wording), or None.

    A claim is shared when its bound volume is ReadWriteMany (status.volumeStatus, filled
    by the controller from the claim's status.accessModes): both launchers open the same
    disk.img and the migration copies nothing of it; so is a hostDisk marked `shared`. Any
    other claim, and any other hostDisk, is on one node only, and so is an ephemeral
    volume's overlay. Disks the launcher makes
    (containerDisk overlay, emptyDisk, cloud-init and config ISOs) are local and travel
    or are made again on the target."""
    if vol.host_disk is not None:  # shared: a path every node sees
        why = f"cannot migrate VMI with non-shared HostDisk (volume {vol.name})"
        return None if vol.host_disk.shared else why
    if vol.ephemeral is not None:  # its overlay's backing claim is not carried over
        return f"cannot migrate VMI with an ephemeral volume (volume {vol.name})"
    claim = vol.claim
    if claim is None:
        return None
    return _claim_not_shared(vmi, volume=vol.name or "", claim=claim.claim_name or "")


def _claim_not_shared(vmi: VirtualMachineInstance, *, volume: str, claim: str) -> str | None:
    """Why the claim of `volume` (volumeStatus' entry) is not shared, or None when it is
    (the persistent-state claim's entry is under the claim's own name, as KubeVirt's)."""
    status = vmi.status.volume_state(volume)
    info = status.persistent_volume_claim_info if status is not None else None
    if info is None:
        return f"cannot migrate VMI: Unable to determine if PVC {claim} is shared, {_RWX_RULE}"
    if not info.shared:
        modes = ",".join(info.access_modes)
        return f"cannot migrate VMI: PVC {claim} is not shared ({modes}), {_RWX_RULE}"
    return None


def spec_interfaces(vmi: VirtualMachineInstance) -> tuple[VMIInterfaceStatus, ...]:
    """status.interfaces from the spec (name, and the MAC when the spec pins one); the
    controller fills them with the pod IP at the handoff, this is the fallback."""
    return vmi.interface_statuses(pod_ip=None)


def _fs_frozen(domain: DomainRecord | None) -> bool:
    """status.fsFreezeStatus "frozen" while the launcher has the filesystems frozen."""
    return domain is not None and not domain.is_off and domain.status.fs_frozen


def with_guest_interfaces(
    vmi: VirtualMachineInstance,
    current: tuple[VMIInterfaceStatus, ...],
    guest: tuple[VMIInterfaceStatus, ...],
) -> tuple[VMIInterfaceStatus, ...]:
    """status.interfaces with what the guest agent reports: each VMI interface it matched
    (by MAC) gets the guest's interface name and addresses and infoSource "domain,
    guest-agent"; a masquerade interface keeps the pod's IPs, which is where the guest is
    reached (its own address is QEMU's NAT-internal one), and so does a passt one (the
    guest holds the first pod's IPs, passt's DHCP and DHCPv6 gave them; the agent would
    add its SLAAC and link-local addresses); interfaces the guest has beyond the VMI's
    are listed with infoSource "guest-agent"."""
    by_name = {g.name: g for g in guest if g.name}
    nat = {
        i.name
        for i in vmi.spec.domain.devices.interfaces
        if i.masquerade is not None or i.uses_passt()
    }
    out = []
    for cur in (c for c in current if c.info_source != "guest-agent"):  # the agent's own: anew
        g = by_name.get(cur.name) if cur.name else None
        if g is None:
            out.append(cur)
            continue
        keep = cur.name in nat and bool(cur.ip_address)
        out.append(
            dataclasses.replace(
                cur,
                interface_name=g.interface_name,
                mac=cur.mac or g.mac,
                ip_address=cur.ip_address if keep else g.ip_address,
                ip_addresses=cur.ip_addresses if keep else g.ip_addresses,
                info_source="domain, guest-agent",
            )
        )
    known = {c.name for c in out}
    return (*out, *(g for g in guest if not g.name or g.name not in known))


def _synchronized(error: SyncError | None) -> VMICondition | None:
    if error is None:
        return None
    return _false(VMIConditionType.SYNCHRONIZED, str(error.reason), error.message)


def _false(type_: str, reason: str, message: str) -> VMICondition:
    return VMICondition(type=type_, status=ConditionStatus.FALSE, reason=reason, message=message)


def _put(status: VMIStatus, type_: str, cond: VMICondition | None, *, now: str) -> VMIStatus:
    existing = status.condition(type_)
    if cond is None:
        return status if existing is None else status.without_condition(type_)
    if existing is not None and _same(existing, cond):
        return status
    kept = existing is not None and existing.status == cond.status
    since = existing.last_transition_time if kept and existing else now
    return status.with_condition(dataclasses.replace(cond, last_transition_time=since))


def _same(a: VMICondition, b: VMICondition) -> bool:
    """Same status and reason: keep the existing one, whoever wrote its message — two
    writers that only disagree on wording must not take turns rewriting it.
    AccessCredentialsSynchronized has one writer and no reason: its message counts."""
    if str(a.type) == VMIConditionType.ACCESS_CREDENTIALS_SYNCHRONIZED:
        return (a.status, a.message) == (b.status, b.message)
    return (a.status, a.reason) == (b.status, b.reason)


def still_applies(
    planned: VirtualMachineInstance, fresh: VirtualMachineInstance
) -> VirtualMachineInstance:
    """`fresh` (re-read after a Conflict) if a write planned from `planned` may still land
    on it; raises Superseded when it became final meanwhile or is another VMI."""
    if fresh.uid != planned.uid:
        raise Superseded(f"replaced by VMI uid {fresh.uid}")
    if fresh.is_final() and not planned.is_final():
        raise Superseded(f"{fresh.status.phase_or_unset} ({fresh.status.reason}) meanwhile")
    return fresh
