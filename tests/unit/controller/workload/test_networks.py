"""NIC hotplug's migrations (controller/workload/networks.py): a VMI whose launcher pod's
multus annotation differs from what its spec wants is migrated — at once for a NIC added
or a NAD swapped, only once an unplugged NIC left the domain — if it can move."""

from __future__ import annotations

from typing import Any

import pytest

from controller.workload.networks import needs_network_migration, plan_network_migrations
from shared import multus
from shared.launcherpod import LauncherPod, PodPhase
from shared.model import VirtualMachineInstance

SEC = ({"name": "sec", "bridge": {}}, {"name": "sec", "multus": {"networkName": "nad-a"}})
HOT = ({"name": "hot", "bridge": {}}, {"name": "hot", "multus": {"networkName": "nad-c"}})


def vmi(
    name: str = "a",
    *pairs: tuple[dict[str, Any], dict[str, Any]],
    listed: tuple[str, ...] = (),
    migratable: bool = True,
) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"domain": {"devices": {"interfaces": [i for i, _ in pairs]}},
                 "networks": [n for _, n in pairs]},
        "status": {
            "phase": "Running", "nodeName": "n1",
            "interfaces": [{"name": n} for n in listed],
            "conditions": [{"type": "LiveMigratable", "status": str(migratable)}],
        },
    })  # fmt: skip


def pod(v: VirtualMachineInstance, networks: str | None, **kw: Any) -> LauncherPod:
    return LauncherPod(namespace="ns", name=f"virt-launcher-{v.name}", uid=f"p-{v.name}",
                       phase=PodPhase.RUNNING, node_name="n1", vmi_uid=v.uid,
                       networks=networks, **kw)  # fmt: skip


def _annotation(*pairs: tuple[dict[str, Any], dict[str, Any]]) -> str | None:
    return multus.networks_annotation(vmi("x", *pairs))


@pytest.mark.parametrize(
    ("v", "networks", "needed"),
    [
        pytest.param(vmi("a", SEC, listed=("sec",)), _annotation(SEC), False, id="matching"),
        pytest.param(vmi("a", SEC, HOT, listed=("sec",)), _annotation(SEC), True, id="plugged"),
        pytest.param(vmi("a", SEC, ({**HOT[0], "state": "absent"}, HOT[1]), listed=("sec",)),
                     _annotation(SEC, HOT), True, id="unplugged-and-detached"),
        pytest.param(vmi("a", SEC, ({**HOT[0], "state": "absent"}, HOT[1]), listed=("sec", "hot")),
                     _annotation(SEC, HOT), False, id="unplugged-still-in-the-domain"),
        pytest.param(vmi("a", (SEC[0], {"name": "sec", "multus": {"networkName": "nad-b"}})),
                     _annotation(SEC), True, id="nad-swapped"),
        pytest.param(vmi("a"), None, False, id="no-multus"),
    ],
)  # fmt: skip
def test_when_a_vmi_needs_a_network_migration(
    v: VirtualMachineInstance, networks: str | None, needed: bool
) -> None:
    """The pod's attachments against the VMI's spec decide; an unplug waits for the
    domain to let the NIC go."""
    assert needs_network_migration(v, pod(v, networks)) is needed


def test_plan_skips_moving_reports_stuck_and_follows_a_former_target_pod() -> None:
    """Of three VMIs needing a migration: one already migrating is left (but still
    needed, so the updater looks again), one not LiveMigratable is reported, the third
    migrates; a pod that was a migration target and now runs the VMI counts as its pod, a
    deleting one does not."""
    a, b, c = vmi("a", SEC, HOT), vmi("b", SEC, HOT, migratable=False), vmi("c", SEC, HOT)
    old = _annotation(SEC)
    pods = {
        a.uid: [pod(a, old)],
        b.uid: [pod(b, old)],
        c.uid: [pod(c, old, deleting=True), pod(c, old, migration_uid="m1")],
    }
    plan = plan_network_migrations([a, b, c], pods, moving=frozenset({"ns/a"}))
    assert [v.name for v in plan.ready] == ["c"]
    assert plan.stuck == ("ns/b",)
    assert plan.needed
    waiting = plan_network_migrations([a], pods, moving=frozenset({"ns/a"}))
    assert waiting.ready == () and waiting.needed  # looked at again later
    gone = {c.uid: [pod(c, old, deleting=True)]}
    assert not plan_network_migrations([c], gone, moving=frozenset()).needed
