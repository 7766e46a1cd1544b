"""Discovery documents list every action with its verb, in the shapes kubectl reads."""

from __future__ import annotations

from virt_api.subresources import discovery


def test_resource_list_names_every_action_with_its_verb() -> None:
    """virtualmachineinstances/<action>: update for state changes, get for reads and console;
    virtualmachines/{start,stop,restart,migrate,memorydump,...}: update, expand-spec: get,
    kind VirtualMachine; {addvolume,removevolume} on both: update."""
    doc = discovery.api_resource_list()
    assert doc["kind"] == "APIResourceList"
    assert doc["groupVersion"] == "subresources.kubevirt.io/v1"
    verbs = {r["name"]: r["verbs"] for r in doc["resources"]}
    assert verbs == {
        "virtualmachineinstances/pause": ["update"],
        "virtualmachineinstances/unpause": ["update"],
        "virtualmachineinstances/softreboot": ["update"],
        "virtualmachineinstances/guestosinfo": ["get"],
        "virtualmachineinstances/userlist": ["get"],
        "virtualmachineinstances/filesystemlist": ["get"],
        "virtualmachineinstances/console": ["get"],
        "virtualmachineinstances/addvolume": ["update"],
        "virtualmachineinstances/removevolume": ["update"],
        "virtualmachineinstances/vnc": ["get"],
        "virtualmachineinstances/portforward": ["get"],
        "virtualmachineinstances/freeze": ["update"],
        "virtualmachineinstances/unfreeze": ["update"],
        "virtualmachineinstances/reset": ["update"],
        "virtualmachineinstances/backup": ["update"],
        "virtualmachineinstances/sev/fetchcertchain": ["get"],
        "virtualmachineinstances/sev/querylaunchmeasurement": ["get"],
        "virtualmachineinstances/sev/setupsession": ["update"],
        "virtualmachineinstances/sev/injectlaunchsecret": ["update"],
        "virtualmachines/start": ["update"],
        "virtualmachines/stop": ["update"],
        "virtualmachines/restart": ["update"],
        "virtualmachines/migrate": ["update"],
        "virtualmachines/addvolume": ["update"],
        "virtualmachines/removevolume": ["update"],
        "virtualmachines/portforward": ["get"],
        "virtualmachines/expand-spec": ["get"],
        "virtualmachines/memorydump": ["update"],
        "virtualmachines/removememorydump": ["update"],
        "expand-vm-spec": ["update"],
    }
    assert all(r["namespaced"] for r in doc["resources"])
    kinds = {r["name"].split("/")[0]: r["kind"] for r in doc["resources"] if "/" in r["name"]}
    assert kinds == {
        "virtualmachineinstances": "VirtualMachineInstance",
        "virtualmachines": "VirtualMachine",
    }


def test_group_documents_prefer_v1() -> None:
    """/apis and /apis/<group> name the group with v1 preferred."""
    group = discovery.api_group()
    assert group["kind"] == "APIGroup"
    assert group["name"] == "subresources.kubevirt.io"
    assert group["preferredVersion"]["groupVersion"] == "subresources.kubevirt.io/v1"
    groups = discovery.api_group_list()
    assert groups["kind"] == "APIGroupList"
    assert [g["name"] for g in groups["groups"]] == ["subresources.kubevirt.io"]


def test_version_info_has_a_git_version() -> None:
    """virtctl version reads gitVersion."""
    assert discovery.version_info()["gitVersion"].startswith("v")
