"""start / stop / restart / migrate as object writes, the way virt-api turns them into writes.

Pure planning functions (VM → the patch to send) are kept apart from the I/O so the
rules can be read and tested as a table.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from shared.model import RunStrategy, VirtualMachine, VirtualMachineInstance
from virtctl_py.errors import CliError, Exit


@dataclass(frozen=True, slots=True)
class Plan:
    """What to write: a spec merge patch and/or state change requests appended to status."""

    spec_patch: dict[str, Any] | None = None
    requests: tuple[dict[str, str], ...] = ()
    message: str = ""


def plan_start(vm: VirtualMachine, vmi: VirtualMachineInstance | None) -> Plan:
    strategy = vm.spec.effective_run_strategy()
    running = vmi is not None and not vmi.is_final() and not vmi.metadata.is_deleting
    if running:
        raise CliError(f"VM {vm.key} is already running", code=Exit.CONFLICT)
    if strategy == RunStrategy.HALTED:
        return Plan(
            spec_patch={"runStrategy": str(RunStrategy.ALWAYS)},
            message="runStrategy Halted -> Always",
        )
    if strategy in (RunStrategy.MANUAL, RunStrategy.ONCE, RunStrategy.RERUN_ON_FAILURE):
        return Plan(requests=({"action": "Start"},), message="start requested")
    return Plan(requests=({"action": "Start"},), message="start requested")


def plan_stop(vm: VirtualMachine, vmi: VirtualMachineInstance | None) -> Plan:
    strategy = vm.spec.effective_run_strategy()
    if strategy == RunStrategy.HALTED and vmi is None:
        raise CliError(f"VM {vm.key} is not running", code=Exit.CONFLICT)
    if strategy in (RunStrategy.ALWAYS, RunStrategy.RERUN_ON_FAILURE):
        return Plan(
            spec_patch={"runStrategy": str(RunStrategy.HALTED)},
            message=f"runStrategy {strategy} -> Halted",
        )
    if vmi is None:
        raise CliError(f"VM {vm.key} is not running", code=Exit.CONFLICT)
    return Plan(requests=({"action": "Stop", "uid": vmi.uid or ""},), message="stop requested")


def plan_restart(vm: VirtualMachine, vmi: VirtualMachineInstance | None) -> Plan:
    if vmi is None or vmi.metadata.is_deleting:
        raise CliError(f"VM {vm.key} is not running; use start", code=Exit.CONFLICT)
    return Plan(
        requests=({"action": "Stop", "uid": vmi.uid or ""}, {"action": "Start"}),
        message="restart requested",
    )


def migration(namespace: str, vmi_name: str) -> dict[str, Any]:
    """A VirtualMachineInstanceMigration for ``vmi_name`` (generated name, like virtctl)."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": f"kubevirt-migrate-vm-{uuid.uuid4().hex[:5]}", "namespace": namespace},
        "spec": {"vmiName": vmi_name},
    }
