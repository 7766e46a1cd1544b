"""virt-controller's object metrics in KubeVirt's names and labels, from the informer caches.

A prometheus_client custom collector, computed at every scrape from what the informers
hold (no API call): `kubevirt_vmi_info` and `kubevirt_vm_info` (one series per object, value
1, the object's facts as labels), the VMI's last migration's start and end times
(`kubevirt_vmi_migration_{start,end}_time_seconds`), and one series per finished VMIM
(`kubevirt_vmi_migration_{succeeded,failed}`) beside the in-flight counts per phase.
Every replica serves them (like KubeVirt's, whose controllers all keep these caches).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from shared.model import (
    EvictionStrategy,
    MigrationPhase,
    PrintableStatus,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    parse_time,
)

_ANNOTATION_PREFIX = "vm.kubevirt.io/"
_VMI_INFO_LABELS = (
    "node", "namespace", "name", "phase", "os", "workload", "flavor", "instance_type",
    "preference", "guest_os_kernel_release", "guest_os_machine", "guest_os_arch",
    "guest_os_name", "guest_os_version_id", "evictable", "outdated", "vmi_pod",
)  # fmt: skip
_VM_INFO_LABELS = (
    "namespace", "name", "os", "workload", "flavor", "instance_type", "preference",
    "status", "status_group",
)  # fmt: skip
_STATUS_GROUPS = {
    PrintableStatus.PROVISIONING: "starting",
    PrintableStatus.STARTING: "starting",
    PrintableStatus.RUNNING: "running",
    PrintableStatus.MIGRATING: "migrating",
    PrintableStatus.STOPPED: "non_running",
    PrintableStatus.PAUSED: "non_running",
    PrintableStatus.STOPPING: "non_running",
    PrintableStatus.TERMINATING: "non_running",
}
_IN_FLIGHT = {
    "kubevirt_vmi_migrations_in_pending_phase": (
        "Number of current pending migrations.", {MigrationPhase.PENDING}),
    "kubevirt_vmi_migrations_in_scheduling_phase": (
        "Number of current scheduling migrations.", {MigrationPhase.SCHEDULING}),
    "kubevirt_vmi_migrations_in_running_phase": (
        "Number of current running migrations.",
        {MigrationPhase.SCHEDULED, MigrationPhase.PREPARING_TARGET, MigrationPhase.TARGET_READY,
         MigrationPhase.RUNNING}),
}  # fmt: skip


class ObjectMetrics:
    """The collector; `vmis`, `vms`, `vmims` list the informer caches."""

    def __init__(
        self,
        *,
        vmis: Callable[[], Iterable[VirtualMachineInstance]],
        vms: Callable[[], Iterable[VirtualMachine]],
        vmims: Callable[[], Iterable[VirtualMachineInstanceMigration]],
    ) -> None:
        self._vmis = vmis
        self._vms = vms
        self._vmims = vmims

    def collect(self) -> Iterator[Metric]:
        """prometheus_client's collector protocol."""
        vmis, vmims = list(self._vmis()), list(self._vmims())
        yield _vmi_info(vmis)
        yield _vm_info(self._vms())
        yield from _migration_times(vmis, {m.metadata.uid or "": m.name for m in vmims})
        yield from _migration_results(vmims)


def _system(annotations: dict[str, str] | None) -> tuple[str, str, str]:
    """os, workload and flavor from KubeVirt's vm.kubevirt.io/* annotations."""
    a = annotations or {}
    return (
        a.get(_ANNOTATION_PREFIX + "os", ""),
        a.get(_ANNOTATION_PREFIX + "workload", ""),
        a.get(_ANNOTATION_PREFIX + "flavor", ""),
    )


