"""Whether a VM has changed block tracking (CBT), as KubeVirt 1.8 decides it: the
IncrementalBackup feature gate is on and the VM matches the KubeVirt CR's
`changedBlockTrackingLabelSelectors` (its own labels, or its namespace's). A backup of a VM
without it is refused naming the reason (controller/backup/). Admission checks the
selectors here too.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.model import FieldError
from shared.model.backup import INCREMENTAL_BACKUP_GATE
from shared.model.kubevirt import KubeVirt, KubeVirtConfiguration

SELECTORS = "spec.configuration.changedBlockTrackingLabelSelectors"


def cbt_refusal(
    config: KubeVirtConfiguration | None,
    *,
    gates: frozenset[str],
    vm_labels: Mapping[str, str],
    namespace_labels: Mapping[str, str] | None,
) -> str:
    """Why the VM has no changed block tracking ("" when it has)."""
    if INCREMENTAL_BACKUP_GATE not in gates:
        return f"the {INCREMENTAL_BACKUP_GATE} feature gate is not enabled in the KubeVirt CR"
    selectors = config.changed_block_tracking_label_selectors if config else None
    if selectors is None:
        return f"the KubeVirt CR sets no {SELECTORS.removeprefix('spec.configuration.')}"
    by_vm = selectors.virtual_machine_label_selector
    by_ns = selectors.namespace_label_selector
    if by_vm is not None and by_vm.matches(vm_labels):
        return ""
    if by_ns is not None and namespace_labels is not None and by_ns.matches(namespace_labels):
        return ""
    return (
        "changed block tracking is not enabled for this VM: neither its labels nor its "
        f"namespace's match the KubeVirt CR's {SELECTORS.removeprefix('spec.configuration.')}"
    )


def needs_namespace_labels(config: KubeVirtConfiguration | None) -> bool:
    """Whether deciding needs the namespace's labels (a namespace selector is set)."""
    selectors = config.changed_block_tracking_label_selectors if config else None
    return selectors is not None and selectors.namespace_label_selector is not None


def cbt_selector_errors(kv: KubeVirt) -> list[FieldError]:
    """Malformed selectors, each naming its field."""
    config = kv.spec.configuration
    selectors = config.changed_block_tracking_label_selectors if config else None
    if selectors is None:
        return []
    errors = []
    for name, selector in (
        ("namespaceLabelSelector", selectors.namespace_label_selector),
        ("virtualMachineLabelSelector", selectors.virtual_machine_label_selector),
    ):
        for path, message in selector.problems() if selector else ():
            errors.append(FieldError(path=f"{SELECTORS}.{name}.{path}", message=message))
    return errors
