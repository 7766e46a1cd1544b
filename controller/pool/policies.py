"""VirtualMachinePool policies beyond the sort order (KubeVirt 1.8's pool), pure:

selectors       a selectionPolicy's selectors narrow the candidates of a proactive
                scale-in or update to the VMs whose template labels match its
                labelSelector and whose template nodeSelector meets every
                nodeSelectorRequirementMatcher requirement;
maxUnavailable  a proactive update restarts at most maxUnavailable VMs (a count, or a
                percentage of spec.replicas rounded down; at least 1; KubeVirt's 100%)
                minus those already unavailable (not Ready);
autohealing     a VM failing to start (CrashLoopBackOff, ErrorUnschedulable,
                DataVolumeError, ErrorPvcNotFound, ErrImagePull, ImagePullBackOff)
                whose Ready condition has been False for minFailingToStartDuration
                (KubeVirt's 5m) is replaced, beside startUpFailureThreshold's rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from shared.duration import go_duration
from shared.model import VirtualMachine, parse_time
from shared.model.enums import ConditionStatus, PrintableStatus, VMConditionType
from shared.model.pool import Autohealing, NodeSelectorRequirement, PoolSelectors, PoolSpec

VM = VirtualMachine
DEFAULT_MAX_UNAVAILABLE = "100%"
DEFAULT_MIN_FAILING_SECONDS = 300.0
FAILING_TO_START = frozenset(
    {
        PrintableStatus.CRASH_LOOP_BACK_OFF, PrintableStatus.UNSCHEDULABLE,
        PrintableStatus.DATA_VOLUME_ERROR, PrintableStatus.PVC_NOT_FOUND,
        PrintableStatus.ERR_IMAGE_PULL, PrintableStatus.IMAGE_PULL_BACK_OFF,
    }
)  # fmt: skip
NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """A node selector requirement against a label set (Gt / Lt: integer values)."""
    key, values = req.key or "", req.values
    match req.operator:
        case "In" | "NotIn":
            found = key in labels and labels[key] in values
            return found if req.operator == "In" else not found
        case "Exists" | "DoesNotExist":
            return (key in labels) == (req.operator == "Exists")
        case "Gt" | "Lt" if key in labels and len(values) == 1:
            return _compare(labels[key], values[0], greater=req.operator == "Gt")
    return False


def _compare(have: str, bound: str, *, greater: bool) -> bool:
    try:
        a, b = int(have), int(bound)
    except ValueError:
        return False
    return a > b if greater else a < b


def selected(vms: Iterable[VM], selectors: PoolSelectors | None) -> list[VM]:
    """The VMs the selectors allow, in their order (all of them without selectors)."""
    if selectors is None:
        return list(vms)
    out = []
    for vm in vms:
        template = vm.spec.template
        labels = template.metadata.labels if template is not None else {}
        nodes = template.spec.node_selector if template is not None else {}
        if selectors.label_selector is not None and not selectors.label_selector.matches(labels):
            continue
        if all(requirement_matches(r, nodes) for r in selectors.node_selector_requirement_matcher):
            out.append(vm)
    return out


def max_unavailable(spec: PoolSpec) -> int:
    """maxUnavailable as a VM count: N, or N% of spec.replicas rounded down; at least 1."""
    value = spec.max_unavailable if spec.max_unavailable is not None else DEFAULT_MAX_UNAVAILABLE
    percent = isinstance(value, str)
    count = spec.wanted * int(str(value).removesuffix("%")) // 100 if percent else int(value)
    return max(1, count)


def failing_since(vm: VM) -> datetime | None:
    """When a VM failing to start turned not Ready (None: not failing to start)."""
    if vm.status.printable_status not in FAILING_TO_START:
        return None
    ready = vm.status.condition(VMConditionType.READY)
    if ready is None or ready.status != ConditionStatus.FALSE:
        return None
    stamp = ready.last_transition_time or ready.last_probe_time
    return parse_time(stamp) if stamp else None


def min_failing_seconds(heal: Autohealing) -> float:
    """minFailingToStartDuration in seconds (KubeVirt's 5 minutes when unset)."""
    text = heal.min_failing_to_start_duration
    return go_duration(text) if text else DEFAULT_MIN_FAILING_SECONDS


def failing_too_long(vm: VM, heal: Autohealing, *, now: datetime) -> bool:
    """A VM failing to start for at least minFailingToStartDuration."""
    since = failing_since(vm)
    return since is not None and (now - since).total_seconds() >= min_failing_seconds(heal)


def next_heal_check(vms: Iterable[VM], heal: Autohealing | None, *, now: datetime) -> float | None:
    """Seconds until the first failing VM reaches minFailingToStartDuration (None: none
    is waiting), so the pool is synced again then."""
    if heal is None:
        return None
    waits = [
        min_failing_seconds(heal) - (now - since).total_seconds()
        for vm in vms
        if (since := failing_since(vm)) is not None
    ]
    pending = [w for w in waits if w > 0]
    return min(pending) if pending else None
