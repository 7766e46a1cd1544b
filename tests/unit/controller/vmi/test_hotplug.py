"""The controller's hotplug half: attachment pods pinned to the VMI's node and owned by
its launcher pod; volumeStatus Pending / Bound / AttachedToNode from the claim and the
pod, the handler's phases kept, a removed volume held (Detaching) until the handler let go."""

from __future__ import annotations

from typing import Any, cast

from controller.config import TemplateConfig
from controller.services.volumes.claims import Claim
from controller.vmi.hotplug import (
    AttachPod,
    HotplugAttachments,
    attachment_pod,
    plan_volume_status,
    stale_pods,
)
from shared import labels, podlayout
from shared.kube import ListResult, NotFound
from shared.labels import APP_LABEL, CREATED_BY_LABEL
from shared.launcherpod import LauncherPod
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


class FakeClient:
    """Pods and claims in memory; creates answer Pending pods with a UID."""

    def __init__(self, pods: list[dict[str, Any]], claims: dict[str, dict[str, Any]]) -> None:
        self.pods, self.claims = pods, claims
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.listed_all: list[tuple[str | None, str | None]] = []

    async def list(
        self, resource: Any, *, namespace: str | None = None, label_selector: str | None = None
    ) -> Any:
        return ListResult(list(self.pods), "1")

    async def list_all(
        self, resource: Any, *, namespace: str | None = None, label_selector: str | None = None
    ) -> Any:
        self.listed_all.append((namespace, label_selector))
        return ListResult(list(self.pods), "1")

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        if name not in self.claims:
            raise NotFound(404, "NotFound", name)
        return self.claims[name]

    async def create(self, resource: Any, body: Any, *, namespace: str | None = None) -> Any:
        self.created.append(body["metadata"]["name"])
        return {
            **body,
            "metadata": {**body["metadata"], "uid": "new"},
            "status": {"phase": "Pending"},
        }

    async def delete(
        self, resource: Any, name: str, *, namespace: str | None = None, options: Any = None
    ) -> Any:
        self.deleted.append(name)
        return {}


def _pod(volume: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "hp-volume-old",
            "uid": "pu",
            "labels": {CREATED_BY_LABEL: "vmi-uid"},
            "annotations": {labels.ATTACHMENT_VOLUME_ANNOTATION: volume},
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }


async def test_sync_creates_then_deletes_once_the_handler_let_go() -> None:
    """A hotplugged claim without a pod gets one (Pending, looked at again); once the
    volume is removed and the handler dropped its entry, the pod is deleted and the VMI
    is still looked at until no pod is left."""
    owner = LauncherPod(namespace="ns", name="virt-launcher-vm-abcde", uid="lp")
    claim = {"metadata": {"name": "c"}, "status": {"phase": "Bound"}}
    client = FakeClient([], {"c": claim})
    hotplugs = HotplugAttachments(cast(Any, client), TemplateConfig())
    status, again = await hotplugs.sync(_vmi(), owner)
    assert client.created == [podlayout.attachment_pod_name("vmi-uid", "data")]
    assert [e.phase for e in status] == ["Bound"] and again is not None
    client.pods = [_pod("data")]
    status, again = await hotplugs.sync(_vmi(hotplugged=False), owner)
    assert status == () and client.deleted == ["hp-volume-old"] and hotplugs.holding("vmi-uid")
    client.pods = []
    status, again = await hotplugs.sync(_vmi(hotplugged=False), owner)
    assert again is None and not hotplugs.holding("vmi-uid")


async def test_a_new_leader_holds_vmis_that_still_have_attachment_pods() -> None:
    """After a restart one LIST of attachment pods tells which VMIs to look at: a pod left
    by a volume removed while no controller ran is deleted on that VMI's first sync."""
    owner = LauncherPod(namespace="ns", name="virt-launcher-vm-abcde", uid="lp")
    client = FakeClient([_pod("data")], {})
    hotplugs = HotplugAttachments(cast(Any, client), TemplateConfig())
    assert not hotplugs.holding("vmi-uid")
    await hotplugs.prime("ns")
    selector = f"{APP_LABEL}={podlayout.ATTACHMENT_APP}"
    assert client.listed_all == [("ns", selector)]
    assert hotplugs.holding("vmi-uid") and not hotplugs.holding("other")
    await hotplugs.sync(_vmi(hotplugged=False), owner)
    assert client.deleted == ["hp-volume-old"]


def test_a_block_claims_attachment_pod_maps_the_device() -> None:
    """For a Block claim the attachment pod maps the device (volumeDevices) instead of
    mounting it: the kubelet refuses a block claim as a volumeMount."""
    owner = LauncherPod(namespace="ns", name="virt-launcher-vm-abcde", uid="lp")
    vmi = _vmi()
    pod = attachment_pod(vmi, vmi.spec.volumes[0], owner=owner, config=TemplateConfig(), block=True)
    (container,) = pod["spec"]["containers"]
    assert container["volumeDevices"] == [{"name": "hotplug-disk", "devicePath": "/hotplug/data"}]
    assert "volumeMounts" not in container


