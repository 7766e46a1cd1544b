"""A VM with `runStrategy: WaitAsReceiver`: the receiving side of a decentralized
migration (docs/migration.md).

Its VMI is created marked as a receiver (RECEIVER_ANNOTATION): the VMI controller puts it
in phase WaitingForSync and makes no launcher pod for it; the receiving VMIM's target pod
becomes its pod. Once the guest runs there, the VM takes the run strategy named by its
`kubevirt.io/restore-run-strategy` annotation (Always when absent), as KubeVirt's does.

The sending VM, whose guest moved into the receiving VMI (its VMI ends Succeeded, the
migrationState naming the other VMI as target), is not started again: it becomes Halted.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.labels import RECEIVER_ANNOTATION, RESTORE_RUN_STRATEGY_ANNOTATION
from shared.model import RunStrategy, VirtualMachine, VirtualMachineInstance, VMIPhase


def receiver_annotations(vm: VirtualMachine) -> Mapping[str, str]:
    """The annotation marking the VMI of a WaitAsReceiver VM (none for other VMs)."""
    if vm.spec.run_strategy is RunStrategy.WAIT_AS_RECEIVER:
        return {RECEIVER_ANNOTATION: "true"}
    return {}


def sent_away(vmi: VirtualMachineInstance | None) -> bool:
    """The VM's guest went to another VMI by a decentralized migration."""
    state = vmi.status.migration_state if vmi is not None else None
    return bool(
        vmi is not None
        and state is not None
        and state.completed
        and state.leaves_vmi(vmi.namespace, vmi.name)
    )


def restored_strategy(vm: VirtualMachine, vmi: VirtualMachineInstance | None) -> RunStrategy | None:
    """The run strategy a WaitAsReceiver VM takes now that its guest runs, Halted for a
    VM whose guest went away (None: keep)."""
    if sent_away(vmi):
        halted = vm.spec.run_strategy is RunStrategy.HALTED
        return None if halted else RunStrategy.HALTED
    if vm.spec.run_strategy is not RunStrategy.WAIT_AS_RECEIVER or vmi is None:
        return None
    if vmi.status.phase_or_unset is not VMIPhase.RUNNING:
        return None
    wanted = vm.metadata.annotations.get(RESTORE_RUN_STRATEGY_ANNOTATION, "")
    try:
        strategy = RunStrategy(wanted)
    except ValueError:  # absent (a bad value is refused at admission)
        return RunStrategy.ALWAYS
    return RunStrategy.ALWAYS if strategy is RunStrategy.WAIT_AS_RECEIVER else strategy
