"""The controller's hotplug half: attachment pods pinned to the VMI's node and owned by
its launcher pod; volumeStatus Pending / Bound / AttachedToNode from the claim and the
pod, the handler's phases kept, a removed volume held (Detaching) until the handler let go."""

from __future__ import annotations

from typing import Any

from controller.config import TemplateConfig
from controller.hotplug import AttachPod, attachment_pod, plan_volume_status, stale_pods
from controller.pods import LauncherPod
from controller.volumes.claims import Claim
from shared import podlayout
from shared.model import VirtualMachineInstance

CLAIM = Claim(name="c", phase="Bound", volume_mode="Filesystem", request_bytes=1, capacity_bytes=2)
POD = AttachPod(
    name="hp-volume-1", uid="pu", volume="data", phase="Running", node="n1", deleting=False
)


def _vmi(
    *, hotplugged: bool = True, entries: tuple[dict[str, Any], ...] = ()
) -> VirtualMachineInstance:
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "c", "hotpluggable": True}}
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "namespace": "ns", "uid": "vmi-uid"},
        "spec": {"volumes": [volume] if hotplugged else []},
        "status": {"phase": "Running", "nodeName": "n1", "volumeStatus": list(entries)},
    })  # fmt: skip


def _entry(phase: str, uid: str = "pu") -> dict[str, Any]:
    return {
        "name": "data",
        "phase": phase,
        "hotplugVolume": {"attachPodName": "x", "attachPodUID": uid},
    }


def test_attachment_pod_mounts_the_claim_on_the_vmis_node() -> None:
    """Stable name, KubeVirt's label, the claim its only volume, the VMI's node required,
    owned by the launcher pod (garbage-collected with it), quick to stop."""
    owner = LauncherPod(namespace="ns", name="virt-launcher-vm-abcde", uid="lp")
    pod = attachment_pod(_vmi(), _vmi().spec.volumes[0], owner=owner, config=TemplateConfig())
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == podlayout.attachment_pod_name("vmi-uid", "data")
    assert meta["name"].startswith("hp-volume-")
    assert meta["labels"] == {"kubevirt.io": "hotplug-disk", "kubevirt.io/created-by": "vmi-uid"}
    assert meta["ownerReferences"][0]["uid"] == "lp"
    assert spec["volumes"] == [
        {"name": "hotplug-disk", "persistentVolumeClaim": {"claimName": "c"}}
    ]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]
    assert spec["terminationGracePeriodSeconds"] == 0


def test_phases_follow_the_claim_and_the_pod() -> None:
    """No claim: Pending PVCNotReady naming it; claim bound, pod pending: Bound; pod
    running: AttachedToNode with the pod in hotplugVolume and the claim's capacity."""
    (missing,) = plan_volume_status(_vmi(), {}, {"c": None})
    assert (missing.phase, missing.reason, missing.message) == (
        "Pending", "PVCNotReady", "PVC ns/c does not exist",
    )  # fmt: skip
    (bound,) = plan_volume_status(_vmi(), {}, {"c": CLAIM})
    assert bound.phase == "Bound" and bound.hotplug_volume is None
    (attached,) = plan_volume_status(_vmi(), {"data": POD}, {"c": CLAIM})
    assert attached.phase == "AttachedToNode"
    assert attached.attach_pod_uid == "pu"
    assert attached.persistent_volume_claim_info is not None
    assert attached.persistent_volume_claim_info.capacity == {"storage": "2"}


def test_handler_phases_are_kept_for_the_same_pod() -> None:
    """Ready (the handler's) stays Ready while it is about the running pod; about another
    pod (a recreated one) it starts over."""
    (kept,) = plan_volume_status(_vmi(entries=(_entry("Ready"),)), {"data": POD}, {"c": CLAIM})
    assert kept.phase == "Ready"
    (fresh,) = plan_volume_status(
        _vmi(entries=(_entry("Ready", "old"),)), {"data": POD}, {"c": CLAIM}
    )
    assert fresh.phase == "AttachedToNode"


def test_a_removed_volume_is_held_until_the_handler_let_go() -> None:
    """Removed while Ready: Detaching, its pod kept; once the handler dropped the entry
    the pod is stale; one never mounted is dropped with its pod at once."""
    removed = _vmi(hotplugged=False, entries=(_entry("Ready"),))
    (held,) = plan_volume_status(removed, {}, {})
    assert (held.phase, held.reason) == ("Detaching", "VolumeDetaching")
    assert stale_pods(removed, [POD], (held,)) == []
    assert stale_pods(_vmi(hotplugged=False), [POD], ()) == [POD]
    never = _vmi(hotplugged=False, entries=(_entry("AttachedToNode"),))
    assert plan_volume_status(never, {}, {}) == ()
    ended = AttachPod(name="p", uid="u", volume="data", phase="Failed", node="n1", deleting=False)
    assert stale_pods(_vmi(), [ended], ()) == [ended]
