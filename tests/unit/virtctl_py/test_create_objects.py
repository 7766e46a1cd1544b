"""`create instancetype | preference | clone` and `create vm`'s instancetype/preference
inference write the YAML KubeVirt v1.8's virtctl writes (its flags, its defaults, its
errors), and what they write is admitted by kubevirt-py's admission."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
import yaml

from virt_api.admission.validate import validate
from virtctl_py import cli, objects
from virtctl_py.errors import CliError, Exit


def parse(*argv: str) -> argparse.Namespace:
    return cli.build().parse_args(list(argv))


def create(*argv: str) -> dict[str, Any]:
    args = parse("create", *argv)
    return dict(yaml.safe_load(objects.create(args, args.namespace)))


def test_create_instancetype() -> None:
    """A cluster instancetype by default; GPUs, host devices and the I/O threads policy
    as flagged; the manifest passes admission."""
    it = create(
        "instancetype", "--name", "big", "--cpu", "4", "--memory", "8Gi",
        "--gpu", "name:gpu1,devicename:nvidia.com/TU104", "--hostdevice", "name:h,devicename:d",
        "--iothreadspolicy", "shared",
    )  # fmt: skip
    assert it == {
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClusterInstancetype",
        "metadata": {"name": "big"},
        "spec": {
            "cpu": {"guest": 4},
            "memory": {"guest": "8Gi"},
            "gpus": [{"name": "gpu1", "deviceName": "nvidia.com/TU104"}],
            "hostDevices": [{"name": "h", "deviceName": "d"}],
            "ioThreadsPolicy": "shared",
        },
    }
    assert validate(it["kind"], it) == []


def test_create_namespaced_objects_and_random_names() -> None:
    """--namespaced or -n make the namespaced kinds; without --name a random one."""
    it = create("instancetype", "--cpu", "1", "--memory", "1Gi", "--namespaced")
    assert it["kind"] == "VirtualMachineInstancetype"
    assert it["metadata"]["name"].startswith("instancetype-")
    pref = create("preference", "-n", "team")
    assert pref["kind"] == "VirtualMachinePreference"
    assert pref["metadata"]["namespace"] == "team"
    assert create("preference")["metadata"]["name"].startswith("clusterpreference-")


def test_create_preference() -> None:
    """CPU topology, machine type and storage class as upstream's flags set them."""
    pref = create(
        "preference", "--name", "p", "--cpu-topology", "cores", "--machine-type", "q35",
        "--volume-storage-class", "local",
    )  # fmt: skip
    assert pref["spec"] == {
        "cpu": {"preferredCPUTopology": "cores"},
        "machine": {"preferredMachineType": "q35"},
        "volumes": {"preferredStorageClassName": "local"},
    }
    assert pref["kind"] == "VirtualMachineClusterPreference"
    assert validate(pref["kind"], pref) == []