class DataVolumeClient(FakeClient):
    """FakeClient whose DataVolumes are apart from its claims (both named dv1)."""

    def __init__(self, dv_phase: str | None) -> None:
        super().__init__([], {"dv1": {"metadata": {"name": "dv1"}, "status": {"phase": "Bound"}}})
        self.dv_phase = dv_phase

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        if resource.plural != "datavolumes":
            return await super().get(resource, name, namespace=namespace)
        if self.dv_phase is None:
            raise NotFound(404, "NotFound", name)
        return {"metadata": {"name": name}, "status": {"phase": self.dv_phase}}


def _dv_vmi() -> VirtualMachineInstance:
    volume = {"name": "dv", "dataVolume": {"name": "dv1", "hotpluggable": True}}
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "namespace": "ns", "uid": "vmi-uid"},
        "spec": {"volumes": [volume]},
        "status": {"phase": "Running", "nodeName": "n1"},
    })  # fmt: skip


async def test_a_hotplugged_datavolume_waits_until_it_succeeded() -> None:
    """A hotpluggable dataVolume volume: no attachment pod while its DataVolume is missing
    or importing (Pending, the message naming the DataVolume and its phase, looked at
    again); once Succeeded, its claim's attachment pod is made as for a claim."""
    owner = LauncherPod(namespace="ns", name="virt-launcher-vm-abcde", uid="lp")
    for phase, message in (
        (None, "DataVolume ns/dv1 does not exist"),
        ("ImportInProgress", "DataVolume ns/dv1 is not ready (ImportInProgress)"),
    ):
        client = DataVolumeClient(phase)
        hotplugs = HotplugAttachments(cast(Any, client), TemplateConfig())
        (entry,), again = await hotplugs.sync(_dv_vmi(), owner)
        assert (entry.phase, entry.reason, entry.message) == ("Pending", "PVCNotReady", message)
        assert client.created == [] and again is not None
    client = DataVolumeClient("Succeeded")
    hotplugs = HotplugAttachments(cast(Any, client), TemplateConfig())
    (entry,), _ = await hotplugs.sync(_dv_vmi(), owner)
    assert client.created == [podlayout.attachment_pod_name("vmi-uid", "dv")]
    assert entry.phase == "Bound"


def test_a_datavolumes_attachment_pod_mounts_its_claim() -> None:
    """The attachment pod of a dataVolume volume mounts the claim of the DataVolume's name."""
    owner = LauncherPod(namespace="ns", name="virt-launcher-vm-abcde", uid="lp")
    vmi = _dv_vmi()
    pod = attachment_pod(vmi, vmi.spec.volumes[0], owner=owner, config=TemplateConfig())
    assert pod["spec"]["volumes"] == [
        {"name": "hotplug-disk", "persistentVolumeClaim": {"claimName": "dv1"}}
    ]


def test_a_failed_datavolume_is_said_in_the_volume_status() -> None:
    """A waiting volume without a pod is Pending with why; one with a pod already keeps
    the pod's phase (the wait is over)."""
    vmi = _dv_vmi()
    (entry,) = plan_volume_status(vmi, {}, {"dv1": CLAIM}, {"dv": "DataVolume ns/dv1 failed: x"})
    assert (entry.phase, entry.message) == ("Pending", "DataVolume ns/dv1 failed: x")
    pod = AttachPod(name="p", uid="pu", volume="dv", phase="Running", node="n1", deleting=False)
    (entry,) = plan_volume_status(vmi, {"dv": pod}, {"dv1": CLAIM}, {"dv": "late"})
    assert entry.phase == "AttachedToNode"


def _dump_vmi(entries: tuple[dict[str, Any], ...] = ()) -> VirtualMachineInstance:
    volume = {"name": "c", "memoryDump": {"claimName": "c", "hotpluggable": True}}
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "namespace": "ns", "uid": "vmi-uid"},
        "spec": {"volumes": [volume]},
        "status": {"phase": "Running", "nodeName": "n1", "volumeStatus": list(entries)},
    })  # fmt: skip


def test_a_memory_dump_volume_is_attached_like_a_claim() -> None:
    """A memoryDump volume: its attachment pod mounts the claim; its entry carries
    memoryDumpVolume.claimName; the handler's MemoryDumpCompleted is kept for its pod."""
    owner = LauncherPod(namespace="ns", name="virt-launcher-vm-abcde", uid="lp")
    vmi = _dump_vmi()
    pod = attachment_pod(vmi, vmi.spec.volumes[0], owner=owner, config=TemplateConfig())
    assert pod["spec"]["volumes"] == [
        {"name": "hotplug-disk", "persistentVolumeClaim": {"claimName": "c"}}
    ]
    c_pod = AttachPod(name="hp", uid="pu", volume="c", phase="Running", node="n1", deleting=False)
    (attached,) = plan_volume_status(vmi, {"c": c_pod}, {"c": CLAIM})
    assert attached.phase == "AttachedToNode"
    assert attached.memory_dump_volume is not None
    assert attached.memory_dump_volume.claim_name == "c"
    done = {"name": "c", "phase": "MemoryDumpCompleted",
            "hotplugVolume": {"attachPodName": "hp", "attachPodUID": "pu"}}  # fmt: skip
    (kept,) = plan_volume_status(_dump_vmi((done,)), {"c": c_pod}, {"c": CLAIM})
    assert kept.phase == "MemoryDumpCompleted"