def _vmi_info(vmis: Iterable[VirtualMachineInstance]) -> Metric:
    family = GaugeMetricFamily(
        "kubevirt_vmi_info", "Information about VirtualMachineInstances.", labels=_VMI_INFO_LABELS
    )
    for vmi in vmis:
        st, os_info = vmi.status, vmi.status.guest_os_info
        pods = [uid for uid, node in st.active_pods.items() if node == st.node_name]
        family.add_metric(
            (
                st.node_name or "", vmi.namespace, vmi.name, str(st.phase_or_unset).lower(),
                *_system(dict(vmi.metadata.annotations or {})), "", "",
                (os_info.kernel_release if os_info else None) or "",
                vmi.spec.domain.machine.type or "",
                (os_info.machine if os_info else None) or "",
                (os_info.name if os_info else None) or "",
                (os_info.version_id if os_info else None) or "",
                str(_evictable(vmi)).lower(), "false", pods[0] if pods else "",
            ),
            1.0,
        )  # fmt: skip
    return family


def _evictable(vmi: VirtualMachineInstance) -> bool:
    """False for a VMI that must live-migrate on eviction but cannot (KubeVirt's rule)."""
    if vmi.spec.eviction_strategy is not EvictionStrategy.LIVE_MIGRATE:
        return True
    cond = vmi.status.condition("LiveMigratable")
    return cond is not None and cond.status == "True"


def _vm_info(vms: Iterable[VirtualMachine]) -> Metric:
    family = GaugeMetricFamily(
        "kubevirt_vm_info", "Information about Virtual Machines.", labels=_VM_INFO_LABELS
    )
    for vm in vms:
        status = vm.status.printable_status
        group = _STATUS_GROUPS.get(status, "error") if status is not None else "<unknown>"
        family.add_metric(
            (
                vm.namespace, vm.name,
                *_system(dict(vm.spec.template.metadata.annotations or {})),
                (vm.spec.instancetype.name if vm.spec.instancetype else None) or "",
                (vm.spec.preference.name if vm.spec.preference else None) or "",
                str(status or ""), group,
            ),
            1.0,
        )  # fmt: skip
    return family


def _migration_times(
    vmis: Iterable[VirtualMachineInstance], names: dict[str, str]
) -> Iterator[Metric]:
    start = GaugeMetricFamily(
        "kubevirt_vmi_migration_start_time_seconds",
        "The time at which the migration started.",
        labels=("node", "namespace", "name", "migration_name"),
    )
    end = GaugeMetricFamily(
        "kubevirt_vmi_migration_end_time_seconds",
        "The time at which the migration ended.",
        labels=("node", "namespace", "name", "migration_name", "status"),
    )
    for vmi in vmis:
        ms = vmi.status.migration_state
        if ms is None:
            continue
        labels = (vmi.status.node_name or "", vmi.namespace, vmi.name)
        migration = names.get(ms.migration_uid or "", "")
        if ms.start_timestamp:
            start.add_metric((*labels, migration), parse_time(ms.start_timestamp).timestamp())
        if ms.end_timestamp:
            result = "" if not ms.completed else "failed" if ms.failed else "succeeded"
            end.add_metric((*labels, migration, result), parse_time(ms.end_timestamp).timestamp())
    yield start
    yield end


def _migration_results(vmims: list[VirtualMachineInstanceMigration]) -> Iterator[Metric]:
    labels = ("vmi", "vmim", "namespace")
    succeeded = GaugeMetricFamily(
        "kubevirt_vmi_migration_succeeded",
        "Indicates if the VMI migration succeeded.",
        labels=labels,
    )
    failed = GaugeMetricFamily(
        "kubevirt_vmi_migration_failed", "Indicates if the VMI migration failed.", labels=labels
    )
    for m in vmims:
        phase = m.status.phase_or_unset
        if phase.is_final():
            target = succeeded if phase is MigrationPhase.SUCCEEDED else failed
            target.add_metric((m.spec.vmi_name or "", m.name, m.namespace), 1.0)
    yield succeeded
    yield failed
    for name, (help_text, phases) in _IN_FLIGHT.items():
        family = GaugeMetricFamily(name, help_text)
        family.add_metric((), float(sum(m.status.phase_or_unset in phases for m in vmims)))
        yield family