def test_create_clone() -> None:
    """A clone of a snapshot into a VM, with filters, new MACs and a new SMBIOS serial."""
    clone = create(
        "clone", "--name", "c", "--source-name", "snap", "--source-type", "vmsnapshot",
        "--target-name", "vm2", "--label-filter", "*", "--label-filter", "!a/b",
        "--template-annotation-filter", "*", "--new-mac-address", "default:02-00-00-00-00-01",
        "--new-smbios-serial", "s1",
    )  # fmt: skip
    assert clone == {
        "apiVersion": "clone.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClone",
        "metadata": {"name": "c"},
        "spec": {
            "source": {
                "apiGroup": "snapshot.kubevirt.io", "kind": "VirtualMachineSnapshot", "name": "snap",
            },
            "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm2"},
            "labelFilters": ["*", "!a/b"],
            "template": {"annotationFilters": ["*"]},
            "newMacAddresses": {"default": "02-00-00-00-00-01"},
            "newSMBiosSerial": "s1",
        },
    }  # fmt: skip
    assert validate(clone["kind"], clone) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["instancetype", "--cpu", "0", "--memory", "1Gi"], "greater than zero", id="cpu"),
        pytest.param(["instancetype", "--cpu", "1", "--memory", "lots"], "quantities", id="memory"),
        pytest.param(
            ["instancetype", "--cpu", "1", "--memory", "1Gi", "--gpu", "name:g"],
            "deviceName must be specified", id="gpu",
        ),
        pytest.param(
            ["instancetype", "--cpu", "1", "--memory", "1Gi", "--iothreadspolicy", "dedicated"],
            "auto or shared", id="iothreads",
        ),
        pytest.param(["preference", "--cpu-topology", "diagonal"], "CPU topology", id="topology"),
        pytest.param(["clone", "--source-name", "a", "--target-type", "snapshot"],
                     "target type snapshot is not supported", id="target-type"),
        pytest.param(["clone", "--source-name", "a", "--new-mac-address", "a:b:c"],
                     "exactly one ':'", id="mac"),
        pytest.param(["vm", "--name", "v", "--volume-pvc", "src:d", "--memory", "1Gi",
                      "--instancetype", "u1.small"], "none of the others", id="exclusive"),
        pytest.param(["vm", "--name", "v", "--volume-containerdisk", "reg/i:v1",
                      "--infer-instancetype"], "works only with datasources", id="containerdisk"),
        pytest.param(["vm", "--name", "v", "--volume-pvc", "src:d", "--infer-preference-from",
                      "nope"], 'no volume with name "nope"', id="no-volume"),
    ],
)  # fmt: skip
def test_flag_errors(argv: list[str], message: str) -> None:
    """Bad flags: a usage error with upstream's message."""
    with pytest.raises(CliError, match=message) as caught:
        create(*argv)
    assert caught.value.code == Exit.USAGE


def test_create_vm_infers_from_the_boot_disk_by_default() -> None:
    """Without --instancetype/--preference both are inferred from the first boot disk (a
    claim), failures ignored; only the guest memory is left as the fallback."""
    vm = create("vm", "--name", "v", "--volume-pvc", "src:golden")
    spec = vm["spec"]
    for key in ("instancetype", "preference"):
        assert spec[key] == {"inferFromVolume": "v-pvc-0", "inferFromVolumeFailurePolicy": "Ignore"}
    assert spec["template"]["spec"]["domain"]["memory"] == {"guest": "128Mi"}
    assert "cpu" not in spec["template"]["spec"]["domain"]
    assert validate("VirtualMachine", vm) == []


def test_create_vm_explicit_inference() -> None:
    """--infer-instancetype-from VOLUME / --infer-preference: Reject policy (KubeVirt's
    default, so none written), and no memory fallback for the instancetype."""
    vm = create(
        "vm", "--name", "v", "--volume-containerdisk", "reg/i:v1,name:boot,bootorder:1",
        "--volume-pvc", "src:golden,name:data", "--infer-instancetype-from", "data",
        "--infer-preference-from", "data",
    )  # fmt: skip
    spec = vm["spec"]
    assert spec["instancetype"] == {"inferFromVolume": "data"}
    assert spec["preference"] == {"inferFromVolume": "data"}
    assert "memory" not in spec["template"]["spec"]["domain"]


def test_create_vm_inference_off_and_named_objects() -> None:
    """--infer-instancetype=false keeps the flags' sizing; a named instancetype and
    preference are written as [kind/]name (the README's tour)."""
    vm = create("vm", "--name", "v", "--volume-pvc", "src:d", "--infer-instancetype=false",
                "--infer-preference", "false")  # fmt: skip
    assert "instancetype" not in vm["spec"] and "preference" not in vm["spec"]
    assert vm["spec"]["template"]["spec"]["domain"]["cpu"] == {"cores": 1}
    vm = create("vm", "--name", "v", "--volume-containerdisk", "reg/i:v1", "--instancetype",
                "u1.small", "--preference", "alpine")  # fmt: skip
    assert vm["spec"]["instancetype"] == {
        "kind": "virtualmachineclusterinstancetype",
        "name": "u1.small",
    }
    assert vm["spec"]["preference"] == {"kind": "virtualmachineclusterpreference", "name": "alpine"}
