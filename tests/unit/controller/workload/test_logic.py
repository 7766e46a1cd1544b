"""The workload updater's plan: VMIs in launchers of another image are outdated; the
LiveMigratable ones not already migrating are migrated, a batch at a time; the others are
left and reported."""

from __future__ import annotations

from controller.workload.logic import WORKLOAD_UPDATE_ANNOTATION, plan_updates
from shared.launcherpod import LauncherPod, PodPhase
from shared.model import VirtualMachineInstance, VirtualMachineInstanceMigration

NEW, OLD = "registry.local/launcher:new", "registry.local/launcher:old"


def vmi(name: str, *, migratable: bool = True) -> VirtualMachineInstance:
    status = "True" if migratable else "False"
    return VirtualMachineInstance.from_dict(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "status": {
                "phase": "Running",
                "nodeName": "n1",
                "conditions": [{"type": "LiveMigratable", "status": status}],
            },
        }
    )


def pod(v: VirtualMachineInstance, image: str) -> LauncherPod:
    return LauncherPod(namespace="ns", name=f"virt-launcher-{v.name}", uid=f"p-{v.name}",
                       phase=PodPhase.RUNNING, node_name="n1", vmi_uid=v.uid, image=image)  # fmt: skip


def migration(vmi_name: str, *, update: bool = True) -> VirtualMachineInstanceMigration:
    annotations = {WORKLOAD_UPDATE_ANNOTATION: ""} if update else {}
    return VirtualMachineInstanceMigration.from_dict(
        {"metadata": {"name": f"m-{vmi_name}", "namespace": "ns", "annotations": annotations},
         "spec": {"vmiName": vmi_name}, "status": {"phase": "Running"}}
    )  # fmt: skip


def test_outdated_vmis_are_migrated_a_batch_at_a_time() -> None:
    """Three outdated VMIs, batch 2: two migrate now; the current one is left alone."""
    vmis = [vmi("a"), vmi("b"), vmi("c"), vmi("d")]
    images = {"a": OLD, "b": OLD, "c": OLD, "d": NEW}
    pods = {v.uid: [pod(v, images[v.name])] for v in vmis}
    plan = plan_updates(vmis, pods, [], image=NEW, batch=2)
    assert plan.outdated == {"ns/a", "ns/b", "ns/c"}
    assert [v.name for v in plan.migrate] == ["a", "b"]


def test_running_update_migrations_use_up_the_batch() -> None:
    """One update migration in flight, batch 2: one more; a migrating VMI is not picked."""
    vmis = [vmi("a"), vmi("b"), vmi("c")]
    pods = {v.uid: [pod(v, OLD)] for v in vmis}
    plan = plan_updates(vmis, pods, [migration("a")], image=NEW, batch=2)
    assert [v.name for v in plan.migrate] == ["b"]
    pending = plan_updates(vmis, pods, [], image=NEW, batch=2, pending=frozenset({"ns/a"}))
    assert [v.name for v in pending.migrate] == ["b"]


def test_non_migratable_vmis_are_left_and_reported() -> None:
    """Not LiveMigratable: outdated and stuck, never migrated."""
    v = vmi("a", migratable=False)
    plan = plan_updates([v], {v.uid: [pod(v, OLD)]}, [], image=NEW, batch=10)
    assert plan.outdated == {"ns/a"} and plan.stuck == ("ns/a",) and plan.migrate == ()
